/* The Sessions panel: the person's sessions from the sessions API, newest activity first (title,
 * last active, turns, status), "More" for the next page; each one can be resumed (as this browser's
 * own), joined beside the devices already on it (to watch: display only; to talk: voice and
 * display), renamed in place, ended and erased (after a confirm()). What a session cost so far (its `usage`, which only
 * `GET /sessions/{id}` answers) is shown for the current one, and for another on "Cost". Failures
 * are the console's usual notes. */

import { $, el } from "./dom.js";
import { describe, endSession, eraseSession, getSession, listSessions, renameSession } from "./sessions.js";
import { joinSession, leaveSession, resumeSession, showTitle } from "./session_switch.js";
import { settings } from "./settings.js";
import { totalsLine } from "./usage.js";
import { note } from "./view.js";

const PAGE = 20;
const TITLE_MAX = 60;
const WEEK_S = 7 * 24 * 3600;
const UNITS = [
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];

const panel = { cursor: null, loads: 0 };

function status(text) {
  $("sessions-status").textContent = text;
}

function failed(error, what) {
  const text = describe(error, what);
  status(text);
  if (error.kind !== "not_configured") note(text, "error");
  if (error.kind === "unauthorized") $("settings-panel").open = true;
}

// ---- times --------------------------------------------------------------------------------------

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** "5 minutes ago" within a week, else the local date and time. */
export function lastActive(iso) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const seconds = Math.round((at - Date.now()) / 1000);
  if (Math.abs(seconds) >= WEEK_S) return new Date(at).toLocaleString();
  const [unit, size] = UNITS.find(([, s]) => Math.abs(seconds) >= s) || UNITS[UNITS.length - 1];
  return relative.format(Math.round(seconds / size), unit);
}

// ---- one session --------------------------------------------------------------------------------

const nameOf = (session) => session.title || "Untitled";

function row(session) {
  const item = el("li", { class: "session-row", "data-session-id": session.id });
  fill(item, session);
  return item;
}

function button(cls, text, label, action) {
  const node = el("button", { type: "button", class: cls, "aria-label": label }, text);
  node.addEventListener("click", action);
  return node;
}

function fill(item, session) {
  const name = nameOf(session);
  const current = session.id === settings.sessionId;
  item.classList.toggle("current", current);
  item.dataset.status = session.status;
  const head = el("span", { class: `session-name${session.title ? "" : " untitled"}`, text: name });
  const time = el("time", { datetime: session.lastActiveAt, title: new Date(session.lastActiveAt).toLocaleString() });
  time.textContent = lastActive(session.lastActiveAt);
  const turns = `${session.turns} ${session.turns === 1 ? "turn" : "turns"}`;
  const meta = el("span", { class: "session-meta" }, `${turns} · ${session.status} · last active `, time);
  const endButton = button("end", "End", `End ${name}`, () => endOne(item, session));
  endButton.disabled = session.status === "ended";
  const cost = session.usage ? `Cost so far: ${totalsLine(session.usage)}` : "";
  item.replaceChildren(
    el("div", { class: "session-head" }, head, current ? el("span", { class: "current-mark", text: " (this session)" }) : ""),
    meta,
    el("span", { class: "session-usage", text: cost }),
    el(
      "div",
      { class: "buttons" },
      button("resume", current ? "Reload" : "Resume", `Resume ${name}`, () => resume(session)),
      button("join-watch", "Join to watch", `Join ${name} to watch (display only)`, () => join(session, "watch")),
      button("join-talk", "Join to talk", `Join ${name} to talk (voice and display)`, () => join(session, "talk")),
      button("cost", "Cost", `What ${name} cost`, () => showCost(item, session)),
      button("rename", "Rename", `Rename ${name}`, () => editTitle(item, session)),
      endButton,
      button("erase", "Erase", `Erase ${name}`, () => eraseOne(item, session)),
    ),
  );
}

function editTitle(item, session) {
  const input = el("input", { class: "rename-input", maxlength: String(TITLE_MAX), "aria-label": "New title" });
  input.value = session.title || "";
  const form = el(
    "form",
    { class: "rename-form" },
    input,
    el("button", { type: "submit", class: "save" }, "Save"),
    button("cancel", "Cancel", "Cancel renaming", () => fill(item, session)),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const title = input.value.trim();
    if (!title || title.length > TITLE_MAX) {
      status(`A title has 1 to ${TITLE_MAX} characters.`);
      return;
    }
    try {
      const renamed = await renameSession(session.id, title);
      Object.assign(session, renamed);
      status(`Renamed to “${session.title}”.`);
      if (session.id === settings.sessionId) showTitle(session.title);
    } catch (error) {
      failed(error, "Renaming the session");
    }
    fill(item, session);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    e.stopPropagation(); // Escape here cancels the renaming, it does not stop the answer
    fill(item, session);
    item.querySelector(".rename").focus();
  });
  item.querySelector(".session-head").replaceWith(form);
  input.focus();
  input.select();
}

/** Read the session's totals (`usage`) and show them in its row. */
async function showCost(item, session) {
  try {
    const { usage } = await getSession(session.id, { limit: 1 });
    if (!usage || !item.isConnected) return;
    session.usage = usage;
    fill(item, session);
  } catch (error) {
    failed(error, "Reading what the session cost");
  }
}

function resume(session) {
  closePanel();
  $("say").focus();
  resumeSession(session).catch((error) => note(describe(error, "Resuming the session"), "error"));
}

function join(session, mode) {
  closePanel();
  joinSession(session, mode);
  $(mode === "talk" ? "say" : "sessions-button").focus();
}

async function endOne(item, session) {
  try {
    const current = await leaveSession(session.id, async (id) => Object.assign(session, await endSession(id)));
    status(`Ended “${nameOf(session)}”.${current ? " A new session has started." : ""}`);
  } catch (error) {
    failed(error, "Ending the session");
  }
  fill(item, session);
}

async function eraseOne(item, session) {
  if (!window.confirm(`Erase “${nameOf(session)}”? Everything said in it is deleted, for good.`)) return;
  try {
    const current = await leaveSession(session.id, eraseSession);
    item.remove();
    status(`Erased “${nameOf(session)}”.${current ? " A new session has started." : ""}`);
    if (current) note("The session was erased: this is a new one.");
  } catch (error) {
    failed(error, "Erasing the session");
  }
}

// ---- the list -----------------------------------------------------------------------------------

async function load(fromStart) {
  const mine = ++panel.loads;
  const list = $("session-list");
  if (fromStart) panel.cursor = null;
  status("Loading…");
  $("sessions-more").hidden = true;
  let page;
  try {
    page = await listSessions({ cursor: panel.cursor, limit: PAGE });
  } catch (error) {
    if (mine === panel.loads) failed(error, "Listing the sessions");
    return;
  }
  if (mine !== panel.loads) return;
  if (fromStart) list.replaceChildren();
  const shown = new Set([...list.children].map((li) => li.dataset.sessionId));
  for (const session of page.sessions || []) {
    if (shown.has(session.id)) continue; // moved to a later page meanwhile
    const item = row(session);
    list.append(item);
    if (session.id === settings.sessionId) {
      if (session.title) showTitle(session.title);
      showCost(item, session);
    }
  }
  panel.cursor = page.nextCursor || null;
  $("sessions-more").hidden = !panel.cursor;
  status(list.children.length ? "" : "No sessions yet.");
}

function openPanel() {
  $("sessions-panel").hidden = false;
  $("sessions-button").setAttribute("aria-expanded", "true");
  load(true);
}

function closePanel() {
  $("sessions-panel").hidden = true;
  $("sessions-button").setAttribute("aria-expanded", "false");
}

export function wireSessionList() {
  $("sessions-button").addEventListener("click", () => ($("sessions-panel").hidden ? openPanel() : closePanel()));
  $("sessions-close").addEventListener("click", () => {
    closePanel();
    $("sessions-button").focus();
  });
  $("sessions-refresh").addEventListener("click", () => load(true));
  $("sessions-more").addEventListener("click", () => load(false));
}
