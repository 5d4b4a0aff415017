// Approvals: the pending ones, live from the event stream, each with its agent, tool,
// arguments (secrets redacted by the server), hook and reasons, and what it would spend
// beside the agent's remaining budget; approve, or reject with a reason; the outcome
// shown on the card, refusals as they are.
import { Problem, call } from "./api.js";
import { el, effect, facts, pretty, reasonList, when } from "./dom.js";

const REFUSALS = {
  "self-approval": "Refused: a call cannot be approved by the agent that made it.",
  "approval-not-pending": "Already decided elsewhere.",
  "denied-by-policy": "Refused by this token's policy.",
  "insufficient-scope": "This token may not do that.",
};

export function approvalsPage(root, who, session) {
  const cards = new Map(); // approval id -> { node, approval }
  const status = el("p", { class: "status", id: "stream-status" }, "connecting…");
  const pending = el("div", { class: "cards", id: "pending" });
  const decided = el("div", { class: "cards", id: "decided" });
  const empty = el("p", { class: "note", id: "none-pending" }, "Nothing waits for a decision.");
  root.append(
    el("h1", {}, "Approvals"), status,
    el("h2", {}, "Pending"), empty, pending,
    el("h2", {}, "Decided while this page was open"), decided,
  );

  function refreshEmpty() {
    empty.hidden = pending.children.length > 0;
  }

  function hookOf(approval) {
    const paused = (approval.reasons || []).filter((r) => r.hook);
    return paused.map((r) => r.hook).join(", ");
  }

  // A card's two notes: the refusal of what was tried on it, and its decision.
  function outcome(node, text, refused) {
    const kind = refused ? "refused" : "final";
    let box = node.querySelector(`.outcome.${kind}`);
    if (!box) {
      box = el("div", { class: `outcome ${kind}`, role: "status" });
      node.append(box);
    }
    box.replaceChildren(el("div", {}, text));
  }

  function finalText(approval, decision) {
    const made = decision || approval.final;
    if (approval.status === "rejected") {
      return [`Rejected by ${approval.decided_by || "someone"}`,
        approval.reason ? `: ${approval.reason}` : "", "."];
    }
    if (approval.status === "approved" && made) {
      return ["Approved by ", approval.decided_by || "someone", "; the re-check decided ",
        effect(made.effect), ".", reasonList(made.reasons)];
    }
    return [`Status: ${approval.status}.`];
  }

  // What the paused call would spend, beside what the agent has left in each window
  // with a cap and, for a call of a thread, the thread's `max_cost` and what the thread
  // has spent (each read when the card is made; a token that may not read one sees why).
  function budgetBox(approval) {
    const cost = approval.expected_cost;
    const box = el("dl", { class: "facts budget" },
      el("dt", {}, "Would spend"),
      el("dd", { class: "cost" }, cost === null || cost === undefined ? "no expected cost given" : `${cost} USD`));
    (async () => {
      try {
        const path = `/v1/agents/${encodeURIComponent(approval.agent)}/spending`;
        const { body } = await call("GET", path);
        const capped = ["24h", "7d", "total"].filter((w) => body.windows[w] && body.windows[w].cap !== null);
        box.append(el("dt", {}, "Agent's remaining"), el("dd", { class: "remaining" },
          capped.length
            ? capped.map((w) => `${body.windows[w].remaining} USD of ${body.windows[w].cap} USD (${w})`).join("; ")
            : "no cap"));
      } catch (error) {
        if (error instanceof Problem && error.status === 401) return;
        box.append(el("dt", {}, "Agent's remaining"),
          el("dd", { class: "remaining" }, `not shown (${error.code || error.message})`));
      }
      if (approval.thread) box.append(...await threadBudget(approval.thread));
    })();
    return box;
  }

  // The thread's own cap (`max_cost`, its `total` window) and what the thread has spent.
  async function threadBudget(thread) {
    const label = el("dt", {}, "Thread's max cost");
    try {
      const { body } = await call("GET", `/v1/threads/${encodeURIComponent(thread)}/spending`);
      const total = body.windows.total;
      const spent = total.spent === null ? "more than can be counted" : `${total.spent} USD`;
      return [label, el("dd", { class: "thread-cost" }, total.cap === null
        ? `none (the thread has spent ${spent})`
        : `${total.cap} USD: the thread has spent ${spent}, ${total.remaining} USD left`)];
    } catch (error) {
      if (error instanceof Problem && error.status === 401) return [];
      return [label, el("dd", { class: "thread-cost" }, `not shown (${error.code || error.message})`)];
    }
  }

  function card(approval) {
    const reason = el("input", { type: "text", "aria-label": "Reason", placeholder: "reason",
      name: "reason", maxlength: 1000 });
    const approve = el("button", { type: "button", class: "approve" }, "Approve");
    const reject = el("button", { type: "button", class: "danger reject" }, "Reject");
    const actions = el("div", { class: "actions" },
      el("div", { class: "reason" }, el("label", {}, "Reason (for a rejection)"), reason),
      approve, reject);
    const node = el("article", { class: "card", "data-id": approval.id, tabindex: "-1" },
      el("h3", {}, `${approval.agent} → ${approval.tool}`),
      facts([
        ["Agent", approval.agent], ["Tool", approval.tool], ["Hook", hookOf(approval)],
        ["Opened", when(approval.created_at)], ["Thread", approval.thread],
        ["Revision", String(approval.revision)], ["Approval", approval.id],
      ]),
      el("label", {}, "Budget"), budgetBox(approval),
      el("label", {}, "Arguments"), el("pre", { class: "args" }, pretty(approval.args)),
      el("label", {}, "Reasons"), reasonList(approval.reasons),
      actions);

    async function decide(kind) {
      approve.disabled = reject.disabled = true;
      const before = node.querySelector(".outcome.refused");
      if (before) before.remove();
      try {
        const path = `/v1/approvals/${encodeURIComponent(approval.id)}/${kind}`;
        const { status, body } = await call("POST", path,
          kind === "reject" ? { reason: reason.value } : undefined);
        if (status === 202) {
          outcome(node, "This token's own policy paused the request: it waits for a person.");
          return;
        }
        settle(body.approval, body.decision);
      } catch (error) {
        if (error instanceof Problem && error.status === 401) return session.expired();
        const known = error instanceof Problem ? REFUSALS[error.code] : null;
        outcome(node, [known ? `${known} ` : "", error.message,
          error.code ? ` (${error.code})` : ""], true);
        if (error instanceof Problem && error.code === "approval-not-pending") {
          reload(approval.id);
        } else {
          approve.disabled = reject.disabled = false;
        }
      }
    }
    approve.addEventListener("click", () => decide("approve"));
    reject.addEventListener("click", () => decide("reject"));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter") decide("reject");
    });
    return node;
  }

  function add(approval) {
    if (cards.has(approval.id)) return;
    const node = card(approval);
    cards.set(approval.id, { node, approval });
    pending.prepend(node);
    refreshEmpty();
  }

  function settle(approval, decision) {
    const known = cards.get(approval.id);
    if (approval.status === "pending") return;
    const node = known ? known.node : card(approval);
    cards.set(approval.id, { node, approval });
    node.classList.add("decided", approval.status);
    const actions = node.querySelector(".actions");
    if (actions) actions.remove();
    outcome(node, finalText(approval, decision));
    decided.prepend(node);
    refreshEmpty();
  }

  async function reload(id) {
    try {
      const { body } = await call("GET", `/v1/approvals/${encodeURIComponent(id)}`);
      settle(body);
    } catch {
      // (the stream tells of it too)
    }
  }

  async function listPending() {
    let cursor = null;
    try {
      for (let page = 0; page < 20; page++) {
        const query = new URLSearchParams({ status: "pending", limit: "100" });
        if (cursor) query.set("cursor", cursor);
        const { status: code, body } = await call("GET", `/v1/approvals?${query}`);
        if (code === 202) {
          status.textContent = "This token's policy paused the listing: it waits for a person.";
          return;
        }
        for (const approval of body.items) add(approval);
        cursor = body.next_cursor;
        if (!cursor) break;
      }
    } catch (error) {
      if (error instanceof Problem && error.status === 401) return session.expired();
      status.textContent = `Cannot list approvals: ${error.message}`;
    }
  }

  const stream = new EventSource("/v1/approvals/events");
  stream.addEventListener("ready", () => {
    status.textContent = "live";
    status.className = "status live";
    listPending();
  });
  stream.addEventListener("reset", () => listPending());
  stream.addEventListener("approval.opened", (event) => add(JSON.parse(event.data)));
  stream.addEventListener("approval.decided", (event) => settle(JSON.parse(event.data)));
  stream.addEventListener("open", () => {
    status.textContent = "live";
    status.className = "status live";
  });
  stream.addEventListener("error", async () => {
    status.className = "status";
    status.textContent = "disconnected: reconnecting…";
    if (stream.readyState === EventSource.CLOSED) {
      try {
        await call("GET", "/console/session");
        status.textContent = "the event stream was refused for this token";
      } catch {
        session.expired();
      }
    }
  });
  refreshEmpty();
  return { stop: () => stream.close() };
}
