"""Compiled kernels (numba) and which of them this CPU runs."""
