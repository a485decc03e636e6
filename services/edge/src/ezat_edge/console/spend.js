// Spend: GET /admin/v1/spend grouped as asked, a chart of the first group, the CSV download.
import * as api from "./api.js";
import { chart, field, h, int, message, table, usd } from "./ui.js";

const GROUPS = ["team", "key", "user", "model", "tag", "day"];
let chosen = ["team", "model"];
let since = "";
let until = "";

const iso = (v) => (v ? new Date(v + "Z").toISOString().replace(".000", "") : "");

export default async function spend(root) {
  const params = () => ({ group_by: chosen.join(","), since: iso(since), until: iso(until) });
  const form = h("form", { class: "inline", "aria-label": "Spend report" },
    h("fieldset", {}, h("legend", {}, "Group by"),
      GROUPS.map((g) => h("label", { class: "check" },
        h("input", { type: "checkbox", name: "group", value: g, id: "group-" + g, checked: chosen.includes(g) }), " " + g))),
    field("Since (UTC)", h("input", { type: "datetime-local", id: "spend-since", value: since })),
    field("Until (UTC)", h("input", { type: "datetime-local", id: "spend-until", value: until })),
    h("button", { type: "submit" }, "Show"),
    h("button", { type: "button", id: "spend-csv", class: "secondary", onclick: download }, "Download CSV"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    chosen = [...form.querySelectorAll("input[name=group]:checked")].map((i) => i.value);
    since = form.querySelector("#spend-since").value;
    until = form.querySelector("#spend-until").value;
    root.replaceChildren();
    spend(root);
  });

  async function download() {
    try {
      const r = await api.raw("GET", "/admin/v1/spend" + api.query({ ...params(), format: "csv" }));
      const url = URL.createObjectURL(await r.blob());
      const a = h("a", { href: url, download: `ezat-spend-${chosen.join("-") || "total"}.csv` });
      document.body.append(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (e) { root.append(message(e.message)); }
  }

  const report = await api.admin("GET", "/spend" + api.query(params()));
  const rows = report.data;
  const total = rows.reduce((s, r) => s + r.cost_usd, 0);
  const label = (r) => chosen.map((g) => r[g] || "(none)").join(" · ") || "total";
  const cols = [
    ...chosen.map((g) => ({ title: g, cell: (r) => (r[g] === "" ? "(none)" : r[g]) })),
    { title: "requests", cell: (r) => int(r.requests), num: true },
    { title: "input tokens", cell: (r) => int(r.input_tokens), num: true },
    { title: "cache read", cell: (r) => int(r.cache_read_tokens), num: true },
    { title: "cache write", cell: (r) => int(r.cache_write_tokens), num: true },
    { title: "output tokens", cell: (r) => int(r.output_tokens), num: true },
    { title: "cost", cell: (r) => usd(r.cost_usd), num: true },
  ];
  const top = [...rows].sort((a, b) => b.cost_usd - a.cost_usd).slice(0, 30);
  root.append(h("h2", {}, "Spend"), h("div", { class: "card" }, form),
    h("p", { id: "spend-total" }, "Total: ", h("strong", {}, usd(total)), ` over ${rows.length} group(s)`),
    chart("Spend by " + (chosen.join(", ") || "total") + " (USD, top 30)", "bar", top.map(label),
      [{ label: "USD", data: top.map((r) => r.cost_usd), backgroundColor: "#137333" }]),
    h("div", { class: "card", id: "spend-table" }, table("Spend", cols, rows, "No charged request in this range.")));
}
