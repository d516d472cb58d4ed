"""The posteriors of Luts & Ormerod's (2014) models, in the form every linear fit predicts with
(:mod:`bayes_maxmargin.models.linear.posterior`): the Gaussian q of mean-field VB (Algorithms 1-4), either
form, the draws of Gibbs, over the effective coefficients [beta, b, u] in the estimator's order.

References
----------
J. Luts and J. T. Ormerod (2014). Mean field variational Bayesian inference for support vector machine
classification. Computational Statistics & Data Analysis 73, 163-176.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayes_maxmargin.models.linear.posterior import CovariancePosterior, LowRankPosterior

__all__ = ["laplace_zero_posterior", "missing_posterior", "q_posterior", "reordered"]


def q_posterior(state) -> CovariancePosterior | LowRankPosterior:
    """q(theta) of Algorithm 1 or 2 (either form) as a typed posterior, in float64: N(mean, Sigma), with
    Sigma from the precision's Cholesky factor, or its low-rank form (no p x p matrix)."""
    if hasattr(state, "q"):
        return LowRankPosterior.from_conditional(state.q)
    L = np.asarray(state.prec_chol, dtype=np.float64)
    half = np.linalg.solve(L, np.eye(L.shape[0]))
    return CovariancePosterior(np.asarray(state.mean, dtype=np.float64), half.T @ half)


def laplace_zero_posterior(state: Any) -> CovariancePosterior | LowRankPosterior:
    """The effective coefficients mu_q(gamma~) * (beta, v) under q of Algorithm 3, as a Gaussian
    with their mean g mu and covariance Omega_q(gamma~) o Omega_q - (g mu)(g mu)' =
    diag(g (1 - g) (dg Sigma + mu^2)) + diag(g) Sigma diag(g), g = mu_q(gamma~) (the classification
    rule of Sec. 3.2 and its spread). In the n-dimensional form Sigma = A^-1 - V'V, so the covariance
    is the diagonal g (1 - g) (dg Sigma + mu^2) + g^2 A^-1 minus (V diag(g))' (V diag(g)): a
    :class:`LowRankPosterior`, no p x p matrix."""
    p = state.mean.shape[0] - state.mu_gamma.shape[0]
    g = np.r_[np.ones(p), np.asarray(state.mu_gamma, dtype=np.float64)]
    mu = np.asarray(state.mean, dtype=np.float64)
    if hasattr(state, "q"):
        q = LowRankPosterior.from_conditional(state.q)
        cov_diag = q.prior_var - np.sum(q.half**2, axis=0)
        return LowRankPosterior(g * mu, g * (1.0 - g) * (cov_diag + mu**2) + g**2 * q.prior_var, q.half * g)
    cov = np.asarray(state.cov, dtype=np.float64)
    om_g = np.diag(g * (1.0 - g)) + np.outer(g, g)
    return CovariancePosterior(g * mu, om_g * (cov + np.outer(mu, mu)) - np.outer(g * mu, g * mu))


def missing_posterior(state: Any) -> CovariancePosterior:
    """q(theta) of Algorithm 4 (missing covariates, Sec. 3.3) as a typed posterior, in float64: the
    Gaussian N(mean, cov) of the coefficients [b, beta] that the algorithm iterates."""
    return CovariancePosterior(np.asarray(state.mean, dtype=np.float64), np.asarray(state.cov, dtype=np.float64))


def reordered(post: CovariancePosterior | LowRankPosterior, order: np.ndarray) -> CovariancePosterior | LowRankPosterior:
    """The Gaussian ``post`` of the coefficients taken in ``order`` (e.g. the algorithms' [b, beta] as the
    estimator's [beta, b])."""
    if isinstance(post, LowRankPosterior):
        return LowRankPosterior(post.mean[order], post.prior_var[order], post.half[:, order])
    return CovariancePosterior(post.mean[order], post.cov[np.ix_(order, order)])
