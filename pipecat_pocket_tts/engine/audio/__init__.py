"""Audio in and out: WAV files, samples to PCM, signal work, speaking rate, output files."""
