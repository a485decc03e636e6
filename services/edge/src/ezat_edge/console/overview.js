// Overview: the traffic series of a window (GET /admin/v1/traffic), the deployments' health
// (GET /api/status) and the last failures (GET /admin/v1/requests).
import * as api from "./api.js";
import { chart, clearCharts, h, int, message, ms, table, usd, when } from "./ui.js";

const WINDOWS = { "1h": "last hour", "1d": "last day", "30d": "last 30 days" };
let current = "1h";

function label(at, window) {
  const d = new Date(at);
  if (window === "30d") return d.toISOString().slice(5, 10);
  return d.toISOString().slice(11, 16);
}

function stat(title, value) {
  return h("div", { class: "stat" }, h("div", { class: "v" }, value), h("div", { class: "l" }, title));
}

export default async function overview(root) {
  const picker = h("select", { id: "window", onchange: (e) => { current = e.target.value; clearCharts(); root.replaceChildren(); overview(root); } },
    Object.entries(WINDOWS).map(([k, v]) => h("option", { value: k, selected: k === current }, v)));
  const t = await api.admin("GET", "/traffic" + api.query({ window: current }));
  const seconds = t.bucket_seconds * t.data.length;
  const ttft = t.data.map((b) => b.ttft_p50_ms).filter((v) => v != null);
  const labels = t.data.map((b) => label(b.at, t.window));
  const p = (name) => t.data.map((b) => b[name]);
  root.append(
    h("h2", {}, "Overview"),
    h("div", { class: "card" }, h("label", { for: "window" }, "Window "), picker),
    h("div", { class: "stats", id: "totals" },
      stat("requests", int(t.totals.requests)),
      stat("requests/s", (t.totals.requests / seconds).toFixed(3)),
      stat("error rate", t.totals.requests ? ((100 * t.totals.errors) / t.totals.requests).toFixed(1) + " %" : "0 %"),
      stat("TTFT p50 (median of buckets)", ms(ttft.length ? ttft.sort((a, b) => a - b)[Math.floor(ttft.length / 2)] : null)),
      stat("tokens in / out", `${int(t.totals.input_tokens)} / ${int(t.totals.output_tokens)}`),
      stat("spend", usd(t.totals.cost_usd))),
    h("div", { class: "grid" },
      chart("Requests per second", "line", labels, [
        { label: "requests/s", data: p("requests").map((v) => v / t.bucket_seconds), borderColor: "#2456c7", pointRadius: 0 },
        { label: "errors/s", data: p("errors").map((v) => v / t.bucket_seconds), borderColor: "#b42318", pointRadius: 0 }]),
      chart("Error rate (%)", "line", labels, [
        { label: "error rate %", data: t.data.map((b) => (b.requests ? (100 * b.errors) / b.requests : 0)), borderColor: "#b42318", pointRadius: 0 }]),
      chart("Time to first token (ms)", "line", labels, [
        { label: "p50", data: p("ttft_p50_ms"), borderColor: "#137333", pointRadius: 2, spanGaps: true },
        { label: "p99", data: p("ttft_p99_ms"), borderColor: "#a15c00", pointRadius: 2, spanGaps: true }]),
      chart("Tokens", "bar", labels, [
        { label: "input", data: p("input_tokens"), backgroundColor: "#7aa2f7", stack: "t" },
        { label: "output", data: p("output_tokens"), backgroundColor: "#2456c7", stack: "t" }]),
      chart("Spend (USD)", "bar", labels, [{ label: "USD", data: p("cost_usd"), backgroundColor: "#137333" }])),
  );
  const health = h("div", { class: "card", id: "health" }, h("h3", {}, "Deployments"), h("p", { class: "muted" }, "Asking every router…"));
  const failures = h("div", { class: "card", id: "failures" }, h("h3", {}, "Last failures"));
  root.append(health, failures);
  deployments(health);
  lastFailures(failures);
}

const FAILURES = 10;
const STATES = { up: "good", cooling: "warn", half_open: "warn", open: "bad" };

async function deployments(box) {
  let s;
  try {
    s = await api.status();
  } catch (e) { box.replaceChildren(h("h3", {}, "Deployments"), message(e.message)); return; }
  const rows = Object.entries(s.deployments).map(([name, counts]) => ({ name, counts }));
  box.replaceChildren(h("h3", {}, "Deployments ", h("span", { class: "badge " + (s.status === "ok" ? "good" : "bad") }, "stack " + s.status)),
    table("Deployments", [
      { title: "deployment", key: "name" },
      { title: "router replicas by state", cell: (r) => Object.entries(r.counts).map(([state, n]) =>
        h("span", { class: "badge " + (STATES[state] || "") }, `${state === "open" ? "breaker open" : state === "cooling" ? "cooldown" : state} × ${n}`)) },
    ], rows, "No router has reported its deployments."));
}

// The last failures: the newest 4xx and 5xx entries of the log (its status classes), merged.
async function lastFailures(box) {
  let pages;
  try {
    pages = await Promise.all(["4xx", "5xx"].map((status) =>
      api.admin("GET", "/requests" + api.query({ status, limit: FAILURES }))));
  } catch (e) { box.append(message(e.message)); return; }
  const failed = pages.flatMap((p) => p.data).sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0)).slice(0, FAILURES);
  box.append(table("Last failures", [
    { title: "time", cell: (r) => when(r.at) },
    { title: "request id", cell: (r) => h("a", { href: "#requests?request_id=" + encodeURIComponent(r.request_id) }, r.request_id) },
    { title: "model", key: "model" }, { title: "status", key: "status", num: true },
    { title: "upstream", key: "upstream_status", num: true },
    { title: "reason", cell: (r) => [r.error_type, r.error_reason].filter(Boolean).join(": ") },
  ], failed, "No failed request in the log."));
}
