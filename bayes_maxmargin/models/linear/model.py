"""The linear Bayesian SVM of Polson & Scott (2011) with Henao et al.'s (2014) skewed Laplace.

    f_n = x_n' beta + b,     beta ~ N(0, sigma^2 I),     b ~ N(0, s_b^2) (or flat),
    gamma fixed, or gamma ~ Ga(a0, b0)                              (Henao et al. 2014, eq. 6),
    p(y_n | f_n) proportional to exp(-2 gamma max(1 - y_n f_n, 0))   (gamma0 = 0, eq. 3),
    or the skewed Laplace sLa(1 - y_n f_n | gamma, gamma0)           (gamma0 > 0, eq. 4-5),
    gamma0 fixed, or gamma0 ~ Ga(c0, d0) (the conjugate prior mentioned after eq. 6).

The MAP of beta under the hinge is the SVM with C = 2 gamma sigma^2 (Polson & Scott 2011).

Two forms of the same program:

* marginal (``augmented=False``): lambda integrated out, the pseudo-likelihood entered with
  ``numpyro.factor``; NUTS on this form is the reference posterior;
* augmented (``augmented=True``): lambda_n an explicit sample site with a flat improper prior
  (gamma0 = 0) or Exp(gamma0); the joint that the conjugate Gibbs and EM kernels target.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax import Array
from numpyro.distributions import constraints

from bayes_maxmargin.core.linalg import LOG_2PI
from bayes_maxmargin.models.common import hinge_scale_sites, max_margin_likelihood

__all__ = ["LinearData", "LinearHyper", "intercept_prior", "linear_bsvm", "log_prior", "prior_precision"]



class LinearHyper(NamedTuple):
    """Hyperparameters of the linear model, as arrays (changing them never recompiles a kernel).

    Attributes
    ----------
    prior_prec : Array, shape (p,)
        Prior precisions of the coefficients [beta, intercept]: 1 / sigma^2 for beta, 1 / s_b^2
        for the intercept (0: flat prior).
    gamma : Array
        Hinge scale; the fixed value, or the initial value when gamma has a Gamma prior.
    a0, b0 : Array
        Shape and rate of the Gamma prior on gamma (unused when gamma is fixed).
    gamma0 : Array
        Rate of the exponential prior on lambda (0: the hinge); the fixed value, or the initial value
        (> 0) when gamma0 has a Gamma prior.
    gamma0_shape, gamma0_rate : Array
        Shape and rate of the Gamma prior on gamma0 (unused when gamma0 is fixed).
    adapt_steps : Array
        Warm-up sweeps over which the Gibbs kernel's directional moves adapt their basis
        (:func:`~bayes_maxmargin.core.slice.adapt_directions`; unused without them).
    """

    prior_prec: Array
    gamma: Array
    a0: Array
    b0: Array
    gamma0: Array
    gamma0_shape: Array = 1.0
    gamma0_rate: Array = 1.0
    adapt_steps: Array = 0


def prior_precision(
    n_features: int, sigma: float, intercept_scale: float | None, fit_intercept: bool
) -> np.ndarray:
    """Prior precision vector of [beta, intercept] (the intercept last; 0 for a flat prior), on the host."""
    prec = [np.full((n_features,), 1.0 / sigma**2)]
    if fit_intercept:
        prec.append(np.array([0.0 if intercept_scale is None else 1.0 / intercept_scale**2]))
    return np.concatenate(prec)


def log_prior(coef: Array, gamma: Array, hyper: LinearHyper, sample_gamma: bool) -> Array:
    """Log prior density of [beta, intercept] (and of gamma when it has a prior).

    Zero prior precisions (a flat intercept) add 0, as NumPyro's ``ImproperUniform`` does.
    """
    prec = hyper.prior_prec
    proper = prec > 0
    log_norm = jnp.where(proper, 0.5 * (jnp.log(jnp.where(proper, prec, 1.0)) - LOG_2PI), 0.0)
    lp = jnp.sum(log_norm - 0.5 * prec * coef**2)
    if sample_gamma:
        lp = lp + dist.Gamma(hyper.a0, hyper.b0).log_prob(gamma)
    return lp


def intercept_prior(intercept_scale: float | None) -> dist.Distribution:
    """The intercept's prior: N(0, s^2) with s = ``intercept_scale``, or flat (improper) for None."""
    if intercept_scale is None:
        return dist.ImproperUniform(constraints.real, (), ())
    return dist.Normal(0.0, intercept_scale)


def linear_bsvm(
    X: Array,
    y: Array | None = None,
    *,
    sigma: float = 1.0,
    intercept_scale: float | None = 10.0,
    fit_intercept: bool = True,
    gamma: float = 1.0,
    gamma_prior: tuple[float, float] | None = None,
    gamma0: float = 0.0,
    augmented: bool = False,
    gamma0_prior: tuple[float, float] | None = None,
) -> Array:
    """NumPyro program of the linear Bayesian SVM.

    Parameters
    ----------
    X : Array, shape (n, d)
        Features.
    y : Array, shape (n,), optional
        Labels coded +-1. Without labels the program returns the prior draw of f (the
        pseudo-likelihood generates no labels).
    sigma : float
        Prior standard deviation of beta.
    intercept_scale : float or None
        Prior standard deviation of the intercept; None for a flat (improper) prior.
    fit_intercept : bool
        Whether f has an intercept.
    gamma : float
        Fixed hinge scale (ignored when ``gamma_prior`` is given).
    gamma_prior : (a0, b0), optional
        Shape and rate of a Gamma prior on gamma (Henao et al. 2014, eq. 6).
    gamma0 : float
        Rate of lambda's exponential prior; 0 is Polson & Scott's hinge (flat prior on lambda).
        Ignored when ``gamma0_prior`` is given.
    augmented : bool
        If True, lambda is an explicit sample site (the joint of the Gibbs / EM kernels).
    gamma0_prior : (shape, rate), optional
        A Gamma prior on gamma0, the sample site ``"gamma0"`` (the skewed Laplace throughout).

    Returns
    -------
    Array
        The linear predictor f at X.
    """
    d = X.shape[1]
    beta = numpyro.sample("beta", dist.Normal(0.0, sigma).expand([d]).to_event(1))
    intercept = 0.0
    if fit_intercept:
        intercept = numpyro.sample("intercept", intercept_prior(intercept_scale))
    gamma, gamma0 = hinge_scale_sites(gamma, gamma_prior, gamma0, gamma0_prior)
    f = X @ beta + intercept
    if y is None:
        return f
    max_margin_likelihood(1.0 - y * f, gamma, gamma0, augmented, sampled_gamma0=gamma0_prior is not None)
    return f

class LinearData(NamedTuple):
    """Design matrix Phi = [X, 1] (n, p) and labels y in {-1, +1} (n,).

    ``mask`` (n,), optional, marks the data rows of a design padded to a bucketed row count
    (:func:`~bayes_maxmargin.core.compilation.bucket_rows`); padding rows are zero in ``design`` and
    ``y``, so that they add nothing to the coefficients' conditional, and the Gibbs kernel
    (:func:`~bayes_maxmargin.models.linear.gibbs.build_linear_kernel`) leaves them out of its other
    sums over rows (the log joint, the lambda prior, the gamma conditional).
    """

    design: Array
    y: Array
    mask: Array | None = None


def padded_data(data: LinearData, rows: int) -> LinearData:
    """``data`` with zero rows appended up to ``rows`` rows, and the mask of its own rows.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin.models.linear.model import LinearData, padded_data
    >>> padded = padded_data(LinearData(np.ones((3, 2)), np.array([1.0, -1.0, 1.0])), 4)
    >>> padded.design.shape, padded.y.tolist(), padded.mask.tolist()
    ((4, 2), [1.0, -1.0, 1.0, 0.0], [True, True, True, False])
    """
    n = data.y.shape[0]
    design = np.pad(np.asarray(data.design), ((0, rows - n), (0, 0)))
    y = np.pad(np.asarray(data.y), (0, rows - n))
    return LinearData(jnp.asarray(design), jnp.asarray(y), jnp.asarray(np.arange(rows) < n))
