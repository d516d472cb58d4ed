r"""Distributions of the data augmentation behind Bayesian support vector machines.

Polson & Scott (2011) [1]_ showed that the SVM hinge pseudo-likelihood is a
location-scale mixture of normals,

.. math::

    e^{-2\gamma \max(u, 0)} = \int_0^\infty \mathcal N(u \mid -\lambda,
    \lambda / \gamma)\, d\lambda, \qquad u = 1 - y f,

and Henao, Yuan & Carin (2014) [2]_ made the mixing measure proper with
:math:`\lambda \sim \mathrm{Exp}(\gamma_0)`, which turns the marginal into
the skewed Laplace density of their eq. (4)-(5).  Given the classifier, the
latent :math:`\lambda` has a generalized inverse Gaussian conditional and
:math:`1/\lambda` an inverse Gaussian one.  This module provides the three
distributions as :class:`numpyro.distributions.Distribution` subclasses:

* :class:`InverseGaussian` -- ``IG(mean, concentration)``, sampled as in [3]_;
* :class:`GeneralizedInverseGaussian` -- ``GIG(p, a, b)`` for any real ``p``, sampled as in [4]_;
* :class:`SkewedLaplace` -- the marginal of ``u = 1 - y f``.

All of them broadcast their parameters into a batch shape, support
``validate_args``, and are finite over parameters spanning
:math:`10^{-8}` to :math:`10^{8}` in float32 and float64.

References
----------
.. [1] N. G. Polson and S. L. Scott (2011). Data augmentation for support
   vector machines. *Bayesian Analysis* 6(1), 1-23.
.. [2] R. Henao, X. Yuan and L. Carin (2014). Bayesian nonlinear support
   vector machines and discriminative factor modeling. *NeurIPS 27*.
.. [3] J. R. Michael, W. R. Schucany and R. W. Haas (1976). Generating random
   variates using transformations with multiple roots. *The American
   Statistician* 30(2), 88-90.
.. [4] L. Devroye (2014). Random variate generation for the generalized
   inverse Gaussian distribution. *Statistics and Computing* 24(2), 239-246.
"""

from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from jax.typing import ArrayLike
from numpyro.distributions import constraints
from numpyro.distributions.distribution import Distribution
from numpyro.distributions.util import promote_shapes, validate_sample
from numpyro.util import is_prng_key, not_jax_tracer

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.special import bessel_kv_ratios, log_bessel_kve

__all__ = ["GeneralizedInverseGaussian", "InverseGaussian", "SkewedLaplace", "sample_positive_normal"]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def _as_float_arrays(*args: ArrayLike) -> list[jax.Array]:
    """Convert ``args`` to arrays of one common floating dtype."""
    arrays = [jnp.asarray(a) for a in args]
    dtype = jnp.result_type(*arrays, 1.0)
    return [a.astype(dtype) for a in arrays]


def _batch_params(*args: ArrayLike) -> tuple[list[jax.Array], tuple[int, ...]]:
    """Parameters of a distribution in one floating dtype and rank, and its batch shape.

    Parameters
    ----------
    *args : array_like
        The parameters, broadcastable against each other.

    Returns
    -------
    params : list of jax.Array
        ``args`` in their common floating dtype, with leading unit axes added
        so that all have the same number of dimensions.
    batch_shape : tuple of int
        The broadcast shape of ``args``.
    """
    arrays = _as_float_arrays(*args)
    return promote_shapes(*arrays), lax.broadcast_shapes(*(jnp.shape(a) for a in arrays))


def _sample_params(
    key: jax.Array, sample_shape: tuple[int, ...], batch_shape: tuple[int, ...], *params: jax.Array
) -> list[jax.Array]:
    """Check the PRNG key of a draw and broadcast the parameters to the shape of the draw.

    Parameters
    ----------
    key : jax.Array
        PRNG key of the draw.
    sample_shape : tuple of int
        Leading shape of independent draws.
    batch_shape : tuple of int
        Batch shape of the distribution.
    *params : jax.Array
        Parameters, broadcastable to ``batch_shape``.

    Returns
    -------
    list of jax.Array
        ``params`` broadcast to ``sample_shape + batch_shape``.
    """
    assert is_prng_key(key)
    shape = tuple(sample_shape) + batch_shape
    return [jnp.broadcast_to(p, shape) for p in params]


# ---------------------------------------------------------------------------
# Inverse Gaussian
# ---------------------------------------------------------------------------


@jit
def _sample_inverse_gaussian(
    key: jax.Array, mu: jax.Array, lam: jax.Array
) -> jax.Array:
    """Michael, Schucany & Haas (1976) draw of ``IG(mu, lam)``, shape of ``mu``.

    With ``y = z^2``, ``r = mu y / (2 lam)`` the two roots of the
    transformation are ``mu / B`` and ``mu B`` with
    ``B = 1 + r + sqrt(r) sqrt(r + 2)``; writing them this way avoids both the
    subtraction of nearly equal numbers and the squaring of ``mu``.  The
    smaller root is kept with probability ``mu / (mu + x1) = B / (B + 1)``.
    """
    k_norm, k_unif = random.split(key)
    z = random.normal(k_norm, mu.shape, mu.dtype)
    u = random.uniform(k_unif, mu.shape, mu.dtype)
    r = (0.5 * mu / lam) * (z * z)
    big = 1.0 + r + jnp.sqrt(r) * jnp.sqrt(r + 2.0)
    accept_small = u * (big + 1.0) <= big
    return jnp.where(accept_small, mu / big, mu * big)


@jit
def _ig_log_prob(mu: jax.Array, lam: jax.Array, x: ArrayLike) -> jax.Array:
    """``0.5 log(lam / 2 pi) - 1.5 log x - (sqrt(lam / 2x) (x / mu - 1))^2``."""
    q = jnp.sqrt(0.5 * lam / x) * (x / mu - 1.0)
    return 0.5 * (jnp.log(lam) - _LOG_2PI) - 1.5 * jnp.log(x) - q * q


class InverseGaussian(Distribution):
    r"""Inverse Gaussian (Wald) distribution ``IG(mean, concentration)``.

    .. math::

        p(x \mid \mu, \lambda) = \sqrt{\frac{\lambda}{2 \pi x^3}}
        \exp\!\left(-\frac{\lambda (x - \mu)^2}{2 \mu^2 x}\right),
        \qquad x > 0,

    with mean :math:`\mu` and shape (concentration) :math:`\lambda`.  In the
    Bayesian SVM it is the conditional posterior of the inverse latent scale
    :math:`1/\lambda_n` (Polson & Scott 2011; Henao, Yuan & Carin 2014,
    whose marginal pseudo-likelihood is eq. (4)-(5)).

    Parameters
    ----------
    mean : array_like
        Mean :math:`\mu > 0`.
    concentration : array_like
        Shape :math:`\lambda > 0`.
    validate_args : bool, optional
        Check the parameter constraints (raises :class:`ValueError`).

    Notes
    -----
    * ``log_prob`` is evaluated as
      :math:`\tfrac12\log(\lambda/2\pi) - \tfrac32\log x -
      \big(\sqrt{\lambda/(2x)}\,(x/\mu - 1)\big)^2`, which neither cancels
      nor overflows before the true value does.
    * ``sample`` uses Michael, Schucany & Haas (1976) in a cancellation-free
      form: one normal and one uniform per draw and no rejection loop;
      samples are strictly positive and finite
      for means and concentrations in :math:`[10^{-8}, 10^{8}]`.  Sampling is
      not reparametrized.
    * ``mean`` is :math:`\mu`, ``variance`` is :math:`\mu^3 / \lambda`.

    References
    ----------
    J. R. Michael, W. R. Schucany and R. W. Haas (1976), The American
    Statistician 30(2), 88-90.  N. G. Polson and S. L. Scott (2011), Bayesian
    Analysis 6(1), 1-23.  R. Henao, X. Yuan and L. Carin (2014), "Bayesian
    Nonlinear SVMs and Discriminative Factor Modeling", NeurIPS 27.

    Examples
    --------
    >>> import jax
    >>> from bayes_maxmargin.core.distributions import InverseGaussian
    >>> d = InverseGaussian(2.0, 3.0)
    >>> d.sample(jax.random.PRNGKey(0), (4,)).shape
    (4,)
    """

    arg_constraints = {
        "mean": constraints.positive,
        "concentration": constraints.positive,
    }
    support = constraints.positive
    pytree_data_fields = ("_mean", "concentration")

    def __init__(
        self,
        mean: ArrayLike = 1.0,
        concentration: ArrayLike = 1.0,
        *,
        validate_args: Optional[bool] = None,
    ) -> None:
        (self._mean, self.concentration), batch_shape = _batch_params(mean, concentration)
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def sample(
        self, key: jax.Array, sample_shape: tuple[int, ...] = ()
    ) -> jax.Array:
        """Draw samples of shape ``sample_shape + batch_shape``.

        Parameters
        ----------
        key : jax.Array
            PRNG key.
        sample_shape : tuple of int, optional
            Leading shape of independent draws.

        Returns
        -------
        jax.Array
            Positive samples.
        """
        mu, lam = _sample_params(key, sample_shape, self.batch_shape, self._mean, self.concentration)
        return _sample_inverse_gaussian(key, mu, lam)

    @validate_sample
    def log_prob(self, value: ArrayLike) -> jax.Array:
        """Log density at ``value`` (broadcast against the batch shape).

        Parameters
        ----------
        value : array_like
            Points ``x > 0``.

        Returns
        -------
        jax.Array
            Log density.
        """
        return _ig_log_prob(self._mean, self.concentration, value)

    @property
    def mean(self) -> jax.Array:
        """Mean :math:`\\mu`, broadcast to the batch shape."""
        return jnp.broadcast_to(self._mean, self.batch_shape)

    @property
    def variance(self) -> jax.Array:
        """Variance :math:`\\mu^3 / \\lambda`, broadcast to the batch shape."""
        mu, lam = self._mean, self.concentration
        return jnp.broadcast_to(mu * mu * (mu / lam), self.batch_shape)


# ---------------------------------------------------------------------------
# Generalized inverse Gaussian
# ---------------------------------------------------------------------------


def _devroye_log_gig(
    key: jax.Array, lam: jax.Array, omega: jax.Array
) -> jax.Array:
    r"""Devroye (2014) rejection sampler for ``Y = log(X / m)``.

    ``X`` has density proportional to
    :math:`x^{\lambda - 1} \exp(-\tfrac{\omega}{2}(x + 1/x))` with
    :math:`\lambda \ge 0`, and :math:`m = (\lambda + \sqrt{\lambda^2 +
    \omega^2}) / \omega` is its mode-related scale, so that ``Y`` has the
    log-concave density :math:`e^{\psi(y)}` with
    :math:`\psi(y) = -\alpha(\cosh y - 1) - \lambda(e^y - y - 1)`,
    :math:`\alpha = \sqrt{\lambda^2 + \omega^2} - \lambda`, maximal at 0.
    The envelope is flat on ``[-s', t']`` with exponential tails given by
    the tangents of :math:`\psi` at ``t`` and ``-s``; its acceptance rate is
    bounded away from zero uniformly in the parameters.  All elements are
    sampled together by one ``lax.while_loop`` that runs until every element
    has accepted (the array-level equivalent of vmapping a scalar loop).
    """
    dtype = omega.dtype
    beta = jnp.hypot(omega, lam)
    # sqrt(lam^2 + omega^2) - lam without cancellation.
    alpha = omega * (omega / (beta + lam))
    lam_pos = lam > 0

    def psi(y: jax.Array) -> jax.Array:
        sh = jnp.sinh(0.5 * y)
        gamma_part = jnp.where(lam_pos, lam * (jnp.expm1(y) - y), 0.0)
        return -2.0 * alpha * sh * sh - gamma_part

    def dpsi(y: jax.Array) -> jax.Array:
        return -alpha * jnp.sinh(y) - jnp.where(lam_pos, lam * jnp.expm1(y), 0.0)

    one = jnp.asarray(1.0, dtype)
    cosh1 = math.cosh(1.0)

    # Right break point t: -psi(t) should lie in [1/2, 2].
    mt = -psi(one)
    t = jnp.where(
        (mt >= 0.5) & (mt <= 2.0),
        1.0,
        jnp.where(
            mt > 2.0,
            jnp.sqrt(2.0 / (alpha + lam)),
            jnp.log(4.0 / (alpha + 2.0 * lam)),
        ),
    )
    # Left break point s.
    ms = -psi(-one)
    inv_alpha = 1.0 / alpha
    s_acosh = jnp.log1p(inv_alpha + jnp.sqrt(inv_alpha) * jnp.sqrt(inv_alpha + 2.0))
    s_small = jnp.minimum(jnp.where(lam_pos, 1.0 / jnp.where(lam_pos, lam, 1.0), jnp.inf), s_acosh)
    s = jnp.where(
        (ms >= 0.5) & (ms <= 2.0),
        1.0,
        jnp.where(ms > 2.0, jnp.sqrt(4.0 / (alpha * cosh1 + lam)), s_small),
    )

    eta = -psi(t)
    zeta = -dpsi(t)
    theta = -psi(-s)
    xi = dpsi(-s)
    p_left = 1.0 / xi
    r_right = 1.0 / zeta
    t_flat = t - r_right * eta
    s_flat = s - p_left * theta
    q_flat = t_flat + s_flat
    total = p_left + q_flat + r_right

    def propose(k: jax.Array) -> tuple[jax.Array, jax.Array]:
        unif = random.uniform(k, (3,) + omega.shape, dtype)
        u = unif[0] * total
        # V, W in (0, 1] so that their logarithms are finite.
        log_v = jnp.log1p(-unif[1])
        v = 1.0 - unif[1]
        log_w = jnp.log1p(-unif[2])
        y = jnp.where(
            u < q_flat,
            -s_flat + q_flat * v,
            jnp.where(u < q_flat + r_right, t_flat - r_right * log_v, -s_flat + p_left * log_v),
        )
        log_env = jnp.where(
            y > t_flat,
            -eta - zeta * (y - t),
            jnp.where(y < -s_flat, -theta + xi * (y + s), 0.0),
        )
        return y, log_w + log_env <= psi(y)

    def cond(state: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
        return ~jnp.all(state[2])

    def body(
        state: tuple[jax.Array, jax.Array, jax.Array],
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        k, y, done = state
        k, k_prop = random.split(k)
        y_new, accept = propose(k_prop)
        y = jnp.where(done, y, y_new)
        return k, y, done | accept

    init = (key, jnp.zeros_like(omega), jnp.zeros(omega.shape, bool))
    _, y, _ = lax.while_loop(cond, body, init)
    return y


@jit
def _sample_gig_devroye(
    key: jax.Array, p: jax.Array, a: jax.Array, b: jax.Array
) -> jax.Array:
    """Exact ``GIG(p, a, b)`` draws for arbitrary real ``p`` (same-shape inputs)."""
    shape = p.shape
    # Work on flat arrays (simpler, faster-compiling loops); reshape at the end.
    p, a, b = (jnp.ravel(lax.stop_gradient(z)) for z in (p, a, b))
    lam = jnp.abs(p)
    sqrt_a, sqrt_b = jnp.sqrt(a), jnp.sqrt(b)
    omega = sqrt_a * sqrt_b
    y = _devroye_log_gig(key, lam, omega)
    # X2 = m exp(Y) ~ GIG(|p|, omega) in two-parameter form; GIG(-|p|, omega)
    # is its reciprocal; GIG(p, a, b) = sqrt(b / a) * GIG(p, sqrt(a b)).
    m = (lam + jnp.hypot(omega, lam)) / omega
    x2 = m * jnp.exp(y)
    scale = sqrt_b / sqrt_a
    return jnp.where(p < 0, scale / x2, scale * x2).reshape(shape)


@jit
def _gig_log_prob(p: jax.Array, a: jax.Array, b: jax.Array, x: ArrayLike) -> jax.Array:
    """GIG log density; the Bessel normaliser is evaluated on the parameter shape."""
    sqrt_a, sqrt_b = jnp.sqrt(a), jnp.sqrt(b)
    omega = sqrt_a * sqrt_b
    # -log K_p(omega) - (a x + b / x) / 2
    #   = -(log K_p(omega) + omega) - (sqrt(a x) - sqrt(b / x))^2 / 2,
    # which does not cancel when omega is large.
    log_norm = 0.5 * p * (jnp.log(a) - jnp.log(b)) - _LOG_2 - log_bessel_kve(p, omega)
    sqrt_x = jnp.sqrt(x)
    d = sqrt_a * sqrt_x - sqrt_b / sqrt_x
    return log_norm + (p - 1.0) * jnp.log(x) - 0.5 * d * d


@jit
def _gig_moments(p: jax.Array, a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """GIG mean and variance from Bessel ratios ``R_v = K_{v+1}(omega) / K_v(omega)``.

    ``mean = sqrt(b/a) R_p`` and ``var = (b/a) R_p (R_{p+1} - R_p)``.  The
    difference is taken between the ``R - 1`` values when both ratios are at
    least 1/2 (they tend to 1 for large omega, where ``R - 1`` is known to full
    relative precision) and between the ratios themselves otherwise (small
    omega with p < -1, where the ratios tend to 0).
    """
    omega = jnp.sqrt(a) * jnp.sqrt(b)
    # One quadrature for both orders p and p + 1.
    ratio, ratio_m1 = bessel_kv_ratios(jnp.stack([p, p + 1.0]), omega)
    r0, r1 = ratio[0], ratio[1]
    near_one = jnp.minimum(r0, r1) >= 0.5
    diff = jnp.where(near_one, ratio_m1[1] - ratio_m1[0], r1 - r0)
    scale = jnp.sqrt(b) / jnp.sqrt(a)
    return scale * r0, scale * scale * r0 * diff


class GeneralizedInverseGaussian(Distribution):
    r"""Generalized inverse Gaussian distribution ``GIG(p, a, b)``.

    .. math::

        p(x \mid p, a, b) = \frac{(a/b)^{p/2}}{2 K_p(\sqrt{ab})}\,
        x^{p - 1} \exp\!\left(-\frac{a x + b / x}{2}\right),
        \qquad x > 0,

    with :math:`a, b > 0`, real :math:`p` and :math:`K_p` the modified
    Bessel function of the second kind.  In the Bayesian SVM the latent
    scale :math:`\lambda_n` has the conditional
    ``GIG(1/2, gamma + 2 gamma0, gamma u_n^2)`` (Polson & Scott 2011;
    Henao, Yuan & Carin 2014, whose prior on :math:`\lambda_n` gives the
    marginal of eq. (4)-(5)).

    Parameters
    ----------
    p : array_like
        Real index :math:`p`.
    a : array_like
        :math:`a > 0` (coefficient of :math:`x`).
    b : array_like
        :math:`b > 0` (coefficient of :math:`1/x`).
    validate_args : bool, optional
        Check the parameter constraints (raises :class:`ValueError`).

    Notes
    -----
    * ``log_prob`` uses :func:`bayes_maxmargin.core.special.log_bessel_kve`
      (exact closed form at :math:`|p| = 1/2`) and is evaluated as
      :math:`\tfrac p2 \log\tfrac ab - \log 2 - \log(K_p(\omega) e^{\omega})
      + (p-1)\log x - \tfrac12(\sqrt{ax} - \sqrt{b/x})^2`, which avoids
      the cancellation between :math:`\log K_p(\omega) \approx -\omega`
      and :math:`(ax + b/x)/2` for large :math:`\omega`.
    * ``mean`` is :math:`\sqrt{b/a}\, R_p(\omega)` and ``variance`` is
      :math:`(b/a)\,(K_{p+2}/K_p - R_p^2)
      = (b/a)\, R_p (R_{p+1} - R_p)`, with :math:`\omega = \sqrt{ab}` and
      :math:`R_v = K_{v+1}(\omega)/K_v(\omega)`.  The difference
      :math:`R_{p+1} - R_p` is formed from
      the ``R - 1`` values of
      :func:`~bayes_maxmargin.core.special.bessel_kv_ratios` (no cancellation
      when the ratios are close to one, i.e. for large :math:`\omega`) or
      from the ratios themselves otherwise, so
      the variance keeps its relative accuracy even where it is many orders
      of magnitude below the squared mean.  Relative accuracy is about
      ``1e-9`` in float64; in float32 about ``1e-4`` for the mean and
      ``1e-3`` for the variance when :math:`|p| \le 20` (the variance
      degrades to about ``1e-2`` at :math:`|p| = 50` with small
      :math:`\omega`, where the Bessel functions are huge and their
      float32 logarithms carry absolute errors of order ``1e-4``).
    * ``sample`` is exact for every ``p``.  When ``p`` is concrete (not
      traced) and every entry is :math:`\pm 1/2`, it uses the inverse
      Gaussian identities ``GIG(-1/2, a, b) = IG(sqrt(b/a), b)`` and
      ``GIG(1/2, a, b) = 1 / IG(sqrt(a/b), a)`` (no rejection loop);
      otherwise it uses Devroye's (2014) uniformly efficient rejection
      sampler on the log scale inside a ``lax.while_loop``.  Sampling is not
      reparametrized.

    References
    ----------
    L. Devroye (2014), "Random variate generation for the generalized
    inverse Gaussian distribution", Statistics and Computing 24(2), 239-246.
    N. G. Polson and S. L. Scott (2011), Bayesian Analysis 6(1), 1-23.
    R. Henao, X. Yuan and L. Carin (2014), "Bayesian Nonlinear SVMs and
    Discriminative Factor Modeling", NeurIPS 27.

    Examples
    --------
    >>> import jax
    >>> from bayes_maxmargin.core.distributions import GeneralizedInverseGaussian
    >>> d = GeneralizedInverseGaussian(1.5, 2.0, 3.0)
    >>> d.sample(jax.random.PRNGKey(0), (4,)).shape
    (4,)
    """

    arg_constraints = {
        "p": constraints.real,
        "a": constraints.positive,
        "b": constraints.positive,
    }
    support = constraints.positive

    def __init__(
        self,
        p: ArrayLike,
        a: ArrayLike,
        b: ArrayLike,
        *,
        validate_args: Optional[bool] = None,
    ) -> None:
        (self.p, self.a, self.b), batch_shape = _batch_params(p, a, b)
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def _is_half(self) -> bool:
        """True when ``p`` is concrete and every entry is +1/2 or -1/2."""
        if not not_jax_tracer(self.p):
            return False
        try:
            return bool(np.all(np.abs(np.asarray(self.p)) == 0.5))
        except jax.errors.ConcretizationTypeError:  # pragma: no cover
            return False

    def sample(
        self, key: jax.Array, sample_shape: tuple[int, ...] = ()
    ) -> jax.Array:
        """Draw positive samples; the arguments and the shape as in :meth:`InverseGaussian.sample`."""
        p, a, b = _sample_params(key, sample_shape, self.batch_shape, self.p, self.a, self.b)
        if self._is_half():
            neg = p < 0
            sqrt_a, sqrt_b = jnp.sqrt(a), jnp.sqrt(b)
            mu = jnp.where(neg, sqrt_b / sqrt_a, sqrt_a / sqrt_b)
            lam = jnp.where(neg, b, a)
            y = _sample_inverse_gaussian(key, mu, lam)
            return jnp.where(neg, y, 1.0 / y)
        return _sample_gig_devroye(key, p, a, b)

    @validate_sample
    def log_prob(self, value: ArrayLike) -> jax.Array:
        """Log density at the points ``value > 0``, as in :meth:`InverseGaussian.log_prob`."""
        return _gig_log_prob(self.p, self.a, self.b, value)

    @property
    def mean(self) -> jax.Array:
        r"""Mean :math:`\sqrt{b/a}\, K_{p+1}(\omega) / K_p(\omega)`."""
        mean, _ = _gig_moments(self.p, self.a, self.b)
        return jnp.broadcast_to(mean, self.batch_shape)

    @property
    def variance(self) -> jax.Array:
        r"""Variance :math:`(b/a)[K_{p+2}/K_p - (K_{p+1}/K_p)^2]` at :math:`\omega = \sqrt{ab}`."""
        _, var = _gig_moments(self.p, self.a, self.b)
        return jnp.broadcast_to(var, self.batch_shape)


# ---------------------------------------------------------------------------
# Skewed Laplace
# ---------------------------------------------------------------------------


def _sl_rates(g: jax.Array, g0: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(c, gamma (c + 1), gamma (c - 1))`` computed without overflow or cancellation."""
    sqrt_g = jnp.sqrt(g)
    sqrt_g2 = jnp.sqrt(g + 2.0 * g0)
    c = sqrt_g2 / sqrt_g
    rate_pos = g + sqrt_g * sqrt_g2  # gamma (c + 1)
    rate_neg = 2.0 * g0 / (c + 1.0)  # gamma (c - 1) = 2 gamma0 / (c + 1)
    return c, rate_pos, rate_neg


@jit
def _sl_log_prob(g: jax.Array, g0: jax.Array, u: ArrayLike) -> jax.Array:
    """``log(gamma0 / c) - gamma (c |u| + u)`` through the one-sided rates."""
    c, rate_pos, rate_neg = _sl_rates(g, g0)
    log_norm = jnp.log(g0) - jnp.log(c)
    return log_norm - jnp.where(u >= 0, rate_pos * u, -rate_neg * u)


@jit
def _sl_cdf(g: jax.Array, g0: jax.Array, u: ArrayLike) -> jax.Array:
    """Closed-form CDF of the skewed Laplace distribution."""
    c, rate_pos, rate_neg = _sl_rates(g, g0)
    c_m1 = (2.0 * g0 / g) / (c + 1.0)  # c - 1
    neg = u < 0
    lower = (c + 1.0) / (2.0 * c) * jnp.exp(rate_neg * jnp.where(neg, u, 0.0))
    upper = 1.0 - c_m1 / (2.0 * c) * jnp.exp(-rate_pos * jnp.where(neg, 0.0, u))
    return jnp.where(neg, lower, upper)


@jit
def _sample_skewed_laplace(
    key: jax.Array, gamma: jax.Array, gamma0: jax.Array
) -> jax.Array:
    """Mixture draw: ``lam ~ Exp(gamma0)``, ``u ~ N(-lam, lam / gamma)``.

    The exponential is ``(z1^2 + z2^2) / 2`` (a chi-square with two degrees of
    freedom halved is ``Exp(1)``), so a single normal draw of three times the
    size feeds everything and the draw is differentiable in both parameters.
    """
    z = random.normal(key, (3,) + gamma.shape, gamma.dtype)
    lam = 0.5 * (z[0] * z[0] + z[1] * z[1]) / gamma0
    return -lam + jnp.sqrt(lam / gamma) * z[2]


class SkewedLaplace(Distribution):
    r"""Skewed Laplace distribution of the margin residual ``u = 1 - y f``.

    Henao, Yuan & Carin (2014), eq. (4)-(5): integrating the Polson & Scott
    (2011) normal location-scale mixture
    :math:`\mathcal N(u \mid -\lambda, \lambda/\gamma)` against the proper
    prior :math:`\lambda \sim \mathrm{Exp}(\gamma_0)` gives

    .. math::

        p(u \mid \gamma, \gamma_0) = \frac{\gamma_0}{c}
        \exp\!\big(-\gamma (c |u| + u)\big), \qquad
        c = \sqrt{1 + 2\gamma_0 / \gamma}, \quad u \in \mathbb R .

    For :math:`u \ge 0` the density decays at rate :math:`\gamma (c + 1)`,
    for :math:`u < 0` at rate :math:`\gamma (c - 1) = 2\gamma_0 / (c + 1)`;
    the mass on :math:`u < 0` is :math:`(c + 1) / (2c)`.

    Parameters
    ----------
    gamma : array_like
        Hinge scale :math:`\gamma > 0`.
    gamma0 : array_like
        Rate :math:`\gamma_0 > 0` of the exponential prior on the latent
        scale.
    validate_args : bool, optional
        Check the parameter constraints (raises :class:`ValueError`).

    Notes
    -----
    * ``log_prob`` is :math:`\log(\gamma_0 / c) - \gamma (c |u| + u)`,
      evaluated through the two one-sided rates so that nothing cancels
      when :math:`c \approx 1` and nothing overflows for parameters in
      :math:`[10^{-8}, 10^{8}]`.
    * ``sample`` draws :math:`\lambda \sim \mathrm{Exp}(\gamma_0)` and
      :math:`u \sim \mathcal N(-\lambda, \lambda / \gamma)`; it is
      reparametrized in both parameters.
    * ``mean`` is :math:`-1/\gamma_0`, ``variance`` is
      :math:`1/(\gamma\gamma_0) + 1/\gamma_0^2`; :meth:`cdf` is closed form.

    References
    ----------
    N. G. Polson and S. L. Scott (2011), "Data augmentation for support
    vector machines", Bayesian Analysis 6(1), 1-23.  R. Henao, X. Yuan and
    L. Carin (2014), "Bayesian Nonlinear SVMs and Discriminative Factor
    Modeling", NeurIPS 27, eq. (4)-(5).

    Examples
    --------
    >>> import jax
    >>> from bayes_maxmargin.core.distributions import SkewedLaplace
    >>> d = SkewedLaplace(1.0, 0.5)
    >>> float(d.mean)
    -2.0
    """

    arg_constraints = {
        "gamma": constraints.positive,
        "gamma0": constraints.positive,
    }
    support = constraints.real
    reparametrized_params = ["gamma", "gamma0"]

    def __init__(
        self,
        gamma: ArrayLike = 1.0,
        gamma0: ArrayLike = 1.0,
        *,
        validate_args: Optional[bool] = None,
    ) -> None:
        (self.gamma, self.gamma0), batch_shape = _batch_params(gamma, gamma0)
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def sample(
        self, key: jax.Array, sample_shape: tuple[int, ...] = ()
    ) -> jax.Array:
        """Draw real samples via the mixture; the arguments and the shape as in :meth:`InverseGaussian.sample`."""
        gamma, gamma0 = _sample_params(key, sample_shape, self.batch_shape, self.gamma, self.gamma0)
        return _sample_skewed_laplace(key, gamma, gamma0)

    @validate_sample
    def log_prob(self, value: ArrayLike) -> jax.Array:
        """Log density at the real points ``value``, as in :meth:`InverseGaussian.log_prob`."""
        return _sl_log_prob(self.gamma, self.gamma0, value)

    def cdf(self, value: ArrayLike) -> jax.Array:
        r"""Cumulative distribution function.

        .. math::

            F(u) = \begin{cases}
            \frac{c + 1}{2c}\, e^{\gamma (c - 1) u}, & u < 0, \\
            1 - \frac{c - 1}{2c}\, e^{-\gamma (c + 1) u}, & u \ge 0.
            \end{cases}

        Parameters
        ----------
        value : array_like
            Real points ``u``.

        Returns
        -------
        jax.Array
            :math:`P(U \le u)`.
        """
        return _sl_cdf(self.gamma, self.gamma0, value)

    @property
    def mean(self) -> jax.Array:
        r"""Mean :math:`-1/\gamma_0`."""
        return jnp.broadcast_to(-1.0 / self.gamma0, self.batch_shape)

    @property
    def variance(self) -> jax.Array:
        r"""Variance :math:`1/(\gamma\gamma_0) + 1/\gamma_0^2`."""
        inv_g0 = 1.0 / self.gamma0
        return jnp.broadcast_to(inv_g0 * (1.0 / self.gamma + inv_g0), self.batch_shape)


# ---------------------------------------------------------------------------
# Unit-variance normal truncated to the positive half-line
# ---------------------------------------------------------------------------

#: Below this mean the positive normal is drawn by the tail method (the inverse CDF would need
#: Phi(mean) < Phi(-5) ~ 3e-7, which underflows in float32 from mean ~ -13 on).
_TAIL_START = -5.0


def sample_positive_normal(key: jax.Array, mean: ArrayLike) -> jax.Array:
    r"""Draws of :math:`u \sim \mathcal N(m, 1)` truncated to :math:`u > 0`, one per entry of ``mean``.

    The Albert & Chib (1993) probit augmentation draws ``z ~ N(f, 1)`` truncated to the sign of ``y``;
    with ``u = y z`` and ``m = y f`` that is this draw. With ``e = u - m``, the excess over the bound
    ``-m``:

    * for ``m >= -5``, the inverse CDF by symmetry, ``-e = Phi^-1(U Phi(m))``, ``U ~ U(0, 1)``: the
      argument stays above ``Phi(-5) U`` (no cancellation near 1, as ``1 - Phi(-m)`` would have);
    * for ``m < -5``, Marsaglia's (1964) tail method: ``e = sqrt(a^2 - 2 log V1)``, ``a = -m``,
      accepted when ``V2 e < a`` (rejection from the density proportional to
      ``e exp(-e^2 / 2)`` on ``e > a``; acceptance rate above 0.96), repeated until every entry is
      accepted; ``u = e - a`` is formed as ``-2 log V1 / (e + a)``. Exact for any ``a``, however far
      in the tail, and accurate to the dtype's precision relative to ``u``.

    Parameters
    ----------
    key : PRNG key
    mean : array_like
        Means m (any shape, floating).

    Returns
    -------
    jax.Array
        Positive draws, shape and dtype of ``mean``.

    References
    ----------
    J. H. Albert and S. Chib (1993), "Bayesian analysis of binary and polychotomous response data",
    JASA 88(422), 669-679. G. Marsaglia (1964), "Generating a variable from the tail of the normal
    distribution", Technometrics 6(1), 101-102.
    """
    m = jnp.asarray(mean)
    if not jnp.issubdtype(m.dtype, jnp.floating):
        m = m.astype(jnp.result_type(float))
    return _sample_positive_normal(key, m)


@jit
def _sample_positive_normal(key: jax.Array, m: jax.Array) -> jax.Array:
    from jax.scipy.special import ndtr, ndtri

    dtype = m.dtype
    tiny = jnp.finfo(dtype).tiny
    k_inv, k_tail = random.split(key)
    body_m = jnp.maximum(m, _TAIL_START)
    uni = random.uniform(k_inv, m.shape, dtype, minval=tiny, maxval=1.0)
    near = body_m - ndtri(uni * ndtr(body_m))  # u = m + e, -e = Phi^-1(U Phi(m))
    a = jnp.maximum(-m, -_TAIL_START)

    def draw(k):  # (e - a, accepted): e - a = -2 log V1 / (e + a), free of the cancellation in e - a
        v = random.uniform(k, (2,) + m.shape, dtype, minval=tiny, maxval=1.0)
        e = jnp.sqrt(a * a - 2.0 * jnp.log(v[0]))
        return -2.0 * jnp.log(v[0]) / (e + a), v[1] * e < a

    def cond(state):
        return ~jnp.all(state[1] | (m >= _TAIL_START))

    def body(state):
        excess, ok, k = state
        k, sub = random.split(k)
        new, ok_new = draw(sub)
        return jnp.where(ok, excess, new), ok | ok_new, k

    k0, k_loop = random.split(k_tail)
    tail, _, _ = lax.while_loop(cond, body, (*draw(k0), k_loop))  # u = m + e = e - a
    u = jnp.where(m >= _TAIL_START, near, tail)
    return jnp.maximum(u, tiny)  # a rounding of Phi^-1 near the bound cannot leave the support
