/* The sessions API (docs/sessions-api.md) over fetch: list the person's sessions, read one with its
 * transcript, rename, end, erase. Its base URL is the page's own origin when the console talks to
 * the WebSocket it was served beside (the local stack serves both on one host and port), or the
 * page's `?sessions=https://…` (a deployed stage's SessionsApiUrl); otherwise it is not configured.
 * On a stage with sign-in every request carries the WebSocket's token as `Authorization: Bearer`.
 * Every failure is a SessionsError, whose `kind` says what to tell the person. */

import { freshToken, settings } from "./settings.js";

const TIMEOUT_MS = 10000;
const TRANSCRIPT_PAGE = 200; // the API's largest page
const TRANSCRIPT_PAGES = 20; // at most 4,000 entries of an earlier conversation are shown

export class SessionsError extends Error {
  /** kind: "not_configured", "unauthorized" (401), "not_found" (404), "network", "http" (any other). */
  constructor(kind, message, status = 0) {
    super(message);
    this.kind = kind;
    this.status = status;
  }
}

/** The sessions API's base URL (…/sessions), or null when it is not configured for this stage. */
export function sessionsBase() {
  if (settings.sessionsUrl) {
    try {
      const url = new URL(settings.sessionsUrl);
      if (url.protocol !== "https:" && url.protocol !== "http:") return null;
      const path = url.pathname.replace(/\/+$/, "");
      url.pathname = path.endsWith("/sessions") ? path : `${path}/sessions`;
      url.search = url.hash = "";
      return url.toString();
    } catch {
      return null;
    }
  }
  try {
    if (new URL(settings.url).host !== location.host) return null; // another host: say where its API is
  } catch {
    return null;
  }
  return new URL("/sessions", location.origin).toString();
}

/** One request to the sessions API: `base` (…/sessions unless given, e.g. …/memories) + `path`. */
export async function request(method, path = "", { query = {}, body, base = sessionsBase() } = {}) {
  if (!base) throw new SessionsError("not_configured", "the sessions API is not configured for this stage");
  const url = new URL(base + path);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    const token = await freshToken();
    if (token) headers.Authorization = `Bearer ${token}`;
  } catch (error) {
    throw new SessionsError("unauthorized", error.message || String(error));
  }
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      signal: abort.signal,
    });
  } catch (error) {
    let why = abort.signal.aborted ? "no answer in time" : error.message || String(error);
    if (url.origin !== location.origin) why += `; an API on another origin must allow ${location.origin} (CORS)`;
    throw new SessionsError("network", `the sessions API cannot be reached (${why})`);
  } finally {
    clearTimeout(timer);
  }
  const text = await response.text().catch(() => "");
  let answer = null;
  try {
    answer = text ? JSON.parse(text) : null;
  } catch {
    answer = null;
  }
  if (response.ok) return answer;
  const detail = (answer && answer.error && answer.error.message) || (answer && answer.message) || response.statusText;
  if (response.status === 401) throw new SessionsError("unauthorized", "sign in again", 401);
  if (response.status === 404) throw new SessionsError("not_found", "no such session", 404);
  throw new SessionsError("http", `${response.status} ${detail || ""}`.trim(), response.status);
}

const one = (id) => `/${encodeURIComponent(id)}`;

/** One page of the person's sessions, newest activity first: {sessions, nextCursor}. */
export function listSessions({ cursor, limit = 20, status } = {}) {
  return request("GET", "", { query: { cursor, limit, status } });
}

/** One session and a page of its transcript, oldest first: {session, transcript, nextCursor}. */
export function getSession(id, { cursor, limit } = {}) {
  return request("GET", one(id), { query: { cursor, limit } });
}

/** A session and its whole transcript (every page, up to TRANSCRIPT_PAGES): {session, transcript, complete}. */
export async function readSession(id) {
  const first = await getSession(id, { limit: TRANSCRIPT_PAGE });
  const transcript = [...(first.transcript || [])];
  let cursor = first.nextCursor;
  for (let page = 1; cursor && page < TRANSCRIPT_PAGES; page++) {
    const next = await getSession(id, { cursor, limit: TRANSCRIPT_PAGE });
    transcript.push(...(next.transcript || []));
    cursor = next.nextCursor;
  }
  return { session: first.session, transcript, complete: !cursor };
}

export function renameSession(id, title) {
  return request("PATCH", one(id), { body: { title } });
}

export function endSession(id) {
  return request("POST", `${one(id)}/end`);
}

export function eraseSession(id) {
  return request("DELETE", one(id));
}

/** What to tell the person about a failed request, in one line. */
export function describe(error, what = "the sessions API") {
  if (!(error instanceof SessionsError)) return `${what} failed: ${error.message || error}`;
  switch (error.kind) {
    case "not_configured":
      return "The sessions API is not configured for this stage: open the console with ?sessions=https://… (the stage's SessionsApiUrl).";
    case "unauthorized":
      return `${what}: the sign-in was refused (401). Sign in again under Connection and sign-in.`;
    case "not_found":
      return `${what}: no such session (404); it may have been erased.`;
    case "network":
      return `${what}: ${error.message}.`;
    default:
      return `${what} failed: ${error.message}.`;
  }
}
