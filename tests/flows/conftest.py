"""The handler harness of ``tests/handlers`` (all its fixtures), for driving a flow through its
Lambda."""

from tests.handlers.conftest import *  # noqa: F403  (fixtures, re-exported for this directory)
