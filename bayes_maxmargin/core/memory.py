"""Memory check before a fit allocates dense N x N matrices.

The full-GP inference methods hold the kernel matrix, its Cholesky factor and a few more N x N
working matrices; at N = 30 000 a single float64 N x N matrix takes 7.2 GB. :func:`check_dense_memory`
compares the estimate with the memory the operating system reports as available and refuses the fit
with advice (a sparse method, the largest N that fits) before anything is allocated, rather than
letting the machine swap or the factorisation run for minutes.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

__all__ = ["MEMORY_ENV", "InsufficientMemoryError", "available_memory", "check_dense_memory", "largest_n"]

#: Environment variable overriding the available memory, in bytes (for tests, or to leave room for
#: other processes).
MEMORY_ENV = "BMM_AVAILABLE_MEMORY"


class InsufficientMemoryError(MemoryError, ValueError):
    """A fit would need more memory for its N x N matrices than is available (also a ValueError:
    the cause is the size of the input)."""


def available_memory() -> int:
    """Bytes of memory available to a new allocation.

    ``$BMM_AVAILABLE_MEMORY`` when set, else ``MemAvailable`` of ``/proc/meminfo`` (Linux), else the
    physical memory ``SC_PHYS_PAGES * SC_PAGE_SIZE``; a very large number when none is known.
    """
    override = os.environ.get(MEMORY_ENV)
    if override:
        try:
            return int(float(override))
        except ValueError:
            raise ValueError(
                f"Invalid value for the environment variable {MEMORY_ENV}: {override!r} (must be a number of bytes)"
            ) from None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 2**62


def largest_n(available: int, itemsize: int, n_buffers: int) -> int:
    """The largest N whose ``n_buffers`` N x N matrices of ``itemsize`` bytes fit in ``available`` bytes."""
    return int(math.isqrt(max(int(available), 0) // (int(itemsize) * max(int(n_buffers), 1))))


def check_dense_memory(
    n: int, dtype: Any, n_buffers: int, *, what: str, advice: str, available: int | None = None
) -> None:
    """Refuse a computation whose ``n_buffers`` dense ``n`` x ``n`` matrices would not fit in memory.

    Parameters
    ----------
    n : int
        Matrix size (the number of training points).
    dtype : numpy dtype
        Floating dtype of the matrices.
    n_buffers : int
        How many N x N matrices the computation holds at its peak.
    what : str
        What is being computed, for the message (e.g. ``"GPBSVM(inference='ecm')"``).
    advice : str
        What to do instead, for the message (e.g. ``"use inference='fitc' or 'svi'"``).
    available : int or None, default=None
        Available bytes; None asks :func:`available_memory`.

    Raises
    ------
    InsufficientMemoryError
        Naming the estimate, the available memory, the largest N that fits, and ``advice``.
    """
    itemsize = np.dtype(dtype).itemsize
    need = int(n) ** 2 * itemsize * int(n_buffers)
    have = available_memory() if available is None else int(available)
    if need <= have:
        return
    raise InsufficientMemoryError(
        f"{what} on N = {n} training points needs about {need / 1e9:.3g} GB for its {n_buffers} dense N x N "
        f"{np.dtype(dtype)} matrices, but only {have / 1e9:.3g} GB of memory is available; {advice}, or fit on at "
        f"most N = {largest_n(have, itemsize, n_buffers)} points (set {MEMORY_ENV} to override the available "
        "memory)."
    )
