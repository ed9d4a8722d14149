"""What a model is before it runs: configs, load options, packs and their files, languages."""
