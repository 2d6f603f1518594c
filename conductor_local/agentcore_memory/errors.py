"""The errors the local AgentCore Memory answers, in the service's shapes (rest-json: the type in
``x-amzn-ErrorType``, ``{"message": …}`` in the body, the status the API model gives the error)."""

from __future__ import annotations

from typing import Any

CANNOT_PARSE = "CannotParse"
FIELD_VALIDATION_FAILED = "FieldValidationFailed"
IDEMPOTENT_MISMATCH = "IdempotentParameterMismatchException"
EVENT_IN_OTHER_SESSION = "EventInOtherSession"


class ServiceError(Exception):
    """An answer other than success: ``status``, ``error_type`` and the body's members."""

    def __init__(self, status: int, error_type: str, message: str, **members: Any) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.body: dict[str, Any] = {"message": message, **members}


def validation_error(message: str, reason: str = FIELD_VALIDATION_FAILED) -> ServiceError:
    """``400 ValidationException`` (its ``reason`` is one of the model's ``ValidationExceptionReason``)."""
    return ServiceError(400, "ValidationException", message, reason=reason)


def not_found(message: str) -> ServiceError:
    return ServiceError(404, "ResourceNotFoundException", message)


def unknown_operation(method: str, path: str) -> ServiceError:
    return ServiceError(404, "UnknownOperationException", f"no such operation: {method} {path}")


def not_implemented(operation: str) -> ServiceError:
    return ServiceError(501, "NotImplementedException", f"the local AgentCore Memory does not implement {operation}")


def internal(message: str) -> ServiceError:
    """``500 ServiceException`` (the model's server-side error)."""
    return ServiceError(500, "ServiceException", message)
