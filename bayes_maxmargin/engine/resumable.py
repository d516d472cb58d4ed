"""Resumable loops: a solver compiled as one program, run in chunks with checkpoints.

The iterative solvers of the library (ECM and its ML-II rounds, FITC, the interior-point MAP, EM,
coordinate-ascent VB, batch VI, NUTS) are single compiled programs whose iterations run in
``lax.while_loop`` (or ``lax.scan``). They write their loops with :func:`while_loop` instead, which
outside :func:`run_resumable` is ``jax.lax.while_loop`` itself: a fit without a checkpoint compiles
and computes exactly what it did. (A scan becomes a :func:`while_loop` only while :func:`tracing`;
FactorBSVM's VBEM, a Python loop of compiled iterations, runs them as one such loop with a checkpoint.)

:func:`run_resumable` calls such a solver (a function of :func:`~bayes_maxmargin.core.compilation.jit`)
as a *chunk program*: the same solver traced with every resumable loop ``k`` (in the order they run;
a loop nested in another's body is an ordinary loop) started from a carry given as an argument (or
from its own start) and stopped after at most ``length[k]`` further iterations. The host runs the
loops one after the other, a chunk of iterations at a time (about :data:`~bayes_maxmargin.engine.chunks.CHUNK_SECONDS`
each, from the measured rate; the length is an argument, so chunks of every length share one
compilation): the loops before the running one are given their final carries and run no iteration,
those after it run none. Since a carry goes to the host and back unchanged and every chunk runs the
same compiled loop body, the result does not depend on how the run was cut: a resumed run equals an
uninterrupted one with a checkpoint, bit for bit. (It is not the program of the fit without a
checkpoint, so the two agree to rounding, amplified by the iterations.)

With a checkpoint folder, the loops' carries are written after every chunk
(:func:`~bayes_maxmargin.engine.checkpoint.write_progress`: atomically, under the folder's lock,
with the run's settings and a fingerprint of its arrays, refused by a run of other settings or data),
SIGINT / SIGTERM stop the run between chunks or, after
:data:`~bayes_maxmargin.engine.checkpoint.STOP_GRACE_S`, without the running one
(:func:`~bayes_maxmargin.engine.checkpoint.checkpoint_session`), and ``resume=folder`` continues
from the last chunk written. A solver with draws (``draws``) also writes them so far as ``idata.nc``
when the run stops and when it completes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayes_maxmargin.core.compilation import inlined, jit
from bayes_maxmargin.engine.checkpoint import (
    checkpoint_folder,
    checkpoint_session,
    fingerprint,
    resume_run,
    write_draws,
    write_progress,
)
from bayes_maxmargin.engine.chunks import CHUNK_SECONDS, Stopwatch

__all__ = ["after_loops", "resumable_settings", "run_resumable", "tracing", "while_loop"]

#: Most growth of a chunk's length over the previous one's (the first chunk of a loop runs one iteration).
GROWTH = 4
#: Most iterations per chunk.
MAX_LENGTH = 1 << 20

_ACTIVE = threading.local()


class _Loops:
    """The resumable loops of a chunk program being traced: per loop, the carry to start from, whether
    to use it (else the loop's own start) and the most iterations to run; ``given`` None to record
    the loops' starts only (their shapes, :func:`jax.eval_shape`)."""

    def __init__(self, given: list | None, use: Any = None, length: Any = None) -> None:
        self.given, self.use, self.length = given, use, length
        self.starts: list = []
        self.out: list = []
        self.more: list = []
        self.ran: list = []
        self.busy = False


def tracing() -> bool:
    """Whether a chunk program of :func:`run_resumable` is being traced in this thread (a solver that
    writes a loop as ``lax.scan`` writes it with :func:`while_loop` then)."""
    return getattr(_ACTIVE, "loops", None) is not None


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``jax.lax.while_loop(cond_fun, body_fun, init_val)``, resumable by :func:`run_resumable`.

    Traced for a chunk program (:func:`tracing`), the loop starts from the carry given to the chunk
    (when told to) instead of ``init_val``, and stops after the chunk's number of iterations if
    ``cond_fun`` has not stopped it before; its last carry, whether ``cond_fun`` still holds there and
    the iterations run are outputs of the chunk. Loops in the body of such a loop are ordinary ones.
    """
    loops = getattr(_ACTIVE, "loops", None)
    if loops is None or loops.busy:
        return lax.while_loop(cond_fun, body_fun, init_val)
    k = len(loops.starts)
    loops.starts.append(init_val)
    if loops.given is None:  # shapes only
        loops.out.append(init_val)
        return init_val
    start = jax.tree_util.tree_map(lambda g, i: jnp.where(loops.use[k], g, i).astype(i.dtype), loops.given[k], init_val)
    limit = loops.length[k]
    loops.busy = True
    try:
        out, ran = lax.while_loop(lambda c: cond_fun(c[0]) & (c[1] < limit), lambda c: (body_fun(c[0]), c[1] + 1),
                                  (start, jnp.asarray(0, jnp.int32)))
    finally:
        loops.busy = False
    loops.out.append(out)
    loops.more.append(jnp.asarray(cond_fun(out), bool))
    loops.ran.append(ran)
    return out


def after_loops(fn: Callable[..., Any], *operands: Any) -> Any:
    """``fn(*operands)``, the work a solver does once its loops are done; traced for a chunk program
    (:func:`tracing`), computed only in the chunk where every loop has ended (``lax.cond``; zeros
    otherwise), so that costly post-processing (NUTS' log densities of every draw) runs once."""
    loops = getattr(_ACTIVE, "loops", None)
    if loops is None or loops.given is None or not loops.more:
        return fn(*operands)
    shapes = jax.eval_shape(fn, *operands)
    return lax.cond(~jnp.any(jnp.stack(loops.more)), fn,
                    lambda *_: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes), *operands)


def _traced(fn: Callable, static: tuple, loops: _Loops, args: tuple, kwargs: dict) -> Any:
    """``fn`` of ``args``, ``kwargs`` and the ``static`` ones (positions and names), traced with ``loops``
    active and nested programs inlined."""
    positional, named = static
    full = list(args)
    for i, value in positional:
        full.insert(i, value)
    _ACTIVE.loops = loops
    try:
        with inlined():
            return fn(*full, **kwargs, **dict(named))
    finally:
        _ACTIVE.loops = None


def _starts(fn: Callable, static: tuple, args: tuple, kwargs: dict) -> Any:
    loops = _Loops(None)
    _traced(fn, static, loops, args, kwargs)
    return loops.starts


def _chunk_program(fn: Callable, static: tuple, given: list, use: Any, length: Any, args: tuple, kwargs: dict):
    loops = _Loops(given, use, length)
    out = _traced(fn, static, loops, args, kwargs)
    if len(loops.out) != len(given):
        raise RuntimeError(f"{fn.__name__} ran {len(loops.out)} resumable loops in a chunk, {len(given)} before")
    return out, loops.out, jnp.stack(loops.more), jnp.stack(loops.ran)


#: The chunk program of a solver (one compilation per solver, static settings and shapes).
_run_chunk = jit(_chunk_program, static_argnums=(0, 1))


def _split(solver: Any, args: tuple, kwargs: dict) -> tuple[Callable, tuple, tuple, dict]:
    """A function of :func:`~bayes_maxmargin.core.compilation.jit` and its arguments: its plain function,
    its static arguments (positions and values, names and values), its other positional and keyword
    arguments."""
    names = set(solver._kwargs.get("static_argnames", ()))
    numbers = solver._kwargs.get("static_argnums", ())
    numbers = {numbers} if isinstance(numbers, int) else set(numbers)
    positional = tuple((i, a) for i, a in enumerate(args) if i in numbers)
    named = tuple(sorted((k, v) for k, v in kwargs.items() if k in names))
    return (solver._fun, (positional, named), tuple(a for i, a in enumerate(args) if i not in numbers),
            {k: v for k, v in kwargs.items() if k not in names})


def resumable_settings(solver: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """What a checkpoint of ``solver(*args, **kwargs)`` must agree on: the solver, each static argument
    (:func:`_json_value`) and the fingerprint of the array arguments."""
    fn, (positional, named), dyn_args, dyn_kwargs = _split(solver, args, kwargs)
    return {"solver": _json_value(fn), **{f"argument {i}": _json_value(v) for i, v in positional},
            **{k: _json_value(v) for k, v in named}, "fingerprint": fingerprint(dyn_args, dyn_kwargs)}


def _json_value(value: Any) -> Any:
    """A static argument as a checkpoint stores it: numbers, strings, booleans and None as they are,
    functions by their module and name, anything else by its ``repr``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def _next_length(length: int, ran: int, seconds: float, target: float = CHUNK_SECONDS) -> int:
    """The next chunk's length: about ``target`` seconds at the rate of the last chunk (``ran``
    iterations in ``seconds``), at most :data:`GROWTH` times ``length``."""
    if ran <= 0:
        return length
    rate = ran / max(seconds, 1e-9)
    return int(max(1, min(GROWTH * length, target * rate, MAX_LENGTH)))


def run_resumable(
    solver: Any,
    *args: Any,
    checkpoint: str | os.PathLike | None = None,
    resume: str | os.PathLike | None = None,
    settings: dict[str, Any] | None = None,
    after_chunk: Callable[[int], None] | None = None,
    draws: Callable[[list], dict[str, np.ndarray]] | None = None,
    **kwargs: Any,
) -> Any:
    """``solver(*args, **kwargs)``, its resumable loops (:func:`while_loop`) run in chunks with a
    checkpoint after each.

    Parameters
    ----------
    solver : function of :func:`~bayes_maxmargin.core.compilation.jit`
        The solver; its static arguments (``static_argnames``) are compiled in, the others traced.
    *args, **kwargs
        Its arguments.
    checkpoint : path, optional
        Folder that receives ``checkpoint.npz`` (the loops' carries and the iterations run) after
        every chunk, atomically; locked by the run, which acts upon Ctrl-C and SIGTERM between
        chunks (:func:`~bayes_maxmargin.engine.checkpoint.checkpoint_session`).
    resume : path, optional
        Folder of a checkpoint of the same run (same solver, static arguments and arrays) to continue
        from; also the checkpoint folder unless ``checkpoint`` is given. A complete run's checkpoint
        gives its result after one chunk of no iteration.
    settings : dict, optional
        Further JSON-able settings a checkpoint must agree on.
    after_chunk : callable, optional
        Called with the iterations run so far after every chunk (after its checkpoint).
    draws : callable, optional
        The draws so far, (draw, chain, ...) per name, from the loops' carries: written as
        ``idata.nc`` when the run stops and when it completes.

    Returns
    -------
    The solver's output.

    Raises
    ------
    CheckpointError
        ``resume`` holds no readable checkpoint, or one of another run; another run uses the folder.
    KeyboardInterrupt, Terminated
        A checkpointed run received SIGINT or SIGTERM (after writing its checkpoint).
    """
    fn, static, dyn_args, dynamic = _split(solver, args, kwargs)
    starts = jax.eval_shape(lambda a, k: _starts(fn, static, a, k), dyn_args, dynamic)
    given = [jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), start) for start in starts]
    n_loops = len(given)
    use = np.zeros(n_loops, bool)
    folder = checkpoint_folder(checkpoint, resume)
    run_settings = None
    if folder is not None:
        run_settings = {**resumable_settings(solver, args, kwargs), **(settings or {})}
        if draws is not None:
            import arviz  # noqa: F401  (idata.nc is written when the run stops: its import not after a signal)
    done, phase = 0, 0
    with checkpoint_session(folder) as stop:
        if resume is not None:
            ckpt, (given, use) = resume_run(resume, run_settings, (given, use))
            given, use = [jax.tree_util.tree_map(np.asarray, g) for g in given], np.asarray(use)
            done, phase = ckpt.done, int(ckpt.extra.get("phase", 0))
            stop.resume_at = done
        length = 1
        try:
            while True:
                lengths = np.asarray([length if k == phase else 0 for k in range(n_loops)], np.int32)
                watch = Stopwatch()
                out, carries, more, ran = stop.call(_run_chunk, fn, static, given, use, lengths, dyn_args, dynamic)
                more, ran = np.asarray(more), np.asarray(ran)
                carries = jax.device_get(carries)
                done += int(ran.sum())
                new_phase = next((k for k in range(n_loops) if more[k]), n_loops)
                given = [carries[k] if k <= new_phase else given[k] for k in range(n_loops)]
                use = np.arange(n_loops) <= new_phase
                length = 1 if new_phase != phase else _next_length(length, int(ran.sum()), watch.seconds)
                phase = new_phase
                if folder is not None:
                    write_progress(folder, run_settings, done, (given, use), {}, {"phase": phase})
                stop.resume_at = done
                if after_chunk is not None:
                    after_chunk(done)
                if phase >= n_loops:
                    break
                stop.raise_if_requested()
        finally:
            if folder is not None and draws is not None:
                write_draws(folder, draws(given), done, complete=phase >= n_loops)
    stop.raise_if_requested()  # a signal during the last writes
    return out
