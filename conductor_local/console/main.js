/* VoiceIDE console: talk to the conductor in a browser, written from docs/protocol.md. This module
 * wires the others together: the events received to the view, the timeline, speech and the tools;
 * the page's controls and the Sessions panel; the start (config.json, sign-in, the earlier
 * conversation, connect); `window.voiceConsole`, which exposes what the page sent and received,
 * for the browser tests.
 *
 * Plain JavaScript modules, no build step, nothing from a CDN. Speech recognition and synthesis are
 * the browser's (Web Speech API); JSON Patch is the vendored fast-json-patch (global `jsonpatch`).
 */

import { answer, answerAgain, connect, disconnect, isConnected, onEvent, reconnect, record } from "./connection.js";
import { $, el } from "./dom.js";
import { wireSessionList } from "./session_list.js";
import { newSession, resumeSession, showStartingSession, showTitle } from "./session_switch.js";
import { cognitoSignIn, defaultUrl, settings, signIn, store } from "./settings.js";
import { bargeIn, forgetHeardAnswer, sendFinal, speak, watchVoices, wireTalking } from "./speech.js";
import { mark, turns } from "./timeline.js";
import { renderFiles, runTool, wireFolderPicker } from "./tools.js";
import { turnUsageItem } from "./usage.js";
import {
  applyPatch,
  currentState,
  currentUiModel,
  note,
  renderCards,
  setConnection,
  setState,
  showFinal,
  showPartial,
  showUnder,
  takeAnswer,
} from "./view.js";

const running = new Map(); // callId -> {item, controller}: the app's tools still running
const cancelled = new Set(); // callIds the conductor cancelled: never run, never answered
const usage = { pending: false, answer: null, shown: [] }; // the turn that went idle, its answer

// ---- what the conductor sends -------------------------------------------------------------------

function handle(name, payload) {
  switch (name) {
    case "assistantSpeechPartial":
      mark("partial");
      showPartial(payload.text || "");
      break;
    case "assistantSpeechFinal":
      showFinal(payload.text || "", payload.interrupted === true);
      break;
    case "assistantUIPatch": {
      let operations;
      try {
        operations = JSON.parse(payload.patch);
      } catch {
        return;
      }
      applyPatch(operations);
      break;
    }
    case "toolCall":
      onToolCall(payload);
      break;
    case "toolCancel":
      onToolCancel(payload);
      break;
    case "turnUsage":
      onTurnUsage(payload);
      break;
    case "sessionReady":
      if (payload.title) showTitle(payload.title);
      if (payload.resumed) note(`Session resumed${payload.title ? `: ${payload.title}` : ""}.`);
      break;
    case "error":
      note(`error ${payload.code}: ${payload.message || ""}`, "error");
      onSessionGone(payload.code);
      break;
    default:
      break; // kinds this console does not know are ignored
  }
}

/** The session was ended or erased elsewhere (another device, the sessions API): the conductor
 * closes the connection. An erased session is forgotten (a new one starts); an ended one is not
 * resumed by reconnecting at once (Connect or the Sessions panel resume it). */
function onSessionGone(code) {
  if (code === "session_erased") {
    newSession();
    note("The session was erased: this is a new one.");
  } else if (code === "session_ended") {
    disconnect();
    note("The session was ended. Connect resumes it; New session starts another.");
  }
}

/** A turn's usage comes after its idle: shown under that turn's answer (or last, when it had none). */
function onTurnUsage(payload) {
  showUnder(usage.pending ? usage.answer : null, turnUsageItem(payload));
  usage.pending = false;
  usage.answer = null;
  usage.shown.push(payload);
}

/** The conductor cancelled a call (the model was told to stop it): a running one is stopped and
 * never answered, and its line in the transcript says so. A call already answered is left be. */
function onToolCancel(payload) {
  const call = running.get(payload.callId);
  if (!call) return;
  running.delete(payload.callId);
  cancelled.add(payload.callId);
  call.controller.abort();
  call.item.classList.add("cancelled");
  call.item.append(el("span", { class: "mark", text: " — cancelled" }));
  if (payload.reason) call.item.title = payload.reason;
}

function onToolCall(call) {
  if (cancelled.has(call.callId)) return; // the conductor cancelled it: nothing to say any more
  if (answerAgain(call.callId)) return; // the same result again (same id): harmless
  if (running.has(call.callId)) return; // the same call again while it runs: answered once done
  let args = {};
  try {
    args = JSON.parse(call.arguments || "{}");
  } catch {
    answer(call.callId, null, "arguments are not JSON");
    return;
  }
  if (call.name === "convo.setState") {
    setState(String(args.state || "idle"));
    if (args.state === "thinking") mark("thinking");
    if (args.state === "idle") {
      mark("idle");
      usage.pending = true; // the turnUsage that follows is this turn's
      usage.answer = takeAnswer();
    }
    answer(call.callId, { ok: true });
    return;
  }
  if (call.name === "tts.speak") {
    mark("speak");
    speak(call.callId, String(args.text || ""));
    return;
  }
  forgetHeardAnswer(); // the model's tools end the answer being spoken
  const item = note(`→ ${call.name} ${call.arguments}`);
  const controller = new AbortController();
  const result = runTool(call.name, args, controller.signal);
  if (!result) {
    answer(call.callId, null, `the console has no tool ${call.name}`);
    return;
  }
  running.set(call.callId, { item, controller });
  const done = (value, error = null) => {
    if (!running.delete(call.callId)) return; // cancelled meanwhile: not answered
    answer(call.callId, value, error);
  };
  result.then(
    (value) => done(value),
    (error) => done(null, error.message || String(error)),
  );
}

// ---- the page's controls ------------------------------------------------------------------------

function wire() {
  $("url").value = settings.url;
  $("session-id").value = settings.sessionId;
  $("speak-aloud").checked = settings.speakAloud;

  $("say-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sendFinal($("say").value);
    $("say").value = "";
  });
  $("say").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("say-form").requestSubmit();
    }
  });
  $("barge-in").addEventListener("click", () => bargeIn("the user stopped the answer"));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") bargeIn("the user stopped the answer");
  });

  wireTalking();
  watchVoices();

  $("speak-aloud").addEventListener("change", (e) => {
    settings.speakAloud = e.target.checked;
    store.set("speakAloud", String(e.target.checked));
  });
  $("settings-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    settings.url = $("url").value.trim() || defaultUrl;
    const sessionId = $("session-id").value.trim().toLowerCase();
    if ($("client-id").value.trim() && $("username").value.trim()) {
      try {
        await cognitoSignIn();
      } catch (error) {
        setConnection(error.message, "down");
        return;
      }
    }
    if (sessionId && sessionId !== settings.sessionId) resumeSession({ id: sessionId, title: null });
    else reconnect();
  });
  $("new-session").addEventListener("click", newSession);
  wireSessionList();
  wireFolderPicker();
}

// ---- the start ----------------------------------------------------------------------------------

async function start() {
  onEvent(handle);
  wire();
  renderFiles();
  renderCards();
  try {
    const response = await fetch("/console/config.json", { cache: "no-store" });
    signIn.config = response.ok ? await response.json() : {};
  } catch {
    signIn.config = {};
  }
  const config = signIn.config;
  if (config.auth === "cognito" && !settings.token) {
    $("region").value = config.region || "";
    $("client-id").value = config.clientId || "";
    $("cognito-endpoint").value = config.cognitoEndpoint || "";
    if (config.testUser) {
      $("username").value = config.testUser.username;
      $("password").value = config.testUser.password;
      try {
        await cognitoSignIn();
      } catch (error) {
        setConnection(error.message, "down");
        $("settings-panel").open = true;
        return;
      }
    } else {
      $("settings-panel").open = true;
      setConnection("sign in to connect");
      return;
    }
  }
  await showStartingSession();
  connect();
}

window.voiceConsole = {
  record,
  get state() {
    return currentState();
  },
  get sessionId() {
    return settings.sessionId;
  },
  get uiModel() {
    return currentUiModel();
  },
  get connected() {
    return isConnected();
  },
  turns,
  /** The turnUsage payloads shown, in order. */
  usages: usage.shown,
  /** The callIds of the app's tools still running. */
  get runningCalls() {
    return [...running.keys()];
  },
  say: sendFinal,
  bargeIn,
};

start();
