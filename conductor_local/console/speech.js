/* Speech: the answer spoken aloud (Web Speech synthesis, one tts.speak call after another, with
 * what was heard of it), barge-in, and the user's requests, typed or heard by speech recognition
 * (push-to-talk or hands-free, the recognizer given the project's names when it takes them), sent as
 * transcript events. A browser that joined to watch has no microphone's use: it never speaks,
 * listens, barges in or sends a transcript. */

import { answer, send } from "./connection.js";
import { talks } from "./devices.js";
import { $ } from "./dom.js";
import { transcriptSent } from "./names_heard.js";
import { makeEvent, wellFormed } from "./protocol.js";
import { settings } from "./settings.js";
import { startTurn } from "./timeline.js";
import { bias, refusedPhrases } from "./vocabulary.js";
import { currentState, dropInterim, note, showInterim, showUser } from "./view.js";

const PARTIAL_EVERY_MS = 250;
const NO_VOICE = "no_voice"; // tts.speak's reason when the browser has no voice to play the text
const PLAYBACK_FAILED = "playback_failed"; // … when its speech engine failed before a word was played
const CUT = new Set(["interrupted", "canceled"]); // utterance errors that a stop (barge-in) causes

function hasVoices(synth) {
  return typeof synth.getVoices !== "function" || synth.getVoices().length > 0;
}

/** Say on screen (once, and beside the talk button) that answers are shown, not spoken. */
function showNoVoice(none) {
  const noteShown = !$("no-voice").hidden;
  $("no-voice").hidden = !none;
  speech.noVoice = none;
  if (none && !noteShown) note("This browser has no speech voice: answers are shown, not spoken.");
}

/** Voices that arrive later (browsers load them after the page) end the no-voice note. */
export function watchVoices() {
  const synth = window.speechSynthesis;
  if (!synth || typeof synth.addEventListener !== "function") return;
  synth.addEventListener("voiceschanged", () => {
    if (speech.noVoice && hasVoices(synth)) showNoVoice(false);
  });
}

// ---- speaking: the answer played aloud ----------------------------------------------------------

const speech = {
  queue: [],
  current: null,
  heardParts: [], // what was heard of the answer being spoken
  dropping: false, // after a barge-in, speech of the interrupted answer is not played

  enqueue(callId, text) {
    if (this.dropping) {
      answer(callId, { spoken: false, heardText: wellFormed(this.heard()) });
      return;
    }
    this.queue.push({ callId, text });
    if (!this.current) this.next();
  },

  next() {
    const item = this.queue.shift();
    this.current = item || null;
    if (!item) return;
    item.heardUpTo = 0;
    const synth = window.speechSynthesis;
    if (!settings.speakAloud || !synth || typeof SpeechSynthesisUtterance === "undefined") {
      setTimeout(() => this.done(item), 0); // shown, not spoken: answered as played
      return;
    }
    if (this.noVoice && !hasVoices(synth)) {
      setTimeout(() => this.notPlayed(item, NO_VOICE), 0); // known: nothing to play it with
      return;
    }
    const utterance = new SpeechSynthesisUtterance(item.text);
    utterance.onstart = () => {
      item.started = true;
    };
    utterance.onboundary = (e) => {
      item.started = true;
      if (item.cancelled || (e.name && e.name !== "word")) return;
      const rest = item.text.slice(e.charIndex);
      const length = e.charLength || (rest.match(/^\S+/) || [""])[0].length;
      item.heardUpTo = Math.max(item.heardUpTo, e.charIndex + length);
    };
    utterance.onend = () => {
      if (!item.cancelled) this.done(item);
    };
    utterance.onerror = (e) => {
      if (item.cancelled) return;
      if (!item.started && !CUT.has(e && e.error)) {
        // nothing of it played, and not because of a barge-in: the browser could not play it
        this.notPlayed(item, hasVoices(synth) ? PLAYBACK_FAILED : NO_VOICE);
        return;
      }
      item.cancelled = true;
      answer(item.callId, { spoken: false, heardText: wellFormed(this.heard()) });
      this.current = null;
      this.next();
    };
    synth.speak(utterance);
  },

  /** Not played at all (no voice, or the speech engine failed before a word): answered as not played,
   * with the reason, so the conductor keeps the answer whole as shown (docs/protocol.md, tts.speak). */
  notPlayed(item, reason) {
    if (item.cancelled) return;
    item.cancelled = true;
    if (reason === NO_VOICE) showNoVoice(true);
    answer(item.callId, { spoken: false, heardText: "", reason });
    this.current = null;
    this.next();
  },

  noVoice: false, // the browser has shown it has no voice: the note is on screen

  done(item) {
    if (item.cancelled) return;
    this.heardParts.push(item.text);
    answer(item.callId, { spoken: true });
    this.current = null;
    this.next();
  },

  heard() {
    const parts = [...this.heardParts];
    if (this.current && this.current.heardUpTo) parts.push(this.current.text.slice(0, this.current.heardUpTo));
    return parts.join(" ").trim();
  },

  active() {
    return Boolean(this.current || this.queue.length);
  },

  /** Stop playback; every speak call not played in full is answered as interrupted. */
  stop(heard) {
    const items = [this.current, ...this.queue].filter(Boolean);
    this.queue = [];
    this.current = null;
    for (const item of items) item.cancelled = true;
    if (window.speechSynthesis) window.speechSynthesis.cancel();
    for (const item of items) answer(item.callId, { spoken: false, heardText: wellFormed(heard) });
  },
};

/** A tts.speak call: played after the ones before it, answered once played (or interrupted). */
export function speak(callId, text) {
  if (!talks()) {
    // a display device never speaks: not played, kept whole as shown (the conductor sends tts.speak
    // only to a voice device; this answers one that a conductor without devices sent anyway)
    answer(callId, { spoken: false, heardText: "", reason: NO_VOICE });
    return;
  }
  speech.enqueue(callId, text);
}

/** The model's other tools end the answer being spoken: what was heard of it starts over. */
export function forgetHeardAnswer() {
  speech.heardParts = [];
}

/** The user talked over the answer (or pressed Escape): stop it, as the protocol says. */
export function bargeIn(why) {
  if (!talks()) return false; // a display device does not interrupt the person's answer
  if (!speech.active() && currentState() === "idle") return false;
  const heard = speech.heard();
  send(makeEvent("error", { code: "audio.output.interrupted", message: why, heardText: wellFormed(heard) }));
  speech.stop(heard);
  speech.dropping = true;
  return true;
}

// ---- talking: typed text and speech recognition -------------------------------------------------

let lastPartialAt = -Infinity; // the first partial goes at once, however soon after the page loaded

function sendPartial(text) {
  if (!talks()) return;
  const now = performance.now();
  if (now - lastPartialAt < PARTIAL_EVERY_MS) return;
  lastPartialAt = now;
  send(makeEvent("userAudioTranscriptPartial", { text: wellFormed(text) }));
}

/** A request, typed or heard: shown, timed and sent as the final transcript. */
export function sendFinal(text) {
  text = wellFormed(text.trim());
  if (!text) return;
  if (!talks()) {
    note("Watching: this browser sends nothing. Join the session to talk to say something.");
    return;
  }
  if (speech.active()) bargeIn("the user started a new request");
  speech.dropping = false;
  speech.heardParts = [];
  const line = showUser(text);
  startTurn(text);
  const event = makeEvent("userAudioTranscriptFinal", { text });
  transcriptSent(event.id, line);
  send(event);
}

const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
const mic = { rec: null, mode: null, heardInterim: false, again: false };

function startListening(mode) {
  if (!Recognition || mic.rec || !talks()) return;
  const rec = new Recognition();
  rec.lang = navigator.language || "en-US";
  rec.interimResults = true;
  rec.continuous = mode === "hands-free";
  bias(rec);
  mic.rec = rec;
  mic.mode = mode;
  rec.onresult = (e) => {
    let interim = "";
    for (let i = e.resultIndex; i < e.results.length; i++) {
      const result = e.results[i];
      const text = result[0] ? result[0].transcript : "";
      if (result.isFinal) {
        if (text.trim()) sendFinal(text);
      } else interim += text;
    }
    if (interim.trim()) {
      if (speech.active()) bargeIn("the user spoke over the answer");
      showInterim(interim);
      sendPartial(interim);
    }
  };
  rec.onerror = (e) => {
    if (refusedPhrases(e.error)) {
      mic.again = true; // the names' phrases were refused: listen again without them
      return;
    }
    if (e.error !== "no-speech" && e.error !== "aborted") note(`speech recognition: ${e.error}`, "error");
  };
  rec.onend = () => {
    const wasHandsFree = mic.mode === "hands-free" && $("hands-free").checked;
    const stillHeld = mic.again && mic.mode === "push-to-talk" && $("talk").classList.contains("active");
    mic.rec = null;
    mic.mode = null;
    mic.again = false;
    dropInterim();
    if (wasHandsFree) startListening("hands-free");
    else if (stillHeld) startListening("push-to-talk");
    else $("listening").hidden = true;
  };
  $("listening").hidden = false;
  rec.start();
}

function stopListening() {
  if (mic.rec) mic.rec.stop();
}

/** The controls that talk follow the way this browser is on the session: watching, they are off
 * (and listening or speaking stops). */
export function applyMode() {
  const on = talks();
  for (const id of ["say", "send", "barge-in"]) $(id).disabled = !on;
  $("talk").disabled = !on || !Recognition;
  $("hands-free").disabled = !on || !Recognition;
  if (on) return;
  $("hands-free").checked = false;
  stopListening();
}

/** The talk button (hold to talk: mouse, Space or Enter) and the hands-free switch, when the
 * browser has speech recognition; otherwise the note that it has none. */
export function wireTalking() {
  if (!Recognition) {
    $("no-recognition").hidden = false;
    return;
  }
  const talk = $("talk");
  talk.disabled = false;
  $("hands-free").disabled = false;
  const down = () => {
    talk.classList.add("active");
    talk.setAttribute("aria-pressed", "true");
    startListening("push-to-talk");
  };
  const up = () => {
    talk.classList.remove("active");
    talk.setAttribute("aria-pressed", "false");
    if (mic.mode === "push-to-talk") stopListening();
  };
  talk.addEventListener("pointerdown", down);
  talk.addEventListener("pointerup", up);
  talk.addEventListener("pointerleave", up);
  talk.addEventListener("keydown", (e) => {
    if ((e.key === " " || e.key === "Enter") && !e.repeat) {
      e.preventDefault();
      down();
    }
  });
  talk.addEventListener("keyup", (e) => {
    if (e.key === " " || e.key === "Enter") {
      e.preventDefault();
      up();
    }
  });
  $("hands-free").addEventListener("change", (e) => {
    if (e.target.checked) startListening("hands-free");
    else stopListening();
  });
}
