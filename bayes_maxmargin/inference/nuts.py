"""NUTS on a model's marginal program: the reference posterior every conjugate kernel is checked against.

Uses NumPyro's NUTS (with its step-size and diagonal mass-matrix adaptation during warm-up), chains
vectorised on one device. Returns draws laid out (chain, draw, ...) like :func:`run_chains`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax import Array
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import log_density

__all__ = ["run_nuts"]


def run_nuts(
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
    progress_bar: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Sample ``model(*model_args, **model_kwargs)`` with NUTS.

    Returns
    -------
    samples : dict of str to ndarray
        Posterior draws of every latent site, (chain, draw, ...).
    stats : dict of str to ndarray
        ``log_joint`` (log density of the program at each draw), ``diverging``, ``tree_depth``,
        ``n_steps``, ``acceptance_rate``, each (chain, draw).
    """
    model_kwargs = model_kwargs or {}
    mcmc = MCMC(
        NUTS(model, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth),
        num_warmup=num_warmup,
        num_samples=num_samples * thin,
        num_chains=num_chains,
        thinning=thin,
        chain_method="vectorized",
        progress_bar=progress_bar,
    )
    mcmc.run(rng_key, *model_args, extra_fields=("diverging", "num_steps", "accept_prob"), **model_kwargs)
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)

    def one(params):
        return log_density(model, model_args, model_kwargs, params)[0]

    flat = jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), samples)
    log_joint = jax.lax.map(one, flat, batch_size=256).reshape(extra["num_steps"].shape)
    n_steps = np.asarray(extra["num_steps"])
    stats = {
        "log_joint": np.asarray(log_joint),
        "diverging": np.asarray(extra["diverging"]),
        "n_steps": n_steps,
        "tree_depth": np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1,
        "acceptance_rate": np.asarray(extra["accept_prob"]),
    }
    return {k: np.asarray(v) for k, v in samples.items()}, stats
