/* The Project panel: what each device of the session sees of the person's project
 * (docs/protocol.md, "The person's project"), from the `workspaceContext` the conductor forwards
 * to the displays, naming the device it came from. One entry per device, the latest replacing the
 * one before; a device that leaves takes its entry with it; hidden while no device sent one. */

import { $, el } from "./dom.js";
import { workspaceContextOf } from "./protocol.js";

const DIAGNOSTICS_SHOWN = 3;
const FILES_LISTED = 10; // the changed files named in the count's tooltip
const UNNAMED = "a device";

const contexts = new Map(); // the device's name -> its latest context, in the order they came

/** The contexts shown, one per device, as the console read them. */
export function shownContexts() {
  return [...contexts.values()];
}

/** A device's new context: it replaces the one before from the same device. */
export function onContext(payload) {
  const context = workspaceContextOf(payload);
  if (!context) return;
  const device = context.device || UNNAMED;
  contexts.delete(device); // the newest last
  contexts.set(device, { ...context, device });
  render();
}

/** The device named `name` left the session: what it saw is no longer the person's project. */
export function deviceLeft(name) {
  if (contexts.delete(name)) render();
}

/** Another session: nothing known of its devices' project yet. */
export function forgetProject() {
  contexts.clear();
  render();
}

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function openFileLine(context) {
  const { openFile, selection } = context;
  if (!openFile) return null;
  let text = `open: ${openFile.path}`;
  if (openFile.cursorLine) text += `:${openFile.cursorLine}`;
  if (openFile.language) text += ` (${openFile.language})`;
  if (selection && selection.startLine) {
    const lines = selection.endLine && selection.endLine !== selection.startLine
      ? `lines ${selection.startLine}–${selection.endLine}`
      : `line ${selection.startLine}`;
    text += selection.path === openFile.path ? ` · selected ${lines}` : ` · selected ${lines} of ${selection.path}`;
  }
  return el("span", { class: "project-open", text });
}

function changedLine(context) {
  const files = context.changedFiles;
  const item = el("span", {
    class: "project-changed",
    text: files.length ? `${plural(files.length, "changed file")}` : "no changed files",
  });
  if (files.length) {
    const more = files.length > FILES_LISTED ? `\n… and ${files.length - FILES_LISTED} more` : "";
    item.title = files.slice(0, FILES_LISTED).join("\n") + more;
  }
  return item;
}

function diagnosticsList(context) {
  const all = context.diagnostics;
  if (!all.length) return null;
  const list = el("ul", { class: "project-diagnostics" });
  for (const d of all.slice(0, DIAGNOSTICS_SHOWN)) {
    const where = d.line ? `${d.path}:${d.line}` : d.path;
    list.append(el("li", { class: `diagnostic diagnostic-${d.severity}`, text: `${d.severity} ${where}: ${d.message}` }));
  }
  if (all.length > DIAGNOSTICS_SHOWN) {
    list.append(el("li", { class: "diagnostic-more", text: `and ${all.length - DIAGNOSTICS_SHOWN} more` }));
  }
  return list;
}

function entry(context) {
  const head = el(
    "p",
    { class: "project-head" },
    el("span", { class: "project-device", text: context.device }),
    el("span", { class: "project-workspace", text: ` · ${context.workspace}` }),
  );
  if (context.branch) head.append(el("span", { class: "project-branch", text: ` · ${context.branch}` }));
  const item = el("li", { class: "project-entry", "data-device": context.device }, head);
  const open = openFileLine(context);
  if (open) item.append(open);
  item.append(changedLine(context));
  const diagnostics = diagnosticsList(context);
  if (diagnostics) item.append(diagnostics);
  if (context.runningTasks.length) {
    item.append(el("span", { class: "project-tasks", text: `running: ${context.runningTasks.join(", ")}` }));
  }
  return item;
}

function render() {
  const panel = $("project-panel");
  if (!panel) return;
  panel.hidden = contexts.size === 0;
  $("project-contexts").replaceChildren(...shownContexts().map(entry));
}
