// Audit: the admin changes (GET /admin/v1/audit) and the chain's state (GET /admin/v1/audit/verify).
import * as api from "./api.js";
import { h, message, table, when } from "./ui.js";

const short = (v) => (v == null ? "–" : h("code", {}, JSON.stringify(v).slice(0, 200)));

export default async function audit(root) {
  const [check, log] = await Promise.all([api.admin("GET", "/audit/verify"), api.admin("GET", "/audit")]);
  const state = check.verified
    ? message(`Chain verified: ${check.entries} entries, last seq ${check.last_seq}.`, "ok")
    : message(`Chain broken at seq ${check.broken_seqs.join(", ")}: an entry was changed, deleted or inserted.`);
  state.id = "audit-state";
  const rows = [...log.data].reverse();
  root.append(h("h2", {}, "Audit"), h("div", { class: "card" }, state),
    h("div", { class: "card" }, table("Audit log", [
      { title: "seq", key: "seq", num: true }, { title: "time", cell: (r) => when(r.at) },
      { title: "actor", key: "actor" }, { title: "action", key: "action" }, { title: "target", cell: (r) => h("code", {}, r.target) },
      { title: "before", cell: (r) => short(r.before) }, { title: "after", cell: (r) => short(r.after) },
    ], rows, "No admin change yet.")));
}
