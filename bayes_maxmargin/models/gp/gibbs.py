"""Conjugate Gibbs kernel of the GP Bayesian SVM at fixed kernel parameters (Henao et al. 2014, eq. 7).

One sweep, with u = 1 - Y f, Lambda = diag(lambda), D = Lambda / gamma and B = K + D:

1. 1 / lambda_n | f, gamma ~ IG(c / ``|u_n|``, gamma + 2 gamma0), c = sqrt(1 + 2 gamma0 / gamma);
2. f | lambda, gamma ~ N(m, S), m = K B^-1 Y (1 + lambda), S = K B^-1 D, drawn exactly by the
   perturbation ("Matheron") identity with one Cholesky of the scaled B (see :func:`sample_f`);
3. gamma | f, lambda ~ Ga(a0 + N/2, b0 + eps' Lambda^-1 eps / 2), eps = u + lambda, when gamma has
   a prior;
4. gamma0 | lambda ~ Ga(c0 + N, d0 + sum_n lambda_n) when gamma0 has a Ga(c0, d0) prior
   (:func:`~bayes_maxmargin.core.augmentation.gamma0_conditional`).

The kernel targets the augmented program ``gp_bsvm(..., augmented=True)``; its ``log_joint``
equals that program's log density (tested). Nowhere is K^-1 or B^-1 formed: K enters through its
Cholesky factor (computed once per theta, :func:`gp_data`), B through the Cholesky factor of
I + W^1/2 K W^1/2, W = D^-1, computed once per sweep.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax import Array
from jax.scipy.linalg import cho_solve

from bayes_maxmargin.core.augmentation import (
    MoveInfo,
    augmented_log_likelihood,
    augmented_sweep,
    elliptical_moves,
    expected_inv_lambda,
    log_gamma0_prior,
    log_lambda_prior,
)
from bayes_maxmargin.core.linalg import mvn_logpdf_chol
from bayes_maxmargin.models.gp.covariance import GPData, pseudo_obs_scaled, scaled_factor
from bayes_maxmargin.models.gp.model import GPHyper

__all__ = ["GPGibbsState", "build_gp_kernel", "gp_log_joint", "init_gp", "record_gp", "sample_f"]


class GPGibbsState(NamedTuple):
    """State of the GP Gibbs sampler (one chain).

    Attributes
    ----------
    f : Array, shape (n,)
        Latent function at the training inputs.
    inv_lam : Array, shape (n,)
        1 / lambda_n, the augmentation variables in the parametrisation the updates use.
    gamma : Array
        Hinge scale (constant when it has no prior).
    gamma0 : Array
        Rate of lambda's exponential prior (constant when it has no prior).
    log_joint : Array
        Log density of the augmented joint at this state (with respect to lambda).
    """

    f: Array
    inv_lam: Array
    gamma: Array
    gamma0: Array
    log_joint: Array


def gp_log_joint(
    f: Array, inv_lam: Array, gamma: Array, data: GPData, hyper: GPHyper, sample_gamma: bool,
    sample_gamma0: bool = False,
) -> Array:
    """Log density of the augmented GP program at (f, lambda = 1 / inv_lam, gamma, gamma0 =
    ``hyper.gamma0``) (eq. 5-6).

    log N(f | 0, K) + sum_n log N(u_n | -lambda_n, lambda_n / gamma) + sum_n log Exp(lambda_n | gamma0)
    [+ log Ga(gamma | a0, b0)] [+ log Ga(gamma0 | c0, d0)]; the flat prior on lambda (gamma0 = 0) adds 0,
    as NumPyro's ``ImproperUniform`` does. The Gaussian term uses the Cholesky factor of K, never K^-1.
    """
    log_prior_f = mvn_logpdf_chol(f, data.chol)
    u = 1.0 - data.y * f
    log_lik = jnp.sum(augmented_log_likelihood(u, inv_lam, gamma))
    lp = log_prior_f + log_lik + log_lambda_prior(inv_lam, hyper.gamma0)
    if sample_gamma:
        lp = lp + dist.Gamma(hyper.a0, hyper.b0).log_prob(gamma)
    if sample_gamma0:
        lp = lp + log_gamma0_prior(hyper.gamma0, hyper.gamma0_shape, hyper.gamma0_rate)
    return lp


def sample_f(key: Array, data: GPData, inv_lam: Array, gamma: Array) -> Array:
    """Exact draw of f | lambda, gamma ~ N(m, S) of Henao et al. (2014), eq. (7).

    Derivation. The augmented factor N(1 + lambda_n - y_n f_n | 0, lambda_n / gamma) of eq. (5)
    is, since y_n^2 = 1, the Gaussian "observation" t_n = y_n (1 + lambda_n) = f_n + e_n with
    e_n ~ N(0, lambda_n / gamma). So with D = Lambda / gamma and B = K + D, f | t is the GP
    regression posterior

        m = K B^-1 t = K (K + gamma^-1 Lambda)^-1 Y (1 + lambda),
        S = K - K B^-1 K = K B^-1 (B - K) = K B^-1 D = gamma^-1 K (K + gamma^-1 Lambda)^-1 Lambda,

    which is eq. (7): gamma S Y Lambda^-1 (1 + lambda) = K B^-1 Lambda Lambda^-1 Y (1 + lambda) = m.
    A draw needs no square root of S: with f0 ~ N(0, K) and e ~ N(0, D) independent,

        f = f0 + K B^-1 (t - f0 - e)

    is Gaussian with mean K B^-1 t = m and, writing f - m = (I - K B^-1) f0 - K B^-1 e,
    covariance (I - K B^-1) K (I - B^-1 K) + K B^-1 D B^-1 K
    = K - 2 K B^-1 K + K B^-1 (K + D) B^-1 K = K - K B^-1 K = S (the perturbation or
    "Matheron" identity). f0 = L_K z1 uses the fixed factor of K (:class:`GPData`).

    Numerics. B is never factorised directly (as lambda_n -> 0 it tends to the possibly
    near-singular K). With W = D^-1 = gamma Lambda^-1 and s = W^1/2,

        B^-1 = diag(s) (I + diag(s) K diag(s))^-1 diag(s),

    and I + diag(s) K diag(s) has every eigenvalue >= 1: its one Cholesky per sweep always
    succeeds. Then s * (t - f0 - e) = s t - s f0 - z2 with e = z2 / s, z2 ~ N(0, I), and
    s t = y sqrt(gamma) (inv_lam^1/2 + inv_lam^-1/2) stays finite for any lambda_n > 0.

    Parameters
    ----------
    key : Array
        PRNG key.
    data : GPData
        K, its Cholesky factor and the labels.
    inv_lam : Array, shape (n,)
        1 / lambda_n.
    gamma : Array
        Hinge scale.

    Returns
    -------
    Array, shape (n,)
        A draw of f.
    """
    k0, ke = jax.random.split(key)
    n = data.y.shape[-1]
    dtype = data.K.dtype
    f0 = data.chol @ jax.random.normal(k0, (n,), dtype)
    z2 = jax.random.normal(ke, (n,), dtype)
    s, chol_b = scaled_factor(data.K, inv_lam, gamma)
    scaled_resid = pseudo_obs_scaled(data.y, inv_lam, gamma) - s * f0 - z2  # W^1/2 (t - f0 - e)
    v = s * cho_solve((chol_b, True), scaled_resid)  # B^-1 (t - f0 - e)
    return f0 + data.K @ v


def init_gp(f: Array, data: GPData, hyper: GPHyper, sample_gamma: bool, sample_gamma0: bool = False) -> GPGibbsState:
    """A state at ``f`` with 1 / lambda at its conditional mean (eq. 8), gamma at ``hyper.gamma`` and
    gamma0 at ``hyper.gamma0``."""
    f = jnp.asarray(f, data.K.dtype)
    gamma = jnp.asarray(hyper.gamma, f.dtype)
    gamma0 = jnp.asarray(hyper.gamma0, f.dtype)
    u = 1.0 - data.y * f
    inv_lam = expected_inv_lambda(u, gamma, gamma0)
    log_joint = gp_log_joint(f, inv_lam, gamma, data, hyper._replace(gamma0=gamma0), sample_gamma, sample_gamma0)
    return GPGibbsState(f, inv_lam, gamma, gamma0, log_joint)


@functools.cache
def build_gp_kernel(sample_gamma: bool, sample_gamma0: bool = False, elliptical_steps: int = 0):
    """The Gibbs kernel of the GP Bayesian SVM at fixed theta, eq. (7) (cached: one per structure).

    Parameters
    ----------
    sample_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is sampled (else it stays at its value).
    sample_gamma0 : bool
        Whether gamma0 has a Gamma(``hyper.gamma0_shape``, ``hyper.gamma0_rate``) prior and is sampled.
    elliptical_steps : int
        Elliptical slice updates of f with lambda integrated out that start each sweep
        (:func:`~bayes_maxmargin.core.augmentation.elliptical_moves`); step 1 then draws lambda given
        the moved f. 0: the plain sweep.

    Returns
    -------
    callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)``, pure and jit-able; ``info`` the
        :class:`~bayes_maxmargin.core.augmentation.MoveInfo` of the elliptical updates (zeros without them).
    """

    def kernel(
        rng_key: Array, state: GPGibbsState, data: GPData, hyper: GPHyper
    ) -> tuple[GPGibbsState, MoveInfo]:
        f, moved = state.f, MoveInfo.none()
        if elliptical_steps:
            f, moved = elliptical_moves(jax.random.fold_in(rng_key, 7), f, data.chol, data.y, state.gamma,
                                        state.gamma0, elliptical_steps)
        f, inv_lam, gamma, gamma0 = augmented_sweep(
            rng_key, f, state.gamma, data.y, hyper._replace(gamma0=state.gamma0), lambda f: f,
            lambda key, inv_lam, gamma: sample_f(key, data, inv_lam, gamma), sample_gamma,
            sample_gamma0=sample_gamma0,
        )
        log_joint = gp_log_joint(f, inv_lam, gamma, data, hyper._replace(gamma0=gamma0), sample_gamma, sample_gamma0)
        return GPGibbsState(f, inv_lam, gamma, gamma0, log_joint), moved

    return kernel


def record_gp(state: GPGibbsState) -> dict[str, Array]:
    """What the driver keeps per draw of the GP sampler (lambda is not stored)."""
    return {"f": state.f, "gamma": state.gamma, "gamma0": state.gamma0, "log_joint": state.log_joint}
