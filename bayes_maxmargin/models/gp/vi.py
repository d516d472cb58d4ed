"""Full-batch mean-field VI of the GP Bayesian SVM (Wenzel et al. 2017, Sec. 3): coordinate ascent on
q(f) q(lambda) with the bound of eq. (8), the ``inference="vi"`` method of :class:`~bayes_maxmargin.GPBSVM`."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax.numpy as jnp
from jax import Array
from jax.scipy.linalg import solve_triangular

from bayes_maxmargin.core.augmentation import vb_hinge_bound
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.linalg import jittered_cholesky
from bayes_maxmargin.engine.fixed_point import VBResult, cavi_loop
from bayes_maxmargin.engine.natural_gradient import local_alpha

__all__ = ["BatchVIState", "batch_vi", "batch_vi_factor", "batch_vi_posterior"]


# ============================================================================ B-BSVM
class BatchVIState(NamedTuple):
    """q(f) = N(mu, zeta) for the full GP and the alpha of q(lambda); ``kl`` = KL(q(f) || p(f))."""

    alpha: Array
    mu: Array
    zeta_diag: Array
    kl: Array


def batch_vi_factor(K: Array, alpha: Array, gamma: Array) -> tuple[Array, Array]:
    """W^1/2 = sqrt(gamma) alpha^-1/4 and the Cholesky factor L_B of B = I + W^1/2 K W^1/2
    (W = gamma A^-1/2, Sec. 4.1); zeta = K - K W^1/2 B^-1 W^1/2 K at the training and test inputs."""
    sw = jnp.sqrt(gamma) * alpha ** -0.25
    LB, _ = jittered_cholesky(jnp.eye(K.shape[0], dtype=K.dtype) + sw[:, None] * K * sw[None, :])
    return sw, LB


def batch_vi_posterior(K: Array, y: Array, alpha: Array, gamma: Array) -> tuple[Array, Array, Array]:
    """q(f) given q(lambda): zeta = (gamma A^-1/2 + K^-1)^-1, mu = zeta gamma Y (alpha^-1/2 + 1) (Sec. 4.1).

    With W = gamma A^-1/2 and B = I + W^1/2 K W^1/2 = L_B L_B' (:func:`batch_vi_factor`),
    zeta = K - K W^1/2 B^-1 W^1/2 K: one Cholesky of a well-conditioned matrix, no inverse of K.

    Returns
    -------
    mu, zeta_diag : Array, shape (n,)
    kl : Array
        KL(q(f) || N(0, K)) = 1/2 [tr(B^-1) + mu' K^-1 mu - n + log|B|].
    """
    sw, LB = batch_vi_factor(K, alpha, gamma)
    n = y.shape[0]
    half = solve_triangular(LB, sw[:, None] * K, lower=True)  # zeta = K - half' half
    b = gamma * y * (alpha ** -0.5 + 1.0)
    Kb = K @ b
    mu = Kb - half.T @ (half @ b)
    kinv_mu = b - sw * solve_triangular(LB.T, half @ b, lower=False)  # K^-1 mu
    trace = jnp.sum(solve_triangular(LB, jnp.eye(n, dtype=K.dtype), lower=True) ** 2)
    kl = 0.5 * (trace + mu @ kinv_mu - n + 2.0 * jnp.sum(jnp.log(jnp.diag(LB))))
    return mu, jnp.diag(K) - jnp.sum(half**2, axis=0), kl


def _batch_sweep(K: Array, y: Array, gamma: Array, state: BatchVIState) -> BatchVIState:
    mu, zdiag, kl = batch_vi_posterior(K, y, state.alpha, gamma)
    return BatchVIState(local_alpha(mu, zdiag, y), mu, zdiag, kl)


def _batch_bound(y: Array, gamma: Array, state: BatchVIState) -> Array:
    return gamma * vb_hinge_bound(state.alpha, y * state.mu) - state.kl


@partial(jit, static_argnames=("max_iter",))
def batch_vi(K: Array, y: Array, gamma: Array = 1.0, tol: float = 1e-8, max_iter: int = 200) -> VBResult:
    """B-BSVM (Sec. 4.1): coordinate ascent alpha -> (zeta, mu) from the prior q(f) = N(0, K),
    stopping when the ELBO increases by less than ``tol`` (it never decreases).

    Parameters
    ----------
    K : Array, shape (n, n)
        Prior covariance at the training inputs (with its jitter).
    y : Array, shape (n,)
        Labels in {-1, +1}.

    Returns
    -------
    VBResult
        ``state`` a :class:`BatchVIState`, ``lower_bound`` the ELBO after every sweep.
    """
    gamma = jnp.asarray(gamma, K.dtype)
    zeros = jnp.zeros_like(y)
    state0 = BatchVIState(local_alpha(zeros, jnp.diag(K), y), zeros, jnp.diag(K), jnp.zeros((), K.dtype))
    return cavi_loop(partial(_batch_sweep, K, y, gamma), partial(_batch_bound, y, gamma), state0,
                     jnp.asarray(tol, K.dtype), max_iter)
