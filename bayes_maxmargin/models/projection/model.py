"""Max-margin discriminant projection (Chen et al. 2015, "Max-Margin Discriminant Projection via
Data Augmentation", IEEE TKDE 27(7)): the NumPyro program of MMLDP / KMMDP.

For one binary problem with labels y_n in {-1, +1} and features x_n in R^P (MMLDP, Sec. 4.1) or the
kernel features h_n = K(V, x_n) in R^M between x_n and M basis vectors (KMMDP, Sec. 4.3, eq. 17):

    alpha_k ~ Ga(c0, d0),   a_k | alpha_k ~ N(0, alpha_k^-1 I_P),            k = 1..K     (eq. 5, 18)
    z_n | A ~ N(A' x_n, I_K)                                                              (eq. 5, 17)
    sigma ~ Ga(a0, b0),     [w; b] | sigma ~ N(0, sigma^-1 I_{K+1})                        (eq. 2)
    phi(y_n | z_n, w, b) = exp(-2 max(1 - y_n (w' z_n + b), 0))                           (eq. 3, 6)

Ga(shape, rate) throughout, sigma and alpha_k are precisions, as the paper's conditionals
(eq. 9 with sigma I_K, Sec. 4.4's Ga update of alpha_k) require; the paper's eq. (2) writes the
variance as sigma^-2, which its own updates do not use. The bias b is the paper's "w represents
the concatenation of w and b" (Sec. 3) and shares the prior precision sigma.

Without the latent representation (``latent_representation=False``, Sec. 3.2, eq. 11) the
classifier acts on the projection itself, f_n = w' A' x_n + b, with no z_n site: the model the paper
sets beside MMLDP to show why z_n is there (Fig. 1). Eq. (11) writes the normaliser of the
augmented factor as 1 / (sqrt(2 pi) lambda_n); it is (2 pi lambda_n)^-1/2, as in eq. (3), for the
integral over lambda_n to be exp(-2 max(1 - y_n f_n, 0)). Its Gibbs conditional of a_k is eq. (12);
integrating z_n out of the MMLDP joint instead gives eq. (13), whose denominators lambda_n + w_k^2 in
place of lambda_n are what z_n adds (see :mod:`bayes_maxmargin.models.projection.gibbs`).

Like the other programs of the library it has two forms: marginal (lambda integrated out, the
hinge entered with ``numpyro.factor``; NUTS on it is the reference posterior) and augmented (lambda
a sample site with a flat improper prior), the joint the Gibbs kernel of
:mod:`bayes_maxmargin.models.projection.gibbs` targets.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax import Array

from bayes_maxmargin.core.kernels import PolyParams, SEParams
from bayes_maxmargin.models.common import max_margin_likelihood

__all__ = ["ProjectionData", "ProjectionHyper", "kernel_features", "mmdp", "projection_data"]


class ProjectionHyper(NamedTuple):
    """Hyperparameters of MMLDP / KMMDP / ssKMMDP as arrays (changing them never recompiles).

    Attributes
    ----------
    a0, b0 : Array
        Shape and rate of the Gamma prior on the classifier precision sigma (paper: 1, 1).
    c0, d0 : Array
        Shape and rate of the Gamma prior on the projection precisions alpha_k (paper: 1, 1).
    e0, f0 : Array
        Beta prior of the basis-vector usage probabilities pi_l (ssKMMDP, eq. 21; paper: 1, 1).
    num_warmup : Array
        Iterations after which the kernel starts accumulating the posterior averages (eq. 23-24).
    dense_warmup : Array
        ssKMMDP: the sweeps before this iteration draw Theta from its slab-only conditional, eq. (20)
        (every theta_lk non-zero), a start for the spike-and-slab step of eq. (22), which is used
        from this iteration on. Part of the burn-in; 0 (default): eq. (22) from the first sweep.
    """

    a0: Array
    b0: Array
    c0: Array
    d0: Array
    e0: Array
    f0: Array
    num_warmup: Array
    dense_warmup: Array | float = 0.0


def mmdp(
    X: Array,
    y: Array | None = None,
    *,
    n_components: int = 2,
    a0: float = 1.0,
    b0: float = 1.0,
    c0: float = 1.0,
    d0: float = 1.0,
    augmented: bool = False,
    latent_representation: bool = True,
) -> Array:
    """NumPyro program of MMLDP (``X`` the data) or KMMDP (``X`` the kernel features K(X, V)).

    Parameters
    ----------
    X : Array, shape (n, p)
        Features x_n (MMLDP) or kernel features h_n (KMMDP).
    y : Array, shape (n,), optional
        Labels coded +-1; without labels the program returns the prior draw of f.
    n_components : int
        K, the dimension of the projected features.
    a0, b0, c0, d0 : float
        Gamma priors of sigma and alpha_k (shape, rate).
    augmented : bool
        If True, lambda is an explicit sample site (the joint of the Gibbs kernel).
    latent_representation : bool
        True (MMLDP, eq. 5-6): the sample site Z, z_n ~ N(A' x_n, I_K), feeds the classifier.
        False (Sec. 3.2, eq. 11): no Z site; f_n = w' A' x_n + b.

    Returns
    -------
    Array
        The classifier output f_n = w' z_n + b (w' A' x_n + b without the latent representation).
    """
    n, p = X.shape
    K = n_components
    alpha = numpyro.sample("alpha", dist.Gamma(c0, d0).expand([K]).to_event(1))
    A = numpyro.sample("A", dist.Normal(0.0, 1.0 / jnp.sqrt(alpha)).expand([p, K]).to_event(2))
    sigma = numpyro.sample("sigma", dist.Gamma(a0, b0))
    w = numpyro.sample("w", dist.Normal(0.0, 1.0 / jnp.sqrt(sigma)).expand([K]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0 / jnp.sqrt(sigma)))
    Z = numpyro.sample("Z", dist.Normal(X @ A, 1.0).to_event(2)) if latent_representation else X @ A
    f = Z @ w + b
    if y is None:
        return f
    max_margin_likelihood(1.0 - y * f, 1.0, 0.0, augmented)
    return f


class ProjectionData(NamedTuple):
    """Data of the sampler (shared by the L binary problems).

    Attributes
    ----------
    features : Array, shape (n, D)
        F: the data (MMLDP) or the kernel features K(X, V) (KMMDP).
    V : Array, shape (D, r)
        Right singular vectors of F (r = min(n, D)).
    s2 : Array, shape (r,)
        Squared singular values of F: F'F = V diag(s2) V'.
    gram : Array, shape (D, D) or None
        F'F (spike-and-slab step only).
    Y : Array, shape (L, n)
        Labels of the L binary problems, coded +-1.
    """

    features: Array
    V: Array
    s2: Array
    gram: Array | None
    Y: Array


def projection_data(features: Array, Y: Array, spike_slab: bool) -> ProjectionData:
    """Precompute the thin SVD of F (and F'F for the spike and slab) once per fit (in NumPy, at the
    dtype of ``features``: no XLA compilation per shape)."""
    F = np.asarray(features)
    _, s, Vt = np.linalg.svd(F, full_matrices=False)
    gram = jnp.asarray(F.T @ F) if spike_slab else None
    return ProjectionData(jnp.asarray(F), jnp.asarray(Vt.T), jnp.asarray(s**2), gram, jnp.asarray(Y, F.dtype))


def kernel_features(X: np.ndarray, basis: np.ndarray, kernel: str, params: SEParams | PolyParams) -> np.ndarray:
    """K(X, V) between the rows of X and the basis vectors V (Chen et al. 2015, eq. 16-17), in NumPy.

    ``"rbf"``: a exp(-||x - v||^2 / theta^2), the paper's Gaussian kernel exp(-gamma ||x - v||^2)
    (Sec. 5.2) with theta = gamma^-1/2 and a = 1 (the squared distance floored at 0); ``"poly"``:
    (x' v + c)^d (Sec. 5.3, c = 1). The same functions as :func:`bayes_maxmargin.core.kernels.se` and
    :func:`bayes_maxmargin.core.kernels.polynomial`, computed once per fit without compiling a program
    per data shape.
    """
    cross = X @ basis.T
    if kernel == "rbf":
        d2 = np.sum(X**2, axis=1)[:, None] + np.sum(basis**2, axis=1)[None, :] - 2.0 * cross
        return params.amplitude * np.exp(-np.maximum(d2, 0.0) / params.lengthscale**2)
    return (cross + params.offset) ** int(params.degree)
