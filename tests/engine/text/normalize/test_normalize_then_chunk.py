"""Spoken-form normalization grows text (digits become words); chunks must still fit 50 tokens."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.engine.model.config import MAX_TOKENS_PER_CHUNK
from pipecat_pocket_tts.engine.text.planner import TextPlanner

NUMBERY = [
    "On 2026-11-30 at 15:45 we paid $1,234,567.89 for 12 kg of coffee.",
    "Call +1 (555) 123-4567 or write to support@example.com before 3:45 pm.",
    "Prices rose 12.5% from €5 to €7,50 in Q3; see https://example.com/a/b?c=1.",
    "The 1st, 2nd and 3rd runners finished in 2:03:45, 2:04:01 and 2:05:59.",
    "| Item | Qty | Price |\n|---|---|---|\n| Widget | 1000000 | $3.50 |\n",
    "- **Step 1:** heat to 180 °C\n- **Step 2:** wait 25–30 min\n- `code` here",
]


def _check(planner: TextPlanner, text: str) -> None:
    for chunk in planner.plan(text):
        assert len(chunk.token_ids) <= MAX_TOKENS_PER_CHUNK, chunk.text


def test_number_heavy_text_chunks_fit_after_normalization(engine_tts) -> None:
    planner = TextPlanner(engine_tts.config, engine_tts.tokenizer)
    for text in NUMBERY:
        _check(planner, text)
        _check(planner, " ".join([text] * 8))  # long paragraphs of numbers
    assert len(planner.plan(" ".join(NUMBERY * 4))) > 4


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.integers(-(10**12), 10**12).map(str),
            st.floats(0, 1e6, allow_nan=False).map(lambda x: f"{x:,.2f}"),
            st.sampled_from(["$", "€", "%", "km", "°C", "1/2", "3rd", "2026-11-30", "and", "the"]),
            st.text(alphabet="abcdefghij ", min_size=1, max_size=12),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_random_numbers_and_units_always_fit(engine_tts, parts: list[str]) -> None:
    planner = TextPlanner(engine_tts.config, engine_tts.tokenizer)
    _check(planner, " ".join(parts) + ".")
