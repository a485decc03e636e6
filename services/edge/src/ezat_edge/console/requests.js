// Requests: the recent request log (GET /admin/v1/requests), filtered; a pasted request id
// answers "why did my request fail?". Only the entry's fields are shown (the log holds no prompt
// or completion text, no secret).
import * as api from "./api.js";
import { field, h, int, message, ms, table, usd, when } from "./ui.js";

const FILTERS = [["request_id", "Request id"], ["key", "Key id"], ["team", "Team id"], ["model", "Model"]];
const STATUSES = ["4xx", "5xx", "2xx", "400", "401", "403", "404", "429", "499", "500", "502", "503", "529"];

const error = (r) => [r.error_type, r.error_reason].filter(Boolean).join(": ") || "–";
const status = (r) => h("span", { class: "badge " + (r.status >= 400 ? "bad" : "good") }, r.status);

// One request's answer, field by field: what a user who pasted its id asks about.
function detail(r) {
  const rows = [
    ["Status", status(r)], ["Error type", r.error_type || "–"], ["Reason", r.error_reason || "–"],
    ["Upstream status", r.upstream_status ?? "– (no deployment answered)"],
    ["Time", when(r.at)], ["Key", r.key_id || "– (no valid key)"], ["Team", r.team_id || "–"],
    ["Model", r.model || "–"], ["API", r.api + (r.stream ? " (stream)" : "")],
    ["Latency", ms(r.latency_ms)], ["Time to first token", ms(r.ttft_ms)],
    ["Tokens in / out", `${int(r.input_tokens)} / ${int(r.output_tokens)}`], ["Cost", usd(r.cost_usd)],
  ];
  return h("div", { class: "card", id: "request-detail", role: "region", "aria-label": "Request " + r.request_id },
    h("h3", {}, "Request ", h("code", {}, r.request_id)),
    h("dl", { class: "pairs" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
}

export default async function requests(root) {
  const fromHash = new URLSearchParams(location.hash.split("?")[1] || "");
  const form = h("form", { class: "inline", "aria-label": "Filter the request log" },
    FILTERS.map(([k, title]) => field(title, h("input", { name: k, id: "req-" + k, value: fromHash.get(k) || "" }))),
    field("Status", h("input", { name: "status", id: "req-status", list: "req-statuses", placeholder: "429 or 5xx", value: fromHash.get("status") || "" })),
    h("datalist", { id: "req-statuses" }, STATUSES.map((s) => h("option", { value: s }))),
    field("Limit", h("input", { name: "limit", id: "req-limit", type: "number", min: "1", max: "1000", value: fromHash.get("limit") || "100" })),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v.trim()) q.set(k, v.trim());
    location.hash = "#requests?" + q.toString();
  });
  root.append(h("h2", {}, "Requests"), h("div", { class: "card" }, form));
  const params = Object.fromEntries([...fromHash.entries()].filter(([, v]) => v));
  let log;
  try {
    log = await api.admin("GET", "/requests" + api.query({ limit: 100, ...params }));
  } catch (e) { root.append(message(e.message)); return; }
  if (params.request_id) {
    root.append(log.data.length ? detail(log.data[0]) : message(
      `No request ${params.request_id} in the log: the id is wrong, the request is older than the log keeps, or it is not yet written (an edge writes every 0.1 s).`, "warn"));
  }
  const cols = [
    { title: "time", cell: (r) => when(r.at) }, { title: "request id", cell: (r) => h("code", {}, r.request_id) },
    { title: "key", key: "key_id" }, { title: "team", key: "team_id" }, { title: "model", key: "model" },
    { title: "API", cell: (r) => r.api + (r.stream ? " (stream)" : "") },
    { title: "status", cell: status },
    { title: "upstream", key: "upstream_status", num: true },
    { title: "latency", cell: (r) => ms(r.latency_ms), num: true }, { title: "TTFT", cell: (r) => ms(r.ttft_ms), num: true },
    { title: "tokens in/out", cell: (r) => `${int(r.input_tokens)} / ${int(r.output_tokens)}`, num: true },
    { title: "cost", cell: (r) => usd(r.cost_usd), num: true },
    { title: "error", cell: error },
  ];
  root.append(h("div", { class: "card", id: "request-log" },
    table("Request log", cols, log.data, "No request matches."),
    log.has_more ? h("p", { class: "muted" }, "More entries match: narrow the filter or raise the limit.") : null));
}
