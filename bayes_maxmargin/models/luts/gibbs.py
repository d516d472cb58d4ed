"""Gibbs samplers of Luts & Ormerod (2014), Appendices A-C, as kernels for :func:`run_chains`.

Each kernel has the library's signature ``kernel(rng_key, state, data, hyper) -> (state, None)``
and targets the augmented program of :mod:`bayes_maxmargin.models.luts.model` (its ``log_joint`` is that
program's log density, tested). The updates shared with every other model come from
:mod:`bayes_maxmargin.core.augmentation`:

* a_i | rest ~ GIG(1/2, 1, (1 - y_i f_i)^2), drawn as 1 / a_i ~ Inverse-Gaussian(1 / ``|1 - y_i f_i|``, 1)
  (:func:`~bayes_maxmargin.core.augmentation.sample_inv_lambda` with gamma = 1, gamma0 = 0);
* the coefficients | rest ~ N(P^-1 C' Y (1 + a^-1), P^-1), P = C' diag(a^-1) C + prior precision
  (:func:`~bayes_maxmargin.core.augmentation.gaussian_conditional`, one Cholesky of P).

Appendix A (penalty / random effects): (beta, u), sigma_u^2 ~ IG(A_u + m/2, B_u + ||u||^2 / 2), a.
Appendix B (Laplace-zero): (beta, v) with design C diag(gamma~), sigma_u^2, a,
b_k ~ Inverse-Gaussian(sigma_u / ``|v_k|``, 1), and gamma_k one at a time (each given gamma_{-k}),
in O(n) each (:func:`draw_inclusions`).
Appendix C (missing predictors): (beta, u), sigma_u^2, a, mu, Sigma ~ IW, and the missing entries
of each d_i from their Gaussian conditional given the observed ones.

With more coefficients than points (``wide=True``) the Gaussian draws of Appendices A and B use the
n-dimensional form (Bhattacharya, Chakraborty & Mallick 2016): O(n^2 p) per sweep, no p x p matrix.

With a state built by ``init_*(..., directions=True)`` each sweep starts with two moves that
integrate a out, then draws a afresh, so that each is half of a blocked update and the kernel keeps
its target:

* slice moves of the coefficients along the whitened directions of their posterior, estimated over
  the first ``hyper.adapt_steps`` sweeps and fixed afterwards, under the hinge exp(-2 max(1 - y_i f_i, 0))
  times their Gaussian prior given the other parameters
  (:func:`~bayes_maxmargin.core.augmentation.marginal_moves`; the linear sampler's remedy for the slow
  mixing that near-margin points cause, :mod:`bayes_maxmargin.models.linear.gibbs`);
* a slice move of sigma_u with u / sigma_u fixed (:func:`~bayes_maxmargin.core.augmentation.scale_move`),
  the ancillary half of an interweaving with the conjugate sigma_u^2 | u step (Yu & Meng 2011): u
  and its variance pin each other, and the pair moves together here.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax import Array
from jax.scipy.linalg import cho_solve, solve_triangular

from bayes_maxmargin.core.augmentation import (
    MoveInfo,
    augmented_log_likelihood,
    expected_inv_lambda,
    gaussian_conditional,
    margin_floor,
    marginal_moves,
    prior_gram,
    sample_conditional,
    sample_gaussian,
    sample_inv_lambda,
    sample_wide_gaussian,
    scale_move,
    wide_gaussian_conditional,
)
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.distributions import InverseGaussian
from bayes_maxmargin.core.slice import Directions, adapt_directions, init_directions
from bayes_maxmargin.models.luts.model import ImputationHyper, LutsHyper, MissingData, MixedData
from bayes_maxmargin.models.luts.vb import masked_gaussian

__all__ = ["LaplaceZeroGibbsState", "MissingGibbsState", "MixedGibbsState", "build_laplace_zero_kernel",
           "build_missing_kernel", "build_mixed_kernel", "draw_inclusions", "init_laplace_zero", "init_missing",
           "init_mixed", "laplace_zero_conditional", "laplace_zero_log_joint", "missing_log_joint", "mixed_log_joint",
           "record_laplace_zero", "record_missing", "record_mixed"]


# ============================================================================ shared pieces
def _normal_logpdf(x: Array, var: Array) -> Array:
    return jnp.sum(dist.Normal(0.0, jnp.sqrt(var)).log_prob(x))


def _log_ig(x: Array, A: Array, B: Array) -> Array:
    """log IG(x | A, B) (the paper's inverse gamma, shape A and scale B)."""
    return jnp.sum(dist.InverseGamma(A, B).log_prob(x))


def draw_inverse_gamma(key: Array, A: Array, B: Array) -> Array:
    """One draw of IG(A, B): B / Gamma(A, 1)."""
    return B / jax.random.gamma(key, A, dtype=jnp.result_type(B))


def _hinge_aug(f: Array, y: Array, inv_lam: Array) -> Array:
    return jnp.sum(augmented_log_likelihood(1.0 - y * f, inv_lam, 1.0))


def _design(data: MixedData) -> Array:
    return jnp.concatenate([data.X, data.Z], axis=1)


def _coef_log_prior(coef: Array, p: int, sigma_beta2: Array, sigma_u2: Array) -> Array:
    """log N(beta | 0, sigma_beta^2) + log N(u | 0, sigma_u^2) of coef = [beta (p), u] (Appendices A, C)."""
    return _normal_logpdf(coef[:p], sigma_beta2) + _normal_logpdf(coef[p:], sigma_u2)


def _moved(rng_key: Array, coef: Array, p: int, sigma_u2: Array, design: Array, y: Array, log_prior,
           hyper: LutsHyper, directions: Directions | None) -> tuple[Array, Array, MoveInfo]:
    """(coef = [beta (p), u], sigma_u^2, their MoveInfo) after the moves with a integrated out (none without
    ``directions``): the directional moves of coef, then the scale move of (sigma_u, u) with u / sigma_u
    fixed (:func:`~bayes_maxmargin.core.augmentation.scale_move`, under sigma_u^2's IG(A_u, B_u) prior).
    The keys are folded from the sweep's, so a sweep without the moves draws what it drew before them."""
    if directions is None:
        return coef, sigma_u2, MoveInfo.none()
    coef, info = marginal_moves(jax.random.fold_in(rng_key, 7), coef, design, y, log_prior, 1.0, 0.0, directions.basis)
    t0 = 0.5 * jnp.log(sigma_u2)

    def log_prior_t(t: Array) -> Array:  # t = log sigma_u: IG density of sigma_u^2 = e^{2t} times d sigma_u^2 / dt
        return _log_ig(jnp.exp(2.0 * t), hyper.A_u, hyper.B_u) + 2.0 * t

    t, scaled = scale_move(jax.random.fold_in(rng_key, 8), t0, design[:, :p] @ coef[:p], design[:, p:] @ coef[p:], y,
                           log_prior_t)
    return coef.at[p:].multiply(jnp.exp(t - t0)), jnp.exp(2.0 * t), info.plus(scaled)


def _adapted(directions: Directions | None, coef: Array, hyper: LutsHyper) -> Directions | None:
    return None if directions is None else adapt_directions(directions, coef, hyper.adapt_steps)


def _start_directions(coef: Array, directions: bool) -> Directions | None:
    return init_directions(coef.shape[-1], coef.dtype) if directions else None


# ============================================================================ Appendix A
class MixedGibbsState(NamedTuple):
    """State of the Appendix A sampler (one chain).

    Attributes
    ----------
    coef : Array, shape (p + m,)
        [beta, u].
    inv_lam : Array, shape (n,)
        1 / a_i.
    sigma_u2 : Array
        sigma_u^2.
    log_joint : Array
        Log density of the augmented program :func:`~bayes_maxmargin.models.luts.model.mixed_bsvm` here.
    directions : Directions or None
        The basis of the directional moves and its warm-up moments (None without them).
    """

    coef: Array
    inv_lam: Array
    sigma_u2: Array
    log_joint: Array
    directions: Directions | None = None


def mixed_log_joint(coef: Array, inv_lam: Array, sigma_u2: Array, data: MixedData, hyper: LutsHyper) -> Array:
    """Log density of ``mixed_bsvm(..., augmented=True)`` at (beta, u, sigma_u2, a = 1 / inv_lam)."""
    f = _design(data) @ coef
    return (
        _coef_log_prior(coef, data.X.shape[1], hyper.sigma_beta2, sigma_u2)
        + _log_ig(sigma_u2, hyper.A_u, hyper.B_u)
        + _hinge_aug(f, data.y, inv_lam)
    )


@functools.partial(jit, static_argnames="directions")
def init_mixed(coef: Array, sigma_u2: Array, data: MixedData, hyper: LutsHyper,
               directions: bool = False) -> MixedGibbsState:
    """A state at (coef, sigma_u2) with 1 / a at its conditional mean and, with ``directions``, the
    coordinate axes as the moves' basis."""
    inv_lam = expected_inv_lambda(1.0 - data.y * (_design(data) @ coef), 1.0, 0.0)
    sigma_u2 = jnp.asarray(sigma_u2, coef.dtype)
    return MixedGibbsState(coef, inv_lam, sigma_u2, mixed_log_joint(coef, inv_lam, sigma_u2, data, hyper),
                           _start_directions(coef, directions))


@functools.cache
def build_mixed_kernel(overrelaxation: float = 0.0, wide: bool = False):
    """The Gibbs kernel of Appendix A (Luts & Ormerod 2014) for model (5) with Sigma = sigma_u^2 I.

    Each sweep starts with the directional moves of (beta, u), a integrated out (module docstring),
    when the state carries their basis (``init_mixed(..., directions=True)``).

    Parameters
    ----------
    overrelaxation : float
        Adler overrelaxation of the (beta, u) draw (:func:`~bayes_maxmargin.core.augmentation.sample_gaussian`);
        0 is the plain Gibbs draw of the appendix.
    wide : bool
        Draw (beta, u) in its n-dimensional form (Bhattacharya, Chakraborty & Mallick 2016;
        :func:`~bayes_maxmargin.core.augmentation.sample_wide_gaussian`), O(n^2 (p + m)) instead of
        O(n (p + m)^2 + (p + m)^3), for p + m > n: the same conditional, other random numbers. The prior
        covariance of f is X X' sigma_beta^2 + sigma_u^2 Z Z', with Z Z' fixed over the iterations.
    """

    def kernel(rng_key: Array, state: MixedGibbsState, data: MixedData, hyper: LutsHyper):
        k_lam, k_coef, k_s2 = jax.random.split(rng_key, 3)
        C = _design(data)
        p, m = data.X.shape[1], data.Z.shape[1]
        dtype = C.dtype
        coef, sigma_u2, moved = _moved(rng_key, state.coef, p, state.sigma_u2, C, data.y,
                                       lambda c: _coef_log_prior(c, p, hyper.sigma_beta2, state.sigma_u2), hyper,
                                       state.directions)
        inv_lam = sample_inv_lambda(k_lam, 1.0 - data.y * (C @ coef), 1.0, 0.0)
        prior_prec = jnp.concatenate(
            [jnp.broadcast_to(1.0 / hyper.sigma_beta2, (p,)).astype(dtype), jnp.full((m,), 1.0 / sigma_u2, dtype)]
        )
        gram = prior_gram(data.X, prior_prec[:p]) + sigma_u2 * (data.Z @ data.Z.T) if wide else None
        coef = sample_conditional(k_coef, C, data.y, inv_lam, 1.0, prior_prec, wide, coef, overrelaxation, gram)
        u = coef[p:]
        sigma_u2 = draw_inverse_gamma(k_s2, hyper.A_u + 0.5 * m, hyper.B_u + 0.5 * jnp.sum(u**2))
        log_joint = mixed_log_joint(coef, inv_lam, sigma_u2, data, hyper)
        basis = _adapted(state.directions, coef, hyper)
        return MixedGibbsState(coef, inv_lam, sigma_u2, log_joint, basis), moved

    return kernel


def record_mixed(state: MixedGibbsState) -> dict[str, Array]:
    """Per draw: coefficients, sigma_u^2 and the log joint (the a_i are not stored)."""
    return {"coef": state.coef, "sigma_u2": state.sigma_u2, "log_joint": state.log_joint}


# ============================================================================ Appendix B
class LaplaceZeroGibbsState(NamedTuple):
    """State of the Appendix B sampler (one chain).

    Attributes
    ----------
    beta : Array, shape (p,)
    v : Array, shape (m,)
    gamma : Array, shape (m,)
        Inclusion indicators (0.0 / 1.0); u = gamma * v.
    b : Array, shape (m,)
        Scale-mixture variables of the Laplace prior.
    sigma_u2 : Array
    inv_lam : Array, shape (n,)
    log_joint : Array
        Log density of ``laplace_zero_bsvm(..., augmented=True)`` here.
    directions : Directions or None
        The basis of the directional moves of (beta, v) and its warm-up moments (None without them).
    """

    beta: Array
    v: Array
    gamma: Array
    b: Array
    sigma_u2: Array
    inv_lam: Array
    log_joint: Array
    directions: Directions | None = None


def laplace_zero_log_joint(
    beta: Array, v: Array, gamma: Array, b: Array, sigma_u2: Array, inv_lam: Array, data: MixedData, hyper: LutsHyper
) -> Array:
    """Log density of ``laplace_zero_bsvm(..., augmented=True)``.

    The m terms of (b_k, v_k, gamma_k) in closed form, one logarithm each: log IG(b | 1, 1/2) +
    log N(v | 0, sigma_u^2 / b) = -3/2 log b - 1/(2 b) - b v^2 / (2 sigma_u^2) + log(1/2) - log(2 pi sigma_u^2) / 2,
    and sum log Bernoulli(gamma | rho) = k log rho + (m - k) log(1 - rho), k = sum gamma.
    """
    f = data.X @ beta + data.Z @ (gamma * v)
    m = v.shape[0]
    k = jnp.sum(gamma)
    per_feature = jnp.sum(-1.5 * jnp.log(b) - 0.5 / b - 0.5 * b * v**2 / sigma_u2)
    constants = m * (jnp.log(0.5) - 0.5 * jnp.log(2.0 * jnp.pi * sigma_u2))
    return (
        _normal_logpdf(beta, hyper.sigma_beta2)
        + _log_ig(sigma_u2, hyper.A_u, hyper.B_u)
        + per_feature + constants
        + k * jnp.log(hyper.rho) + (m - k) * jnp.log1p(-hyper.rho)
        + _hinge_aug(f, data.y, inv_lam)
    )


@functools.partial(jit, static_argnames="directions")
def init_laplace_zero(
    beta: Array, v: Array, gamma: Array, sigma_u2: Array, data: MixedData, hyper: LutsHyper, directions: bool = False
) -> LaplaceZeroGibbsState:
    """A state at (beta, v, gamma, sigma_u2) with b and 1 / a at their conditional means and, with
    ``directions``, the coordinate axes as the moves' basis."""
    dtype = beta.dtype
    sigma_u2 = jnp.asarray(sigma_u2, dtype)
    gamma = jnp.asarray(gamma, dtype)
    b = jnp.sqrt(sigma_u2) / jnp.maximum(jnp.abs(v), margin_floor(dtype))
    f = data.X @ beta + data.Z @ (gamma * v)
    inv_lam = expected_inv_lambda(1.0 - data.y * f, 1.0, 0.0)
    lj = laplace_zero_log_joint(beta, v, gamma, b, sigma_u2, inv_lam, data, hyper)
    return LaplaceZeroGibbsState(beta, v, gamma, b, sigma_u2, inv_lam, lj,
                                 _start_directions(jnp.concatenate([beta, v]), directions))


def laplace_zero_conditional(C: Array, y: Array, gamma: Array, inv_lam: Array, prior_prec: Array, wide: bool):
    """(beta, v) | rest of Appendix B: the Gaussian conditional of the design C diag(gamma~), gamma~ =
    [1_p, gamma] (an excluded v_k keeps its prior N(0, 1 / prior_prec_k)).

    P = diag(gamma~) C' diag(a^-1) C diag(gamma~) + diag(prior_prec), mean P^-1 diag(gamma~) C' (1 + a^-1) y:
    a :class:`~bayes_maxmargin.core.augmentation.GaussianConditional`, or with ``wide`` its n-dimensional
    form (:func:`~bayes_maxmargin.core.augmentation.wide_gaussian_conditional`, O(n^2 (p + m)) with the
    prior Gram matrix of this design, which moves with gamma, b and sigma_u^2).
    """
    g = jnp.concatenate([jnp.ones((C.shape[1] - gamma.shape[0],), C.dtype), gamma])
    design = C * g
    if wide:
        return wide_gaussian_conditional(design, y, inv_lam, 1.0, prior_prec, prior_gram(design, prior_prec))
    return gaussian_conditional(design, y, inv_lam, 1.0, prior_prec)


def draw_inclusions(key: Array, gamma: Array, v: Array, fixed: Array, data: MixedData, inv_lam: Array,
                    rho: Array) -> Array:
    """gamma_k | rest ~ Bernoulli(expit(eta_k)), k = 1..m in turn (Appendix B), in O(n m)::

        eta_k = logit(rho) - 1/2 Z_k' diag(a^-1) Z_k v_k^2 + v_k Z_k' diag(1 + a^-1) y
                - v_k Z_k' diag(a^-1) (X beta + Z_-k diag(gamma_-k) v_-k),

    with ``fixed`` = X beta. With the running r = Z diag(gamma) v (n values, updated after each k) the
    last term is v_k Z_k' diag(a^-1) r less the k-th term: no m x m matrix Z' diag(a^-1) Z. gamma_k = 1
    where u_k < expit(eta_k), i.e. logit(u_k) < eta_k, u_k the uniform of
    ``jax.random.bernoulli(fold_in(key, k), .)``, drawn for all k together.
    """
    Z, y = data.Z, data.y
    dtype = Z.dtype
    A = Z * inv_lam[:, None]  # diag(a^-1) Z
    zwz = jnp.sum(A * Z, axis=0)  # Z_k' diag(a^-1) Z_k
    # eta_k = base_k - v_k Z_k' diag(a^-1) r, with r at step k
    base = (jnp.log(rho) - jnp.log1p(-rho) - 0.5 * zwz * v**2 + v * (Z.T @ (y * (1.0 + inv_lam)))
            - v * (A.T @ fixed) + zwz * v**2 * gamma)
    u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(key, k), (), dtype))(jnp.arange(v.shape[0]))

    def update(r, xs):  # the step of every k: a sum and a comparison (no exp), a quarter faster
        zv, av, b, old, threshold = xs
        new = (threshold < b - jnp.sum(av * r)).astype(dtype)
        return r + zv * (new - old), new

    xs = (Z.T * v[:, None], A.T * v[:, None], base, gamma, jnp.log(u) - jnp.log1p(-u))
    return jax.lax.scan(update, Z @ (gamma * v), xs)[1]


@functools.cache
def build_laplace_zero_kernel(wide: bool = False):
    """The Gibbs kernel of Appendix B (Luts & Ormerod 2014): Laplace-zero prior on the Z coefficients.

    One sweep: a | rest; (beta, v) | rest with the design C diag(gamma~) (an excluded v_k is drawn
    from its prior N(0, sigma_u^2 / b_k); :func:`laplace_zero_conditional`); sigma_u^2 | rest ~
    IG(A_u + m/2, B_u + v' diag(b) v / 2); b_k | rest ~ Inverse-Gaussian(sigma_u / ``|v_k|``, 1); then
    gamma_k | rest, k = 1..m in turn (:func:`draw_inclusions`). It starts with the directional moves
    of (beta, v), a integrated out, under the design C diag(gamma~) and v's prior N(0, sigma_u^2 / b)
    (module docstring), when the state carries their basis (``init_laplace_zero(..., directions=True)``).

    Parameters
    ----------
    wide : bool
        Draw (beta, v) in its n-dimensional form (Bhattacharya, Chakraborty & Mallick 2016;
        :func:`~bayes_maxmargin.core.augmentation.sample_wide_gaussian`), O(n^2 (p + m)) instead of
        O(n (p + m)^2 + (p + m)^3), for p + m > n: the same conditional, other random numbers.
    """

    def kernel(rng_key: Array, state: LaplaceZeroGibbsState, data: MixedData, hyper: LutsHyper):
        k_lam, k_coef, k_s2, k_b, k_g = jax.random.split(rng_key, 5)
        X, Z, y = data
        p, m = X.shape[1], Z.shape[1]
        dtype = X.dtype
        included = _design(data) * jnp.concatenate([jnp.ones((p,), dtype), state.gamma])  # C diag(gamma~)

        def log_prior(c: Array) -> Array:
            return _normal_logpdf(c[:p], hyper.sigma_beta2) + _normal_logpdf(c[p:], state.sigma_u2 / state.b)

        coef, sigma_u2, moved = _moved(rng_key, jnp.concatenate([state.beta, state.v]), p, state.sigma_u2,
                                       included, y, log_prior, hyper, state.directions)
        inv_lam = sample_inv_lambda(k_lam, 1.0 - y * (included @ coef), 1.0, 0.0)
        prior_prec = jnp.concatenate([jnp.broadcast_to(1.0 / hyper.sigma_beta2, (p,)).astype(dtype),
                                      state.b / sigma_u2])
        cond = laplace_zero_conditional(_design(data), y, state.gamma, inv_lam, prior_prec, wide)
        coef = (sample_wide_gaussian if wide else sample_gaussian)(k_coef, cond)
        beta, v = coef[:p], coef[p:]
        sigma_u2 = draw_inverse_gamma(k_s2, hyper.A_u + 0.5 * m, hyper.B_u + 0.5 * jnp.sum(state.b * v**2))
        b = InverseGaussian(jnp.sqrt(sigma_u2) / jnp.maximum(jnp.abs(v), margin_floor(dtype)), 1.0).sample(k_b)
        gamma = draw_inclusions(k_g, state.gamma, v, X @ beta, data, inv_lam, hyper.rho)
        lj = laplace_zero_log_joint(beta, v, gamma, b, sigma_u2, inv_lam, data, hyper)
        basis = _adapted(state.directions, coef, hyper)
        return LaplaceZeroGibbsState(beta, v, gamma, b, sigma_u2, inv_lam, lj, basis), moved

    return kernel


def record_laplace_zero(state: LaplaceZeroGibbsState) -> dict[str, Array]:
    """Per draw: beta, gamma (as int8), u = gamma v, sigma_u^2 and the log joint (v itself is not stored:
    where gamma_k = 0 it is a draw of its prior, and m values per draw weigh on wide data)."""
    return {
        "beta": state.beta, "gamma": state.gamma.astype(jnp.int8), "u": state.gamma * state.v,
        "sigma_u2": state.sigma_u2, "log_joint": state.log_joint,
    }


# ============================================================================ Appendix C
class MissingGibbsState(NamedTuple):
    """State of the Appendix C sampler (one chain).

    Attributes
    ----------
    coef : Array, shape (1 + d,)
        [beta, u].
    D : Array, shape (n, d)
        Predictors with the current draws at the missing entries.
    inv_lam : Array, shape (n,)
    sigma_u2 : Array
    mu : Array, shape (d,)
    Sigma : Array, shape (d, d)
    log_joint : Array
        Log density of ``missing_bsvm(..., augmented=True)`` here.
    directions : Directions or None
        The basis of the directional moves and its warm-up moments (None without them).
    """

    coef: Array
    D: Array
    inv_lam: Array
    sigma_u2: Array
    mu: Array
    Sigma: Array
    log_joint: Array
    directions: Directions | None = None


def missing_log_joint(
    coef: Array, D: Array, inv_lam: Array, sigma_u2: Array, mu: Array, Sigma: Array,
    data: MissingData, hyper: LutsHyper, imp: ImputationHyper,
) -> Array:
    """Log density of ``missing_bsvm(..., augmented=True)`` (D complete: observed and drawn entries)."""
    d = D.shape[1]
    f = coef[0] + D @ coef[1:]
    return (
        _normal_logpdf(mu, imp.sigma_mu2)
        + dist.InverseWishart(imp.nu, scale_matrix=imp.Psi).log_prob(Sigma)
        + jnp.sum(dist.MultivariateNormal(mu, Sigma).log_prob(D))
        + _coef_log_prior(coef, 1, hyper.sigma_beta2, jnp.full((d,), sigma_u2))
        + _log_ig(sigma_u2, hyper.A_u, hyper.B_u)
        + _hinge_aug(f, data.y, inv_lam)
    )


@functools.partial(jit, static_argnames="directions")
def init_missing(coef: Array, data: MissingData, hyper: LutsHyper, imp: ImputationHyper,
                 directions: bool = False) -> MissingGibbsState:
    """A state at ``coef`` with the missing entries at their column's observed mean, mu and Sigma
    the observed means and (diagonal) variances, sigma_u^2 = 1, 1 / a at its conditional mean and,
    with ``directions``, the coordinate axes as the moves' basis."""
    D, obs, y = data
    count = jnp.sum(obs, axis=0)
    col_mean = jnp.sum(obs * D, axis=0) / count
    col_var = jnp.sum(obs * (D - col_mean) ** 2, axis=0) / count
    Sigma = jnp.diag(jnp.where(col_var > 0, col_var, 1.0))
    D = obs * D + (1.0 - obs) * col_mean
    inv_lam = expected_inv_lambda(1.0 - y * (coef[0] + D @ coef[1:]), 1.0, 0.0)
    s2 = jnp.ones((), coef.dtype)
    lj = missing_log_joint(coef, D, inv_lam, s2, col_mean, Sigma, data, hyper, imp)
    return MissingGibbsState(coef, D, inv_lam, s2, col_mean, Sigma, lj, _start_directions(coef, directions))


@functools.cache
def build_missing_kernel():
    """The Gibbs kernel of Appendix C (Luts & Ormerod 2014): missing predictors, normal / IW imputation.

    One sweep: a | rest; (beta, u) | rest with C = [1, D]; sigma_u^2 | rest ~ IG(A_u + d/2,
    B_u + ||u||^2 / 2); mu | rest ~ N((n Sigma^-1 + sigma_mu^-2 I)^-1 n Sigma^-1 dbar, (...)^-1);
    Sigma | rest ~ IW(Psi + sum_i (d_i - mu)(d_i - mu)', nu + n); then for every row with missing
    entries, d_i,M_i | rest ~ N(G_MM^-1 P'(h - G Q Q' d_i), G_MM^-1) with
    G = Sigma^-1 + a_i^-1 u u' and h = Sigma^-1 mu + y_i (1 + a_i^-1) u - a_i^-1 beta u.

    The kernel's ``hyper`` argument is the pair ``(LutsHyper, ImputationHyper)``. Each sweep starts
    with the directional moves of (beta, u) given D, a integrated out (module docstring), when the
    state carries their basis (``init_missing(..., directions=True)``).
    """

    def kernel(rng_key: Array, state: MissingGibbsState, data: MissingData, hypers: tuple[LutsHyper, ImputationHyper]):
        hyper, imp = hypers
        k_lam, k_coef, k_s2, k_mu, k_sig, k_d = jax.random.split(rng_key, 6)
        _, obs, y = data
        D = state.D
        n, d = D.shape
        dtype = D.dtype
        C = jnp.concatenate([jnp.ones((n, 1), dtype), D], axis=1)
        coef, sigma_u2, moved = _moved(rng_key, state.coef, 1, state.sigma_u2, C, y,
                                       lambda c: _coef_log_prior(c, 1, hyper.sigma_beta2, state.sigma_u2), hyper,
                                       state.directions)
        inv_lam = sample_inv_lambda(k_lam, 1.0 - y * (C @ coef), 1.0, 0.0)
        prior_prec = jnp.concatenate(
            [jnp.full((1,), 1.0 / hyper.sigma_beta2, dtype), jnp.full((d,), 1.0 / sigma_u2, dtype)]
        )
        coef = sample_gaussian(k_coef, gaussian_conditional(C, y, inv_lam, 1.0, prior_prec))
        beta, u = coef[0], coef[1:]
        sigma_u2 = draw_inverse_gamma(k_s2, hyper.A_u + 0.5 * d, hyper.B_u + 0.5 * jnp.sum(u**2))
        eye = jnp.eye(d, dtype=dtype)
        K = cho_solve((jnp.linalg.cholesky(state.Sigma), True), eye)  # Sigma^-1 (enters a precision sum)
        prec_mu = n * K + eye / imp.sigma_mu2
        L_mu = jnp.linalg.cholesky(prec_mu)
        mean_mu = cho_solve((L_mu, True), K @ jnp.sum(D, axis=0))
        mu = mean_mu + solve_triangular(L_mu, jax.random.normal(k_mu, (d,), dtype), lower=True, trans="T")
        resid = D - mu
        Sigma = dist.InverseWishart(imp.nu + n, scale_matrix=imp.Psi + resid.T @ resid).sample(k_sig)
        Sigma = 0.5 * (Sigma + Sigma.T)
        K = cho_solve((jnp.linalg.cholesky(Sigma), True), eye)

        def one_row(key, d_i, obs_i, w_i, y_i):
            G = K + w_i * jnp.outer(u, u)
            h = K @ mu + y_i * (1.0 + w_i) * u - w_i * beta * u
            mean_i, chol_i = masked_gaussian(G, h, d_i, obs_i)
            z = jax.random.normal(key, (d,), dtype)
            return mean_i + (1.0 - obs_i) * solve_triangular(chol_i, z, lower=True, trans="T")

        D = jax.vmap(one_row)(jax.random.split(k_d, n), D, obs, inv_lam, y)
        lj = missing_log_joint(coef, D, inv_lam, sigma_u2, mu, Sigma, data, hyper, imp)
        basis = _adapted(state.directions, coef, hyper)
        return MissingGibbsState(coef, D, inv_lam, sigma_u2, mu, Sigma, lj, basis), moved

    return kernel


def record_missing(state: MissingGibbsState) -> dict[str, Array]:
    """Per draw: coefficients, sigma_u^2, mu, Sigma, the completed D and the log joint."""
    return {
        "coef": state.coef, "sigma_u2": state.sigma_u2, "mu": state.mu, "Sigma": state.Sigma,
        "D": state.D, "log_joint": state.log_joint,
    }
