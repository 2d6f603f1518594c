/* Which session the console is in and how: the one kept across reloads (its earlier conversation
 * shown at the start, or joined again as it was), a new one, one picked from the session list
 * (resumed as this browser's own, or joined to talk or to watch beside the devices already on it),
 * leaving one that is ended or erased; and the session's title in the header. */

import { disconnect, joinNext, reconnect } from "./connection.js";
import { forgetDevices } from "./devices.js";
import { $ } from "./dom.js";
import { loadEarlier, noteNotShown } from "./earlier.js";
import { clear as clearHeld } from "./held.js";
import { forgetNamesHeard } from "./names_heard.js";
import { forgetProject } from "./project.js";
import { uuid4 } from "./protocol.js";
import { forgetLastSeq, keepMode, lastSeq, settings, store } from "./settings.js";
import { applyMode } from "./speech.js";
import { clearTimeline } from "./timeline.js";
import { forgetVocabulary } from "./vocabulary.js";
import { clearCards, clearTranscript, note, setConnection } from "./view.js";

let switches = 0; // a switch started later makes an earlier one's late answers moot

/** The session's title in the header (none: hidden). */
export function showTitle(title) {
  const node = $("session-title");
  node.textContent = title ? `Session: ${title}` : "";
  node.hidden = !title;
}

function enter(sessionId, mode = "own") {
  switches++;
  settings.sessionId = sessionId;
  settings.mode = mode;
  keepMode(sessionId, mode);
  store.set("sessionId", sessionId);
  $("session-id").value = sessionId;
  joinNext(false);
  clearTranscript();
  clearHeld();
  clearCards();
  clearTimeline();
  forgetDevices();
  forgetProject();
  forgetNamesHeard();
  forgetVocabulary();
  applyMode();
  showTitle(null);
}

/** Start a new session (a new id) and connect with it. */
export function newSession() {
  enter(uuid4());
  reconnect();
}

/** Go to a session picked from the list (`session` as the API lists it): its earlier conversation
 * from the sessions API, then a connection with its id. Its sessionStart asks for no replay (no
 * lastSeq): what was said is on the screen already, and waiting tool calls are sent again anyway. */
export async function resumeSession(session) {
  disconnect();
  enter(session.id);
  const mine = switches;
  showTitle(session.title);
  forgetLastSeq(session.id);
  setConnection(`loading session ${session.id}…`);
  const result = await loadEarlier(session.id);
  if (mine !== switches) return;
  if (result.session) showTitle(result.session.title);
  if (result.outcome === "not_found") note(`Session ${session.id} is not kept (any more): it starts afresh.`);
  noteNotShown(result, session.id);
  reconnect();
}

/** Join session `session` (as the API lists it) beside the devices already on it: "watch"
 * (display only) or "talk" (voice and display; the tools stay with the devices that run them).
 * Its sessionStart asks for every kept event (lastSeq 0): the conversation so far is replayed as
 * it happened, shown but not spoken, and no earlier tool call is run again. */
export function joinSession(session, mode) {
  disconnect();
  enter(session.id, mode);
  showTitle(session.title);
  forgetLastSeq(session.id);
  joinNext(true);
  note(mode === "watch" ? "Joining this session to watch…" : "Joining this session to talk…");
  reconnect();
}

/** At the page's start, before connecting: a joined session is joined again as it was (from its
 * start); the console's own session shows its earlier conversation, and once it is shown (or the
 * session is unknown) the first sessionStart asks for no replay. */
export async function showStartingSession() {
  const id = settings.sessionId;
  if (settings.mode !== "own") {
    forgetLastSeq(id);
    joinNext(true);
    return;
  }
  if (settings.newSession) return; // made by this page: the sessions API has nothing of it yet
  const seen = lastSeq();
  const result = await loadEarlier(id);
  if (id !== settings.sessionId) return;
  if (result.session) showTitle(result.session.title);
  if (result.outcome === "failed") {
    if (seen > 0) noteNotShown(result, id);
    return;
  }
  forgetLastSeq(id);
  if (result.outcome === "not_found" && seen > 0) note(`Session ${id} is not kept (any more): it starts afresh.`);
}

/** End or erase session `id` (`act(id)` makes the request). The current session is left first
 * (no reconnecting in between), and a new one starts once it is done; when the request fails the
 * console goes back to it and the error is thrown on. True when it was the current session. */
export async function leaveSession(id, act) {
  const current = id === settings.sessionId;
  if (current) disconnect();
  try {
    await act(id);
  } catch (error) {
    if (current && id === settings.sessionId) reconnect();
    throw error;
  }
  if (current && id === settings.sessionId) newSession();
  return current;
}
