// Agents: each agent's profile and identity, its budget with what it has spent per
// window, its threads with their status and spending (and a thread's history, its
// events: GET /v1/threads/{id}/events), and the tools it may call.
import { Problem, call } from "./api.js";
import { el, fill, facts, when } from "./dom.js";

const WINDOWS = ["24h", "7d", "total"];
const THREADS_PAGE = 20;
const EVENTS_PAGE = 50;

// What an event says beyond its kind, in words (api/service/threadevents.py's fields).
function eventDetail(e) {
  switch (e.event) {
    case "created":
      return `by ${e.by}${e.schedule ? ` (schedule ${e.schedule})` : ""}`
        + (e.max_cost ? `, max cost ${e.max_cost} USD` : "");
    case "turn":
      return `turn ${e.turn} on revision ${e.revision}, profile ${e.profile}`;
    case "call":
      return `${e.tool}: ${e.effect} (decision ${e.seq})`
        + (e.charged ? `, ${e.charged} USD` : "") + (e.approval ? `, approval ${e.approval}` : "");
    case "approval":
      return `${e.tool}: ${e.status} by ${e.by || "someone"} (approval ${e.approval})`;
    case "cost":
      return `${e.charged} USD reported for decision ${e.seq} by ${e.by}`;
    case "status":
      return `${e.was} -> ${e.status} by ${e.by}`;
    default:
      return "";
  }
}

function money(value) {
  return value === null || value === undefined ? "—" : `${value} USD`;
}

// What `error` says, for a part of the page that could not be read.
function refusal(error) {
  return el("p", { class: "note refused" },
    `Not shown: ${error.message}${error.code ? ` (${error.code})` : ""}`);
}

function spendingTable(id, windows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, ["Window", "Spent", "Cap", "Remaining"].map((h) => el("th", {}, h)))),
    el("tbody", {}, WINDOWS.map((w) => {
      const row = (windows || {})[w] || {};
      return el("tr", { "data-window": w }, el("td", {}, w), el("td", {}, money(row.spent)),
        el("td", {}, row.cap === null || row.cap === undefined ? "no cap" : money(row.cap)),
        el("td", {}, money(row.remaining)));
    })));
}

export function agentsPage(root, who, session) {
  const list = el("ul", { id: "agent-list" });
  const detail = el("section", { id: "agent-detail", "aria-live": "polite" });
  const note = el("p", { class: "status", role: "status" }, "");
  root.append(el("h1", {}, "Agents"), note, el("div", { class: "split" }, list, detail));
  let shown = 0; // the latest agent opened; an older one's answers are dropped

  function failed(error) {
    if (error instanceof Problem && error.status === 401) return session.expired();
    note.textContent = `${error.message}${error.code ? ` (${error.code})` : ""}`;
  }

  async function spending(id) {
    try {
      const { body } = await call("GET", `/v1/agents/${encodeURIComponent(id)}/spending`);
      return spendingTable("agent-spending", body.windows);
    } catch (error) {
      if (error instanceof Problem && error.status === 401) throw error;
      return refusal(error);
    }
  }

  async function threadRow(thread) {
    let spent = "—";
    try {
      const path = `/v1/threads/${encodeURIComponent(thread.id)}/spending`;
      const { body } = await call("GET", path);
      const total = body.windows.total;
      spent = total.cap === null ? money(total.spent) : `${money(total.spent)} of ${money(total.cap)}`;
    } catch (error) {
      if (error instanceof Problem && error.status === 401) throw error;
      spent = `not shown (${error.code || error.message})`;
    }
    const history = el("button", { type: "button", class: "secondary history",
      onclick: () => showHistory(thread.id) }, "History");
    return el("tr", { "data-thread": thread.id },
      el("td", {}, el("code", {}, thread.id)), el("td", {}, thread.status),
      el("td", {}, thread.prompt), el("td", { class: "spent" }, spent),
      el("td", {}, when(thread.updated_at)), el("td", {}, history));
  }

  // A thread's history, oldest first, a page at a time, below the agent's threads.
  async function showHistory(threadId) {
    const box = detail.querySelector("#thread-history");
    if (!box) return;
    const ticket = shown;
    const body = el("tbody", {});
    const more = el("button", { type: "button", class: "secondary", id: "thread-events-more", hidden: true }, "More events");
    box.replaceChildren(
      el("h3", { tabindex: "-1" }, "History of thread ", el("code", {}, threadId)),
      el("table", { id: "thread-events", "data-thread": threadId },
        el("thead", {}, el("tr", {}, ["Time", "Event", "What"].map((h) => el("th", {}, h)))),
        body),
      more);
    box.querySelector("h3").focus();
    await paged(box, body, more, ticket, async (cursor) => {
      const query = new URLSearchParams({ limit: String(EVENTS_PAGE) });
      if (cursor) query.set("cursor", cursor);
      const path = `/v1/threads/${encodeURIComponent(threadId)}/events?${query}`;
      const { body: found } = await call("GET", path);
      const rows = (found.items || []).map((e) => el("tr", { "data-event": e.event },
        el("td", {}, when(e.at)), el("td", {}, e.event), el("td", {}, eventDetail(e))));
      return { rows, next: found.next_cursor };
    });
  }

  // A list read a page at a time into `body`: `fetch(cursor)` gives a page's rows and
  // the next cursor; `more` reads on; a refusal takes the place of `box`; `after` runs
  // once a page is in.
  function paged(box, body, more, ticket, fetch, after = () => {}) {
    let cursor = null;
    async function page() {
      more.disabled = true;
      try {
        const { rows, next } = await fetch(cursor);
        if (ticket !== shown) return;
        body.append(...rows);
        cursor = next || null;
        more.hidden = !cursor;
        after();
      } catch (error) {
        if (error instanceof Problem && error.status === 401) return session.expired();
        box.replaceChildren(refusal(error));
      } finally {
        more.disabled = false;
      }
    }
    more.addEventListener("click", page);
    return page();
  }

  // The agent's threads, a page at a time (newest listing order as the API gives it).
  function threads(id, ticket) {
    const body = el("tbody", {});
    const more = el("button", { type: "button", class: "secondary", id: "agent-threads-more", hidden: true }, "More threads");
    const box = el("div", { id: "agent-threads-box" },
      el("table", { id: "agent-threads" },
        el("thead", {}, el("tr", {}, ["Thread", "Status", "Prompt", "Spent (total)", "Updated", ""].map((h) => el("th", {}, h)))),
        body),
      more);
    const empty = el("p", { class: "note", id: "agent-no-threads", hidden: true }, "No threads.");
    box.append(empty);
    paged(box, body, more, ticket, async (cursor) => {
      const query = new URLSearchParams({ agent: id, limit: String(THREADS_PAGE) });
      if (cursor) query.set("cursor", cursor);
      const { body: found } = await call("GET", `/v1/threads?${query}`);
      return { rows: await Promise.all((found.items || []).map(threadRow)), next: found.next_cursor };
    }, () => { empty.hidden = body.children.length > 0; });
    return box;
  }

  async function open(id) {
    const ticket = ++shown;
    try {
      const { body: agent } = await call("GET", `/v1/agents/${encodeURIComponent(id)}`);
      const { body: listing } = await call("GET", `/v1/agents/${encodeURIComponent(id)}/tools`);
      const budget = await spending(id);
      if (ticket !== shown) return;
      const rows = (listing.tools || []).map((t) => el("tr", {},
        el("td", {}, t.tool), el("td", {}, t.status),
        el("td", {}, t.condition || ""),
        el("td", {}, (t.hooks || []).map((h) => `${h.name} (${h.kind})`).join(", "))));
      fill(detail,
        el("h2", { tabindex: "-1" }, agent.name || agent.id),
        facts([["Id", agent.id], ["Profile", agent.profile], ["Identity", agent.identity],
          ["Parent", agent.parent], ["Status", agent.status]]),
        el("h3", {}, "Budget"), budget,
        el("h3", {}, "Threads"), threads(id, ticket),
        el("section", { id: "thread-history", "aria-live": "polite" }),
        el("h3", {}, "Tools"),
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
  return { stop: () => { shown = -1; } };
}
