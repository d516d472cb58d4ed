"""The extended Bayesian SVMs of Luts & Ormerod (2014), as NumPyro programs.

All share Polson & Scott's hinge with unit scale, p(y_i | f_i) = exp(-2 (1 - y_i f_i)_+), written
as the mixture over a_i > 0 of N(1 + a_i - y_i f_i | 0, a_i) (Luts & Ormerod 2014, Sec. 2.3), so
``gamma = 1`` and ``gamma0 = 0`` in the notation of :mod:`bayes_maxmargin.core.augmentation`
(``a_i`` is that module's ``lambda_i``).

* **penalty / random effects** (Sec. 3.1, eq. 5): f = X beta + Z u with beta ~ N(0, sigma_beta^2 I),
  u | sigma_u^2 ~ N(0, sigma_u^2 I), sigma_u^2 ~ IG(A_u, B_u). Example 1 (penalty parameter
  inference): X = 1, Z = the predictors, sigma_u^2 = 1 / (4 alpha). Example 2 (random intercept):
  X = [1, predictors], Z = group indicators. :func:`mixed_bsvm`.
* **Laplace-zero** (Sec. 3.2): u_k = gamma_k v_k, v_k | b_k, sigma_u^2 ~ N(0, sigma_u^2 / b_k),
  b_k ~ IG(1, 1/2) (so v_k | sigma_u ~ Laplace(0, sigma_u)), gamma_k ~ Bernoulli(rho).
  :func:`laplace_zero_bsvm`.
* **missing predictors** (Sec. 3.3): f_i = beta + d_i' u with the imputation model
  d_i | mu, Sigma ~ N(mu, Sigma), mu ~ N(0, sigma_mu^2 I), Sigma ~ IW(Psi, nu); missing entries
  of D are latent (MCAR or MAR: the mechanism is ignorable). :func:`missing_bsvm`.

Each program has the house's two forms: marginal (the a_i integrated out, the hinge entered with
``numpyro.factor``; NUTS on it is the reference posterior) and augmented (``a_i`` an explicit site
"lam" with a flat prior; the joint the Gibbs kernels of Appendices A-C target).

IG(A, B) is the inverse gamma with density B^A / Gamma(A) x^(-A-1) exp(-B / x) (the paper's
Notation), NumPyro's ``InverseGamma(A, B)``.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.linalg
from jax import Array
from numpyro.distributions import constraints

from bayes_maxmargin.core.augmentation import log_pseudo_likelihood
from bayes_maxmargin.models.common import max_margin_likelihood

__all__ = ["ImputationHyper", "LutsHyper", "MissingData", "MixedData", "laplace_zero_bsvm", "missing_bsvm",
           "mixed_bsvm"]


class LutsHyper(NamedTuple):
    """Hyperparameters of Sec. 3.1-3.3 (arrays: new values never recompile a kernel).

    Attributes
    ----------
    sigma_beta2 : Array
        Prior variance sigma_beta^2 of the unpenalised coefficients beta (paper: 1e8); a scalar,
        or one variance per column of X (e.g. a wider prior on the intercept).
    A_u, B_u : Array
        Shape and scale of the IG prior on sigma_u^2 (paper: 0.01, 0.01).
    rho : Array
        Prior inclusion probability of the Laplace-zero prior (Sec. 3.2; paper: 0.01). Unused by
        the other models.
    adapt_steps : Array
        Warm-up sweeps over which the Gibbs samplers' directional moves adapt their basis
        (:func:`~bayes_maxmargin.core.slice.adapt_directions`; unused without them).
    """

    sigma_beta2: Array
    A_u: Array
    B_u: Array
    rho: Array
    adapt_steps: Array = 0


class ImputationHyper(NamedTuple):
    """Hyperparameters of the imputation model of Sec. 3.3 (paper: 1e8, 0.01 I, 3).

    Attributes
    ----------
    sigma_mu2 : Array
        Prior variance of mu.
    Psi : Array, shape (d, d)
        Scale matrix of the inverse Wishart prior on Sigma.
    nu : Array
        Degrees of freedom of that prior (nu > d - 1).
    """

    sigma_mu2: Array
    Psi: Array
    nu: Array


def _hinge(f: Array, y: Array, augmented: bool) -> None:
    max_margin_likelihood(1.0 - y * f, 1.0, 0.0, augmented)


def _sigma_u2(A_u: float, B_u: float) -> Array:
    return numpyro.sample("sigma_u2", dist.InverseGamma(A_u, B_u))


def mixed_bsvm(
    X: Array,
    Z: Array,
    y: Array | None = None,
    *,
    sigma_beta2: float = 1e8,
    A_u: float = 0.01,
    B_u: float = 0.01,
    augmented: bool = False,
    noncentred: bool = False,
) -> Array:
    """Penalty-parameter / random-effect Bayesian SVM of Luts & Ormerod (2014), Sec. 3.1, eq. (5).

    f = X beta + Z u, beta ~ N(0, sigma_beta2 I), u | sigma_u2 ~ N(0, sigma_u2 I),
    sigma_u2 ~ IG(A_u, B_u), and the hinge exp(-2 (1 - y f)_+).

    Parameters
    ----------
    X : Array, shape (n, p)
        Unpenalised (fixed-effect) design, e.g. a column of ones.
    Z : Array, shape (n, m)
        Penalised predictors (Example 1) or group indicators (Example 2).
    y : Array, shape (n,), optional
        Labels coded +-1; without them the program returns the prior draw of f.
    sigma_beta2, A_u, B_u : float
        Hyperparameters (:class:`LutsHyper`).
    augmented : bool
        If True the a_i are the explicit site "lam" (flat prior): the joint of Appendix A.
    noncentred : bool
        Sample u = sqrt(sigma_u2) u_raw with u_raw ~ N(0, I) (the same posterior; NUTS mixes better
        on the funnel of a random-effect variance). The site "u" is then deterministic.
    """
    p, m = X.shape[1], Z.shape[1]
    beta = numpyro.sample("beta", dist.Normal(0.0, jnp.sqrt(sigma_beta2)).expand([p]).to_event(1))
    s2 = _sigma_u2(A_u, B_u)
    if noncentred:
        u_raw = numpyro.sample("u_raw", dist.Normal(0.0, 1.0).expand([m]).to_event(1))
        u = numpyro.deterministic("u", jnp.sqrt(s2) * u_raw)
    else:
        u = numpyro.sample("u", dist.Normal(0.0, jnp.sqrt(s2)).expand([m]).to_event(1))
    f = X @ beta + Z @ u
    if y is not None:
        _hinge(f, y, augmented)
    return f


def _all_inclusions(m: int) -> np.ndarray:
    """The 2^m inclusion vectors gamma in {0, 1}^m, shape (2^m, m)."""
    return np.array(list(itertools.product([0.0, 1.0], repeat=m)))


def laplace_zero_bsvm(
    X: Array,
    Z: Array,
    y: Array | None = None,
    *,
    rho: float = 0.01,
    sigma_beta2: float = 1e8,
    A_u: float = 0.01,
    B_u: float = 0.01,
    augmented: bool = False,
) -> Array:
    """Laplace-zero Bayesian SVM of Luts & Ormerod (2014), Sec. 3.2.

    f = X beta + Z diag(gamma) v, v_k | b_k, sigma_u2 ~ N(0, sigma_u2 / b_k), b_k ~ IG(1, 1/2),
    gamma_k ~ Bernoulli(rho), beta ~ N(0, sigma_beta2 I), sigma_u2 ~ IG(A_u, B_u).

    Marginal form (the NUTS reference): b integrated out (v_k | sigma_u ~ Laplace(0, sigma_u)), the
    a_i integrated out, and gamma summed out exactly over its 2^m values inside one factor, so the
    program is continuous; only for small m (2^m evaluations of the hinge). The posterior
    inclusion probability P(gamma_k = 1 | y) is the posterior mean of the deterministic site
    "inclusion" (the conditional P(gamma_k = 1 | beta, v, sigma_u2, y), Rao-Blackwellised).

    Augmented form: b ("b"), gamma ("gamma", a discrete site) and a ("lam") explicit, the joint of
    Appendix B (for ``numpyro.infer.util.log_density`` at given values, not for NUTS).
    """
    p, m = X.shape[1], Z.shape[1]
    beta = numpyro.sample("beta", dist.Normal(0.0, jnp.sqrt(sigma_beta2)).expand([p]).to_event(1))
    s2 = _sigma_u2(A_u, B_u)
    if augmented:
        b = numpyro.sample("b", dist.InverseGamma(1.0, 0.5).expand([m]).to_event(1))
        v = numpyro.sample("v", dist.Normal(0.0, jnp.sqrt(s2 / b)).to_event(1))
        gamma = numpyro.sample("gamma", dist.Bernoulli(probs=rho).expand([m]).to_event(1))
        f = X @ beta + Z @ (gamma * v)
        if y is not None:
            _hinge(f, y, True)
        return f
    v = numpyro.sample("v", dist.Laplace(0.0, jnp.sqrt(s2)).expand([m]).to_event(1))
    fixed = X @ beta
    if y is None:
        return fixed
    G = jnp.asarray(_all_inclusions(m), fixed.dtype)  # (2^m, m)
    f = fixed + (Z @ (G * v).T).T  # (2^m, n)
    log_prior_g = G @ jnp.full((m,), jnp.log(rho)) + (1.0 - G) @ jnp.full((m,), jnp.log1p(-rho))
    log_terms = log_prior_g + jnp.sum(log_pseudo_likelihood(1.0 - y * f, 1.0, 0.0), axis=-1)
    numpyro.factor("pseudo_likelihood", jax.nn.logsumexp(log_terms))
    weights = jax.nn.softmax(log_terms)
    numpyro.deterministic("inclusion", weights @ G)
    return fixed


def missing_bsvm(
    D: Array,
    observed: Array,
    y: Array | None = None,
    *,
    sigma_beta2: float = 1e8,
    A_u: float = 0.01,
    B_u: float = 0.01,
    sigma_mu2: float = 1e8,
    Psi: Array | None = None,
    nu: float = 3.0,
    augmented: bool = False,
) -> Array:
    """Bayesian SVM with missing predictors of Luts & Ormerod (2014), Sec. 3.3.

    f_i = beta + d_i' u, beta ~ N(0, sigma_beta2), u | sigma_u2 ~ N(0, sigma_u2 I_d),
    sigma_u2 ~ IG(A_u, B_u); d_i ~ N(mu, Sigma), mu ~ N(0, sigma_mu2 I), Sigma ~ IW(Psi, nu).
    The missing entries of D are the site "D_mis" (flat base measure; their density is the
    imputation model's, added with the observed rows' in the factor "imputation").

    Parameters
    ----------
    D : Array, shape (n, d)
        Predictors; the entries where ``observed`` is False are ignored (any finite value).
    observed : ndarray of bool, shape (n, d)
        Which entries of D are observed (concrete: it fixes the number of latent entries).
    """
    observed = np.asarray(observed, bool)
    n, d = D.shape
    Psi = jnp.eye(d) * 0.01 if Psi is None else Psi
    mu = numpyro.sample("mu", dist.Normal(0.0, jnp.sqrt(sigma_mu2)).expand([d]).to_event(1))
    Sigma = numpyro.sample("Sigma", dist.InverseWishart(nu, scale_matrix=Psi))
    rows, cols = np.nonzero(~observed)
    if rows.size:
        d_mis = numpyro.sample("D_mis", dist.ImproperUniform(constraints.real, (), (rows.size,)))
        D = jnp.asarray(D).at[rows, cols].set(d_mis)
    numpyro.factor("imputation", jnp.sum(dist.MultivariateNormal(mu, Sigma).log_prob(D)))
    beta = numpyro.sample("beta", dist.Normal(0.0, jnp.sqrt(sigma_beta2)))
    s2 = _sigma_u2(A_u, B_u)
    u = numpyro.sample("u", dist.Normal(0.0, jnp.sqrt(s2)).expand([d]).to_event(1))
    f = beta + D @ u
    if y is not None:
        _hinge(f, y, augmented)
    return f


# ============================================================================ data and results
class MixedData(NamedTuple):
    """Design of model (5): C = [X, Z] and labels.

    Attributes
    ----------
    X : Array, shape (n, p)
        Unpenalised design (beta: the intercept, fixed effects).
    Z : Array, shape (n, m)
        Penalised predictors (Example 1) or random-effect indicators (Example 2) (u, or v of
        Sec. 3.2).
    y : Array, shape (n,)
        Labels coded +-1.
    """

    X: Array
    Z: Array
    y: Array


class MissingData(NamedTuple):
    """Data of Sec. 3.3: predictors with an observation mask, and labels.

    Attributes
    ----------
    D : Array, shape (n, d)
        Predictors; entries where ``observed`` is 0 are ignored (store any finite value).
    observed : Array, shape (n, d)
        1.0 where D is observed (r_ij = 1), 0.0 where it is missing.
    y : Array, shape (n,)
        Labels coded +-1.
    """

    D: Array
    observed: Array
    y: Array


def conditional_fill(X: np.ndarray, mean: np.ndarray, cov: np.ndarray, weight_moment: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Fill NaN entries of ``X`` by their conditional means under N(mean, cov) given each row's
    observed entries, and return per row tr(E[w w']_MM Cov(x_M | x_O)), the variance the missing
    entries add to f = w'x. Rows are handled per missingness pattern (one small solve each)."""
    X = np.array(X, dtype=np.float64)
    extra = np.zeros(X.shape[0])
    nan = np.isnan(X)
    patterns, inverse = np.unique(nan, axis=0, return_inverse=True)
    for k, miss in enumerate(patterns):
        if not miss.any():
            continue
        rows = np.flatnonzero(inverse.ravel() == k)
        obs = ~miss
        S_mo, S_mm = cov[np.ix_(miss, obs)], cov[np.ix_(miss, miss)]
        if obs.any():
            L = np.linalg.cholesky(cov[np.ix_(obs, obs)])
            A = scipy.linalg.cho_solve((L, True), S_mo.T).T  # S_MO S_OO^-1
            X[np.ix_(rows, np.flatnonzero(miss))] = mean[miss] + (X[np.ix_(rows, np.flatnonzero(obs))] - mean[obs]) @ A.T
            cond = S_mm - A @ S_mo.T
        else:
            X[np.ix_(rows, np.flatnonzero(miss))] = mean[miss]
            cond = S_mm
        extra[rows] = np.sum(weight_moment[np.ix_(miss, miss)] * cond)
    return X, extra
