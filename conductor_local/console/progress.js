/* How the calls that run long are going (docs/protocol.md, "Progress and cancelling"): one line
 * per call in the transcript, updated in place: the tool, a bar, the percentage and the latest
 * message. The progress of a call another device runs comes from the conductor (`toolProgress`,
 * unnumbered, with the tool's `name`); this browser's own calls (the demo build) report theirs here.
 *
 * When a line is over: an own call's when it ends (its result, or the conductor cancelled it).
 * Another device's result never reaches this browser, so its line is shown done at the end of a
 * turn (idle) when no progress of that call came since the conductor last started thinking: a call
 * of the turn's round was answered, or a background job was reported. A later progress of the same
 * call (a background job that runs on) shows its line again. */

import { el } from "./dom.js";
import { progressOf } from "./protocol.js";

const lines = new Map(); // callId -> {item, own, live, heard}: heard = progress since the last thinking

/** The line of `callId`, when it is still on the page (a new session clears the transcript). */
function lineOf(callId) {
  const line = lines.get(callId);
  if (line && !line.item.isConnected) lines.delete(callId);
  return lines.get(callId);
}

function newLine(callId) {
  const item = el(
    "li",
    { class: "progress", "data-call-id": callId, "aria-live": "off" },
    el("span", { class: "progress-name" }),
    el("progress", { max: "1" }),
    el("span", { class: "progress-text" }),
    el("span", { class: "progress-end mark" }),
  );
  const transcript = document.getElementById("transcript");
  transcript.append(item);
  transcript.scrollTop = transcript.scrollHeight;
  return item;
}

function draw(line, progress) {
  const { item } = line;
  if (progress.name || !item.querySelector(".progress-name").textContent) {
    item.querySelector(".progress-name").textContent = progress.name || "a tool";
  }
  const bar = item.querySelector("progress");
  if (progress.fraction === null) bar.removeAttribute("value"); // how far is not known: indeterminate
  else bar.value = progress.fraction;
  const parts = [];
  if (progress.fraction !== null) parts.push(`${Math.round(progress.fraction * 100)} %`);
  if (progress.message) parts.push(progress.message);
  item.querySelector(".progress-text").textContent = parts.join(" · ");
  item.classList.remove("done", "failed", "cancelled");
  item.querySelector(".progress-end").textContent = "";
}

/** A `toolProgress` (from the conductor, or this browser's own call with `own`): its line, made
 * or updated. Ignored when it names no call. */
export function onProgress(payload, { own = false } = {}) {
  const progress = progressOf(payload);
  if (!progress) return;
  let line = lineOf(progress.callId);
  if (!line) {
    line = { item: newLine(progress.callId), own, live: true, heard: true };
    lines.set(progress.callId, line);
  }
  line.live = true;
  line.heard = true;
  draw(line, progress);
}

function end(line, how) {
  line.live = false;
  line.item.classList.add(how);
  line.item.querySelector(".progress-end").textContent = ` — ${how}`;
}

/** This browser's own call ended: "done", "failed" or "cancelled". */
export function ownEnded(callId, how = "done") {
  const line = lineOf(callId);
  if (line && line.live) end(line, how);
}

/** The conversation's state: see the top of this file for when another device's line is over. */
export function onState(state) {
  for (const [callId, line] of [...lines]) {
    if (!lineOf(callId) || line.own || !line.live) continue;
    if (state === "thinking") line.heard = false;
    else if (state === "idle" && !line.heard) end(line, "done");
  }
}

/** The calls whose line shows them running, for the browser tests. */
export function liveCalls() {
  return [...lines.keys()].filter((callId) => lineOf(callId) && lines.get(callId).live);
}
