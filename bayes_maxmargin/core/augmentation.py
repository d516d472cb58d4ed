"""The data augmentation every model shares (Polson & Scott 2011; Henao et al. 2014).

The hinge pseudo-likelihood is a location-scale mixture of normals,

    exp(-2 gamma max(u, 0)) = int_0^inf N(u | -lambda, lambda / gamma) d lambda,   u = 1 - y f,

(Henao et al. 2014, eq. 3) and with the proper prior lambda ~ Exp(gamma0) the integral is the skewed
Laplace density (gamma0 / c) exp(-gamma (c ``|u|`` + u)), c = sqrt(1 + 2 gamma0 / gamma) (eq. 4-5).
Given lambda every model is conditionally Gaussian in its linear predictor f, so the same few
updates recur in every model and inference algorithm. They are written once here:

* :func:`log_pseudo_likelihood` -- the marginal factor (lambda integrated out), eq. (4)-(5);
* :func:`augmented_log_likelihood` -- log N(u | -lambda, lambda / gamma), the augmented factor;
* :func:`sample_inv_lambda` / :func:`expected_inv_lambda` / :func:`expected_lambda` -- the
  conditional of 1 / lambda (inverse Gaussian, eq. 7) and its moments (eq. 8);
* :func:`gaussian_conditional` -- the Gaussian conditional of weights that enter f linearly;
  :func:`wide_gaussian_conditional` / :func:`sample_wide_gaussian` -- the same in its n-dimensional
  (Woodbury) form for more weights than data points (:func:`use_wide_form`);
* :func:`gamma_conditional` / :func:`draw_gamma` -- the Gamma conditional of the hinge scale gamma
  (eq. 7);
* :func:`log_lambda_prior` -- the Exp(gamma0) prior of the augmentation variables (eq. 6);
* :func:`gamma0_conditional` / :func:`draw_gamma0` -- the Gamma conditional of gamma0 when it has
  a Gamma prior (:func:`draw_scales` draws gamma and gamma0 after the model's parameters);
* :func:`marginal_log_likelihood` / :func:`marginal_log_density` / :func:`marginal_moves` -- the
  pseudo-likelihood and a model's density in weights that enter f linearly, lambda integrated out,
  and slice moves of the weights under it along directions adapted in warm-up
  (:mod:`bayes_maxmargin.core.slice`), which every linear Gibbs sampler runs before its lambda draw;
  :func:`scale_move`, the same for the scale of a block of weights whose whitened values stay fixed
  (the ancillary step of an interweaving); :func:`elliptical_moves`, the same for a latent function
  with a Gaussian process prior (elliptical slice sampling).

Numerical floor
---------------
``|u|`` = ``|1 - y f|`` reaches zero for points exactly on the margin, where E[1 / lambda] = c / ``|u|`` is
infinite. Every update floors ``|u|`` at :func:`margin_floor` (sqrt of the machine epsilon: 1.5e-8 in
float64, 3.5e-4 in float32), so 1 / lambda stays finite. For a continuous sampler the floor is
reached with probability of the order of the floor itself; in EM it turns the hard margin
constraint of a support vector into a stiff penalty, which moves the fixed point by O(floor).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import gammaln

from bayes_maxmargin.core.distributions import InverseGaussian
from bayes_maxmargin.core.linalg import LOG_2PI
from bayes_maxmargin.core.slice import direction_sweep, slice_1d

__all__ = ["ELLIPTICAL_STEPS", "GaussianConditional", "MoveInfo", "WideGaussianConditional", "augmented_log_likelihood",
           "augmented_sweep", "draw_gamma", "draw_gamma0", "draw_scales", "elliptical_moves", "expected_inv_lambda",
           "expected_lambda", "gamma0_conditional", "gamma_cm_step", "gamma_conditional", "gaussian_conditional",
           "hinge_c", "log_gamma0_prior", "log_lambda_prior", "log_pseudo_likelihood", "margin_floor",
           "marginal_log_density", "marginal_log_likelihood", "marginal_moves", "masked_rows", "prior_gram",
           "sample_conditional", "sample_gaussian", "sample_inv_lambda", "sample_wide_gaussian", "scale_move", "use_wide_form",
           "vb_hinge_bound", "vb_inv_lambda", "wide_gaussian_conditional", "wide_latent_variances"]


def margin_floor(dtype: jnp.dtype) -> float:
    """The floor applied to ``|1 - y f|`` in every update: sqrt of the machine epsilon of ``dtype``."""
    return float(jnp.finfo(dtype).eps) ** 0.5


def hinge_c(gamma: Array, gamma0: Array) -> Array:
    """c = sqrt(1 + 2 gamma0 / gamma) of Henao et al. (2014), eq. (4); c = 1 for the hinge."""
    return jnp.sqrt(1.0 + 2.0 * gamma0 / gamma)


def log_pseudo_likelihood(u: Array, gamma: Array, gamma0: Array) -> Array:
    """Log of the marginal pseudo-likelihood of ``u = 1 - y f`` (Henao et al. 2014, eq. 4-5).

    ``gamma0 = 0`` gives the Polson-Scott hinge factor -2 gamma max(u, 0) (eq. 3), unnormalised in
    u; ``gamma0 > 0`` gives the normalised skewed Laplace density log(gamma0 / c) - gamma (c|u| + u).

    Parameters
    ----------
    u : Array
        Margin residuals 1 - y_n f_n.
    gamma : Array
        Hinge scale (the SVM's regularisation trade-off), > 0.
    gamma0 : Array
        Rate of the exponential prior on lambda, >= 0.
    """
    c = hinge_c(gamma, gamma0)
    safe_gamma0 = jnp.where(gamma0 > 0, gamma0, 1.0)
    log_norm = jnp.where(gamma0 > 0, jnp.log(safe_gamma0) - jnp.log(c), 0.0)
    return log_norm - gamma * (c * jnp.abs(u) + u)


def augmented_log_likelihood(u: Array, inv_lam: Array, gamma: Array) -> Array:
    """log N(u | -lambda, lambda / gamma) with lambda = 1 / inv_lam (Henao et al. 2014, eq. 3, 5).

    Written in terms of ``inv_lam`` = 1 / lambda as 0.5 log(gamma inv_lam / 2 pi)
    - gamma / 2 (inv_lam u^2 + 2 u + lambda), which stays finite for lambda -> 0.
    """
    return 0.5 * (jnp.log(gamma * inv_lam) - LOG_2PI) - 0.5 * gamma * (
        inv_lam * u**2 + 2.0 * u + 1.0 / inv_lam
    )


def log_lambda_prior(inv_lam: Array, gamma0: Array, mask: Array | None = None) -> Array:
    """sum_n log Exp(lambda_n | gamma0) with lambda = 1 / inv_lam; 0 for the flat prior (gamma0 = 0),
    as NumPyro's ``ImproperUniform`` contributes (Henao et al. 2014, eq. 6). ``mask``: the rows summed
    (all without it)."""
    safe_gamma0 = jnp.where(gamma0 > 0, gamma0, 1.0)
    terms = masked_rows(jnp.log(safe_gamma0) - gamma0 / inv_lam, mask)
    return jnp.where(gamma0 > 0, jnp.sum(terms, axis=-1), 0.0)


def masked_rows(terms: Array, mask: Array | None) -> Array:
    """Per-row ``terms`` with the rows outside ``mask`` (padding rows of a bucketed design) set to 0;
    ``terms`` unchanged without a mask."""
    return terms if mask is None else jnp.where(mask, terms, 0.0)


def _abs_u(u: Array) -> Array:
    return jnp.maximum(jnp.abs(u), margin_floor(u.dtype))


def expected_inv_lambda(u: Array, gamma: Array, gamma0: Array) -> Array:
    """E[1 / lambda_n | f, gamma] = c / ``|u_n|`` (Henao et al. 2014, eq. 8), ``|u|`` floored."""
    return hinge_c(gamma, gamma0) / _abs_u(u)


def expected_lambda(u: Array, gamma: Array, gamma0: Array) -> Array:
    """E[lambda_n | f, gamma] = ``|u_n|`` / c + 1 / (gamma c^2).

    lambda_n | f, gamma is GIG(1/2, gamma + 2 gamma0, gamma u_n^2), whose mean is
    sqrt(b / a) (1 + 1 / sqrt(a b)); needed by the ECM update of gamma (Henao et al. 2014, Sec. 3).
    """
    c = hinge_c(gamma, gamma0)
    return _abs_u(u) / c + 1.0 / (gamma * c**2)


def inv_mean_lambda(inv_lam: Array, gamma: Array, gamma0: Array) -> Array:
    """1 / E[lambda_n | f, gamma] from omega_n = E[1 / lambda_n | f, gamma].

    :func:`expected_lambda` at ``|u_n|`` = c / omega_n: E[lambda_n] = 1 / omega_n + 1 / (gamma c^2).
    The ECM's ML-II evaluates eq. (9) of Henao et al. (2014), N(Y (1 + lambda), K + Lambda / gamma),
    at lambda = <lambda> = E[lambda], as the supplement's bound for the factor models does with
    U = K + <gamma^-1> <Lambda>.
    """
    return 1.0 / expected_lambda(hinge_c(gamma, gamma0) / inv_lam, gamma, gamma0)


def vb_inv_lambda(chi: Array) -> Array:
    """Mean-field E_q[1 / a_n] = chi_n^(-1/2) for q(a_n) = GIG(1/2, 1, chi_n), the hinge with unit
    scale (Luts & Ormerod 2014, Algorithm 1, step 3), chi_n = E_q[(1 - y_n f_n)^2].

    The same algebra as :func:`expected_inv_lambda` with ``|u_n|`` replaced by sqrt(chi_n), floored
    alike.
    """
    return expected_inv_lambda(jnp.sqrt(chi), 1.0, 0.0)


def vb_hinge_bound(chi: Array, margin_mean: Array) -> Array:
    """The augmented hinge's part of every mean-field lower bound of Luts & Ormerod (2014):

        E_q[log p(y, a | f)] - E_q[log q(a)]
          = n log 2 - n - n/2 log(2 pi) + y' E_q[f] + 1/4 1' log chi + 1' log K_{1/2}(sqrt chi),

    valid when q(a_n) = GIG(1/2, 1, chi_n) with chi_n = E_q[(1 - y_n f_n)^2] under the current q of
    f (Algorithms 1-4: the terms shared by their lower bounds). ``margin_mean`` is y * E_q[f].
    With chi = (1 - y f)^2 (a point mass on f) it is the hinge log pseudo-likelihood
    -2 sum (1 - y f)_+.

    Since log K_{1/2}(x) = log(pi / 2) / 2 - log(x) / 2 - x, the constants cancel and the sum is
    -n + y' E_q[f] - 1' sqrt(chi).
    """
    n = chi.shape[-1]
    chi = jnp.maximum(chi, margin_floor(chi.dtype) ** 2)
    return -n + jnp.sum(margin_mean, axis=-1) - jnp.sum(jnp.sqrt(chi), axis=-1)


def sample_inv_lambda(key: Array, u: Array, gamma: Array, gamma0: Array) -> Array:
    """Draw 1 / lambda_n | f, gamma ~ IG(c / ``|u_n|``, gamma + 2 gamma0) (Henao et al. 2014, eq. 7)."""
    mean = expected_inv_lambda(u, gamma, gamma0)
    concentration = jnp.broadcast_to(gamma + 2.0 * gamma0, mean.shape)
    return InverseGaussian(mean, concentration).sample(key)


class GaussianConditional(NamedTuple):
    """A Gaussian N(mean, P^-1) held by its mean and the lower Cholesky factor of its precision P."""

    mean: Array
    prec_chol: Array


def gaussian_conditional(
    design: Array, y: Array, inv_lam: Array, gamma: Array, prior_prec: Array
) -> GaussianConditional:
    """Conditional of weights w with f = design @ w, given lambda and gamma.

    With prior w ~ N(0, diag(prior_prec)^-1) and the augmented factor of every data point,

        P = diag(prior_prec) + gamma Phi' diag(1/lambda) Phi,
        mean = P^-1 gamma Phi' Y (1 + 1/lambda),

    Polson & Scott (2011); Henao et al. (2014) eq. (7) with a linear predictor; Luts & Ormerod (2014)
    Algorithm 1. In EM the same function is called with E[1/lambda]. One Cholesky of P, no inverse.

    Parameters
    ----------
    design : Array, shape (n, p)
        Design matrix Phi (features, and a column of ones for an intercept).
    y : Array, shape (n,)
        Labels coded +-1.
    inv_lam : Array, shape (n,)
        1 / lambda_n (a draw, or its expectation).
    gamma : Array
        Hinge scale.
    prior_prec : Array, shape (p,)
        Prior precisions of the weights (0 for a flat prior).
    """
    weighted = design * (gamma * inv_lam)[:, None]
    prec = design.T @ weighted + jnp.diag(prior_prec)
    lin = gamma * (design.T @ (y * (1.0 + inv_lam)))
    chol = jnp.linalg.cholesky(prec)
    return GaussianConditional(cho_solve((chol, True), lin), chol)


def sample_gaussian(
    key: Array, cond: GaussianConditional, previous: Array | None = None, overrelaxation: float = 0.0
) -> Array:
    """One draw of N(mean, P^-1), optionally overrelaxed (Adler 1981).

    Plain draw: mean + L^-T z with P = L L'. With ``previous`` w and ``overrelaxation`` alpha in
    (-1, 1): mean + alpha (w - mean) + sqrt(1 - alpha^2) L^-T z, a move that leaves N(mean, P^-1)
    invariant (and is reversible with respect to it) for any alpha; alpha near -1 reflects the
    draw through the conditional mean, suppressing the random walk that the augmentation's
    coupling of w and lambda induces (Neal 1998, "Suppressing random walks in MCMC using ordered
    overrelaxation"). alpha = 0 is the plain draw.
    """
    z = jax.random.normal(key, cond.mean.shape, cond.mean.dtype)
    noise = solve_triangular(cond.prec_chol, z, lower=True, trans="T")
    if previous is None:
        return cond.mean + noise
    alpha = jnp.asarray(overrelaxation, cond.mean.dtype)
    return cond.mean + alpha * (previous - cond.mean) + jnp.sqrt(1.0 - alpha**2) * noise


def use_wide_form(n: int, p: int, prior_prec: Any) -> bool:
    """Whether the n-dimensional (wide) form of the Gaussian conditional applies and pays: more
    weights than data points (p > n) and a proper prior on every weight (the form needs the prior
    covariance diag(prior_prec)^-1; a flat intercept keeps the p-dimensional form)."""
    return p > n and bool(np.all(np.asarray(prior_prec) > 0))


class WideGaussianConditional(NamedTuple):
    """The Gaussian conditional of :func:`gaussian_conditional` held in its n-dimensional form.

    With A = diag(prior_prec), s = sqrt(gamma / lambda), G = diag(s) Phi and M = I_n + G A^-1 G',
    the Woodbury identity gives

        Sigma = (A + G'G)^-1 = A^-1 - A^-1 G' M^-1 G A^-1,

    so the conditional is held by its mean, A^-1 (``prior_var``), s (``scale``), Phi (``design``)
    and the lower Cholesky factor of the n x n matrix M (``inner_chol``, eigenvalues >= 1).
    """

    mean: Array
    prior_var: Array
    scale: Array
    design: Array
    inner_chol: Array

    @property
    def factor(self) -> Array:
        """G = diag(s) Phi."""
        return self.design * self.scale[:, None]


def prior_gram(design: Array, prior_prec: Array) -> Array:
    """Phi A^-1 Phi' (n x n), the prior covariance of f = Phi w; fixed over the iterations."""
    return (design / prior_prec) @ design.T


def wide_gaussian_conditional(
    design: Array, y: Array, inv_lam: Array, gamma: Array, prior_prec: Array, gram: Array | None = None
) -> WideGaussianConditional:
    """:func:`gaussian_conditional` in its n-dimensional form, for p > n (every ``prior_prec`` > 0).

    The mean P^-1 gamma Phi' Y (1 + 1/lambda) is Sigma G' alpha with alpha = s * y (1 + lambda)
    (since G' alpha = gamma Phi' diag(1/lambda) Y (1 + lambda)), and Sigma G' = A^-1 G' M^-1, so

        mean = A^-1 Phi' (s * M^-1 alpha),    M = I + (s s') * (Phi A^-1 Phi'),

    one n x n Cholesky and no p x p matrix (Bhattacharya, Chakraborty & Mallick 2016, Sec. 2):
    O(n p) given ``gram`` = Phi A^-1 Phi' (:func:`prior_gram`, computed here when None, O(n^2 p)).
    The other arguments as in :func:`gaussian_conditional`.
    """
    prior_var = 1.0 / prior_prec
    if gram is None:
        gram = prior_gram(design, prior_prec)
    s = jnp.sqrt(gamma * inv_lam)
    inner = gram * jnp.outer(s, s) + jnp.eye(gram.shape[0], dtype=gram.dtype)
    chol = jnp.linalg.cholesky(inner)
    alpha = s * y * (1.0 + 1.0 / inv_lam)
    mean = prior_var * (design.T @ (s * cho_solve((chol, True), alpha)))
    return WideGaussianConditional(mean, prior_var, s, design, chol)


def sample_wide_gaussian(
    key: Array, cond: WideGaussianConditional, previous: Array | None = None, overrelaxation: float = 0.0
) -> Array:
    """One draw of the conditional held by ``cond``, as :func:`sample_gaussian` (same overrelaxed
    move), in O(n p) with the exact algorithm of Bhattacharya, Chakraborty & Mallick (2016, Alg. 1)
    for the zero-mean part: u ~ N(0, A^-1), delta ~ N(0, I_n), v = G u + delta, w = M^-1 (-v),
    noise = u + A^-1 G' w ~ N(0, Sigma). mean + noise is their draw with alpha = s * y (1 + lambda).
    The random numbers differ from :func:`sample_gaussian`'s.
    """
    k_u, k_delta = jax.random.split(key)
    dtype = cond.mean.dtype
    u = jnp.sqrt(cond.prior_var) * jax.random.normal(k_u, cond.mean.shape, dtype)
    delta = jax.random.normal(k_delta, cond.scale.shape, dtype)
    w = cho_solve((cond.inner_chol, True), -(cond.scale * (cond.design @ u) + delta))
    noise = u + cond.prior_var * (cond.design.T @ (cond.scale * w))
    if previous is None:
        return cond.mean + noise
    alpha = jnp.asarray(overrelaxation, dtype)
    return cond.mean + alpha * (previous - cond.mean) + jnp.sqrt(1.0 - alpha**2) * noise


def sample_conditional(
    key: Array, design: Array, y: Array, inv_lam: Array, gamma: Array, prior_prec: Array, wide: bool = False,
    previous: Array | None = None, overrelaxation: float = 0.0, gram: Array | None = None,
) -> Array:
    """One draw of the weights' conditional given lambda and gamma: :func:`gaussian_conditional` drawn by
    :func:`sample_gaussian`, or with ``wide`` its n-dimensional form (:func:`wide_gaussian_conditional`, with
    ``gram`` as there) drawn by :func:`sample_wide_gaussian`; ``previous`` and ``overrelaxation`` as in
    :func:`sample_gaussian`."""
    if wide:
        cond = wide_gaussian_conditional(design, y, inv_lam, gamma, prior_prec, gram)
        return sample_wide_gaussian(key, cond, previous, overrelaxation)
    return sample_gaussian(key, gaussian_conditional(design, y, inv_lam, gamma, prior_prec), previous, overrelaxation)


def wide_latent_variances(cond: WideGaussianConditional, gram: Array) -> Array:
    """diag(Phi Sigma Phi') at the n rows of ``cond.design``, ``gram`` = Phi A^-1 Phi'.

    G Sigma G' = I - M^-1, so row i has variance (1 - (M^-1)_ii) / s_i^2, accurate where
    (M^-1)_ii is small (points the data pin down, large s_i); elsewhere the direct
    k_ii - ||L^-1 diag(s) K_i||^2 with K = ``gram`` is used, which then loses no digits.
    """
    eye = jnp.eye(cond.inner_chol.shape[0], dtype=cond.inner_chol.dtype)
    inv_chol = solve_triangular(cond.inner_chol, eye, lower=True)
    m_inv_diag = jnp.sum(inv_chol**2, axis=0)
    pinned = (1.0 - m_inv_diag) / cond.scale**2
    half = inv_chol @ (gram * cond.scale[:, None])
    direct = jnp.diagonal(gram) - jnp.sum(half**2, axis=0)
    return jnp.where(m_inv_diag < 0.5, pinned, direct)


def gamma_conditional(
    u: Array, inv_lam: Array, a0: Array, b0: Array, mask: Array | None = None
) -> tuple[Array, Array]:
    """Shape and rate of gamma | f, lambda ~ Ga(a0 + N/2, b0 + eps' Lambda^-1 eps / 2).

    Henao et al. (2014) eq. (7) with eps = 1 + lambda - y f = u + lambda, so that
    eps_n^2 / lambda_n = u_n^2 / lambda_n + 2 u_n + lambda_n. ``mask``: the N rows of data among
    padded ones (all rows without it).
    """
    quad = masked_rows(inv_lam * u**2 + 2.0 * u + 1.0 / inv_lam, mask)
    n = u.shape[-1] if mask is None else jnp.sum(mask, axis=-1)
    return a0 + 0.5 * n, b0 + 0.5 * jnp.sum(quad, axis=-1)


def gamma_cm_step(
    u_new: Array, u_old: Array, inv_lam: Array, gamma: Array, gamma0: Array, a0: Array, b0: Array
) -> Array:
    """ECM update of gamma under a Ga(a0, b0) prior (Henao et al. 2014, Sec. 3, after eq. 8).

    gamma <- (a0 - 1 + N/2) / (b0 + 1/2 sum_n (E[1/lambda_n] u_n^2 + 2 u_n + E[lambda_n])), with u
    at the new f (``u_new``) and the expectations from the E-step at ``u_old`` and ``gamma``.
    """
    lam = expected_lambda(u_old, gamma, gamma0)
    quad = jnp.sum(inv_lam * u_new**2 + 2.0 * u_new + lam, axis=-1)
    return (a0 - 1.0 + 0.5 * u_new.shape[-1]) / (b0 + 0.5 * quad)


def draw_gamma(key: Array, u: Array, inv_lam: Array, a0: Array, b0: Array, mask: Array | None = None) -> Array:
    """Draw gamma | f, lambda from its Gamma conditional (:func:`gamma_conditional`, eq. 7)."""
    shape, rate = gamma_conditional(u, inv_lam, a0, b0, mask)
    return jax.random.gamma(key, shape, dtype=u.dtype) / rate


def gamma0_conditional(
    inv_lam: Array, shape0: Array, rate0: Array, mask: Array | None = None
) -> tuple[Array, Array]:
    """Shape and rate of gamma0 | lambda ~ Ga(shape0 + N, rate0 + sum_n lambda_n), under the prior
    gamma0 ~ Ga(shape0, rate0) (shape, rate).

    Derivation. In the augmented program (``max_margin_likelihood(..., augmented=True)``) gamma0 is
    the rate of the prior of the augmentation variables and enters nowhere else: the factor
    N(u_n | -lambda_n, lambda_n / gamma) of eq. (5) of Henao et al. (2014) does not contain it. So
    the conditional of gamma0 given everything else (f or the coefficients, lambda, gamma, y) is
    proportional to the prior times the N lambda priors of eq. (6)::

        p(gamma0)                      propto  gamma0^(shape0 - 1) exp(-rate0 gamma0),       (1)
        prod_n Exp(lambda_n | gamma0)  =       gamma0^N exp(-gamma0 sum_n lambda_n),          (2)
        p(gamma0 | rest)  propto (1) x (2) = gamma0^(shape0 + N - 1)
                                             exp(-(rate0 + sum_n lambda_n) gamma0),           (3)

    that is, Ga(shape0 + N, rate0 + sum_n lambda_n) by (3): conjugate, one draw per sweep, depending on
    the rest only through lambda. In the marginal program (lambda integrated out) gamma0 enters the
    skewed Laplace of eq. (4-5) through its normaliser gamma0 / c and c = sqrt(1 + 2 gamma0 / gamma);
    NUTS samples it there, the reference the Gibbs kernels are tested against. ``mask`` (the N rows of
    data among padding rows) restricts the count and the sum.
    """
    lam = masked_rows(1.0 / inv_lam, mask)
    n = inv_lam.shape[-1] if mask is None else jnp.sum(mask, axis=-1)
    return shape0 + n, rate0 + jnp.sum(lam, axis=-1)


def draw_gamma0(key: Array, inv_lam: Array, shape0: Array, rate0: Array, mask: Array | None = None) -> Array:
    """Draw gamma0 | lambda from its Gamma conditional (:func:`gamma0_conditional`, eq. 3 there)."""
    shape, rate = gamma0_conditional(inv_lam, shape0, rate0, mask)
    return jax.random.gamma(key, shape, dtype=inv_lam.dtype) / rate


def log_gamma0_prior(gamma0: Array, shape0: Array, rate0: Array) -> Array:
    """log Ga(gamma0 | shape0, rate0) (shape, rate), as NumPyro's ``Gamma`` site of the program."""
    return (shape0 * jnp.log(rate0) - gammaln(shape0)
            + (shape0 - 1.0) * jnp.log(gamma0) - rate0 * gamma0)


def draw_scales(key: Array, u: Array, inv_lam: Array, gamma: Array, hyper: Any, sample_gamma: bool,
                sample_gamma0: bool, mask: Array | None = None) -> tuple[Array, Array]:
    """The scale step of every augmented sweep, after the model's parameters: gamma | f, lambda
    (:func:`draw_gamma`) when it has a Gamma(``hyper.a0``, ``hyper.b0``) prior, then gamma0 | lambda
    (:func:`draw_gamma0`) when it has a Gamma(``hyper.gamma0_shape``, ``hyper.gamma0_rate``) prior.
    ``u`` = 1 - y f at the new f; ``hyper.gamma0`` is the current gamma0.

    gamma0's key is folded from gamma's, so that runs without a prior on gamma0 draw the same numbers
    as before it existed.

    Returns
    -------
    gamma, gamma0
    """
    gamma0 = hyper.gamma0
    if sample_gamma:
        gamma = draw_gamma(key, u, inv_lam, hyper.a0, hyper.b0, mask)
    if sample_gamma0:
        gamma0 = draw_gamma0(jax.random.fold_in(key, 1), inv_lam, hyper.gamma0_shape, hyper.gamma0_rate, mask)
    return gamma, gamma0


def augmented_sweep(rng_key: Array, x: Array, gamma: Array, y: Array, hyper: Any,
                    margin: Callable[[Array], Array], draw_x: Callable[[Array, Array, Array], Array],
                    sample_gamma: bool, mask: Array | None = None,
                    sample_gamma0: bool = False) -> tuple[Array, Array, Array, Array]:
    """One sweep of a data-augmented max-margin Gibbs sampler (Polson & Scott 2011; Henao et al. 2014,
    eq. 7): lambda | x, gamma, gamma0 (:func:`sample_inv_lambda`), then the model's parameters
    ``x = draw_x(key, inv_lam, gamma)`` given lambda and gamma, then gamma | x, lambda and gamma0 | lambda
    when they have Gamma priors (:func:`draw_scales`).

    ``margin(x)`` is the latent function at the training inputs (``X beta`` for the linear model,
    ``f`` for the GP), so the margin residuals are ``u = 1 - y margin(x)``. ``hyper.gamma0`` is the
    current gamma0. ``mask`` marks the rows of data among padding rows
    (:class:`~bayes_maxmargin.models.linear.model.LinearData`).

    Returns
    -------
    x, inv_lam, gamma, gamma0
    """
    k_lam, k_x, k_gamma = jax.random.split(rng_key, 3)
    inv_lam = sample_inv_lambda(k_lam, 1.0 - y * margin(x), gamma, hyper.gamma0)
    x = draw_x(k_x, inv_lam, gamma)
    gamma, gamma0 = draw_scales(k_gamma, 1.0 - y * margin(x), inv_lam, gamma, hyper, sample_gamma, sample_gamma0,
                                mask)
    return x, inv_lam, gamma, gamma0


def marginal_log_likelihood(f: Array, y: Array, gamma: Array, gamma0: Array, mask: Array | None = None) -> Array:
    """sum_n log sLa(1 - y_n f_n | gamma, gamma0) over the data rows: the pseudo-likelihood with lambda
    integrated out (Henao et al. 2014, eq. 4-5; the hinge exp(-2 gamma max(u, 0)) for gamma0 = 0)."""
    return jnp.sum(masked_rows(log_pseudo_likelihood(1.0 - y * f, gamma, gamma0), mask))


def marginal_log_density(coef: Array, margin: Array, y: Array, log_prior: Callable[[Array], Array], gamma: Array,
                         gamma0: Array, mask: Array | None = None) -> Array:
    """log_prior(coef) + :func:`marginal_log_likelihood` at f = ``margin`` = design @ coef: an augmented
    program's log density in weights that enter f linearly, with lambda integrated out, up to terms
    free of them."""
    return log_prior(coef) + marginal_log_likelihood(margin, y, gamma, gamma0, mask)


class MoveInfo(NamedTuple):
    """What a sweep's moves with lambda integrated out did (:func:`marginal_moves`, :func:`elliptical_moves`,
    :func:`scale_move`): the Info of the Gibbs kernels, recorded per draw in ``sample_stats``.

    Attributes
    ----------
    move_evaluations : Array
        Evaluations of the marginal log density: the slice moves' stepping-out and shrinkage steps, the
        elliptical moves' proposals on the ellipse.
    move_stalled : Array
        Slice moves that accepted no point within their shrinkage steps and kept the current one.
    """

    move_evaluations: Array
    move_stalled: Array

    @classmethod
    def none(cls) -> "MoveInfo":
        """The Info of a sweep without moves."""
        return cls(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    def plus(self, other: "MoveInfo") -> "MoveInfo":
        """The Info of this sweep's moves and ``other``'s together (the counts summed)."""
        return MoveInfo(*(a + b for a, b in zip(self, other)))


def _move_info(info: Any) -> MoveInfo:
    """:class:`MoveInfo` of a :class:`~bayes_maxmargin.core.slice.SliceInfo`."""
    return MoveInfo(jnp.asarray(info.num_evaluations, jnp.int32), jnp.asarray(info.num_stalled, jnp.int32))


def marginal_moves(key: Array, coef: Array, design: Array, y: Array, log_prior: Callable[[Array], Array],
                   gamma: Array, gamma0: Array, basis: Array, mask: Array | None = None) -> tuple[Array, MoveInfo]:
    """Univariate slice moves of ``coef`` along each row of ``basis`` under :func:`marginal_log_density`
    (:func:`~bayes_maxmargin.core.slice.direction_sweep`; the margin kept up to date in O(n) per
    density evaluation).

    Given lambda, points near the margin (lambda_n small) pin f_n to within sqrt(lambda_n / gamma),
    so the weights' conditional is much narrower than their posterior and a sweep of lambda | w,
    w | lambda moves slowly along the posterior's wide directions. These moves integrate lambda out.
    Followed by the sweep's lambda | w draw they form a blocked update of (w, lambda) that leaves the
    augmented program invariant for any fixed basis; with the rows of ``basis`` the whitened
    directions of the weights' posterior (:func:`~bayes_maxmargin.core.slice.adapt_directions`) each
    move is at the posterior's own scale.

    Parameters
    ----------
    key : Array
        PRNG key.
    coef : Array, shape (p,)
        The weights; f = ``design @ coef``.
    design : Array, shape (n, p)
    y : Array, shape (n,)
        Labels in {-1, +1}.
    log_prior : callable
        ``log_prior(coef)``, the weights' log prior given the other parameters.
    gamma, gamma0 : Array
        The hinge scale and the rate of lambda's exponential prior (0: the hinge).
    basis : Array, shape (k, p)
        The directions, one per row.
    mask : Array, optional
        1 for data rows, 0 for padding rows.

    Returns
    -------
    coef : Array, shape (p,)
        The moved weights.
    info : MoveInfo
        The moves' density evaluations and stalled updates, summed over the directions.
    """

    def logdensity(c: Array, margin: Array) -> Array:
        return marginal_log_density(c, margin, y, log_prior, gamma, gamma0, mask)

    coef, _, info = direction_sweep(key, logdensity, coef, design @ coef, basis, design @ basis.T)
    return coef, _move_info(info)


def scale_move(key: Array, log_scale: Array, fixed: Array, scaled: Array, y: Array,
               log_prior: Callable[[Array], Array], gamma: Array = 1.0, gamma0: Array = 0.0,
               mask: Array | None = None, width: float = 1.0, max_steps: int = 4) -> tuple[Array, MoveInfo]:
    """A slice update of t = log s, the scale of a block of weights u = s z, with z fixed and lambda
    integrated out: the ancillary step of an interweaving strategy (Yu & Meng 2011).

    The latent function is f = ``fixed`` + exp(t - t0) ``scaled`` (``scaled`` = the block's part of f
    at the current t0 = ``log_scale``), and t is drawn from

        log_prior(t) + sum_n log sLa(1 - y_n f_n(t) | gamma, gamma0)

    (eq. 4-5; ``log_prior`` is the density of t itself, Jacobian included). Given the weights, the
    conjugate update of a hierarchical variance (sigma_u^2 | u) is pinned by ``||u||``, and u by
    its variance, so the pair moves slowly; moving s with z = u / s fixed changes both at once.
    Each update is O(n) per density evaluation, and it leaves the augmented program invariant when the
    sweep draws lambda afresh before using it.

    Returns
    -------
    t : Array
        The new t; the weights become exp(t - t0) times their current value.
    info : MoveInfo
        The update's density evaluations and whether it stalled.
    """

    def logdensity(t: Array) -> Array:
        return log_prior(t) + marginal_log_likelihood(fixed + jnp.exp(t - log_scale) * scaled, y, gamma, gamma0, mask)

    t, _, info = slice_1d(key, logdensity, log_scale, logdensity(log_scale), jnp.asarray(width, fixed.dtype), max_steps)
    return t, _move_info(info)


#: Elliptical slice updates of f per Gibbs sweep in the GP samplers (GPBSVM's ``marginal_moves``, the factor
#: model's GP classifier): on iris, class 2 against the rest, theta fixed, f's least bulk ESS per draw was 0.09
#: with none, 0.11 with 1, 0.16 with 4, 0.29 with 10.
ELLIPTICAL_STEPS = 10


def elliptical_moves(key: Array, f: Array, chol: Array, y: Array, gamma: Array, gamma0: Array, steps: int,
                     mask: Array | None = None) -> tuple[Array, MoveInfo]:
    """``steps`` elliptical slice updates (Murray, Adams & MacKay 2010; BlackJAX's ``elliptical_proposal``)
    of f ~ N(0, K), K = ``chol`` ``chol``', under the pseudo-likelihood with lambda integrated out,
    prod_n sLa(1 - y_n f_n | gamma, gamma0) (eq. 4-5).

    The GP samplers' remedy for the coupling of f and lambda: given lambda, points near the margin
    pin their f_n, so the conditional draws of f move slowly along the posterior's wide directions,
    which the prior's ellipses follow. Each update leaves p(f | gamma, gamma0, y) invariant; the
    sweep then draws lambda afresh given the new f, which makes the pair a blocked update of
    (f, lambda). One update costs O(n^2) for its prior draw and O(n) per likelihood evaluation,
    against the O(n^3) of the sweep's Gaussian draw. Returns the moved f and the :class:`MoveInfo` of the
    updates (their proposals on the ellipse; an elliptical update never stalls).
    """
    from blackjax.mcmc.elliptical_slice import EllipSliceState, elliptical_proposal

    def loglik(g: Array) -> Array:
        return marginal_log_likelihood(g, y, gamma, gamma0, mask)

    def momentum(k: Array, position: Array) -> Array:
        return chol @ jax.random.normal(k, position.shape, position.dtype)

    update = elliptical_proposal(loglik, momentum, jnp.zeros((), f.dtype))

    def one(i: Array, carry: tuple[EllipSliceState, Array]) -> tuple[EllipSliceState, Array]:
        state, proposals = carry
        state, info = update(jax.random.fold_in(key, i), state)
        return state, proposals + jnp.asarray(info.subiter, jnp.int32)

    state, proposals = jax.lax.fori_loop(0, steps, one, (EllipSliceState(f, loglik(f)), jnp.zeros((), jnp.int32)))
    return state.position, MoveInfo(proposals, jnp.zeros((), jnp.int32))
