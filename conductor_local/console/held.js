/* A held change (docs/protocol.md, "Changes said yes to"): the conductor shows a card with the
 * change, asks "Replace lines 10 to 20 of main.swift?" and goes idle until the person answers. On
 * a display device the card gets Approve and Decline, which send `confirmChange {approve}`.
 *
 * No event says "this card is held": the console recognises it by what the conductor sends for
 * one, in order: a card added, then the final that asks about exactly that card (its title, with
 * a line range's dash said "to", then "?" or " with …?"), then `idle`. The question is over at the
 * next thinking or executing (the answer was taken, or the wait ran out) or in another session. */

import { send } from "./connection.js";
import { el } from "./dom.js";
import { makeEvent } from "./protocol.js";
import { note, renderCards } from "./view.js";

const held = {
  asked: [], // indexes of cards asked about in this round, not yet held (idle not seen)
  cards: new Set(), // indexes of the cards held now: buttons shown
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

/** A card was appended at `index` (the UI model's /cards/-). */
export function onCardAdded(index, card) {
  held.lastCard = { index, title: card && card.title };
}

/** Every other patch or final ends the pairing of the last card with its question. */
export function onFinal(text) {
  const card = held.lastCard;
  held.lastCard = null;
  if (card && asksAbout(text, card.title)) held.asked.push(card.index);
}

/** The conversation's state: idle after a question holds its card (the question may be spoken
 * first: `speaking` changes nothing); thinking or executing means the answer was taken (or the
 * wait ran out) and the model goes on. */
export function onState(state) {
  held.lastCard = null;
  if (state === "idle" && held.asked.length) {
    held.asked.forEach((i) => held.cards.add(i));
    held.asked = [];
    held.answer = null;
    renderCards();
  } else if (state === "thinking" || state === "executing") clear();
}

/** A new connection or session: whatever was asked before is not shown as waiting. */
export function clear() {
  const had = held.cards.size;
  held.asked = [];
  held.cards.clear();
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
  if (!held.cards.has(index)) return;
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
