/* Rendering: the transcript, the cards (a UI model changed by JSON Patch, with the vendored
 * fast-json-patch, global `jsonpatch`), the conversation state, the connection line and the event log. */

import { $, el } from "./dom.js";
import { kindOf } from "./protocol.js";

const LOG_LIMIT = 1000;

// ---- the event log ------------------------------------------------------------------------------

let logCount = 0;

function summary(event) {
  const [name, payload] = kindOf(event);
  if (!name) return JSON.stringify(event).slice(0, 100);
  if (name === "toolCall") return `toolCall ${payload.name} ${payload.arguments}`.slice(0, 140);
  if (payload && typeof payload.text === "string") return `${name} “${payload.text}”`.slice(0, 140);
  return `${name} ${JSON.stringify(payload)}`.slice(0, 140);
}

export function logEvent(direction, event) {
  const list = $("log");
  const time = new Date().toISOString().slice(11, 23);
  const seq = event.seq !== undefined ? ` #${event.seq}` : "";
  const line = el("summary", {}, `${time} ${direction === "in" ? "←" : "→"}${seq} ${summary(event)}`);
  const item = el("li", { class: direction }, el("details", {}, line, el("pre", { text: JSON.stringify(event, null, 2) })));
  list.append(item);
  while (list.children.length > LOG_LIMIT) list.firstElementChild.remove();
  $("log-count").textContent = String(++logCount);
}

// ---- the transcript -----------------------------------------------------------------------------

const transcript = $("transcript");
let assistantBubble = null;
let interimBubble = null;
let lastAnswer = null; // the answer shown last, not yet claimed by its turn's usage

function scrollDown() {
  transcript.scrollTop = transcript.scrollHeight;
}

function bubble(cls, who, text) {
  const body = el("span", { class: "body", text });
  const item = el("li", { class: cls }, el("span", { class: "who", text: who }), body);
  transcript.append(item);
  scrollDown();
  return item;
}

export function note(text, cls = "note") {
  const item = el("li", { class: cls, text });
  transcript.append(item);
  scrollDown();
  return item;
}

export function showPartial(text) {
  if (!assistantBubble) {
    assistantBubble = bubble("assistant partial", "assistant", "");
    assistantBubble.setAttribute("aria-busy", "true");
  }
  assistantBubble.querySelector(".body").textContent = text;
  scrollDown();
}

export function showFinal(text, interrupted) {
  const item = assistantBubble || bubble("assistant", "assistant", "");
  assistantBubble = null;
  item.classList.remove("partial");
  item.removeAttribute("aria-busy");
  item.querySelector(".body").textContent = text;
  lastAnswer = item;
  if (interrupted) {
    item.classList.add("interrupted");
    item.append(el("span", { class: "mark", text: text ? " — interrupted" : "(interrupted: nothing was heard)" }));
  }
  scrollDown();
}

export function showInterim(text) {
  if (!interimBubble) interimBubble = bubble("you interim", "you (hearing…)", "");
  interimBubble.querySelector(".body").textContent = text;
}

/** Recognition ended: what was being heard is no longer shown. */
export function dropInterim() {
  if (interimBubble) {
    interimBubble.remove();
    interimBubble = null;
  }
}

/** The person's words as a line of the transcript (returned). */
export function showUser(text) {
  if (interimBubble) interimBubble.remove();
  interimBubble = null;
  return bubble("you", "you", text);
}

export function clearTranscript() {
  transcript.replaceChildren();
  lastAnswer = null;
}

/** The answer shown since the last call (the one of the turn that just went idle), or null. */
export function takeAnswer() {
  const answer = lastAnswer;
  lastAnswer = null;
  return answer;
}

/** Show `item` right under `answer` (later lines stay below it), or last when there is none. */
export function showUnder(answer, item) {
  if (answer && answer.isConnected) answer.after(item);
  else transcript.append(item);
  scrollDown();
}

// ---- cards --------------------------------------------------------------------------------------

let uiModel = { cards: [] };
let decorate = () => {}; // (article, index, card): what else a card shows (a held change's buttons)

export function setCardDecorator(fn) {
  decorate = fn;
}

export function currentUiModel() {
  return uiModel;
}

export function applyPatch(operations) {
  const next = JSON.parse(JSON.stringify(uiModel));
  try {
    jsonpatch.applyPatch(next, operations, true, true); // validated; on any error none of it applies
  } catch (error) {
    logEvent("in", { note: `a UI patch did not apply: ${error.message}` });
    return false;
  }
  uiModel = next;
  renderCards();
  return true;
}

export function clearCards() {
  uiModel = { cards: [] };
  renderCards();
}

export function renderCards() {
  const box = $("cards");
  box.replaceChildren();
  const cards = Array.isArray(uiModel.cards) ? uiModel.cards : [];
  if (!cards.length) box.append(el("p", { class: "empty", text: "No cards yet." }));
  cards.forEach((card, i) => {
    const title = el("h3", { id: `card-${i}` }, card.title || card.type || "card");
    if (card.file) title.append(el("span", { class: "file", text: ` · ${card.file}` }));
    const code = el("code", { text: card.body || "" });
    if (card.language) code.setAttribute("data-language", card.language);
    const article = el("article", { class: `card card-${card.type}`, "aria-labelledby": `card-${i}` }, title, el("pre", {}, code));
    decorate(article, i, card);
    box.append(article);
  });
}

// ---- state and connection -----------------------------------------------------------------------

let convoState = "idle";

export function currentState() {
  return convoState;
}

export function setState(state) {
  convoState = state;
  const node = $("state");
  node.textContent = state;
  node.className = `state state-${state}`;
}

export function setConnection(text, cls) {
  const node = $("connection");
  node.textContent = text;
  node.className = `connection ${cls || ""}`;
}
