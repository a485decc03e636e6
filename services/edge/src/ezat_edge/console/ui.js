// Small DOM helpers: elements are built, never parsed from strings (no markup injection).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

export const usd = (v) => "$" + Number(v || 0).toFixed(v && Math.abs(v) < 1 ? 6 : 2);
export const int = (v) => Number(v || 0).toLocaleString("en-US");
export const ms = (v) => (v == null ? "–" : Number(v).toFixed(1) + " ms");
export const when = (v) => (v ? String(v).replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "–");

export function table(label, columns, rows, empty = "Nothing yet.") {
  if (!rows.length) return h("p", { class: "muted" }, empty);
  const head = h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)));
  const body = rows.map((row) => h("tr", {}, columns.map((c) => {
    const v = c.cell ? c.cell(row) : row[c.key];
    return h("td", { class: c.num ? "num" : null }, v == null ? "–" : v);
  })));
  return h("div", { class: "scroll" }, h("table", { "aria-label": label }, h("thead", {}, head), h("tbody", {}, body)));
}

export function bar(used, limit, label) {
  if (limit == null) return h("span", { class: "muted" }, usd(used) + " (no budget)");
  const pct = limit > 0 ? Math.min(100, (used / limit) * 100) : 100;
  const span = h("span", {}); span.style.width = pct.toFixed(1) + "%";
  return h("span", {},
    h("span", { class: "bar" + (used >= limit ? " over" : ""), role: "progressbar", "aria-label": label,
      "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": pct.toFixed(0) }, span),
    " ", usd(used), " / ", usd(limit));
}

export function message(text, kind = "error") {
  return h("p", { class: kind, role: kind === "error" ? "alert" : "status" }, text);
}

export function field(label, input) {
  return h("label", {}, label, input);
}

const charts = new Set();
export function chart(title, type, labels, datasets, opts = {}) {
  const canvas = h("canvas", { role: "img", "aria-label": title });
  const box = h("div", { class: "card" }, h("h3", {}, title), h("div", { class: "chart" }, canvas));
  if (!window.Chart) return box;
  const c = new window.Chart(canvas, {
    type, data: { labels, datasets },
    options: { responsive: true, maintainAspectRatio: false, animation: false,
      interaction: { mode: "index", intersect: false },
      scales: { x: { ticks: { maxTicksLimit: 8 } }, y: { beginAtZero: true } }, ...opts },
  });
  charts.add(c);
  return box;
}

export function clearCharts() { for (const c of charts) c.destroy(); charts.clear(); }

export function monthStart() {
  const d = new Date();
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)).toISOString().replace(".000", "");
}
