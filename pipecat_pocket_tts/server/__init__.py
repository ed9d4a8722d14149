"""The TTS server: one loaded model and one scheduler for every bot process that connects.

``python -m pipecat_pocket_tts serve`` (or ``pocket-tts-server``: ``serve_command.py``) runs
it; ``app.py`` mounts each client protocol's dialect (``dialects/``) on the core (``core/``:
the connection, its contexts and ordered sender, the HTTP speech, auth, limits, errors in one
shape, the drain, the audio encoders, metrics). ``wire`` holds the websocket messages both
sides speak; ``client.RemoteTTS`` is what ``PocketTTSService(server_url=...)`` speaks with.
The server side imports the engine and ``wire`` only.
"""
