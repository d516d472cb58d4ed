"""Conjugate Gibbs kernels built from the shared updates of :mod:`bayes_maxmargin.core.augmentation`.

Linear Bayesian SVM (Polson & Scott 2011; Henao et al. 2014, eq. 7 with f = Phi w): one sweep is

1. 1 / lambda_n | w, gamma ~ IG(c / ``|1 - y_n f_n|``, gamma + 2 gamma0);
2. w | lambda, gamma ~ N(P^-1 gamma Phi' Y (1 + 1/lambda), P^-1),
   P = diag(prior_prec) + gamma Phi' Lambda^-1 Phi (one Cholesky of P), drawn directly or by
   an overrelaxed move that leaves this conditional invariant (Adler 1981); for p > n in its
   n-dimensional form (Bhattacharya, Chakraborty & Mallick 2016), O(n^2 p) instead of O(n p^2 + p^3);
3. gamma | w, lambda ~ Ga(a0 + N/2, b0 + eps' Lambda^-1 eps / 2) when gamma has a prior;
4. gamma0 | lambda ~ Ga(c0 + N, d0 + sum_n lambda_n) when gamma0 has a Ga(c0, d0) prior
   (:func:`~bayes_maxmargin.core.augmentation.gamma0_conditional`).

With ``directions=True`` each sweep starts with directional moves that integrate lambda out: the
coefficients are slice-sampled along each direction of a basis adapted in warm-up (their posterior
covariance's Cholesky factor, :func:`~bayes_maxmargin.core.slice.adapt_directions`), under

    p(w | gamma, gamma0, y)  proportional to  p(w) prod_n sLa(1 - y_n f_n | gamma, gamma0)

(eq. 4-5; the hinge exp(-2 gamma max(u, 0)) for gamma0 = 0), which is the augmented program with
lambda integrated out (:func:`~bayes_maxmargin.core.augmentation.marginal_moves`). Step 1 then draws lambda afresh given the
moved coefficients, so (moves, step 1) is a blocked update of (w, lambda) that leaves the joint
invariant, and the sweep keeps its exact target once the basis is fixed (after warm-up).

Why. Given lambda, points near the margin (lambda_n small) pin their f_n to within
sqrt(lambda_n / gamma), so the coefficients' conditional is much narrower than their posterior and
steps 1-2 move them slowly along the posterior's wide directions: on breast cancer (569 x 30,
standardised, 4 chains of 500 warm-up and 1000 kept sweeps) the intercept had 0.08 effective
draws per draw with the overrelaxed step 2, 0.06 without. Slicing the whitened coordinates of the
marginal moves along exactly those directions at the posterior's own scale (0.5 there).

The kernel targets the augmented program ``linear_bsvm(..., augmented=True)``; its ``log_joint``
equals that program's log density (tested).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from bayes_maxmargin.core.augmentation import (
    MoveInfo,
    augmented_log_likelihood,
    augmented_sweep,
    expected_inv_lambda,
    log_gamma0_prior,
    log_lambda_prior,
    marginal_moves,
    masked_rows,
    sample_conditional,
)
from bayes_maxmargin.core.slice import Directions, adapt_directions, init_directions
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, log_prior

__all__ = ["LinearGibbsState", "build_linear_kernel", "init_linear", "linear_log_joint", "record_linear"]


class LinearGibbsState(NamedTuple):
    """State of the linear Gibbs sampler (one chain).

    ``coef`` is [beta, intercept] (shape (p,)); ``inv_lam`` (1 / lambda_n), ``gamma``, ``gamma0`` and
    ``log_joint`` are as in the GP sampler's :class:`~bayes_maxmargin.models.gp.gibbs.GPGibbsState`;
    ``directions`` is the basis of the directional moves and its warm-up moments (None without them).
    """

    coef: Array
    inv_lam: Array
    gamma: Array
    gamma0: Array
    log_joint: Array
    directions: Directions | None = None


def linear_log_joint(
    coef: Array, inv_lam: Array, gamma: Array, data: LinearData, hyper: LinearHyper, sample_gamma: bool,
    sample_gamma0: bool = False,
) -> Array:
    """Log density of the augmented linear program at (coef, lambda = 1 / inv_lam, gamma, gamma0 =
    ``hyper.gamma0``).

    Gaussian priors with zero precision (flat) and the flat prior on lambda (gamma0 = 0) add 0,
    as NumPyro's ``ImproperUniform`` does.
    """
    u = 1.0 - data.y * (data.design @ coef)
    log_lik = jnp.sum(masked_rows(augmented_log_likelihood(u, inv_lam, gamma), data.mask))
    lp = (log_prior(coef, gamma, hyper, sample_gamma) + log_lik
          + log_lambda_prior(inv_lam, hyper.gamma0, data.mask))
    if sample_gamma0:
        lp = lp + log_gamma0_prior(hyper.gamma0, hyper.gamma0_shape, hyper.gamma0_rate)
    return lp


def init_linear(coef: Array, data: LinearData, hyper: LinearHyper, sample_gamma: bool,
                sample_gamma0: bool = False, directions: bool = False) -> LinearGibbsState:
    """A state at ``coef`` with 1 / lambda at its conditional mean, gamma at ``hyper.gamma``, gamma0
    at ``hyper.gamma0`` and, with ``directions``, the coordinate axes as the moves' basis."""
    gamma = jnp.asarray(hyper.gamma, coef.dtype)
    gamma0 = jnp.asarray(hyper.gamma0, coef.dtype)
    u = 1.0 - data.y * (data.design @ coef)
    inv_lam = expected_inv_lambda(u, gamma, gamma0)
    log_joint = linear_log_joint(coef, inv_lam, gamma, data, hyper._replace(gamma0=gamma0), sample_gamma,
                                 sample_gamma0)
    basis = init_directions(coef.shape[-1], coef.dtype) if directions else None
    return LinearGibbsState(coef, inv_lam, gamma, gamma0, log_joint, basis)


@functools.cache
def build_linear_kernel(sample_gamma: bool, overrelaxation: float = 0.0, wide: bool = False,
                        sample_gamma0: bool = False, directions: bool = False):
    """The Gibbs kernel of the linear Bayesian SVM (cached: one function per structure).

    Parameters
    ----------
    sample_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is sampled (else it stays at its value).
    overrelaxation : float
        Adler overrelaxation alpha in (-1, 1) of the coefficient update
        (:func:`~bayes_maxmargin.core.augmentation.sample_gaussian`); 0 is the plain Gibbs draw.
    wide : bool
        Draw the coefficients in O(n^2 p) by the algorithm of Bhattacharya, Chakraborty & Mallick
        (2016) (:func:`~bayes_maxmargin.core.augmentation.sample_wide_gaussian`; needs every prior
        precision > 0), for p > n: the same conditional, other random numbers.
    sample_gamma0 : bool
        Whether gamma0 has a Gamma(``hyper.gamma0_shape``, ``hyper.gamma0_rate``) prior and is sampled
        (else it stays at its value).
    directions : bool
        Start each sweep with slice moves of the coefficients along a basis adapted over the first
        ``hyper.adapt_steps`` sweeps, lambda integrated out (module docstring); the state needs
        ``init_linear(..., directions=True)``. Not with ``wide``.

    Returns
    -------
    callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)``, ``info`` the
        :class:`~bayes_maxmargin.core.augmentation.MoveInfo` of the moves (zeros without them).
    """

    def kernel(
        rng_key: Array, state: LinearGibbsState, data: LinearData, hyper: LinearHyper
    ) -> tuple[LinearGibbsState, MoveInfo]:
        current = hyper._replace(gamma0=state.gamma0)
        coef, basis, moved = state.coef, state.directions, MoveInfo.none()
        if directions:
            coef, moved = marginal_moves(jax.random.fold_in(rng_key, 7), coef, data.design, data.y,
                                         lambda c: log_prior(c, state.gamma, hyper, False), state.gamma,
                                         state.gamma0, basis.basis, data.mask)
        previous = coef  # the point the overrelaxed draw reflects

        def draw_coef(key: Array, inv_lam: Array, gamma: Array) -> Array:
            return sample_conditional(key, data.design, data.y, inv_lam, gamma, hyper.prior_prec, wide, previous,
                                      overrelaxation)

        coef, inv_lam, gamma, gamma0 = augmented_sweep(rng_key, coef, state.gamma, data.y, current,
                                                       lambda c: data.design @ c, draw_coef, sample_gamma, data.mask,
                                                       sample_gamma0)
        log_joint = linear_log_joint(coef, inv_lam, gamma, data, hyper._replace(gamma0=gamma0), sample_gamma,
                                     sample_gamma0)
        if directions:
            basis = adapt_directions(basis, coef, hyper.adapt_steps)
        return LinearGibbsState(coef, inv_lam, gamma, gamma0, log_joint, basis), moved

    return kernel


def record_linear(state: LinearGibbsState) -> dict[str, Array]:
    """What the driver keeps per draw of the linear sampler (lambda is not stored)."""
    return {"coef": state.coef, "gamma": state.gamma, "gamma0": state.gamma0, "log_joint": state.log_joint}
