"""What a person sees: the transcript as plain lines or live on a terminal, text made safe to print,
and the UI model of cards."""
