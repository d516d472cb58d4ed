"""The row space of a wide design: NUTS and SVI of the linear model with p > n in r <= n dimensions.

The data enter the linear model only through f = Phi w. With the Gaussian prior w ~ N(0, diag(s)^2)
write w = diag(s) u, u ~ N(0, I_p), and take the thin SVD of the whitened design
Phi diag(s) = U D V' (V' of r <= n orthonormal rows). Then

    f = Z z,   Z = U D (n x r),   z = V' u ~ N(0, I_r),

and the component of u orthogonal to the rows of V', (I - V V') u, is independent of z and of the data:
its posterior is its prior N(0, I - V V'). A sampler or a variational fit of the r-dimensional model
in z (prior N(0, I_r), design Z) therefore gives the posterior of w exactly:

    w = diag(s) (V z + (I - V V') e),   e ~ N(0, I_p)                        (draws),
    E[w] = diag(s) V E[z],   Cov[w] = diag(s) (I - V (I_r - Cov[z]) V') diag(s)   (a Gaussian q),

the second a :class:`~bayes_maxmargin.models.linear.posterior.LowRankPosterior`. NUTS explores r
dimensions instead of p, and natural-gradient SVI (Wenzel et al. 2017, eq. 14) keeps an r x r state:
its updates in z are those in u written in the basis V, since every precision it visits is I_p plus
a combination of the outer products of the rows of Phi diag(s).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bayes_maxmargin.models.linear.posterior import LowRankPosterior

__all__ = ["RowSpace", "row_space"]

#: Singular values below this fraction of the largest are dropped (directions the data do not inform).
RANK_RTOL = 1e-10


class RowSpace(NamedTuple):
    """The whitened design Phi diag(s) = U D V' in its row space.

    Attributes
    ----------
    scores : ndarray, shape (n, r)
        Z = U D, the design of the r-dimensional model (prior N(0, I_r)).
    basis : ndarray, shape (r, p)
        V', orthonormal rows spanning the row space of Phi diag(s).
    scale : ndarray, shape (p,)
        The prior standard deviations s.
    """

    scores: np.ndarray
    basis: np.ndarray
    scale: np.ndarray

    def lift_draws(self, z: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Draws of w from draws of z (..., r) and standard normal ``noise`` (..., p):
        diag(s) (V z + (I - V V') e)."""
        V = self.basis
        return (z @ V + noise - (noise @ V.T) @ V) * self.scale

    def log_prior_gap(self, z: np.ndarray, w: np.ndarray) -> np.ndarray:
        """log N(w; 0, diag(s)^2) - log N(z; 0, I_r) over the last axis: what the log joint of the
        r-dimensional model lacks for the log joint of the model in w."""
        def log_normal(x, var):
            return -0.5 * np.sum(x**2 / var + np.log(2.0 * np.pi * var), axis=-1)

        return log_normal(w, self.scale**2) - log_normal(z, np.ones(z.shape[-1]))

    def lift_gaussian(self, mean: np.ndarray, cov: np.ndarray) -> LowRankPosterior:
        """The Gaussian posterior of w from z ~ N(mean, cov): mean diag(s) V mean, covariance
        diag(s)^2 - H'H with H = (I_r - cov)^(1/2) V' diag(s)."""
        values, vectors = np.linalg.eigh(np.eye(cov.shape[0]) - cov)
        half = (np.sqrt(np.clip(values, 0.0, None))[:, None] * vectors.T) @ (self.basis * self.scale)
        return LowRankPosterior((mean @ self.basis) * self.scale, self.scale**2, half)


def row_space(design: np.ndarray, scale: np.ndarray) -> RowSpace:
    """The row space of ``design`` (n, p) whitened by the prior standard deviations ``scale`` (p,).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(3, 8))
    >>> rs = row_space(X, np.full(8, 2.0))
    >>> rs.scores.shape, rs.basis.shape
    ((3, 3), (3, 8))
    >>> bool(np.allclose(rs.scores @ rs.basis, 2.0 * X))
    True
    """
    design = np.asarray(design, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    U, D, Vt = np.linalg.svd(design * scale, full_matrices=False)
    r = int(np.sum(D > RANK_RTOL * D.max())) if D.size and D.max() > 0 else 0
    return RowSpace(U[:, :r] * D[:r], Vt[:r], scale)
