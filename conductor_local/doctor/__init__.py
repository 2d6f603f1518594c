"""``voiceide-conductor doctor``: checks a stage's account, model access and settings."""
