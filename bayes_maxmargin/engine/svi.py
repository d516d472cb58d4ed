"""Variational inference for the Bayesian SVM at scale (Wenzel, Galy-Fajou, Deutsch & Kloft 2017).

* B-BSVM (Sec. 4.1): coordinate ascent on q(f) prod_i q(lambda_i) for the full GP prior,
  :func:`~bayes_maxmargin.models.gp.vi.batch_vi`;
* S-BSVM (Sec. 4.2, Alg. 1): stochastic natural-gradient ascent on q(u) = N(mu, zeta) for m
  inducing variables, minibatch targets eq. (9)-(10) scaled by N / ``|S|``, :func:`run_svi`;
* ML-II (Sec. 4.3, eq. 12): a gradient step on the kernel parameters (and, optionally, the
  inducing-point locations) after every ``hyper_every`` variational steps, on the ELBO with q(u)
  held fixed (:func:`~bayes_maxmargin.engine.natural_gradient.mlii_objective`; the Cholesky of K_mm is
  the only factorisation it differentiates through);
* the linear model (Sec. 4.5, eq. 14): the same natural-gradient step with the inputs as features
  and the Gaussian prior of beta (:func:`~bayes_maxmargin.models.linear.svi.linear_features`).

The natural-gradient algebra (the global Gaussian, the targets of eq. 9-10, the ELBO of eq. 8) is
:mod:`bayes_maxmargin.engine.natural_gradient`; this module is the host loop around it.

Data are streamed from host memory: the host draws the minibatch indices (epochs of random
permutations), gathers a chunk of ``rounds x hyper_every`` minibatches from a NumPy array or a
memory map, and one compiled ``lax.scan`` runs the chunk. Only one chunk is on the device at a time.
With a :class:`jax.sharding.Mesh` the batch axis of every chunk is split across its devices;
the per-device sufficient statistics are summed by the compiler (data parallel SVI). Labels with a
leading class axis, shape (K, N), run K binary problems on the same inputs (one-vs-rest) through
the same loop, the compiled chunk ``jax.vmap``-ed over the classes, each with its own minibatch
stream.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array, lax

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.linalg import limit_blas_threads
from bayes_maxmargin.core.progress import active as active_progress
from bayes_maxmargin.engine.checkpoint import (
    checkpoint_folder,
    checkpoint_session,
    fingerprint,
    resume_run,
    write_progress,
)
from bayes_maxmargin.engine.driver import Chunk, drive
from bayes_maxmargin.engine.natural_gradient import (
    NatParams,
    adaptive_rate,
    check_schedule,
    fixed_q,
    gradient_and_hinge,
    hinge_terms,
    kl_to_prior,
    latent_moments,
    mlii_objective,
    natural_gradient_ascent,
    remap,
    robbins_monro,
)

__all__ = ["Problem", "SVIDivergenceWarning", "SVIResult", "SVIState", "data_mesh", "full_elbo", "init_state",
           "latent_parts", "predict_moments", "run_svi", "step_transform"]


# ============================================================================ S-BSVM driver
class SVIState(NamedTuple):
    """State of the stochastic run.

    Attributes
    ----------
    nat : NatParams
        q(v) (whitened q(u) for the GP, q(beta) for the linear model).
    hyper : dict
        Unconstrained kernel parameters and ``"inducing"`` locations (GP); empty (linear).
    whiten : Array
        L^-1 for the Cholesky factor L of K_mm + jitter I at ``hyper`` (GP); unused (linear).
    nat_opt, hyper_opt : optax states
    step : Array
        Variational steps taken.
    """

    nat: NatParams
    hyper: dict
    whiten: Array
    nat_opt: Any
    hyper_opt: Any
    step: Array


class SVIResult(NamedTuple):
    """Output of :func:`run_svi`.

    Attributes
    ----------
    state : SVIState
        The last finite state.
    elbo : numpy.ndarray
        Minibatch estimate of eq. (8) (scaled by N / ``|S|``) after every round of ``hyper_every`` steps,
        on that round's minibatches.
    steps : numpy.ndarray
        Variational steps taken at each entry of ``elbo``.
    times : numpy.ndarray
        Seconds since the start at each entry of ``elbo`` (chunk resolution).
    diverged : bool
        Whether a non-finite state or ELBO stopped the run (the state is the last finite one).
    """

    state: SVIState
    elbo: np.ndarray
    steps: np.ndarray
    times: np.ndarray
    diverged: bool


class SVIDivergenceWarning(RuntimeWarning):
    """A stochastic run produced a non-finite ELBO or state and stopped at its last finite state."""


def init_state(
    nat: NatParams,
    hyper: dict[str, Array],
    whiten: Array,
    nat_tx: optax.GradientTransformation,
    hyper_tx: optax.GradientTransformation,
) -> SVIState:
    return SVIState(nat, hyper, whiten, nat_tx.init(nat), hyper_tx.init(hyper), jnp.zeros((), jnp.int32))


class Problem(NamedTuple):
    """What the shared round needs beyond the data: the features of a batch, the prior precision of
    v, whether and how hyperparameters move."""

    features: Callable  # (hyper, whiten, X) -> Features
    factors_of: Callable | None  # hyper -> (L, L^-1) of K_mm, p(v) = N(0, I) (None: hyperparameters fixed)
    prior_prec: Array


def _round(problem: Problem, nat_tx, hyper_tx, learn: bool, full_batch: bool, consts, carry, batch):
    """``hyper_every`` natural-gradient steps (Alg. 1, lines 6-14), an ELBO estimate, then
    (``learn``) one ML-II step (eq. 12); non-finite output keeps the state.

    The estimate is N/``|S|`` times the hinge terms of eq. (8) averaged over the round's steps (each on
    its minibatch, before its update: free, from the moments the step needs) minus the KL at the
    end of the round; with ``learn`` it is the ML-II objective, all the round's minibatches at the
    round's final q(u). With ``full_batch`` (``|S|`` = N) every minibatch holds all N rows and the sums
    do not depend on their order, so the round computes the features once (the hyperparameters move
    only between rounds) and the ML-II objective on one minibatch: the same values, in less work.
    ``consts`` = (prior precision, N / ``|S|``, gamma) are traced, so one compiled program serves
    every data set of the same shapes."""
    prior_prec, scale, gamma = consts
    state, diverged = carry
    Xr, yr, active = batch  # (k, B, d), (k, B), ()

    once = (problem.features(state.hyper, state.whiten, Xr[-1]), yr[-1]) if full_batch else None

    def vstep(s, xy):
        feats, y = (problem.features(s.hyper, s.whiten, xy[0]), xy[1]) if once is None else once
        g, hinge = gradient_and_hinge(s.nat, feats, y, scale, gamma, prior_prec)
        upd, opt = nat_tx.update(g, s.nat_opt, s.nat)
        return s._replace(nat=optax.apply_updates(s.nat, upd), nat_opt=opt, step=s.step + 1), hinge

    new, hinges = lax.scan(vstep, state, (Xr, yr))
    if full_batch:
        Xall, yall, scale_all = Xr[-1], yr[-1], scale
    else:
        Xall, yall, scale_all = Xr.reshape(-1, Xr.shape[-1]), yr.reshape(-1), scale / Xr.shape[0]

    if learn:
        objective = partial(mlii_objective, q=fixed_q(new.nat, new.whiten), problem=problem, X=Xall, y=yall,
                            scale=scale_all, gamma=gamma)
        value, grad = jax.value_and_grad(objective)(new.hyper)
        neg = jax.tree.map(jnp.negative, grad)  # Optax minimises
        upd, hopt = hyper_tx.update(neg, new.hyper_opt, new.hyper)
        hyper = optax.apply_updates(new.hyper, upd)
        chol, whiten = problem.factors_of(hyper)
        new = new._replace(nat=remap(new.nat, new.whiten, chol), hyper=hyper, whiten=whiten, hyper_opt=hopt)
    else:
        value = scale * jnp.mean(hinges) - kl_to_prior(new.nat, prior_prec)
    finite = jnp.isfinite(value) & jnp.all(jnp.array([jnp.all(jnp.isfinite(a)) for a in jax.tree.leaves(new)]))
    keep = active & finite & ~diverged
    state = jax.tree.map(lambda a, b: jnp.where(keep, a, b), new, state)
    return (state, diverged | (active & ~finite)), jnp.where(keep, value, jnp.nan)


#: Compiled chunk programs of :func:`run_svi` by ``cache_key`` (a few configurations per session).
_PROGRAMS: dict[Any, Callable] = {}


def _compiled(
    cache_key: Any, problem: Problem, nat_tx, hyper_tx, learn: bool, full_batch: bool, classes: bool
) -> Callable:
    """The jitted scan over rounds, on a carry and a chunk with a leading class axis (``jax.vmap``
    over it for ``classes``; for one problem the axis of length one is dropped inside the program).
    Reused for an equal ``cache_key`` (which must determine the problem's functions and the two
    transformations), compiled afresh without one."""
    key = None if cache_key is None else (cache_key, full_batch, classes)
    if key is not None and key in _PROGRAMS:
        return _PROGRAMS[key]

    def scan(carry, batch, consts):
        return lax.scan(partial(_round, problem, nat_tx, hyper_tx, learn, full_batch, consts), carry, batch)

    if classes:
        fn = jax.vmap(scan, in_axes=(0, (0, 0, None), None))
    else:
        def fn(carry, batch, consts):
            Xc, yc, active = batch
            out = scan(_class(carry, 0), (Xc[0], yc[0], active), consts)
            return jax.tree.map(lambda a: a[None], out)
    fn = jit(fn)
    if key is not None:
        if len(_PROGRAMS) >= 32:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        _PROGRAMS[key] = fn
    return fn


def _class(tree: Any, c: int) -> Any:
    """Class ``c`` of a pytree with a leading class axis."""
    return jax.tree.map(lambda a: a[c], tree)


def _stack(trees: list[Any]) -> Any:
    """Pytrees stacked along a new leading class axis, on the host."""
    return jax.tree.map(lambda *a: np.stack(a), *trees)


def _stream_arrays(streams: list, kept: dict, classes: bool) -> tuple[dict, dict]:
    """A checkpoint's arrays and JSON values with the minibatch streams (per class the generator's state,
    the epoch's permutation and position): for one binary problem ``rng``, ``pool`` and ``pool_pos``,
    for a class axis the lists ``rng`` and ``pool_pos`` and the arrays ``pool_<class>``."""
    kept = dict(kept)
    for c, (_, pool) in enumerate(streams):
        if pool is not None:
            kept[f"pool_{c}" if classes else "pool"] = pool[0]
    rng = [r for r, _ in streams]
    pos = [pool[1] if pool is not None else 0 for _, pool in streams]
    return kept, {"rng": rng if classes else rng[0], "pool_pos": pos if classes else pos[0]}


def _streams_of(ckpt: Any, K: int, classes: bool) -> list[tuple[dict, list]]:
    """Per class, the generator's state and the epoch pool (:func:`_batch_indices`) that a checkpoint
    holds (:func:`_stream_arrays`)."""
    rng = ckpt.extra["rng"] if classes else [ckpt.extra["rng"]]
    pos = ckpt.extra["pool_pos"] if classes else [ckpt.extra["pool_pos"]]
    names = [f"pool_{c}" if classes else "pool" for c in range(K)]
    return [(rng[c], [[ckpt.kept[names[c]], int(pos[c])]] if names[c] in ckpt.kept else []) for c in range(K)]


def _batch_indices(n: int, count: int, rng: np.random.Generator, pool: list) -> np.ndarray:
    """The next ``count`` indices of a stream of random permutations of range(n) (epochs)."""
    out, need = [], count
    while need:
        if not pool or pool[0][1] == n:
            pool[:] = [[rng.permutation(n), 0]]
        perm, pos = pool[0]
        take = min(need, n - pos)
        out.append(perm[pos : pos + take])
        pool[0][1] = pos + take
        need -= take
    return np.concatenate(out)


def run_svi(
    state: SVIState,
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    *,
    nat_tx: optax.GradientTransformation,
    hyper_tx: optax.GradientTransformation,
    batch_size: int,
    num_steps: int,
    hyper_every: int = 10,
    learn_hyper: bool = False,
    gamma: float = 1.0,
    rounds_per_chunk: int | None = None,
    seed: int | Sequence[int] = 0,
    mesh: jax.sharding.Mesh | None = None,
    dtype: Any = None,
    progress: bool = False,
    callback: Callable[[SVIState, int, float], None] | None = None,
    cache_key: Any = None,
    checkpoint: str | os.PathLike | None = None,
    resume: str | os.PathLike | None = None,
) -> SVIResult | list[SVIResult]:
    """Run S-BSVM (Alg. 1) for ``num_steps`` natural-gradient steps on minibatches streamed from
    host memory.

    Parameters
    ----------
    state : SVIState
        Initial state (:func:`init_state`); with a class axis on ``y``, the K initial states
        stacked along a leading axis.
    problem : Problem
        Features, prior precision and (with ``learn_hyper``) the Cholesky of K_mm as a function of
        the hyperparameters.
    X : numpy.ndarray (or memory map), shape (N, d)
        Training inputs; stay on the host.
    y : numpy.ndarray (or memory map), shape (N,) or (K, N)
        Labels in {-1, +1}; stay on the host. With a leading class axis, K binary problems on the
        same inputs (one-vs-rest) run in one compiled program, ``jax.vmap`` over the classes: class
        k is exactly the binary run with ``state[k]``, ``y[k]`` and ``seed[k]``.
    nat_tx, hyper_tx : optax.GradientTransformation
        Step on the natural parameters (:func:`natural_gradient_ascent`, :func:`adaptive_rate`)
        and the ML-II optimiser (e.g. ``optax.adam``).
    batch_size : int
        ``|S|``, drawn without replacement within an epoch.
    num_steps : int
        Variational steps in all (rounded up to whole rounds of ``hyper_every``).
    hyper_every : int
        Variational steps per round: one ELBO estimate and (``learn_hyper``) one ML-II step each.
    rounds_per_chunk : int, optional
        Most rounds per compiled chunk (host -> device transfer), and rounds between checkpoints,
        progress lines and calls of ``callback``; default: about 2^18 rows per chunk (over all
        classes). Chunks that take more than a few seconds are shortened
        (:mod:`bayes_maxmargin.engine.chunks`); the result does not depend on it.
    seed : int or sequence of K ints
        Seed of the minibatch stream (of each class).
    mesh : jax.sharding.Mesh, optional
        One-axis mesh ("batch"); the batch axis of every chunk is split across its devices.
        ``batch_size`` must be a multiple of the number of devices.
    progress : bool
        Print the steps, the ELBO estimate and points per second every ``rounds_per_chunk`` rounds
        to stderr.
    callback : callable, optional
        Called as ``callback(state, steps, seconds)`` every ``rounds_per_chunk`` rounds and at the
        end (e.g. to record held-out error against time); ``state`` has the class axis of ``y``.
    cache_key : hashable, optional
        Identifies ``problem``'s functions and the transformations: runs with an equal key reuse
        one compiled program (the entry points :func:`svi_gp` and :func:`svi_linear` set it).
    checkpoint : path, optional
        Folder that receives ``checkpoint.npz`` (state, optimiser states, minibatch stream, ELBO
        trace) every ``rounds_per_chunk`` rounds and when the run stops, atomically; Ctrl-C, SIGTERM
        or an error leave the checkpoint of the last chunk. The run locks the folder and acts upon
        Ctrl-C and SIGTERM at the end of a chunk, or within seconds without a long one
        (``KeyboardInterrupt``, :class:`~bayes_maxmargin.engine.checkpoint.Terminated`). With a class
        axis on ``y``, one checkpoint holds every class's state and minibatch stream.
    resume : path, optional
        Checkpoint folder of the same run to continue from (also the checkpoint folder unless
        ``checkpoint`` is given); on the CPU the result equals an uninterrupted run.

    Returns
    -------
    SVIResult, or a list of K SVIResult with a class axis on ``y``
    """
    n, d = X.shape
    classes = y.ndim == 2
    Y = y if classes else y[None]
    K = Y.shape[0]
    states = state if classes else _stack([state])
    seeds = [int(s) for s in np.broadcast_to(np.asarray(seed), (K,))]
    k = int(hyper_every)
    n_rounds = max(1, math.ceil(num_steps / k))
    if rounds_per_chunk is None:
        rounds_per_chunk = max(1, min(n_rounds, (1 << 18) // (k * batch_size * K)))
    R = int(rounds_per_chunk)
    dtype = dtype or states.nat.eta1.dtype
    scale = jnp.asarray(n / batch_size, dtype)
    gamma = jnp.asarray(gamma, dtype)
    consts = (problem.prior_prec, scale, gamma)
    full_batch = batch_size == n  # every minibatch holds all N rows, in their order (the sums ignore it)
    run = _compiled(cache_key, problem, nat_tx, hyper_tx, learn_hyper, full_batch, classes)
    shard = None
    if mesh is not None:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        n_dev = mesh.devices.size
        if batch_size % n_dev:
            raise ValueError(f"batch_size={batch_size} must be a multiple of the {n_dev} devices of the mesh")
        shard = (NamedSharding(mesh, P(None, None, None, "batch", None)),
                 NamedSharding(mesh, P(None, None, None, "batch")), NamedSharding(mesh, P()))
    rngs, pools = [np.random.default_rng(s) for s in seeds], [[] for _ in seeds]
    carry = (states, np.zeros(K, bool))
    elbos, steps, times = [[] for _ in range(K)], [], []
    t0 = time.perf_counter()
    done = 0
    folder = checkpoint_folder(checkpoint, resume)
    if folder is not None:
        sample = slice(None, None, max(1, n // 1000))  # the data by a strided sample of rows
        settings = {"n": n, "d": d, "batch_size": int(batch_size), "num_steps": int(num_steps), "hyper_every": k,
                    "rounds_per_chunk": R, "seed": seeds if classes else seeds[0], "learn_hyper": bool(learn_hyper),
                    "fingerprint": fingerprint(np.asarray(X[sample]), (np.asarray(y[..., sample]), consts))}
    # the per-step factorisations are m x m: more BLAS threads only contend with XLA's own
    with limit_blas_threads(1), checkpoint_session(folder, unit="step") as stop:
        if resume is not None:
            ckpt, restored = resume_run(resume, settings, state)
            carry, done = (restored if classes else _stack([restored]), np.zeros(K, bool)), ckpt.done
            for c, (rng_state, pool) in enumerate(_streams_of(ckpt, K, classes)):
                rngs[c].bit_generator.state = rng_state
                pools[c] = pool
            elbo = ckpt.kept["elbo"] if classes else ckpt.kept["elbo"][None]
            elbos, steps, times = [[e] for e in elbo], [ckpt.kept["steps"]], [ckpt.kept["times"]]
            stop.resume_at = done * k

        def checkpoint_of(at: tuple) -> tuple:
            """The last arguments of write_progress for a point of the run after a chunk: rounds
            done, state, chunks of the traces, per class the stream (the generator's state, the epoch's
            permutation and position)."""
            at_done, at_state, chunks, streams = at
            elbo = np.stack([np.concatenate(e[:chunks]) for e in elbos])
            kept = {"elbo": elbo if classes else elbo[0], "steps": np.concatenate(steps[:chunks]),
                    "times": np.concatenate(times[:chunks])}
            at_state = jax.device_get(at_state)
            return at_done, at_state if classes else _class(at_state, 0), *_stream_arrays(streams, kept, classes)

        progress_at = None  # the point after the last chunk, for a checkpoint now or when the run stops

        def advance(chunk: Chunk) -> bool:
            nonlocal carry, progress_at
            active = np.arange(chunk.length) < chunk.size
            # the minibatches of the active rounds; the others are computed and discarded
            used, size = chunk.size * k * batch_size, chunk.length * k * batch_size
            Xc, yc = np.zeros((K, size, d), dtype), np.zeros((K, size), dtype)
            for c in range(K):
                idx = np.tile(np.arange(n), used // n) if full_batch else _batch_indices(n, used, rngs[c], pools[c])
                Xc[c, :used], yc[c, :used] = X[idx], Y[c][idx]
            batch = (Xc.reshape(K, chunk.length, k, batch_size, d), yc.reshape(K, chunk.length, k, batch_size), active)
            if shard is not None:
                batch = tuple(jax.device_put(a, s) for a, s in zip(batch, shard))
            carry, values = stop.call(run, carry, batch, consts)
            values = np.asarray(values)[:, active]
            at = chunk.start + chunk.size
            for trace, v in zip(elbos, values):
                trace.append(v)
            steps.append(np.arange(chunk.start + 1, at + 1) * k)
            times.append(np.full(values.shape[1], time.perf_counter() - t0))
            if folder is not None:
                progress_at = (at, carry[0], len(steps),
                               [(r.bit_generator.state, (p[0][0], int(p[0][1])) if p else None)
                                for r, p in zip(rngs, pools)])
            return bool(np.all(carry[1]))

        def at_period(at: int) -> None:
            nonlocal progress_at
            if progress:
                now = times[-1][-1]
                last = ", ".join(f"{e[-1][np.isfinite(e[-1])][-1:].sum():.6g}" for e in elbos)
                print(f"[svi] step {at * k:>10d}  elbo ~ {last}  "
                      f"{at * k * batch_size * K / max(now, 1e-9):.3g} points/s", file=sys.stderr, flush=True)
            if folder is not None:
                write_progress(folder, settings, *checkpoint_of(progress_at))
                progress_at = None
            if callback is not None:
                callback(carry[0] if classes else _class(jax.device_get(carry[0]), 0), at * k, times[-1][-1])

        def at_exit(at: int) -> None:
            if progress_at is not None:  # stopped between checkpoints
                write_progress(folder, settings, *checkpoint_of(progress_at))

        drive(advance, stop, total=n_rounds, done=done, period=R, unit=k, bar=active_progress(), at_period=at_period,
              at_exit=at_exit)
    final, diverged = jax.device_get(carry)
    steps, times = np.concatenate(steps), np.concatenate(times)
    results = []
    for c in range(K):
        trace = np.concatenate(elbos[c])
        if diverged[c]:
            finite = np.flatnonzero(np.isfinite(trace))
            last = int(steps[finite[-1]]) if finite.size else 0
            which = f" (class {c})" if classes else ""
            warnings.warn(
                f"SVI diverged{which}: a non-finite ELBO or variational state after step {last + k}; the run "
                f"stopped and keeps its last finite state (step {last}). Lower the learning rate or the "
                f"hyperparameter step size.", SVIDivergenceWarning, stacklevel=2)
        keep = np.isfinite(trace)
        results.append(SVIResult(_class(final, c), trace[keep], steps[keep], times[keep], bool(diverged[c])))
    return results if classes else results[0]


# ============================================================================ full-data passes
# the state is an argument, not a constant: one compilation per features function and chunk shape
@partial(jit, static_argnums=0)
def _hinge_chunk(features, state: SVIState, X: Array, y: Array, gamma: Array) -> Array:
    return hinge_terms(state.nat, features(state.hyper, state.whiten, X), y, gamma)


def _chunked(fn, X: np.ndarray, chunk: int, dtype, *args) -> list:
    return [fn(jnp.asarray(X[lo : lo + chunk], dtype), *(a[lo : lo + chunk] for a in args))
            for lo in range(0, X.shape[0], chunk)]


def full_elbo(
    state: SVIState, problem: Problem, X: np.ndarray, y: np.ndarray, gamma: float = 1.0, chunk: int = 65536
) -> float:
    """The ELBO of eq. (8) on the whole data set, its sum computed chunk by chunk on the device."""
    dtype = state.nat.eta1.dtype
    g = jnp.asarray(gamma, dtype)
    parts = _chunked(lambda Xc, yc: _hinge_chunk(problem.features, state, Xc, jnp.asarray(yc, dtype), g),
                     X, chunk, dtype, np.asarray(y))
    return sum(float(v) for v in parts) - float(kl_to_prior(state.nat, problem.prior_prec))


@partial(jit, static_argnums=0)
def _moments_chunk(features, state: SVIState, X: Array) -> tuple[Array, Array, Array]:
    feats = features(state.hyper, state.whiten, X)
    return (*latent_moments(state.nat, feats), feats.ktilde)


def latent_parts(
    state: SVIState, problem: Problem, X: np.ndarray, chunk: int = 65536
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`predict_moments` and, apart, Ktilde_ii (the variance of f_i that q(v) does not see)."""
    dtype = state.nat.eta1.dtype
    out = _chunked(lambda Xc: _moments_chunk(problem.features, state, Xc), X, chunk, dtype)
    return tuple(np.concatenate([np.asarray(part[k]) for part in out]) for k in range(3))


def predict_moments(state: SVIState, problem: Problem, X: np.ndarray, chunk: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and variance of f_* (Sec. 4.4): K_*m K_mm^-1 mu and
    K_** - K_*m K_mm^-1 K_m* + K_*m K_mm^-1 zeta K_mm^-1 K_m*, chunk by chunk (:func:`latent_parts`)."""
    return latent_parts(state, problem, X, chunk)[:2]


# ============================================================================ entry points
#: Named natural-gradient step sizes: Robbins-Monro (t + 10)^-0.55 and Ranganath et al.'s adaptive rate.
STEP_SIZES = ("robbins_monro", "adaptive")


def step_transform(step_size: Any, num_steps: int) -> optax.GradientTransformation:
    """The natural-gradient step rho_t of Alg. 1 from ``step_size``: a number or an Optax schedule
    with values in (0, 1], ``"robbins_monro"`` ((t + 10)^-0.55) or ``"adaptive"`` (:func:`adaptive_rate`)."""
    bad = (f"Invalid value for step_size: {step_size!r} (must be a number in (0, 1], an Optax schedule, or one "
           f"of {', '.join(map(repr, STEP_SIZES))})")
    if isinstance(step_size, str):
        if step_size not in STEP_SIZES:
            raise ValueError(bad)
        return adaptive_rate() if step_size == "adaptive" else natural_gradient_ascent(robbins_monro())
    if not callable(step_size) and (isinstance(step_size, bool) or not isinstance(step_size, (int, float, np.number))):
        raise ValueError(bad)
    check_schedule(step_size, num_steps, "step_size")
    return natural_gradient_ascent(step_size)


def _step_key(step_size: Any) -> Any:
    """A hashable stand-in for ``step_size`` in a compilation key (schedules by identity)."""
    return step_size if isinstance(step_size, str) or callable(step_size) else float(step_size)


def data_mesh(devices: int | None, batch_size: int) -> jax.sharding.Mesh | None:
    """A one-axis ("batch") mesh over the first ``devices`` devices (None: all visible ones); None
    for a single device.

    With several processes (``jax.distributed``) the mesh spans the devices of all of them, and
    every process must take part: ``devices`` is then None or their total number. Each process
    draws the same minibatches (same data, same seed) and transfers only its own devices' shards."""
    available = jax.devices()
    count = len(available) if devices is None else int(devices)
    if not 1 <= count <= len(available):
        raise ValueError(f"Invalid value for devices: {devices!r} (between 1 and the {len(available)} visible devices)")
    if jax.process_count() > 1 and count != len(available):
        raise ValueError(f"Invalid value for devices: {devices!r} (with {jax.process_count()} processes every "
                         f"device takes part: None or {len(available)})")
    if count == 1:
        return None
    if batch_size % count:
        raise ValueError(f"Invalid value for batch_size: {batch_size} is not a multiple of the {count} devices "
                         f"it is split across (set devices= or a batch_size divisible by {count})")
    return jax.sharding.Mesh(np.asarray(available[:count]), ("batch",))


def _n_problems(y: np.ndarray) -> int:
    """K for labels of shape (K, N), 1 for labels of shape (N,)."""
    return y.shape[0] if y.ndim == 2 else 1


def _run_from(states: list[SVIState], problem: Problem, X: np.ndarray, y: np.ndarray, **settings: Any
              ) -> tuple[SVIResult, Problem] | list[tuple[SVIResult, Problem]]:
    """:func:`run_svi` from the initial state of each problem, each result paired with ``problem``
    (a list of K pairs for labels of shape (K, N))."""
    if y.ndim == 2:
        return [(r, problem) for r in run_svi(_stack(states), problem, X, y, **settings)]
    return run_svi(states[0], problem, X, y, **settings), problem
