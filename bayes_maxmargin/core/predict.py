"""Predictive distributions of the latent f and the class probability.

The probit predictive is P(y* = 1) = int Phi(f) N(f | m, v) df = Phi(m / sqrt(1 + v)) (Rasmussen &
Williams 2006, eq. 3.80). Henao et al. (2014) after eq. (11) and Wenzel et al. (2017) eq. (13) write
Phi(m / (1 + v)); the square root is the correct integral and is what this library computes.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import ndtr

__all__ = ["gaussian_latent_moments", "latent_moments_from_draws", "probit_margin", "probit_predictive"]

#: Rows of X processed at a time when predicting from draws (bounds memory to rows x draws).
ROW_CHUNK = 4096


def probit_predictive(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """P(y = +1) = Phi(m / sqrt(1 + v)) for f ~ N(m, v) under the probit link."""
    return ndtr(probit_margin(mean, var))


def probit_margin(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """m / sqrt(1 + v): the probit-scale margin, Phi of which is the predictive probability."""
    return mean / np.sqrt(1.0 + np.maximum(var, 0.0))


def latent_moments_from_draws(design: np.ndarray, coef_draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of f = design @ w over draws of w (rows chunked).

    Parameters
    ----------
    design : ndarray, shape (n, p)
    coef_draws : ndarray, shape (S, p)
    """
    n = design.shape[0]
    mean, var = np.empty(n), np.empty(n)
    for lo in range(0, n, ROW_CHUNK):
        f = design[lo : lo + ROW_CHUNK] @ coef_draws.T
        mean[lo : lo + ROW_CHUNK] = f.mean(axis=1)
        var[lo : lo + ROW_CHUNK] = f.var(axis=1)
    return mean, var


def gaussian_latent_moments(
    design: np.ndarray, coef_mean: np.ndarray, prec_chol: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of f = design @ w for w ~ N(coef_mean, (L L')^-1): v = ||L^-1 phi||^2."""
    half = solve_triangular(prec_chol, design.T, lower=True)
    return design @ coef_mean, np.sum(half**2, axis=0)
