// The console's shell: sign-in, the navigation and the page of the location's hash.
import * as api from "./api.js";
import { clearCharts, message } from "./ui.js";
import overview from "./overview.js";
import teams from "./teams.js";
import spend from "./spend.js";
import requests from "./requests.js";
import audit from "./audit.js";

const PAGES = { overview, teams, spend, requests, audit };
const $ = (id) => document.getElementById(id);

async function show() {
  const name = (location.hash || "#overview").slice(1).split("?")[0];
  const page = PAGES[name] || overview;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#" + name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  clearCharts();
  const root = $("page");
  root.replaceChildren();
  try {
    await page(root);
  } catch (e) {
    if (e.status === 401) return signedOut();
    root.append(message(e.message));
  }
}

function signedOut() {
  $("nav").hidden = true;
  $("page").replaceChildren();
  $("sign-in").hidden = false;
  $("token").focus();
}

function signedIn() {
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  show();
}

$("sign-in-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  $("sign-in-error").textContent = "";
  try {
    await api.signIn($("token").value);
    $("token").value = "";
    signedIn();
  } catch (e) {
    $("sign-in-error").textContent = e.message;
  }
});
$("sign-out").addEventListener("click", async () => { await api.signOut(); signedOut(); });
window.addEventListener("hashchange", () => { if (!$("nav").hidden) show(); });

(await api.session()) ? signedIn() : signedOut();
