/* This browser as one device of a session (docs/protocol.md, "Several devices"): its stable id
 * (kept in localStorage), its name, its roles for the way it is on the session, the
 * `sessionStart.device` it sends; the devices present (from sessionReady.devices and
 * devicesChanged) shown in the Devices list; and, while the model's tools run, which device runs
 * them, as far as the events this browser receives tell. */

import { $, el } from "./dom.js";
import { settings, store } from "./settings.js";
import { note } from "./view.js";

const ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;
const NAME_MAX = 64;
export const ROLES = {
  own: ["voice", "display", "tools"], // its own session: it talks and answers from the demo project
  talk: ["voice", "display"], // joined to talk: it hears and speaks, the tools stay where they run
  watch: ["display"], // joined to watch: it shows the conversation, never speaks or listens
};
const MODE_LINES = {
  own: "",
  talk: "Joined to talk: this browser speaks and listens; tools run on the session's other devices.",
  watch: "Watching: this browser shows the conversation only. It never speaks, listens or sends what you type.",
};

function randomHex(bytes) {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** This browser's device id: made once, kept in localStorage, the same for every session. */
export function deviceId() {
  const kept = store.get("deviceId");
  if (kept && ID_PATTERN.test(kept)) return kept;
  const made = `browser-${randomHex(8)}`;
  store.set("deviceId", made);
  return made;
}

/** The browser's family, for the default name: "Edge", "Opera", "Firefox", "Chrome" or "Safari". */
export function browserName(agent = navigator.userAgent) {
  if (/\bEdg(e|A|iOS)?\//.test(agent)) return "Edge";
  if (/\bOPR\//.test(agent)) return "Opera";
  if (/\b(Firefox|FxiOS)\//.test(agent)) return "Firefox";
  if (/\b(HeadlessChrome|Chrome|Chromium|CriOS)\//.test(agent)) return "Chrome";
  if (/\bSafari\//.test(agent)) return "Safari";
  return "a browser";
}

/** The name the other devices show for this one (the settings' *Device name*, else the default). */
export function deviceName() {
  const kept = (store.get("deviceName") || "").trim();
  return (kept || `Browser console — ${browserName()}`).slice(0, NAME_MAX);
}

export function setDeviceName(name) {
  const trimmed = String(name || "").trim().slice(0, NAME_MAX);
  store.set("deviceName", trimmed || null);
}

export function roles() {
  return ROLES[settings.mode] || ROLES.own;
}

/** With a microphone's use: it may speak, listen, send transcripts and barge in. */
export function talks() {
  return roles().includes("voice");
}

/** It answers the model's tool calls (from the demo project or a picked folder). */
export function runsTools() {
  return roles().includes("tools");
}

/** `sessionStart.device`. */
export function deviceField() {
  return { id: deviceId(), name: deviceName(), roles: roles() };
}

// ---- the devices present ------------------------------------------------------------------------

export const present = {
  devices: [], // as the conductor listed them (DeviceSeen), this one marked self
  listed: false, // the conductor listed them (false: this browser knows only itself)
  state: "idle",
  running: new Map(), // this browser's own running calls: callId -> tool name
};

function valid(devices) {
  return Array.isArray(devices)
    ? devices.filter((d) => d && typeof d.id === "string").map((d) => ({ ...d, roles: Array.isArray(d.roles) ? d.roles : [] }))
    : [];
}

/** The answer to this connection's sessionStart: the devices present when there are several;
 * none listed means this browser is the only one. */
export function onReady(ready) {
  present.listed = Array.isArray(ready.devices);
  present.devices = valid(ready.devices);
  render();
}

/** Another device joined or left: the new list, and a note in the transcript. */
export function onChanged(change) {
  const before = present.devices;
  present.devices = valid(change.devices);
  present.listed = true;
  const named = (id, list) => {
    const found = list.find((d) => d.id === id);
    return found ? found.name || found.id : id;
  };
  if (typeof change.joined === "string") note(`${named(change.joined, present.devices)} joined this session.`);
  if (typeof change.left === "string") note(`${named(change.left, before)} left this session.`);
  render();
}

/** A new connection (another session, or this one again): nothing known of the others yet. */
export function forgetDevices() {
  present.devices = [];
  present.listed = false;
  present.running.clear();
  render();
}

export function onState(state) {
  present.state = state;
  render();
}

export function toolStarted(callId, name) {
  present.running.set(callId, name);
  render();
}

export function toolEnded(callId) {
  if (present.running.delete(callId)) render();
}

const label = (device) => device.name || device.id;

/** Who runs the model's tools now, as far as this browser can tell: null when none is running;
 * else {self, device, text}. A `toolCall` reaches only the device that runs it, so this browser
 * knows its own calls for certain; for the others it knows only that the state is `executing` and
 * which devices have the `tools` role, and applies the routing rule (the device that spoke last if
 * it runs tools, else the one that joined last of those that do) where that settles it. */
export function runner() {
  if (present.running.size) {
    return { self: true, device: null, text: `this browser (${[...new Set(present.running.values())].join(", ")})` };
  }
  if (present.state !== "executing") return null;
  const others = present.devices.filter((d) => !d.self && d.roles.includes("tools"));
  if (!others.length) {
    return { self: false, device: null, text: present.listed ? "no device present runs tools" : "another device" };
  }
  if (others.length === 1) return { self: false, device: others[0], text: label(others[0]) };
  if (!others.some((d) => d.roles.includes("voice"))) {
    // none of them speaks, so none spoke last: the call went to the one that joined last
    const last = others.reduce((a, b) => (String(b.connectedAt || "") > String(a.connectedAt || "") ? b : a));
    return { self: false, device: last, text: label(last) };
  }
  return { self: false, device: null, text: `one of ${others.map(label).join(", ")}` };
}

function render() {
  const list = $("devices");
  if (!list) return;
  const shown = present.devices.length ? present.devices : [{ id: deviceId(), name: deviceName(), roles: roles(), self: true }];
  const now = runner();
  list.replaceChildren(
    ...shown.map((device) => {
      const item = el("li", { class: "device", "data-device-id": device.id });
      item.append(el("span", { class: "device-name", text: label(device) }));
      if (device.self) item.append(el("span", { class: "device-self", text: " (this browser)" }));
      item.append(el("span", { class: "device-roles", text: device.roles.join(" · ") || "no roles" }));
      const runs = now && ((device.self && now.self) || (now.device && now.device.id === device.id));
      if (runs) {
        item.classList.add("running");
        item.append(el("span", { class: "device-running", text: "running a tool" }));
      }
      if (device.connectedAt) item.title = `on this session since ${new Date(device.connectedAt).toLocaleString()}`;
      return item;
    }),
  );
  $("devices-help").textContent = present.devices.length > 1
    ? `${present.devices.length} devices on this session.`
    : "Only this browser is on this session.";
  const where = $("running-on");
  where.hidden = !now;
  where.textContent = now ? `tools running on ${now.text}` : "";
  $("no-tools").hidden = runsTools();
  const mode = $("device-mode");
  mode.textContent = MODE_LINES[settings.mode] || "";
  mode.hidden = !mode.textContent;
}

export function renderDevices() {
  render();
}
