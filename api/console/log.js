// The decision log: its pages read in order (`GET /v1/decisions?after_seq=`), filtered
// by the server by agent, tool, effect and time (a new search reads from the start);
// a decision opens to its reasons, near misses, arguments and its trace, made again on
// the revision it was decided on (`GET /v1/log/{seq}/explain`).
import { Problem, call } from "./api.js";
import { effectChart } from "./chart.js";
import { el, fill, effect, facts, pretty, reasonList, when } from "./dom.js";

const PAGE = 500; // decisions a request reads
const MAX_READ = 20000; // decisions the page keeps (the newest)
const SHOWN = 200; // rows the table shows (the newest that match)

export function logPage(root, who, session) {
  let entries = [];
  let after = 0;
  const input = (id, label, attrs = {}) => {
    const field = el("input", { id, name: id, ...attrs });
    return [field, el("div", {}, el("label", { for: id }, label), field)];
  };
  const [agent, agentBox] = input("f-agent", "Agent", { type: "text", placeholder: "any" });
  const [tool, toolBox] = input("f-tool", "Tool", { type: "text", placeholder: "any" });
  const effectSelect = el("select", { id: "f-effect", name: "effect" },
    ["", "allow", "deny", "pause"].map((v) => el("option", { value: v }, v || "any")));
  const [since, sinceBox] = input("f-since", "From", { type: "datetime-local" });
  const [until, untilBox] = input("f-until", "To", { type: "datetime-local" });
  const search = el("button", { type: "submit", id: "f-search" }, "Search");
  const follow = el("input", { type: "checkbox", id: "f-follow", name: "follow" });
  const form = el("form", { class: "filters", id: "log-filters" },
    agentBox, toolBox, el("div", {}, el("label", { for: "f-effect" }, "Effect"), effectSelect),
    sinceBox, untilBox, search,
    el("div", { class: "follow" }, follow, el("label", { for: "f-follow" }, "Follow new decisions")));
  const summary = el("p", { class: "status", id: "log-summary", role: "status" }, "");
  const body = el("tbody", { id: "log-rows" });
  const table = el("table", {},
    el("thead", {}, el("tr", {}, ["Seq", "Time", "Agent", "Tool", "Effect", ""].map((h) => el("th", {}, h)))),
    body);
  const detail = el("section", { id: "log-detail", "aria-live": "polite" });
  const chart = el("figure", { class: "chart-box" });
  root.append(el("h1", {}, "Decision log"), form, summary, chart, el("div", { class: "split" },
    el("div", {}, table), detail));

  // The filters as the server reads them (`until` is exclusive there, so a minute is
  // taken whole by asking up to the next millisecond).
  function filters() {
    const params = new URLSearchParams();
    if (agent.value.trim()) params.set("agent", agent.value.trim());
    if (tool.value.trim()) params.set("tool", tool.value.trim());
    if (effectSelect.value) params.set("effect", effectSelect.value);
    if (since.value) params.set("since", String(Date.parse(since.value)));
    if (until.value) params.set("until", String(Date.parse(until.value) + 1));
    return params.toString();
  }

  let asked = null; // the filters the entries were read with
  async function readNew() {
    const wanted = filters();
    if (wanted !== asked) {
      entries = [];
      after = 0;
      asked = wanted;
    }
    for (;;) {
      const query = `after_seq=${after}&limit=${PAGE}` + (wanted ? `&${wanted}` : "");
      const { body: page } = await call("GET", `/v1/decisions?${query}`);
      entries.push(...page.decisions.filter((d) => d.seq !== undefined && d.tool));
      if (entries.length > MAX_READ) entries = entries.slice(-MAX_READ);
      // (a page may hold fewer than PAGE and more follow: it stops at 4 MiB)
      const moved = page.next_after_seq !== after;
      after = page.next_after_seq;
      if (!moved) return;
    }
  }

  let opened = 0; // the decision last opened; an older one's trace is dropped

  // The trace of `d` as the server makes it again, or why it cannot.
  async function trace(d, box) {
    const mine = ++opened;
    box.replaceChildren(el("p", { class: "status" }, `Explaining it again on revision ${d.revision}…`));
    try {
      const { body } = await call("GET", `/v1/log/${d.seq}/explain`);
      if (mine !== opened) return;
      if (body.unavailable) {
        box.replaceChildren(el("p", { class: "outcome refused", id: "log-no-trace", role: "status" },
          `No trace: ${body.unavailable.message}.`));
        return;
      }
      const verdict = body.same_effect
        ? ["The policy decides ", effect(body.effect), ", as logged."]
        : ["The policy decides ", effect(body.effect), `: ${body.note}.`];
      box.replaceChildren(
        el("p", { class: body.same_effect ? "outcome" : "outcome refused", id: "log-trace-verdict" }, verdict),
        body.inputs === "approval"
          ? el("p", { class: "note" }, "Made from the call as its approval keeps it (secrets stay redacted).")
          : null,
        el("pre", { id: "log-trace", class: "trace" }, body.trace));
    } catch (error) {
      if (mine !== opened) return;
      if (error instanceof Problem && error.status === 401) return session.expired();
      box.replaceChildren(el("p", { class: "outcome refused", role: "alert" },
        `Cannot explain it: ${error.message}${error.code ? ` (${error.code})` : ""}`));
    }
  }

  function open(d) {
    const traced = el("div", { id: "log-trace-box", "aria-live": "polite" });
    fill(detail,
      el("h2", {}, `Decision ${d.seq}`),
      facts([["Effect", effect(d.effect)], ["Agent", d.agent], ["Profile", d.profile],
        ["Tool", d.tool], ["Time", when(d.at)], ["Revision", String(d.revision)],
        ["Thread", d.thread], ["Approval", d.approval], ["Id", d.id]]),
      el("label", {}, "Reasons"), reasonList(d.reasons),
      d.near_misses && d.near_misses.length
        ? [el("label", {}, "Near misses"), reasonList(d.near_misses)] : null,
      d.errors && d.errors.length ? [el("label", {}, "Errors"), el("pre", {}, pretty(d.errors))] : null,
      el("label", {}, "Arguments"), el("pre", {}, pretty(d.args)),
      d.final_args && pretty(d.final_args) !== pretty(d.args)
        ? [el("label", {}, "Final arguments"), el("pre", {}, pretty(d.final_args))] : null,
      el("label", {}, "Trace"), traced,
    );
    detail.querySelector("h2").setAttribute("tabindex", "-1");
    detail.querySelector("h2").focus();
    trace(d, traced);
  }

  function show() {
    const found = entries;
    const newest = found.slice(-SHOWN).reverse();
    body.replaceChildren(...newest.map((d) => el("tr", { "data-seq": d.seq },
      el("td", {}, String(d.seq)), el("td", {}, when(d.at)), el("td", {}, d.agent),
      el("td", {}, d.tool), el("td", {}, effect(d.effect)),
      el("td", {}, el("button", { type: "button", class: "secondary open",
        "aria-label": `Open decision ${d.seq}`, onclick: () => open(d) }, "Open")))));
    chart.replaceChildren(effectChart(found),
      el("figcaption", {}, "Decisions per effect over the time they span: ",
        ...["allow", "pause", "deny"].map((e) => el("span", { class: `key ${e}` }, e))));
    const matched = found.length === 1 ? "1 decision matches" : `${found.length} decisions match`;
    summary.textContent = matched
      + (found.length > SHOWN ? ` (the newest ${SHOWN} shown)` : "") + ".";
  }

  async function refresh() {
    search.disabled = true;
    try {
      await readNew();
      show();
    } catch (error) {
      if (error instanceof Problem && error.status === 401) return session.expired();
      summary.textContent = error instanceof Problem && error.code === "insufficient-scope"
        ? "This token may not read the decision log (it needs an admin token)."
        : `Cannot read the log: ${error.message}`;
    } finally {
      search.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    refresh();
  });
  // Following: what was logged since is read, with the same filters, every 2 s.
  let timer = null;
  follow.addEventListener("change", () => {
    if (timer) clearInterval(timer);
    timer = follow.checked ? setInterval(() => { if (!search.disabled) refresh(); }, 2000) : null;
  });
  refresh();
  return { stop: () => { if (timer) clearInterval(timer); } };
}
