"""Long runs through real pipelines that count what went wrong: stale audio, mute replies..."""
