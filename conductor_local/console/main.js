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
import { $ } from "./dom.js";
import { wireSessionList } from "./session_list.js";
import { newSession, resumeSession, showStartingSession, showTitle } from "./session_switch.js";
import { cognitoSignIn, defaultUrl, settings, signIn, store } from "./settings.js";
import { bargeIn, forgetHeardAnswer, sendFinal, speak, watchVoices, wireTalking } from "./speech.js";
import { mark, turns } from "./timeline.js";
import { renderFiles, runTool, wireFolderPicker } from "./tools.js";
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
} from "./view.js";

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

function onToolCall(call) {
  if (answerAgain(call.callId)) return; // the same result again (same id): harmless
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
    if (args.state === "idle") mark("idle");
    answer(call.callId, { ok: true });
    return;
  }
  if (call.name === "tts.speak") {
    mark("speak");
    speak(call.callId, String(args.text || ""));
    return;
  }
  forgetHeardAnswer(); // the model's tools end the answer being spoken
  note(`→ ${call.name} ${call.arguments}`);
  const running = runTool(call.name, args);
  if (!running) {
    answer(call.callId, null, `the console has no tool ${call.name}`);
    return;
  }
  running.then(
    (result) => answer(call.callId, result),
    (error) => answer(call.callId, null, error.message || String(error)),
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
  say: sendFinal,
  bargeIn,
};

start();
