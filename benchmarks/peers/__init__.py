"""This package beside its peers: upstream pocket-tts, Pipecat's built-in service, CoreML."""
