// Requests: the recent request log (GET /admin/v1/requests), filtered; a pasted request id
// answers "why did my request fail?".
import * as api from "./api.js";
import { field, h, int, message, ms, table, usd, when } from "./ui.js";

const FILTERS = [["request_id", "Request id"], ["key", "Key id"], ["team", "Team id"], ["model", "Model"], ["status", "Status"]];

export default async function requests(root) {
  const fromHash = new URLSearchParams(location.hash.split("?")[1] || "");
  const form = h("form", { class: "inline", "aria-label": "Filter the request log" },
    FILTERS.map(([k, title]) => field(title, h("input", { name: k, id: "req-" + k, value: fromHash.get(k) || "" }))),
    field("Limit", h("input", { name: "limit", id: "req-limit", type: "number", min: "1", max: "1000", value: fromHash.get("limit") || "100" })),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v) q.set(k, v.trim());
    location.hash = "#requests?" + q.toString();
  });
  root.append(h("h2", {}, "Requests"), h("div", { class: "card" }, form));
  const params = Object.fromEntries([...fromHash.entries()].filter(([, v]) => v));
  let log;
  try {
    log = await api.admin("GET", "/requests" + api.query({ limit: 100, ...params }));
  } catch (e) {
    root.append(message(e.status === 404 && !e.message.includes("request")
      ? "The request log is not available on this edge (GET /admin/v1/requests answered 404)."
      : e.message, e.status === 404 ? "warn" : "error"));
    return;
  }
  const cols = [
    { title: "time", cell: (r) => when(r.at) }, { title: "request id", cell: (r) => h("code", {}, r.request_id) },
    { title: "key", key: "key_id" }, { title: "team", key: "team_id" }, { title: "model", key: "model" },
    { title: "API", cell: (r) => r.api + (r.stream ? " (stream)" : "") },
    { title: "status", cell: (r) => h("span", { class: "badge " + (r.status >= 400 ? "bad" : "good") }, r.status) },
    { title: "upstream", key: "upstream_status", num: true },
    { title: "latency", cell: (r) => ms(r.latency_ms), num: true }, { title: "TTFT", cell: (r) => ms(r.ttft_ms), num: true },
    { title: "tokens in/out", cell: (r) => `${int(r.input_tokens)} / ${int(r.output_tokens)}`, num: true },
    { title: "cost", cell: (r) => usd(r.cost_usd), num: true },
    { title: "error", cell: (r) => [r.error_type, r.error_reason].filter(Boolean).join(": ") || "–" },
  ];
  root.append(h("div", { class: "card", id: "request-log" },
    table("Request log", cols, log.data, "No request matches."),
    log.has_more ? h("p", { class: "muted" }, "More entries match: narrow the filter or raise the limit.") : null));
}
