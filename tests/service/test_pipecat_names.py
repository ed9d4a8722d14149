"""Pipecat private names the service relies on, pinned: if Pipecat renames or reshapes one,
this fails loudly (the service has no silent ``getattr`` fallback that would, say, turn
uninterruptible speech interruptible).

They are all reached in one module, ``service/pipecat_internals.py``:
``test_every_pipecat_private_name_in_use_is_pinned`` keeps the list that module uses complete,
and ``test_only_pipecat_internals_touches_pipecat_private_names`` keeps them out of the others.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

from pipecat.services.ai_service import AIService
from pipecat.services.tts_service import TTSContext, TTSService
from pipecat.utils.text.base_text_aggregator import BaseTextAggregator

import pipecat_pocket_tts
from pipecat_pocket_tts import PocketTTSService

INTERNALS = "service/pipecat_internals.py"
SERVICE_MODULES = (
    "service/__init__.py",
    "service/service.py",
    "service/settings.py",
    "service/engine_load.py",
    "service/text_gate.py",
    "service/turns.py",
    "service/speech_stream.py",
    "service/playout.py",
    "service/output.py",
)

PINNED = {
    "_settings",  # the service's current settings (Pipecat's store-mode object)
    "_update_settings",  # the hook every settings update goes through (validation lives in it)
    "_warn_unhandled_updated_settings",
    "_is_streaming_tokens",  # TOKEN aggregation in use
    "_tts_contexts",  # per-context flags: whether a context is interruptible
    "_refresh_audio_context",  # keeps a context alive while a model loads or audio is owed
    "_stop_frame_timeout_s",  # how long Pipecat lets a context go quiet (keepalives: a third)
    "_text_aggregator",  # sentence splitters: given the pack's ISO code
    "_skipped_text_aggregator",
    "_aggregated_frame_sequencer",  # word timestamps: slots of a context's text (``_slots``)
    "_word_timestamp_tracker",  # word timestamps: the last word's time (``last_pts``)
    "_apply_force_complete",  # overridden: a context's end, unspoken text dropped
    "_slots",  # the sequencer's text slots (a failed text's slot is closed)
    "_synthesize_text",  # overridden: an unusable service warns once per turn, not per token
    "_service_language",  # overridden: pack names stored as they are, not tried as codes
    "_register_event_handler",  # the service's own event (on_model_loaded)
    "_call_event_handler",
    # issue 34 (pipecat_internals.py): bounded units, words timed from when their audio plays
    "_handle_aggregated_text",  # overridden: a long text goes on one bounded unit at a time
    "_skip_text_types",  # text types passed on unspoken: never cut into units
    "_add_word_timestamps",  # a word on the tracker's clock, pushed as a TTSTextFrame
    "_text",  # SimpleTextAggregator's buffer
    "_check_sentence_with_lookahead",  # SimpleTextAggregator's per-character sentence check
    "_aggregator",  # the token → sentence regrouping's inner SimpleTextAggregator
    "_reset",  # ... its buffers cleared
    "_tts",  # ... its buffered text, per channel
    "_llm",
    "_user",
    "_streaming",  # the sequencer regroups tokens (TOKEN aggregation)
    "_streaming_contexts",  # ... its per-context regrouping state (``_StreamingContext``)
    # issue 34, loop CPU: segments whose is_transformed is worked out once
    "_append_spoken_slot",  # the sequencer's one place a word tracker joins a slot
    "_segment_map",  # a word tracker's TextSegmentMap
    "_segments",  # ... its list of TextSegment
}


def test_the_pinned_names_exist_with_the_shape_the_service_uses() -> None:
    tts = PocketTTSService()
    assert isinstance(tts._settings, PocketTTSService.Settings)
    assert AIService.settings.fget(tts) is tts._settings  # what stored_settings hands out
    assert inspect.iscoroutinefunction(TTSService._update_settings)
    assert list(inspect.signature(TTSService._update_settings).parameters) == ["self", "delta"]
    assert callable(AIService._warn_unhandled_updated_settings)
    assert isinstance(inspect.getattr_static(TTSService, "_is_streaming_tokens"), property)
    assert tts._is_streaming_tokens is False
    assert isinstance(tts._tts_contexts, dict)
    assert "interruptible" in {f.name for f in dataclasses.fields(TTSContext)}
    assert TTSContext(interruptible=False).interruptible is False
    params = inspect.signature(TTSService._refresh_audio_context).parameters
    assert list(params) == ["self", "context_id"]
    assert tts._stop_frame_timeout_s == 3.0  # Pipecat's default, the constructor's argument
    assert PocketTTSService(stop_frame_timeout_s=0.9)._stop_frame_timeout_s == 0.9
    sequencer = tts._aggregated_frame_sequencer
    assert isinstance(sequencer._slots, list) and callable(sequencer.force_complete)
    assert list(inspect.signature(sequencer.force_complete).parameters)[:1] == ["context_id"]
    assert hasattr(tts._word_timestamp_tracker, "last_pts")
    synthesize = inspect.signature(TTSService._synthesize_text).parameters
    assert list(synthesize) == ["self", "text", "context_id"]
    assert list(inspect.signature(TTSService._service_language).parameters) == [
        "self",
        "language",
    ]
    assert list(inspect.signature(TTSService._register_event_handler).parameters)[:2] == [
        "self",
        "event_name",
    ]
    assert inspect.iscoroutinefunction(TTSService._call_event_handler)
    overridden = inspect.signature(TTSService._apply_force_complete).parameters
    assert list(overridden) == ["self", "context_id"]
    for aggregator in (tts._text_aggregator, tts._skipped_text_aggregator):
        assert isinstance(aggregator, BaseTextAggregator)
        aggregator.set_language("de")
        assert aggregator.language == "de"


async def test_the_bounded_units_replace_pipecat_s_with_the_same_shapes() -> None:
    from pipecat.utils.context.aggregated_frame_sequencer import (
        AggregatedFrameSequencer,
        _ParallelAggregation,
        _ParallelSentenceAggregator,
        _StreamingContext,
    )
    from pipecat.utils.context.word_timestamp_tracker import WordTimestampTracker
    from pipecat.utils.text.simple_text_aggregator import SimpleTextAggregator

    from pipecat_pocket_tts.service.pipecat_internals import (
        BoundedFrameSequencer,
        BoundedSentenceAggregator,
    )

    tts = PocketTTSService()
    assert isinstance(tts._text_aggregator, BoundedSentenceAggregator)
    assert isinstance(tts._aggregated_frame_sequencer, BoundedFrameSequencer)
    assert isinstance(tts._skip_text_types, list)
    assert isinstance(tts._word_timestamp_tracker, WordTimestampTracker)
    assert list(inspect.signature(TTSService._handle_aggregated_text).parameters) == [
        "self",
        "src_frame",
        "context_id",
    ]
    assert list(inspect.signature(TTSService._add_word_timestamps).parameters) == [
        "self",
        "word_times",
        "context_id",
        "includes_inter_frame_spaces",
    ]
    assert list(inspect.signature(WordTimestampTracker.start).parameters) == ["self", "now"]
    aggregator = SimpleTextAggregator()
    assert aggregator._text == "" and callable(aggregator._check_sentence_with_lookahead)
    regrouping = _ParallelSentenceAggregator("en")
    assert isinstance(regrouping._aggregator, SimpleTextAggregator)
    regrouping._reset()
    assert (regrouping._tts, regrouping._llm, regrouping._user) == ("", "", "")
    assert [f.name for f in dataclasses.fields(_ParallelAggregation)] == [
        "tts_text",
        "llm_text",
        "user_facing_text",
    ]
    assert [f.name for f in dataclasses.fields(_StreamingContext)] == [
        "aggregator",
        "append_to_context",
        "build_tracker",
        "text_type",
    ]
    sequencer = AggregatedFrameSequencer(streaming=True)
    assert sequencer._streaming is True and sequencer._streaming_contexts == {}


def test_the_settled_segments_replace_pipecat_s_with_the_same_shapes() -> None:
    from pipecat.utils.context.aggregated_frame_sequencer import AggregatedFrameSequencer
    from pipecat.utils.context.text_segment_map import TextSegment, TextSegmentMap
    from pipecat.utils.context.word_completion_tracker import WordCompletionTracker

    assert list(inspect.signature(AggregatedFrameSequencer._append_spoken_slot).parameters) == [
        "self",
        "frame",
        "context_id",
        "tracker",
        "append_to_context",
        "includes_inter_frame_spaces",
    ]
    tracker = WordCompletionTracker("Hello there.")
    assert isinstance(tracker._segment_map, TextSegmentMap)
    assert all(isinstance(s, TextSegment) for s in tracker._segment_map._segments)
    assert [f.name for f in dataclasses.fields(TextSegment)] == [
        "original",
        "tts",
        "original_start",
        "original_end",
    ]
    assert isinstance(inspect.getattr_static(TextSegment, "is_transformed"), property)


def _private_names_used(source: str) -> set[str]:
    """``x._y`` / ``super()._y`` / ``x._service._y`` attributes read or called in ``source``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            owner = node.value
            on_name = isinstance(owner, ast.Name)
            on_super = isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super"
            on_service = isinstance(owner, ast.Attribute) and owner.attr == "_service"
            if on_name or on_super or on_service:
                names.add(node.attr)
    return names


def _names_defined(source: str) -> set[str]:
    """Methods, properties and attributes the modules define themselves."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                for element in elements:  # ``self._x = ...`` defines _x; ``self._x.y = ...`` not
                    if isinstance(element, ast.Attribute):
                        names.add(element.attr)
                    elif isinstance(element, ast.Name):
                        names.add(element.id)
    return names


def _source(name: str) -> str:
    return (Path(pipecat_pocket_tts.__file__).parent / name).read_text(encoding="utf-8")


def test_every_pipecat_private_name_in_use_is_pinned() -> None:
    source = _source(INTERNALS)
    used = _private_names_used(source)
    defined = _names_defined(source) - PINNED
    assert {"_tts_contexts", "_is_streaming_tokens", "_settings", "_slots"} <= used  # the scan
    assert used - defined == PINNED, (
        f"pin these Pipecat names: {sorted(used - defined - PINNED)}; "
        f"no longer used: {sorted(PINNED - used)}"
    )


def test_only_pipecat_internals_touches_pipecat_private_names() -> None:
    for name in SERVICE_MODULES:
        source = _source(name)
        foreign = _private_names_used(source) - _names_defined(source)
        assert not foreign, f"{name} uses {sorted(foreign)}: reach them in {INTERNALS}"


def test_the_service_modules_listed_are_all_of_them() -> None:
    """A new service module joins ``SERVICE_MODULES``: its Pipecat names are checked too."""
    root = Path(pipecat_pocket_tts.__file__).parent
    found = {str(p.relative_to(root)) for p in (root / "service").glob("*.py")}
    assert found == {*SERVICE_MODULES, INTERNALS}
