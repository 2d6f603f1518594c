/* The earlier conversation of a resumed session, read from the sessions API (GET /sessions/{id}):
 * what the person said, the answers (those a barge-in cut marked), the app's tool calls in brief,
 * shown above the live conversation. */

import { $, el } from "./dom.js";
import { describe, readSession } from "./sessions.js";
import { settings } from "./settings.js";
import { note } from "./view.js";

const ARGUMENTS_SHOWN = 80;
const OUTCOMES = { ok: "", error: " · failed", timeout: " · timed out" };

function when(entry) {
  return entry.at ? new Date(entry.at).toLocaleString() : "";
}

function said(cls, who, text, entry) {
  const item = el("li", { class: `${cls} earlier` }, el("span", { class: "who", text: who }), el("span", { class: "body", text }));
  if (entry.at) item.title = when(entry);
  return item;
}

function entryItem(entry) {
  if (entry.role === "user") return said("you", "you", entry.text || "", entry);
  if (entry.role === "assistant") {
    const item = said("assistant", "assistant", entry.text || "", entry);
    if (entry.interrupted) {
      item.classList.add("interrupted");
      item.append(el("span", { class: "mark", text: entry.text ? " — interrupted" : "(interrupted: nothing was heard)" }));
    }
    return item;
  }
  if (entry.role === "tool") {
    let args = JSON.stringify(entry.arguments || {});
    if (args.length > ARGUMENTS_SHOWN) args = `${args.slice(0, ARGUMENTS_SHOWN - 1)}…`;
    const text = `→ ${entry.name} ${args}${OUTCOMES[entry.outcome] ?? ` · ${entry.outcome}`}`;
    const item = el("li", { class: "note tool earlier", text });
    if (entry.at) item.title = when(entry);
    return item;
  }
  return null; // a kind of entry this console does not know
}

/** Show a session's earlier transcript above everything in the transcript now. */
export function showEarlier(session, transcript, complete = true) {
  const items = transcript.map(entryItem).filter(Boolean);
  if (!items.length) return 0;
  const title = session && session.title ? ` “${session.title}”` : "";
  const head = el("li", { class: "note earlier earlier-start", text: `Earlier in this session${title}:` });
  const tail = el("li", {
    class: "note earlier earlier-end",
    text: complete ? "— now —" : "— the rest of the earlier conversation is too long to show here —",
  });
  const box = $("transcript");
  box.prepend(head, ...items, tail);
  box.scrollTop = box.scrollHeight;
  return items.length;
}

/** Read a session's earlier conversation and show it. What happened: {outcome, session, error};
 * outcome is "shown", "empty" (known, nothing said yet), "not_found" or "failed" (noted). */
export async function loadEarlier(sessionId) {
  let read;
  try {
    read = await readSession(sessionId);
  } catch (error) {
    if (error.kind === "not_found") return { outcome: "not_found", error };
    return { outcome: "failed", error };
  }
  if (settings.sessionId !== sessionId) return { outcome: "failed", error: null }; // switched meanwhile
  const shown = showEarlier(read.session, read.transcript, read.complete);
  return { outcome: shown ? "shown" : "empty", session: read.session };
}

/** Tell the person why the earlier conversation is not shown. */
export function noteNotShown(result, sessionId) {
  if (result.outcome !== "failed" || !result.error) return;
  if (result.error.kind === "not_configured") {
    note(`Resumed session ${sessionId}: what was said before this page is not shown (no sessions API for this stage).`);
    return;
  }
  note(describe(result.error, "The earlier conversation"), "error");
}
