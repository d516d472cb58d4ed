"""How the package's programs are compiled: :func:`jit`, ``jax.jit`` with the package's XLA options.

On XLA:CPU the programs of this package (samplers, EM / VB loops, SVI chunks) consist of many small
fusions. Recent XLA compiles each fusion of a CPU program as its own MLIR module; the classic loop
emitters (``xla_cpu_use_fusion_emitters=False``) compile the same programs in about half the time and
run them at the same speed, which matters because a first fit is mostly compilation (on the S-BSVM
chunk program: 0.9 s instead of 1.5 s). The option is passed per program, so the user's own JAX
programs and ``XLA_FLAGS`` are left alone; other backends ignore it, and an XLA that does not know it
gets no options at all.

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

    def __init__(self, fun: Callable, kwargs: dict[str, Any]) -> None:
        functools.update_wrapper(self, fun)
        self._fun, self._kwargs = fun, kwargs
        self._jitted: Callable | None = None
        self._nested = jax.jit(fun, **{k: v for k, v in kwargs.items() if k != "compiler_options"})

    @property
    def jitted(self) -> Callable:
        if self._jitted is None:
            options = {**compiler_options(), **self._kwargs.get("compiler_options", {})}
            kwargs = {k: v for k, v in self._kwargs.items() if k != "compiler_options"}
            self._jitted = jax.jit(self._fun, **kwargs, compiler_options=options) if options else self._nested
        return self._jitted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self.jitted if _top_level(args, kwargs) else self._nested)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fun", "_kwargs", "_jitted", "_nested"):
            raise AttributeError(name)
        return getattr(self.jitted, name)


def jit(fun: Callable | None = None, **kwargs: Any) -> Any:
    """``jax.jit(fun, **kwargs)`` with the package's XLA options; usable as ``@jit`` and
    ``@partial(jit, static_argnames=...)``."""
    if fun is None:
        return functools.partial(jit, **kwargs)
    return _Compiled(fun, kwargs)
