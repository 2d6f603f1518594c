"""``python -m conductor_local local``: the same as ``voiceide-conductor local``."""

import sys

from conductor_local.cli import main

sys.exit(main())
