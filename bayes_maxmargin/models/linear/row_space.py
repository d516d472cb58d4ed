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

the second a :class:`~bayes_maxmargin.models.linear.posterior.LowRankPosterior`. Natural-gradient
SVI (Wenzel et al. 2017, eq. 14) keeps an r x r state: its updates in z are those in u written in the
basis V, since every precision it visits is I_p plus a combination of the outer products of the rows
of Phi diag(s).

NUTS samples the r-dimensional model, in margin coordinates (:func:`margin_bsvm`) where they apply.
With theta = (z, b) (the intercept b when fitted) and A = [Z, 1] (n x k), f = A theta. The
posterior in theta is the prior cut by the hinge's walls y_n f_n = 1, whose slope (2 gamma times
the norm of the row A_n, ~140 for 5000 standardised features) can be far steeper than the prior is
wide: NUTS in theta then needs hundreds of leapfrog steps per draw. When A has full row rank n,
the linear map theta = B (f, w), with B = [A^+, N] and N an orthonormal basis of A's null space,
makes the margins y_n f_n coordinates of their own, and the elementwise bijection::

    y_n f_n = 1 + c sinh(v_n),     log abs(d f_n / d v_n) = log(c cosh v_n),

spreads each wall over v_n of order 1 while compressing the prior's wide side logarithmically; NUTS
on (v, w) takes tens of steps per draw. The change of variables is exact; the constant
log abs(det B) is left out of the program's density, and the Jacobian of v is recorded
(``log_jacobian``), so that the log joint of the model in theta is recovered at every draw. With
gamma sampled, the walls' slope moves with it (from a flat likelihood at gamma -> 0 to steep
walls), which fixed coordinates do not follow; z is sampled then, as with gentle walls
(:func:`margin_basis`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax import Array
from numpyro.distributions import constraints

from bayes_maxmargin.models.common import max_margin_likelihood
from bayes_maxmargin.models.linear.model import intercept_prior
from bayes_maxmargin.models.linear.posterior import LowRankPosterior

__all__ = ["RowSpace", "margin_basis", "margin_bsvm", "row_space"]

#: Singular values below this fraction of the largest are dropped (directions the data do not inform).
RANK_RTOL = 1e-10
#: c of the margin coordinates y f = 1 + c sinh(v), in units of the hinge's margin.
MARGIN_SCALE = 1.0
#: [Z, 1] serves as a change of coordinates when its smallest singular value is above this fraction of
#: its largest; otherwise NUTS samples z itself.
MARGIN_RTOL = 1e-8
#: Margin coordinates are used when the hinge's slope 2 gamma, times the prior standard deviation of f
#: (root mean square over the rows), is at least this; below it NUTS samples z itself.
MARGIN_MIN_STEEPNESS = 10.0


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

    def coordinates(self, w: np.ndarray) -> np.ndarray:
        """z = V' diag(s)^-1 w over the last axis: the coordinates of w (..., p) in the row space, the
        part of w the data inform."""
        return (w / self.scale) @ self.basis.T

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


def margin_basis(scores: np.ndarray, fit_intercept: bool, gamma: float) -> np.ndarray | None:
    """B (k x k) with theta = B (f, w) for A = [Z, 1] (``scores`` Z, the column of ones when
    ``fit_intercept``), or None where margin coordinates do not apply or do not pay: A (n x k)
    short of full row rank n, or gentle walls (2 ``gamma`` times the root mean square of the prior
    standard deviations of f, the norms of the rows Z_n, below :data:`MARGIN_MIN_STEEPNESS`).

    Examples
    --------
    >>> import numpy as np
    >>> Z = 10.0 * np.random.default_rng(0).normal(size=(3, 3))
    >>> B = margin_basis(Z, fit_intercept=True, gamma=1.0)
    >>> A = np.hstack([Z, np.ones((3, 1))])
    >>> bool(np.allclose(A @ B, np.hstack([np.eye(3), np.zeros((3, 1))])))  # f = A B (f, w)
    True
    >>> margin_basis(np.ones((3, 2)), fit_intercept=True, gamma=1.0) is None  # rank 2 < 3
    True
    >>> margin_basis(Z / 100.0, fit_intercept=True, gamma=1.0) is None  # gentle walls
    True
    """
    scores = np.asarray(scores)
    n = scores.shape[0]
    if n == 0 or 2.0 * gamma * np.sqrt(np.mean(np.sum(scores**2, axis=1))) < MARGIN_MIN_STEEPNESS:
        return None
    A = np.hstack([scores, np.ones((n, 1))]) if fit_intercept else scores
    if A.shape[1] < n:
        return None
    U, S, Vt = np.linalg.svd(A)
    if S.min() <= MARGIN_RTOL * S.max():
        return None
    return np.hstack([(Vt[:n].T / S) @ U.T, Vt[n:].T])


def margin_bsvm(
    basis: Array,
    y: Array,
    *,
    intercept_scale: float | None = 10.0,
    fit_intercept: bool = True,
    gamma: float = 1.0,
    gamma_prior: tuple[float, float] | None = None,
    gamma0: float = 0.0,
    margin_scale: float = MARGIN_SCALE,
) -> None:
    """NumPyro program of the r-dimensional linear BSVM (prior N(0, I_r) on z, design Z) in margin
    coordinates: latent ``v`` (n) and ``w`` (k - n, when k > n) with flat priors, and the density of
    the model in theta = (z, b) = B (f, w), y f = 1 + c sinh(v), times the Jacobian prod_n c cosh(v_n).

    Records ``beta`` (z), ``intercept`` (b, when fitted) and ``log_jacobian`` as deterministic sites;
    ``gamma`` is a sample site as in :func:`~bayes_maxmargin.models.linear.model.linear_bsvm`, whose
    other arguments it takes.

    Parameters
    ----------
    basis : Array, shape (k, k)
        B of :func:`margin_basis` (k = r + 1 with an intercept, else r).
    y : Array, shape (n,)
        Labels coded +-1.
    margin_scale : float
        c of the margin coordinates.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from numpyro.infer.util import log_density
    >>> B = margin_basis(10.0 * np.eye(2), fit_intercept=False, gamma=1.0)  # Z = 10 I: B = Z^-1
    >>> _, sites = log_density(margin_bsvm, (jnp.asarray(B), jnp.array([1.0, -1.0])), {"fit_intercept": False},
    ...                        {"v": jnp.zeros(2)})
    >>> [round(float(z), 6) for z in sites["beta"]["value"]]  # v = 0: margins 1, f = y, z = B f
    [0.1, -0.1]
    """
    n, k = y.shape[0], basis.shape[0]
    v = numpyro.sample("v", dist.ImproperUniform(constraints.real, (), (n,)))
    margin = 1.0 + margin_scale * jnp.sinh(v)
    coords = [y * margin]
    if k > n:
        coords.append(numpyro.sample("w", dist.ImproperUniform(constraints.real, (), (k - n,))))
    theta = basis @ jnp.concatenate(coords)
    r = k - int(fit_intercept)
    z = numpyro.deterministic("beta", theta[:r])
    numpyro.factor("beta_prior", jnp.sum(dist.Normal(0.0, 1.0).log_prob(z)))
    if fit_intercept:
        b = numpyro.deterministic("intercept", theta[r])
        numpyro.factor("intercept_prior", intercept_prior(intercept_scale).log_prob(b))
    if gamma_prior is not None:
        gamma = numpyro.sample("gamma", dist.Gamma(gamma_prior[0], gamma_prior[1]))
    log_jacobian = numpyro.deterministic(
        "log_jacobian", jnp.sum(jnp.log(margin_scale) + jnp.logaddexp(v, -v) - jnp.log(2.0)))
    numpyro.factor("margin_coordinates", log_jacobian)
    max_margin_likelihood(1.0 - margin, gamma, gamma0, False)
