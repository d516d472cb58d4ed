"""The fitted posterior of the discriminative factor models (Henao et al. 2014, Sec. 5), one typed object
per algorithm, each with the factor scores of new inputs and the predictive moments of the classifier's f.

:class:`DrawsPosterior` holds the Gibbs draws, :class:`VBPosterior` the VB-EM state. Both take centred
inputs ``Xc`` and work in the caller's precision (the estimator runs them in float64).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular
from scipy.special import log_ndtr, logsumexp, ndtri_exp

from bayes_maxmargin.core.kernels import get_kernel, kernel_diag
from bayes_maxmargin.core.parameters import free_fields, replace_fields
from bayes_maxmargin.core.predict import probit_margin
from bayes_maxmargin.models.factor.model import probit_pseudo_labels
from bayes_maxmargin.models.factor.vbem import VBState, predict_f
from bayes_maxmargin.models.gp.covariance import gp_alpha, gp_data

__all__ = ["DrawsPosterior", "InterceptLinearKernel", "VBPosterior"]


@dataclass(frozen=True)
class InterceptLinearKernel:
    """The linear classifier of VB-EM as a kernel on the scores, k(w, w') = w'w + s^2 (beta ~ N(0, I) and
    b ~ N(0, s^2) integrated out); ``scale2`` = s^2. Equal scales compare and hash alike (one compiled
    VB-EM program)."""

    scale2: float

    def __call__(self, params: Any, A: jax.Array, B: jax.Array) -> jax.Array:
        return A @ B.T + self.scale2


def _score_solve(P: jax.Array, A: jax.Array, psi: jax.Array, Xc: jax.Array) -> jax.Array:
    """E[w | x, A, psi] = P^-1 psi A' x for the rows of ``Xc``, P = psi <A'A> + I."""
    return cho_solve((jnp.linalg.cholesky(P), True), (psi * Xc @ A).T).T


class VBPosterior(NamedTuple):
    """The VB-EM fit: its :class:`~bayes_maxmargin.models.factor.vbem.VBState`, the GP kernel's parameter
    template ``like`` (None for the linear classifier), the +-1 labels and the classifier's kernel (a
    GP kernel name or object, or an :class:`InterceptLinearKernel`)."""

    state: VBState
    like: Any
    y: np.ndarray
    kernel: Any

    def scores(self, Xc: np.ndarray) -> np.ndarray:
        """Scores with <psi>, <A> and <A'A> = sum_i S_A,i + <A>'<A>."""
        s = self.state
        psi = s.psi_a / s.psi_b
        AtA = jnp.sum(s.SA, 0) + s.mA.T @ s.mA
        return np.asarray(_score_solve(psi * AtA + jnp.eye(AtA.shape[0]), s.mA, psi, jnp.asarray(Xc)))

    def latent_moments(self, Xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """k_*'(K + D)^-1 t and k_** - k_*'(K + D)^-1 k_* at the scores of ``Xc``
        (:func:`~bayes_maxmargin.models.factor.vbem.predict_f`)."""
        m, v = predict_f(self.state, None, jnp.asarray(self.y, jnp.float64), jnp.asarray(self.scores(Xc)),
                         get_kernel(self.kernel), self.like)
        return np.asarray(m), np.asarray(v)


class DrawsPosterior(NamedTuple):
    """The Gibbs draws (chains stacked): ``A``, ``psi`` and the classifier's (``coef`` for the linear one;
    ``W``, ``inv_lam``, ``gamma`` for the GP, and the draws of its sampled kernel fields by path, e.g.
    ``lengthscale``), which classifier (``structure``: "linear", "gp" or "none", the factor model alone),
    the +-1 labels and the GP's kernel and its parameters ``theta`` (those of the fields not sampled)."""

    draws: dict
    structure: str
    y: np.ndarray
    kernel: Any = None
    theta: Any = None

    def scores(self, Xc: np.ndarray, per_draw: bool = False) -> np.ndarray:
        """Scores per draw, or their mean over the draws."""
        A, psi = jnp.asarray(self.draws["A"]), jnp.asarray(self.draws["psi"])
        W = jax.vmap(lambda a, p: _score_solve(p * a.T @ a + jnp.eye(a.shape[1]), a, p, jnp.asarray(Xc)))(A, psi)
        return np.asarray(W) if per_draw else np.asarray(W.mean(0))

    def latent_moments(self, Xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mixture over draws of the classifier's predictive of f at the draw's scores."""
        m, v = self.latent_draws(Xc)
        return m.mean(0), v.mean(0) + m.var(0)

    def probit_margin(self, Xc: np.ndarray) -> np.ndarray:
        """Phi^-1 of E[Phi(f*)], the probit link's predictive probability of y* = +1, which is the mean over
        the draws of Phi(m_s / sqrt(1 + v_s)) (the Gaussian integral of Phi given draw s,
        :func:`~bayes_maxmargin.core.predict.probit_margin`). Computed from the log of the smaller of the
        two class probabilities, so that it stays finite where the probability rounds to 0 or 1."""
        r = probit_margin(*self.latent_draws(Xc))
        log_s = np.log(r.shape[0])
        log_p = logsumexp(log_ndtr(r), axis=0) - log_s
        log_q = logsumexp(log_ndtr(-r), axis=0) - log_s
        return np.where(log_p < log_q, ndtri_exp(np.minimum(log_p, 0.0)), -ndtri_exp(np.minimum(log_q, 0.0)))

    def latent_draws(self, Xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per draw s, the mean and variance (each (draws, n)) of the classifier's predictive of f at the
        draw's scores: f* itself for the linear classifier (variance 0); for the GP the regression
        predictive given the draw's Gaussian pseudo-observations (max-margin: y (1 + lambda) with noise
        lambda / gamma; probit: z with unit noise, :func:`~bayes_maxmargin.models.factor.model.probit_pseudo_labels`)."""
        Ws, d = self.scores(Xc, per_draw=True), self.draws
        if self.structure == "linear":
            f = np.einsum("snk,sk->sn", Ws, d["coef"][:, :-1]) + d["coef"][:, -1:]
            return f, np.zeros_like(f)
        kfn = get_kernel(self.kernel)
        n_draws = len(d["W"])
        labels = (probit_pseudo_labels(jnp.asarray(d["z"], jnp.float64)) if "z" in d
                  else jnp.broadcast_to(jnp.asarray(self.y, jnp.float64), (n_draws, len(self.y))))
        sampled = {k: jnp.asarray(d[k]) for k in free_fields(self.theta) if k in d}  # theta draws

        def one(W, Wn, inv_lam, gamma, fields, y):
            theta = replace_fields(self.theta, fields)
            K = kfn(theta, W, W) + 1e-6 * jnp.eye(W.shape[0])
            alpha = gp_alpha(gp_data(K, y), inv_lam, gamma)
            Ks = kfn(theta, Wn, W)
            s = jnp.sqrt(gamma * inv_lam)
            L = jnp.linalg.cholesky(jnp.eye(W.shape[0]) + s[:, None] * K * s[None, :])
            V = solve_triangular(L, s[:, None] * Ks.T, lower=True)
            return Ks @ alpha, kernel_diag(kfn, theta, Wn) - jnp.sum(V**2, 0)

        m, v = jax.lax.map(lambda a: one(*a), (jnp.asarray(d["W"]), jnp.asarray(Ws),
                                               jnp.asarray(d["inv_lam"]), jnp.asarray(d["gamma"]), sampled, labels))
        return np.asarray(m), np.asarray(v)
