"""A Hugging Face cache on disk for offline tests: the fixture lives in conftest.py."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_put(cache: Path, repo: str, revision: str, path: str, content: bytes) -> Path:
    """Store a file in the HF cache layout: blobs/<sha256> + snapshots/<rev>/<path> symlink."""
    repo_dir = cache / f"models--{repo.replace('/', '--')}"
    blob = repo_dir / "blobs" / hashlib.sha256(content).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(content)
    link = repo_dir / "snapshots" / revision / path
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))
    return link


HUB_REPO = "kyutai/tts-voices"
COMMIT = "1" * 40


def publish_voice(cache: Path, path: str, content: bytes) -> str:
    """Put a file in the offline HF cache as the hub's ``main`` of ``HUB_REPO``; its URL."""
    cache_put(cache, HUB_REPO, COMMIT, path, content)
    refs = cache / f"models--{HUB_REPO.replace('/', '--')}" / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / "main").write_text(COMMIT)
    return f"hf://{HUB_REPO}/{path}"
