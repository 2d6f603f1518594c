/* The timeline: per turn, milliseconds from the final transcript to thinking, the first partial,
 * the first tts.speak and idle, drawn as bars for the last few turns. */

import { $, el } from "./dom.js";

export const turns = [];
const MARKS = [
  ["thinking", "thinking"],
  ["partial", "first partial"],
  ["speak", "first tts.speak"],
  ["idle", "idle"],
];

export function startTurn(text) {
  turns.push({ text, t0: performance.now(), marks: {} });
  renderTimeline();
}

export function mark(name) {
  const turn = turns[turns.length - 1];
  if (!turn || turn.marks.idle !== undefined || turn.marks[name] !== undefined) return;
  turn.marks[name] = Math.round(performance.now() - turn.t0);
  renderTimeline();
}

export function clearTimeline() {
  turns.length = 0;
  renderTimeline();
}

function renderTimeline() {
  const box = $("timeline");
  box.replaceChildren();
  for (const turn of turns.slice(-6)) {
    const end = turn.marks.idle ?? Math.max(1, ...Object.values(turn.marks));
    const bar = el("div", { class: "bar", "aria-hidden": "true" });
    let from = 0;
    for (const [name] of MARKS) {
      const at = turn.marks[name];
      if (at === undefined) continue;
      const seg = el("span", { class: `seg-${name}` });
      seg.style.left = `${(100 * from) / end}%`;
      seg.style.width = `${Math.max(0.5, (100 * (at - from)) / end)}%`;
      bar.append(seg);
      from = Math.max(from, at);
    }
    const marks = el("div", { class: "marks" });
    for (const [name, label] of MARKS) {
      const at = turn.marks[name];
      const item = el("span", { class: `mark-${name}`, text: `${label}: ${at === undefined ? "–" : `${at} ms`}` });
      if (at !== undefined) item.setAttribute("data-ms", String(at));
      marks.append(item);
    }
    box.append(el("div", { class: "turn-row" }, el("span", { class: "label", text: `“${turn.text}”` }), bar, marks));
  }
}
