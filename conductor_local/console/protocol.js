/* The protocol's events (docs/protocol.md): ids, well-formed text, building an event and reading
 * its kind. */

export const CAPABILITIES = ["sentenceSpeech", "speakingState", "executingState"];

export function uuid4() {
  const b = crypto.getRandomValues(new Uint8Array(16)); // works outside secure contexts too
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Text as the conductor accepts it: a lone surrogate (a string cut inside an emoji) becomes
 * U+FFFD here, since the conductor refuses such an event (invalid_event). */
export function wellFormed(text) {
  if (typeof text !== "string") return text;
  if (typeof text.toWellFormed === "function") return text.toWellFormed();
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

export function makeEvent(kind, payload) {
  return { id: uuid4(), timestamp: new Date().toISOString(), kind: { [kind]: payload } };
}

export function kindOf(event) {
  const [name] = Object.keys(event.kind || {});
  return [name, event.kind ? event.kind[name] : undefined];
}
