"""``python -m voiceide_client``: the same as the ``voiceide-client`` command."""

import sys

from .cli import main

sys.exit(main())
