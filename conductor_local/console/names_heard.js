/* The names the person's words may have meant (docs/protocol.md, "Names heard right"): the
 * conductor's `namesHeard`, shown as a muted line right under the transcript line of those words
 * ("heard 'get user buy id' → getUserById (src/users.ts)"). What was said is never changed.
 *
 * The line is found by the transcript's event id when `namesHeard` names it; without one, it is this
 * browser's latest transcript while its turn is still going. Matches for words this browser did
 * not send (said on another device) get a line of their own at the end. */

import { el } from "./dom.js";
import { namesHeardOf } from "./protocol.js";
import { turns } from "./timeline.js";
import { showUnder } from "./view.js";

const KEPT = 50;

const said = new Map(); // the final transcript's event id -> its transcript line
const under = new WeakMap(); // a transcript line -> the names line under it
let latest = null; // {eventId, item, turn}: this browser's newest transcript
let lastLoose = null; // the newest names line under no transcript line

/** The matches shown, in order: {eventId, matches, under} (under: the words of the line they went
 * under, or null). */
export const namesShown = [];

/** This browser sent the final transcript `eventId`, shown as `item`. */
export function transcriptSent(eventId, item) {
  said.set(eventId, item);
  while (said.size > KEPT) said.delete(said.keys().next().value);
  latest = { eventId, item, turn: turns[turns.length - 1] };
}

/** The wording of one match: "heard 'get user buy id' → getUserById (src/users.ts)". */
export function matchText(match) {
  return `heard '${match.heard}' → ${match.name}${match.path ? ` (${match.path})` : ""}`;
}

function lineOf(eventId) {
  if (eventId) return said.get(eventId) || null;
  if (!latest) return null;
  const going = latest.turn && latest.turn === turns[turns.length - 1] && latest.turn.marks.idle === undefined;
  return going ? latest.item : null;
}

function namesLine(matches) {
  const item = el("li", { class: "names-heard", "aria-live": "off" });
  item.append(el("span", { class: "names-label", text: "may mean: " }));
  matches.forEach((match, i) => {
    if (i) item.append(el("span", { class: "names-sep", text: " · " }));
    item.append(el("span", { class: "name-heard", "data-name": match.name, text: matchText(match) }));
  });
  return item;
}

export function onNamesHeard(payload) {
  const matches = namesHeardOf(payload);
  if (!matches.length) return;
  const eventId = typeof payload.eventId === "string" ? payload.eventId : null;
  const words = lineOf(eventId);
  const item = namesLine(matches);
  if (words && words.isConnected) {
    const before = under.get(words);
    if (before && before.isConnected) before.replaceWith(item); // a later request's matches: the same words
    else showUnder(words, item);
    under.set(words, item);
  } else if (lastLoose && lastLoose.isConnected && !lastLoose.nextElementSibling && lastLoose.textContent === item.textContent) {
    return; // the same matches again for the same words
  } else {
    showUnder(null, item);
    lastLoose = item;
  }
  const body = words && words.querySelector(".body");
  namesShown.push({ eventId, matches, under: body ? body.textContent : null });
}

/** Another session: its transcript is gone, and with it the lines the names went under. */
export function forgetNamesHeard() {
  said.clear();
  latest = null;
  lastLoose = null;
}
