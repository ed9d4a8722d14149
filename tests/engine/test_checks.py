"""Setting checks (engine/checks.py): canonical values in, named errors out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_pocket_tts.engine.checks import (
    MAX_SEED,
    MAX_TEMPERATURE,
    check_eos_threshold,
    check_lexicon,
    check_normalize,
    check_seed,
    check_temperature,
)
from pipecat_pocket_tts.engine.errors import (
    InvalidSettingError,
    LexiconError,
    PocketTTSError,
    SettingTypeError,
)

NOT_NUMBERS = [True, False, np.bool_(True), "0.5", b"1", None, [0.3], {"t": 1}, 1j]


@given(st.floats(min_value=0.0, max_value=MAX_TEMPERATURE))
def test_temperature_in_range_is_kept(value: float) -> None:
    assert check_temperature(value) == value
    assert check_temperature(np.float32(value)) == float(np.float32(value))
    assert check_temperature(np.float64(value)) == value


@given(st.integers(min_value=0, max_value=int(MAX_TEMPERATURE)))
def test_temperature_integers_are_numbers(value: int) -> None:
    assert check_temperature(value) == float(value)
    assert check_temperature(np.int64(value)) == float(value)
    assert type(check_temperature(np.int64(value))) is float


@given(
    st.floats(allow_nan=True, allow_infinity=True).filter(
        lambda v: not (0.0 <= v <= MAX_TEMPERATURE)
    )
)
def test_temperature_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(InvalidSettingError, match="temperature must be between 0 and 2"):
        check_temperature(value)


@pytest.mark.parametrize("value", [1e6, -1, -1e-9, math.nan, math.inf, -math.inf, 2.0001])
def test_temperature_refusals_named(value: float) -> None:
    with pytest.raises(InvalidSettingError) as raised:
        check_temperature(value)
    assert isinstance(raised.value, (PocketTTSError, ValueError))
    assert not isinstance(raised.value, TypeError)


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_temperature_of_another_type_is_a_type_error(value: object) -> None:
    with pytest.raises(SettingTypeError, match="temperature must be a number") as raised:
        check_temperature(value)
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, PocketTTSError)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_eos_threshold_any_finite_logit(value: float) -> None:
    assert check_eos_threshold(value) == value
    assert check_eos_threshold(np.float64(value)) == value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_eos_threshold_not_finite_is_refused(value: float) -> None:
    with pytest.raises(InvalidSettingError, match="finite logit"):
        check_eos_threshold(value)


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_eos_threshold_of_another_type(value: object) -> None:
    with pytest.raises(SettingTypeError):
        check_eos_threshold(value)


@given(st.integers(min_value=0, max_value=MAX_SEED))
def test_seed_in_range_is_kept(value: int) -> None:
    assert check_seed(value) == value
    assert check_seed(np.uint64(value)) == value
    assert type(check_seed(np.uint64(value))) is int


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_seed_numpy_signed_integers(value: int) -> None:
    assert check_seed(np.int64(value)) == value


def test_seed_none_is_random() -> None:
    assert check_seed(None) is None


@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=MAX_SEED + 1)))
def test_seed_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(InvalidSettingError, match="seed must be from 0 to 2\\*\\*64-1"):
        check_seed(value)


@pytest.mark.parametrize(
    "value", [True, False, np.bool_(False), 1.5, 1.0, "abc", "7", np.float64(3)]
)
def test_seed_of_another_type_is_a_type_error(value: object) -> None:
    with pytest.raises(SettingTypeError, match="seed must be a whole number"):
        check_seed(value)


def test_minus_one_seed_message_says_what_to_use() -> None:
    with pytest.raises(InvalidSettingError, match="None for a random seed"):
        check_seed(-1)


@pytest.mark.parametrize("value", [True, False, np.bool_(True)])
def test_normalize_bools(value: object) -> None:
    assert check_normalize(value) is bool(value)


@pytest.mark.parametrize("value", [1, 0, "yes", None, "False"])
def test_normalize_refuses_non_bools(value: object) -> None:
    with pytest.raises(SettingTypeError, match="normalize must be True or False"):
        check_normalize(value)


def test_lexicon_checked() -> None:
    assert check_lexicon(None) is None
    assert check_lexicon({}) is None
    lexicon = {"SQL": "sequel"}
    checked = check_lexicon(lexicon)
    assert checked == lexicon and checked is not lexicon
    for bad in ({"": "x"}, {"Pipecat": 7}, ["a"]):
        with pytest.raises(LexiconError):
            check_lexicon(bad)
