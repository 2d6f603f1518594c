/* The connection to the conductor: the WebSocket, sessionStart with lastSeq and this browser's
 * device (a join's first one asks for everything kept: lastSeq 0), reconnecting with backoff, the outbox of events sent while offline, receiving (replays dropped by id), tool results
 * (resent as they were when a call comes again), and the record of what was sent and received. */

import { deviceField } from "./devices.js";
import { CAPABILITIES, kindOf, makeEvent, wellFormed } from "./protocol.js";
import { freshToken, lastSeq, saveLastSeq, settings } from "./settings.js";
import { logEvent, note, setConnection } from "./view.js";

const RECONNECT_DELAYS_S = [1, 2, 4, 8, 16];

/** What the page sent and received, for the browser tests. */
export const record = { sent: [], received: [], gatewayFrames: [] };

const conn = {
  ws: null,
  attempt: 0,
  timer: null,
  outbox: [],
  started: false,
  userClosed: false,
  reached: false,
  closedStatus: "disconnected", // the connection line once a connection closed on purpose is closed
  joining: false, // the next connection is a join: its sessionStart asks for every kept event (lastSeq 0)
  catchingUp: false, // a join's replay is arriving (until its sessionReady): history, not live
};
const seenIds = new Set();
const answered = new Map(); // callId -> the toolResult event (resent as is when the call comes again)
let handleEvent = () => {};

/** The conductor's URL as the person gave it (no session id, no token): what the page says it
 * could not reach. */
function shownUrl() {
  try {
    const url = new URL(settings.url);
    url.searchParams.delete("token");
    url.searchParams.delete("sessionId");
    return url.toString();
  } catch {
    return settings.url;
  }
}

/** Who handles each event received: `handler(kindName, payload)`. */
export function onEvent(handler) {
  handleEvent = handler;
}

export function isConnected() {
  return Boolean(conn.ws && conn.started);
}

/** The events arriving now are a join's catch-up (the session's past), not live. */
export function isCatchingUp() {
  return conn.catchingUp;
}

/** Whether the next connection joins the session from its start: lastSeq 0, the kept events replayed. */
export function joinNext(joining = true) {
  conn.joining = joining;
}

async function socketUrl() {
  const token = await freshToken(); // an ID token about to expire is renewed before the handshake
  const url = new URL(settings.url);
  url.searchParams.set("sessionId", settings.sessionId);
  if (token) url.searchParams.set("token", token);
  return url.toString();
}

export async function connect() {
  clearTimeout(conn.timer);
  conn.userClosed = false;
  let url;
  try {
    url = await socketUrl();
  } catch (error) {
    setConnection(`cannot connect: ${error.message}`, "down");
    return;
  }
  setConnection(conn.attempt ? `reconnecting (attempt ${conn.attempt})…` : "connecting…");
  const ws = new WebSocket(url);
  conn.ws = ws;
  conn.started = false;
  ws.onopen = () => {
    if (conn.ws !== ws) return;
    conn.attempt = 0;
    conn.reached = true;
    const start = { sessionId: settings.sessionId, capabilities: CAPABILITIES, device: deviceField() };
    if (conn.joining) start.lastSeq = 0;
    else if (lastSeq() > 0) start.lastSeq = lastSeq();
    conn.catchingUp = conn.joining;
    conn.joining = false;
    sendNow(makeEvent("sessionStart", start));
    conn.started = true;
    setConnection(`connected · session ${settings.sessionId}`, "live");
    const waiting = conn.outbox.splice(0);
    waiting.forEach(sendNow);
  };
  ws.onmessage = (message) => {
    if (conn.ws === ws) receive(message.data);
  };
  ws.onclose = () => {
    if (conn.ws !== ws) return;
    conn.ws = null;
    conn.started = false;
    if (conn.catchingUp) conn.joining = true; // cut during the replay: the next one joins afresh
    conn.catchingUp = false;
    if (conn.userClosed) {
      setConnection(conn.closedStatus, conn.closedStatus === "disconnected" ? "" : "down");
      return;
    }
    if (conn.attempt >= RECONNECT_DELAYS_S.length) {
      setConnection(`offline: ${shownUrl()} cannot be reached (reconnect_failed)`, "down");
      note(`Offline: the conductor at ${shownUrl()} cannot be reached. Use Connect to try again.`, "error");
      record.sent.push(makeEvent("error", { code: "reconnect_failed", message: "every reconnection attempt failed" }));
      return;
    }
    const delay = RECONNECT_DELAYS_S[conn.attempt++];
    if (conn.reached) setConnection(`connection lost: retrying in ${delay} s`, "down");
    else {
      // never connected: the URL itself may be wrong (the page's ?url= or the settings)
      setConnection(`cannot reach ${shownUrl()}: retrying in ${delay} s`, "down");
      if (conn.attempt === 1) note(`The conductor at ${shownUrl()} cannot be reached: check the page's ?url= or the settings.`, "error");
    }
    conn.timer = setTimeout(connect, delay * 1000);
  };
}

/** Close the connection and stay closed (no reconnecting) until connect() or reconnect();
 * `status`: what the connection line says once it is closed. */
export function disconnect(status = "disconnected") {
  conn.userClosed = true;
  conn.closedStatus = status;
  clearTimeout(conn.timer);
  if (conn.ws) conn.ws.close(1000);
  else if (status !== "disconnected") setConnection(status, "down");
}

/** Close the connection and open a new one (new settings or a new session), backoff reset. */
export function reconnect() {
  disconnect();
  conn.attempt = 0;
  conn.reached = false; // perhaps another URL: until it answers, a failure names it
  connect();
}

function sendNow(event) {
  conn.ws.send(JSON.stringify(event));
  record.sent.push(event);
  logEvent("out", event);
}

/** Send `event` now if the connection is up; else drop it (progress: a later one says more). */
export function sendLive(event) {
  if (!(conn.ws && conn.ws.readyState === WebSocket.OPEN && conn.started)) return false;
  sendNow(event);
  return true;
}

export function send(event) {
  if (conn.ws && conn.ws.readyState === WebSocket.OPEN && conn.started) sendNow(event);
  else conn.outbox.push(event); // sent once a connection is back, with the same id
}

function receive(data) {
  let event;
  try {
    event = JSON.parse(data);
  } catch {
    logEvent("in", { undecodable: String(data).slice(0, 200) });
    return;
  }
  if (!event || typeof event !== "object" || !event.kind) {
    record.gatewayFrames.push(event); // API Gateway's own frames: not events, only logged
    logEvent("in", event);
    return;
  }
  if (seenIds.has(event.id)) return; // a replayed event already handled
  seenIds.add(event.id);
  if (Number.isInteger(event.seq) && event.seq > lastSeq()) saveLastSeq(event.seq);
  record.received.push(event);
  logEvent("in", event);
  const [name, payload] = kindOf(event);
  if (name === "sessionReady") conn.catchingUp = false; // everything kept was sent before it
  try {
    handleEvent(name, payload || {});
  } catch (error) {
    console.error("could not handle", event, error);
  }
}

/** Answer a tool call with its toolResult. */
export function answer(callId, result, error = null) {
  const event = makeEvent("toolResult", {
    callId,
    result: result === null ? null : wellFormed(JSON.stringify(result)),
    error: error === null ? null : wellFormed(String(error)),
  });
  answered.set(callId, event);
  send(event);
}

/** A call already answered is answered again with the same result (same id): harmless. True if so. */
export function answerAgain(callId) {
  if (!answered.has(callId)) return false;
  send(answered.get(callId));
  return true;
}
