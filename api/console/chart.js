// Decisions per effect over time: the decisions a log search found, counted in up to
// BUCKETS equal stretches of their time span, one stacked bar a stretch. Drawn as SVG
// with presentation attributes and classes only (the page's CSP allows no inline style).
import { when } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";
const BUCKETS = 24;
const EFFECTS = ["allow", "pause", "deny"];
const WIDTH = 720, HEIGHT = 140, AXIS = 18;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function effectChart(entries) {
  const totals = Object.fromEntries(EFFECTS.map((e) => [e, 0]));
  for (const d of entries) if (d.effect in totals) totals[d.effect] += 1;
  const said = EFFECTS.map((e) => `${totals[e]} ${e}`).join(", ");
  if (!entries.length) {
    return svg("svg", { class: "chart", id: "log-chart", role: "img", width: WIDTH, height: AXIS,
      viewBox: `0 0 ${WIDTH} ${AXIS}`, "aria-label": "no decisions to chart" });
  }
  const first = entries[0].at, last = entries[entries.length - 1].at;
  const span = Math.max(last - first, 1);
  const buckets = Array.from({ length: BUCKETS }, () => ({ allow: 0, pause: 0, deny: 0 }));
  for (const d of entries) {
    if (!(d.effect in totals)) continue;
    const at = Math.min(BUCKETS - 1, Math.floor(((d.at - first) / span) * BUCKETS));
    buckets[at][d.effect] += 1;
  }
  const most = Math.max(1, ...buckets.map((b) => b.allow + b.pause + b.deny));
  const step = WIDTH / BUCKETS, room = HEIGHT - AXIS;
  const bars = [];
  buckets.forEach((b, i) => {
    let top = room;
    for (const e of EFFECTS) {
      if (!b[e]) continue;
      const height = (b[e] / most) * room;
      top -= height;
      bars.push(svg("rect", { class: `bar ${e}`, x: i * step + 1, y: top, width: step - 2,
        height }, svg("title", {}, `${b[e]} ${e}`)));
    }
  });
  return svg("svg", { class: "chart", id: "log-chart", role: "img", width: WIDTH, height: HEIGHT,
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    "aria-label": `decisions per effect over time: ${said}, from ${when(first)} to ${when(last)}` },
    ...bars,
    svg("text", { x: 0, y: HEIGHT - 4, class: "axis" }, when(first)),
    svg("text", { x: WIDTH, y: HEIGHT - 4, class: "axis end" }, when(last)));
}
