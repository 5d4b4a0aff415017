// Upload: a new revision from the playground's draft, from files picked on this computer,
// or from text pasted as one file, sent as `PUT /v1/policy` takes it (JSON `files` and a
// `note`), with the session's CSRF token as every console form sends it, and `If-Match`
// the revision this page read, so that an upload made meanwhile elsewhere is not
// overwritten unseen. A refusal of the checker shows each diagnostic under its line in
// the source sent; a new revision shows its number, its warnings and its semantic diff
// against the revision before, and becomes the playground's draft unless that draft was
// edited and not sent (then the page says so, and keeps the edits).
import { Problem, call } from "./api.js";
import { countText, showList, sourceView } from "./diagnostics.js";
import { el, fill } from "./dom.js";
import { diffView } from "./revisions.js";

// `playground`: {draft(): its files, edited(): whether it was edited since it was loaded,
// load(revision, files): make it that revision's files}.
export function uploadSection(session, revision, playground) {
  let latest = revision; // the revision an upload replaces (`If-Match`)
  let picked = []; // [{path, text}] of the files chosen, or none
  const pick = el("input", { id: "up-files", type: "file", multiple: true, accept: ".charter" });
  const picks = el("p", { id: "up-picked", class: "note" }, "");
  const path = el("input", { id: "up-path", value: "policy.charter", spellcheck: "false" });
  const text = el("textarea", { id: "up-text", class: "editor short", rows: "10", spellcheck: "false",
    autocomplete: "off", wrap: "off", placeholder: "the policy's text" });
  const note = el("input", { id: "up-note", maxlength: "500", placeholder: "what changes, and why" });
  const send = el("button", { type: "submit", id: "up-send" }, "Upload");
  const sendDraft = el("button", { type: "button", id: "up-draft", class: "secondary" },
    "Upload the playground's draft");
  const status = el("p", { id: "up-status", class: "status", role: "status" }, "");
  const list = el("ul", { id: "up-diagnostics", class: "diagnostics" });
  const sources = el("div", { id: "up-source" });
  const result = el("div", { id: "up-result", "aria-live": "polite" });
  const form = el("form", { id: "up-form", class: "stack wide" },
    el("label", { for: "up-files" }, "Files to upload (.charter)"), pick, picks,
    el("label", { for: "up-path" }, "Or paste one file's text: its path"), path,
    el("label", { for: "up-text" }, "Its text"), text,
    el("label", { for: "up-note" }, "Note"), note,
    el("div", { class: "actions" }, send, sendDraft));

  pick.addEventListener("change", async () => {
    picked = await Promise.all(Array.from(pick.files).map(async (file) => ({ path: file.name, text: await file.text() })));
    picks.textContent = picked.length
      ? `${picked.length} file${picked.length === 1 ? "" : "s"} chosen (${picked.map((f) => f.path).join(", ")}): `
        + "they are sent, the pasted text is not."
      : "";
  });

  function clear() {
    list.replaceChildren();
    sources.replaceChildren();
    result.replaceChildren();
  }

  function choose(diagnostic) {
    const line = sources.querySelector(
      `.source-view[data-file="${CSS.escape(diagnostic.file)}"] li.line[data-line="${Number(diagnostic.line)}"]`);
    if (!line) return;
    line.scrollIntoView({ block: "center" });
    line.focus();
  }

  function refused(files, found) {
    const counted = countText(found, "no error").replace(/\.$/, "");
    status.textContent = `Refused: ${counted}. The policy stays at revision ${latest}.`;
    show(files, found);
  }

  // `found` listed, and each file sent that one is in, line by line with it at its line.
  function show(files, found) {
    showList(list, found, choose);
    const shown = files.filter((f) => found.some((d) => d.file === f.path));
    sources.replaceChildren(...shown.map((f) => sourceView(f.path, f.text, found.filter((d) => d.file === f.path))));
  }

  async function uploaded(answer, files, fromDraft) {
    latest = answer.revision;
    status.textContent = `Revision ${answer.revision} uploaded: ${files.map((f) => f.path).join(", ")}.`;
    if (answer.warnings.length) show(files, answer.warnings);
    let told;
    if (fromDraft || !playground.edited()) {
      playground.load(answer.revision, files);
      told = `The playground above holds revision ${answer.revision}.`;
    } else {
      told = `The playground above keeps the draft you edited: reload the page to edit revision ${answer.revision}.`;
    }
    fill(result, el("p", { class: "status" }, "Comparing it with the revision before…"));
    try {
      const { body } = await call("GET", `/v1/revisions/${answer.revision}/diff`);
      fill(result, el("div", { id: "up-diff" }, diffView(body)),
        el("p", { class: "note", id: "up-playground" }, told));
    } catch (error) {
      if (error instanceof Problem && error.status === 401) return session.expired();
      fill(result, el("p", { class: "outcome refused" }, `The diff is not shown: ${error.message}`));
    }
  }

  async function upload(files, fromDraft) {
    if (!files.some((f) => f.text.trim())) {
      status.textContent = "Nothing to upload: pick a file or paste its text.";
      return;
    }
    clear();
    status.textContent = "Checking and uploading…";
    send.disabled = sendDraft.disabled = true;
    try {
      const { body } = await call("PUT", "/v1/policy", { files, note: note.value },
        latest ? { "If-Match": `"${latest}"` } : {});
      await uploaded(body, files, fromDraft);
    } catch (error) {
      if (error instanceof Problem && error.status === 401) return session.expired();
      if (error instanceof Problem && Array.isArray(error.body.diagnostics) && error.body.diagnostics.length) {
        refused(files, error.body.diagnostics);
      } else if (error instanceof Problem && error.code === "revision-moved") {
        status.textContent = `Refused: ${error.message}. Read the policy again (reload) before uploading.`;
      } else {
        status.textContent = `Refused: ${error.message}${error.code ? ` (${error.code})` : ""}`;
      }
    } finally {
      send.disabled = sendDraft.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    upload(picked.length ? picked : [{ path: path.value.trim(), text: text.value }], false);
  });
  sendDraft.addEventListener("click", () => upload(playground.draft(), true));

  return el("section", { id: "upload", "aria-labelledby": "up-title" },
    el("h2", { id: "up-title" }, "Upload a revision"),
    el("p", { class: "note" }, "An upload replaces every file of the policy with the files sent. "
      + "The checker reads it first: a policy with an error is refused, and each diagnostic is shown at its line."),
    form, status, list, sources, result);
}
