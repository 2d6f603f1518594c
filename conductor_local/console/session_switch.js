/* Which session the console is in: the one kept across reloads (its earlier conversation shown at
 * the start), a new one, one picked from the session list, leaving one that is ended or erased; and
 * the session's title in the header. */

import { disconnect, reconnect } from "./connection.js";
import { $ } from "./dom.js";
import { loadEarlier, noteNotShown } from "./earlier.js";
import { uuid4 } from "./protocol.js";
import { forgetLastSeq, lastSeq, settings, store } from "./settings.js";
import { clearTimeline } from "./timeline.js";
import { clearCards, clearTranscript, note, setConnection } from "./view.js";

let switches = 0; // a switch started later makes an earlier one's late answers moot

/** The session's title in the header (none: hidden). */
export function showTitle(title) {
  const node = $("session-title");
  node.textContent = title ? `Session: ${title}` : "";
  node.hidden = !title;
}

function enter(sessionId) {
  switches++;
  settings.sessionId = sessionId;
  store.set("sessionId", sessionId);
  $("session-id").value = sessionId;
  clearTranscript();
  clearCards();
  clearTimeline();
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

/** At the page's start, before connecting: the kept session's earlier conversation. Once it is
 * shown (or the session is unknown) the first sessionStart asks for no replay. */
export async function showStartingSession() {
  const id = settings.sessionId;
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
