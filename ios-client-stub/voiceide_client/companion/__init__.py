"""The desktop companion: a device of the person's session that runs the model's tools over a real
folder (calls run once, commands of ``.voiceide.toml``, edits, its display)."""
