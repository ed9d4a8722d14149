"""Compiled kernels (numba) and which of them this CPU runs.

The names of the int16 kernels' instruction paths live here, where both the choice
(``arithmetic.py``, importable without numba) and the kernels (``int16.py``) read them.
"""

#: The int16 kernels' instruction paths, best first (``int16.py``).
INT16_KERNELS = ("vnni", "avx-vnni", "avx2", "portable")
