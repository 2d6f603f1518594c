"""Reaching the conductor: the WebSocket link (opening, keeping and giving it up), why a connection
failed, what a received frame is, sign-in, the sessions API and the offline stand-in."""
