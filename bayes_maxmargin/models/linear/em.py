"""EM / ECM for the MAP of the linear Bayesian SVM (Polson & Scott 2011; Henao et al. 2014, Sec. 3).

E-step: E[1 / lambda_n] = c / ``|u_n|`` (Henao eq. 8). M-step for the weights: the mean of the same
Gaussian conditional the Gibbs kernel samples (:func:`~bayes_maxmargin.core.augmentation.gaussian_conditional`
with E[1/lambda]). With a Gamma(a0, b0) prior on gamma, a CM-step for gamma (Henao Sec. 3):

    gamma <- (a0 - 1 + N/2) / (b0 + 1/2 sum_n (E[1/lambda_n] u_n^2 + 2 u_n + E[lambda_n])),

with u at the new weights and E[lambda_n] = ``|u_n|`` / c + 1 / (gamma c^2) from the E-step. The
objective, the log posterior of (w, gamma) with lambda integrated out, is returned every iteration
and never decreases (up to the margin floor of :mod:`~bayes_maxmargin.core.augmentation`).
With gamma0 = 0 and a flat intercept the fixed point is the SVM with C = 2 gamma sigma^2.

The fixed-point iteration converges only sublinearly near the hinge: a point on the margin needs
E[1/lambda] = 1 / ``|u|`` -> infinity, so ``|u|`` shrinks by a constant factor per iteration, a factor that
tends to 1 for points whose multiplier is near 0 or C. With gamma fixed and gamma0 = 0, :func:`linear_map`
solves the same problem (the MAP is the linear SVM's QP) by an interior-point method with an exact
active-set crossover (:mod:`bayes_maxmargin.engine.hinge_qp`) and stops on its duality gap.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax.numpy as jnp
from jax import Array

from bayes_maxmargin.core.augmentation import (
    GaussianConditional,
    WideGaussianConditional,
    expected_inv_lambda,
    gamma_cm_step,
    gaussian_conditional,
    marginal_log_likelihood,
    prior_gram,
    wide_gaussian_conditional,
)
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.engine.fixed_point import ecm_loop
from bayes_maxmargin.engine.hinge_qp import hinge_qp
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, log_prior

__all__ = ["EMResult", "linear_em", "linear_map", "linear_objective"]


class EMResult(NamedTuple):
    """Output of :func:`linear_em`.

    Attributes
    ----------
    coef : Array
        MAP of [beta, intercept].
    gamma : Array
        MAP (or fixed value) of gamma.
    objective : Array, shape (max_iter + 1,)
        Log posterior at the start and after every iteration; NaN after convergence.
    n_iter : Array
        Iterations run.
    conditional : GaussianConditional or WideGaussianConditional
        The Gaussian conditional of the weights at E[1/lambda] of the last E-step (its precision
        factor, or its n-dimensional form, gives the conditional posterior covariance used for
        predictive variances).
    gap : Array or None
        :func:`linear_map` only: the duality gap at ``coef``, an upper bound on the log posterior's
        distance to its maximum.
    converged : Array or None
        :func:`linear_map` only: whether ``gap`` met the tolerance.
    """

    coef: Array
    gamma: Array
    objective: Array
    n_iter: Array
    conditional: GaussianConditional | WideGaussianConditional
    gap: Array | None = None
    converged: Array | None = None


def linear_objective(
    coef: Array, gamma: Array, data: LinearData, hyper: LinearHyper, estimate_gamma: bool
) -> Array:
    """Log posterior of the marginal program (lambda integrated out), the quantity EM increases."""
    return marginal_log_likelihood(data.design @ coef, data.y, gamma, hyper.gamma0) + log_prior(
        coef, gamma, hyper, estimate_gamma
    )


def _em_step(coef, gamma, data: LinearData, hyper: LinearHyper, estimate_gamma: bool, gram: Array | None = None):
    """One ECM iteration; with ``gram`` (Phi A^-1 Phi') the M-step in its n-dimensional form."""
    u = 1.0 - data.y * (data.design @ coef)
    inv_lam = expected_inv_lambda(u, gamma, hyper.gamma0)  # E-step, eq. (8)
    if gram is None:
        cond = gaussian_conditional(data.design, data.y, inv_lam, gamma, hyper.prior_prec)
    else:
        cond = wide_gaussian_conditional(data.design, data.y, inv_lam, gamma, hyper.prior_prec, gram)
    coef = cond.mean  # CM-step for the weights
    if estimate_gamma:  # CM-step for gamma
        u_new = 1.0 - data.y * (data.design @ coef)
        gamma = gamma_cm_step(u_new, u, inv_lam, gamma, hyper.gamma0, hyper.a0, hyper.b0)
    return coef, gamma, cond


@partial(jit, static_argnames=("max_iter", "estimate_gamma", "wide"))
def linear_em(
    coef0: Array, data: LinearData, hyper: LinearHyper, tol: Array, *, max_iter: int, estimate_gamma: bool,
    wide: bool = False,
) -> EMResult:
    """Run EM / ECM from ``coef0`` until the relative increase of the objective is below ``tol``.

    Parameters
    ----------
    coef0 : Array, shape (p,)
        Initial weights.
    data : LinearData
        Design and +-1 labels.
    hyper : LinearHyper
        Hyperparameters; ``hyper.gamma`` is the fixed or initial gamma.
    tol : Array
        Stop when (objective_t - objective_{t-1}) <= tol * ``|objective_t|``.
    max_iter : int
        Maximum number of iterations.
    estimate_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is updated by its CM-step (needs a0 > 1).
    wide : bool
        Solve the M-step in its n-dimensional form (:func:`~bayes_maxmargin.core.augmentation.wide_gaussian_conditional`,
        O(n^2 p) instead of O(n p^2 + p^3); needs every prior precision > 0): the same fixed point,
        for p > n (:func:`~bayes_maxmargin.core.augmentation.use_wide_form`).
    """
    gamma0 = jnp.asarray(hyper.gamma, coef0.dtype)
    gram = prior_gram(data.design, hyper.prior_prec) if wide else None
    _, _, cond0 = _em_step(coef0, gamma0, data, hyper, False, gram)
    coef, gamma, cond, trace, n_iter = ecm_loop(
        lambda c, g: _em_step(c, g, data, hyper, estimate_gamma, gram),
        lambda c, g: linear_objective(c, g, data, hyper, estimate_gamma),
        coef0, gamma0, cond0, tol, max_iter,
    )
    return EMResult(coef, gamma, trace, n_iter, cond)


@partial(jit, static_argnames=("max_iter", "wide"))
def linear_map(data: LinearData, hyper: LinearHyper, tol: Array, *, max_iter: int, wide: bool = False) -> EMResult:
    """The MAP of the hinge model (gamma fixed at ``hyper.gamma``, gamma0 = 0) as the linear SVM's QP.

    The fixed point of :func:`linear_em` (up to its margin floor) is the minimiser of
    1/2 w' diag(prior_prec) w + 2 gamma sum_n max(1 - y_n phi_n'w, 0): Polson & Scott's (2011) pseudo-
    likelihood (Henao et al. 2014, eq. 3) and the Gaussian prior, the SVM with C = 2 gamma sigma^2 and,
    for the intercept, the penalty 1/2 b^2 / s_b^2 (none with a flat prior). It is solved by
    :func:`~bayes_maxmargin.engine.hinge_qp.hinge_qp` (interior point, exact crossover), stopped when the
    duality gap is at most ``tol`` max(P, 1) (P: the minimised objective, minus the log posterior up to a
    constant). Needs gamma0 = 0 and gamma fixed (the skewed Laplace and the ECM for gamma keep
    :func:`linear_em`).

    Parameters
    ----------
    data, hyper
        As for :func:`linear_em` (``hyper.gamma0`` is not read: it must be 0).
    tol : Array
        Relative tolerance on the duality gap.
    max_iter : int
        Most interior-point steps (each costs about one EM iteration).
    wide : bool
        The n x n (Woodbury) form of every solve, for p > n (every prior precision > 0).

    Returns
    -------
    EMResult
        ``objective``: the log posterior at the start (w = 0) and after every step (not monotone: the
        interior-point iterates are not EM's); ``conditional``: the Gaussian conditional of one E-step
        at the MAP, with the MAP as its mean; ``gap``: the duality gap at the MAP; ``converged``:
        whether it met ``tol`` (:func:`~bayes_maxmargin.engine.hinge_qp.hinge_qp`; the best point found
        is returned either way).
    """
    gamma = jnp.asarray(hyper.gamma, data.design.dtype)
    z = data.y[:, None] * data.design
    gram = prior_gram(data.design, hyper.prior_prec) if wide else None
    gram_z = gram * jnp.outer(data.y, data.y) if wide else None
    res = hinge_qp(z, hyper.prior_prec, 2.0 * gamma, tol, max_iter,
                   lambda w: linear_objective(w, gamma, data, hyper, False), gram_z)
    _, _, cond = _em_step(res.w, gamma, data, hyper, False, gram)
    return EMResult(res.w, gamma, res.trace, res.n_iter, cond._replace(mean=res.w), res.gap, res.converged)
