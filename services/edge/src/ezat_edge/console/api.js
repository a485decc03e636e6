// Every call the console makes: the admin API and /api/status, with the session cookie (sent by
// the browser) and the CSRF token kept in memory (docs/console.md, "Sign-in").
let csrf = null;

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function session() {
  const r = await fetch("/console/session", { credentials: "same-origin" });
  const body = await r.json();
  csrf = body.csrf || null;
  return Boolean(csrf);
}

export async function signIn(token) {
  const r = await fetch("/console/session", {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify({ token }),
  });
  const body = await r.json();
  if (!r.ok) throw new ApiError(r.status, body.error ? body.error.message : "sign-in failed");
  csrf = body.csrf;
}

// Ends the session on every edge (its cookie is refused from then on), so it sends the CSRF
// token as every other call does.
export async function signOut() {
  await fetch("/console/session", {
    method: "DELETE", credentials: "same-origin", headers: { "x-ezat-csrf": csrf || "" },
  });
  csrf = null;
}

function headers(json) {
  const h = { "x-ezat-csrf": csrf || "", "x-ezat-actor": "console" };
  if (json) h["content-type"] = "application/json";
  return h;
}

export async function raw(method, path, body) {
  const r = await fetch(path, {
    method, credentials: "same-origin", headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) {
    let message = `${method} ${path}: ${r.status}`;
    try { const e = await r.json(); if (e.error) message = e.error.message; } catch { /* not JSON */ }
    throw new ApiError(r.status, message);
  }
  return r;
}

export async function call(method, path, body) {
  const r = await raw(method, path, body);
  return r.status === 204 ? null : r.json();
}

export const get = (path) => call("GET", path);
export const admin = (method, path, body) => call(method, "/admin/v1" + path, body);

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v != null) q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

// GET /api/status: 503 (a degraded stack) carries the same body as 200.
export async function status() {
  const r = await fetch("/api/status", { credentials: "same-origin", headers: headers(false) });
  const body = await r.json();
  if (!r.ok && r.status !== 503) throw new ApiError(r.status, body.error ? body.error.message : String(r.status));
  return body;
}
