// Policy: a playground over a draft of the latest revision's files. The draft lives in
// this page alone; every request goes to /v1/drafts/*, which stores nothing, so the live
// policy stays as it is whatever is typed here. Below it, the upload of a new revision
// (upload.js), the one part of the page that changes the policy.
import { Problem, call } from "./api.js";
import { countText, showList } from "./diagnostics.js";
import { el, effect, reasonList } from "./dom.js";
import { uploadSection } from "./upload.js";

const CHECK_DELAY_MS = 400; // a pause in typing this long asks for a check

// The UTF-16 offset of a diagnostic's line and column (both from 1; a column counts
// code points, as the checker does) in `text`.
export function offsetOf(text, line, column) {
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length - 1); i += 1) offset += lines[i].length + 1;
  const row = lines[Math.min(line - 1, lines.length - 1)] || "";
  let at = 0;
  for (let k = 1; k < column && at < row.length; k += 1) {
    at += row.codePointAt(at) > 0xffff ? 2 : 1;
  }
  return offset + at;
}

function caretText(text, offset) {
  const before = text.slice(0, offset).split("\n");
  const column = Array.from(before[before.length - 1]).length + 1;
  return `Line ${before.length}, column ${column}`;
}

function jsonField(input, what) {
  const text = input.value.trim();
  if (!text) return { value: undefined };
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return { error: `${what} must be a JSON object` };
    }
    return { value };
  } catch (error) {
    return { error: `${what} is not valid JSON: ${error.message}` };
  }
}

export function policyPage(root, who, session) {
  let files = []; // [{path, text}]
  let current = 0;
  let timer = null;
  let asked = 0; // the latest check sent; an older one's answer is dropped
  let stopped = false;
  let edited = false; // whether the draft differs from the revision it was loaded from

  const status = el("p", { id: "pg-status", class: "status", role: "status" }, "Loading the policy…");
  const fileList = el("ul", { id: "pg-files", class: "file-list", "aria-label": "Files" });
  const editorLabel = el("label", { for: "pg-editor", id: "pg-editor-label" }, "File");
  const editor = el("textarea", {
    id: "pg-editor", class: "editor", spellcheck: "false", autocomplete: "off",
    autocapitalize: "off", wrap: "off", rows: "24", "aria-describedby": "pg-caret",
  });
  const caret = el("p", { id: "pg-caret", class: "status" }, "");
  const diagnostics = el("ul", { id: "pg-diagnostics", class: "diagnostics", "aria-live": "polite" });
  const newPath = el("input", { id: "pg-new-path", placeholder: "teams/new.charter", spellcheck: "false" });

  const profile = el("input", { id: "pg-profile", required: true, spellcheck: "false" });
  const tool = el("input", { id: "pg-tool", required: true, spellcheck: "false" });
  const args = el("textarea", { id: "pg-args", rows: "3", spellcheck: "false" }, "{}");
  const context = el("textarea", { id: "pg-context", rows: "2", spellcheck: "false", placeholder: "none" });
  const decided = el("div", { id: "pg-decision", "aria-live": "polite" });
  const tested = el("div", { id: "pg-tests", "aria-live": "polite" });
  const coverage = el("input", { id: "pg-coverage", type: "checkbox", checked: true });
  const caller = el("input", { id: "pg-caller", required: true, spellcheck: "false" });
  const role = el("input", { id: "pg-role", required: true, spellcheck: "false" });
  const fitted = el("div", { id: "pg-fit-result", "aria-live": "polite" });

  root.append(
    el("h1", {}, "Policy"),
    el("p", { class: "note" }, "The playground: a draft of the latest revision: check it as you type, decide a "
      + "call, run its tests and fit checks. Nothing here is uploaded; the live policy stays as it is."),
    status,
    el("div", { class: "playground" },
      el("section", { class: "files", "aria-labelledby": "pg-files-title" },
        el("h2", { id: "pg-files-title" }, "Files"), fileList,
        el("form", { id: "pg-add-file", onsubmit: addFile },
          el("label", { for: "pg-new-path" }, "New file"), newPath,
          el("button", { type: "submit", class: "secondary" }, "Add"))),
      el("section", { class: "source" }, editorLabel, editor, caret),
      el("section", { class: "found", "aria-labelledby": "pg-diag-title" },
        el("h2", { id: "pg-diag-title" }, "Diagnostics"), diagnostics)),
    el("div", { class: "split lower" },
      el("section", { "aria-labelledby": "pg-decide-title" },
        el("h2", { id: "pg-decide-title" }, "Decide a call"),
        el("form", { id: "pg-decide", class: "stack", onsubmit: decide },
          el("label", { for: "pg-profile" }, "Profile"), profile,
          el("label", { for: "pg-tool" }, "Tool"), tool,
          el("label", { for: "pg-args" }, "Arguments (JSON)"), args,
          el("label", { for: "pg-context" }, "Context (JSON, optional)"), context,
          el("button", { type: "submit" }, "Decide")),
        decided),
      el("section", { "aria-labelledby": "pg-tests-title" },
        el("h2", { id: "pg-tests-title" }, "Tests"),
        el("div", { class: "actions" },
          el("button", { type: "button", id: "pg-run-tests", onclick: runTests }, "Run tests"),
          el("span", { class: "follow" }, coverage, el("label", { for: "pg-coverage" }, "Coverage"))),
        tested,
        el("h2", { id: "pg-fit-title" }, "Fit check"),
        el("form", { id: "pg-fit", class: "stack", onsubmit: fit, "aria-labelledby": "pg-fit-title" },
          el("label", { for: "pg-caller" }, "Caller profile"), caller,
          el("label", { for: "pg-role" }, "Role"), role,
          el("button", { type: "submit" }, "Check fit")),
        fitted)),
  );

  function failed(error, where) {
    if (error instanceof Problem && error.status === 401) return session.expired();
    const shown = `${error.message}${error.code ? ` (${error.code})` : ""}`;
    const tag = where.tagName === "UL" ? "li" : "p";
    where.replaceChildren(el(tag, { class: "outcome refused", role: "alert" }, shown));
    if (error instanceof Problem && Array.isArray(error.body.diagnostics)) {
      showDiagnostics(error.body.diagnostics);
    }
  }

  function showFiles() {
    fileList.replaceChildren(...files.map((file, index) => el("li", {},
      el("button", {
        type: "button", class: "secondary", "data-path": file.path,
        "aria-current": index === current ? "true" : null,
        onclick: () => openFile(index),
      }, file.path))));
  }

  function openFile(index, offset = 0) {
    current = index;
    editor.value = files[index].text;
    editorLabel.textContent = `File ${files[index].path}`;
    showFiles();
    moveCaret(offset);
  }

  function moveCaret(offset) {
    editor.focus();
    editor.setSelectionRange(offset, offset);
    // (the caret's line brought into view: a textarea scrolls to its caret only as it is typed)
    const line = editor.value.slice(0, offset).split("\n").length;
    const height = parseFloat(getComputedStyle(editor).lineHeight) || 18;
    editor.scrollTop = Math.max(0, (line - 3) * height);
    showCaret();
  }

  function showCaret() {
    caret.textContent = caretText(editor.value, editor.selectionStart);
  }

  function showDiagnostics(found) {
    status.textContent = countText(found, "The draft checks");
    showList(diagnostics, found, goTo);
  }

  function goTo(diagnostic) {
    const index = files.findIndex((f) => f.path === diagnostic.file);
    if (index < 0) return;
    const offset = offsetOf(files[index].text, diagnostic.line, diagnostic.column);
    if (index !== current) openFile(index, offset);
    else moveCaret(offset);
  }

  function draft() {
    return files.map((f) => ({ path: f.path, text: f.text }));
  }

  async function check() {
    timer = null;
    const mine = ++asked;
    status.textContent = "Checking…";
    try {
      const { body } = await call("POST", "/v1/drafts/check", { files: draft() });
      if (stopped || mine !== asked) return;
      showDiagnostics(body.diagnostics);
    } catch (error) {
      if (stopped || mine !== asked) return;
      status.textContent = "The draft could not be checked.";
      failed(error, diagnostics);
    }
  }

  function changed() {
    edited = true;
    files[current].text = editor.value;
    showCaret();
    if (timer) clearTimeout(timer);
    timer = setTimeout(check, CHECK_DELAY_MS);
  }

  function addFile(event) {
    event.preventDefault();
    const path = newPath.value.trim();
    if (!path || files.some((f) => f.path === path)) {
      status.textContent = path ? `A file \`${path}\` is in the draft already.` : "Name the file.";
      return;
    }
    files.push({ path, text: "" });
    edited = true;
    newPath.value = "";
    openFile(files.length - 1);
  }

  async function decide(event) {
    event.preventDefault();
    const parsedArgs = jsonField(args, "Arguments");
    const parsedContext = jsonField(context, "Context");
    const problem = parsedArgs.error || parsedContext.error;
    if (problem) {
      decided.replaceChildren(el("p", { class: "outcome refused", role: "alert" }, problem));
      return;
    }
    const request = {
      files: draft(), profile: profile.value.trim(), tool: tool.value.trim(),
      args: parsedArgs.value || {},
    };
    if (parsedContext.value !== undefined) request.context = parsedContext.value;
    decided.replaceChildren(el("p", { class: "status" }, "Deciding…"));
    try {
      const { body } = await call("POST", "/v1/drafts/decide", request);
      const d = body.decision;
      decided.replaceChildren(el("div", {},
        el("p", { class: "outcome" }, "Effect: ", effect(d.effect)),
        reasonList(d.reasons),
        d.errors.length ? el("ul", { class: "reasons" }, d.errors.map((e) =>
          el("li", {}, `condition error at ${e.location}: ${e.message} (${e.effect})`))) : null,
        el("label", {}, "Trace"),
        el("pre", { id: "pg-trace", class: "trace" }, body.trace)));
    } catch (error) {
      failed(error, decided);
    }
  }

  async function runTests() {
    tested.replaceChildren(el("p", { class: "status" }, "Running the tests…"));
    try {
      const { body } = await call("POST", "/v1/drafts/test", { files: draft(), coverage: coverage.checked });
      const rows = body.results.map((r) => el("tr", { class: r.passed ? "pass" : "fail" },
        el("td", {}, r.passed ? "pass" : "FAIL"),
        el("td", {}, r.test),
        el("td", {}, `expect ${r.expected} ${r.tool}`, r.failure ? el("div", { class: "help" }, r.failure) : null),
        el("td", {}, effect(r.actual)),
        el("td", { class: "where" }, r.location)));
      const parts = [
        el("p", { id: "pg-tests-summary", class: body.failed ? "outcome refused" : "outcome" },
          `${body.passed} passed, ${body.failed} failed`),
        body.results.length ? el("div", { class: "scroll" }, el("table", { id: "pg-test-results" },
          el("thead", {}, el("tr", {}, ["Result", "Test", "Expectation", "Got", "Where"].map((h) => el("th", {}, h)))),
          el("tbody", {}, rows))) : el("p", { class: "note" }, "The draft has no test blocks."),
      ];
      if (body.coverage) {
        const c = body.coverage;
        parts.push(el("p", { id: "pg-coverage-summary" },
          `Coverage: ${c.rules.reached} of ${c.rules.total} rules, ${c.hooks.reached} of ${c.hooks.total} hooks`));
        if (c.unreached.length) {
          parts.push(el("ul", { class: "reasons" }, c.unreached.map((u) => el("li", {},
            `not reached: ${u.text}${u.kind === "rule" ? ` (role ${u.name})` : ""}`,
            el("span", { class: "where" }, u.location)))));
        }
      }
      tested.replaceChildren(...parts);
    } catch (error) {
      failed(error, tested);
    }
  }

  async function fit(event) {
    event.preventDefault();
    fitted.replaceChildren(el("p", { class: "status" }, "Checking the fit…"));
    try {
      const { body } = await call("POST", "/v1/drafts/fit", {
        files: draft(), caller_profile: caller.value.trim(), role: role.value.trim(),
      });
      fitted.replaceChildren(
        el("p", { class: body.fits ? "outcome" : "outcome refused" },
          body.fits ? `Role ${role.value.trim()} fits inside profile ${caller.value.trim()}.`
            : `Role ${role.value.trim()} does not fit inside profile ${caller.value.trim()}.`),
        el("ul", { class: "reasons" }, body.violations.map((v) => el("li", {},
          `${v.kind}: ${v.message}`, v.location ? el("span", { class: "where" }, v.location) : null,
          v.counterexample ? el("pre", {}, JSON.stringify(v.counterexample.args ?? v.counterexample, null, 2)) : null))));
    } catch (error) {
      failed(error, fitted);
    }
  }

  // The draft becomes `revisionFiles` of revision `revision` (the one read at first, or
  // one this page uploaded), unedited.
  function load(revision, revisionFiles) {
    files = revisionFiles.length ? revisionFiles.map((f) => ({ path: f.path, text: f.text }))
      : [{ path: "policy.charter", text: "" }];
    edited = false;
    openFile(0);
    status.textContent = revision ? `Revision ${revision} loaded.` : "No policy yet: an empty draft.";
    check();
  }

  editor.addEventListener("input", changed);
  for (const name of ["keyup", "click", "select"]) editor.addEventListener(name, showCaret);

  (async () => {
    try {
      const { body } = await call("GET", "/v1/policy");
      if (stopped) return;
      load(body.revision, body.files);
      root.append(uploadSection(session, body.revision, { draft, edited: () => edited, load }));
    } catch (error) {
      failed(error, diagnostics);
      status.textContent = who.scope === "admin" ? "The policy could not be read."
        : "The playground needs an admin token.";
    }
  })();
  return {
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
