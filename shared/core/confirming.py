"""Changes said yes to: a call to a tool that changes the person's project waits for their yes.

When the model calls a tool declared ``effects: changes`` (the catalog's ``editor.replaceText``),
the call is *held*: not sent to the app. The conductor asks aloud, in one short sentence, what will
change ("Replace lines 10 to 20 of main.swift?"), shows a card with it (for an edit, a diff), and
goes idle so the person can answer. Their next utterance decides (``shared.core.confirmation_words``):

* **yes**: the held calls go to the app now, and the turn goes on as with any call;
* **no**: the model gets "declined by the user" for each, and says so;
* **anything else**: the calls are declined the same way, and the utterance is the new request:
  it goes to the model right after the declined results, in the same message.

A held call has a deadline like any call (``CONFIRM_WAIT_S``): unanswered, the model hears that the
change was not confirmed. An app that confirms on its own screen turns this off with the
``autoApproveChanges`` capability. Pure.
"""

from __future__ import annotations

import json

from shared.core import background, change_preview, devices
from shared.core.confirmation_words import Verdict, describe_change
from shared.core.decision import CoreSettings, Decision, Outcome, close_round, deadline_of, error_payload
from shared.core.messages import tool_result_block
from shared.core.state import ModelCall, OwnPurpose, SessionState, Turn
from shared.wire.protocol import AUTO_APPROVE_CHANGES, ErrorCode

CONFIRM_WAIT_S = 120.0  # how long a held change waits for the person's answer
DECLINED = "declined by the user: the change was not made"
NOT_CONFIRMED = "not confirmed: the user did not answer the question, so the change was not made"


def needs_confirmation(state: SessionState, settings: CoreSettings, name: str, device: str | None = None) -> bool:
    """Whether a call of ``name`` that ``device`` will run waits for the person's yes: it changes
    the project by any declaration of it, and that device does not confirm changes on its own screen
    (``autoApproveChanges`` counts only for the device that runs the change)."""
    if AUTO_APPROVE_CHANGES in devices.capabilities_of(state, device):
        return False
    return devices.changes_project(state, name, settings)


def hold(decision: Decision, turn: Turn, call: ModelCall, now: float, settings: CoreSettings) -> None:
    """Keep the call from the app, and ask the person about it (a sentence and a card, the card
    with the lines an edit replaces once the device that runs it has read them)."""
    call.held = True
    call.sent_to = None
    call.deadline = now + CONFIRM_WAIT_S if now else 0.0
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        arguments = {}
    arguments = arguments if isinstance(arguments, dict) else {}
    change_preview.show_or_ask(decision, call, arguments, settings)
    decision.speak(describe_change(call.name, arguments).question, OwnPurpose.SPEAK_BEFORE_TOOLS, turn.turn_id)


def asking(state: SessionState) -> bool:
    """The session waits for the person's answer to a held change."""
    turn = state.turn
    return turn is not None and turn.tools is not None and any(call.held for call in turn.tools.pending())


def listen(decision: Decision, turn: Turn) -> None:
    """Every call of the round that could go out went out: if some are held, the app listens."""
    if turn.tools is not None and any(call.held for call in turn.tools.pending()):
        decision.set_state("idle", turn.turn_id)


def handle_answer(state: SessionState, said: Verdict, settings: CoreSettings, *, now: float) -> Outcome:
    """The person answered yes or no to the held changes."""
    decision = Decision(state)
    turn = decision.state.turn
    assert turn is not None and turn.tools is not None
    held = [call for call in turn.tools.pending() if call.held]
    decision.set_state("thinking", turn.turn_id)
    if said is Verdict.YES:
        for call in held:
            call.held = False
            call.sent_to = decision.state.connection_id
            call.deadline = now + deadline_of(decision.state, settings, call.name) if now else 0.0
            decision.show("executing")
            decision.dispatch(call)
            if background.is_background(decision.state, settings, call.name):  # a long change: the talk goes on
                background.start_in_background(decision, call, now)
        turn.tools.sent_at = now
        decision.notes.append(f"confirmed: {[call.call_id for call in held]}")
    else:
        _decline(held, DECLINED)
        decision.notes.append(f"declined: {[call.call_id for call in held]}")
    if not turn.tools.pending():
        close_round(decision, turn)
        decision.start_stream(turn, now)
    return decision.outcome()


def declined_for_new_request(state: SessionState) -> SessionState:
    """The person said something else: the held changes are declined, and the utterance is then
    taken as a new request (``handle_transcript`` goes on with this state)."""
    fresh = state.model_copy(deep=True)
    assert fresh.turn is not None and fresh.turn.tools is not None
    _decline(
        [call for call in fresh.turn.tools.pending() if call.held], f"{DECLINED}; the user asked for something else"
    )
    return fresh


def _decline(calls: list[ModelCall], reason: str) -> None:
    for call in calls:
        call.held = False
        call.result = tool_result_block(call.tool_use_id, reason, error=True)


def handle_tap(state: SessionState, approve: bool, settings: CoreSettings, *, now: float) -> Outcome:
    """A tap on a held change's card (``confirmChange``) answers it as a spoken yes or no would."""
    turn = state.turn
    held = [call for call in turn.tools.pending() if call.held] if turn is not None and turn.tools is not None else []
    if not held:
        decision = Decision(state)
        decision.send(error_payload(ErrorCode.NO_PENDING_TOOL_CALL, "no change is waiting for a yes"))
        return decision.outcome()
    return handle_answer(state, Verdict.YES if approve else Verdict.NO, settings, now=now)
