// Elements are built with text nodes only: nothing a server or an agent sent is ever
// parsed as HTML.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "";
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

export function effect(name) {
  return el("span", { class: `effect ${name}` }, name);
}

export function facts(pairs) {
  return el("dl", { class: "facts" },
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

export function reasonList(reasons) {
  return el("ul", { class: "reasons" }, (reasons || []).map((r) =>
    el("li", {}, r.message || r.kind, r.location ? el("span", { class: "where" }, r.location) : null)));
}

// `parent`'s children replaced by `children` (arrays flattened, absent ones left out).
export function fill(parent, ...children) {
  parent.replaceChildren(el("div", {}, ...children));
}
