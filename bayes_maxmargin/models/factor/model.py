"""Discriminative factor models of Henao et al. (2014), Sec. 5.

    x_n = A w_n + eps_n,   eps_n ~ N(0, psi^-1 I)                       (Sec. 5, factor model)
    a_k ~ N(0, Phi_k),     Phi_k = diag(phi_1k, ..., phi_dk),  phi_ik ~ Exp(nu / 2)
    w_n ~ N(0, I_K),       psi ~ Ga(a_psi, b_psi)
    classifier on the factor scores, either

    * linear:  f_n = beta' w_n + b,  beta ~ N(0, G), G = diag(g_k), g_k = 1 or g_k ~ Exp(rho / 2),
               b ~ N(0, intercept_scale^2);
    * GP:      f ~ N(0, K(W)),  K_ij = k(w_i, w_j; theta)  (SE or ARD SE; eq. 6 with W for X),
               theta fixed or log theta_j ~ N(loc_j, scale_j^2) (sampled as in Sec. 3),

    and the max-margin pseudo-likelihood of u_n = 1 - y_n f_n (eq. 3-5), lambda_n ~ Exp(gamma0)
    in the augmented form, gamma fixed or gamma ~ Ga(a0, b0); or, with ``link="probit"``, the
    probit likelihood y_n ~ Bernoulli(Phi(f_n)) of GP classification (Sec. 6, "a joint nonlinear
    model with a probit link").

Shrinkage parametrisation. With phi_ik ~ Exp(rate nu / 2) the marginal of a_ik is the Laplace
density (sqrt(nu) / 2) exp(-sqrt(nu) ``|a_ik|``) (Andrews & Mallows 1974), and the conditional of
1 / phi_ik is IG(sqrt(nu / a_ik^2), nu) -- exactly the update of the supplement, Sec. 1. The paper
writes the prior as "Exp(nu)"; the rate nu / 2 is the one for which its stated conditional holds.
The same holds for g_k with rho in place of nu.

Forms of the program (as for the other models):

* ``augmented=False``: lambda integrated out (``numpyro.factor`` of the hinge / skewed Laplace) and,
  with ``marginal_phi=True``, phi integrated out too (``A`` Laplace). NUTS on this form is the
  reference posterior of the tests;
* ``augmented=True``: lambda (``"lam"``) and phi (``"phi"``) explicit sites: the joint that the
  conjugate Gibbs kernel of :mod:`bayes_maxmargin.models.factor.gibbs` targets.

``y=None`` gives the plain factor model (the first stage of the two-step variants FM+L / FM+N).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax import Array
from jax.scipy.linalg import cho_solve
from jax.scipy.special import log_ndtr

from bayes_maxmargin.core.kernels import KernelFn, get_kernel
from bayes_maxmargin.models.common import max_margin_likelihood

__all__ = ["FactorData", "FactorHyper", "factor_bsvm", "probit_pseudo_labels", "score_conditional"]


class FactorHyper(NamedTuple):
    """Hyperparameters of the discriminative factor model, as arrays (no recompilation on change).

    Attributes
    ----------
    nu : Array
        Laplace rate of the loadings (phi_ik ~ Exp(nu / 2)).
    a_psi, b_psi : Array
        Shape and rate of the Gamma prior on the noise precision psi.
    gamma, a0, b0, gamma0 : Array
        Hinge scale (fixed value or initial value), its Gamma prior, and the rate of lambda's
        exponential prior (eq. 4-6).
    rho : Array
        Rate of the factor-score selection prior g_k ~ Exp(rho / 2) (linear classifier).
    intercept_prec : Array
        Prior precision of the linear classifier's intercept.
    """

    nu: Array
    a_psi: Array
    b_psi: Array
    gamma: Array
    a0: Array
    b0: Array
    gamma0: Array
    rho: Array
    intercept_prec: Array


def score_conditional(X: Array, A: Array, psi: Array) -> tuple[Array, Array]:
    """p(w_n | x_n, A, psi) = N(S_N psi A' x_n, S_N), S_N^-1 = psi A'A + I (Sec. 5, eq. 14).

    The conditional of the factor scores given the loadings and the data alone (the label part
    left out). Returns the means (n, K) and the lower Cholesky factor of S_N^-1 (K, K).
    """
    K = A.shape[1]
    prec = psi * (A.T @ A) + jnp.eye(K, dtype=A.dtype)
    chol = jnp.linalg.cholesky(prec)
    rhs = psi * (X @ A)  # (n, K): rows psi A' x_n
    return cho_solve((chol, True), rhs.T).T, chol


def factor_bsvm(
    X: Array,
    y: Array | None = None,
    *,
    n_factors: int,
    classifier: str = "linear",
    nu: float = 1.0,
    psi_prior: tuple[float, float] = (1.0, 1.0),
    gamma: float = 1.0,
    gamma_prior: tuple[float, float] | None = None,
    gamma0: float = 0.0,
    rho: float | None = None,
    intercept_scale: float | None = 10.0,
    kernel: str | KernelFn = "rbf",
    kernel_params: Any = None,
    jitter: float = 1e-6,
    augmented: bool = False,
    marginal_phi: bool = False,
    noncentered: bool = True,
    kernel_prior: Any = None,
    link: str = "hinge",
) -> Array | None:
    """NumPyro program of the discriminative factor model (Henao et al. 2014, Sec. 5).

    Parameters
    ----------
    X : Array, shape (n, d)
        Data (centred).
    y : Array, shape (n,), optional
        Labels coded +-1; None for the factor model alone.
    n_factors : int
        K, the number of factors.
    classifier : {"linear", "gp"}
        Linear SVM on the scores (``"beta"``, ``"intercept"``) or GP SVM (``"f"``, kernel on W).
    nu : float
        Laplace rate of the loadings.
    psi_prior : (a_psi, b_psi)
        Gamma prior of the noise precision.
    gamma, gamma_prior, gamma0 : see :func:`~bayes_maxmargin.models.gp.model.gp_bsvm`.
    rho : float, optional
        If given, g_k ~ Exp(rho / 2) (factor-score selection, linear classifier); else G = I.
    intercept_scale : float or None
        Prior sd of the linear classifier's intercept; None for no intercept.
    kernel, kernel_params, jitter : GP classifier's covariance on the scores (theta fixed unless
        ``kernel_prior`` is given).
    augmented : bool
        Explicit ``"lam"`` and ``"phi"`` sites (the Gibbs joint).
    marginal_phi : bool
        Integrate phi out (``A`` Laplace; ignored when ``augmented``).
    noncentered : bool
        GP classifier: f = L z with ``"z" ~ N(0, I)`` (``"f"`` deterministic), NUTS-friendly.
    link : {"hinge", "probit"}
        Likelihood of the labels given f: the max-margin pseudo-likelihood (``gamma``, ``gamma_prior``,
        ``gamma0`` and ``augmented``'s ``"lam"`` apply), or the probit link of GP classification,
        y_n ~ Bernoulli(Phi(f_n)) with y_n = +1 for success, written as the factor log Phi(y_n f_n)
        (the same log-likelihood, finite for any f). The probit augmentation z_n ~ N(f_n, 1)
        truncated to the sign of y_n (Albert & Chib 1993) integrates out to it exactly; the Gibbs
        kernel draws it, the program leaves it out.
    kernel_prior : KernelPrior, optional
        GP classifier: every field the prior covers is a sample site of its name (e.g.
        ``"lengthscale"``) with log theta_j ~ N(loc_j, scale_j^2)
        (:func:`~bayes_maxmargin.models.gp.model.sample_kernel_params`), K(W) built from it: the
        posterior of the Gibbs sampler with theta sampled.

    Returns
    -------
    Array or None
        The latent classifier function f at the training scores (None without labels).
    """
    n, d = X.shape
    K = n_factors
    if augmented or not marginal_phi:
        phi = numpyro.sample("phi", dist.Exponential(0.5 * nu).expand([d, K]).to_event(2))
        A = numpyro.sample("A", dist.Normal(0.0, jnp.sqrt(phi)).to_event(2))
    else:
        A = numpyro.sample("A", dist.Laplace(0.0, 1.0 / jnp.sqrt(nu)).expand([d, K]).to_event(2))
    psi = numpyro.sample("psi", dist.Gamma(psi_prior[0], psi_prior[1]))
    W = numpyro.sample("W", dist.Normal(0.0, 1.0).expand([n, K]).to_event(2))
    numpyro.sample("X", dist.Normal(W @ A.T, 1.0 / jnp.sqrt(psi)).to_event(2), obs=X)
    if y is None:
        return None
    if classifier == "linear":
        if rho is not None:
            g = numpyro.sample("g", dist.Exponential(0.5 * rho).expand([K]).to_event(1))
        else:
            g = jnp.ones(K, X.dtype)
        beta = numpyro.sample("beta", dist.Normal(0.0, jnp.sqrt(g)).to_event(1))
        b = 0.0
        if intercept_scale is not None:
            b = numpyro.sample("intercept", dist.Normal(0.0, intercept_scale))
        f = numpyro.deterministic("f", W @ beta + b)
    elif classifier == "gp":
        from bayes_maxmargin.models.gp.model import default_kernel_params, sample_kernel_params

        params = default_kernel_params(kernel, K) if kernel_params is None else kernel_params
        if kernel_prior is not None:
            params = sample_kernel_params(kernel_prior, params)
        cov = get_kernel(kernel)(params, W, W) + jitter * jnp.eye(n, dtype=W.dtype)
        if noncentered:
            z = numpyro.sample("z", dist.Normal(jnp.zeros(n, cov.dtype), 1.0).to_event(1))
            f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ z)
        else:
            f = numpyro.sample("f", dist.MultivariateNormal(jnp.zeros(n, cov.dtype), covariance_matrix=cov))
    else:
        raise ValueError(f"classifier must be 'linear' or 'gp', got {classifier!r}")
    if link == "probit":
        numpyro.factor("probit", jnp.sum(log_ndtr(y * f)))
        return f
    if link != "hinge":
        raise ValueError(f"link must be 'hinge' or 'probit', got {link!r}")
    if gamma_prior is not None:
        gamma = numpyro.sample("gamma", dist.Gamma(gamma_prior[0], gamma_prior[1]))
    max_margin_likelihood(1.0 - y * f, gamma, gamma0, augmented)
    return f


def probit_pseudo_labels(z: Array) -> Array:
    """Labels under which the max-margin samplers' Gaussian step is the probit one: z / 2.

    Given lambda and gamma, the augmented max-margin factor of point n is the Gaussian observation
    t_n = y_n (1 + lambda_n) = f_n + e_n, e_n ~ N(0, lambda_n / gamma) (Henao et al. 2014, eq. 7);
    given the Albert & Chib (1993) variable z_n, the probit one is z_n = f_n + e_n, e_n ~ N(0, 1):
    the same with lambda_n = 1, gamma = 1 and labels y_n = z_n / 2. Every conditional of the
    classifier and the scores given the augmentation is then the max-margin sampler's.
    """
    return 0.5 * z


class FactorData(NamedTuple):
    """Data of the factor samplers.

    Attributes
    ----------
    X : Array, shape (n, d)
        Centred data.
    y : Array, shape (n,)
        Labels coded +-1 (ignored by the ``"none"`` structure).
    theta : NamedTuple
        Kernel parameters of the GP classifier (fixed, or the initial values when ``prior`` is given;
        unused by the linear classifier).
    jitter : Array
        Diagonal jitter of K(W).
    prior : KernelPrior or None
        Log-normal prior of the sampled kernel fields (:func:`~bayes_maxmargin.models.gp.model.kernel_prior`);
        None: theta fixed.
    slice_width : Array or None
        Bracket width of the slice updates of log theta (scalar or one per coordinate of
        :func:`~bayes_maxmargin.core.parameters.flatten`); None: 1.
    """

    X: Array
    y: Array
    theta: Any
    jitter: Array
    prior: Any = None
    slice_width: Any = None
