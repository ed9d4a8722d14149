"""Weight files: the pack layout, safetensors, checkpoint keys, narrowed copies, finite checks."""
