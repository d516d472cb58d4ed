"""How the package's programs are compiled: :func:`jit`, ``jax.jit`` with the package's XLA options.

On XLA:CPU the programs of this package (samplers, EM / VB loops, SVI chunks) consist of many small
fusions, and a first fit of a small problem is mostly compilation. Two options, passed per program
(:data:`COMPILER_OPTIONS`), make it shorter without slowing the programs down:

* the classic loop emitters (``xla_cpu_use_fusion_emitters=False``): recent XLA compiles each fusion
  of a CPU program as its own MLIR module; the loop emitters compile most of these programs in a half
  to four fifths of the time and run them at the same speed (a first GP Gibbs fit: 9.0 s instead of
  12.0 s; the test suite: 300-390 s instead of 450-560 s). The exception is the one-vs-all sampler of
  :class:`~bayes_maxmargin.MaxMarginProjection` (L classes vmapped in one program), which the loop
  emitters compile in twice the time and run 15 % slower; it keeps the fusion emitters
  (``jit(..., fusion_emitters=True)``). XLA from jaxlib 0.11 on has the fusion emitters only, and
  gets the optimisation level alone;
* LLVM's -O1 instead of -O2 for the generated code (``xla_backend_optimization_level=1``): the
  programs spend their time in LAPACK / Eigen calls and small loops that -O2's vectorisers do not
  speed up. First fits of 300 rows, paired runs in fresh processes: S-BSVM 1.6 instead of 2.1 s
  (its training program compiles in 0.71-0.78 s instead of 0.87-1.0 s), linear Gibbs 2.2-2.5
  instead of 2.7-2.9 s, ECM 2.8-3.1 instead of 3.1-3.2 s, Laplace-zero VB 1.1 instead of 1.2 s; the
  one-vs-all projection sampler on 3000 USPS digits 5.0-6.0 instead of 7.3-9.0 s; second fits as fast
  as before (S-BSVM over 200 000 rows, GP Gibbs, the projection sampler, within the machine's noise).

The options are XLA:CPU's: on other backends no program gets them, and an XLA that does not know
them gets none. A process that turns XLA's optimisations off (``jax_disable_most_optimizations``, as
the test suite does) before its first fit keeps them off: the optimisation level is then not passed
(a per-program option would override it). ``COMPILER_OPTIONS.clear()`` before the first fit compiles
everything with XLA's defaults. The user's own JAX programs and ``XLA_FLAGS`` are left alone.

While a fit reports its progress (:mod:`bayes_maxmargin.core.progress`), a function is traced and
cached apart from its plain version (its loops then carry the progress callbacks); a function whose
first such trace inserted no callback keeps using its plain version.

The options are settled at the first call of a compiled function, not at import, so that importing
the package never initialises a JAX backend (``jax.distributed.initialize`` must come first). Called
inside another program (JAX accepts options only on the outermost one) a function is traced as by a
plain ``jax.jit``.

A persistent compilation cache (:func:`use_compilation_cache`, opt-in for the Python API, on by
default in ``bmm``) keeps the compiled programs on disk, so that a new process fitting data of the
same shapes skips most of the compilation.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

try:
    from jax._src.core import trace_state_clean as _outside_any_trace
except ImportError:  # pragma: no cover - a JAX without it: tracers among the arguments tell instead
    _outside_any_trace = None

__all__ = ["BUCKET_STEPS", "COMPILATION_CACHE_MAX_BYTES", "COMPILER_OPTIONS", "CompilationCacheWarning",
           "bucket_rows", "compiler_options", "inlined", "jit", "use_compilation_cache"]

_FUSION_EMITTERS = "xla_cpu_use_fusion_emitters"
_OPTIMISATION_LEVEL = "xla_backend_optimization_level"
#: XLA:CPU options of every program compiled through :func:`jit` (where this XLA knows them).
COMPILER_OPTIONS: dict[str, Any] = {_FUSION_EMITTERS: False, _OPTIMISATION_LEVEL: 1}


@functools.cache
def compiler_options() -> dict[str, Any]:
    """Those of :data:`COMPILER_OPTIONS` that this JAX / XLA accepts (each tried once on a trivial
    program) on a CPU backend, without the optimisation level when ``jax_disable_most_optimizations``
    is on; else an empty dict. (XLA of jaxlib 0.11 and later has no loop emitters: only the
    optimisation level remains.)"""
    if jax.default_backend() != "cpu":
        return {}
    options = {}
    for name, value in COMPILER_OPTIONS.items():
        if name == _OPTIMISATION_LEVEL and jax.config.read("jax_disable_most_optimizations"):
            continue
        try:
            jax.jit(lambda x: x, compiler_options={name: value}).lower(np.float32(0)).compile()
        except Exception:  # an older jax.jit without the argument, or an XLA without the option
            continue
        options[name] = value
    return options


def _top_level(args: tuple, kwargs: dict) -> bool:
    """Whether a call happens outside of any JAX trace."""
    if _outside_any_trace is not None:
        return _outside_any_trace()
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs)))


def _ticks_enabled() -> bool:
    from bayes_maxmargin.core import progress

    return progress.ticks_enabled()


class _Reporting:
    """The versions of a :class:`_Compiled` function traced while a progress reporter is active:
    a distinct wrapper of the function, so that JAX traces and caches them apart."""

    def __init__(self, owner: "_Compiled") -> None:
        fun = owner._fun

        @functools.wraps(fun)
        def reporting(*args: Any, **kwargs: Any) -> Any:
            return fun(*args, **kwargs)

        options = owner.options
        self.nested = jax.jit(reporting, **owner._kwargs)
        self.jitted = jax.jit(reporting, **owner._kwargs, compiler_options=options) if options else self.nested
        self.checked = False  # whether the first call told if the function has callbacks at all


class _Compiled:
    """A function compiled by ``jax.jit`` with :func:`compiler_options`, created at its first use;
    every attribute of the jitted function (``lower``, ``_cache_size``, ...) is available."""

    def __init__(self, fun: Callable, kwargs: dict[str, Any], extra: dict[str, Any], fusion_emitters: bool) -> None:
        functools.update_wrapper(self, fun)
        self._fun, self._kwargs, self._extra, self._fusion = fun, kwargs, extra, fusion_emitters
        self._jitted: Callable | None = None
        self._nested = jax.jit(fun, **kwargs)
        self._reporting: _Reporting | None = None
        self._no_callbacks = False

    @property
    def options(self) -> dict[str, Any]:
        """The XLA options of this program at top level."""
        options = {k: v for k, v in compiler_options().items() if not (self._fusion and k == _FUSION_EMITTERS)}
        return {**options, **self._extra}

    @property
    def jitted(self) -> Callable:
        if self._jitted is None:
            options = self.options
            self._jitted = jax.jit(self._fun, **self._kwargs, compiler_options=options) if options else self._nested
        return self._jitted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        top = _top_level(args, kwargs)
        if not top and getattr(_INLINE, "depth", 0):
            return self._fun(*args, **kwargs)
        if self._no_callbacks:  # no progress callback in its program: the one compiled with a reporter
            # serves every later call, reporting or not (no second compilation)
            return (self.serving if top else self._reporting.nested)(*args, **kwargs)
        if not _ticks_enabled():
            return (self.jitted if top else self._nested)(*args, **kwargs)
        from bayes_maxmargin.core import progress

        if self._reporting is None:
            self._reporting = _Reporting(self)
        rep = self._reporting
        before = progress.inserted
        out = (rep.jitted if top else rep.nested)(*args, **kwargs)
        if not rep.checked:  # the first call traced: did it insert a callback?
            rep.checked = True
            self._no_callbacks = progress.inserted == before
        return out

    @property
    def serving(self) -> Callable:
        """The top-level program that serves calls without a progress reporter: the plain one, or the
        one compiled with a reporter once it is known to hold no callback."""
        return self._reporting.jitted if self._no_callbacks else self.jitted

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """``jax.jit(...).lower`` of the top-level program that serves calls (:attr:`serving`)."""
        return self.serving.lower(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fun", "_kwargs", "_extra", "_fusion", "_jitted", "_nested", "options",
                                              "_reporting", "_no_callbacks"):
            raise AttributeError(name)
        return getattr(self.serving, name)


_INLINE = threading.local()


@contextlib.contextmanager
def inlined() -> Iterator[None]:
    """While active in the calling thread, a function of :func:`jit` called inside a trace is traced in
    place, as its plain Python function, instead of as a nested program (which JAX traces once and
    caches): the trace of a program that rewrites some of its loops
    (:mod:`bayes_maxmargin.engine.resumable`) then reaches the loops of the functions it calls."""
    _INLINE.depth = getattr(_INLINE, "depth", 0) + 1
    try:
        yield
    finally:
        _INLINE.depth -= 1


def jit(
    fun: Callable | None = None,
    *,
    compiler_options: dict[str, Any] | None = None,
    fusion_emitters: bool = False,
    **kwargs: Any,
) -> Any:
    """``jax.jit(fun, **kwargs)`` with the package's XLA options; usable as ``@jit`` and
    ``@partial(jit, static_argnames=...)``.

    Parameters
    ----------
    compiler_options : dict, optional
        Further XLA options of this program (e.g. ``{"xla_backend_optimization_level": 0}`` for a
        one-off program whose compilation costs more than its run).
    fusion_emitters : bool
        Keep XLA:CPU's fusion emitters (for the programs that compile and run better with them);
        the other :func:`compiler_options` still apply.
    """
    if fun is None:
        return functools.partial(jit, compiler_options=compiler_options, fusion_emitters=fusion_emitters, **kwargs)
    return _Compiled(fun, kwargs, dict(compiler_options or {}), fusion_emitters)


#: Most bytes the persistent compilation cache keeps (least recently used entries go first).
COMPILATION_CACHE_MAX_BYTES = 2**30


class CompilationCacheWarning(UserWarning):
    """The persistent compilation cache cannot be used (its folder cannot be written)."""


#: Row buckets per doubling of :func:`bucket_rows` (4: a program runs at most 25 % padding rows).
BUCKET_STEPS = 4


def bucket_rows(n: int | np.integer) -> int:
    """The row count that ``n`` rows are padded to, so that fits of nearby sizes share one program.

    The buckets are 16, then ``BUCKET_STEPS`` per doubling: 2^k (1 + j / BUCKET_STEPS), e.g. 640,
    768, 896, 1024, 1280, ... A program of a bucketed fit compiled once serves, for example, every
    cross-validation fold and the refit on all rows when they fall into one bucket (800 and 880 rows
    run as 896, 900 and 1000 rows as 1024), at the cost of at most a quarter more rows per iteration.

    Examples
    --------
    >>> from bayes_maxmargin.core.compilation import bucket_rows
    >>> [bucket_rows(n) for n in (10, 17, 100, 900, 1000, 1025)]
    [16, 20, 112, 1024, 1024, 1280]

    ``n`` is any integer >= 0 (a Python or NumPy integer); anything else raises a TypeError (not an
    integer) or ValueError (negative) naming it.
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise TypeError(f"bucket_rows: n must be an integer number of rows, got {n!r} of type {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise ValueError(f"bucket_rows: n must be a number of rows >= 0, got {n}")
    if n <= 16:
        return 16
    step = 2 ** max((n - 1).bit_length() - 1, 0) // BUCKET_STEPS  # a quarter of the doubling below n
    return -(-n // step) * step


def use_compilation_cache(folder: str | os.PathLike | None = "auto") -> Path | None:
    """Keep the compiled programs of this process in JAX's persistent compilation cache.

    A first fit of a small problem is mostly the compilation of many small programs, each well
    under JAX's default threshold for caching (1 s): every program is cached here (threshold 0),
    and the folder is kept under :data:`COMPILATION_CACHE_MAX_BYTES`. A later process that fits data
    of the same shapes (and settings that are compiled in) loads the programs instead of compiling
    them. Call it once, before the first fit; ``bmm`` calls it itself.

    Parameters
    ----------
    folder : str, path-like or None, default="auto"
        "auto": ``$XDG_CACHE_HOME/bayes_maxmargin/jax`` (``~/.cache/bayes_maxmargin/jax``); a folder
        (created if needed); None: no cache. A ``JAX_COMPILATION_CACHE_DIR`` in the environment wins
        (JAX then uses it with its own settings).

    Returns
    -------
    Path or None
        The folder used; None when the cache is left to JAX's settings or the folder cannot be
        written.

    Warns
    -----
    CompilationCacheWarning
        The folder cannot be created or written: the fits run without the cache.

    Examples
    --------
    >>> import tempfile
    >>> from bayes_maxmargin import use_compilation_cache
    >>> use_compilation_cache(tempfile.mkdtemp()).is_dir()  # doctest: +SKIP
    True
    >>> use_compilation_cache(None) is None  # no cache
    True
    """
    if folder is None or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    if folder == "auto":
        path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bayes_maxmargin" / "jax"
    else:
        path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as err:
        warnings.warn(f"cannot write the compilation cache folder {path} ({err}); fitting without the cache "
                      "(give another folder)", CompilationCacheWarning, stacklevel=2)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_max_size", COMPILATION_CACHE_MAX_BYTES)
    return path
