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

:func:`run_resumable_batched` runs K calls of one solver (the one-vs-rest problems of a multi-class fit,
collected through :func:`intercepted`) as one such run: the chunk program ``vmap``-ed over the
arguments that differ between the problems, with one checkpoint of all their carries.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
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

__all__ = ["BATCH_AXIS", "after_loops", "intercepted", "resumable_settings", "run_resumable", "run_resumable_batched",
           "solver_call", "stack_differing", "tracing", "while_loop"]

#: Most growth of a chunk's length over the previous one's (the first chunk of a loop runs one iteration).
GROWTH = 4
#: Most iterations per chunk.
MAX_LENGTH = 1 << 20

_ACTIVE = threading.local()


class _Loops:
    """The resumable loops of a chunk program being traced: per loop, the carry to start from, whether
    to use it (else the loop's own start) and the most iterations to run; ``given`` None to record
    the loops' starts only (their shapes, :func:`jax.eval_shape`); ``batched`` when the program is
    ``vmap``-ed over :data:`BATCH_AXIS`."""

    def __init__(self, given: list | None, use: Any = None, length: Any = None, batched: bool = False) -> None:
        self.given, self.use, self.length, self.batched = given, use, length, batched
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
    (:func:`tracing`), computed only in the chunk where every loop (of every problem of a batched run)
    has ended (``lax.cond``; zeros otherwise), so that costly post-processing (NUTS' log densities of
    every draw) runs once."""
    loops = getattr(_ACTIVE, "loops", None)
    if loops is None or loops.given is None or not loops.more:
        return fn(*operands)
    shapes = jax.eval_shape(fn, *operands)
    running = jnp.any(jnp.stack(loops.more))
    if loops.batched:  # the loops of every problem of the batch have ended
        running = lax.psum(running.astype(jnp.int32), BATCH_AXIS) > 0
    return lax.cond(~running, fn,
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


def _one_chunk(fn: Callable, static: tuple, batched: bool, given: list, use: Any, length: Any, args: tuple,
               kwargs: dict):
    loops = _Loops(given, use, length, batched)
    out = _traced(fn, static, loops, args, kwargs)
    if len(loops.out) != len(given):
        raise RuntimeError(f"{fn.__name__} ran {len(loops.out)} resumable loops in a chunk, {len(given)} before")
    return out, loops.out, jnp.stack(loops.more), jnp.stack(loops.ran)


#: The name of the batch axis of a batched run (:func:`run_resumable_batched`).
BATCH_AXIS = "problems"


def _in_axes(axes: Any) -> Any:
    """``vmap``'s ``in_axes`` of (args, kwargs) from their (treedef, mask) (:func:`stack_differing`)."""
    treedef, mask = axes
    return jax.tree_util.tree_unflatten(treedef, [0 if m else None for m in mask])


def _chunk_program(fn: Callable, static: tuple, axes: Any, given: list, use: Any, length: Any, args: tuple,
                   kwargs: dict):
    """One chunk of ``fn``'s loops (module docstring); with ``axes`` (:func:`stack_differing`), of every
    problem of a batch at once (``vmap`` over the stacked arguments and the carries)."""
    if axes is None:
        return _one_chunk(fn, static, False, given, use, length, args, kwargs)
    one = functools.partial(_one_chunk, fn, static, True)
    return jax.vmap(one, in_axes=(0, None, None, *_in_axes(axes)), axis_name=BATCH_AXIS)(
        given, use, length, args, kwargs)


#: The chunk program of a solver (one compilation per solver, static settings and shapes).
_run_chunk = jit(_chunk_program, static_argnums=(0, 1, 2))


def _loop_starts(fn: Callable, static: tuple, axes: Any, args: tuple, kwargs: dict) -> list:
    """The shapes of the loops' starting carries (leading batch axis with ``axes``)."""
    if axes is None:
        return jax.eval_shape(lambda a, k: _starts(fn, static, a, k), args, kwargs)
    starts = jax.vmap(functools.partial(_starts, fn, static), in_axes=_in_axes(axes), axis_name=BATCH_AXIS)
    return jax.eval_shape(starts, args, kwargs)


def stack_differing(per_problem: list[Any]) -> tuple[Any, Any]:
    """Pytrees of one structure as one: each leaf that differs between them stacked along a new
    leading axis, the others taken once; with ``(treedef, mask)``, which leaves were stacked.

    Raises ValueError where the structures differ."""
    flat = [jax.tree_util.tree_flatten(p) for p in per_problem]
    treedef = flat[0][1]
    if any(t != treedef for _, t in flat):
        raise ValueError("the problems' arguments differ in structure")
    leaves = [lv for lv, _ in flat]
    mask = tuple(not all(_same(lv[i], leaves[0][i]) for lv in leaves[1:]) for i in range(len(leaves[0])))
    merged = [np.stack([np.asarray(lv[i]) for lv in leaves]) if m else leaves[0][i] for i, m in enumerate(mask)]
    return jax.tree_util.tree_unflatten(treedef, merged), (treedef, mask)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


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
    return _settings(*_split(solver, args, kwargs))


def _settings(fn: Callable, static: tuple, dyn_args: tuple, dynamic: dict) -> dict[str, Any]:
    """:func:`resumable_settings` of a solver split by :func:`_split`."""
    positional, named = static
    return {"solver": _json_value(fn), **{f"argument {i}": _json_value(v) for i, v in positional},
            **{k: _json_value(v) for k, v in named}, "fingerprint": fingerprint(dyn_args, dynamic)}


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

    Notes
    -----
    Inside :func:`intercepted` the call goes to the interceptor instead (a one-vs-rest fit collects its
    problems' calls to run them together, :func:`run_resumable_batched`).
    """
    options = {"checkpoint": checkpoint, "resume": resume, "settings": settings, "after_chunk": after_chunk,
               "draws": draws}
    hook = getattr(_INTERCEPT, "hook", None)
    if hook is not None:
        return hook(solver_call, solver, args, kwargs, **options)
    fn, static, dyn_args, dynamic = _split(solver, args, kwargs)
    return _run(fn, static, None, dyn_args, dynamic, _settings(fn, static, dyn_args, dynamic), **options)


def solver_call(solver: Any, args: tuple, kwargs: dict, **options: Any) -> Any:
    """``run_resumable(solver, *args, **options, **kwargs)``: the form in which :func:`intercepted` hands
    the call over."""
    return run_resumable(solver, *args, **options, **kwargs)


def run_resumable_batched(solver: Any, per_problem: list[tuple[tuple, dict]], *, checkpoint=None, resume=None,
                          settings=None, after_chunk=None, draws=None) -> list[Any]:
    """``[solver(*args, **kwargs) for args, kwargs in per_problem]`` as one :func:`run_resumable` run: one
    chunk program ``vmap``-ed over the arguments that differ between the problems
    (:func:`stack_differing`), one checkpoint of every problem's carries, a loop's phase ending when
    every problem's loop has ended (a problem whose loop ended sooner keeps its carry, as ``vmap`` of
    ``lax.while_loop`` does). ``draws`` is applied to each problem's carries and the draws joined
    along the chain axis (problem k's chain c is chain ``k * num_chains + c`` of ``idata.nc``). The
    other options are those of :func:`run_resumable`; the results are each problem's, in order.

    Raises ValueError where the problems' static arguments or argument structures differ.
    """
    parts = [_split(solver, args, kwargs) for args, kwargs in per_problem]
    fn, static = parts[0][:2]
    if any(p[1] != static for p in parts[1:]):
        raise ValueError(f"the problems' static arguments of {fn.__name__} differ: they cannot run as one program")
    (dyn_args, dynamic), axes = stack_differing([(p[2], p[3]) for p in parts])
    K = len(per_problem)
    run_settings = {**_settings(fn, static, dyn_args, dynamic), "problems": K}

    def joined_draws(given: list) -> dict[str, np.ndarray]:
        each = [draws(_problem(given, k)) for k in range(K)]
        return {name: np.concatenate([d[name] for d in each], axis=1) for name in each[0]}

    out = _run(fn, static, axes, dyn_args, dynamic, run_settings, checkpoint=checkpoint, resume=resume,
               settings=settings, after_chunk=after_chunk, draws=None if draws is None else joined_draws)
    return [_problem(out, k) for k in range(K)]


def _problem(tree: Any, k: int) -> Any:
    return jax.tree_util.tree_map(lambda a: a[k], tree)


_INTERCEPT = threading.local()


@contextlib.contextmanager
def intercepted(hook: Callable[..., Any]) -> Iterator[None]:
    """Within the block, calls ``run_resumable(solver, *args, **options, **kwargs)`` in this thread return
    ``hook(solver_call, solver, args, kwargs, **options)``."""
    previous = getattr(_INTERCEPT, "hook", None)
    _INTERCEPT.hook = hook
    try:
        yield
    finally:
        _INTERCEPT.hook = previous


def _run(fn: Callable, static: tuple, axes: Any, dyn_args: tuple, dynamic: dict, run_settings: dict[str, Any], *,
         checkpoint, resume, settings, after_chunk, draws) -> Any:
    """:func:`run_resumable` of ``fn`` split by :func:`_split` (batched with ``axes``, :func:`stack_differing`)."""
    starts = _loop_starts(fn, static, axes, dyn_args, dynamic)
    given = [jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), start) for start in starts]
    n_loops = len(given)
    use = np.zeros(n_loops, bool)
    folder = checkpoint_folder(checkpoint, resume)
    if folder is not None:
        run_settings = {**run_settings, **(settings or {})}
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
                out, carries, more, ran = stop.call(_run_chunk, fn, static, axes, given, use, lengths, dyn_args,
                                                    dynamic)
                # per loop: whether any problem's loop goes on, and the most iterations one ran
                more = np.asarray(more).reshape(-1, n_loops).any(axis=0)
                ran = int(np.asarray(ran).reshape(-1, n_loops).max(axis=0).sum())
                carries = jax.device_get(carries)
                done += ran
                new_phase = next((k for k in range(n_loops) if more[k]), n_loops)
                given = [carries[k] if k <= new_phase else given[k] for k in range(n_loops)]
                use = np.arange(n_loops) <= new_phase
                length = 1 if new_phase != phase else _next_length(length, ran, watch.seconds)
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
