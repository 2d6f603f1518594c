"""A handler's import (the container's init) without the cyclic garbage collector.

The imports build some 90,000 objects that live as long as the container (modules, classes, the
pydantic models' validators) and almost no garbage; the collector would go through them again and
again while they are built, about a tenth of a cold import, and at every full collection after.
Imported first by each handler module, which calls ``done`` once its own imports are in.
"""

from __future__ import annotations

import gc

_enabled = gc.isenabled()
gc.disable()


def done() -> None:
    """Keep what the imports built out of every later collection, and collect again as before."""
    gc.freeze()
    if _enabled:
        gc.enable()
