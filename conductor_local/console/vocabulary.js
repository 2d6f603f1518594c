/* The recognizer's vocabulary (docs/protocol.md, "Names heard right"): the phrases of the
 * workspace's names the conductor sends the voice devices (`vocabulary`), kept, counted on the
 * page, and given to the browser's speech recognition when it takes them: contextual biasing
 * (`SpeechRecognition.phrases` of `SpeechRecognitionPhrase`), else a JSGF grammar
 * (`SpeechGrammarList`). A recognizer that refuses the phrases (`phrases-not-supported`) is started
 * again without them, and they are not given to it again. */

import { $ } from "./dom.js";
import { phrasesOf } from "./protocol.js";

const BOOST = 5; // about e^5 times likelier than the recognizer thinks: names, not ordinary words
const GRAMMAR_WEIGHT = 1;
const SPOKEN = /^[\p{L}\p{N}][\p{L}\p{N} '-]*$/u; // what a JSGF rule may hold as is
const PHRASES_REFUSED = "phrases-not-supported";

export const vocabulary = { phrases: [], phrasesRefused: false, given: "none" };

export function onVocabulary(payload) {
  vocabulary.phrases = phrasesOf(payload);
  render();
}

/** Another session: its names are not this one's. */
export function forgetVocabulary() {
  vocabulary.phrases = [];
  render();
}

function grammarList() {
  const List = window.SpeechGrammarList || window.webkitSpeechGrammarList;
  return typeof List === "function" ? new List() : null;
}

/** Give recognizer `rec` (not started yet) the kept phrases, the way it takes them. What it was
 * given is kept in `vocabulary.given`: "phrases", "grammar" or "none". */
export function bias(rec) {
  vocabulary.given = "none";
  const phrases = vocabulary.phrases;
  if (!phrases.length) return;
  const Phrase = window.SpeechRecognitionPhrase;
  try {
    if (!vocabulary.phrasesRefused && typeof Phrase === "function" && "phrases" in rec) {
      rec.phrases = phrases.map((phrase) => new Phrase(phrase, BOOST));
      vocabulary.given = "phrases";
      return;
    }
    const list = "grammars" in rec ? grammarList() : null;
    const spoken = phrases.filter((phrase) => SPOKEN.test(phrase));
    if (list && spoken.length) {
      list.addFromString(`#JSGF V1.0; grammar names; public <name> = ${spoken.join(" | ")} ;`, GRAMMAR_WEIGHT);
      rec.grammars = list;
      vocabulary.given = "grammar";
    }
  } catch {
    vocabulary.given = "none"; // a recognizer that takes neither still listens, without them
  }
}

/** The recognizer failed with `error`: true when it was because of the phrases (then it is to be
 * started again, and is never given them again). */
export function refusedPhrases(error) {
  if (error !== PHRASES_REFUSED || vocabulary.given !== "phrases") return false;
  vocabulary.phrasesRefused = true;
  return true;
}

function render() {
  const node = $("vocabulary");
  if (!node) return;
  const count = vocabulary.phrases.length;
  node.hidden = count === 0;
  $("vocabulary-count").textContent = String(count);
  node.title = count ? `The recognizer is told to expect: ${vocabulary.phrases.slice(0, 20).join(", ")}${count > 20 ? ", …" : ""}` : "";
}
