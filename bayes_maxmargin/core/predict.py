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

__all__ = ["LINK_SHIFT_LIMIT", "distinct_rows", "fit_probit_link", "gaussian_latent_moments", "group_rows",
           "group_sites", "latent_moments_from_draws", "link_rows", "link_shift", "linked_moments", "loo_cavity",
           "probit_margin", "probit_predictive", "tie_groups"]

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


def tie_groups(X: np.ndarray) -> np.ndarray | None:
    """Labels of the groups of identical rows of ``X`` (shape (n,), equal rows equal labels), or None when
    every row is distinct.

    Rows with one input share one latent value f, so the leave-one-out predictive of one of them, which
    keeps its twins, is not held out: the learnt link then trusts f as much as the fit does (150 noisy
    half-moon rows, each given twice: slope a from 1.24 to 3.68). The posteriors leave the whole group
    out instead (``loo_latent(..., groups=)``).

    Examples
    --------
    >>> import numpy as np
    >>> tie_groups(np.array([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0]])), tie_groups(np.eye(2))
    (array([0, 1, 0]), None)
    """
    _, labels, counts = np.unique(np.asarray(X), axis=0, return_inverse=True, return_counts=True)
    return labels.ravel() if (counts > 1).any() else None


def distinct_rows(X: np.ndarray) -> np.ndarray:
    """Indices of the first row of each distinct input of ``X``, increasing: ``X[distinct_rows(X)]`` holds
    every distinct row once, in the order in which they first appear.

    Examples
    --------
    >>> import numpy as np
    >>> distinct_rows(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0], [3.0, 0.0]]))
    array([0, 1, 3])
    """
    _, first = np.unique(np.asarray(X), axis=0, return_index=True)
    return np.sort(first)


def link_rows(X: np.ndarray, limit: int, seed: int) -> np.ndarray | None:
    """The training rows a link is learnt on: None (all of them) for at most ``limit`` rows, else the sorted
    indices of a random subset of at most ``limit`` rows drawn from ``seed``, made of whole groups of
    identical rows (:func:`tie_groups`), so that each row's twins are left out with it as in the fit on
    all rows. Groups of more than ``limit`` rows are never drawn; where every group has more, a random
    subset of rows.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [0.0], [2.0], [1.0], [3.0]])
    >>> rows = link_rows(X, 4, seed=0)
    >>> bool(rows.size <= 4 and all(np.isin(np.flatnonzero((X == X[r]).all(1)), rows).all() for r in rows))
    True
    >>> link_rows(X, 6, seed=0) is None
    True
    """
    n = X.shape[0]
    if n <= limit:
        return None
    rng = np.random.default_rng(seed)
    labels = tie_groups(X)
    if labels is not None:
        counts = np.bincount(labels)
        order = rng.permutation(counts.size)
        order = order[counts[order] <= limit]
        keep = order[np.cumsum(counts[order]) <= limit]
        if keep.size:
            return np.flatnonzero(np.isin(labels, keep))
    return np.sort(rng.choice(n, limit, replace=False))


def group_rows(labels: np.ndarray) -> np.ndarray:
    """The row indices of every group of ``labels`` (:func:`tie_groups`) with two or more rows, one group per
    row of the result, padded with -1 to the largest group: shape (G, m).

    Examples
    --------
    >>> import numpy as np
    >>> group_rows(np.array([0, 1, 0, 2, 2, 0]))
    array([[ 0,  2,  5],
           [ 3,  4, -1]])
    """
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    _, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    keep = counts > 1
    out = np.full((int(keep.sum()), int(counts.max(initial=1))), -1, dtype=np.int64)
    for row, (start, count) in enumerate(zip(starts[keep], counts[keep])):
        out[row, :count] = order[start : start + count]
    return out


def group_sites(site_prec: np.ndarray, target: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The one Gaussian site through which each group of rows sharing a latent value enters the posterior,
    for every row: precision sum_G tau_n and target sum_G tau_n t_n / sum_G tau_n. Divided out of the
    marginal by :func:`loo_cavity`, it gives the leave-group-out moments.

    Examples
    --------
    >>> import numpy as np
    >>> group_sites(np.array([1.0, 3.0, 2.0]), np.array([2.0, 6.0, 1.0]), np.array([0, 0, 1]))
    (array([4., 4., 2.]), array([5., 5., 1.]))
    """
    site_prec, target = np.asarray(site_prec, np.float64), np.asarray(target, np.float64)
    tau = np.bincount(labels, weights=site_prec)
    weighted = np.bincount(labels, weights=site_prec * target)
    mean_target = np.divide(weighted, tau, out=np.zeros_like(tau), where=tau > 0)
    return tau[labels], np.where(tau[labels] > 0, mean_target[labels], target)


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
    m, v, y = _link_data(mean, var, y)
    res = minimize(_link_objective, np.zeros(2), args=(m, v, y), jac=True, method="L-BFGS-B")
    return np.array([np.exp(res.x[0]), res.x[1]])


def _link_data(mean: np.ndarray, var: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    m, v, y = (np.asarray(a, np.float64).ravel() for a in (mean, var, y))
    return m, np.maximum(v, 0.0), y


def _link_objective(p: np.ndarray, m: np.ndarray, v: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """The negative log posterior of :func:`fit_probit_link` at p = (log a, b), and its gradient."""
    a, b = np.exp(p[0]), p[1]
    r = 1.0 + a * a * v
    z = y * (a * m + b) / np.sqrt(r)
    log_cdf = log_ndtr(z)
    ratio = np.exp(-0.5 * z * z - 0.5 * np.log(2.0 * np.pi) - log_cdf)  # phi(z) / Phi(z)
    dz_da, dz_db = y * (m - a * b * v) / (r * np.sqrt(r)), y / np.sqrt(r)
    value = -log_cdf.sum() + 0.5 * (p[0] ** 2 + b * b)
    return value, np.array([-a * (ratio * dz_da).sum() + p[0], -(ratio * dz_db).sum() + b])


#: :func:`link_shift` above which two links differ by more than the sampling error of the one fitted: the
#: 95 % quantile of chi^2 with 2 degrees of freedom, -2 log(0.05).
LINK_SHIFT_LIMIT = float(-2.0 * np.log(0.05))


def link_shift(mean: np.ndarray, var: np.ndarray, y: np.ndarray, link: np.ndarray, other: np.ndarray) -> float:
    """How far ``other`` lies from ``link``, the :func:`fit_probit_link` of (``mean``, ``var``, ``y``), in
    units of its sampling error: the squared Mahalanobis distance in (log a, b) under the Laplace
    approximation of its posterior, d' H d with H the Hessian of the link's negative log posterior at
    ``link`` (central differences of its gradient). Above :data:`LINK_SHIFT_LIMIT` the two differ at the
    5 % level.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> f = rng.normal(size=2000)
    >>> y = np.where(rng.random(2000) < ndtr(f), 1.0, -1.0)
    >>> link = fit_probit_link(f, np.zeros_like(f), y)
    >>> link_shift(f, 0 * f, y, link, link), bool(link_shift(f, 0 * f, y, link, np.array([2.0, 0.0])) > 100)
    (0.0, True)
    """
    m, v, y = _link_data(mean, var, y)
    p, q = (np.array([np.log(ab[0]), ab[1]], dtype=np.float64) for ab in (link, other))
    h = 1e-5
    hess = np.column_stack([(_link_objective(p + h * e, m, v, y)[1] - _link_objective(p - h * e, m, v, y)[1]) / (2 * h)
                            for e in np.eye(2)])
    d = q - p
    return float(d @ (0.5 * (hess + hess.T)) @ d)


#: What a learnt link (a, b) acts on: f itself, Phi(a f + b) with f ~ N(m, v) (``"f"``), or the probit margin
#: of the papers' predictive, Phi(a m / sqrt(1 + v) + b) (``"margin"``: Platt scaling of ``decision_function``).
LINK_INPUTS = ("f", "margin")


def linked_moments(mean: np.ndarray, var: np.ndarray, link: np.ndarray | None,
                   on: str = "f") -> tuple[np.ndarray, np.ndarray]:
    """Moments (M, V) of the argument of the probit, P(y = +1) = Phi(M / sqrt(1 + V)), under ``link``
    (a, b) for f ~ (mean, var): on f, a f + b, (a m + b, a^2 v); on the margin, a m / sqrt(1 + v) + b
    with V = 0 (:data:`LINK_INPUTS`). ``link`` is (a, b), or (K, 2) for K columns of ``mean``; None is the
    identity.

    Examples
    --------
    >>> import numpy as np
    >>> linked_moments(np.array([1.0]), np.array([0.5]), np.array([2.0, -1.0]))
    (array([1.]), array([2.]))
    >>> linked_moments(np.array([1.0]), np.array([3.0]), np.array([2.0, -1.0]), on="margin")
    (array([0.]), array([0.]))
    """
    if link is None:
        return mean, var
    link = np.asarray(link, np.float64)
    a, b = link[..., 0], link[..., 1]
    if on == "margin":
        return a * probit_margin(mean, var) + b, np.zeros_like(var)
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
