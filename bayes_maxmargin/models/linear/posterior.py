"""The fitted posterior of the linear models' coefficients, one typed object per form, each with the
predictive moments of the latent f = phi' w at a design matrix.

* :class:`PrecisionPosterior`, N(mean, (L L')^-1): EM (the Gaussian conditional at the mode) and SVI
  (q(beta), Wenzel et al. 2017, Sec. 4.5);
* :class:`CovariancePosterior`, N(mean, cov): the mean-field VB algorithms of Luts & Ormerod (2014);
* :class:`LowRankPosterior`, N(mean, diag(prior_var) - V'V) with V of n rows: EM and VB (Algorithm 1)
  with more coefficients than data points, where no p x p matrix is formed;
* :class:`DrawsPosterior`, draws of w: Gibbs, NUTS and the Luts & Ormerod samplers.

Each has ``mean`` (the posterior mean of w), ``latent_moments(design)`` and ``weight_moment(d)`` (E[w w']
of the first ``d`` coefficients, for integrating missing inputs out); the Gaussian ones also
``sample(seed, size)``, independent draws of shape ``(*size, p)`` (``idata_``'s posterior).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from bayes_maxmargin.core.linalg import psd_sqrt
from bayes_maxmargin.core.predict import gaussian_latent_moments, latent_moments_from_draws

__all__ = ["CovariancePosterior", "DrawsPosterior", "LowRankPosterior", "PrecisionPosterior"]


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

    def sample(self, seed: int, size: tuple[int, ...]) -> np.ndarray:
        """Draws mean + L'^-1 z, z ~ N(0, I)."""
        z = np.random.default_rng(seed).standard_normal((*size, self.mean.shape[0]))
        return self.mean + solve_triangular(self.prec_chol, z.reshape(-1, z.shape[-1]).T, lower=True,
                                            trans="T").T.reshape(z.shape)


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

    def sample(self, seed: int, size: tuple[int, ...]) -> np.ndarray:
        """Draws mean + cov^1/2 z, z ~ N(0, I) (the symmetric square root: cov may be singular)."""
        factor = psd_sqrt(self.cov)
        return self.mean + np.random.default_rng(seed).standard_normal((*size, factor.shape[1])) @ factor.T


class LowRankPosterior(NamedTuple):
    """w ~ N(mean, diag(prior_var) - V'V), V = L^-1 G diag(prior_var) of shape (n, p): the Woodbury
    form of a Gaussian conditional with p > n
    (:class:`~bayes_maxmargin.core.augmentation.WideGaussianConditional`, M = L L')."""

    mean: np.ndarray
    prior_var: np.ndarray
    half: np.ndarray

    @classmethod
    def from_conditional(cls, cond) -> "LowRankPosterior":
        """From a :class:`~bayes_maxmargin.core.augmentation.WideGaussianConditional` (O(n^2 p))."""
        prior_var = np.asarray(cond.prior_var, dtype=np.float64)
        scaled = np.asarray(cond.factor, dtype=np.float64) * prior_var
        half = solve_triangular(np.asarray(cond.inner_chol, dtype=np.float64), scaled, lower=True)
        return cls(np.asarray(cond.mean, dtype=np.float64), prior_var, half)

    def latent_moments(self, design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """design @ mean and the variances phi_i' diag(prior_var) phi_i - ||V phi_i||^2 (at least 0)."""
        var = np.sum(design**2 * self.prior_var, axis=1) - np.sum((self.half @ design.T) ** 2, axis=0)
        return design @ self.mean, np.maximum(var, 0.0)

    @property
    def cov(self) -> np.ndarray:
        """The p x p covariance (formed on request)."""
        return np.diag(self.prior_var) - self.half.T @ self.half

    def weight_moment(self, d: int) -> np.ndarray:
        """E[w w'] of the first ``d`` coefficients: Sigma + mu mu'."""
        V = self.half[:, :d]
        return np.diag(self.prior_var[:d]) - V.T @ V + np.outer(self.mean[:d], self.mean[:d])

    def sample(self, seed: int, size: tuple[int, ...]) -> np.ndarray:
        """Draws mean + D^1/2 (I - U'U)^1/2 z, z ~ N(0, I_p), with D = diag(prior_var) and U = V D^-1/2
        (n x p, so that the covariance is D^1/2 (I - U'U) D^1/2): with S = U U' = Q diag(s) Q',
        (I - U'U)^1/2 = I - U' Q diag((1 - (1 - s)^1/2) / s) Q' U, in O(n^2 p) without a p x p matrix."""
        sd = np.sqrt(self.prior_var)
        U = np.divide(self.half, sd, out=np.zeros_like(self.half), where=sd > 0)  # a zero variance: a zero column
        s, Q = np.linalg.eigh(U @ U.T)
        s = np.clip(s, 0.0, 1.0)
        shrink = np.where(s > 1e-12, (1.0 - np.sqrt(1.0 - s)) / np.where(s > 1e-12, s, 1.0), 0.5)
        z = np.random.default_rng(seed).standard_normal((*size, self.mean.shape[0]))
        x = z - ((z @ U.T) @ Q * shrink) @ Q.T @ U
        return self.mean + sd * x


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
