/* A held change (docs/protocol.md, "Changes said yes to"): the conductor asks "Replace lines 10
 * to 20 of main.swift?", shows a card with the change and goes idle until the person answers. On
 * a display device the card gets Approve and Decline, which send `confirmChange {approve}`.
 *
 * No event says "this card is held": the console recognises it by what the conductor sends for
 * one: the final that asks about a card (its title, with a line range's dash said "to", then "?"
 * or " with …?"), the card, then `idle`. The card may come before the question (shown at once) or
 * after it, even after `idle` (the conductor first reads the lines it replaces from the device that
 * will run it). The buttons go on the card the question is about that came last, once both the card
 * and `idle` are in. The question is over at the next thinking or executing (the answer was taken,
 * or the wait ran out) or in another session. */

import { send } from "./connection.js";
import { el } from "./dom.js";
import { makeEvent } from "./protocol.js";
import { note, renderCards } from "./view.js";

const held = {
  question: null, // the open question: {text, card: index of its card or null, idle: idle seen since}
  lastCard: null, // the card added last, while no final came after it
  answer: null, // "approve" / "decline" once this browser answered
  sent: [], // every confirmChange payload sent, for the browser tests
};

/** The question the conductor asks about a card with this title, as it words it. */
function asksAbout(question, title) {
  if (typeof question !== "string" || typeof title !== "string" || !title || !question.endsWith("?")) return false;
  const said = title.replace(/(\d)\u2013(\d)/g, "$1 to $2");
  return question === `${said}?` || question.startsWith(`${said} with `);
}

/** The index of the card held now (its buttons shown), or null. */
export function heldCard() {
  const question = held.question;
  return question && question.idle && question.card !== null ? question.card : null;
}

/** A card was appended at `index` (the UI model's /cards/-): the open question's card when the
 * question is about it (the latest such card gets the buttons), else perhaps the next question's. */
export function onCardAdded(index, card) {
  const question = held.question;
  if (question && asksAbout(question.text, card && card.title)) {
    question.card = index;
    held.lastCard = null;
    if (question.idle) renderCards();
    return;
  }
  held.lastCard = { index, title: card && card.title };
}

/** A final: a question about the card just added, or one whose card is still to come (any final
 * ending in "?" until a card it is about comes; any other final closes the question). */
export function onFinal(text) {
  const card = held.lastCard;
  held.lastCard = null;
  if (held.question && held.question.idle) return; // held: only the next thinking ends it
  if (typeof text !== "string" || !text.endsWith("?")) {
    held.question = null;
    return;
  }
  held.question = { text, card: card && asksAbout(text, card.title) ? card.index : null, idle: false };
}

/** The conversation's state: idle after a question holds its card (the question may be spoken
 * first: `speaking` changes nothing); thinking or executing means the answer was taken (or the
 * wait ran out) and the model goes on. */
export function onState(state) {
  held.lastCard = null;
  if (state === "idle" && held.question && !held.question.idle) {
    held.question.idle = true;
    held.answer = null;
    if (held.question.card !== null) renderCards();
  } else if (state === "thinking" || state === "executing") clear();
}

/** A new connection or session: whatever was asked before is not shown as waiting. */
export function clear() {
  const had = heldCard() !== null;
  held.question = null;
  held.lastCard = null;
  held.answer = null;
  if (had) renderCards();
}

/** The answer was refused (nothing held any more, `no_pending_tool_call`): the buttons go. */
export function onRefused() {
  if (!held.answer) return false;
  note("No change was waiting for an answer any more.");
  clear();
  return true;
}

function answer(approve) {
  if (held.answer) return;
  held.answer = approve ? "approve" : "decline";
  const payload = { approve };
  held.sent.push(payload);
  send(makeEvent("confirmChange", payload));
  note(approve ? "You approved the change." : "You declined the change.");
  renderCards();
}

/** Called for each card as it is drawn: a held one gets its buttons (or what was answered). */
export function decorateCard(article, index) {
  if (heldCard() !== index) return;
  article.classList.add("held");
  if (held.answer) {
    const text = held.answer === "approve" ? "Approved: the change is being made." : "Declined.";
    article.append(el("p", { class: "held-answer", role: "status", text }));
    return;
  }
  const approve = el("button", { type: "button", class: "approve" }, "Approve");
  const decline = el("button", { type: "button", class: "decline" }, "Decline");
  approve.addEventListener("click", () => answer(true));
  decline.addEventListener("click", () => answer(false));
  article.append(
    el("div", { class: "held-actions buttons", role: "group", "aria-label": "Answer the change" }, approve, decline),
  );
}

export const heldRecord = held;
