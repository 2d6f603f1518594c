"""What the person hears when a turn ends in an error before anything of it was spoken.

An app shows the ``error`` event, but the person is listening, not looking: a turn that fails in
silence sounds like a conductor that stopped working. So a failed turn with nothing spoken speaks
one short line saying what happened and what to do, chosen here from why it failed.
"""

from __future__ import annotations

from enum import StrEnum

from shared.wire.protocol import ErrorCode


class FailureCause(StrEnum):
    """Why a turn ended in an error, as finely as the person can act on it."""

    THROTTLED = "throttled"  # Bedrock throttled the request on every attempt
    REFUSED = "refused"  # Bedrock refused the request before answering (validation, access, model)
    UNAVAILABLE = "unavailable"  # Bedrock or the model is failing or not ready
    MODEL_TIMEOUT = "model_timeout"  # the model took longer than Bedrock allows
    MODEL_FAILED = "model_failed"  # the model's stream broke off
    TOO_LONG = "too_long"  # the request does not fit the model even alone
    OUT_OF_TIME = "out_of_time"  # the turn used up its invocation's time
    BUSY = "busy"  # the session kept changing under the turn
    CONDUCTOR = "conductor"  # anything else on the conductor's side


FAILURE_LINES: dict[FailureCause, str] = {
    FailureCause.THROTTLED: "I'm getting too many requests right now; try again in a moment.",
    FailureCause.REFUSED: "I couldn't send that to the model. Could you ask it another way?",
    FailureCause.UNAVAILABLE: "The model isn't answering right now; try again in a moment.",
    FailureCause.MODEL_TIMEOUT: "The model took too long to answer; try again in a moment.",
    FailureCause.MODEL_FAILED: "Sorry, my answer broke off. Could you say that again?",
    FailureCause.TOO_LONG: "That's too long for me to take in at once. Could you say it in parts?",
    FailureCause.OUT_OF_TIME: "That took longer than I can work on one request. Ask me for a smaller part.",
    FailureCause.BUSY: "Sorry, too much was happening at once. Could you say that again?",
    FailureCause.CONDUCTOR: "Sorry, something went wrong on my side. Could you say that again?",
}

# Bedrock Runtime's error codes (its API reference's Errors), by what the person can do about them.
_BEDROCK_CAUSES: dict[str, FailureCause] = {
    "ThrottlingException": FailureCause.THROTTLED,
    "ServiceQuotaExceededException": FailureCause.THROTTLED,
    "TooManyRequestsException": FailureCause.THROTTLED,
    "ValidationException": FailureCause.REFUSED,
    "AccessDeniedException": FailureCause.REFUSED,
    "ResourceNotFoundException": FailureCause.REFUSED,
    "ModelErrorException": FailureCause.UNAVAILABLE,
    "ModelNotReadyException": FailureCause.UNAVAILABLE,
    "ServiceUnavailableException": FailureCause.UNAVAILABLE,
    "InternalServerException": FailureCause.UNAVAILABLE,
    "ModelTimeoutException": FailureCause.MODEL_TIMEOUT,
    "ModelStreamErrorException": FailureCause.MODEL_FAILED,
}
_DEFAULT_CAUSES: dict[str, FailureCause] = {
    ErrorCode.BEDROCK_ERROR: FailureCause.MODEL_FAILED,
    ErrorCode.CONDUCTOR_ERROR: FailureCause.CONDUCTOR,
}


def bedrock_cause(code: str, *, during_stream: bool) -> FailureCause:
    """The cause of a Bedrock failure from its error code; a stream that broke off after it began
    is a failed answer whatever the code."""
    if during_stream:
        return _BEDROCK_CAUSES.get(code, FailureCause.MODEL_FAILED)
    return _BEDROCK_CAUSES.get(code, FailureCause.UNAVAILABLE)


def failure_line(code: str, cause: FailureCause | None = None) -> str:
    """The line spoken for a turn that ended with the error ``code`` before anything was said."""
    return FAILURE_LINES[cause or _DEFAULT_CAUSES.get(code, FailureCause.CONDUCTOR)]
