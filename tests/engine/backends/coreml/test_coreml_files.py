"""CoreML pack files: the download filter on repository listings, the HF cache, local packs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub.utils import filter_repo_objects

from pipecat_pocket_tts.engine import backends
from pipecat_pocket_tts.engine.backends import find_pack_files, resolve_backend_name
from pipecat_pocket_tts.engine.backends.coreml import files
from pipecat_pocket_tts.engine.backends.coreml import hub as coreml_hub
from pipecat_pocket_tts.engine.errors import (
    BackendUnavailableError,
    CloningUnavailableError,
    PackFilesMissingError,
    UnknownLanguageError,
    UnknownVoiceError,
)
from pipecat_pocket_tts.engine.model import hub_reachability
from pipecat_pocket_tts.engine.model.languages import PUBLISHED_VOICES, find_language

MODEL_FILES = (
    "model.mil",
    "coremldata.bin",
    "metadata.json",
    "weights/weight.bin",
    "analytics/coremldata.bin",
)
PACKAGE_FILES = (
    "Manifest.json",
    "Data/com.apple.CoreML/model.mlmodel",
    "Data/com.apple.CoreML/weights/weight.bin",
)
V21_MODELS = (
    "cond_prefill",
    "flowlm_step",
    "flowlm_stepv2",
    "flow_decoder_fused",
    "mimi_decoder",
    "cond_prefill_ane",
    "flowlm_step_ane",
    "mimi_encoderv3",
)
MIMI_STATE = ("upsample_partial", "attn0_cache", "attn0_offset", "conv0_prev", "conv0_first")


def _language_folder(prefix: str, models: tuple[str, ...]) -> list[str]:
    paths = []
    for model in models:
        paths += [f"{prefix}/{model}.mlmodelc/{f}" for f in MODEL_FILES]
        paths += [f"{prefix}/{model}.mlpackage/{f}" for f in PACKAGE_FILES]
    constants = f"{prefix}/constants_bin"
    paths += [f"{constants}/{name}" for name in files.CONSTANT_FILES]
    paths += [f"{constants}/speaker_proj_weight.bin", f"{constants}/manifest.json"]
    paths += [f"{constants}/mimi_init_state/{name}.bin" for name in MIMI_STATE]
    paths += [f"{constants}/{voice}.safetensors" for voice in PUBLISHED_VOICES]
    paths += [f"{prefix}/constants/{n}" for n in ("bos_emb.npy", "mimi_init_state.npz")]
    paths += [f"{prefix}/manifest.json", f"{prefix}/verify.wav", f"{prefix}/.DS_Store"]
    return paths


def repo_listing() -> list[str]:
    """A listing shaped like FluidInference/pocket-tts-coreml (legacy root, v2, v2.1)."""
    paths = [".gitattributes", "README.md", "encoder_recover_pinv.bin"]
    for model in ("cond_step", "flowlm_step", "flow_decoder", "mimi_decoder_v2", "mimi_encoderv2"):
        paths += [f"{model}.mlmodelc/{f}" for f in MODEL_FILES]
    paths += ["constants_bin/bos_emb.bin", "constants_bin/tokenizer.model"]
    for language in files.PACK_NAMES:
        paths += _language_folder(f"v2/{language}", ("cond_step", "flowlm_step", "mimi_decoder"))
        paths += _language_folder(f"v2.1/{language}", V21_MODELS)
    return paths


def expected_files(language: str, precision: str) -> set[str]:
    root = f"v2.1/{language}"
    flowlm = "flowlm_step" if precision == "fp16" else "flowlm_stepv2"
    models = ("cond_prefill", flowlm, "flow_decoder_fused", "mimi_decoder")
    wanted = {f"{root}/{m}.mlmodelc/{f}" for m in models for f in MODEL_FILES}
    wanted |= {f"{root}/constants_bin/{n}" for n in files.CONSTANT_FILES}
    wanted |= {f"{root}/constants_bin/mimi_init_state/{n}.bin" for n in MIMI_STATE}
    return wanted


@pytest.mark.parametrize("precision", ["fp16", "int8"])
@pytest.mark.parametrize("language", files.PACK_NAMES)
def test_filter_picks_exactly_the_needed_files(language: str, precision: str) -> None:
    listing = repo_listing()
    selected = files.select_files(listing, language, precision)
    assert set(selected) == expected_files(language, precision)
    # The patterns handed to huggingface_hub select the very same files.
    patterns = files.allow_patterns(language, precision)
    assert set(filter_repo_objects(listing, allow_patterns=patterns)) == set(selected)
    other = "flowlm_stepv2" if precision == "fp16" else "flowlm_step"
    assert not [p for p in selected if f"/{other}.mlmodelc/" in p]
    assert not [p for p in selected if ".mlpackage" in p or "/constants/" in p]
    assert not [p for p in selected if p.endswith(".safetensors") or "_ane" in p]


def test_model_and_constant_patterns_split_the_download() -> None:
    listing = repo_listing()
    models = set(
        filter_repo_objects(listing, allow_patterns=files.model_patterns("german_24l", "int8"))
    )
    constants = set(
        filter_repo_objects(listing, allow_patterns=files.constant_patterns("german_24l"))
    )
    assert models and constants and not models & constants
    assert all(".mlmodelc/" in p for p in models)
    assert {p.rsplit("/", 1)[1] for p in constants} >= set(files.CONSTANT_FILES)
    with pytest.raises(ValueError, match="precision"):
        files.allow_patterns("english", "int4")


# -- the Hugging Face cache -------------------------------------------------------------------


class FakeHub:
    """``snapshot_download`` over ``repo_listing()``: writes matching files into a fake HF
    cache (blobs + snapshot links) and records every call."""

    def __init__(self, cache: Path, revision: str = "abc123") -> None:
        self.repo_dir = cache / "models--FluidInference--pocket-tts-coreml"
        self.snapshot = self.repo_dir / "snapshots" / revision
        self.calls: list[dict] = []
        self.offline = False
        self.listing = repo_listing()

    def __call__(self, repo_id, *, revision=None, allow_patterns=None, token=None, **kw):
        from huggingface_hub.errors import LocalEntryNotFoundError

        self.calls.append({"repo": repo_id, "revision": revision, "patterns": allow_patterns})
        if self.offline:
            raise LocalEntryNotFoundError("offline and not cached")
        for path in filter_repo_objects(self.listing, allow_patterns=allow_patterns):
            link = self.snapshot / path
            if link.exists():
                continue
            blob = self.repo_dir / "blobs" / f"{abs(hash(path)):x}"
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(path.encode())
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
        return str(self.snapshot)

    def downloaded(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.snapshot)) for p in self.snapshot.rglob("*") if p.is_symlink()
        )


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    fake = FakeHub(tmp_path / "hf")
    monkeypatch.setattr("huggingface_hub.snapshot_download", fake)
    # The fake hub is reachable: a fresh process probe that finds it so (no real probe).
    monkeypatch.setattr(hub_reachability, "_PROBE", hub_reachability._ProcessProbe())
    monkeypatch.setattr(hub_reachability, "unreachable_reason", lambda *a, **k: None)
    return fake


def test_hub_pack_fetches_constants_then_models_of_one_precision(hub: FakeHub) -> None:
    pack = find_pack_files("italian_24l", backend_kind="coreml")
    assert isinstance(pack, files.CoreMLPackFiles)
    assert hub.calls[0]["repo"] == files.REPO and hub.calls[0]["revision"] == files.REVISION
    assert all("/constants_bin/" in p for p in hub.downloaded())
    assert pack.tokenizer.name == "tokenizer.model" and pack.tokenizer.is_file()
    assert pack.config.name == "italian_24l" and pack.backend_kind == "coreml"
    assert pack.voice_names == PUBLISHED_VOICES and pack.default_voice == "giovanni"

    paths = pack.model_paths("int8")
    assert paths["flowlm"].name == "flowlm_stepv2.mlmodelc"
    assert set(hub.downloaded()) == expected_files("italian_24l", "int8")
    assert all(p.is_dir() for p in paths.values())

    voice = pack.voice_path("giovanni")
    assert voice.is_file() and hub.calls[-1]["patterns"] == [
        "v2.1/italian_24l/constants_bin/giovanni.safetensors"
    ]
    with pytest.raises(UnknownVoiceError):
        pack.voice_path("nobody")


def test_switching_precision_deletes_the_unused_variant(hub: FakeHub) -> None:
    pack = find_pack_files("english", backend_kind="coreml", revision="feedbeef")
    assert hub.calls[0]["revision"] == "feedbeef"
    root = pack.root
    pack.model_paths("fp16")
    fp16_blobs = {p.resolve() for p in (root / "flowlm_step.mlmodelc").rglob("*") if p.is_symlink()}
    pack.model_paths("int8")
    assert not (root / "flowlm_step.mlmodelc").exists()
    assert (root / "flowlm_stepv2.mlmodelc" / "model.mil").is_file()
    assert not any(blob.exists() for blob in fp16_blobs)
    assert (root / "cond_prefill.mlmodelc" / "model.mil").is_file()


def test_removing_a_variant_keeps_blobs_other_snapshots_use(tmp_path: Path) -> None:
    repo = tmp_path / "models--x"
    blob = repo / "blobs" / "shared"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"w")
    own = repo / "blobs" / "own"
    own.write_bytes(b"o")
    for snapshot, target in (("a", blob), ("b", blob)):
        link = repo / "snapshots" / snapshot / "v2.1/english/flowlm_stepv2.mlmodelc/weight.bin"
        link.parent.mkdir(parents=True)
        link.symlink_to(os.path.relpath(target, link.parent))
    extra = repo / "snapshots/a/v2.1/english/flowlm_stepv2.mlmodelc/model.mil"
    extra.symlink_to(os.path.relpath(own, extra.parent))
    root = repo / "snapshots/a/v2.1/english"
    removed = coreml_hub.remove_unused_variant(root, keep="fp16")
    assert removed == [root / "flowlm_stepv2.mlmodelc"]
    assert not removed[0].exists() and not own.exists()
    assert blob.exists()  # snapshot b still points at it
    assert coreml_hub.remove_unused_variant(root, keep="fp16") == []


def _model_files(prefix: str) -> set[str]:
    return {f"{prefix}.mlmodelc/{f}" for f in MODEL_FILES}


def test_encoder_patterns_select_exactly_the_encoder_files() -> None:
    listing = repo_listing()

    def picked(language: str, which: str) -> set[str]:
        return set(
            filter_repo_objects(listing, allow_patterns=files.encoder_patterns(language, which))
        )

    assert picked("english", "shared") == _model_files("mimi_encoderv2")
    assert picked("german_24l", "pack") == _model_files("v2.1/german_24l/mimi_encoderv3")
    assert picked("german_24l", "shared") == _model_files("mimi_encoderv2") | {
        "encoder_recover_pinv.bin",
        "v2.1/german_24l/constants_bin/speaker_proj_weight.bin",
    }
    with pytest.raises(ValueError, match="which"):
        files.encoder_patterns("english", "both")


def test_hub_pack_fetches_the_encoder_on_the_first_clone(hub: FakeHub) -> None:
    pack = find_pack_files("german_24l", backend_kind="coreml")
    pack.model_paths("fp16")
    assert pack.has_voice_cloning  # bos_before_voice.bin is there; the encoder comes later
    assert not [p for p in hub.downloaded() if "encoder" in p or "speaker_proj" in p]
    found = pack.encoder_files()
    assert found.pack_local and found.model == pack.root / "mimi_encoderv3.mlmodelc"
    assert hub.calls[-1]["patterns"] == files.encoder_patterns("german_24l", "pack")
    assert {p for p in hub.downloaded() if "encoder" in p} == _model_files(
        "v2.1/german_24l/mimi_encoderv3"
    )

    english = find_pack_files("english", backend_kind="coreml")
    found = english.encoder_files()
    assert not found.pack_local and not found.reprojected
    assert found.model == english.root.parent.parent / "mimi_encoderv2.mlmodelc"
    assert hub.calls[-1]["patterns"] == ["mimi_encoderv2.mlmodelc/*"]


def test_hub_pack_falls_back_to_the_shared_encoder(hub: FakeHub) -> None:
    hub.listing = [p for p in hub.listing if "mimi_encoderv3" not in p]
    pack = find_pack_files("spanish_24l", backend_kind="coreml")
    found = pack.encoder_files()
    root = pack.root.parent.parent
    assert not found.pack_local and found.reprojected
    assert found.model == root / "mimi_encoderv2.mlmodelc"
    assert found.recover_pinv == root / "encoder_recover_pinv.bin"
    assert found.speaker_proj == pack.root / "constants_bin/speaker_proj_weight.bin"


def test_hub_pack_without_any_encoder(hub: FakeHub) -> None:
    hub.listing = [p for p in hub.listing if "mimi_encoder" not in p]
    pack = find_pack_files("italian", backend_kind="coreml")
    with pytest.raises(CloningUnavailableError, match=r"publishes no usable.*mimi_encoderv3"):
        pack.encoder_files()


def test_offline_without_cache_says_what_to_do(hub: FakeHub) -> None:
    hub.offline = True
    with pytest.raises(PackFilesMissingError, match=r"HF_HUB_OFFLINE"):
        find_pack_files("spanish", backend_kind="coreml")


def test_languages_without_a_coreml_pack_are_refused(hub: FakeHub) -> None:
    with pytest.raises(UnknownLanguageError, match="backend='numpy'"):
        find_pack_files("dutch", backend_kind="coreml")
    assert hub.calls == []


@pytest.mark.parametrize("pack", ["dutch", "english_2026-10", "french"])
def test_packs_of_other_repositories_load_by_repository_and_revision(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, pack: str
) -> None:
    """Issue 51: v2.1 packs FluidInference's repository lacks, published elsewhere in its
    layout, load as hf://owner/repo/v2.1/<pack>@revision (contract only: untested on a Mac)."""
    hub.listing += _language_folder(f"v2.1/{pack}", V21_MODELS)
    reference = f"hf://someone/pocket-tts-coreml-more/v2.1/{pack}@0123abc"
    found = find_pack_files(reference, backend_kind="coreml")
    assert found.config.name == pack and found.backend_kind == "coreml"
    assert {(c["repo"], c["revision"]) for c in hub.calls} == {
        ("someone/pocket-tts-coreml-more", "0123abc")
    }
    found.model_paths("int8")
    found.voice_path("alba")
    assert set(hub.downloaded()) >= expected_files(pack, "int8")
    assert all(c["repo"] == "someone/pocket-tts-coreml-more" for c in hub.calls)
    unpinned = find_pack_files(reference.split("@")[0], backend_kind="coreml", revision="r2")
    assert unpinned.config.name == pack and hub.calls[-1]["revision"] == "r2"
    monkeypatch.setattr(backends, "coreml_unavailable_reason", lambda: None)  # "on a Mac"
    assert resolve_backend_name("auto", pack_name=reference) == "coreml"
    assert find_language(reference).key == pack.split("_")[0]
    with pytest.raises(BackendUnavailableError, match="backend='coreml'"):
        find_pack_files(reference, backend_kind="numpy")


# -- local folders ----------------------------------------------------------------------------


def _local_pack(folder: Path, language: str = "english") -> Path:
    for path in expected_files(language, "fp16") | {
        f"v2.1/{language}/constants_bin/alba.safetensors"
    }:
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x")
    return folder


@pytest.mark.parametrize("nested", [True, False])
def test_local_folder_override(tmp_path: Path, hub: FakeHub, nested: bool) -> None:
    _local_pack(tmp_path)
    model_dir = tmp_path if nested else tmp_path / "v2.1/english"
    pack = find_pack_files("english", model_dir=model_dir, backend_kind="coreml")
    assert pack.root == tmp_path / "v2.1/english"
    assert pack.voice_names == ("alba",) and pack.voice_path("alba").is_file()
    assert pack.model_paths("fp16")["flowlm"].name == "flowlm_step.mlmodelc"
    with pytest.raises(PackFilesMissingError, match="flowlm_stepv2"):
        pack.model_paths("int8")
    assert hub.calls == []  # nothing downloaded


def test_incomplete_local_folder(tmp_path: Path) -> None:
    folder = _local_pack(tmp_path) / "v2.1/english"
    (folder / "constants_bin/text_embed_table.bin").unlink()
    with pytest.raises(PackFilesMissingError, match=r"text_embed_table\.bin"):
        find_pack_files("english", model_dir=folder, backend_kind="coreml")
    with pytest.raises(PackFilesMissingError, match="does not exist"):
        find_pack_files("english", model_dir=tmp_path / "nowhere", backend_kind="coreml")
