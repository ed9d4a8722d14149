"""The client protocols the server speaks, each translating between its wire and the core.

Websocket dialects (a ``core.dialect.Dialect`` each): ``native`` (ours, ``wire``), ``gradium``,
``livekit``. HTTP dialects (route handlers on ``core.http_speech``): ``openai``, ``upstream``
(``/tts``, with its ``page``), and ``probes`` (health, readiness, metrics, voice lists).
"""
