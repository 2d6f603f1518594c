"""The base of every kind's payload: camelCase aliases accepted by name too, frozen, and extra
fields ignored so newer clients stay compatible."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WirePayload(BaseModel):
    """A kind's payload. Extra fields are ignored so newer clients stay compatible."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
