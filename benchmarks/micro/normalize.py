"""Speed of spoken-form normalization per typical sentence (target: ≤ 1 ms each).

Run: ``python -m benchmarks.micro.normalize [--rounds N]``. Reports, per language,
  warm: the same sentences again (num2words results cached, the streaming steady state);
  cold: every sentence with fresh numbers (num2words cache cleared before each call);
  plus the one-off cost of compiling a language's rules and a plain-prose sentence.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pipecat_pocket_tts.engine.text.normalize import TextNormalizer
from pipecat_pocket_tts.engine.text.spoken.language import num2words_cached
from pipecat_pocket_tts.engine.text.spoken.pipeline import spoken_form

SENTENCES = {
    "en": [
        "On Nov 30, 2026 at 3:45 pm, the price rose 12% to $1,250.50 per unit.",
        "Dr. Smith said the 2nd trial ran 5 km in 25 min, e.g. faster than before.",
        "**Tip:** visit https://example.com or call +1 (555) 123-4567.",
        "- Preheat the oven to 350°F and bake for 25–30 minutes.",
        "The weather today is sunny and warm, so let's go for a walk in the park.",
    ],
    "de": [
        "Am 3. Oktober 2026 um 15:45 Uhr kostet es 12,50 € bzw. 20 % mehr.",
        "Die Strecke ist 2,5 km lang, z. B. für 1 Stunde.",
    ],
    "fr": [
        "Le 1er mai 2026 à 15h30, ça coûte 12,50 € soit 3,5 % de plus.",
        "Mme Dupont a couru 10 km en 1 heure, p. ex. le 21e jour.",
    ],
    "es": ["El 30 de noviembre de 2026 a las 15:45 cuesta 12,50 € y 21 personas vienen."],
    "it": ["Il 1º maggio alle 15:30 costa 12,50 € per 2,5 km."],
    "pt": ["No dia 1 de maio às 15h30 custa 12,50 € e são 2 horas."],
    "nl": ["Op 1 mei om 15:30 kost het € 12,50, bijv. 3,5% meer."],
}


def _per_call(fn, sentences: list[str], rounds: int, *, cold: bool) -> list[float]:
    times = []
    for _ in range(rounds):
        for sentence in sentences:
            if cold:
                num2words_cached.cache_clear()
            start = time.perf_counter()
            fn(sentence)
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    print(f"{'lang':5} {'compile ms':>10} {'warm median µs':>15} {'warm p95 µs':>12} "
          f"{'cold median µs':>15} {'cold p95 µs':>12}")  # fmt: skip
    worst = 0.0
    for code, sentences in SENTENCES.items():
        start = time.perf_counter()
        spoken_form(code)  # first use compiles the language's rules
        compile_ms = (time.perf_counter() - start) * 1e3
        norm = TextNormalizer(code)
        for sentence in sentences:
            norm(sentence)
        warm = _per_call(norm, sentences, args.rounds, cold=False)
        cold = _per_call(norm, sentences, max(2, args.rounds // 4), cold=True)
        warm_p95 = statistics.quantiles(warm, n=20)[-1]
        cold_p95 = statistics.quantiles(cold, n=20)[-1]
        worst = max(worst, cold_p95)
        print(
            f"{code:5} {compile_ms:10.1f} {statistics.median(warm) * 1e6:15.0f} "
            f"{warm_p95 * 1e6:12.0f} {statistics.median(cold) * 1e6:15.0f} {cold_p95 * 1e6:12.0f}"
        )
    verdict = "OK" if worst <= 1e-3 else "OVER BUDGET"
    print(f"worst cold p95: {worst * 1e3:.3f} ms per sentence (budget 1 ms): {verdict}")


if __name__ == "__main__":
    main()
