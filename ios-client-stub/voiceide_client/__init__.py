"""A Python stand-in for the VoiceIDE iOS runtime: the conductor's WebSocket client, as library and CLI.

The package root hands nothing on: each name is imported from the module that defines it
(``from voiceide_client.conversation.client import ConductorClient``). Its packages, each importing
only those listed before it:

* ``voice``: what is spoken (the speakers), what was heard of it, the recognizer's transcripts;
* ``tools``: the tools the client answers (``ToolRouter``, the simulated workspace, their
  declarations, results cut into parts);
* ``connection``: reaching the conductor: the WebSocket link and its reconnects, why a connection
  failed, what a frame is, sign-in, the sessions API, the offline stand-in;
* ``rendering``: what a person sees: the transcript (plain or live on a terminal), terminal-safe
  text, the UI model;
* ``conversation``: ``ConductorClient``, the turns it takes and the tool calls it runs;
* ``companion``: the desktop companion, a device that runs the model's tools over a real folder;
* ``command_line``: ``voiceide-client`` and its ``sessions`` and ``companion`` commands.
"""
