"""The one run driver: ``lax.scan`` under ``jit``, chains by ``vmap``, in chunks.

Every Markov kernel of the library has the signature ``kernel(rng_key, state, data, hyper) ->
(state, info)`` with ``state`` a NamedTuple of arrays. :func:`run_chains` runs it for warm-up plus
``num_samples * thin`` iterations on several chains at once:

* the key of iteration ``i`` of a chain is ``fold_in(chain_key, i)``, so the draws do not depend on
  how the run is cut into chunks (a run resumed from a chunk boundary is the same run);
* a chunk is at most ``chunk_size`` blocks of ``thin`` iterations, all chunks of a run of one
  length, compiled once per (kernel, shapes): kernels come from cached builders, so a second fit of
  the same shapes does not recompile;
* after every chunk the host reports progress and checks that no state became non-finite; a
  chain that did stops the run with :class:`NonFiniteStateError` naming the chain, iteration and
  variable, never a NaN result.

Warm-up is rounded up to a whole number of thinning blocks.

With ``checkpoint=folder`` the states, keys and draws are written after every chunk
(:mod:`bayes_maxmargin.engine.checkpoint`); Ctrl-C, SIGTERM or an exception then leave that
checkpoint and the draws so far (``idata.nc``), and ``resume=folder`` continues the same chains.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.engine.checkpoint import (
    INFO_PREFIX,
    checkpoint_folder,
    fingerprint,
    resume_run,
    sigterm_as_interrupt,
    write_draws,
    write_progress,
)

__all__ = ["ChainResult", "NonFiniteStateError", "float64_hint", "run_chains"]

Kernel = Callable[[Array, Any, Any, Any], tuple[Any, Any]]
Record = Callable[[Any], dict[str, Array]]

#: Kept draws per compiled chunk (and per checkpoint) unless a run asks otherwise.
DEFAULT_CHUNK_SIZE = 250

#: Runs predicted to take longer than this many seconds show a progress bar.
PROGRESS_THRESHOLD_S = 3.0

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
    """A chain produced a non-finite state (the message names chain, iteration and variable)."""


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
        The kernel's Info (the second output of ``kernel``, a dict of arrays) of the iteration that
        produced each kept draw, laid out (chain, draw, ...); empty for a kernel whose Info is None.
    """

    samples: dict[str, np.ndarray]
    final_state: Any
    num_iterations: int
    info: dict[str, np.ndarray] = {}


def _first_nonfinite(state: Any) -> tuple[Array, Array]:
    """Per chain: whether every field of the state is finite, and the first field that is not."""
    finite = jnp.stack(
        [jnp.all(jnp.isfinite(leaf), axis=tuple(range(1, leaf.ndim))) for leaf in state], axis=-1
    )
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
        return carry, {**records, **{INFO_PREFIX + k: v for k, v in (carry[1] or {}).items()}}

    (state, _, bad), records = jax.lax.scan(
        one_block, (state, info, bad), jnp.arange(n_blocks), unroll=min(unroll, n_blocks)
    )
    return state, bad, records


_CHUNK_STATIC = ("kernel", "record", "thin", "n_blocks", "unroll")
#: The chunk program, compiled with the package's options (:mod:`bayes_maxmargin.core.compilation`) ...
_run_chunk = jit(_chunk_program, static_argnames=_CHUNK_STATIC)
#: ... and with XLA's fusion emitters, for the kernels that compile and run better with them.
_run_chunk_fusion_emitters = jit(_chunk_program, static_argnames=_CHUNK_STATIC, fusion_emitters=True)


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
        Most kept draws (blocks of ``thin`` iterations) per compiled chunk; default
        :data:`DEFAULT_CHUNK_SIZE`. The run is cut into chunks of equal length. The draws do not
        depend on it.
    progress_bar : bool
        Show a progress bar when the run is predicted to take more than a few seconds.
    checkpoint : path, optional
        Folder that receives ``checkpoint.npz`` after every chunk, and ``idata.nc`` (the draws so
        far) when the run stops, early or not.
    resume : path, optional
        Folder of a checkpoint of the same run (same kernel settings, seed, data, chains) to
        continue from; it is also the checkpoint folder unless ``checkpoint`` is given. A complete
        run's checkpoint returns its draws without running anything.
    callback : callable, optional
        Called with the number of iterations done after every chunk (and its checkpoint).
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
        ``resume`` holds no readable checkpoint, or one of a different run.
    """
    num_chains = jax.tree_util.tree_leaves(init_state)[0].shape[0]
    if chain_keys is None:
        chain_keys = jax.vmap(partial(jax.random.fold_in, rng_key))(jnp.arange(num_chains))
    elif chain_keys.shape[0] != num_chains:
        raise ValueError(f"chain_keys holds {chain_keys.shape[0]} keys for {num_chains} chains")
    warm_blocks = -(-num_warmup // thin)
    total_blocks = warm_blocks + num_samples
    bad = (jnp.full((num_chains,), -1, jnp.int32), jnp.zeros((num_chains,), jnp.int32))
    state, kept, done, bar = init_state, [], 0, None
    folder = checkpoint_folder(checkpoint, resume)
    settings = None
    if folder is not None:
        settings = {"num_warmup": num_warmup, "num_samples": num_samples, "thin": thin, "num_chains": num_chains,
                    "chain_keys": _key_data(chain_keys).tolist(), "fingerprint": fingerprint(data, hyper)}
    if resume is not None:
        # a checkpoint is written only after a chunk passed the non-finite check: ``bad`` starts afresh
        ckpt, state = resume_run(resume, settings, init_state)
        done, kept = ckpt.done, [ckpt.kept] if ckpt.kept else []
    length = _chunk_length(max(total_blocks - done, 1), chunk_size or DEFAULT_CHUNK_SIZE)
    unroll = _unroll()
    run_chunk = _run_chunk_fusion_emitters if fusion_emitters else _run_chunk

    def draws_so_far() -> dict[str, np.ndarray]:
        # a checkpoint written before kernels reported their Info has none: keep what every chunk has
        names = set.intersection(*(set(c) for c in kept)) if kept else set()
        return {k: np.concatenate([c[k] for c in kept], axis=0) for k in kept[0] if k in names} if kept else {}

    with sigterm_as_interrupt():
        try:
            while done < total_blocks:
                n_blocks = min(length, total_blocks - done)
                t0 = time.perf_counter()
                new_state, new_bad, records = run_chunk(
                    kernel, record, thin, length, state, chain_keys, done * thin, n_blocks, bad, data, hyper, unroll
                )
                _check_finite(new_bad, new_state._fields, _state_dtype(new_state))
                lo = max(warm_blocks - done, 0)
                if lo < n_blocks:
                    records = jax.tree_util.tree_map(lambda r, lo=lo, hi=n_blocks: np.asarray(r[lo:hi]), records)
                    kept.append(records)
                state, bad, done = new_state, new_bad, done + n_blocks
                if folder is not None:
                    write_progress(folder, settings, done, state, draws_so_far())
                if callback is not None:
                    callback(done * thin)
                if bar is not None:
                    bar.update(n_blocks * thin)
                elif progress_bar and done < total_blocks:
                    # predict the rest from the latest chunk; the first one includes compilation, so
                    # it decides alone only when it was long in itself
                    elapsed = time.perf_counter() - t0
                    remaining = elapsed / n_blocks * (total_blocks - done)
                    if remaining > PROGRESS_THRESHOLD_S and (done > n_blocks or elapsed > 10 * PROGRESS_THRESHOLD_S):
                        from tqdm.auto import tqdm

                        bar = tqdm(total=total_blocks * thin, initial=done * thin, unit="it", leave=False)
        finally:
            if bar is not None:
                bar.close()
            if folder is not None:
                write_draws(folder, draws_so_far(), done * thin, complete=done >= total_blocks)
    samples = {k: np.swapaxes(v, 0, 1) for k, v in draws_so_far().items()}
    info = {k[len(INFO_PREFIX):]: samples.pop(k) for k in [k for k in samples if k.startswith(INFO_PREFIX)]}
    return ChainResult(samples, state, total_blocks * thin, info)
