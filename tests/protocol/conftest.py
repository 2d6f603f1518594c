"""The handler harness of ``tests/handlers`` (all its fixtures), for driving client frames through
the message Lambda."""

from tests.handlers.conftest import *  # noqa: F403  (fixtures, re-exported for this directory)
