// Agents: each agent's profile and identity, and the tools it may call.
import { Problem, call } from "./api.js";
import { el, fill, facts } from "./dom.js";

export function agentsPage(root, who, session) {
  const list = el("ul", { id: "agent-list" });
  const detail = el("section", { id: "agent-detail", "aria-live": "polite" });
  const note = el("p", { class: "status", role: "status" }, "");
  root.append(el("h1", {}, "Agents"), note, el("div", { class: "split" }, list, detail));

  function failed(error) {
    if (error instanceof Problem && error.status === 401) return session.expired();
    note.textContent = `${error.message}${error.code ? ` (${error.code})` : ""}`;
  }

  async function open(id) {
    try {
      const { body: agent } = await call("GET", `/v1/agents/${encodeURIComponent(id)}`);
      const { body: listing } = await call("GET", `/v1/agents/${encodeURIComponent(id)}/tools`);
      const rows = (listing.tools || []).map((t) => el("tr", {},
        el("td", {}, t.tool), el("td", {}, t.status),
        el("td", {}, t.condition || ""),
        el("td", {}, (t.hooks || []).map((h) => `${h.name} (${h.kind})`).join(", "))));
      fill(detail,
        el("h2", { tabindex: "-1" }, agent.name || agent.id),
        facts([["Id", agent.id], ["Profile", agent.profile], ["Identity", agent.identity],
          ["Parent", agent.parent], ["Status", agent.status]]),
        el("label", {}, "Tools"),
        el("table", { id: "agent-tools" },
          el("thead", {}, el("tr", {}, ["Tool", "Access", "When", "Hooks"].map((h) => el("th", {}, h)))),
          el("tbody", {}, rows)),
      );
      detail.querySelector("h2").focus();
    } catch (error) {
      failed(error);
    }
  }

  (async () => {
    try {
      const { body } = await call("GET", "/v1/agents?limit=100");
      list.replaceChildren(...(body.items || []).map((a) => el("li", {},
        el("button", { type: "button", class: "secondary", onclick: () => open(a.id) },
          `${a.id} (${a.profile})`))));
      if (!(body.items || []).length) note.textContent = "No agents.";
    } catch (error) {
      failed(error);
    }
  })();
  return { stop: () => {} };
}
