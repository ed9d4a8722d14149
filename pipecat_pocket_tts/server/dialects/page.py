"""The page at ``/``: type a text, hear it (``POST /tts``), as upstream ``pocket-tts serve``
serves one. Static; the API key, when the server wants one, is typed into the page."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>PocketTTS</title>
<style>
body { font: 16px system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; }
textarea, input, button { font: inherit; width: 100%; box-sizing: border-box; margin: .3rem 0; }
textarea { height: 8rem; }
#status { color: #555; min-height: 1.5em; }
</style>
</head>
<body>
<h1>PocketTTS</h1>
<form id="speak">
<label for="text">Text</label>
<textarea id="text" name="text" required>Hello! This is PocketTTS speaking.</textarea>
<label for="voice">Voice (a name of <a href="/v1/voices">/v1/voices</a>; empty: the default)</label>
<input id="voice" name="voice_url" autocomplete="off">
<label for="key">API key (if the server has one)</label>
<input id="key" type="password" autocomplete="off">
<button type="submit">Speak</button>
</form>
<p id="status"></p>
<audio id="audio" controls></audio>
<script>
const form = document.getElementById("speak");
const status = document.getElementById("status");
const audio = document.getElementById("audio");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = new FormData();
  body.append("text", document.getElementById("text").value);
  const voice = document.getElementById("voice").value.trim();
  if (voice) body.append("voice_url", voice);
  const key = document.getElementById("key").value;
  const headers = key ? { Authorization: "Bearer " + key } : {};
  status.textContent = "Speaking…";
  try {
    const response = await fetch("/tts", { method: "POST", body, headers });
    if (!response.ok) {
      const error = await response.json().catch(() => null);
      throw new Error(error?.error?.message || response.statusText);
    }
    const blob = await response.blob();
    if (audio.src) URL.revokeObjectURL(audio.src);
    audio.src = URL.createObjectURL(blob);
    await audio.play();
    status.textContent = "";
  } catch (error) {
    status.textContent = "Error: " + error.message;
  }
});
</script>
</body>
</html>
"""


async def page(request: Request) -> HTMLResponse:
    """``GET /``."""
    return HTMLResponse(PAGE)


__all__ = ["PAGE", "page"]
