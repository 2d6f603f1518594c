/* VoiceIDE console: talk to the conductor in a browser, written from docs/protocol.md. This module
 * wires the others together: the events received to the view, the timeline, speech, the tools,
 * the devices on the session, what they see of the person's project and the names heard in the
 * person's words, the progress of long calls and a held change's buttons; a join's
 * catch-up (the session's past, shown, never spoken or run); the page's controls, the Sessions and Memories panels; the start (config.json,
 * sign-in, the earlier conversation, connect); `window.voiceConsole`, which exposes what the page sent and received,
 * for the browser tests.
 *
 * Plain JavaScript modules, no build step, nothing from a CDN. Speech recognition and synthesis are
 * the browser's (Web Speech API); JSON Patch is the vendored fast-json-patch (global `jsonpatch`).
 */

import {
  answer,
  answerAgain,
  connect,
  disconnect,
  isCatchingUp,
  isConnected,
  onEvent,
  reconnect,
  record,
  sendLive,
} from "./connection.js";
import * as devices from "./devices.js";
import { $, el } from "./dom.js";
import * as held from "./held.js";
import * as memories from "./memories.js";
import { namesShown, onNamesHeard } from "./names_heard.js";
import * as progress from "./progress.js";
import * as project from "./project.js";
import { makeEvent } from "./protocol.js";
import { wireSessionList } from "./session_list.js";
import { newSession, resumeSession, showStartingSession, showTitle } from "./session_switch.js";
import { cognitoSignIn, defaultUrl, settings, signIn, store } from "./settings.js";
import { applyMode, bargeIn, forgetHeardAnswer, sendFinal, speak, watchVoices, wireTalking } from "./speech.js";
import { mark, turns } from "./timeline.js";
import { renderFiles, runTool, wireFolderPicker } from "./tools.js";
import { turnUsageItem } from "./usage.js";
import { onVocabulary, vocabulary } from "./vocabulary.js";
import {
  applyPatch,
  currentState,
  currentUiModel,
  note,
  renderCards,
  setCardDecorator,
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
      held.onFinal(payload.text);
      if (!isCatchingUp()) memories.onFinalAnswer(); // the turn may have remembered something
      break;
    case "assistantUIPatch": {
      let operations;
      try {
        operations = JSON.parse(payload.patch);
      } catch {
        return;
      }
      onPatch(operations);
      break;
    }
    case "toolCall":
      onToolCall(payload);
      break;
    case "toolCancel":
      onToolCancel(payload);
      break;
    case "toolProgress":
      progress.onProgress(payload); // another device's call, forwarded by the conductor
      break;
    case "turnUsage":
      onTurnUsage(payload);
      break;
    case "sessionReady":
      if (payload.title) showTitle(payload.title);
      if (payload.resumed) note(`Session resumed${payload.title ? `: ${payload.title}` : ""}.`);
      devices.onReady(payload);
      break;
    case "devicesChanged":
      onDevicesChanged(payload);
      break;
    case "workspaceContext":
      project.onContext(payload); // another device's view of the project, forwarded
      break;
    case "namesHeard":
      onNamesHeard(payload);
      break;
    case "vocabulary":
      onVocabulary(payload);
      break;
    case "error":
      if (payload.code === "no_pending_tool_call" && held.onRefused()) break;
      if (payload.code === "taken_over") {
        onTakenOver();
        break;
      }
      note(`error ${payload.code}: ${payload.message || ""}`, "error");
      onSessionGone(payload.code);
      break;
    default:
      break; // kinds this console does not know are ignored
  }
}

/** A device that leaves takes what it saw of the project with it. */
function onDevicesChanged(change) {
  const gone = typeof change.left === "string" ? devices.present.devices.find((d) => d.id === change.left) : null;
  devices.onChanged(change);
  if (gone) project.deviceLeft(gone.name || gone.id);
}

/** A card appended by a patch may be a held change's (its question follows). */
function onPatch(operations) {
  const before = Array.isArray(currentUiModel().cards) ? currentUiModel().cards.length : 0;
  if (!applyPatch(operations)) return;
  const cards = currentUiModel().cards;
  const added = Array.isArray(operations) && operations.some((op) => op && op.op === "add" && op.path === "/cards/-");
  if (added && Array.isArray(cards) && cards.length > before) held.onCardAdded(cards.length - 1, cards[cards.length - 1]);
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
  } else if (code === "too_many_devices") {
    disconnect(); // nothing of the session comes to a fifth device: no point in staying connected
    note("This session has as many devices as it may have (4): this browser is not on it. Connect tries again.");
  }
}

/** Another connection took this session over (this browser's device connected elsewhere, or
 * another device in its place): the conductor closes this connection and nothing more of the
 * session comes to it. Said once; no reconnecting, which would take the session back unasked
 * (Connect does, on purpose). */
function onTakenOver() {
  disconnect("taken over by another connection");
  note("This session was taken over by another connection. Connect takes it back.", "error taken-over");
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
  devices.toolEnded(payload.callId);
  progress.ownEnded(payload.callId, "cancelled");
  cancelled.add(payload.callId);
  call.controller.abort();
  call.item.classList.add("cancelled");
  call.item.append(el("span", { class: "mark", text: " — cancelled" }));
  if (payload.reason) call.item.title = payload.reason;
}

function parsedArguments(call) {
  try {
    const args = JSON.parse(call.arguments || "{}");
    return args && typeof args === "object" ? args : {};
  } catch {
    return null;
  }
}

function showState(state) {
  setState(state);
  held.onState(state);
  devices.onState(state);
  progress.onState(state);
}

/** A join's catch-up: the session's past, shown as it happened. Nothing is spoken, run or
 * answered (those calls were answered by the devices they went to). */
function replayToolCall(call) {
  const args = parsedArguments(call) || {};
  if (call.name === "convo.setState") showState(String(args.state || "idle"));
  else if (call.name !== "tts.speak") note(`→ ${call.name} ${call.arguments} (earlier)`, "note tool");
}

const PREVIEW_PREFIX = "conductor-preview-";

/** A running call of this browser says how far it got: sent to the conductor (which keeps it for
 * the model and shows it on the other devices) and shown here. Dropped while offline: the next
 * one says more. */
function reportProgress(call, fraction, message) {
  const payload = { callId: call.callId, fraction, message: String(message || "").slice(0, 200) };
  sendLive(makeEvent("toolProgress", payload));
  progress.onProgress({ ...payload, name: call.name }, { own: true });
}

function onToolCall(call) {
  if (isCatchingUp()) {
    replayToolCall(call);
    return;
  }
  if (cancelled.has(call.callId)) return; // the conductor cancelled it: nothing to say any more
  if (answerAgain(call.callId)) return; // the same result again (same id): harmless
  if (running.has(call.callId)) return; // the same call again while it runs: answered once done
  const args = parsedArguments(call);
  if (args === null) {
    answer(call.callId, null, "arguments are not JSON");
    return;
  }
  if (call.name === "convo.setState") {
    showState(String(args.state || "idle"));
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
    if (devices.talks()) mark("speak");
    speak(call.callId, String(args.text || ""));
    return;
  }
  if (!devices.runsTools()) {
    note(`→ ${call.name} ${call.arguments} — not run here: this browser joined without tools`, "note tool");
    answer(call.callId, null, `this device does not run tools on this session (it joined to ${settings.mode})`);
    return;
  }
  // The conductor's read for a held change's card (its id starts with conductor-preview-) is run
  // as any read; it is not the model's, so the answer being spoken (the question) goes on.
  const preview = call.callId.startsWith(PREVIEW_PREFIX);
  if (!preview) forgetHeardAnswer(); // the model's tools end the answer being spoken
  const item = note(`→ ${call.name} ${call.arguments}${preview ? " (for the change's card)" : ""}`);
  const controller = new AbortController();
  let over = false; // answered: a late report of the tool is dropped (as is one after a cancel)
  const report = (fraction, message) => {
    if (!over && !controller.signal.aborted) reportProgress(call, fraction, message);
  };
  const result = runTool(call.name, args, controller.signal, report);
  if (!result) {
    answer(call.callId, null, `the console has no tool ${call.name}`);
    return;
  }
  running.set(call.callId, { item, controller });
  devices.toolStarted(call.callId, call.name);
  const done = (value, error = null) => {
    over = true;
    devices.toolEnded(call.callId);
    if (!running.delete(call.callId)) return; // cancelled meanwhile: not answered
    progress.ownEnded(call.callId, error === null ? "done" : "failed");
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
  $("device-name").value = devices.deviceName();
  $("device-id").textContent = devices.deviceId();

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
  applyMode();

  $("speak-aloud").addEventListener("change", (e) => {
    settings.speakAloud = e.target.checked;
    store.set("speakAloud", String(e.target.checked));
  });
  $("settings-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    settings.url = $("url").value.trim() || defaultUrl;
    devices.setDeviceName($("device-name").value);
    $("device-name").value = devices.deviceName();
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
  memories.wireMemories();
  wireFolderPicker();
}

// ---- the start ----------------------------------------------------------------------------------

async function start() {
  onEvent(handle);
  setCardDecorator(held.decorateCard);
  wire();
  renderFiles();
  renderCards();
  devices.renderDevices();
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
  /** The callIds whose progress line shows them running (this browser's or another device's). */
  get progressCalls() {
    return progress.liveCalls();
  },
  say: sendFinal,
  bargeIn,
  /** This browser as a device: its id, name and roles (what its sessionStart sends). */
  get device() {
    return devices.deviceField();
  },
  get mode() {
    return settings.mode;
  },
  /** The devices present, as the conductor last listed them (empty: only this browser). */
  get devices() {
    return devices.present.devices;
  },
  /** Who runs the model's tools now, as far as this browser can tell (null: none running). */
  get runner() {
    return devices.runner();
  },
  /** The confirmChange payloads sent and the held cards shown. */
  held: held.heldRecord,
  /** What each device sees of the person's project, as the Project panel shows it (one per device). */
  get projects() {
    return project.shownContexts();
  },
  /** The names heard shown: {eventId, matches, under} (under: the words of the line they went under). */
  namesHeard: namesShown,
  /** The phrases kept for the recognizer (the latest `vocabulary`). */
  get vocabulary() {
    return vocabulary.phrases;
  },
  /** How the recognizer last started was given them: "phrases", "grammar" or "none". */
  get vocabularyGiven() {
    return vocabulary.given;
  },
};

start();
