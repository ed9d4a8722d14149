"""Spoken-form text normalization: the rules behind ``engine.text.normalize``.

One module per concern (markdown, web addresses, dates and times, quantities, numerals,
symbols, lexicon) and one per language under ``languages/``; ``pipeline`` fixes their order.
"""
