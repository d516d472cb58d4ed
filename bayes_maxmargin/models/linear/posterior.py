"""The fitted posterior of the linear models' coefficients, one typed object per form, each with the
predictive moments of the latent f = phi' w at a design matrix.

* :class:`PrecisionPosterior`, N(mean, (L L')^-1): EM (the Gaussian conditional at the mode) and SVI
  (q(beta), Wenzel et al. 2017, Sec. 4.5);
* :class:`CovariancePosterior`, N(mean, cov): the mean-field VB algorithms of Luts & Ormerod (2014);
* :class:`DrawsPosterior`, draws of w: Gibbs, NUTS and the Luts & Ormerod samplers.

Each has ``mean`` (the posterior mean of w), ``latent_moments(design)`` and ``weight_moment(d)`` (E[w w']
of the first ``d`` coefficients, for integrating missing inputs out).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve

from bayes_maxmargin.core.predict import gaussian_latent_moments, latent_moments_from_draws

__all__ = ["CovariancePosterior", "DrawsPosterior", "PrecisionPosterior"]


class PrecisionPosterior(NamedTuple):
    """w ~ N(mean, (L L')^-1), with ``prec_chol`` the lower Cholesky factor L of the precision."""

    mean: np.ndarray
    prec_chol: np.ndarray

    def latent_moments(self, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """design @ mean and the variances ||L^-1 phi_i||^2."""
        return gaussian_latent_moments(design, self.mean, self.prec_chol)

    def weight_moment(self, d: int) -> np.ndarray:
        """E[w w'] of the first ``d`` coefficients: Sigma + mu mu'."""
        cov = cho_solve((self.prec_chol, True), np.eye(self.prec_chol.shape[0]))
        return cov[:d, :d] + np.outer(self.mean[:d], self.mean[:d])


class CovariancePosterior(NamedTuple):
    """w ~ N(mean, cov)."""

    mean: np.ndarray
    cov: np.ndarray

    def latent_moments(self, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """design @ mean and the variances phi_i' cov phi_i."""
        return design @ self.mean, np.sum((design @ self.cov) * design, axis=1)

    def weight_moment(self, d: int) -> np.ndarray:
        """E[w w'] of the first ``d`` coefficients: Sigma + mu mu'."""
        return self.cov[:d, :d] + np.outer(self.mean[:d], self.mean[:d])


class DrawsPosterior(NamedTuple):
    """Draws of w, shape (S, p), chains stacked."""

    draws: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.draws.mean(axis=0)

    def latent_moments(self, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of design @ w over the draws."""
        return latent_moments_from_draws(design, self.draws)

    def weight_moment(self, d: int) -> np.ndarray:
        """E[w w'] of the first ``d`` coefficients over the draws."""
        W = self.draws[:, :d]
        return W.T @ W / W.shape[0]
