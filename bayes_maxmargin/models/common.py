"""NumPyro sites every max-margin program shares: the pseudo-likelihood of u = 1 - y f."""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax import Array
from numpyro.distributions import constraints

from bayes_maxmargin.core.augmentation import augmented_log_likelihood, log_pseudo_likelihood

__all__ = ["hinge_scale_sites", "max_margin_likelihood"]


def hinge_scale_sites(
    gamma: float, gamma_prior: tuple[float, float] | None, gamma0: float, gamma0_prior: tuple[float, float] | None
) -> tuple[Array, Array]:
    """The hinge scale gamma and lambda's prior rate gamma0: fixed values, or the sample sites ``"gamma"``
    ~ Ga(a0, b0) (``gamma_prior``, Henao et al. 2014 eq. 6) and ``"gamma0"`` ~ Ga(shape, rate)
    (``gamma0_prior``, the conjugate prior Henao et al. mention after eq. 6) when their priors are given.
    """
    if gamma_prior is not None:
        gamma = numpyro.sample("gamma", dist.Gamma(gamma_prior[0], gamma_prior[1]))
    if gamma0_prior is not None:
        gamma0 = numpyro.sample("gamma0", dist.Gamma(gamma0_prior[0], gamma0_prior[1]))
    return gamma, gamma0


def max_margin_likelihood(u: Array, gamma: Array, gamma0: float | Array, augmented: bool, *,
                          sampled_gamma0: bool = False) -> None:
    """Add the max-margin pseudo-likelihood of the margin residuals ``u = 1 - y f`` to the program.

    Marginal form: ``numpyro.factor`` of the hinge (gamma0 = 0, Henao et al. 2014 eq. 3) or the
    skewed Laplace (gamma0 > 0, eq. 4-5). Augmented form: the sample site ``"lam"`` (flat improper
    prior for gamma0 = 0, Exp(gamma0) otherwise; eq. 6) and the factor log N(u | -lambda,
    lambda / gamma) (eq. 5), the joint that the conjugate kernels target. ``sampled_gamma0``: gamma0
    is a sample site (:func:`hinge_scale_sites`), always > 0.
    """
    n = u.shape[-1]
    if augmented:
        lam_prior = (
            dist.Exponential(gamma0).expand([n]).to_event(1)
            if sampled_gamma0 or gamma0 > 0
            else dist.ImproperUniform(constraints.positive, (), (n,))
        )
        lam = numpyro.sample("lam", lam_prior)
        numpyro.factor("pseudo_likelihood", jnp.sum(augmented_log_likelihood(u, 1.0 / lam, gamma)))
    else:
        numpyro.factor("pseudo_likelihood", jnp.sum(log_pseudo_likelihood(u, gamma, gamma0)))
