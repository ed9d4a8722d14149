"""CoreML pack files: the hub layout, the download filter, and local pack folders.

FluidInference/pocket-tts-coreml holds one folder per pack, ``v2.1/<pack name>/``:

    cond_prefill.mlmodelc/         flowlm_step.mlmodelc/ (fp16)   flowlm_stepv2.mlmodelc/ (int8)
    flow_decoder_fused.mlmodelc/   mimi_decoder.mlmodelc/         constants_bin/ (see constants.py)
    mimi_encoderv3.mlmodelc/ (non-English packs: voice cloning)
    plus files this backend never needs: *.mlpackage sources, constants/ (.npy intermediates),
    the _ane placement models, manifest.json, verify.wav
The repository root holds the shared cloning encoder ``mimi_encoderv2.mlmodelc/`` and
``encoder_recover_pinv.bin`` (see encoder.py).

Only what the chosen precision needs is downloaded (``allow_patterns``): the four compiled
models (one FlowLM variant) and the constants; voices come one by one on first use, and the
cloning encoder on the first clone (``encoder_patterns``: the pack's mimi_encoderv3, else the
shared encoder with its reprojection files; English uses the shared encoder). Files land
in the standard Hugging Face cache at a pinned revision (``HF_TOKEN``, ``HF_HUB_OFFLINE`` and
``HF_ENDPOINT`` apply); a FlowLM variant of the other precision left in the cache is deleted
after each load. ``model_dir`` points at a local copy of one pack's folder (or at a folder
holding ``v2.1/<pack name>/``); nothing is downloaded or deleted there. In such a folder the
shared encoder files may sit beside the models or at the top (above ``v2.1/``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import (
    CloningUnavailableError,
    PackFilesMissingError,
    UnknownLanguageError,
    UnknownVoiceError,
)
from ...model.config import get_config
from ...model.config_reference import coreml_pack_reference
from ...model.languages import PUBLISHED_VOICES
from ...model.packs import PackFiles, PackRequest, load_local_config, local_voices
from .constants import (
    BOS_BEFORE_VOICE,
    BOS_EMB,
    MIMI_INIT_STATE,
    RECOVER_PINV,
    REQUIRED_FILES,
    SPEAKER_PROJ,
    TEXT_EMBED_TABLE,
    TOKENIZER,
)
from .hub import FLOWLM_MODELS, REPO, REVISION, download, remove_unused_variant

logger = logging.getLogger(__name__)

PACK_VERSION = "v2.1"
CONSTANTS_DIR = "constants_bin"

#: Every pack of v2.1, by pack name: the registry config of the same name describes its model.
PACK_NAMES = (
    "english",
    "german",
    "italian",
    "portuguese",
    "spanish",
    "french_24l",
    "german_24l",
    "italian_24l",
    "portuguese_24l",
    "spanish_24l",
)
#: Stage → model folder name (without ``.mlmodelc``), FlowLM aside.
STAGE_MODELS = {
    "cond_prefill": "cond_prefill",
    "flow_decoder": "flow_decoder_fused",
    "mimi_decoder": "mimi_decoder",
}
#: Files of ``constants_bin/`` every load needs (``bos_before_voice.bin`` may be absent).
CONSTANT_FILES = (TOKENIZER, TEXT_EMBED_TABLE, BOS_EMB, BOS_BEFORE_VOICE)
#: Voice-cloning encoders: the pack's own (``v2.1/<pack name>/``) and the shared one (root).
PACK_ENCODER = "mimi_encoderv3"
SHARED_ENCODER = "mimi_encoderv2"


def pack_folder(pack_name: str) -> str:
    """The pack's folder in the repository: ``v2.1/<pack name>``."""
    return f"{PACK_VERSION}/{pack_name}"


def stage_folders(precision: str) -> dict[str, str]:
    """Stage → ``<model>.mlmodelc`` folder name for a precision."""
    if precision not in FLOWLM_MODELS:
        raise ValueError(f"precision must be one of {', '.join(FLOWLM_MODELS)}, got {precision!r}")
    names = {**STAGE_MODELS, "flowlm": FLOWLM_MODELS[precision]}
    return {
        stage: f"{names[stage]}.mlmodelc"
        for stage in ("cond_prefill", "flowlm", "flow_decoder", "mimi_decoder")
    }


def model_patterns(pack_name: str, precision: str) -> list[str]:
    """``allow_patterns`` for the four compiled models of one precision."""
    root = pack_folder(pack_name)
    return [f"{root}/{folder}/*" for folder in stage_folders(precision).values()]


def constant_patterns(pack_name: str) -> list[str]:
    """``allow_patterns`` for the constants (voices excluded: they come on first use)."""
    root = f"{pack_folder(pack_name)}/{CONSTANTS_DIR}"
    return [f"{root}/{name}" for name in CONSTANT_FILES] + [f"{root}/{MIMI_INIT_STATE}/*"]


def allow_patterns(pack_name: str, precision: str = "fp16") -> list[str]:
    """Everything a load of ``pack_name`` at ``precision`` downloads (voices aside)."""
    return model_patterns(pack_name, precision) + constant_patterns(pack_name)


def select_files(listing: Iterable[str], pack_name: str, precision: str = "fp16") -> list[str]:
    """The repository paths of ``listing`` that a load needs (the filter, spelled out)."""
    root = pack_folder(pack_name) + "/"
    models = set(stage_folders(precision).values())
    wanted = []
    for path in listing:
        if not path.startswith(root):
            continue
        first, _, rest = path[len(root) :].partition("/")
        in_model = first in models and bool(rest)
        if in_model or (
            first == CONSTANTS_DIR
            and (
                rest in CONSTANT_FILES
                or (rest.startswith(MIMI_INIT_STATE + "/") and len(rest) > len(MIMI_INIT_STATE) + 1)
            )
        ):
            wanted.append(path)
    return wanted


def encoder_patterns(pack_name: str, which: str) -> list[str]:
    """``allow_patterns`` for a cloning encoder: ``which`` = "pack" (``mimi_encoderv3``) or
    "shared" (root ``mimi_encoderv2``, plus the reprojection files for other languages)."""
    root = pack_folder(pack_name)
    if which == "pack":
        return [f"{root}/{PACK_ENCODER}.mlmodelc/*"]
    if which != "shared":
        raise ValueError(f"which must be 'pack' or 'shared', got {which!r}")
    patterns = [f"{SHARED_ENCODER}.mlmodelc/*"]
    if get_config(pack_name).language != "english":
        patterns += [RECOVER_PINV, f"{root}/{CONSTANTS_DIR}/{SPEAKER_PROJ}"]
    return patterns


@dataclass(frozen=True)
class EncoderFiles:
    """The cloning encoder a pack uses, and the reprojection files its output needs."""

    # A .mlmodelc folder.
    model: Path
    # True for mimi_encoderv3, whose output is already in the pack's space.
    pack_local: bool
    # With both set, the shared encoder's output is reprojected.
    recover_pinv: Path | None = None
    speaker_proj: Path | None = None

    @property
    def reprojected(self) -> bool:
        return self.recover_pinv is not None and self.speaker_proj is not None


def find_encoder(language_root: Path, *, english: bool) -> EncoderFiles | str:
    """The cloning encoder present under a pack folder, or why there is none (a message).

    Non-English packs prefer their own ``mimi_encoderv3``. Otherwise the shared
    ``mimi_encoderv2`` (beside the models, or at the repository root above ``v2.1/``), with
    ``encoder_recover_pinv.bin`` and ``constants_bin/speaker_proj_weight.bin`` when both exist;
    without them only English may use it (its reprojection is the identity).
    """
    own = language_root / f"{PACK_ENCODER}.mlmodelc"
    if not english and own.is_dir():
        return EncoderFiles(model=own, pack_local=True)
    places = [language_root]
    if language_root.parent.name == PACK_VERSION:
        places.append(language_root.parent.parent)
    shared = next(
        (
            p / f"{SHARED_ENCODER}.mlmodelc"
            for p in places
            if (p / f"{SHARED_ENCODER}.mlmodelc").is_dir()
        ),
        None,
    )
    pinv = next((p / RECOVER_PINV for p in places if (p / RECOVER_PINV).is_file()), None)
    proj = language_root / CONSTANTS_DIR / SPEAKER_PROJ
    if shared is not None and pinv is not None and proj.is_file():
        return EncoderFiles(model=shared, pack_local=False, recover_pinv=pinv, speaker_proj=proj)
    if shared is not None and english:
        return EncoderFiles(model=shared, pack_local=False)
    if english:
        needed = f"{SHARED_ENCODER}.mlmodelc"
    else:
        needed = (
            f"{PACK_ENCODER}.mlmodelc in the pack folder, or the shared {SHARED_ENCODER}.mlmodelc "
            f"with {RECOVER_PINV} and {CONSTANTS_DIR}/{SPEAKER_PROJ}"
        )
    return (
        f"voice cloning on CoreML needs the Mimi encoder: {needed} (found none under "
        f"{language_root}). Copy {'it' if english else 'them'} from {REPO} (the shared files sit "
        f"at its root; put them beside the models or above {PACK_VERSION}/), load without "
        "model_dir to download them on the first clone, or clone with backend='numpy'."
    )


def missing_constants(folder: Path) -> list[str]:
    """The required ``constants_bin`` files absent from ``folder``."""
    return [name for name in REQUIRED_FILES if not (folder / name).is_file()]


def voice_path_in_repo(pack_name: str, voice: str) -> str:
    return f"{pack_folder(pack_name)}/{CONSTANTS_DIR}/{voice}.safetensors"


def has_coreml_pack(pack_name: str, model_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``pack_name`` has a CoreML pack on the hub, or ``model_dir`` holds one (no I/O
    beyond a file check): what ``backend="auto"`` asks before choosing CoreML."""
    if model_dir is None:
        return pack_name in PACK_NAMES or coreml_pack_reference(pack_name) is not None
    folder = Path(model_dir).expanduser()
    if (folder / pack_folder(pack_name)).is_dir():
        folder = folder / pack_folder(pack_name)
    return (folder / CONSTANTS_DIR / TEXT_EMBED_TABLE).is_file()


# -- the resolved pack ------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreMLPackFiles(PackFiles):
    """A CoreML pack: ``root`` is the pack's folder; models are fetched per precision."""

    root: Path | None = None
    #: Why this pack cannot clone (None: it can; hub packs fetch the encoder on first use).
    cloning_unavailable_reason: str | None = None
    _fetch_models: Callable[[str], Path] | None = field(default=None, repr=False, compare=False)
    _fetch_encoder: Callable[[], EncoderFiles] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def constants_dir(self) -> Path:
        assert self.root is not None
        return self.root / CONSTANTS_DIR

    def model_paths(self, precision: str = "fp16") -> dict[str, Path]:
        """Stage → ``.mlmodelc`` folder of ``precision`` (downloaded first for hub packs)."""
        folders = stage_folders(precision)
        root = self._fetch_models(precision) if self._fetch_models else self.root
        assert root is not None
        paths = {stage: root / folder for stage, folder in folders.items()}
        missing = [p.name for p in paths.values() if not p.is_dir()]
        if missing:
            raise PackFilesMissingError(
                f"the CoreML pack in {root} lacks {', '.join(missing)} (precision {precision!r}). "
                + (
                    "Copy the pack's .mlmodelc folders there, or load without model_dir to "
                    "download them."
                    if self.model_dir is not None
                    else "Go online once (unset HF_HUB_OFFLINE) so they are downloaded."
                )
            )
        return paths

    def encoder_files(self) -> EncoderFiles:
        """The cloning encoder (downloaded first for hub packs); ``CloningUnavailableError``
        saying what is missing when there is none."""
        if self.cloning_unavailable_reason is not None:
            raise CloningUnavailableError(self.cloning_unavailable_reason)
        if self._fetch_encoder is None:
            raise CloningUnavailableError(
                f"pack {self.config.name!r} has no voice-cloning encoder; clone with "
                "backend='numpy'"
            )
        return self._fetch_encoder()


def _cloning_reason(constants: Path, found: EncoderFiles | str | None) -> str | None:
    """Why a pack cannot clone: no ``bos_before_voice.bin``, or ``found`` is a message."""
    if not (constants / BOS_BEFORE_VOICE).is_file():
        return (
            f"voice cloning on CoreML needs {CONSTANTS_DIR}/{BOS_BEFORE_VOICE}, which "
            f"{constants.parent} lacks: re-download the pack (or copy the file from {REPO}), "
            "or clone with backend='numpy'."
        )
    return found if isinstance(found, str) else None


def find_coreml_pack_files(request: PackRequest) -> CoreMLPackFiles:
    """The CoreML layout's pack for a request (local folder or the hub)."""
    if request.model_dir is not None:
        return resolve_local_coreml_pack(request.config_name, request.model_dir)
    other = coreml_pack_reference(request.config_name)
    # Another repository's pack, at its pinned revision if given.
    if other is not None:
        return resolve_hub_coreml_pack(
            other.pack,
            revision=other.revision or request.revision,
            token=request.token,
            repo=other.repo,
        )
    return resolve_hub_coreml_pack(
        request.config_name, revision=request.revision, token=request.token
    )


def resolve_local_coreml_pack(pack_name: str, model_dir: str | os.PathLike[str]) -> CoreMLPackFiles:
    """A CoreML pack in a local folder (the pack's folder, or one holding ``v2.1/<pack name>``)."""
    folder = Path(model_dir).expanduser()
    if (folder / pack_folder(pack_name)).is_dir():
        folder = folder / pack_folder(pack_name)
    if not folder.is_dir():
        raise PackFilesMissingError(
            f"model_dir {folder} does not exist or is not a folder. Pass the folder of a CoreML "
            f"pack (the contents of {REPO}/{pack_folder(pack_name)}), or leave model_dir out to "
            "download it."
        )
    config = load_local_config(pack_name, folder)
    constants = folder / CONSTANTS_DIR
    missing = missing_constants(constants)
    if missing:
        raise PackFilesMissingError(
            f"model_dir {folder} is not a complete CoreML pack: {CONSTANTS_DIR}/ lacks "
            f"{', '.join(missing)}. Copy the whole {pack_folder(pack_name)} folder of {REPO}."
        )
    names, fetch_voice = local_voices(constants)

    english = config.language == "english"
    reason = _cloning_reason(constants, find_encoder(folder, english=english))

    def fetch_encoder() -> EncoderFiles:
        found = find_encoder(folder, english=english)
        if isinstance(found, str):
            raise CloningUnavailableError(found)
        return found

    return CoreMLPackFiles(
        config=config,
        weights=folder,
        tokenizer=constants / TOKENIZER,
        voice_names=names,
        has_voice_cloning=reason is None,
        backend_kind="coreml",
        model_dir=folder,
        voices_dir=constants,
        _fetch_voice=fetch_voice,
        root=folder,
        cloning_unavailable_reason=reason,
        _fetch_encoder=fetch_encoder,
    )


def resolve_hub_coreml_pack(
    pack_name: str,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    repo: str = REPO,
) -> CoreMLPackFiles:
    """A v2.1 pack from the hub: constants now, models per precision on load, voices on use.

    ``repo``: FluidInference's repository (its ``PACK_NAMES``), or another one publishing
    ``v2.1/<pack>`` in the same layout for any registry config (untested on a Mac so far).
    """
    if repo == REPO and pack_name not in PACK_NAMES:
        raise UnknownLanguageError(
            f"there is no CoreML pack for {pack_name!r}; CoreML packs: {', '.join(PACK_NAMES)}. "
            "Use backend='numpy' for the other models (or model_dir= with a converted pack)."
        )
    config = get_config(pack_name)
    rev = revision or REVISION
    snapshot = download(
        constant_patterns(pack_name), revision=rev, token=token, what="constants", repo=repo
    )
    root = snapshot / pack_folder(pack_name)
    lock = threading.Lock()
    fetched: dict[str, Path] = {}

    def fetch_voice(name: str) -> Path:
        with lock:
            if name not in fetched:
                path = download(
                    [voice_path_in_repo(pack_name, name)],
                    revision=rev,
                    token=token,
                    repo=repo,
                    what=f"voice {name!r}",
                ) / voice_path_in_repo(pack_name, name)
                if not path.is_file():
                    raise UnknownVoiceError(
                        f"voice {name!r} is not published in {repo}/{pack_folder(pack_name)}; "
                        f"pick another voice: {', '.join(PUBLISHED_VOICES)}"
                    )
                fetched[name] = path
            return fetched[name]

    def fetch_models(precision: str) -> Path:
        folder = download(
            model_patterns(pack_name, precision),
            revision=rev,
            token=token,
            what="models",
            repo=repo,
        )
        remove_unused_variant(folder / pack_folder(pack_name), keep=precision)
        return folder / pack_folder(pack_name)

    english = config.language == "english"

    def fetch_encoder() -> EncoderFiles:
        with lock:
            if not english:
                folder = download(
                    encoder_patterns(pack_name, "pack"),
                    revision=rev,
                    token=token,
                    what="encoder",
                    repo=repo,
                )
                found = find_encoder(folder / pack_folder(pack_name), english=False)
                if isinstance(found, EncoderFiles):
                    return found
            folder = download(
                encoder_patterns(pack_name, "shared"),
                revision=rev,
                token=token,
                what="encoder",
                repo=repo,
            )
            found = find_encoder(folder / pack_folder(pack_name), english=english)
            if isinstance(found, str):
                raise CloningUnavailableError(
                    f"{repo}@{rev} publishes no usable voice-cloning encoder for "
                    f"{pack_name!r}. {found}"
                )
            return found

    constants = root / CONSTANTS_DIR
    missing = missing_constants(constants)
    if missing:
        raise PackFilesMissingError(
            f"{repo}/{pack_folder(pack_name)}@{rev} lacks {CONSTANTS_DIR}/{', '.join(missing)} in "
            "the local cache (offline, or an unpublished revision). Go online once, or pass "
            "model_dir= with a copy of the pack."
        )
    # The encoder is fetched on the first clone.
    reason = _cloning_reason(constants, None)
    return CoreMLPackFiles(
        config=config,
        weights=root,
        tokenizer=constants / TOKENIZER,
        voice_names=PUBLISHED_VOICES,
        has_voice_cloning=reason is None,
        backend_kind="coreml",
        _fetch_voice=fetch_voice,
        root=root,
        _fetch_models=fetch_models,
        cloning_unavailable_reason=reason,
        _fetch_encoder=fetch_encoder,
    )


def download_coreml_pack(
    pack_name: str,
    *,
    precision: str = "fp16",
    voices: Iterable[str] | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    cloning: bool = False,
) -> tuple[CoreMLPackFiles, dict[str, Path]]:
    """Fetch a pack's constants, models of ``precision`` and ``voices`` (None: all) now;
    with ``cloning`` also the voice-cloning encoder (for offline cloning later)."""
    pack = find_coreml_pack_files(PackRequest(pack_name, revision=revision, token=token))
    pack.model_paths(precision)
    if cloning:
        pack.encoder_files()
    wanted = list(PUBLISHED_VOICES if voices is None else voices)
    return pack, {name: pack.voice_path(name) for name in wanted}
