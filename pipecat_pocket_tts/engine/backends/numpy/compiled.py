"""The compiled kernels (``kernels.py``, numba: the ``fast`` extra), when this process has them.

``optional()`` is for work NumPy can also do (fp32 linears of a few rows, Mimi's ELU): the
kernels module when numba is installed (imported and compiled once, at model load), else None
and NumPy runs. ``required()`` is for the narrow precisions, which only the kernels run: the
module, or ``PrecisionUnavailableError`` naming the extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from types import ModuleType

from ...errors import PrecisionUnavailableError

logger = logging.getLogger(__name__)

#: The pip extra that installs the kernels' dependency (numba).
KERNEL_EXTRA = "fast"

_lock = threading.Lock()  # guards the warm-up
_optional_lock = threading.Lock()  # guards the one attempt of ``optional``
_warmed: ModuleType | None = None  # the kernels module once warmed up
_optional: ModuleType | None = None
_optional_tried = False


def _import() -> ModuleType:
    """The kernels module (ImportError without a working numba), warmed up once."""
    global _warmed
    module = importlib.import_module(f"{__package__}.kernels")
    with _lock:
        if module is not _warmed:
            module.warm_up()
            _warmed = module
    return module


def required() -> ModuleType:
    """The kernels module, warmed up, or ``PrecisionUnavailableError`` naming the extra."""
    try:
        return _import()
    except ImportError as exc:
        raise PrecisionUnavailableError(
            "precision 'int8' and 'bf16' on the numpy backend run compiled kernels from numba, "
            f"which is not installed ({exc}): pip install numba "
            f"(in a clone: pip install -e '.[{KERNEL_EXTRA}]'), "
            "or load with precision='fp32'"
        ) from exc


def optional() -> ModuleType | None:
    """The kernels module when numba is installed (first call: import and warm-up), else None.

    A numba that is installed but does not import is logged once as a warning (NumPy runs).
    """
    global _optional, _optional_tried
    with _optional_lock:
        if not _optional_tried:
            _optional_tried = True
            if importlib.util.find_spec("numba") is not None:
                try:
                    _optional = _import()
                except ImportError as exc:
                    logger.warning(
                        "numba is installed but its kernels do not import (%s): NumPy "
                        "runs the fp32 linears and the ELU instead",
                        exc,
                    )
        return _optional
