"""The server's core: what every dialect shares, so a dialect only translates.

The ways in (``entry``: key, limits, errors in one shape); a websocket connection
(``connection``: its messages in order; ``contexts``: each context's output and endings;
``outbox``: the ordered sender) and what a dialect gives it (``dialect``); one HTTP request's
speech (``http_speech``) and its response formats (``audio_formats``); and the server's state,
auth, limits, errors, drain, gate, request-head timeouts, CORS, metrics and voices.
"""
