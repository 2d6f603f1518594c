"""``voiceide-client``: the conversation from a terminal, its options, and the ``sessions`` and
``companion`` commands."""
