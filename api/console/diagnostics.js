// The checker's diagnostics as the console shows them, for the playground's drafts and
// for an upload the server refused: a list, each one a button that takes the reader to
// its line, and a count of errors and warnings.
import { el } from "./dom.js";

// "2 errors, 1 warning", or `clean` (with the warnings) when there is no error.
export function countText(found, clean) {
  const errors = found.filter((d) => d.severity === "error").length;
  const warnings = found.length - errors;
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  if (errors) return `${plural(errors, "error")}, ${plural(warnings, "warning")}`;
  return `${clean}${warnings ? `, with ${plural(warnings, "warning")}` : ""}.`;
}

// `list` (a <ul>) filled with `found`; choosing one calls `choose(diagnostic)`.
export function showList(list, found, choose) {
  if (!found.length) {
    list.replaceChildren(el("li", { class: "note" }, "No diagnostics."));
    return;
  }
  list.replaceChildren(...found.map((d) => el("li", { class: d.severity },
    el("button", {
      type: "button", class: "diagnostic", "data-line": d.line, "data-file": d.file,
      onclick: () => choose(d),
    },
    el("span", { class: "where" }, `${d.file}:${d.line}:${d.column}`),
    el("span", { class: `severity ${d.severity}` }, `${d.severity}[${d.code}]`),
    el("span", {}, d.message)),
    d.help ? el("p", { class: "help" }, `help: ${d.help}`) : null)));
}

// A file's text, line by line and numbered, each diagnostic shown under its line with a
// caret at its column: what a refused upload shows. Each line is an <li data-line>.
export function sourceView(path, text, found) {
  const lines = text.split("\n");
  const at = new Map();
  for (const d of found) {
    const line = Math.min(Math.max(d.line, 1), lines.length);
    if (!at.has(line)) at.set(line, []);
    at.get(line).push(d);
  }
  const rows = [];
  lines.forEach((line, index) => {
    const number = index + 1;
    const marked = at.get(number) || [];
    const worst = marked.some((d) => d.severity === "error") ? "error" : marked.length ? "warning" : "";
    rows.push(el("li", { class: `line ${worst}`, "data-line": number, tabindex: marked.length ? "-1" : null },
      el("span", { class: "number" }, String(number)), el("code", {}, line || " ")));
    for (const d of marked) {
      // (the caret under its column: the line's own tabs kept, every other character a space)
      const before = Array.from(line).slice(0, Math.max(d.column - 1, 0))
        .map((c) => (c === "\t" ? "\t" : " ")).join("");
      rows.push(el("li", { class: `at ${d.severity}`, "data-line": number },
        el("span", { class: "number" }, ""),
        el("div", {},
          el("code", { class: "caret" }, `${before}^`),
          el("div", {}, el("span", { class: `severity ${d.severity}` }, `${d.severity}[${d.code}]`),
            ` ${d.message}`, el("span", { class: "where" }, ` ${d.file}:${d.line}:${d.column}`)),
          d.help ? el("p", { class: "help" }, `help: ${d.help}`) : null)));
    }
  });
  return el("section", { class: "source-view", "data-file": path },
    el("h3", {}, path), el("ol", { class: "source-lines" }, rows));
}
