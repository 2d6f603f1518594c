/* Test doubles for the Web Speech API, installed before the console's scripts run. They fire the
 * events the browser's own objects fire (onresult with interim and final results; onboundary for
 * each word, then onend; cancel() ends playback with an "interrupted" error; with __fake.noVoices,
 * a browser without voices: getVoices() is empty and speak() fails at once), so the console's
 * code paths are the ones a real browser drives. Driven from the tests through window.__fake,
 * which also records the page's uncaught errors (window.__fake.errors). */
(() => {
  const fake = (window.__fake = { msPerWord: 40, utterances: [], words: [], recognition: null, errors: [] });
  // a page with a voice, unless a test sets noVoices (then every utterance is unplayed)
  fake.voice = { name: "Test voice", lang: "en-US", default: true, localService: true, voiceURI: "test" };
  fake.noVoices = false;
  fake.unplayed = [];

  // uncaught exceptions and unhandled rejections in the page, which the tests expect none of
  window.addEventListener("error", (e) => fake.errors.push(String(e.message || e.error)));
  window.addEventListener("unhandledrejection", (e) => fake.errors.push(String(e.reason && (e.reason.stack || e.reason))));

  class FakeUtterance {
    constructor(text) {
      this.text = text;
      this.onboundary = this.onend = this.onerror = null;
    }
  }

  const synth = {
    current: null,
    timers: [],
    get speaking() {
      return this.current !== null;
    },
    speak(utterance) {
      if (fake.noVoices) {
        // a browser without voices (headless Chromium): the utterance fails before a word is played
        fake.unplayed.push(utterance.text);
        setTimeout(() => utterance.onerror && utterance.onerror({ error: "synthesis-failed" }), 0);
        return;
      }
      this.current = utterance;
      fake.utterances.push(utterance.text);
      const words = [...utterance.text.matchAll(/\S+/g)];
      words.forEach((match, i) => {
        this.timers.push(
          setTimeout(() => {
            fake.words.push(match[0]);
            utterance.onboundary && utterance.onboundary({ name: "word", charIndex: match.index, charLength: match[0].length });
          }, i * fake.msPerWord),
        );
      });
      this.timers.push(
        setTimeout(() => {
          this.current = null;
          utterance.onend && utterance.onend({});
        }, words.length * fake.msPerWord + 5),
      );
    },
    cancel() {
      const utterance = this.current;
      this.timers.forEach(clearTimeout);
      this.timers = [];
      this.current = null;
      if (utterance && utterance.onerror) utterance.onerror({ error: "interrupted" });
    },
    getVoices: () => (fake.noVoices ? [] : [fake.voice]),
    addEventListener() {},
  };

  class FakeRecognition {
    constructor() {
      this.onresult = this.onend = this.onerror = null;
      this.interimResults = false;
      this.continuous = false;
    }
    start() {
      fake.recognition = this;
    }
    stop() {
      if (fake.recognition === this) fake.recognition = null;
      setTimeout(() => this.onend && this.onend({}), 0);
    }
  }

  /** The user says something: interim results, then (when given) the final one. */
  fake.hear = (interims, final) => {
    const rec = fake.recognition;
    if (!rec) throw new Error("nothing is listening");
    const result = (text, isFinal) => Object.assign([{ transcript: text, confidence: 0.9 }], { isFinal });
    for (const text of interims) rec.onresult({ resultIndex: 0, results: [result(text, false)] });
    if (final !== undefined) rec.onresult({ resultIndex: 0, results: [result(final, true)] });
  };

  Object.defineProperty(window, "speechSynthesis", { value: synth, configurable: true });
  window.SpeechSynthesisUtterance = FakeUtterance;
  window.SpeechRecognition = FakeRecognition;
  window.webkitSpeechRecognition = FakeRecognition;
})();
