"""How the package's programs are compiled: :func:`jit`, ``jax.jit`` with the package's XLA options.

On XLA:CPU the programs of this package (samplers, EM / VB loops, SVI chunks) consist of many small
fusions. Recent XLA compiles each fusion of a CPU program as its own MLIR module; the classic loop
emitters (``xla_cpu_use_fusion_emitters=False``) compile most of these programs in a half to four
fifths of the time and run them at the same speed, which matters because a first fit is mostly
compilation (a first GP Gibbs fit: 9.0 s instead of 12.0 s; the S-BSVM chunk program: 1.8 s
instead of 2.3 s; the test suite: 300-390 s instead of 450-560 s). The exception is the one-vs-all sampler of :class:`~bayes_maxmargin.MaxMarginProjection`
(L classes vmapped in one program), which the loop emitters compile in twice the time and run 15 %
slower; it opts out (``jit(..., package_options=False)``). The option is passed per program, so the
user's own JAX programs and ``XLA_FLAGS`` are left alone; other backends ignore it, and an XLA that
does not know it gets no options at all. ``COMPILER_OPTIONS.clear()`` before the first fit compiles
everything with XLA's defaults.

The options are settled at the first call of a compiled function, not at import, so that importing
the package never initialises a JAX backend (``jax.distributed.initialize`` must come first). Called
inside another program (JAX accepts options only on the outermost one) a function is traced as by a
plain ``jax.jit``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

try:
    from jax._src.core import trace_state_clean as _outside_any_trace
except ImportError:  # pragma: no cover - a JAX without it: tracers among the arguments tell instead
    _outside_any_trace = None

__all__ = ["COMPILER_OPTIONS", "compiler_options", "jit"]

#: XLA options of every program compiled through :func:`jit` (where this XLA knows them).
COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def compiler_options() -> dict[str, Any]:
    """:data:`COMPILER_OPTIONS` if this JAX / XLA accepts them (tried once on a trivial program),
    else an empty dict."""
    try:
        jax.jit(lambda x: x, compiler_options=COMPILER_OPTIONS).lower(np.float32(0)).compile()
    except Exception:  # an older jax.jit without the argument, or an XLA without the option
        return {}
    return dict(COMPILER_OPTIONS)


def _top_level(args: tuple, kwargs: dict) -> bool:
    """Whether a call happens outside of any JAX trace."""
    if _outside_any_trace is not None:
        return _outside_any_trace()
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs)))


class _Compiled:
    """A function compiled by ``jax.jit`` with :func:`compiler_options`, created at its first use;
    every attribute of the jitted function (``lower``, ``_cache_size``, ...) is available."""

    def __init__(self, fun: Callable, kwargs: dict[str, Any], extra: dict[str, Any], package: bool) -> None:
        functools.update_wrapper(self, fun)
        self._fun, self._kwargs, self._extra, self._package = fun, kwargs, extra, package
        self._jitted: Callable | None = None
        self._nested = jax.jit(fun, **kwargs)

    @property
    def jitted(self) -> Callable:
        if self._jitted is None:
            options = {**(compiler_options() if self._package else {}), **self._extra}
            self._jitted = jax.jit(self._fun, **self._kwargs, compiler_options=options) if options else self._nested
        return self._jitted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self.jitted if _top_level(args, kwargs) else self._nested)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fun", "_kwargs", "_extra", "_package", "_jitted", "_nested"):
            raise AttributeError(name)
        return getattr(self.jitted, name)


def jit(
    fun: Callable | None = None,
    *,
    compiler_options: dict[str, Any] | None = None,
    package_options: bool = True,
    **kwargs: Any,
) -> Any:
    """``jax.jit(fun, **kwargs)`` with the package's XLA options; usable as ``@jit`` and
    ``@partial(jit, static_argnames=...)``.

    Parameters
    ----------
    compiler_options : dict, optional
        Further XLA options of this program (e.g. ``{"xla_backend_optimization_level": 0}`` for a
        one-off program whose compilation costs more than its run).
    package_options : bool
        Whether :func:`compiler_options` apply (False: XLA's defaults, for the programs that compile
        better that way).
    """
    if fun is None:
        return functools.partial(jit, compiler_options=compiler_options, package_options=package_options, **kwargs)
    return _Compiled(fun, kwargs, dict(compiler_options or {}), package_options)
