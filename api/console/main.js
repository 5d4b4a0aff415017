// The console's shell: the session (sign in, sign out), the navigation and the pages.
import { Problem, call, setCsrf } from "./api.js";
import { approvalsPage } from "./approvals.js";
import { logPage } from "./log.js";
import { agentsPage } from "./agents.js";
import { policyPage } from "./policy.js";
import { revisionsPage } from "./revisions.js";

const PAGES = {
  approvals: approvalsPage, log: logPage, agents: agentsPage, policy: policyPage,
  revisions: revisionsPage,
};
const $ = (id) => document.getElementById(id);
let who = null;
let shown = null; // the page on screen: { stop() }

function showSignIn(message) {
  who = null;
  setCsrf("");
  if (shown) shown.stop();
  shown = null;
  $("page").replaceChildren();
  $("page").hidden = true;
  $("nav").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
  $("token").focus();
}

function signedIn(session) {
  who = session;
  setCsrf(session.csrf);
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  $("sign-out").hidden = false;
  $("who").textContent = session.agent ? `agent ${session.agent}` : `${session.scope} token`;
  // (the playground and the revisions read policy text: an admin's, as uploading it is)
  for (const name of ["policy", "revisions"]) {
    document.querySelector(`#nav a[data-page=${name}]`).hidden = session.scope !== "admin";
  }
  route();
}

function route() {
  if (!who) return;
  const name = location.hash.replace(/^#/, "").split("/")[0] || "approvals";
  const make = PAGES[name] || PAGES.approvals;
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (shown) shown.stop();
  const root = $("page");
  root.replaceChildren();
  root.hidden = false;
  shown = make(root, who, { expired: () => showSignIn("The session ended: sign in again.") });
}

async function start() {
  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("token");
    const token = input.value;
    input.value = "";
    try {
      const { body } = await call("POST", "/console/session", { token });
      signedIn(body);
    } catch (error) {
      showSignIn(error instanceof Problem && error.status === 401
        ? "That token is not valid." : error.message);
    }
  });
  $("sign-out").addEventListener("click", async () => {
    try {
      await call("DELETE", "/console/session");
    } finally {
      showSignIn("Signed out.");
    }
  });
  window.addEventListener("hashchange", route);
  try {
    const { body } = await call("GET", "/console/session");
    signedIn(body);
  } catch {
    showSignIn("");
  }
}

start();
