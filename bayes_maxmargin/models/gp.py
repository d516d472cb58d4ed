"""The nonlinear (Gaussian-process) Bayesian SVM of Henao et al. (2014), at fixed kernel parameters.

    f ~ N(0, K),  K_ij = k(x_i, x_j; theta)                             (Henao et al. 2014, eq. 6),
    gamma fixed, or gamma ~ Ga(a0, b0),
    p(y_n | f_n) proportional to exp(-2 gamma max(1 - y_n f_n, 0))   (gamma0 = 0, eq. 3),
    or the skewed Laplace sLa(1 - y_n f_n | gamma, gamma0)           (gamma0 > 0, eq. 4-5),
    lambda_n ~ Exp(gamma0) in the augmented form                       (eq. 5-6).

The kernel parameters theta are fixed here; the latent function f at the training inputs is the
sample site ``"f"`` with prior covariance ``K + jitter I`` (:func:`prior_covariance`).

Two forms of the same program, as for :func:`~bayes_maxmargin.models.linear.linear_bsvm`:

* marginal (``augmented=False``): lambda integrated out, the pseudo-likelihood entered with
  ``numpyro.factor``; NUTS on this form is the reference posterior;
* augmented (``augmented=True``): lambda_n an explicit sample site with a flat improper prior
  (gamma0 = 0) or Exp(gamma0); the joint that the conjugate Gibbs kernel of eq. (7) targets
  (:mod:`bayes_maxmargin.inference.gp_gibbs`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax import Array
from jax.typing import ArrayLike

from .common import max_margin_likelihood
from ..kernels import (
    ARDParams,
    KernelFn,
    LinearParams,
    PolyParams,
    SEParams,
    ard_se,
    get_kernel,
    linear,
    polynomial,
    se,
)

__all__ = ["GPHyper", "default_kernel_params", "gp_bsvm", "prior_covariance"]


class GPHyper(NamedTuple):
    """Hyperparameters of the GP model, as arrays (changing them never recompiles a kernel).

    Attributes
    ----------
    gamma : Array
        Hinge scale; the fixed value, or the initial value when gamma has a Gamma prior.
    a0, b0 : Array
        Shape and rate of the Gamma prior on gamma (unused when gamma is fixed), eq. (6).
    gamma0 : Array
        Rate of the exponential prior on lambda (0: the hinge of eq. 3), eq. (5).
    """

    gamma: Array
    a0: Array
    b0: Array
    gamma0: Array


def default_kernel_params(kernel: str | KernelFn, n_features: int) -> Any:
    """Default parameters of a kernel: unit lengthscale(s) and amplitude, degree 2, unit variance."""
    fn = get_kernel(kernel)
    if fn is se:
        return SEParams()
    if fn is ard_se:
        return ARDParams(jnp.ones((n_features,)))
    if fn is polynomial:
        return PolyParams()
    if fn is linear:
        return LinearParams()
    raise ValueError("kernel_params must be given for a user-supplied kernel function")


def prior_covariance(
    X: ArrayLike, kernel: str | KernelFn = "rbf", kernel_params: Any = None, jitter: float = 1e-6
) -> Array:
    """Prior covariance ``K + jitter I`` of f at the inputs ``X`` (Henao et al. 2014, eq. 6).

    Parameters
    ----------
    X : ArrayLike, shape (n, d)
        Inputs.
    kernel : str or callable
        A name in :data:`~bayes_maxmargin.kernels.KERNELS` or a function ``k(params, X1, X2)``.
    kernel_params : NamedTuple, optional
        The kernel's parameters theta (fixed); :func:`default_kernel_params` when omitted.
    jitter : float
        Absolute diagonal jitter that keeps K numerically positive definite.

    Returns
    -------
    Array, shape (n, n)
    """
    X = jnp.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    if kernel_params is None:
        kernel_params = default_kernel_params(kernel, X.shape[1])
    K = get_kernel(kernel)(kernel_params, X, X)
    return K + jitter * jnp.eye(X.shape[0], dtype=K.dtype)


def gp_bsvm(
    X: Array,
    y: Array | None = None,
    *,
    kernel: str | KernelFn = "rbf",
    kernel_params: Any = None,
    gamma: float = 1.0,
    gamma_prior: tuple[float, float] | None = None,
    gamma0: float = 0.1,
    jitter: float = 1e-6,
    augmented: bool = False,
) -> Array:
    """NumPyro program of the GP Bayesian SVM at fixed kernel parameters (Henao et al. 2014, eq. 6).

    Parameters
    ----------
    X : Array, shape (n, d)
        Training inputs.
    y : Array, shape (n,), optional
        Labels coded +-1. Without labels the program returns the prior draw of f (the
        pseudo-likelihood generates no labels).
    kernel : str or callable
        Covariance function (``"rbf"``, ``"ard"``, ``"poly"``, ``"linear"`` or a callable).
    kernel_params : NamedTuple, optional
        Fixed kernel parameters theta; :func:`default_kernel_params` when omitted.
    gamma : float
        Fixed hinge scale (ignored when ``gamma_prior`` is given).
    gamma_prior : (a0, b0), optional
        Shape and rate of a Gamma prior on gamma (eq. 6).
    gamma0 : float
        Rate of lambda's exponential prior (eq. 5); 0 is Polson & Scott's hinge (flat prior on
        lambda).
    jitter : float
        Diagonal jitter of the prior covariance, ``f ~ N(0, K + jitter I)``.
    augmented : bool
        If True, lambda is an explicit sample site ``"lam"`` (the joint of the Gibbs kernel, eq. 7).

    Returns
    -------
    Array
        The latent function f at X.
    """
    X = jnp.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    n = X.shape[0]
    cov = prior_covariance(X, kernel, kernel_params, jitter)
    f = numpyro.sample("f", dist.MultivariateNormal(jnp.zeros(n, cov.dtype), covariance_matrix=cov))
    if gamma_prior is not None:
        gamma = numpyro.sample("gamma", dist.Gamma(gamma_prior[0], gamma_prior[1]))
    if y is None:
        return f
    max_margin_likelihood(1.0 - y * f, gamma, gamma0, augmented)
    return f
