"""The one runtime of a loaded model: its scheduler, ticks, admission slots, streams and costs."""
