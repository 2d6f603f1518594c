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

/** A `toolProgress` as the console shows it, or null when it names no call: {callId, name,
 * fraction, message}. The conductor forwards the progress of a call another device runs with the
 * tool's `name` (optional: null when absent); a fraction that is not a number from 0 to 1 is left
 * out (null), as is a message that is not text (""). */
export function progressOf(payload) {
  if (!payload || typeof payload.callId !== "string" || !payload.callId) return null;
  const { fraction, name, message } = payload;
  return {
    callId: payload.callId,
    name: typeof name === "string" && name ? name : null,
    fraction: typeof fraction === "number" && fraction >= 0 && fraction <= 1 ? fraction : null,
    message: typeof message === "string" ? message : "",
  };
}
