"""Word timing: attention heads to word times, caller words with times, subtitles."""
