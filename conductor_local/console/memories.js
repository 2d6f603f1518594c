/* The Memories panel: what the conductor remembers about the signed-in person, from the sessions
 * API's /memories: each memory's words, kind, scope (the project it is about) and when it was
 * remembered, "More" for the next page. *Forget* deletes one (one already gone, a 404, is simply
 * no longer shown); *Forget everything* deletes them all after a confirm().
 * The list is read when the panel is opened, on Refresh, and again after each final answer while
 * it is open (a turn may have remembered something). A failure is the panel's status line. */

import { $, el } from "./dom.js";
import { describe, request, sessionsBase } from "./sessions.js";
import { lastActive } from "./session_list.js";

const PAGE = 20;
const SCOPES = { person: "about you", session: "from a session" };

const panel = { cursor: null, loads: 0 };
const forgotten = new Set(); // ids forgotten here: a list read before that is not to show them again

/** The memories' base URL (…/memories, beside …/sessions), or null when the API is not configured. */
function memoriesBase() {
  const base = sessionsBase();
  return base ? base.replace(/\/sessions$/, "/memories") : null;
}

const api = (method, path = "", options = {}) => request(method, path, { ...options, base: memoriesBase() });

function status(text, failed = false) {
  const line = $("memories-status");
  line.textContent = text;
  line.classList.toggle("error", failed);
}

function failed(error, what) {
  let text = describe(error, what);
  if (error.kind === "not_found") text = `${what}: this stage's sessions API has no memories (404).`;
  status(text.replace(/\s+/g, " "), true); // one line, whatever the server said
  if (error.kind === "unauthorized") $("settings-panel").open = true;
}

// ---- one memory ---------------------------------------------------------------------------------

function scopeText(memory) {
  if (memory.scope === "project") return memory.project ? `project ${memory.project}` : "a project";
  return SCOPES[memory.scope] || String(memory.scope || "");
}

function row(memory) {
  const text = String(memory.text ?? "");
  const item = el("li", { class: "memory-row", "data-memory-id": String(memory.id) });
  const meta = el("span", { class: "memory-meta" }, `${String(memory.kind || "memory")} · ${scopeText(memory)}`);
  const at = Date.parse(memory.createdAt);
  if (!Number.isNaN(at)) {
    const time = el("time", { datetime: String(memory.createdAt), title: new Date(at).toLocaleString() });
    time.textContent = lastActive(memory.createdAt);
    meta.append(" · remembered ", time);
  }
  const forget = el("button", { type: "button", class: "forget", "aria-label": `Forget: ${text}` }, "Forget");
  forget.addEventListener("click", () => forgetOne(item, memory, forget));
  item.append(el("span", { class: "memory-text", text }), meta, el("div", { class: "buttons" }, forget));
  return item;
}

async function forgetOne(item, memory, button) {
  button.disabled = true;
  try {
    await api("DELETE", `/${encodeURIComponent(memory.id)}`);
  } catch (error) {
    if (error.kind !== "not_found") {
      // a 404 means it is already forgotten: the row goes as if this request had done it
      button.disabled = false;
      failed(error, "Forgetting the memory");
      return;
    }
  }
  forgotten.add(String(memory.id));
  item.remove();
  status($("memory-list").children.length ? "Forgotten." : "Nothing remembered.");
}

async function forgetAll() {
  if (!window.confirm("Forget everything the conductor remembers about you? This cannot be undone.")) return;
  panel.loads++; // a list being read now is moot
  let answer;
  try {
    answer = await api("DELETE");
  } catch (error) {
    failed(error, "Forgetting everything");
    return;
  }
  const deleted = Number(answer && answer.deleted) || 0;
  $("memory-list").replaceChildren();
  panel.cursor = null;
  $("memories-more").hidden = true;
  status(`Forgot everything (${deleted} ${deleted === 1 ? "memory" : "memories"}).`);
}

// ---- the list -----------------------------------------------------------------------------------

async function load(fromStart) {
  const mine = ++panel.loads;
  const list = $("memory-list");
  if (fromStart) panel.cursor = null;
  status("Loading…");
  $("memories-more").hidden = true;
  let page;
  try {
    page = await api("GET", "", { query: { cursor: panel.cursor, limit: PAGE } });
  } catch (error) {
    if (mine === panel.loads) failed(error, "Listing the memories");
    return;
  }
  if (mine !== panel.loads) return;
  if (fromStart) list.replaceChildren();
  const shown = new Set([...list.children].map((li) => li.dataset.memoryId));
  for (const memory of (page && page.memories) || []) {
    if (!memory || shown.has(String(memory.id)) || forgotten.has(String(memory.id))) continue;
    list.append(row(memory));
  }
  panel.cursor = (page && page.nextCursor) || null;
  $("memories-more").hidden = !panel.cursor;
  status(list.children.length ? "" : "Nothing remembered.");
}

/** A final answer came: a turn may have remembered something, so an open panel reads the list again. */
export function onFinalAnswer() {
  if ($("memories-panel").open) load(true);
}

export function wireMemories() {
  $("memories-panel").addEventListener("toggle", () => {
    if ($("memories-panel").open) load(true);
  });
  $("memories-refresh").addEventListener("click", () => load(true));
  $("memories-more").addEventListener("click", () => load(false));
  $("memories-forget-all").addEventListener("click", forgetAll);
}
