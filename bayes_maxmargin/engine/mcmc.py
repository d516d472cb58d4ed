"""The one run driver: ``lax.scan`` under ``jit``, chains by ``vmap``, in chunks.

Every Markov kernel of the library has the signature ``kernel(rng_key, state, data, hyper) ->
(state, info)`` with ``state`` a NamedTuple of arrays. :func:`run_chains` runs it for warm-up plus
``num_samples * thin`` iterations on several chains at once:

* the key of iteration ``i`` of a chain is ``fold_in(chain_key, i)``, so the draws do not depend on
  how the run is cut into chunks (a run resumed from a chunk boundary is the same run);
* a chunk is at most ``chunk_size`` blocks of ``thin`` iterations, all chunks of a run of one
  length, compiled once per (kernel, shapes): kernels come from cached builders, so a second fit of
  the same shapes does not recompile; a run whose chunks take more than a few seconds goes on with
  shorter ones (:mod:`bayes_maxmargin.engine.chunks`), so that Ctrl-C and SIGTERM take effect soon;
* after every chunk the host reports progress and checks that no state became non-finite; a
  chain that did stops the run with :class:`NonFiniteStateError` naming the chain, iteration and
  variable, never a NaN result.

Warm-up is rounded up to a whole number of thinning blocks.

With ``checkpoint=folder`` the states, keys and draws are written every ``chunk_size`` blocks
(:mod:`bayes_maxmargin.engine.checkpoint`); Ctrl-C, SIGTERM or an exception then write the
checkpoint of the last chunk and the draws so far (``idata.nc``), and ``resume=folder`` continues
the same chains. The run holds a lock on the folder, and Ctrl-C and SIGTERM take effect at the end
of the running chunk, or without it when it is still computing a few seconds after the signal
(``KeyboardInterrupt``, :class:`~bayes_maxmargin.engine.checkpoint.Terminated`).
Without a checkpoint the signal handlers are left alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.progress import fit_progress, tick
from bayes_maxmargin.engine.checkpoint import (
    INFO_PREFIX,
    checkpoint_folder,
    checkpoint_session,
    fingerprint,
    resume_run,
    write_draws,
    write_progress,
)
from bayes_maxmargin.engine.driver import Chunk, drive

__all__ = ["ChainResult", "NonFiniteStateError", "float64_hint", "fold_in_chains", "init_chains", "run_chains"]

Kernel = Callable[[Array, Any, Any, Any], tuple[Any, Any]]
Record = Callable[[Any], dict[str, Array]]

#: Most kept draws per compiled chunk (and between checkpoints) unless a run asks otherwise.
DEFAULT_CHUNK_SIZE = 250

#: A run reports its progress from inside the chunk for the first iterations and then every this
#: many (and the host after every chunk): a callback per sweep took half of a 1500-sweep linear
#: Gibbs fit of 900 rows (1.4 s with the progress bar, 0.7 s with reports every 16 sweeps).
TICK_EVERY = 16

#: Iterations per loop trip on an accelerator. There every trip of an XLA loop ends in a
#: device-to-host copy of the loop predicate, which costs as much as a small model's Gibbs sweep,
#: so the chunk's loops are unrolled by this factor (on a GPU it cut the linear sampler's time per
#: iteration by 1.6 at n = 500, d = 10); on the CPU a trip is cheap and unrolling would only
#: lengthen compilation.
ACCELERATOR_UNROLL = 8


def _unroll() -> int:
    """Loop unrolling of the compiled chunk on the default backend."""
    return 1 if jax.default_backend() == "cpu" else ACCELERATOR_UNROLL


def _chunk_length(blocks: int, chunk_size: int) -> int:
    """The compiled chunk length: at most ``chunk_size`` blocks, in chunks of equal length, so that
    the last chunk runs at most (number of chunks - 1) blocks that it then discards."""
    n_chunks = -(-blocks // max(1, min(chunk_size, blocks)))
    return -(-blocks // n_chunks)


class NonFiniteStateError(FloatingPointError):
    """A chain produced a non-finite state (the message names chain, iteration and variable).

    Raised when a Gibbs chain, or an EM, VB or VI iteration, produces a non-finite state, objective
    or bound: the fit stops instead of returning NaN. The message says where (for
    a chain: which chain, variable and iteration). Check the data scale (standardise the features)
    and the hyperparameters, or refit with ``precision="float64"`` (the default).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from bayes_maxmargin import LinearBSVM, NonFiniteStateError
    >>> X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    >>> clf = LinearBSVM(num_warmup=50, num_samples=50, num_chains=2, progress_bar=False,
    ...                  random_state=0)
    >>> try:
    ...     _ = clf.fit(X, y)
    ... except NonFiniteStateError as err:
    ...     print(err)  # e.g. chain 1 produced a non-finite value of 'beta' at iteration ...
    >>> clf.predict(X[:3]).shape
    (3,)
    """


def float64_hint(dtype: Any) -> str:
    """``" (or use float64)"`` for a computation in a lower precision; empty for float64, which has
    no higher precision to suggest."""
    return "" if np.dtype(dtype) == np.float64 else " (or use float64)"


class ChainResult(NamedTuple):
    """Output of :func:`run_chains`.

    Attributes
    ----------
    samples : dict of str to ndarray
        The recorded quantities, each laid out (chain, draw, ...).
    final_state : NamedTuple
        The states of all chains after the last iteration (leading chain axis).
    num_iterations : int
        Iterations run per chain, warm-up included.
    info : dict of str to ndarray
        The kernel's Info (the second output of ``kernel``, a NamedTuple of arrays, :func:`info_fields`)
        of the iteration that produced each kept draw, laid out (chain, draw, ...); empty for a kernel
        whose Info is None.
    """

    samples: dict[str, np.ndarray]
    final_state: Any
    num_iterations: int
    info: dict[str, np.ndarray] = {}


def info_fields(info: Any) -> dict[str, Any]:
    """A kernel's Info as {name: array}: the fields of a NamedTuple (those that are not None), a dict as it
    is, nothing for None.

    Examples
    --------
    >>> from bayes_maxmargin.core.slice import SliceInfo
    >>> info_fields(SliceInfo(1, 0)), info_fields(None)
    ({'num_evaluations': 1, 'num_stalled': 0}, {})
    """
    if info is None:
        return {}
    items = info._asdict().items() if hasattr(info, "_asdict") else info.items()
    return {k: v for k, v in items if v is not None}


def _field_finite(field: Any) -> Array | None:
    """Per chain: whether every array of a state field (an array or a tuple of them) is finite; None for
    a field with no array (None, an optional part of the state left out)."""
    leaves = jax.tree_util.tree_leaves(field)
    if not leaves:
        return None
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf), axis=tuple(range(1, leaf.ndim))) for leaf in leaves]), axis=0)


def _first_nonfinite(state: Any) -> tuple[Array, Array]:
    """Per chain: whether every field of the state is finite, and the first field that is not (a field
    that is None counts as finite)."""
    per_field = [_field_finite(field) for field in state]
    shape = next(ok.shape for ok in per_field if ok is not None)
    finite = jnp.stack([jnp.ones(shape, bool) if ok is None else ok for ok in per_field], axis=-1)
    return jnp.all(finite, axis=-1), jnp.argmin(finite, axis=-1)


def _chunk_program(kernel, record, thin, n_blocks, state, chain_keys, start, n_active, bad, data, hyper, unroll=1):
    """``n_blocks`` blocks of ``thin`` iterations, of which the first ``n_active`` (dynamic) count
    and the rest leave the state as it is: one compiled program serves every chunk of a run, the
    shorter last one included. The blocks past ``n_active`` are computed and discarded by a select
    rather than skipped by a branch, which on an accelerator would cost a device-to-host copy per
    block; the loops are unrolled by ``unroll``."""
    step = jax.vmap(kernel, in_axes=(0, 0, None, None))
    # the Info of the latest iteration rides in the carry, so that each block records its own
    info_shape = jax.eval_shape(step, chain_keys, state, data, hyper)[1]
    info = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), info_shape)

    def one_iteration(i, carry):
        state, _, (bad_iter, bad_field) = carry
        tick(i, every=TICK_EVERY)  # the run's progress (traced only while a fit reports it)
        keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(chain_keys, i)
        state, info = step(keys, state, data, hyper)
        ok, field = _first_nonfinite(state)
        new = (bad_iter < 0) & ~ok
        return state, info, (
            jnp.where(new, i, bad_iter).astype(bad_iter.dtype),
            jnp.where(new, field, bad_field).astype(bad_field.dtype),
        )

    def one_block(carry, b):
        first = start + b * thin
        new = jax.lax.fori_loop(0, thin, lambda j, c: one_iteration(first + j, c), carry, unroll=min(unroll, thin))
        carry = jax.tree_util.tree_map(lambda a, old: jnp.where(b < n_active, a, old), new, carry)
        records = jax.vmap(record)(carry[0])
        return carry, {**records, **{INFO_PREFIX + k: v for k, v in info_fields(carry[1]).items()}}

    (state, _, bad), records = jax.lax.scan(
        one_block, (state, info, bad), jnp.arange(n_blocks), unroll=min(unroll, n_blocks)
    )
    return state, bad, records


_CHUNK_STATIC = ("kernel", "record", "thin", "n_blocks", "unroll")
#: The chunk program, compiled with the package's options (:mod:`bayes_maxmargin.core.compilation`) ...
_run_chunk = jit(_chunk_program, static_argnames=_CHUNK_STATIC)
#: ... and with XLA's fusion emitters, for the kernels that compile and run better with them.
_run_chunk_fusion_emitters = jit(_chunk_program, static_argnames=_CHUNK_STATIC, fusion_emitters=True)


def init_chains(init: Callable, in_axes: tuple, *args: Any, **options: Any) -> Any:
    """``jax.vmap(init, in_axes)(*args, **options)``, the initial states of the chains, as one compiled
    program.

    Dispatched operation by operation, an initialisation compiles every operation as a program of
    its own, again for every new data shape (about a second or two per fit of a new shape on two
    cores); compiled together it is one small program.

    Parameters
    ----------
    init : callable
        A module-level function ``init(*args, **options)`` returning one chain's state.
    in_axes : tuple
        ``jax.vmap``'s axes of ``args`` (0 for the per-chain starting points, None for shared data).
    *args : pytrees
        Arrays (traced: new values of the same shapes reuse the program).
    **options
        Python-level settings of ``init`` (static: hashable).

    Returns
    -------
    The states with a leading chain axis.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayes_maxmargin.engine.mcmc import init_chains
    >>> def init(start, shift, double=False):
    ...     return (2.0 if double else 1.0) * start + shift
    >>> init_chains(init, (0, None), jnp.arange(3.0), 1.0, double=True).tolist()
    [1.0, 3.0, 5.0]
    """
    return _init_chains(init, in_axes, tuple(sorted(options.items())), *args)


@partial(jit, static_argnums=(0, 1, 2))
def _init_chains(init: Callable, in_axes: tuple, options: tuple, *args: Any) -> Any:
    return jax.vmap(partial(init, **dict(options)), in_axes=in_axes)(*args)


@partial(jit, static_argnums=1)
def fold_in_chains(rng_key: Array, num_chains: int) -> Array:
    """The keys ``fold_in(rng_key, c)`` of chains c = 0, ..., ``num_chains`` - 1 (one compiled program).

    Examples
    --------
    >>> import jax
    >>> from bayes_maxmargin.engine.mcmc import fold_in_chains
    >>> fold_in_chains(jax.random.PRNGKey(0), 4).shape
    (4, 2)
    """
    return jax.vmap(partial(jax.random.fold_in, rng_key))(jnp.arange(num_chains))


def _key_data(keys: Array) -> np.ndarray:
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        keys = jax.random.key_data(keys)
    return np.asarray(keys)


def _check_finite(bad: tuple[Array, Array], fields: tuple[str, ...], dtype: Any = np.float64) -> None:
    bad_iter, bad_field = (np.asarray(b) for b in bad)
    broken = np.flatnonzero(bad_iter >= 0)
    if broken.size:
        c = broken[np.argmin(bad_iter[broken])]
        raise NonFiniteStateError(
            f"chain {c} produced a non-finite value of '{fields[bad_field[c]]}' at iteration "
            f"{bad_iter[c]}; the run was stopped. Check the data scale and the hyperparameters"
            f"{float64_hint(dtype)}."
        )


def _state_dtype(state: Any) -> np.dtype:
    """The widest floating dtype among the fields of a state (float64 when there is none)."""
    kinds = [np.dtype(leaf.dtype) for leaf in jax.tree_util.tree_leaves(state)
             if jnp.issubdtype(leaf.dtype, jnp.floating)]
    return max(kinds, key=lambda t: t.itemsize) if kinds else np.dtype(np.float64)


def run_chains(
    kernel: Kernel,
    record: Record,
    init_state: Any,
    rng_key: Array,
    data: Any,
    hyper: Any,
    *,
    num_warmup: int,
    num_samples: int,
    thin: int = 1,
    chunk_size: int | None = None,
    progress_bar: bool = True,
    checkpoint: str | os.PathLike | None = None,
    resume: str | os.PathLike | None = None,
    callback: Callable[[int], None] | None = None,
    chain_keys: Array | None = None,
    fusion_emitters: bool = False,
) -> ChainResult:
    """Run ``kernel`` on every chain of ``init_state`` and record ``record(state)`` per kept draw.

    Parameters
    ----------
    kernel : callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)`` for one chain; a module-level or
        cached function, so that repeated runs hit the compilation cache.
    record : callable
        ``record(state) -> dict`` of the arrays to keep per draw (one chain); module level.
    init_state : NamedTuple
        Initial states with a leading chain axis.
    rng_key : Array
        PRNG key; chain ``c`` uses ``fold_in(rng_key, c)``.
    data, hyper : pytrees
        Passed unchanged to the kernel (dynamic: new values do not recompile).
    num_warmup, num_samples, thin : int
        Warm-up iterations (discarded), kept draws, and iterations per kept draw.
    chunk_size : int, optional
        Most kept draws (blocks of ``thin`` iterations) per compiled chunk and between checkpoints;
        default :data:`DEFAULT_CHUNK_SIZE`. The run is cut into chunks of equal length, shortened
        when they take more than a few seconds (:mod:`bayes_maxmargin.engine.chunks`). The draws do
        not depend on it.
    progress_bar : bool
        Show the run's progress (:mod:`bayes_maxmargin.core.progress`: "compiling", then
        iterations) once it has taken more than a second.
    checkpoint : path, optional
        Folder that receives ``checkpoint.npz`` every ``chunk_size`` blocks and when the run stops,
        and ``idata.nc`` (the draws so far) when the run stops, early or not. The run locks it, and
        acts upon Ctrl-C and SIGTERM at the end of a chunk, or within seconds without a long one
        (:mod:`bayes_maxmargin.engine.checkpoint`).
    resume : path, optional
        Folder of a checkpoint of the same run (same kernel settings, seed, data, chains) to
        continue from; it is also the checkpoint folder unless ``checkpoint`` is given. A complete
        run's checkpoint returns its draws without running anything.
    callback : callable, optional
        Called with the number of iterations done every ``chunk_size`` blocks and at the end (after
        the checkpoint).
    chain_keys : Array, optional
        One key per chain, replacing ``fold_in(rng_key, c)`` (then ``rng_key`` is unused): the
        one-vs-rest runs of :mod:`bayes_maxmargin.estimators.multiclass` stack the chains of several
        problems, each with the chain keys of its own binary run.
    fusion_emitters : bool
        Compile the chunk program with XLA:CPU's fusion emitters instead of the package's loop
        emitters (:mod:`bayes_maxmargin.core.compilation`).

    Returns
    -------
    ChainResult

    Raises
    ------
    CheckpointError
        ``resume`` holds no readable checkpoint, or one of a different run; another run is using
        the checkpoint folder.
    KeyboardInterrupt, Terminated
        A checkpointed run received SIGINT or SIGTERM (after writing its checkpoint and draws).
    """
    num_chains = jax.tree_util.tree_leaves(init_state)[0].shape[0]
    if chain_keys is None:
        chain_keys = fold_in_chains(rng_key, num_chains)
    elif chain_keys.shape[0] != num_chains:
        raise ValueError(f"chain_keys holds {chain_keys.shape[0]} keys for {num_chains} chains")
    folder = checkpoint_folder(checkpoint, resume)
    with checkpoint_session(folder) as stop:
        return _run(kernel, record, init_state, chain_keys, data, hyper, num_warmup, num_samples, thin, chunk_size,
                    progress_bar, folder, resume, callback, fusion_emitters, stop)


def _run(kernel, record, init_state, chain_keys, data, hyper, num_warmup, num_samples, thin, chunk_size, progress_bar,
         folder, resume, callback, fusion_emitters, stop) -> ChainResult:
    """The loop of :func:`run_chains` over chunks, inside its checkpoint session."""
    num_chains = chain_keys.shape[0]
    warm_blocks = -(-num_warmup // thin)
    total_blocks = warm_blocks + num_samples
    bad = (jnp.full((num_chains,), -1, jnp.int32), jnp.zeros((num_chains,), jnp.int32))
    state, kept, done = init_state, [], 0
    settings = None
    if folder is not None:
        import arviz  # noqa: F401  (idata.nc is written when the run stops: its import not after a signal)

        settings = {"num_warmup": num_warmup, "num_samples": num_samples, "thin": thin, "num_chains": num_chains,
                    "chain_keys": _key_data(chain_keys).tolist(), "fingerprint": fingerprint(data, hyper)}
    if resume is not None:
        # a checkpoint is written only after a chunk passed the non-finite check: ``bad`` starts afresh
        ckpt, state = resume_run(resume, settings, init_state)
        done, kept = ckpt.done, [ckpt.kept] if ckpt.kept else []
        stop.resume_at = done * thin
    period = _chunk_length(max(total_blocks - done, 1), chunk_size or DEFAULT_CHUNK_SIZE)
    unroll = _unroll()
    run_chunk = _run_chunk_fusion_emitters if fusion_emitters else _run_chunk
    written = done

    def draws_so_far() -> dict[str, np.ndarray]:
        # a checkpoint written before kernels reported their Info has none: keep what every chunk has
        names = set.intersection(*(set(c) for c in kept)) if kept else set()
        return {k: np.concatenate([c[k] for c in kept], axis=0) for k in kept[0] if k in names} if kept else {}

    def advance(chunk: Chunk) -> bool:
        nonlocal state, bad
        new_state, new_bad, records = stop.call(
            run_chunk, kernel, record, thin, chunk.length, state, chain_keys, chunk.start * thin, chunk.size, bad,
            data, hyper, unroll)
        _check_finite(new_bad, new_state._fields, _state_dtype(new_state))
        lo = max(warm_blocks - chunk.start, 0)
        if lo < chunk.size:
            kept.append(jax.tree_util.tree_map(lambda r, lo=lo, hi=chunk.size: np.asarray(r)[lo:hi], records))
        state, bad = new_state, new_bad
        return False

    def at_period(at: int) -> None:
        nonlocal written
        if folder is not None:
            write_progress(folder, settings, at, state, draws_so_far())
            written = at
        if callback is not None:
            callback(at * thin)

    def at_exit(at: int) -> None:
        if folder is not None:
            if written < at:
                write_progress(folder, settings, at, state, draws_so_far())
            write_draws(folder, draws_so_far(), at * thin, complete=at >= total_blocks)

    with fit_progress(progress_bar, "sampling", total_blocks * thin) as bar:
        drive(advance, stop, total=total_blocks, done=done, period=period, unit=thin, bar=bar, at_period=at_period,
              at_exit=at_exit)
    samples = {k: np.swapaxes(v, 0, 1) for k, v in draws_so_far().items()}
    info = {k[len(INFO_PREFIX):]: samples.pop(k) for k in [k for k in samples if k.startswith(INFO_PREFIX)]}
    return ChainResult(samples, state, total_blocks * thin, info)
