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

const text = (value, max) => (typeof value === "string" && value ? value.slice(0, max) : null);
const line = (value) => (Number.isInteger(value) && value >= 1 ? value : null);
const texts = (value, max) => (Array.isArray(value) ? value.map((v) => text(v, max)).filter(Boolean) : []);

/** A `workspaceContext` as the console shows it (what a device sees of the person's project), or
 * null without a workspace: {device, workspace, openFile {path, language, cursorLine} | null,
 * selection {path, startLine, endLine} | null, branch, changedFiles, diagnostics [{path, line,
 * severity, message}], runningTasks}. What is not of the protocol's shape is left out. */
export function workspaceContextOf(payload) {
  const workspace = text(payload && payload.workspace, 100);
  if (!workspace) return null;
  const open = payload.openFile && text(payload.openFile.path, 512);
  const chosen = payload.selection && text(payload.selection.path, 512);
  return {
    device: text(payload.device, 64),
    workspace,
    openFile: open
      ? { path: open, language: text(payload.openFile.language, 64), cursorLine: line(payload.openFile.cursorLine) }
      : null,
    selection: chosen
      ? { path: chosen, startLine: line(payload.selection.startLine), endLine: line(payload.selection.endLine) }
      : null,
    branch: text(payload.branch, 200),
    changedFiles: texts(payload.changedFiles, 512),
    diagnostics: (Array.isArray(payload.diagnostics) ? payload.diagnostics : [])
      .filter((d) => d && text(d.path, 512))
      .map((d) => ({ path: d.path, line: line(d.line), severity: text(d.severity, 16) || "info", message: text(d.message, 300) || "" })),
    runningTasks: texts(payload.runningTasks, 200),
  };
}

/** A `namesHeard`'s matches: [{heard, name, path}] (`path` null when not given); those without a
 * heard phrase or a name are left out. */
export function namesHeardOf(payload) {
  const matches = payload && Array.isArray(payload.matches) ? payload.matches : [];
  return matches
    .filter((m) => m && text(m.heard, 200) && text(m.name, 128))
    .map((m) => ({ heard: m.heard, name: m.name, path: text(m.path, 512) }));
}

/** A `vocabulary`'s phrases (text only, at most 100). */
export function phrasesOf(payload) {
  return texts(payload && payload.phrases, 100).slice(0, 100);
}
