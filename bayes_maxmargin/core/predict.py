"""Predictive distributions of the latent f and the class probability.

The probit predictive is P(y* = 1) = int Phi(f) N(f | m, v) df = Phi(m / sqrt(1 + v)) (Rasmussen &
Williams 2006, eq. 3.80). Henao et al. (2014) after eq. (11) and Wenzel et al. (2017) eq. (13) write
Phi(m / (1 + v)); the square root is the correct integral and is what this library computes.

The hinge pseudo-likelihood fixes the scale of f by the margin (y f = 1 on it), not by the probit
link, so Phi(f) need not be calibrated. :func:`fit_probit_link` learns a link Phi(a f + b) from the
leave-one-out predictive of f at the training points (:func:`loo_cavity`): the probit form of Platt
scaling, fitted on held-out latents that cost no refit, as leave-one-out predictive probabilities
choose hyperparameters in Sundararajan & Keerthi (2001, Neural Computation 13).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular
from scipy.optimize import minimize
from scipy.special import log_ndtr, ndtr

__all__ = ["fit_probit_link", "gaussian_latent_moments", "latent_moments_from_draws", "linked_moments", "loo_cavity",
           "probit_margin", "probit_predictive"]

#: Rows of X processed at a time when predicting from draws (bounds memory to rows x draws).
ROW_CHUNK = 4096


def probit_predictive(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """P(y = +1) = Phi(m / sqrt(1 + v)) for f ~ N(m, v) under the probit link."""
    return ndtr(probit_margin(mean, var))


def probit_margin(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """m / sqrt(1 + v): the probit-scale margin, Phi of which is the predictive probability."""
    return mean / np.sqrt(1.0 + np.maximum(var, 0.0))


def loo_cavity(
    mean: np.ndarray, var: np.ndarray, site_prec: np.ndarray, target: np.ndarray, extra_var: Any = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out moments of the latent at the training points from the full posterior.

    Every point n enters a Gaussian posterior of g = (g_1, ..., g_N) through one Gaussian site
    N(t_n | g_n, 1 / tau_n) (for the hinge given lambda: tau_n = gamma / lambda_n, t_n =
    y_n (1 + lambda_n), Henao et al. 2014, eq. 7; Wenzel et al. 2017, eq. 9-10). Dividing the site
    out of the marginal N(g_n | m_n, s_n) gives the cavity, the posterior of g_n without point n
    (Rasmussen & Williams 2006, eq. 3.56, 5.12)::

        s_-n = 1 / (1 / s_n - tau_n),    m_-n = s_-n (m_n / s_n - tau_n t_n),

    and f_n = g_n + e_n with independent e_n ~ N(0, ``extra_var``) (FITC's diagonal, the S-BSVM's
    Ktilde_nn) adds its variance. The cavity precision is floored at 1e-6 / s_n.

    Parameters
    ----------
    mean, var : ndarray, shape (n,)
        Posterior marginals m_n, s_n of g_n.
    site_prec, target : ndarray, shape (n,)
        tau_n and t_n of each point's site.
    extra_var : float or ndarray
        Variance of the independent part of f_n.

    Returns
    -------
    mean, var : ndarray, shape (n,)
        Leave-one-out mean and variance of f_n.

    Examples
    --------
    >>> import numpy as np
    >>> m, v = loo_cavity(np.array([1.0]), np.array([0.5]), np.array([1.0]), np.array([2.0]))
    >>> float(m[0]), float(v[0])  # prior N(0, 1), site N(2 | g, 1): posterior N(1, 0.5)
    (0.0, 1.0)
    """
    var = np.maximum(np.asarray(var, np.float64), np.finfo(np.float64).tiny)
    prec = np.maximum(1.0 / var - site_prec, 1e-6 / var)
    loo_var = 1.0 / prec
    return loo_var * (mean / var - site_prec * target), loo_var + extra_var


def fit_probit_link(mean: np.ndarray, var: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The link P(y = +1 | f) = Phi(a f + b) that best predicts held-out labels.

    Maximises sum_n log Phi(y_n (a m_n + b) / sqrt(1 + a^2 v_n)), the log predictive probability of
    the labels under f_n ~ N(m_n, v_n) (leave-one-out moments, :func:`loo_cavity`), plus standard
    normal log priors on log a and b, which keep (a, b) finite on separable data (L-BFGS-B on
    (log a, b) from (0, 0), the identity link).

    Parameters
    ----------
    mean, var : ndarray, shape (n,)
        Held-out predictive moments of f.
    y : ndarray, shape (n,)
        Labels coded +-1.

    Returns
    -------
    ndarray, shape (2,)
        (a, b), a > 0.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> f = rng.normal(size=20000)
    >>> y = np.where(rng.random(20000) < ndtr(0.5 * f + 0.3), 1.0, -1.0)
    >>> np.round(fit_probit_link(f, np.zeros_like(f), y), 1)  # recovers a = 0.5, b = 0.3
    array([0.5, 0.3])
    """
    m, v, y = (np.asarray(a, np.float64).ravel() for a in (mean, var, y))
    v = np.maximum(v, 0.0)

    def objective(p: np.ndarray) -> tuple[float, np.ndarray]:
        a, b = np.exp(p[0]), p[1]
        r = 1.0 + a * a * v
        z = y * (a * m + b) / np.sqrt(r)
        log_cdf = log_ndtr(z)
        ratio = np.exp(-0.5 * z * z - 0.5 * np.log(2.0 * np.pi) - log_cdf)  # phi(z) / Phi(z)
        dz_da, dz_db = y * (m - a * b * v) / (r * np.sqrt(r)), y / np.sqrt(r)
        value = -log_cdf.sum() + 0.5 * (p[0] ** 2 + b * b)
        return value, np.array([-a * (ratio * dz_da).sum() + p[0], -(ratio * dz_db).sum() + b])

    res = minimize(objective, np.zeros(2), jac=True, method="L-BFGS-B")
    return np.array([np.exp(res.x[0]), res.x[1]])


def linked_moments(mean: np.ndarray, var: np.ndarray, link: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Moments of a f + b for f ~ (mean, var): (a m + b, a^2 v); ``link`` is (a, b), or (K, 2) for K
    columns of ``mean``; None is the identity.

    Examples
    --------
    >>> import numpy as np
    >>> linked_moments(np.array([1.0]), np.array([0.5]), np.array([2.0, -1.0]))
    (array([1.]), array([2.]))
    """
    if link is None:
        return mean, var
    link = np.asarray(link, np.float64)
    a, b = link[..., 0], link[..., 1]
    return a * mean + b, a * a * var


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
