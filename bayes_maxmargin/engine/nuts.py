"""NUTS on a model's marginal program: the reference posterior every conjugate kernel is checked against.

NumPyro's NUTS (its functional kernel, :func:`numpyro.infer.hmc.hmc`, with step-size and diagonal
mass-matrix adaptation during warm-up), the chains vectorised on one device. :func:`nuts_chains` is a
pure JAX function of the key and the model's arguments, so that ``jax.vmap`` runs several problems
(the binary problems of a one-vs-rest fit) as one program; :func:`run_nuts` wraps it for one problem.
Draws are laid out (chain, draw, ...) like :func:`~bayes_maxmargin.engine.mcmc.run_chains`.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model, log_density

from bayes_maxmargin.core import progress
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.engine import resumable
from bayes_maxmargin.engine.checkpoint import INFO_PREFIX, checkpoint_folder

__all__ = ["DivergenceWarning", "DivergentSamplerError", "check_divergences", "nuts_chains", "run_nuts", "to_host"]


class DivergenceWarning(UserWarning):
    """Some NUTS transitions after warm-up diverged: the draws may be biased.

    The fit records their number and fraction (``num_divergences_``, ``divergence_fraction_``,
    ``idata_.sample_stats["diverging"]``).

    Examples
    --------
    >>> import warnings
    >>> from bayes_maxmargin import DivergenceWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", DivergenceWarning)  # a divergent fit stops the script
    >>> issubclass(DivergenceWarning, UserWarning)
    True
    """


class DivergentSamplerError(RuntimeError, ValueError):
    """Every NUTS transition after warm-up diverged: the draws are not from the posterior.

    Also a :class:`ValueError`: the usual cause is the scale of the data.

    Examples
    --------
    >>> from bayes_maxmargin import DivergentSamplerError
    >>> issubclass(DivergentSamplerError, RuntimeError) and issubclass(DivergentSamplerError, ValueError)
    True
    """


def nuts_chains(
    model: Callable[..., Any],
    rng_key: Array,
    model_args: tuple = (),
    model_kwargs: dict | None = None,
    *,
    num_warmup: int = 500,
    num_samples: int = 1000,
    num_chains: int = 2,
    thin: int = 1,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    checkpoint: str | os.PathLike | None = None,
    resume: str | os.PathLike | None = None,
) -> tuple[dict[str, Array], dict[str, Array]]:
    """``num_chains`` NUTS chains of ``model(*model_args, **model_kwargs)`` (pure JAX, vmappable).

    Each chain starts from its own uniform draw in (-2, 2) of the unconstrained space, adapts its
    own step size and diagonal mass matrix during ``num_warmup`` iterations, then keeps every
    ``thin``-th of ``num_samples * thin`` iterations.

    With ``checkpoint`` or ``resume`` (a folder) the run goes in chunks with a checkpoint after the
    warm-up and after every chunk of draws, and the draws so far in ``idata.nc`` when it stops or ends
    (:func:`~bayes_maxmargin.engine.resumable.run_resumable`; call it from the main thread, not vmapped):
    a resumed run equals one that ran through with a checkpoint.

    Returns
    -------
    samples : dict of str to Array
        Every latent site in its constrained space, (chain, draw, ...).
    extra : dict of str to Array
        ``log_joint`` (log density of the program at each draw), ``n_steps`` and
        ``acceptance_rate`` of the kept iteration, and ``diverging`` (whether any iteration since
        the previous kept draw diverged), each (chain, draw).
    """
    # floats and arrays in the keyword arguments are traced, the rest (flags, kernel names, integers
    # such as sizes) are compiled in: a fit of the same model, shapes and settings reuses the program
    leaves, treedef = jax.tree_util.tree_flatten(model_kwargs or {})
    traced = tuple(isinstance(v, (float, np.ndarray, jax.Array)) for v in leaves)
    static = tuple(None if t else v for t, v in zip(traced, leaves))
    bar = progress.active()
    if bar is not None:
        bar.restart(num_warmup + num_samples * thin)
    args = (model, rng_key, model_args, [v for t, v in zip(traced, leaves) if t], (treedef, traced, static),
            num_warmup, num_samples, num_chains, thin, float(target_accept_prob), int(max_tree_depth))
    if checkpoint_folder(checkpoint, resume) is None:
        return _nuts_program(*args)
    return resumable.run_resumable(_nuts_program, *args, checkpoint=checkpoint, resume=resume, draws=_draws_so_far)


def _draws_so_far(carries: list) -> dict[str, np.ndarray]:
    """The draws kept so far, (draw, chain, ...) per name, from the carry of the kept iterations'
    loop (:func:`_resumable_chains`), the statistics as the Info of
    :func:`~bayes_maxmargin.engine.mcmc.run_chains`."""
    _, (samples, div, n, acc), b = carries[-1]
    b = int(b)
    stats = {"diverging": div, "n_steps": n, "acceptance_rate": acc}
    named = {**samples, **{INFO_PREFIX + k: v for k, v in stats.items()}}
    return {k: np.swapaxes(np.asarray(v)[:, :b], 0, 1) for k, v in named.items()}


@functools.partial(jit, static_argnums=(0, 4, 5, 6, 7, 8, 9, 10))
def _nuts_program(model, rng_key, model_args, kwarg_values, kwarg_spec, num_warmup, num_samples, num_chains,
                  thin, target_accept_prob, max_tree_depth):
    treedef, traced, static = kwarg_spec
    values = iter(kwarg_values)
    model_kwargs = jax.tree_util.tree_unflatten(treedef, [next(values) if t else v for t, v in zip(traced, static)])
    key_init, key_run = jax.random.split(rng_key)
    info = initialize_model(jax.random.split(key_init, num_chains), model, model_args=model_args,
                            model_kwargs=model_kwargs, dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=info.potential_fn, algo="NUTS")
    constrain = info.postprocess_fn(*model_args, **model_kwargs)

    def step(state, _):
        state = sample_kernel(state, model_args=model_args, model_kwargs=model_kwargs)
        return state, state.diverging

    ticks = progress.ticks_enabled()  # iteration numbers for the progress callbacks only

    def kept(state, b):
        state, div = jax.lax.scan(step, state, None, length=thin)
        if ticks:
            progress.tick(num_warmup + (b + 1) * thin - 1)
        return state, (state.z, div.any(), state.num_steps, state.accept_prob)

    def warm(state, i):
        if ticks:
            progress.tick(i)
        return step(state, None)[0], None

    def chain(z0, key):
        state = init_kernel(z0, num_warmup, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                            model_args=model_args, model_kwargs=model_kwargs, rng_key=key)
        state, _ = jax.lax.scan(warm, state, jnp.arange(num_warmup) if ticks else None, length=num_warmup)
        _, (z, div, n, acc) = jax.lax.scan(kept, state, jnp.arange(num_samples) if ticks else None,
                                           length=num_samples)
        return jax.vmap(constrain)(z), div, n, acc

    if resumable.tracing():  # the same iterations as resumable loops over all chains (in chunks)
        def start(z0, key):
            return init_kernel(z0, num_warmup, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                               model_args=model_args, model_kwargs=model_kwargs, rng_key=key)

        states = jax.vmap(start)(info.param_info.z, jax.random.split(key_run, num_chains))
        samples, div, n, acc = _resumable_chains(jax.vmap(lambda s: step(s, None)), jax.vmap(constrain), states,
                                                 num_warmup, num_samples, thin, ticks)
    else:
        samples, div, n, acc = jax.vmap(chain)(info.param_info.z, jax.random.split(key_run, num_chains))

    def log_joint(params):
        return log_density(model, model_args, model_kwargs, params)[0]

    def log_joints(samples):
        flat = jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), samples)
        return jax.lax.map(log_joint, flat, batch_size=256).reshape(n.shape)

    lj = resumable.after_loops(log_joints, samples)
    return samples, {"log_joint": lj, "diverging": div, "n_steps": n, "acceptance_rate": acc}


def _resumable_chains(step, constrain, states, num_warmup: int, num_samples: int, thin: int, ticks: bool):
    """The warm-up and the kept iterations of :func:`_nuts_program` for all chains at once (``step`` and
    ``constrain`` vectorised over them) as two resumable loops
    (:func:`~bayes_maxmargin.engine.resumable.while_loop`), the draws kept in buffers of ``num_samples``
    per chain: what a checkpointed run continues from."""

    def warm(carry):
        state, i = carry
        if ticks:
            progress.tick(i)
        return step(state)[0], i + 1

    state, _ = resumable.while_loop(lambda c: c[1] < num_warmup, warm, (states, jnp.asarray(0, jnp.int32)))

    def kept(carry):
        state, draws, b = carry
        state, div = jax.lax.scan(lambda s, _: step(s), state, None, length=thin)
        if ticks:
            progress.tick(num_warmup + (b + 1) * thin - 1)
        new = (constrain(state.z), div.any(axis=0), state.num_steps, state.accept_prob)
        draws = jax.tree_util.tree_map(lambda buf, x: buf.at[:, b].set(x), draws, new)
        return state, draws, b + 1

    first = (constrain(state.z), state.diverging, state.num_steps, state.accept_prob)
    buffers = jax.tree_util.tree_map(lambda x: jnp.zeros((x.shape[0], num_samples) + x.shape[1:], x.dtype), first)
    _, draws, _ = resumable.while_loop(lambda c: c[2] < num_samples, kept, (state, buffers, jnp.asarray(0, jnp.int32)))
    return draws


def to_host(samples: dict[str, Array], extra: dict[str, Array]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Host copies of :func:`nuts_chains`' draws and statistics, with ``tree_depth`` =
    floor(log2 n_steps) + 1 added to the statistics."""
    stats = {k: np.asarray(v) for k, v in extra.items()}
    stats["tree_depth"] = np.floor(np.log2(np.maximum(stats["n_steps"], 1))).astype(np.int64) + 1
    return {k: np.asarray(v) for k, v in samples.items()}, stats


def check_divergences(diverging: np.ndarray, name: str = "NUTS") -> tuple[int, float]:
    """Count the divergent transitions of a run, warn if there are any and refuse a run where all diverged.

    Parameters
    ----------
    diverging : ndarray of bool, shape (..., chain, draw)
        The ``diverging`` statistic of :func:`nuts_chains` (a leading axis for the problems of a
        one-vs-rest fit).
    name : str, default="NUTS"
        Who ran the sampler, used in the messages.

    Returns
    -------
    count : int
        Number of kept draws whose transitions diverged.
    fraction : float
        ``count`` over the number of kept draws.

    Raises
    ------
    DivergentSamplerError
        If every kept transition of a chain set (a problem) diverged.
    """
    div = np.asarray(diverging, dtype=bool)
    count, total = int(div.sum()), max(div.size, 1)
    fraction = count / total
    per_problem = div.reshape(-1, div.shape[-2] * div.shape[-1])  # one row per problem
    if div.size and per_problem.all(axis=1).any():
        raise DivergentSamplerError(
            f"{name}: all {per_problem.shape[1]} NUTS transitions after warm-up diverged ({count} of {total} in all), "
            "so the draws are not from the posterior. Standardise X (e.g. sklearn.preprocessing.StandardScaler), "
            "check the scale of the data and the hyperparameters, or lengthen num_warmup."
        )
    if count:
        warnings.warn(
            f"{name}: {count} of {total} NUTS transitions after warm-up diverged (fraction {fraction:.3f}); the "
            "draws may be biased. Standardise X, check the data scale, or lengthen num_warmup.",
            DivergenceWarning,
            stacklevel=3,
        )
    return count, fraction


def run_nuts(
    model: Callable[..., Any], rng_key: Array, model_args: tuple = (), model_kwargs: dict | None = None, **settings: Any
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Sample ``model(*model_args, **model_kwargs)`` with NUTS: :func:`nuts_chains` (``settings``
    are its keyword arguments) with the results on the host (:func:`to_host`).

    Returns
    -------
    samples : dict of str to ndarray
        Posterior draws of every latent site, (chain, draw, ...).
    stats : dict of str to ndarray
        ``log_joint``, ``diverging``, ``tree_depth``, ``n_steps``, ``acceptance_rate``, each (chain, draw).
    """
    return to_host(*nuts_chains(model, rng_key, model_args, model_kwargs, **settings))
