// Revisions: the policy's history, newest first, and a revision's semantic diff against
// the one before it (GET /v1/revisions/{n}/diff): per profile, what widened or narrowed.
import { Problem, call } from "./api.js";
import { el, facts, fill, pretty, when } from "./dom.js";

const PAGES = 20; // pages of the history read at most (100 revisions each)

function changeItem(change) {
  const where = change.location ? el("span", { class: "where" }, change.location) : null;
  return el("li", { class: `change ${change.direction}`, "data-kind": change.kind },
    el("span", { class: `direction ${change.direction}` }, change.direction),
    " ", el("span", { class: "kind" }, change.kind), " ", change.message, where,
    change.counterexample
      ? el("details", {}, el("summary", {}, "A call that differs"),
        el("pre", {}, pretty(change.counterexample)))
      : null);
}

export function diffView(answer) {
  const base = answer.against === 0 ? "the empty policy" : `revision ${answer.against}`;
  const byProfile = new Map();
  for (const change of answer.changes) {
    if (!byProfile.has(change.profile)) byProfile.set(change.profile, []);
    byProfile.get(change.profile).push(change);
  }
  const count = (d) => answer.changes.filter((c) => c.direction === d).length;
  const summary = answer.changes.length
    ? `${count("wider")} wider, ${count("narrower")} narrower, ${count("unknown")} undecided`
    : "No access changed.";
  return [
    el("h2", { tabindex: "-1" }, `Revision ${answer.revision} against ${base}`),
    el("p", { id: "rev-diff-summary", class: "status" }, summary),
    [...byProfile.entries()].map(([profile, changes]) => el("section", {
      class: "profile-diff", "data-profile": profile },
    el("h3", {}, `Profile ${profile}`),
    el("ul", { class: "changes" }, changes.map(changeItem)))),
  ];
}

export function revisionsPage(root, who, session) {
  const list = el("table", { id: "rev-list" });
  const detail = el("section", { id: "rev-diff", "aria-live": "polite" });
  const note = el("p", { class: "status", role: "status", id: "rev-status" }, "Loading the revisions…");
  root.append(el("h1", {}, "Revisions"), note,
    el("div", { class: "split" }, el("div", { class: "scroll" }, list), detail));
  let asked = 0;
  let stopped = false;

  function failed(error, where) {
    if (error instanceof Problem && error.status === 401) return session.expired();
    where.textContent = `${error.message}${error.code ? ` (${error.code})` : ""}`;
  }

  async function open(revision) {
    const ticket = ++asked;
    fill(detail, el("p", { class: "status" }, `Comparing revision ${revision.revision} with the one before…`));
    try {
      const { body } = await call("GET", `/v1/revisions/${revision.revision}/diff`);
      if (ticket !== asked || stopped) return;
      fill(detail,
        facts([["Author", revision.author], ["Note", revision.note], ["Uploaded", when(revision.created_at)],
          ["Files", revision.files.join(", ")]]),
        diffView(body));
      detail.querySelector("h2").focus();
    } catch (error) {
      if (ticket !== asked || stopped) return;
      const shown = el("p", { class: "error" });
      fill(detail, shown);
      failed(error, shown);
    }
  }

  (async () => {
    try {
      const found = [];
      let cursor = null;
      for (let page = 0; page < PAGES; page += 1) {
        const query = new URLSearchParams({ limit: "100" });
        if (cursor) query.set("cursor", cursor);
        const { body } = await call("GET", `/v1/revisions?${query}`);
        found.push(...(body.items || []));
        cursor = body.next_cursor;
        if (!cursor) break;
      }
      if (stopped) return;
      found.reverse(); // (the newest first)
      list.replaceChildren(
        el("thead", {}, el("tr", {}, ["Revision", "Uploaded", "Author", "Note", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, found.map((r) => el("tr", { "data-revision": r.revision },
          el("td", {}, String(r.revision)), el("td", {}, when(r.created_at)),
          el("td", {}, r.author), el("td", {}, r.note),
          el("td", {}, el("button", { type: "button", class: "secondary open",
            onclick: () => open(r) }, "Diff"))))));
      note.textContent = found.length ? `${found.length} revisions, the newest first.` : "No revisions.";
    } catch (error) {
      failed(error, note);
    }
  })();
  return { stop: () => { stopped = true; } };
}
