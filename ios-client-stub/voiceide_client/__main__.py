"""``python -m voiceide_client``: the same as the ``voiceide-client`` command."""

import sys

from voiceide_client.command_line.cli import main

sys.exit(main())
