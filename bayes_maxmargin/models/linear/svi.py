"""Stochastic natural-gradient VI of the linear Bayesian SVM (Wenzel et al. 2017 with phi_i = x_i):
the linear model's features for :func:`bayes_maxmargin.engine.svi.run_svi`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from bayes_maxmargin.engine import svi as engine
from bayes_maxmargin.engine.natural_gradient import Features, NatParams

__all__ = ["linear_features"]


def linear_features(X: Array) -> Features:
    """The linear model of Sec. 4.5: phi_i = x_i (the design row), no residual variance."""
    return Features(X, jnp.zeros(X.shape[0], X.dtype))


def _linear_features(hyper, whiten, X):
    return linear_features(X)


def svi_linear(
    design: np.ndarray,
    y: np.ndarray,
    prior_prec: np.ndarray,
    seed: int | Sequence[int] = 0,
    *,
    num_steps: int,
    batch_size: int,
    step_size: Any = "robbins_monro",
    hyper_every: int = 10,
    gamma: float = 1.0,
    dtype: Any = np.float64,
    devices: int | None = None,
    progress: bool = False,
    checkpoint: str | os.PathLike | None = None,
    resume: str | os.PathLike | None = None,
) -> tuple[engine.SVIResult, engine.Problem] | list[tuple[engine.SVIResult, engine.Problem]]:
    """Linear SVI (Sec. 4.5, eq. 14): q(beta) = N(mu, zeta) from the prior, O(d^3) per step.

    With labels ``y`` of shape (K, N), the K binary problems (one-vs-rest) run in one program
    (:func:`run_svi`), ``seed`` one or K seeds, and the result is a list of K pairs."""
    p = design.shape[1]
    P0 = jnp.asarray(prior_prec, dtype)
    nat_tx = engine.step_transform(step_size, num_steps)
    hyper_tx = optax.identity()
    problem = engine.Problem(_linear_features, None, P0)
    nat0 = NatParams(jnp.zeros(p, dtype), -0.5 * P0)
    state = engine.init_state(nat0, {}, jnp.zeros((0, 0), dtype), nat_tx, hyper_tx)
    return engine._run_from(
        [state] * engine._n_problems(y), problem, design, y, nat_tx=nat_tx, hyper_tx=hyper_tx,
        batch_size=batch_size, num_steps=num_steps, hyper_every=hyper_every, gamma=gamma, seed=seed,
        mesh=engine.data_mesh(devices, batch_size), dtype=dtype, progress=progress,
        cache_key=("linear", engine._step_key(step_size)), checkpoint=checkpoint, resume=resume,
    )
