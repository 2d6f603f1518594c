/* Settings and sign-in: the conductor URL, the sessions API's URL, token and session id (from the
 * page's address or localStorage), the last sequence number seen, how this browser is on the
 * session (its own, joined to talk, joined to watch), and Cognito sign-in for a stage that needs it
 * (with the token renewed before it expires). */

import { $ } from "./dom.js";
import { uuid4 } from "./protocol.js";

const params = new URLSearchParams(location.search);

export const store = {
  get(key) {
    try {
      return localStorage.getItem(`voiceide.${key}`);
    } catch {
      return null;
    }
  },
  set(key, value) {
    try {
      if (value === null) localStorage.removeItem(`voiceide.${key}`);
      else localStorage.setItem(`voiceide.${key}`, value);
    } catch {
      /* storage may be off: the session lasts as long as the page */
    }
  },
};

export const defaultUrl = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
export const settings = {
  url: params.get("url") || defaultUrl, // a stage's URL: ?url=wss://…&token=… or the settings
  token: params.get("token") || null,
  sessionsUrl: params.get("sessions") || null, // a stage's sessions API: ?sessions=https://… (its SessionsApiUrl)
  sessionId: (params.get("sessionId") || store.get("sessionId") || uuid4()).toLowerCase(),
  // a session id made here, now: nothing of it is kept anywhere yet (no earlier conversation to read)
  newSession: !params.get("sessionId") && !store.get("sessionId"),
  speakAloud: store.get("speakAloud") !== "false",
};
store.set("sessionId", settings.sessionId);

/** How this browser is on its session: "own" (it talks and runs the demo project's tools), "talk"
 * (joined another device's session to talk: voice and display) or "watch" (display only). A join
 * is kept per session, so a reload rejoins the same way; `?join=watch|talk` joins from the address. */
export const MODES = ["own", "talk", "watch"];
const joinParam = params.get("join");
if (MODES.includes(joinParam) && joinParam !== "own") store.set(`mode.${settings.sessionId}`, joinParam);
settings.mode = modeOf(settings.sessionId);

export function modeOf(sessionId) {
  const kept = store.get(`mode.${sessionId}`);
  return MODES.includes(kept) ? kept : "own";
}

export function keepMode(sessionId, mode) {
  store.set(`mode.${sessionId}`, mode === "own" ? null : mode);
}
export const signIn = { password: null, expiresAt: 0, config: {} };

export function lastSeq() {
  return Number(store.get(`lastSeq.${settings.sessionId}`) || 0);
}

export function saveLastSeq(seq) {
  store.set(`lastSeq.${settings.sessionId}`, String(seq));
}

/** Forget the last sequence number seen of a session: its next sessionStart asks for no replay. */
export function forgetLastSeq(sessionId) {
  store.set(`lastSeq.${sessionId}`, null);
}

function tokenExpiry(token) {
  try {
    const claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return typeof claims.exp === "number" ? claims.exp * 1000 : 0;
  } catch {
    return 0;
  }
}

/** The token to send (null: none), signed in again first when it is about to expire. */
export async function freshToken() {
  if (settings.token && signIn.password && tokenExpiry(settings.token) - Date.now() < 60000) {
    await cognitoSignIn();
  }
  return settings.token;
}

export async function cognitoSignIn() {
  const region = $("region").value.trim() || "us-east-1";
  const endpoint = $("cognito-endpoint").value.trim() || `https://cognito-idp.${region}.amazonaws.com/`;
  const password = $("password").value || signIn.password;
  const response = await fetch(endpoint, {
    method: "POST",
    headers: {
      "Content-Type": "application/x-amz-json-1.1",
      "X-Amz-Target": "AWSCognitoIdentityProviderService.InitiateAuth",
    },
    body: JSON.stringify({
      AuthFlow: "USER_PASSWORD_AUTH",
      ClientId: $("client-id").value.trim(),
      AuthParameters: { USERNAME: $("username").value.trim(), PASSWORD: password },
    }),
  });
  const body = await response.json().catch(() => ({}));
  const token = body.AuthenticationResult && body.AuthenticationResult.IdToken;
  if (!response.ok || !token) throw new Error(`sign-in failed (${body.__type || response.status})`);
  signIn.password = password; // kept in memory only, to sign in again before the token expires
  $("password").value = "";
  settings.token = token;
}
