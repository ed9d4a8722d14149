"""The compiled kernels (``kernels.py``, numba: the ``fast`` extra), when this process has them.

``optional()`` is for work NumPy can also do (fp32 linears of a few rows, Mimi's ELU): the
kernels module when numba is installed (imported and compiled once, at model load), else None
and NumPy runs. ``required()`` is for the narrow precisions, which only the kernels run: the
module, or ``PrecisionUnavailableError`` naming the extra. Nothing is imported or compiled
before one of them is called: modules hold ``AT_FIRST_USE`` and call ``resolve`` (so listing
languages or printing ``--help`` never compiles). A first compile in an install says so on
stderr (``kernel_cache``).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from types import ModuleType

from ....errors import PrecisionUnavailableError

logger = logging.getLogger(__name__)

#: The pip extra that installs the kernels' dependency (numba).
KERNEL_EXTRA = "fast"


class _Kernels:
    """The kernels module once warmed up, and the one attempt ``optional`` makes at it.

    The process has one, ``_kernels``, which ``required`` and ``optional`` look up at each
    call: a test puts a fresh one in its place (the next use imports again), then the
    process's back (``no_numba`` in ``tests/conftest.py``).
    """

    def __init__(self) -> None:
        self._warm_lock = threading.Lock()  # guards the warm-up
        self._optional_lock = threading.Lock()  # guards the one attempt of ``optional``
        self._warmed: ModuleType | None = None  # the kernels module once warmed up
        self._optional: ModuleType | None = None
        self._optional_tried = False

    def warmed_up(self) -> ModuleType:
        """The kernels module (ImportError without a working numba), warmed up once."""
        if self._warmed is not None:  # every call after the first: no lock
            return self._warmed
        from . import cache as kernel_cache

        with self._warm_lock:
            if self._warmed is not None:
                return self._warmed
            first = kernel_cache.announce_first_compile()  # before numba's import, not after it
            module = importlib.import_module(f"{__package__}.catalog")
            module.warm_up()
            if first:
                kernel_cache.mark_compiled()
            self._warmed = module
        return module

    def optional(self) -> ModuleType | None:
        """``optional()``: the warmed-up module if numba is installed and imports, else None;
        tried once."""
        if self._optional_tried:  # every call after the first (per layer and step): no lock
            return self._optional
        with self._optional_lock:
            if not self._optional_tried:
                self._optional_tried = True
                if numba_installed():
                    try:
                        self._optional = self.warmed_up()
                    except ImportError as exc:
                        logger.warning(
                            "numba is installed but its kernels do not import (%s): NumPy "
                            "runs the fp32 linears and the ELU instead",
                            exc,
                        )
            return self._optional


_kernels = _Kernels()


class _AtFirstUse:
    """The kernels of a module that has not asked for them yet (see ``resolve``)."""

    def __repr__(self) -> str:
        return "AT_FIRST_USE"


AT_FIRST_USE = _AtFirstUse()


def resolve(chosen: ModuleType | _AtFirstUse | None) -> ModuleType | None:
    """A module's kernels: ``optional()`` while it holds ``AT_FIRST_USE``, else what it holds
    (None: a test made it run NumPy alone)."""
    return optional() if chosen is AT_FIRST_USE else chosen  # type: ignore[return-value]


def required() -> ModuleType:
    """The kernels module, warmed up, or ``PrecisionUnavailableError`` naming the extra."""
    try:
        return _kernels.warmed_up()
    except ImportError as exc:
        raise PrecisionUnavailableError(
            "precision 'int8' and 'bf16' on the numpy backend run compiled kernels from numba, "
            f"which is not installed ({exc}): pip install numba "
            f"(in a clone: pip install -e '.[{KERNEL_EXTRA}]'), "
            "or load with precision='fp32'"
        ) from exc


def numba_installed() -> bool:
    """Whether numba is installed (found, not imported)."""
    return importlib.util.find_spec("numba") is not None


def optional() -> ModuleType | None:
    """The kernels module when numba is installed (first call: import and warm-up), else None.

    A numba that is installed but does not import is logged once as a warning (NumPy runs).
    """
    return _kernels.optional()
