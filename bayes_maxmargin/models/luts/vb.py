"""Mean-field variational Bayes for the Bayesian SVMs of Luts & Ormerod (2014), Algorithms 1-4.

Every algorithm is coordinate ascent on the lower bound log p(y; q) of eq. (4) under the product
restrictions of Sec. 2.3-3.3; each update is the optimal factor (3) given the others, so the bound
never decreases. The updates shared with the samplers come from :mod:`bayes_maxmargin.core.augmentation`:
q(theta) is the Gaussian conditional of the coefficients with the a_i^-1 replaced by
E_q[a_i^-1] (:func:`~bayes_maxmargin.core.augmentation.gaussian_conditional`), and
E_q[a_i^-1] = chi_i^(-1/2) (:func:`~bayes_maxmargin.core.augmentation.vb_inv_lambda`).

* Algorithm 1 (Sec. 2.3): fixed penalty, q(beta) q(a) -- :func:`vb_gaussian`;
* Algorithm 2 (Sec. 3.1): penalty parameter inference / random effects, q(beta, u) q(sigma_u^2) q(a)
  -- :func:`vb_penalty`;
* Algorithm 3 (Sec. 3.2): Laplace-zero variable selection, q(beta, v) q(sigma_u^2) q(a) q(b) q(gamma)
  -- :func:`vb_laplace_zero`;
* Algorithm 4 (Sec. 3.3): missing predictors under the normal / inverse-Wishart imputation model
  -- :func:`vb_missing`.

Each returns the final variational parameters (a NamedTuple) and the lower bound after every sweep,
computed from the paper's closed forms (the displays after Sec. 2.3's q-densities and before
Algorithms 2, 3 and 4). The loop is one ``lax.while_loop`` under ``jit``; it stops when the bound
increases by less than ``tol`` (the paper's 1e-10, Sec. 4) or after ``max_iter`` sweeps.

The closed forms hold after a full sweep, when chi_q(a), B_q(sigma_u^2) and Psi_q(Sigma) agree with
the current q of the coefficients (and predictors): every term in E_q[1/a], E_q[1/sigma_u^2],
E_q[log sigma_u^2], E_q[Sigma^-1] and E_q[log ``|Sigma|``] then cancels. The bound is evaluated there.

Numerics: no matrix is inverted to solve a system; Cholesky factors give the solves, log
determinants and diag(C Sigma C') = column norms of L^-1 C'. Algorithms 3 and 4 need the full
covariance of q(theta) (its second moments Omega enter their updates); it is formed from the
Cholesky factor by one triangular solve.

Wide data: with more coefficients than points (``wide=True``), Algorithms 1-3 hold q(theta) in its
n-dimensional (Woodbury) form, Sigma = A^-1 - A^-1 G' M^-1 G A^-1 with A diagonal and M n x n
(:class:`~bayes_maxmargin.core.augmentation.WideGaussianConditional`): the same sweeps and bound in
O(n^2 p) each, no p x p matrix. They need only the mean, dg(Sigma), the rows of Sigma of the few
unpenalised coefficients, dg(C Sigma C') and, in Algorithm 3, the sums over (Z'WZ) o Omega_q(v) of
steps 6-7, which running n x n sums give (:func:`_wide_inclusions`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array, lax
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import gammaln, multigammaln, xlogy

from bayes_maxmargin.core.augmentation import (
    WideGaussianConditional,
    gaussian_conditional,
    margin_floor,
    prior_gram,
    vb_hinge_bound,
    vb_inv_lambda,
    wide_gaussian_conditional,
    wide_latent_variances,
)
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.linalg import LOG_2PI, logdet_from_chol
from bayes_maxmargin.engine.fixed_point import VBResult, cavi_loop
from bayes_maxmargin.models.linear.model import LinearData
from bayes_maxmargin.models.luts.model import ImputationHyper, LutsHyper, MissingData, MixedData

__all__ = ["GaussianVBState", "LaplaceZeroVBState", "MissingVBState", "PenaltyVBState", "WideGaussianVBState",
           "WideLaplaceZeroVBState", "WidePenaltyVBState", "gaussian_lower_bound", "laplace_zero_lower_bound",
           "masked_gaussian", "missing_lower_bound", "penalty_lower_bound",
           "vb_gaussian", "vb_laplace_zero", "vb_missing", "vb_penalty", "wide_cov_diag", "wide_cov_half",
           "wide_laplace_zero_lower_bound", "wide_logdet_prec", "wide_penalty_lower_bound"]


def _chi_gaussian(design: Array, y: Array, mean: Array, prec_chol: Array) -> Array:
    """chi = (1 - Y C mu)^2 + dg(C Sigma C') with dg from the columns of L^-1 C' (Alg. 1-2)."""
    half = solve_triangular(prec_chol, design.T, lower=True)
    return (1.0 - y * (design @ mean)) ** 2 + jnp.sum(half**2, axis=0)


def _cov_diag(prec_chol: Array) -> Array:
    """dg(Sigma) for Sigma = (L L')^-1: the column norms of L^-1."""
    eye = jnp.eye(prec_chol.shape[0], dtype=prec_chol.dtype)
    return jnp.sum(solve_triangular(prec_chol, eye, lower=True) ** 2, axis=0)


def _cov_from_chol(prec_chol: Array) -> Array:
    """Sigma = (L L')^-1 = L^-T L^-1 from one triangular solve (Algorithms 3-4 need all of it)."""
    eye = jnp.eye(prec_chol.shape[0], dtype=prec_chol.dtype)
    half = solve_triangular(prec_chol, eye, lower=True)
    return half.T @ half


def _ig_bound(A_u: Array, B_u: Array, B_q: Array, m: int) -> Array:
    """E log p(sigma_u^2) - E log q(sigma_u^2) + the sigma-terms of E log p(u | sigma_u^2), with
    B_q up to date: A_u log B_u - log Gamma(A_u) - (A_u + m/2) log B_q + log Gamma(A_u + m/2)."""
    return A_u * jnp.log(B_u) - gammaln(A_u) - (A_u + 0.5 * m) * jnp.log(B_q) + gammaln(A_u + 0.5 * m)


def _beta_prec(hyper: LutsHyper, p: int, dtype) -> Array:
    """Prior precisions of beta: sigma_beta^-2 for each of the p columns of X (``sigma_beta2`` a
    scalar as in the paper, or one variance per column)."""
    return jnp.broadcast_to(1.0 / jnp.asarray(hyper.sigma_beta2, dtype), (p,))


def _beta_prior_terms(hyper: LutsHyper, second_moment: Array) -> Array:
    """-p/2 log sigma_beta^2 - (||mu_q(beta)||^2 + tr Sigma_q(beta)) / (2 sigma_beta^2) of the
    bounds of Algorithms 2-3, summed per coefficient (so a vector ``sigma_beta2`` is allowed)."""
    s2 = jnp.broadcast_to(hyper.sigma_beta2, second_moment.shape)
    return jnp.sum(-0.5 * jnp.log(s2) - 0.5 * second_moment / s2)


# ============================================================================ Algorithm 1
class GaussianVBState(NamedTuple):
    """Variational parameters of Algorithm 1: q(beta) = N(mean, (L L')^-1), q(a_i) = GIG(1/2, 1, chi_i).

    Attributes
    ----------
    mean : Array, shape (p,)
        mu_q(beta).
    prec_chol : Array, shape (p, p)
        Lower Cholesky factor L of Sigma_q(beta)^-1 = X' W X + diag(prior precisions).
    chi : Array, shape (n,)
        chi_q(a); mu_q(a^-1) = chi^(-1/2).
    """

    mean: Array
    prec_chol: Array
    chi: Array


def _alg1_step(state: GaussianVBState, data: LinearData, prior_prec: Array) -> GaussianVBState:
    W = vb_inv_lambda(state.chi)  # step 2
    cond = gaussian_conditional(data.design, data.y, W, 1.0, prior_prec)
    chi = _chi_gaussian(data.design, data.y, cond.mean, cond.prec_chol)  # step 3
    return GaussianVBState(cond.mean, cond.prec_chol, chi)


def gaussian_lower_bound(state: GaussianVBState, data: LinearData, prior_prec: Array) -> Array:
    """Lower bound of Algorithm 1 (Luts & Ormerod 2014, Sec. 2.3):

        p/2 - n + n log 2 - n/2 log 2 pi + p/2 log(4 alpha) + 1/2 log|Sigma| - 2 alpha (||mu||^2
        + tr Sigma) + y' X mu + 1/4 1' log chi + 1' log K_{1/2}(sqrt chi),

    written for a diagonal prior precision P_0 = diag(prior_prec) (4 alpha I in the paper):
    p/2 log(4 alpha) - 2 alpha (...) becomes sum_j [log(P0_j) - P0_j (mu_j^2 + Sigma_jj)] / 2.
    Components with zero prior precision (a flat prior on an intercept) add no prior term, so the
    bound is then defined up to a constant.
    """
    p = state.mean.shape[0]
    proper = prior_prec > 0
    second = state.mean**2 + _cov_diag(state.prec_chol)
    prior = jnp.where(proper, 0.5 * jnp.log(jnp.where(proper, prior_prec, 1.0)), 0.0) - 0.5 * prior_prec * second
    margin = data.y * (data.design @ state.mean)
    return 0.5 * p - 0.5 * logdet_from_chol(state.prec_chol) + jnp.sum(prior) + vb_hinge_bound(state.chi, margin)


@partial(jit, static_argnames=("max_iter", "accelerate", "wide"))
def vb_gaussian(data: LinearData, prior_prec: Array, tol: Array = 1e-10, *, max_iter: int = 1000,
                accelerate: bool = False, wide: bool = False) -> VBResult:
    """Algorithm 1 of Luts & Ormerod (2014): VB for the Bayesian SVM with a fixed penalty.

    Model: p(y_i | beta) = exp(-2 (1 - y_i x_i' beta)_+), beta ~ N(0, diag(prior_prec)^-1), i.e.
    prior_prec = 4 alpha for the SVM objective (1) with penalty alpha.

    Parameters
    ----------
    data : LinearData
        Design X (n, p) (include a column of ones for an intercept) and labels +-1.
    prior_prec : Array, shape (p,)
        Prior precisions (4 alpha in the paper; 0 for a flat component).
    tol : Array
        Stop when the lower bound increases by less than ``tol`` (paper: 1e-10).
    max_iter : int
        Maximum number of iterations.
    accelerate : bool
        Run SQUAREM cycles of three sweeps (:func:`squarem_cycle`) instead of single sweeps: the
        same fixed point and stopping rule, usually far fewer sweeps. Default False (the paper's
        plain coordinate ascent).
    wide : bool
        Hold q(beta) in its n-dimensional form (:class:`WideGaussianVBState`; O(n^2 p) per sweep
        instead of O(n p^2 + p^3); needs every prior precision > 0): the same fixed point and
        bound, for p > n (:func:`~bayes_maxmargin.core.augmentation.use_wide_form`).

    Returns
    -------
    VBResult
        ``state`` a :class:`GaussianVBState` (a :class:`WideGaussianVBState` when ``wide``).
    """
    n, p = data.design.shape
    dtype = data.design.dtype
    if wide:
        return _vb_gaussian_wide(data, jnp.asarray(prior_prec, dtype), tol, max_iter, accelerate)
    init = GaussianVBState(jnp.zeros(p, dtype), jnp.eye(p, dtype=dtype), jnp.ones(n, dtype))  # mu_q(a^-1) = 1
    prior_prec = jnp.asarray(prior_prec, dtype)
    return cavi_loop(
        lambda s: _alg1_step(s, data, prior_prec),
        lambda s: gaussian_lower_bound(s, data, prior_prec),
        init, jnp.asarray(tol, dtype), max_iter,
        {"chi": "log"} if accelerate else None,
    )


# ------------------------------------------------------------------ Algorithm 1, n-dimensional form
class WideGaussianVBState(NamedTuple):
    """Variational parameters of Algorithm 1 with q(beta) in the n-dimensional form of
    :class:`~bayes_maxmargin.core.augmentation.WideGaussianConditional` (for p > n).

    Attributes
    ----------
    q : WideGaussianConditional
        q(beta) = N(q.mean, Sigma), Sigma = A^-1 - A^-1 G' M^-1 G A^-1, G = diag(mu_q(a^-1))^(1/2) X.
    chi : Array, shape (n,)
        chi_q(a).
    """

    q: WideGaussianConditional
    chi: Array

    @property
    def mean(self) -> Array:
        return self.q.mean


def _alg1_wide_step(state: WideGaussianVBState, data: LinearData, prior_prec: Array, gram: Array) -> WideGaussianVBState:
    W = vb_inv_lambda(state.chi)  # step 2
    q = wide_gaussian_conditional(data.design, data.y, W, 1.0, prior_prec, gram)
    chi = (1.0 - data.y * (data.design @ q.mean)) ** 2 + wide_latent_variances(q, gram)  # step 3
    return WideGaussianVBState(q, chi)


def wide_gaussian_lower_bound(state: WideGaussianVBState, data: LinearData, prior_prec: Array) -> Array:
    """:func:`gaussian_lower_bound` in the n-dimensional form (every prior precision > 0).

    With Sigma^-1 = A + G'G: log|Sigma^-1| = sum log A_j + log|M| (determinant lemma) and
    sum_j A_j Sigma_jj = p - tr(M^-1 G A^-1 G') = p - n + tr(M^-1).
    """
    q = state.q
    p, n = q.mean.shape[0], q.inner_chol.shape[0]
    eye = jnp.eye(n, dtype=q.inner_chol.dtype)
    tr_m_inv = jnp.sum(solve_triangular(q.inner_chol, eye, lower=True) ** 2)
    logdet_prec = jnp.sum(jnp.log(prior_prec)) + logdet_from_chol(q.inner_chol)
    prior = 0.5 * jnp.sum(jnp.log(prior_prec)) - 0.5 * (jnp.sum(prior_prec * q.mean**2) + p - n + tr_m_inv)
    margin = data.y * (data.design @ q.mean)
    return 0.5 * p - 0.5 * logdet_prec + prior + vb_hinge_bound(state.chi, margin)


def _vb_gaussian_wide(data: LinearData, prior_prec: Array, tol: Array, max_iter: int, accelerate: bool) -> VBResult:
    n = data.design.shape[0]
    dtype = data.design.dtype
    init = WideGaussianVBState(_wide_init(data.design), jnp.ones(n, dtype))
    gram = prior_gram(data.design, prior_prec)
    return cavi_loop(
        lambda s: _alg1_wide_step(s, data, prior_prec, gram),
        lambda s: wide_gaussian_lower_bound(s, data, prior_prec),
        init, jnp.asarray(tol, dtype), max_iter,
        {"chi": "log"} if accelerate else None,
    )


# ============================================================================ Algorithm 2
class PenaltyVBState(NamedTuple):
    """Variational parameters of Algorithm 2.

    Attributes
    ----------
    mean : Array, shape (p + m,)
        mu_q(beta, u).
    prec_chol : Array, shape (p + m, p + m)
        Lower Cholesky factor of Sigma_q(beta, u)^-1 = C' W C + blockdiag(sigma_beta^-2 I_p,
        mu_q(sigma_u^-2) I_m).
    chi : Array, shape (n,)
        chi_q(a).
    B_sigma : Array
        B_q(sigma_u^2); q(sigma_u^2) = IG(A_u + m/2, B_sigma), mu_q(sigma_u^-2) = (A_u + m/2) / B_sigma.
    """

    mean: Array
    prec_chol: Array
    chi: Array
    B_sigma: Array


def _design(data: MixedData) -> Array:
    return jnp.concatenate([data.X, data.Z], axis=1)


def _alg2_step(state: PenaltyVBState, data: MixedData, hyper: LutsHyper) -> PenaltyVBState:
    C = _design(data)
    p, m = data.X.shape[1], data.Z.shape[1]
    dtype = C.dtype
    W = vb_inv_lambda(state.chi)
    mu_inv_s2 = (hyper.A_u + 0.5 * m) / state.B_sigma
    prior_prec = jnp.concatenate([_beta_prec(hyper, p, dtype), jnp.full((m,), mu_inv_s2, dtype)])
    cond = gaussian_conditional(C, data.y, W, 1.0, prior_prec)  # step 2, 3
    chi = _chi_gaussian(C, data.y, cond.mean, cond.prec_chol)  # step 3
    tr_u = jnp.sum(_cov_diag(cond.prec_chol)[p:])
    B_sigma = hyper.B_u + 0.5 * (jnp.sum(cond.mean[p:] ** 2) + tr_u)  # step 4
    return PenaltyVBState(cond.mean, cond.prec_chol, chi, B_sigma)


def penalty_lower_bound(state: PenaltyVBState, data: MixedData, hyper: LutsHyper) -> Array:
    """Lower bound of Algorithm 2 (Luts & Ormerod 2014, Sec. 3.1):

        (p+m)/2 - n + n log 2 - n/2 log 2 pi - p/2 log sigma_beta^2 + 1/2 log|Sigma_q(beta,u)|
        - (||mu_q(beta)||^2 + tr Sigma_q(beta)) / (2 sigma_beta^2)
        + A_u log B_u - log Gamma(A_u) - (A_u + m/2) log B_q(sigma_u^2) + log Gamma(A_u + m/2)
        + y' C mu_q(beta,u) + 1/4 1' log chi + 1' log K_{1/2}(sqrt chi).
    """
    p = data.X.shape[1]
    second_b = state.mean[:p] ** 2 + _cov_diag(state.prec_chol)[:p]
    return _alg2_bound(state, data, hyper, logdet_from_chol(state.prec_chol), second_b)


def _alg2_bound(state, data: MixedData, hyper: LutsHyper, logdet_prec: Array, second_b: Array) -> Array:
    """The bound of Algorithm 2 given log|Sigma_q^-1| and mu_q(beta)^2 + dg(Sigma_q(beta)) (both forms)."""
    p, m = data.X.shape[1], data.Z.shape[1]
    margin = data.y * (_design(data) @ state.mean)
    return (
        0.5 * (p + m)
        - 0.5 * logdet_prec
        + _beta_prior_terms(hyper, second_b)
        + _ig_bound(hyper.A_u, hyper.B_u, state.B_sigma, m)
        + vb_hinge_bound(state.chi, margin)
    )


@partial(jit, static_argnames=("max_iter", "accelerate", "wide"))
def vb_penalty(data: MixedData, hyper: LutsHyper, tol: Array = 1e-10, *, max_iter: int = 1000,
               accelerate: bool = False, wide: bool = False) -> VBResult:
    """Algorithm 2 of Luts & Ormerod (2014): VB with penalty parameter inference or random effects.

    Model (5): f = X beta + Z u, beta ~ N(0, sigma_beta^2 I), u | sigma_u^2 ~ N(0, sigma_u^2 I),
    sigma_u^2 ~ IG(A_u, B_u). Initial values mu_q(a^-1) = 1, mu_q(sigma_u^-2) = 1.

    ``wide=True`` holds q(beta, u) in its n-dimensional form (:class:`WidePenaltyVBState`; as in
    :func:`vb_gaussian`): the same sweeps and bound, O(n^2 (p + m)) each, for p + m > n.

    Returns
    -------
    VBResult
        ``state`` a :class:`PenaltyVBState` (a :class:`WidePenaltyVBState` when ``wide``); the penalty
        is alpha = mu_q(sigma_u^-2) / 4 in the parametrisation of (1).
    """
    n, p = data.X.shape
    m = data.Z.shape[1]
    dtype = data.X.dtype
    if wide:
        return _vb_penalty_wide(data, hyper, tol, max_iter, accelerate)
    init = PenaltyVBState(
        jnp.zeros(p + m, dtype), jnp.eye(p + m, dtype=dtype), jnp.ones(n, dtype),
        jnp.asarray(hyper.A_u + 0.5 * m, dtype),
    )
    return cavi_loop(
        lambda s: _alg2_step(s, data, hyper),
        lambda s: penalty_lower_bound(s, data, hyper),
        init, jnp.asarray(tol, dtype), max_iter,
        {"chi": "log", "B_sigma": "log"} if accelerate else None,
    )


# ------------------------------------------------------------------ Algorithm 2, n-dimensional form
class WidePenaltyVBState(NamedTuple):
    """Variational parameters of Algorithm 2 with q(beta, u) in the n-dimensional form of
    :class:`~bayes_maxmargin.core.augmentation.WideGaussianConditional` (for p + m > n).

    Attributes
    ----------
    q : WideGaussianConditional
        q(beta, u), design C = [X, Z], prior precisions (sigma_beta^-2, mu_q(sigma_u^-2)).
    chi : Array, shape (n,)
        chi_q(a).
    B_sigma : Array
        B_q(sigma_u^2).
    """

    q: WideGaussianConditional
    chi: Array
    B_sigma: Array

    @property
    def mean(self) -> Array:
        return self.q.mean


def wide_cov_half(q: WideGaussianConditional, columns: slice = slice(None)) -> Array:
    """V = L^-1 G A^-1 at ``columns`` (n x k), so that Sigma = A^-1 - V'V (M = L L'): O(n^2 k), as one
    product with the n x n L^-1 (XLA's triangular solve with k right-hand sides took 50 times longer)."""
    eye = jnp.eye(q.inner_chol.shape[0], dtype=q.inner_chol.dtype)
    return solve_triangular(q.inner_chol, eye, lower=True) @ (q.factor * q.prior_var)[:, columns]


def wide_cov_diag(q: WideGaussianConditional, columns: slice = slice(None)) -> Array:
    """dg(Sigma) at ``columns``: A^-1 minus the column norms of :func:`wide_cov_half`."""
    return q.prior_var[columns] - jnp.sum(wide_cov_half(q, columns) ** 2, axis=0)


def wide_logdet_prec(q: WideGaussianConditional) -> Array:
    """log|Sigma^-1| = log|A| + log|M| (the matrix determinant lemma)."""
    return logdet_from_chol(q.inner_chol) - jnp.sum(jnp.log(q.prior_var))


def _alg2_wide_step(state: WidePenaltyVBState, data: MixedData, hyper: LutsHyper, gram_x: Array,
                    gram_z: Array) -> WidePenaltyVBState:
    C = _design(data)
    p, m = data.X.shape[1], data.Z.shape[1]
    dtype = C.dtype
    W = vb_inv_lambda(state.chi)
    mu_inv_s2 = (hyper.A_u + 0.5 * m) / state.B_sigma
    prior_prec = jnp.concatenate([_beta_prec(hyper, p, dtype), jnp.full((m,), mu_inv_s2, dtype)])
    gram = gram_x + gram_z / mu_inv_s2  # C A^-1 C'
    q = wide_gaussian_conditional(C, data.y, W, 1.0, prior_prec, gram)  # step 2, 3
    chi = (1.0 - data.y * (C @ q.mean)) ** 2 + wide_latent_variances(q, gram)  # step 3
    tr_u = jnp.sum(wide_cov_diag(q, slice(p, None)))
    B_sigma = hyper.B_u + 0.5 * (jnp.sum(q.mean[p:] ** 2) + tr_u)  # step 4
    return WidePenaltyVBState(q, chi, B_sigma)


def wide_penalty_lower_bound(state: WidePenaltyVBState, data: MixedData, hyper: LutsHyper) -> Array:
    """:func:`penalty_lower_bound` in the n-dimensional form."""
    p = data.X.shape[1]
    second_b = state.mean[:p] ** 2 + wide_cov_diag(state.q, slice(None, p))
    return _alg2_bound(state, data, hyper, wide_logdet_prec(state.q), second_b)


def _wide_init(design: Array) -> WideGaussianConditional:
    """A placeholder q of the right shapes (every sweep recomputes q before reading it)."""
    n, p = design.shape
    dtype = design.dtype
    return WideGaussianConditional(jnp.zeros(p, dtype), jnp.ones(p, dtype), jnp.ones(n, dtype), design,
                                   jnp.eye(n, dtype=dtype))


def _vb_penalty_wide(data: MixedData, hyper: LutsHyper, tol: Array, max_iter: int, accelerate: bool) -> VBResult:
    n, p = data.X.shape
    m = data.Z.shape[1]
    dtype = data.X.dtype
    gram_x = prior_gram(data.X, _beta_prec(hyper, p, dtype))  # fixed over the sweeps
    gram_z = data.Z @ data.Z.T
    init = WidePenaltyVBState(_wide_init(_design(data)), jnp.ones(n, dtype), jnp.asarray(hyper.A_u + 0.5 * m, dtype))
    return cavi_loop(
        lambda s: _alg2_wide_step(s, data, hyper, gram_x, gram_z),
        lambda s: wide_penalty_lower_bound(s, data, hyper),
        init, jnp.asarray(tol, dtype), max_iter,
        {"chi": "log", "B_sigma": "log"} if accelerate else None,
    )


# ============================================================================ Algorithm 3
class LaplaceZeroVBState(NamedTuple):
    """Variational parameters of Algorithm 3 (Laplace-zero prior).

    Attributes
    ----------
    mean : Array, shape (p + m,)
        mu_q(beta, v).
    cov : Array, shape (p + m, p + m)
        Sigma_q(beta, v).
    logdet_cov : Array
        log ``|Sigma_q(beta, v)|`` (from its precision's Cholesky factor).
    chi : Array, shape (n,)
        chi_q(a).
    mu_b : Array, shape (m,)
        mu_q(b_k); q(b_k) = Inverse-Gaussian(mu_b_k, 1).
    mu_gamma : Array, shape (m,)
        mu_q(gamma_k) = q(gamma_k = 1), the inclusion probabilities.
    B_sigma : Array
        B_q(sigma_u^2).
    """

    mean: Array
    cov: Array
    logdet_cov: Array
    chi: Array
    mu_b: Array
    mu_gamma: Array
    B_sigma: Array


def _gamma_tilde_moments(mu_gamma: Array, p: int) -> tuple[Array, Array]:
    """mu_q(gamma~) = [1_p, mu_q(gamma)] and Omega_q(gamma~) = diag(mu (1 - mu)) + mu mu' (step 9)."""
    g = jnp.concatenate([jnp.ones((p,), mu_gamma.dtype), mu_gamma])
    return g, jnp.diag(g * (1.0 - g)) + jnp.outer(g, g)


def _alg3_start(state, data: MixedData, hyper: LutsHyper) -> tuple[Array, Array, Array, Array]:
    """What steps 2-3 of Algorithm 3 read (both forms): mu_q(a^-1), mu_q(sigma_u^-2), mu_q(gamma~) and the
    prior precisions (sigma_beta^-2, mu_q(sigma_u^-2) mu_q(b))."""
    p, m = data.X.shape[1], data.Z.shape[1]
    W = vb_inv_lambda(state.chi)  # step 2
    mu_inv_s2 = (hyper.A_u + 0.5 * m) / state.B_sigma
    g, _ = _gamma_tilde_moments(state.mu_gamma, p)
    prior_prec = jnp.concatenate([_beta_prec(hyper, p, data.X.dtype), mu_inv_s2 * state.mu_b])
    return W, mu_inv_s2, g, prior_prec


def _alg3_step(state: LaplaceZeroVBState, data: MixedData, hyper: LutsHyper) -> LaplaceZeroVBState:
    X, Z, y = data
    C = _design(data)
    p, m = X.shape[1], Z.shape[1]
    dtype = C.dtype
    W, mu_inv_s2, g, prior_prec = _alg3_start(state, data, hyper)
    Om_g = _gamma_tilde_moments(state.mu_gamma, p)[1]
    CWC = C.T @ (C * W[:, None])  # C' W C; its blocks Z' W Z and Z' W X serve steps 6-7 too
    lin = C.T @ (y * (1.0 + W))  # C' (I + W) y
    prec = CWC * Om_g + jnp.diag(prior_prec)
    L = jnp.linalg.cholesky(prec)
    mean = cho_solve((L, True), g * lin)  # step 3
    cov = _cov_from_chol(L)
    Om = cov + jnp.outer(mean, mean)
    Om_v, Om_bv = Om[p:, p:], Om[:p, p:]
    mu_b = jax.lax.rsqrt(mu_inv_s2 * jnp.diagonal(Om_v))  # step 5 (independent of gamma)
    # step 6-7, sequentially over k: eta_k uses the current mu_q(gamma_-k)
    G = CWC[p:, p:]  # Z' W Z
    lin_y = lin[p:]  # Z_k' (I + W) y
    lin_x = jnp.sum(CWC[p:, :p] * Om_bv.T, axis=1)  # Z_k' W X Omega_q(beta, v_k)
    GO = G * Om_v
    logit_rho = jnp.log(hyper.rho) - jnp.log1p(-hyper.rho)

    def update_gamma(k, mu_gamma):
        cross = GO[k] @ mu_gamma - GO[k, k] * mu_gamma[k]  # Z_k' W Z_-k diag(mu_gamma_-k) Omega(v_-k, v_k)
        eta = logit_rho - 0.5 * GO[k, k] + lin_y[k] * mean[p + k] - lin_x[k] - cross
        return mu_gamma.at[k].set(jax.nn.sigmoid(eta))

    mu_gamma = lax.fori_loop(0, m, update_gamma, state.mu_gamma)
    g, Om_g = _gamma_tilde_moments(mu_gamma, p)  # step 9
    chi = 1.0 - 2.0 * y * (C @ (g * mean)) + jnp.sum((C @ (Om_g * Om)) * C, axis=1)  # step 10
    chi = jnp.maximum(chi, margin_floor(dtype) ** 2)
    B_sigma = hyper.B_u + 0.5 * jnp.sum(mu_b * jnp.diagonal(Om_v))  # step 11
    return LaplaceZeroVBState(mean, cov, -logdet_from_chol(L), chi, mu_b, mu_gamma, B_sigma)


def laplace_zero_lower_bound(state: LaplaceZeroVBState, data: MixedData, hyper: LutsHyper) -> Array:
    """Lower bound of Algorithm 3 (Luts & Ormerod 2014, Sec. 3.2):

        (n - m) log 2 - n + (p+m)/2 - (n-m)/2 log 2 pi + y' C diag(mu_q(gamma~)) mu_q(beta,v)
        + 1/4 1' log chi + 1' log K_{1/2}(sqrt chi) + 1/2 log|Sigma_q(beta,v)| - p/2 log sigma_beta^2
        - (||mu_q(beta)||^2 + tr Sigma_q(beta)) / (2 sigma_beta^2) - 1/2 1' mu_q(b)^-1
        + A_u log B_u - log Gamma(A_u) - (A_u + m/2) log B_q + log Gamma(A_u + m/2)
        - mu_q(gamma)' log(mu_q(gamma) / rho) - (1 - mu_q(gamma))' log((1 - mu_q(gamma)) / (1 - rho)),

    (the paper's log Gamma(A + m/2) read as log Gamma(A_u + m/2)); 0 log 0 = 0.
    """
    p = data.X.shape[1]
    return _alg3_bound(state, data, hyper, state.logdet_cov, state.mean[:p] ** 2 + jnp.diagonal(state.cov)[:p])


def _alg3_bound(state, data: MixedData, hyper: LutsHyper, logdet_cov: Array, second_b: Array) -> Array:
    """The bound of Algorithm 3 given log|Sigma_q(beta, v)| and mu_q(beta)^2 + dg(Sigma_q(beta)) (both forms)."""
    p, m = data.X.shape[1], data.Z.shape[1]
    g, _ = _gamma_tilde_moments(state.mu_gamma, p)
    margin = data.y * (_design(data) @ (g * state.mean))
    mg, rho = state.mu_gamma, hyper.rho
    kl_gamma = jnp.sum(xlogy(mg, mg) - mg * jnp.log(rho) + xlogy(1.0 - mg, 1.0 - mg) - (1.0 - mg) * jnp.log1p(-rho))
    return (
        vb_hinge_bound(state.chi, margin)
        - m * jnp.log(2.0) + 0.5 * m * LOG_2PI
        + 0.5 * (p + m)
        + 0.5 * logdet_cov
        + _beta_prior_terms(hyper, second_b)
        - 0.5 * jnp.sum(1.0 / state.mu_b)
        + _ig_bound(hyper.A_u, hyper.B_u, state.B_sigma, m)
        - kl_gamma
    )


@partial(jit, static_argnames=("max_iter", "accelerate", "wide"))
def vb_laplace_zero(
    data: MixedData, hyper: LutsHyper, mu_gamma0: Array | None = None, tol: Array = 1e-10, *, max_iter: int = 1000,
    accelerate: bool = False, wide: bool = False,
) -> VBResult:
    """Algorithm 3 of Luts & Ormerod (2014): VB with the Laplace-zero prior on the Z coefficients.

    u_k = gamma_k v_k, v_k | b_k, sigma_u^2 ~ N(0, sigma_u^2 / b_k), b_k ~ IG(1, 1/2),
    gamma_k ~ Bernoulli(rho); beta (columns of X) always included.

    Parameters
    ----------
    data : MixedData
        X (always included), Z (subject to selection), labels.
    hyper : LutsHyper
        sigma_beta2, A_u, B_u, rho.
    mu_gamma0 : Array, shape (m,), optional
        Initial inclusion probabilities (default 1: start from the full model). The paper leaves
        the initial values of Algorithm 3 open; with a spike-and-slab q the fixed point reached
        can depend on them.
    tol, max_iter, accelerate
        As :func:`vb_gaussian`.
    wide : bool
        Hold q(beta, v) in its n-dimensional form (:class:`WideLaplaceZeroVBState`): the same sweeps
        and bound, O(n^2 (p + m)) each instead of O(n (p + m)^2 + (p + m)^3), for p + m > n.

    Returns
    -------
    VBResult
        ``state`` a :class:`LaplaceZeroVBState` (a :class:`WideLaplaceZeroVBState` when ``wide``).
        The classification rule uses mu_q(beta, v) * mu_q(gamma~) (Sec. 3.2).
    """
    n, p = data.X.shape
    m = data.Z.shape[1]
    dtype = data.X.dtype
    mu_gamma0 = jnp.ones((m,), dtype) if mu_gamma0 is None else jnp.asarray(mu_gamma0, dtype)
    rest = (jnp.ones(n, dtype), jnp.ones(m, dtype), mu_gamma0, jnp.asarray(hyper.A_u + 0.5 * m, dtype))
    if wide:
        init = WideLaplaceZeroVBState(_wide_init(_design(data)), *rest)
        step, bound = _alg3_wide_step, wide_laplace_zero_lower_bound
    else:
        init = LaplaceZeroVBState(jnp.zeros(p + m, dtype), jnp.eye(p + m, dtype=dtype), jnp.zeros((), dtype), *rest)
        step, bound = _alg3_step, laplace_zero_lower_bound
    return cavi_loop(
        lambda s: step(s, data, hyper),
        lambda s: bound(s, data, hyper),
        init, jnp.asarray(tol, dtype), max_iter,
        {"chi": "log", "B_sigma": "log", "mu_b": "log", "mu_gamma": "logit"} if accelerate else None,
    )


# ------------------------------------------------------------------ Algorithm 3, n-dimensional form
class WideLaplaceZeroVBState(NamedTuple):
    """Variational parameters of Algorithm 3 with q(beta, v) in the n-dimensional form (p + m > n).

    The precision of step 3, (C' W C) o Omega_q(gamma~) + diag(prior), is D + G'G with
    G = W^(1/2) C diag(mu_q(gamma~)) and the diagonal D = prior + mu_q(gamma~)(1 - mu_q(gamma~)) dg(C' W C),
    held as :class:`~bayes_maxmargin.core.augmentation.WideGaussianConditional` with design
    C diag(mu_q(gamma~)) (the inclusion probabilities of that step) and prior precisions D.

    Attributes
    ----------
    q : WideGaussianConditional
        q(beta, v).
    chi, mu_b, mu_gamma, B_sigma : Array
        As :class:`LaplaceZeroVBState`.
    """

    q: WideGaussianConditional
    chi: Array
    mu_b: Array
    mu_gamma: Array
    B_sigma: Array

    @property
    def mean(self) -> Array:
        return self.q.mean


def _wide_inclusions(mu_gamma: Array, A: Array, half_v: Array, mean_v: Array, base: Array) -> Array:
    """Steps 6-7 of Algorithm 3 without the m x m matrix (Z' W Z) o Omega_q(v), sequentially over k.

    Off the diagonal Omega_q(v)_kj = mu_k mu_j - h_k'h_j (h_k the columns of ``half_v``: Sigma_q(v) =
    A^-1 - h'h), and (Z' W Z)_kj = a_k'a_j (a_k the columns of ``A`` = W^(1/2) Z). So
    sum_j (Z'WZ)_kj Omega_kj mu_q(gamma_j) = mu_k a_k't - a_k' T h_k with the running sums
    t = sum_j a_j mu_j mu_q(gamma_j) and T = sum_j a_j h_j' mu_q(gamma_j), updated after each k:
    O(n^2) per k. The j = k term is taken out again, as in the m x m form; ``base`` holds the
    rest of eta_k.
    """
    own = jnp.sum(A**2, axis=0) * (mean_v**2 - jnp.sum(half_v**2, axis=0))  # the j = k term of the sum

    def update(carry, xs):
        t, T = carry
        a, h, mu, b, o, old = xs
        cross = mu * (a @ t) - a @ (T @ h) - o * old
        new = jax.nn.sigmoid(b - cross)
        change = new - old
        return (t + (change * mu) * a, T + change * jnp.outer(a, h)), new

    start = (A @ (mean_v * mu_gamma), (A * mu_gamma) @ half_v.T)
    _, mu_gamma = lax.scan(update, start, (A.T, half_v.T, mean_v, base, own, mu_gamma))
    return mu_gamma


def _included_latent_variances(q: WideGaussianConditional, gram: Array, delta: Array) -> Array:
    """dg(H Sigma H') for H = ``q.design`` + ``delta`` (the design under new inclusion probabilities).

    dg(Phi Sigma Phi') at Phi = ``q.design`` comes from :func:`wide_latent_variances`. With S = diag(s),
    K = Phi A^-1 delta' and Phi A^-1 Phi' S M^-1 S = S^-1 (I - M^-1) S (since M = I + S Phi A^-1 Phi' S),
    the cross term is Phi Sigma delta' = S^-1 M^-1 S K, and delta Sigma delta' = delta A^-1 delta' -
    K' S M^-1 S K. Nothing cancels at the scale of the prior variance of f (the intercept's, 1e8 in
    the paper), only at that of ``delta``'s columns.
    """
    s = q.scale
    K = (q.design * q.prior_var) @ delta.T
    SK = s[:, None] * K
    cross = jnp.diagonal(cho_solve((q.inner_chol, True), SK)) / s
    half = solve_triangular(q.inner_chol, SK, lower=True)
    own = jnp.sum(delta**2 * q.prior_var, axis=1) - jnp.sum(half**2, axis=0)
    return wide_latent_variances(q, gram) + 2.0 * cross + own


def _alg3_wide_step(state: WideLaplaceZeroVBState, data: MixedData, hyper: LutsHyper) -> WideLaplaceZeroVBState:
    X, Z, y = data
    C = _design(data)
    p = X.shape[1]
    dtype = C.dtype
    W, mu_inv_s2, g, prior_prec = _alg3_start(state, data, hyper)
    diag_prec = prior_prec + g * (1.0 - g) * (W @ C**2)  # D: diag(prior) + the diagonal of (C'WC) o diag(g(1 - g))
    design = C * g
    gram = prior_gram(design, diag_prec)
    q = wide_gaussian_conditional(design, y, W, 1.0, diag_prec, gram)  # step 3: mean = P^-1 g (C'(I + W) y)
    mean = q.mean
    half = wide_cov_half(q)
    om_diag = q.prior_var - jnp.sum(half**2, axis=0) + mean**2  # dg(Omega_q(beta, v))
    om_v, mean_v, mean_b = om_diag[p:], mean[p:], mean[:p]
    mu_b = jax.lax.rsqrt(mu_inv_s2 * om_v)  # step 5
    sw = jnp.sqrt(W)
    A = Z * sw[:, None]  # W^(1/2) Z
    lin_y = Z.T @ (y * (1.0 + W))  # Z_k' (I + W) y
    om_vb = jnp.outer(mean_v, mean_b) - half[:, p:].T @ half[:, :p]  # Omega_q(v, beta)
    lin_x = jnp.sum((A.T @ (X * sw[:, None])) * om_vb, axis=1)  # Z_k' W X Omega_q(beta, v_k)
    logit_rho = jnp.log(hyper.rho) - jnp.log1p(-hyper.rho)
    base = logit_rho - 0.5 * jnp.sum(A**2, axis=0) * om_v + lin_y * mean_v - lin_x
    mu_gamma = _wide_inclusions(state.mu_gamma, A, half[:, p:], mean_v, base)  # steps 6-7
    g_new, _ = _gamma_tilde_moments(mu_gamma, p)  # step 9
    f = C @ (g_new * mean)
    var = _included_latent_variances(q, gram, C * (g_new - g))  # dg(C diag(g) Sigma diag(g) C')
    chi = (1.0 - y * f) ** 2 + var + (C**2) @ (g_new * (1.0 - g_new) * om_diag)  # step 10
    chi = jnp.maximum(chi, margin_floor(dtype) ** 2)
    B_sigma = hyper.B_u + 0.5 * jnp.sum(mu_b * om_v)  # step 11
    return WideLaplaceZeroVBState(q, chi, mu_b, mu_gamma, B_sigma)


def wide_laplace_zero_lower_bound(state: WideLaplaceZeroVBState, data: MixedData, hyper: LutsHyper) -> Array:
    """:func:`laplace_zero_lower_bound` in the n-dimensional form."""
    p = data.X.shape[1]
    second_b = state.mean[:p] ** 2 + wide_cov_diag(state.q, slice(None, p))
    return _alg3_bound(state, data, hyper, -wide_logdet_prec(state.q), second_b)


# ============================================================================ Algorithm 4
def masked_gaussian(G: Array, h: Array, d: Array, observed: Array) -> tuple[Array, Array]:
    """Condition the Gaussian exp(-x' G x / 2 + h' x) on the observed entries of x (Sec. 3.3).

    With P_i, Q_i the columns of I_d of the missing / observed entries (Algorithm 4, steps 6-7;
    Appendix C), the missing block is N(mean_M, (P' G P)^-1), mean_M = (P' G P)^-1 P'(h - G Q Q' d).
    Done in fixed shapes: the observed rows and columns of G are replaced by the identity, so one
    d x d Cholesky serves every missingness pattern.

    Returns
    -------
    mean : Array, shape (d,)
        The observed entries of d where observed, the conditional mean elsewhere
        (Q Q' d + P mean_M, Algorithm 4 step 9).
    chol : Array, shape (d, d)
        Lower Cholesky factor of the masked precision (identity on observed entries): its log
        determinant is log ``|P' G P|`` and its solves give P Sigma P' (Algorithm 4 step 8).
    """
    miss = 1.0 - observed
    lin = miss * (h - G @ (observed * d))
    G_masked = G * jnp.outer(miss, miss) + jnp.diag(observed)
    chol = jnp.linalg.cholesky(G_masked)
    return observed * d + cho_solve((chol, True), lin), chol


class MissingVBState(NamedTuple):
    """Variational parameters of Algorithm 4 (missing predictors).

    Attributes
    ----------
    mean : Array, shape (1 + d,)
        mu_q(beta, u).
    cov : Array, shape (1 + d, 1 + d)
        Sigma_q(beta, u).
    logdet_cov : Array
        log ``|Sigma_q(beta, u)|``.
    chi : Array, shape (n,)
        chi_q(a).
    B_sigma : Array
        B_q(sigma_u^2).
    D_mean : Array, shape (n, d)
        mu_q(d_i): observed values, and the means of q(d_i,M_i) at the missing entries.
    D_cov : Array, shape (n, d, d)
        Sigma_q(d_i) = P_i Sigma_q(d_i,M_i) P_i' (zero on observed entries).
    D_logdet : Array, shape (n,)
        log ``|Sigma_q(d_i,M_i)|`` (0 for complete rows).
    mu_mean : Array, shape (d,)
        mu_q(mu).
    mu_cov : Array, shape (d, d)
        Sigma_q(mu).
    Psi_q : Array, shape (d, d)
        Psi_q(Sigma); q(Sigma) = IW(Psi_q, nu + n), mu_q(Sigma^-1) = (nu + n) Psi_q^-1.
    """

    mean: Array
    cov: Array
    logdet_cov: Array
    chi: Array
    B_sigma: Array
    D_mean: Array
    D_cov: Array
    D_logdet: Array
    mu_mean: Array
    mu_cov: Array
    Psi_q: Array


def _spd_inverse(A: Array) -> tuple[Array, Array]:
    """A^-1 and log|A| of an SPD matrix from its Cholesky factor (for the expectations that are
    themselves inverses: mu_q(Sigma^-1), Sigma_q(mu))."""
    L = jnp.linalg.cholesky(A)
    return _cov_from_chol(L), logdet_from_chol(L)


def _alg4_step(s: MissingVBState, data: MissingData, hyper: LutsHyper, imp: ImputationHyper) -> MissingVBState:
    D, obs, y = data
    n, d = D.shape
    dtype = D.dtype
    W = vb_inv_lambda(s.chi)  # step 2
    mu_inv_s2 = (hyper.A_u + 0.5 * d) / s.B_sigma
    Ct = jnp.concatenate([jnp.ones((n, 1), dtype), s.D_mean], axis=1)
    sum_cov_d = jnp.einsum("i,ijk->jk", W, s.D_cov)  # sum_i mu_q(a_i^-1) Sigma_q(c_i), lower block
    prior_prec = jnp.concatenate([jnp.full((1,), 1.0 / hyper.sigma_beta2, dtype), jnp.full((d,), mu_inv_s2, dtype)])
    prec = Ct.T @ (Ct * W[:, None]) + jnp.diag(prior_prec)
    prec = prec.at[1:, 1:].add(sum_cov_d)
    L = jnp.linalg.cholesky(prec)
    mean = cho_solve((L, True), Ct.T @ (y * (1.0 + W)))  # step 3
    cov = _cov_from_chol(L)
    Om = cov + jnp.outer(mean, mean)  # step 4
    Om_u, Om_ub, mu_u, cov_u = Om[1:, 1:], Om[1:, 0], mean[1:], cov[1:, 1:]
    M_sigma = (imp.nu + n) * _spd_inverse(s.Psi_q)[0]  # mu_q(Sigma^-1)

    def one_row(d_i, obs_i, w_i, y_i):  # steps 6-10
        G = M_sigma + w_i * Om_u
        h = M_sigma @ s.mu_mean + y_i * (1.0 + w_i) * mu_u - w_i * Om_ub
        mean_i, chol_i = masked_gaussian(G, h, d_i, obs_i)
        miss = 1.0 - obs_i
        cov_i = _cov_from_chol(chol_i) * jnp.outer(miss, miss)
        c_i = jnp.concatenate([jnp.ones((1,), dtype), mean_i])
        chi_i = (1.0 - y_i * (c_i @ mean)) ** 2 + c_i @ cov @ c_i + mu_u @ cov_i @ mu_u + jnp.sum(cov_u * cov_i)
        return mean_i, cov_i, -logdet_from_chol(chol_i), chi_i

    D_mean, D_cov, D_logdet, chi = jax.vmap(one_row)(D, obs, W, y)
    chi = jnp.maximum(chi, margin_floor(dtype) ** 2)  # step 12: mu_q(a^-1) = chi^-1/2 next sweep
    mu_cov, _ = _spd_inverse(jnp.eye(d, dtype=dtype) / imp.sigma_mu2 + n * M_sigma)  # step 13
    mu_mean = mu_cov @ (M_sigma @ jnp.sum(D_mean, axis=0))
    resid = D_mean - mu_mean
    Psi_q = imp.Psi + n * mu_cov + resid.T @ resid + jnp.sum(D_cov, axis=0)  # step 14
    Psi_q = 0.5 * (Psi_q + Psi_q.T)
    B_sigma = hyper.B_u + 0.5 * (jnp.sum(mu_u**2) + jnp.trace(cov_u))  # step 15
    return MissingVBState(mean, cov, -logdet_from_chol(L), chi, B_sigma, D_mean, D_cov, D_logdet, mu_mean, mu_cov, Psi_q)


def missing_lower_bound(s: MissingVBState, data: MissingData, hyper: LutsHyper, imp: ImputationHyper) -> Array:
    """Lower bound log p(y, D_obs; q) of Algorithm 4 (Luts & Ormerod 2014, Sec. 3.3):

        n log 2 - n - n/2 log 2 pi + y' C~ mu_q(beta,u) + 1/4 1' log chi + 1' log K_{1/2}(sqrt chi)
        + A_u log B_u - log Gamma(A_u) - (A_u + d/2) log B_q + log Gamma(A_u + d/2)
        - 1/2 log sigma_beta^2 - (mu_q(beta)^2 + sigma^2_q(beta)) / (2 sigma_beta^2) + (1+d)/2
        + 1/2 log|Sigma_q(beta,u)| + d/2 + 1/2 log|Sigma_q(mu)| - nd/2 log 2 pi - d/2 log sigma_mu^2
        - (||mu_q(mu)||^2 + tr Sigma_q(mu)) / (2 sigma_mu^2) + nu/2 log|Psi| - log Gamma_d(nu/2)
        - (nu+n)/2 log|Psi_q(Sigma)| + dn/2 log 2 + log Gamma_d((nu+n)/2)
        + sum_{i in M} [``|M_i|`` / 2 + ``|M_i|`` / 2 log 2 pi + 1/2 log|Sigma_q(d_i,M_i)|].
    """
    D, obs, y = data
    n, d = D.shape
    Ct = jnp.concatenate([jnp.ones((n, 1), D.dtype), s.D_mean], axis=1)
    margin = y * (Ct @ s.mean)
    n_missing = jnp.sum(1.0 - obs)
    logdet_mu = logdet_from_chol(jnp.linalg.cholesky(s.mu_cov))  # log|Sigma_q(mu)|
    logdet_psi = logdet_from_chol(jnp.linalg.cholesky(imp.Psi))
    logdet_psi_q = logdet_from_chol(jnp.linalg.cholesky(s.Psi_q))
    return (
        vb_hinge_bound(s.chi, margin)
        + _ig_bound(hyper.A_u, hyper.B_u, s.B_sigma, d)
        - 0.5 * jnp.log(hyper.sigma_beta2)
        - 0.5 * (s.mean[0] ** 2 + s.cov[0, 0]) / hyper.sigma_beta2
        + 0.5 * (1 + d)
        + 0.5 * s.logdet_cov
        + 0.5 * d
        + 0.5 * logdet_mu
        - 0.5 * n * d * LOG_2PI
        - 0.5 * d * jnp.log(imp.sigma_mu2)
        - 0.5 * (jnp.sum(s.mu_mean**2) + jnp.trace(s.mu_cov)) / imp.sigma_mu2
        + 0.5 * imp.nu * logdet_psi
        - multigammaln(0.5 * imp.nu, d)
        - 0.5 * (imp.nu + n) * logdet_psi_q
        + 0.5 * d * n * jnp.log(2.0)
        + multigammaln(0.5 * (imp.nu + n), d)
        + 0.5 * n_missing * (1.0 + LOG_2PI)
        + 0.5 * jnp.sum(s.D_logdet)
    )


@partial(jit, static_argnames=("max_iter", "accelerate"))
def vb_missing(
    data: MissingData, hyper: LutsHyper, imp: ImputationHyper, tol: Array = 1e-10, *, max_iter: int = 1000,
    accelerate: bool = False,
) -> VBResult:
    """Algorithm 4 of Luts & Ormerod (2014): VB with missing predictor values (MCAR or MAR).

    Model: f_i = beta + d_i' u (Sec. 3.3), beta ~ N(0, sigma_beta^2), u | sigma_u^2 ~ N(0, sigma_u^2 I_d),
    sigma_u^2 ~ IG(A_u, B_u); d_i ~ N(mu, Sigma), mu ~ N(0, sigma_mu^2 I), Sigma ~ IW(Psi, nu).

    Initial values (the paper leaves them open): missing entries at their column's observed mean,
    Sigma_q(c_i) = 0, mu_q(a^-1) = 1, mu_q(sigma_u^-2) = 1, mu_q(mu) = the observed column means,
    Sigma_q(mu) = 0, mu_q(Sigma^-1) = diag(1 / observed column variances).

    Returns
    -------
    VBResult
        ``state`` a :class:`MissingVBState`; ``state.D_mean`` holds the imputed values.
    """
    D, obs, y = data
    n, d = D.shape
    dtype = D.dtype
    count = jnp.sum(obs, axis=0)
    col_mean = jnp.sum(obs * D, axis=0) / count
    col_var = jnp.sum(obs * (D - col_mean) ** 2, axis=0) / count
    col_var = jnp.where(col_var > 0, col_var, 1.0)
    D0 = obs * D + (1.0 - obs) * col_mean
    init = MissingVBState(
        jnp.zeros(1 + d, dtype), jnp.eye(1 + d, dtype=dtype), jnp.zeros((), dtype), jnp.ones(n, dtype),
        jnp.asarray(hyper.A_u + 0.5 * d, dtype), D0, jnp.zeros((n, d, d), dtype), jnp.zeros(n, dtype),
        col_mean, jnp.zeros((d, d), dtype), (imp.nu + n) * jnp.diag(col_var),
    )
    data = MissingData(D0, obs, y)
    return cavi_loop(
        lambda s: _alg4_step(s, data, hyper, imp),
        lambda s: missing_lower_bound(s, data, hyper, imp),
        init, jnp.asarray(tol, dtype), max_iter,
        {"chi": "log", "B_sigma": "log", "D_mean": "linear", "mu_mean": "linear"} if accelerate else None,
    )
