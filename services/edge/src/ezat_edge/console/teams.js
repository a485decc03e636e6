// Teams and keys: list, create, edit, rotate, revoke (the admin API's /teams and /keys); budget
// use this month from GET /admin/v1/spend.
import * as api from "./api.js";
import { bar, field, h, message, monthStart, table, when } from "./ui.js";

const list = (v) => (v ? v.split(",").map((s) => s.trim()).filter(Boolean) : null);
const num = (v) => (v === "" ? null : Number(v));

function input(name, attrs = {}) {
  return h("input", { name, id: attrs.id || name, ...attrs });
}

// A form's fields as the admin API takes them; an empty field is left out (create) or null (edit).
function values(form, edit) {
  const f = new FormData(form);
  const out = {};
  for (const [k, v] of f.entries()) {
    if (v === "" && !edit) continue;
    if (k === "models") out[k] = list(v);
    else if (["rpm", "tpm", "budget_usd"].includes(k)) out[k] = num(v);
    else if (k === "expires_at") out[k] = v === "" ? null : new Date(v).toISOString().replace(".000", "");
    else out[k] = v === "" ? null : v;
  }
  return out;
}

async function spendBy(group) {
  const r = await api.admin("GET", "/spend" + api.query({ group_by: group, since: monthStart() }));
  return Object.fromEntries(r.data.map((row) => [row[group], row.cost_usd]));
}

function secretBox(root, made, verb) {
  const secret = h("code", { class: "secret", id: "new-secret" }, made.key);
  const copy = h("button", { type: "button", class: "secondary", onclick: async () => {
    try { await navigator.clipboard.writeText(made.key); copy.textContent = "Copied"; } catch { copy.textContent = "Copy failed: select the text"; }
  } }, "Copy");
  root.prepend(h("div", { class: "card", role: "status", id: "secret-box" },
    h("p", {}, `Key ${made.name} (${made.id}) ${verb}. Its secret is shown this once: copy it now.`),
    secret, " ", copy));
}

function editDialog(kind, item, reload) {
  const form = h("form", { method: "dialog", class: "narrow" },
    h("h3", {}, `Edit ${kind} ${item.name}`),
    field("Models (comma-separated; empty for all)", input("models", { id: "edit-models", value: (item.models || []).join(",") })),
    field("Requests per minute", input("rpm", { id: "edit-rpm", type: "number", min: "1", value: item.rpm ?? "" })),
    field("Tokens per minute", input("tpm", { id: "edit-tpm", type: "number", min: "1", value: item.tpm ?? "" })),
    field("Monthly budget (USD)", input("budget_usd", { id: "edit-budget", type: "number", step: "0.01", min: "0", value: item.budget_usd ?? "" })),
    kind === "key" ? field("Expires at (UTC)", input("expires_at", { id: "edit-expires", type: "datetime-local", value: item.expires_at ? item.expires_at.slice(0, 16) : "" })) : null,
    h("p", { class: "error", role: "alert" }),
    h("div", {}, h("button", { type: "submit" }, "Save"), " ", h("button", { type: "button", class: "secondary", onclick: () => dlg.close() }, "Cancel")));
  const dlg = h("dialog", { "aria-label": `Edit ${kind}` }, form);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = values(form, true);
    if (body.expires_at) body.expires_at = new Date(form.expires_at.value + "Z").toISOString().replace(".000", "");
    try { await api.admin("PATCH", `/${kind}s/${item.id}`, body); dlg.close(); dlg.remove(); reload(); }
    catch (e) { form.querySelector(".error").textContent = e.message; }
  });
  document.body.append(dlg);
  dlg.showModal();
}

export default async function teams(root) {
  const reload = () => { root.replaceChildren(); teams(root); };
  const [t, k, teamSpend, keySpend] = await Promise.all([
    api.admin("GET", "/teams"), api.admin("GET", "/keys"), spendBy("team"), spendBy("key")]);
  const teamNames = Object.fromEntries(t.data.map((x) => [x.id, x.name]));
  const note = h("div", { id: "teams-note" });

  const teamForm = h("form", { class: "inline", "aria-label": "New team" },
    field("Name", input("name", { id: "team-name", required: true })),
    field("Models", input("models", { id: "team-models", placeholder: "all" })),
    field("RPM", input("rpm", { id: "team-rpm", type: "number", min: "1" })),
    field("TPM", input("tpm", { id: "team-tpm", type: "number", min: "1" })),
    field("Budget USD/month", input("budget_usd", { id: "team-budget", type: "number", step: "0.01", min: "0" })),
    h("button", { type: "submit" }, "Create team"));
  teamForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try { await api.admin("POST", "/teams", values(teamForm)); reload(); }
    catch (e) { note.replaceChildren(message(e.message)); }
  });

  const keyForm = h("form", { class: "inline", "aria-label": "New key" },
    field("Name", input("name", { id: "key-name", required: true })),
    field("Team", h("select", { name: "team", id: "key-team" }, h("option", { value: "" }, "(none)"),
      t.data.map((x) => h("option", { value: x.id }, x.name)))),
    field("User", input("user", { id: "key-user" })),
    field("Models", input("models", { id: "key-models", placeholder: "all" })),
    field("RPM", input("rpm", { id: "key-rpm", type: "number", min: "1" })),
    field("TPM", input("tpm", { id: "key-tpm", type: "number", min: "1" })),
    field("Budget USD/month", input("budget_usd", { id: "key-budget", type: "number", step: "0.01", min: "0" })),
    field("Expires (UTC)", input("expires_at", { id: "key-expires", type: "datetime-local" })),
    h("button", { type: "submit" }, "Create key"));
  keyForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = values(keyForm);
    if (body.expires_at) body.expires_at = new Date(keyForm.expires_at.value + "Z").toISOString().replace(".000", "");
    try { const made = await api.admin("POST", "/keys", body); reload(); await Promise.resolve(); secretBox(root, made, "created"); }
    catch (e) { note.replaceChildren(message(e.message)); }
  });

  const act = (label, cls, fn) => h("button", { type: "button", class: cls, onclick: fn }, label);
  const teamRows = table("Teams", [
    { title: "name", key: "name" }, { title: "id", cell: (r) => h("code", {}, r.id) },
    { title: "models", cell: (r) => (r.models ? r.models.join(", ") : "all") },
    { title: "RPM", key: "rpm", num: true }, { title: "TPM", key: "tpm", num: true },
    { title: "budget this month", cell: (r) => bar(teamSpend[r.id] || 0, r.budget_usd, `budget use of team ${r.name}`) },
    { title: "actions", cell: (r) => [act("Edit", "secondary", () => editDialog("team", r, reload)), " ",
      act("Delete", "danger", async () => {
        if (!confirm(`Delete team ${r.name}?`)) return;
        try { await api.admin("DELETE", `/teams/${r.id}`); reload(); } catch (e) { note.replaceChildren(message(e.message)); }
      })] },
  ], t.data, "No team yet.");

  const keyRows = table("Keys", [
    { title: "name", key: "name" }, { title: "id", cell: (r) => h("code", {}, r.id) },
    { title: "prefix", cell: (r) => h("code", {}, r.prefix) },
    { title: "team", cell: (r) => (r.team ? teamNames[r.team] || r.team : "–") }, { title: "user", key: "user" },
    { title: "models", cell: (r) => (r.models ? r.models.join(", ") : "all") },
    { title: "RPM", key: "rpm", num: true }, { title: "TPM", key: "tpm", num: true },
    { title: "budget this month", cell: (r) => bar(keySpend[r.id] || 0, r.budget_usd, `budget use of key ${r.name}`) },
    { title: "expires", cell: (r) => when(r.expires_at) },
    { title: "state", cell: (r) => (r.revoked_at ? h("span", { class: "badge bad" }, "revoked") : h("span", { class: "badge good" }, "active")) },
    { title: "actions", cell: (r) => (r.revoked_at ? "" : [
      act("Edit", "secondary", () => editDialog("key", r, reload)), " ",
      act("Rotate", "secondary", async () => {
        try { const made = await api.admin("POST", `/keys/${r.id}/rotate`, {}); reload(); secretBox(root, made, "rotated"); }
        catch (e) { note.replaceChildren(message(e.message)); }
      }), " ",
      h("button", { type: "button", class: "danger", "aria-label": `Revoke key ${r.name}`, "data-key": r.id, onclick: async () => {
        if (!confirm(`Revoke key ${r.name}? Requests with it are refused from now on.`)) return;
        try { await api.admin("POST", `/keys/${r.id}/revoke`, {}); reload(); } catch (e) { note.replaceChildren(message(e.message)); }
      } }, "Revoke")]) },
  ], k.data, "No key yet.");

  root.append(h("h2", {}, "Teams and keys"), note,
    h("div", { class: "card" }, h("h3", {}, "New team"), teamForm),
    h("div", { class: "card" }, h("h3", {}, "Teams"), teamRows),
    h("div", { class: "card" }, h("h3", {}, "New key"), keyForm),
    h("div", { class: "card" }, h("h3", {}, "Keys"), keyRows));
}
