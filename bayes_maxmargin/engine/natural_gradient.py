"""The natural-gradient algebra of the hinge's variational bound (Wenzel, Galy-Fajou, Deutsch & Kloft 2017).

Pure functions of the global Gaussian q(v) and a minibatch: its moments, the local alpha of Alg. 1
(line 7), the natural-gradient targets (eq. 9-10), the ELBO (eq. 8), the ML-II objective with q held
fixed (eq. 12) and the Optax step-size transformations. The host loop that streams data through them
is :mod:`bayes_maxmargin.engine.svi`.

One shared step serves the GP and the linear model: every model here is a global Gaussian
q(v) = N(mu, zeta) with prior N(0, P0^-1) seen through per-point features, f_i = phi_i' v + e_i with
e_i ~ N(0, ktilde_i) independent of v. For the GP, v = L^-1 u is the whitened inducing vector
(K_mm = L L', p(v) = N(0, I)) with phi_i = L^-1 K_mi, so phi_i' v = kappa_i u, and
ktilde_i = K_ii - ||phi_i||^2 = Ktilde_ii of eq. (6). For the linear model phi_i = x_i,
ktilde_i = 0 and P0 = Sigma^-1. The natural parameters of q(v) and of q(u) are linked by the fixed
linear map u = L v (eta1_u = L^-T eta1_v, eta2_u = L^-T eta2_v L^-1); the convex combination of
Alg. 1 lines 11-12 commutes with it, so the iterates are exactly the paper's while no inverse of
K_mm is ever formed.

With hinge scale gamma (exp(-2 gamma max(1 - y f, 0)), gamma = 1 in the paper),
q(lambda_i) = GIG(1/2, gamma, gamma alpha_i) with alpha_i = E_q[(1 - y_i f_i)^2] (Alg. 1, line 7),
E_q[1 / lambda_i] = alpha_i^(-1/2), and the targets of the natural-gradient step are::

    eta1_hat = gamma N/|S| sum_{i in S} y_i (alpha_i^(-1/2) + 1) phi_i               (eq. 9)
    eta2_hat = -1/2 (P0 + gamma N/|S| sum_{i in S} alpha_i^(-1/2) phi_i phi_i')       (eq. 10)

The natural gradient is eta_hat - eta, and eta <- eta + rho_t (eta_hat - eta) is a convex
combination of negative-definite eta2, so zeta stays positive definite by construction. The step
is an Optax gradient transformation applied to the natural gradient (:func:`natural_gradient_ascent`).

ELBO (eq. 8). At the alpha of line 7 the lambda-integrals have the closed form
E_q[log p(y_i, lambda_i | u)] - E_q[log q(lambda_i)] = -gamma (1 - y_i m_i) - gamma sqrt(alpha_i)
(log K_{1/2}(x) = log(pi / 2) / 2 - log x / 2 - x), so

    L(q) = -gamma sum_i [(1 - y_i m_i) + sqrt(alpha_i)] - KL(q(u) || p(u)),

m_i = kappa_i mu. This is eq. (8) with its Bessel terms written out; it is the bound Alg. 1 ascends
(alpha is always at its optimum when it is evaluated) and its gradient in (mu, zeta) is the partial
gradient at fixed alpha (the envelope theorem), so the natural gradient (9)-(10) is the natural
gradient of this function (``tests/test_svi.py`` checks it against autodiff and the Fisher matrix).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from jax.scipy.linalg import solve_triangular

from bayes_maxmargin.core.augmentation import margin_floor, vb_hinge_bound
from bayes_maxmargin.core.linalg import jittered_cholesky

__all__ = ["AdaptiveRateState", "Features", "FixedQ", "NatParams", "adaptive_rate", "check_schedule", "elbo",
           "fixed_q", "from_moments", "gradient_and_hinge", "hinge_terms", "kl_to_prior", "latent_moments",
           "local_alpha", "mlii_objective", "moments", "natural_gradient", "natural_gradient_ascent",
           "natural_targets", "remap", "robbins_monro", "triangular_inverse"]


# ============================================================================ the global Gaussian
class NatParams(NamedTuple):
    """Natural parameters of q(v) = N(mu, zeta): eta1 = zeta^-1 mu, eta2 = -zeta^-1 / 2."""

    eta1: Array
    eta2: Array


class Features(NamedTuple):
    """A minibatch seen through the model: f_i = phi_i' v + e_i, e_i ~ N(0, ktilde_i).

    Attributes
    ----------
    phi : Array, shape (B, m)
        kappa_i in whitened coordinates (GP: L^-1 K_mi) or the inputs (linear model).
    ktilde : Array, shape (B,)
        Ktilde_ii = K_ii - K_im K_mm^-1 K_mi of eq. (6) (GP), 0 for the linear model.
    """

    phi: Array
    ktilde: Array


def from_moments(mu: Array, prec: Array) -> NatParams:
    """Natural parameters of N(mu, prec^-1)."""
    return NatParams(prec @ mu, -0.5 * prec)


def triangular_inverse(L: Array) -> Array:
    """L^-1 of a lower-triangular factor by one triangular solve.

    The hot loop multiplies by inverse Cholesky factors instead of calling a triangular solve per
    minibatch: on XLA:CPU a solve against an m x ``|S|`` right-hand side is several times slower than
    the matrix product at the sizes of SVI (m ~ 10-1000), and the factor's inverse is formed once
    per step (q) or per hyperparameter change (K_mm). Both are well conditioned (K_mm carries its
    jitter; the precision of q(v) is at least the identity for the GP)."""
    return solve_triangular(L, jnp.eye(L.shape[0], dtype=L.dtype), lower=True)


def moments(nat: NatParams) -> tuple[Array, Array]:
    """Mean mu and R = L^-1, L the lower Cholesky factor of the precision zeta^-1 = -2 eta2
    (zeta = R' R)."""
    L, _ = jittered_cholesky(-2.0 * nat.eta2)
    R = triangular_inverse(L)
    return R.T @ (R @ nat.eta1), R


def latent_moments(nat: NatParams, feats: Features) -> tuple[Array, Array]:
    """Mean m_i = phi_i' mu and variance phi_i' zeta phi_i + ktilde_i of f_i under q."""
    mu, R = moments(nat)
    return _latent(mu, R.T, feats)


def _latent(mu: Array, F: Array, feats: Features) -> tuple[Array, Array]:
    """Mean and variance of f_i when q(v) = N(mu, F F')."""
    return feats.phi @ mu, jnp.sum((feats.phi @ F) ** 2, axis=1) + feats.ktilde


def local_alpha(mean: Array, var: Array, y: Array) -> Array:
    """alpha_i = (1 - y_i kappa_i mu)^2 + kappa_i zeta kappa_i' + Ktilde_ii (Alg. 1, line 7; Sec. 4.1),
    floored like every ``|1 - y f|`` of the library (:func:`~bayes_maxmargin.core.augmentation.margin_floor`)."""
    return jnp.maximum((1.0 - y * mean) ** 2 + var, margin_floor(mean.dtype) ** 2)


def natural_targets(
    alpha: Array, feats: Features, y: Array, scale: Array, gamma: Array, prior_prec: Array
) -> NatParams:
    """eta_hat of Alg. 1, lines 9-10 (eq. 9-10), the minibatch sums scaled by ``scale`` = N / ``|S|``."""
    w = alpha ** -0.5  # E_q[1 / lambda_i]
    eta1 = gamma * scale * (feats.phi.T @ (y * (w + 1.0)))
    gram = (feats.phi * w[:, None]).T @ feats.phi
    return NatParams(eta1, -0.5 * (prior_prec + gamma * scale * gram))


def natural_gradient(
    nat: NatParams, feats: Features, y: Array, scale: Array, gamma: Array, prior_prec: Array
) -> NatParams:
    """The natural gradient of the ELBO in (eta1, eta2), eq. (9)-(10): eta_hat - eta."""
    return gradient_and_hinge(nat, feats, y, scale, gamma, prior_prec)[0]


def gradient_and_hinge(nat, feats, y, scale, gamma, prior_prec) -> tuple[NatParams, Array]:
    """The natural gradient and, from the same moments, the minibatch's hinge terms of eq. (8)."""
    alpha, hinge = _alpha_and_hinge(nat, feats, y, gamma)
    target = natural_targets(alpha, feats, y, scale, gamma, prior_prec)
    return jax.tree.map(jnp.subtract, target, nat), hinge


def _alpha_and_hinge(nat: NatParams, feats: Features, y: Array, gamma: Array) -> tuple[Array, Array]:
    """alpha of Alg. 1, line 7, and the hinge terms of eq. (8) at that alpha."""
    return _alpha_and_hinge_at(*latent_moments(nat, feats), y, gamma)


def _alpha_and_hinge_at(mean: Array, var: Array, y: Array, gamma: Array) -> tuple[Array, Array]:
    """:func:`_alpha_and_hinge` from the mean and variance of f under q."""
    alpha = local_alpha(mean, var, y)
    return alpha, gamma * vb_hinge_bound(alpha, y * mean)


def kl_to_prior(nat: NatParams, prior_prec: Array) -> Array:
    """KL(N(mu, zeta) || N(0, P0^-1)) from Cholesky factors: 1/2 [tr(P0 zeta) + mu' P0 mu - m
    - log|P0| - log|zeta|]."""
    mu, R = moments(nat)
    L0, _ = jittered_cholesky(prior_prec)
    half = R @ L0  # tr(P0 zeta) = ||L^-1 L0||_F^2
    logdet_ratio = -2.0 * (jnp.sum(jnp.log(jnp.diag(R))) + jnp.sum(jnp.log(jnp.diag(L0))))
    m = mu.shape[0]
    return 0.5 * (jnp.sum(half**2) + mu @ prior_prec @ mu - m + logdet_ratio)


class FixedQ(NamedTuple):
    """q(u) = N(mean, factor factor') held fixed through an ML-II step (eq. 12), u = L v in the
    coordinates of the K_mm = L L' that the state was whitened with; ``logdet`` = log|cov_u|."""

    mean: Array
    factor: Array
    logdet: Array


def fixed_q(nat: NatParams, whiten: Array) -> FixedQ:
    """q(u) of the whitened q(v) = N(mu, R'R): mean L mu and factor L R', from ``whiten`` = L^-1 by one
    triangular solve (L is not kept in the state)."""
    mu, R = moments(nat)
    LR = solve_triangular(whiten, jnp.concatenate([mu[:, None], R.T], axis=1), lower=True)
    logdet = 2.0 * (jnp.sum(jnp.log(jnp.diag(R))) - jnp.sum(jnp.log(jnp.diag(whiten))))
    return FixedQ(LR[:, 0], LR[:, 1:], logdet)


def mlii_objective(
    hyper: dict[str, Array], q: FixedQ, problem: Any, X: Array, y: Array, scale: Array, gamma: Array
) -> Array:
    """The ELBO of eq. (8) as a function of the hyperparameters with q(u) held fixed (eq. 12), the
    objective of the ML-II step. ``problem`` is the S-BSVM problem
    (:class:`~bayes_maxmargin.engine.svi.Problem`): its ``factors_of`` and ``features``.

    At new hyperparameters, K_mm = L L' and W = L^-1, the whitened q(v) has mean W m_u and factor
    W C_u; the prior of v is N(0, I), so the KL is
    ``1/2 [||W C_u||_F^2 + ||W m_u||^2 - m - 2 log|W| - log|C_u C_u'|]``. In value and gradient this is
    :func:`elbo` of the state carried to the new K_mm by :func:`remap`, but the only factorisation
    it differentiates through is the Cholesky of K_mm (that ELBO factorises q's precision twice)."""
    _, W = problem.factors_of(hyper)
    mu, F = W @ q.mean, W @ q.factor
    _, hinge = _alpha_and_hinge_at(*_latent(mu, F, problem.features(hyper, W, X)), y, gamma)
    kl = 0.5 * (jnp.sum(F**2) + mu @ mu - mu.shape[0] - 2.0 * jnp.sum(jnp.log(jnp.diag(W))) - q.logdet)
    return scale * hinge - kl


def hinge_terms(nat: NatParams, feats: Features, y: Array, gamma: Array) -> Array:
    """sum_i E_q[log p(y_i, lambda_i | u)] - E_q[log q(lambda_i)] at the optimal alpha (eq. 8)."""
    return _alpha_and_hinge(nat, feats, y, gamma)[1]


def elbo(
    nat: NatParams, feats: Features, y: Array, scale: Array, gamma: Array, prior_prec: Array
) -> Array:
    """The ELBO of eq. (8), its data sum estimated from a minibatch scaled by N / ``|S|`` (exact for the
    full data with scale 1)."""
    return scale * hinge_terms(nat, feats, y, gamma) - kl_to_prior(nat, prior_prec)


# ============================================================================ step sizes (Optax)
def robbins_monro(tau: float = 10.0, kappa: float = 0.55) -> optax.Schedule:
    """rho_t = (t + tau)^-kappa (Hoffman et al. 2013): sum rho = inf, sum rho^2 < inf for
    kappa in (0.5, 1]; rho_0 <= 1 needs tau >= 1. The default forgets the first, noisy minibatches
    quickly and keeps enough step for the many effective sweeps the hinge's mean-field fixed point
    needs (Luts & Ormerod's plain iteration takes thousands)."""
    if not tau >= 1.0:
        raise ValueError(f"robbins_monro needs tau >= 1 so that rho_0 <= 1, got tau={tau}")
    if not 0.5 < kappa <= 1.0:
        raise ValueError(f"robbins_monro needs kappa in (0.5, 1], got kappa={kappa}")
    return lambda count: (count + tau) ** (-kappa)


def natural_gradient_ascent(learning_rate: float | optax.Schedule) -> optax.GradientTransformation:
    """eta <- eta + rho_t * natural gradient (Alg. 1, lines 11-12), rho_t a number or an Optax
    schedule in (0, 1]; use with :func:`optax.apply_updates`."""
    if callable(learning_rate):
        return optax.scale_by_schedule(learning_rate)
    return optax.scale(float(learning_rate))


class AdaptiveRateState(NamedTuple):
    g_bar: Any
    h_bar: Array
    tau: Array
    count: Array


def adaptive_rate(tau0: float = 10.0) -> optax.GradientTransformation:
    """The adaptive learning rate of Ranganath, Wang, Blei & Xing (2013) for natural-gradient SVI.

    With g_t the natural gradient, running averages g_bar <- (1 - 1/tau) g_bar + g_t / tau and
    h_bar <- (1 - 1/tau) h_bar + g_t' g_t / tau give rho_t = g_bar' g_bar / h_bar, and the memory
    tau <- tau (1 - rho_t) + 1. By Cauchy-Schwarz rho_t is in (0, 1]. The averages start at the
    first gradient (the paper's Monte Carlo initialisation with one sample).
    """

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        dtype = jax.tree.leaves(params)[0].dtype
        return AdaptiveRateState(zeros, jnp.zeros((), dtype), jnp.asarray(tau0, dtype), jnp.zeros((), jnp.int32))

    def update(updates, state, params=None):
        del params
        first = state.count == 0
        w = jnp.where(first, 1.0, 1.0 / state.tau)
        g_bar = jax.tree.map(lambda a, g: (1.0 - w) * a + w * g, state.g_bar, updates)
        sq = sum(jnp.sum(g**2) for g in jax.tree.leaves(updates))
        h_bar = (1.0 - w) * state.h_bar + w * sq
        rho = sum(jnp.sum(g**2) for g in jax.tree.leaves(g_bar)) / jnp.maximum(h_bar, jnp.finfo(h_bar.dtype).tiny)
        rho = jnp.clip(rho, jnp.finfo(h_bar.dtype).eps, 1.0)
        tau = state.tau * (1.0 - rho) + 1.0
        return jax.tree.map(lambda g: rho * g, updates), AdaptiveRateState(g_bar, h_bar, tau, state.count + 1)

    return optax.GradientTransformation(init, update)


def check_schedule(schedule: float | optax.Schedule, num_steps: int, name: str = "learning_rate") -> None:
    """Raise ValueError unless every step size rho_t, t < num_steps, is in (0, 1] (a convex
    combination of natural parameters; rho > 1 can leave zeta indefinite). A schedule is checked on
    the first 1000 steps and on a geometric grid up to ``num_steps``."""
    if not callable(schedule):
        values, steps = np.asarray([schedule], float), np.asarray([0])
    else:
        steps = np.unique(np.concatenate([np.arange(min(num_steps, 1000)),
                                          np.geomspace(1, max(num_steps, 1), 200).astype(int) - 1]))
        try:
            values = np.asarray([float(schedule(int(t))) for t in steps])
        except Exception as err:  # a user schedule that fails on some step
            raise ValueError(
                f"Invalid value for {name}: the schedule raised {err!r} on the steps 0..{num_steps}") from None
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0) & (values <= 1)))
    if bad.size:
        t = int(steps[bad[0]])
        raise ValueError(
            f"Invalid value for {name}: the step size at step {t} is {values[bad[0]]!r}; natural-gradient "
            f"SVI needs every rho_t in (0, 1] (eta <- (1 - rho) eta + rho eta_hat keeps zeta positive definite)"
        )


def remap(nat: NatParams, whiten_old: Array, chol_new: Array) -> NatParams:
    """Express the same q(u) in the whitened coordinates of a new K_mm = L_new L_new'.

    v_new = T^-1 v_old with T = L_old^-1 L_new, so eta1 -> T' eta1 and eta2 -> T' eta2 T: q(u) is
    held fixed across a hyperparameter step, as eq. (12) prescribes.
    """
    T = whiten_old @ chol_new
    return NatParams(T.T @ nat.eta1, T.T @ nat.eta2 @ T)
