"""Memory check before a fit allocates its large matrices.

The full-GP inference methods hold the kernel matrix, its Cholesky factor and a few more N x N
working matrices; at N = 30 000 a single float64 N x N matrix takes 7.2 GB. :func:`check_dense_memory`
compares the estimate with the memory the operating system reports as available and refuses the fit
with advice (what fits instead, computed by the caller from the same estimates; the largest N that fits)
before anything is allocated, rather than letting the machine swap or the factorisation run for minutes.
The inducing-point and basis-function
fits hold N x M and M x M matrices instead (M inducing points or basis vectors, also batch x M):
:func:`check_memory` refuses those from the sum of their sizes (:func:`matrix_bytes`), naming the size
parameters to lower and, where given, what fits instead. :func:`largest_fitting` finds the largest size
that fits under an estimate (for that advice). The K problems of a one-vs-rest fit run together in one
program: every estimate is per problem and counted K times (``classes``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["MEMORY_ENV", "InsufficientMemoryError", "available_memory", "check_dense_memory", "check_memory",
           "dense_bytes", "largest_fitting", "largest_n", "matrix_bytes"]

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


def dense_bytes(n: int, dtype: Any, n_buffers: int, classes: int = 1) -> int:
    """Bytes of ``n_buffers`` dense ``n`` x ``n`` matrices of ``dtype`` for each of ``classes`` problems.

    Examples
    --------
    >>> dense_bytes(1000, "float64", 13) / 1e6  # ECM's 13 N x N matrices at N = 1000
    104.0
    """
    return int(n) ** 2 * np.dtype(dtype).itemsize * int(n_buffers) * max(int(classes), 1)


def largest_fitting(fits: Callable[[int], bool], high: int) -> int:
    """The largest size k in [1, ``high``] with ``fits(k)``, for a ``fits`` true up to some size and false
    above it (memory that grows with the size); 0 where ``fits(1)`` is false. A bisection: about
    log2(high) calls.

    Examples
    --------
    >>> largest_fitting(lambda k: 3 * k * k <= 1000, 10_000), largest_fitting(lambda k: False, 10)
    (18, 0)
    """
    low, high = 0, int(high)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def check_dense_memory(
    n: int, dtype: Any, n_buffers: int, *, what: str, advice: str, available: int | None = None, classes: int = 1
) -> None:
    """Refuse a computation whose ``n_buffers`` dense ``n`` x ``n`` matrices would not fit in memory.

    Parameters
    ----------
    n : int
        Matrix size (the number of training points).
    dtype : numpy dtype
        Floating dtype of the matrices.
    n_buffers : int
        How many N x N matrices the computation holds at its peak, per problem.
    what : str
        What is being computed, for the message (e.g. ``"GPBSVM(inference='ecm')"``).
    advice : str
        What to do instead, for the message (e.g. ``"inference='fitc' with num_inducing <= 450 fits"``),
        followed by the largest N at which this computation fits.
    available : int or None, default=None
        Available bytes; None asks :func:`available_memory`.
    classes : int, default=1
        Problems computed together (the K classes of a one-vs-rest fit, one program), each with its
        ``n_buffers`` matrices.

    Raises
    ------
    InsufficientMemoryError
        Naming the estimate, the available memory, ``advice`` and the largest N that fits.
    """
    itemsize = np.dtype(dtype).itemsize
    buffers = int(n_buffers) * max(int(classes), 1)
    need = dense_bytes(n, dtype, n_buffers, classes)
    have = available_memory() if available is None else int(available)
    if need <= have:
        return
    per = f" ({n_buffers} for each of the {classes} one-vs-rest classes, fitted together)" if classes > 1 else ""
    raise InsufficientMemoryError(
        f"{what} on N = {n} training points needs about {need / 1e9:.3g} GB for its {buffers} dense N x N "
        f"{np.dtype(dtype)} matrices{per}, but only {have / 1e9:.3g} GB of memory is available; {advice}. {what} fits "
        f"at most N = {largest_n(have, itemsize, buffers)} points (set {MEMORY_ENV} to override the available "
        "memory)."
    )


def matrix_bytes(matrices: Sequence[tuple[float, int, int]], dtype: Any) -> int:
    """Bytes of ``count`` matrices of ``rows`` x ``cols`` of ``dtype`` for each ``(count, rows, cols)``.

    Examples
    --------
    >>> matrix_bytes([(2, 1000, 100), (1, 100, 100)], "float64")  # two N x M matrices and one M x M
    1680000
    """
    itemsize = np.dtype(dtype).itemsize
    return int(sum(count * rows * cols for count, rows, cols in matrices) * itemsize)


def check_memory(need: int, *, what: str, sizes: Sequence[tuple[str, Any]], available: int | None = None,
                 advice: str | None = None) -> None:
    """Refuse a computation that needs about ``need`` bytes at its peak when less is available.

    Parameters
    ----------
    need : int
        The estimate, in bytes (e.g. :func:`matrix_bytes` of the computation's largest matrices).
    what : str
        What is being computed, for the message (e.g. ``"GPBSVM(inference='svi')"``).
    sizes : sequence of (str, value)
        The parameters that set ``need``, the one to lower first first, with their values, for the message:
        ``[("num_inducing", 3000), ("batch_size", 100)]`` reads "lower num_inducing (3000) or batch_size (100)".
    available : int or None, default=None
        Available bytes; None asks :func:`available_memory`.
    advice : str or None, default=None
        What fits instead (e.g. ``"inference='fitc' with num_inducing <= 450 fits"``), after the parameters.

    Raises
    ------
    InsufficientMemoryError
        Naming the estimate, the available memory, the parameters to lower and ``advice``.
    """
    have = available_memory() if available is None else int(available)
    if need <= have:
        return
    lower = " or ".join(f"{name} ({value})" for name, value in sizes)
    raise InsufficientMemoryError(
        f"{what} needs about {need / 1e9:.3g} GB at its peak, but only {have / 1e9:.3g} GB of memory is available; "
        f"lower {lower}{f'; {advice}' if advice else ''} (set {MEMORY_ENV} to override the available memory)."
    )
