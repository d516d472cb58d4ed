r"""Special functions needed by the Bayesian max-margin models.

The generalized inverse Gaussian (GIG) distribution, which appears as the
conditional posterior of the latent scale variables of Bayesian support
vector machines, is normalised by the modified Bessel function of the second
kind :math:`K_v`.  JAX ships no implementation of :math:`K_v` for arbitrary
real order, so this module provides one that works on the log scale, is
jit-able, vmap-able, differentiable (in both order and argument), and valid in
float32 as well as float64.

Method
------
For :math:`x > 0` and any real :math:`v` (``K`` is even in ``v``),

.. math::

    K_v(x) = \int_0^\infty e^{-x \cosh t} \cosh(v t) \, dt
           = e^{-x} \int_0^\infty \exp\!\big(-2 x \sinh^2(t/2)
             + \log\cosh(v t)\big) \, dt .

The integrand is an even, entire function of ``t`` that decays
double-exponentially, so the trapezoid rule converges geometrically in the
number of nodes (Trefethen & Weideman 2014, "The exponentially convergent
trapezoidal rule", SIAM Review 56(3)).  The sum is accumulated with
``logsumexp``, which keeps everything finite even when :math:`K_v(x)`
over- or underflows the floating point range.  The nodes are placed
adaptively around the mode :math:`t^\ast \approx \operatorname{asinh}(|v|/x)`
of the integrand and cover the region where the integrand is within
:math:`e^{-60}` of its maximum, so that a fixed number of nodes
(:data:`N_QUADRATURE_NODES`) suffices for :math:`x \in [10^{-10}, 10^{10}]`
and :math:`|v|` up to a few hundred.

Public functions
----------------
* :func:`log_bessel_kv` -- :math:`\log K_v(x)`;
* :func:`log_bessel_kve` -- :math:`\log K_v(x) + x` (the log of SciPy's
  ``kve``), for expressions in which ``x`` cancels;
* :func:`bessel_kv_ratio`, :func:`bessel_kv_ratio_m1` and
  :func:`bessel_kv_ratios` -- :math:`K_{v+1}(x)/K_v(x)` and that ratio minus
  one, from the same quadrature (needed for GIG moments).  The latter is
  the quadrature of the cancellation-free integrand
  :math:`\cosh((v+1)t) - \cosh(vt) = 2\sinh((v+\tfrac12)t)\sinh(t/2)`,
  so it keeps full relative precision even for very large ``x``, where the
  ratio is :math:`1 + O(1/x)`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bayes_maxmargin.core.compilation import jit

__all__ = ["N_QUADRATURE_NODES", "bessel_kv_ratio", "bessel_kv_ratio_m1", "bessel_kv_ratios", "log_bessel_kv",
           "log_bessel_kve"]

#: Number of trapezoid nodes used by the quadrature.
N_QUADRATURE_NODES: int = 256

# The integration window keeps every point where the log-integrand is within
# ``_LOG_TAIL`` of its maximum (exp(-60) ~ 1e-26, far below float64 epsilon).
_LOG_TAIL: float = 60.0
_LOG2: float = math.log(2.0)


def _promote(v: ArrayLike, x: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Convert ``v`` and ``x`` to broadcast floating arrays of a common dtype."""
    v = jnp.asarray(v)
    x = jnp.asarray(x)
    dtype = jnp.result_type(v, x, 1.0)
    v, x = jnp.broadcast_arrays(v.astype(dtype), x.astype(dtype))
    return v, x


def _acosh1p(y: jax.Array) -> jax.Array:
    """``acosh(1 + y)`` for ``y >= 0`` without overflow or cancellation."""
    return jnp.log1p(y + jnp.sqrt(y) * jnp.sqrt(y + 2.0))


def _window(av: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Integration window ``[t_lo, t_hi]`` for order ``av = |v|`` and argument ``x``.

    Around the mode ``t* = asinh(|v| / x)`` the log-integrand behaves like a
    parabola of curvature ``s = sqrt(x^2 + v^2)``; to the right it falls
    double-exponentially (``acosh(1 + 60/s)`` brings it down by 60), to the
    left it falls at least linearly with slope ``|v|`` once ``|v| t*`` is
    large (``60/|v| + 1`` brings it down by 60).
    """
    t_star = jnp.arcsinh(av / x)
    s = jnp.hypot(x, av)
    sigma = jax.lax.rsqrt(s)
    t_hi = t_star + _acosh1p(_LOG_TAIL / s)
    pos = av > 0
    av_safe = jnp.where(pos, av, 1.0)
    left = jnp.where(pos, _LOG_TAIL / av_safe + 1.0, jnp.inf)
    t_lo = jnp.maximum(0.0, t_star - jnp.maximum(12.0 * sigma, left))
    return t_lo, t_hi


def _nodes(
    orders: tuple[jax.Array, ...], x: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Trapezoid nodes covering the integrands of all ``orders`` at ``x``.

    Returns
    -------
    t : jax.Array
        Nodes, shape ``x.shape + (N_QUADRATURE_NODES,)``.
    base : jax.Array
        ``-2 x sinh(t/2)^2 + log(weight)`` at the nodes (same shape), where
        the weights are those of the trapezoid rule (half weight at both
        ends; the left end is ``t = 0`` whenever the window reaches zero,
        which is exactly the half weight an even integrand needs there).
    h : jax.Array
        Node spacing, shape ``x.shape``.
    """
    t_lo, t_hi = _window(jnp.abs(orders[0]), x)
    for v in orders[1:]:
        lo, hi = _window(jnp.abs(v), x)
        t_lo = jnp.minimum(t_lo, lo)
        t_hi = jnp.maximum(t_hi, hi)
    n = N_QUADRATURE_NODES
    h = (t_hi - t_lo) / (n - 1)
    i = jnp.arange(n, dtype=x.dtype)
    t = t_lo[..., None] + i * h[..., None]
    log_w = jnp.zeros((n,), x.dtype).at[0].set(-_LOG2).at[-1].set(-_LOG2)
    sh = jnp.sinh(0.5 * t)
    base = -2.0 * x[..., None] * sh * sh + log_w + jnp.log(h)[..., None]
    return t, base, h


def _log_cosh(z: jax.Array) -> jax.Array:
    """``log(cosh(z))`` without overflow."""
    return jnp.logaddexp(z, -z) - _LOG2


def _log_sinh_pos(z: jax.Array) -> jax.Array:
    """``log(sinh(z))`` for ``z > 0`` without overflow (``-inf`` at ``z <= 0``).

    Gradient-safe at ``z = 0``: the masked entries never see ``log(0)``.
    """
    pos = z > 0
    zs = jnp.where(pos, z, 1.0)
    val = zs + jnp.log(-jnp.expm1(-2.0 * zs)) - _LOG2
    return jnp.where(pos, val, -jnp.inf)


def _log_sinhc(z: jax.Array) -> jax.Array:
    """``log(sinh(z) / z)`` (even and smooth in ``z``, zero at ``z = 0``)."""
    az = jnp.abs(z)
    small = az < 1e-2
    z2 = z * z
    series = z2 / 6.0 - z2 * z2 / 180.0
    big = jnp.where(small, 1.0, az)
    direct = big + jnp.log(-jnp.expm1(-2.0 * big)) - _LOG2 - jnp.log(big)
    return jnp.where(small, series, direct)


def _log_kve_quad(v: jax.Array, x: jax.Array) -> jax.Array:
    """``log(K_v(x)) + x`` by the trapezoid rule (no closed-form shortcut)."""
    t, base, _ = _nodes((v,), x)
    return jax.nn.logsumexp(base + _log_cosh(v[..., None] * t), axis=-1)


@jit
def log_bessel_kv(v: ArrayLike, x: ArrayLike) -> jax.Array:
    r"""Logarithm of the modified Bessel function of the second kind.

    Computes :math:`\log K_v(x)` for real order ``v`` and argument
    ``x > 0`` with the adaptive trapezoid rule described in the module
    docstring.  At :math:`|v| = 1/2` the exact value
    :math:`\log K_{1/2}(x) = \tfrac12 \log(\pi / (2x)) - x` is returned
    (its derivatives are still those of the quadrature, so gradients in
    ``v`` remain correct there).

    Parameters
    ----------
    v : array_like
        Order (any real number; :math:`K_{-v} = K_v`).
    x : array_like
        Argument, strictly positive.  ``v`` and ``x`` are broadcast
        against each other.

    Returns
    -------
    jax.Array
        :math:`\log K_v(x)`, in the floating dtype obtained by promoting
        ``v`` and ``x`` (float32 unless 64-bit mode is enabled and an input
        is float64).  Non-positive ``x`` yields ``nan`` or ``inf``.

    Notes
    -----
    * The error of :math:`\log K_v(x)` is a few units of roundoff of the
      largest intermediate (about :math:`x + |v| t^\ast`): against
      :func:`scipy.special.kve` it is below ``1e-13`` (float64) and
      ``1e-5`` (float32) relative to :math:`\max(1, |\log K_v(x)|)` for
      :math:`x \in [10^{-10}, 10^{10}]` and :math:`|v| \le 50`.  The result
      stays finite far beyond the range where :math:`K_v(x)` itself
      overflows (e.g. :math:`K_{50}(10^{-10}) \approx 10^{530}`).
    * Jit-able, vmap-able and differentiable in ``v`` and ``x`` with
      :func:`jax.grad`; the derivative in ``x`` agrees with
      :math:`K_v'(x) = -(K_{v-1}(x) + K_{v+1}(x))/2`.
    * Memory and time scale as ``size * N_QUADRATURE_NODES``.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from bayes_maxmargin.core.special import log_bessel_kv
    >>> float(jnp.exp(log_bessel_kv(0.0, 1.0)))  # doctest: +ELLIPSIS
    0.42102...
    """
    v, x = _promote(v, x)
    return _log_kve(v, x) - x


def _log_kve(v: jax.Array, x: jax.Array) -> jax.Array:
    """``log K_v(x) + x`` with the closed form at ``|v| = 1/2``."""
    av = jnp.abs(v)
    log_k = _log_kve_quad(av, x)
    half = av == 0.5
    closed = 0.5 * jnp.log(jnp.pi / (2.0 * x))
    return jnp.where(half, log_k + jax.lax.stop_gradient(closed - log_k), log_k)


@jit
def log_bessel_kve(v: ArrayLike, x: ArrayLike) -> jax.Array:
    r"""Logarithm of the exponentially scaled Bessel function, :math:`\log K_v(x) + x`.

    The same computation as :func:`log_bessel_kv` without the final
    subtraction of ``x`` (the quadrature works with this scaled quantity
    internally), i.e. the logarithm of :func:`scipy.special.kve`.  Use it
    when ``x`` cancels against other terms of size ``x``, e.g. in the
    generalized inverse Gaussian log density, where
    :math:`-\log K_p(\omega) - (a x + b/x)/2` equals
    :math:`-\log(K_p(\omega) e^{\omega}) - (\sqrt{a x} - \sqrt{b / x})^2 / 2`
    with :math:`\omega = \sqrt{ab}`; for large :math:`\omega` the
    second form keeps its precision in float32.  The order ``v`` and the
    argument ``x`` are as in :func:`log_bessel_kv`.

    Returns
    -------
    jax.Array
        :math:`\log K_v(x) + x` (exact closed form at :math:`|v| = 1/2`).

    Examples
    --------
    >>> from bayes_maxmargin.core.special import log_bessel_kve
    >>> round(float(log_bessel_kve(0.5, 2.0)), 6)  # 0.5 log(pi / 4)
    -0.120782
    """
    v, x = _promote(v, x)
    return _log_kve(v, x)


def _ratio_parts(
    v: ArrayLike, x: ArrayLike
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Shared quadrature for :func:`bessel_kv_ratio` and :func:`bessel_kv_ratio_m1`.

    Returns ``(log_ratio, log_m1_over_c, c)`` with
    ``log_ratio = log(K_{v+1}/K_v)``, ``c = v + 1/2`` and
    ``K_{v+1}/K_v - 1 = c * exp(log_m1_over_c)``.
    """
    v, x = _promote(v, x)
    t, base, _ = _nodes((v, v + 1.0), x)
    vt = v[..., None]
    log_d = jax.nn.logsumexp(base + _log_cosh(vt * t), axis=-1)
    log_d1 = jax.nn.logsumexp(base + _log_cosh((vt + 1.0) * t), axis=-1)
    # cosh((v+1)t) - cosh(vt) = 2 sinh((v+1/2) t) sinh(t/2) has one sign for
    # all t > 0.  Writing sinh(ct) = c t sinhc(ct) keeps the factor c outside
    # the logarithm, so the result is smooth (and exactly zero) at c = 0.
    c = v + 0.5
    log_t = _log_sinh_pos(0.5 * t) + jnp.log(jnp.where(t > 0, t, 1.0))
    log_n_terms = _LOG2 + _log_sinhc(c[..., None] * t) + log_t
    log_n = jax.nn.logsumexp(base + log_n_terms, axis=-1)
    return log_d1 - log_d, log_n - log_d, c


@jit
def bessel_kv_ratio(v: ArrayLike, x: ArrayLike) -> jax.Array:
    r"""Ratio :math:`K_{v+1}(x) / K_v(x)` of modified Bessel functions.

    The order ``v`` and the argument ``x`` are as in :func:`log_bessel_kv`.

    Returns
    -------
    jax.Array
        :math:`K_{v+1}(x) / K_v(x)`, accurate to a few ulps relative to the
        ratio even where both Bessel functions over- or underflow.

    Examples
    --------
    >>> from bayes_maxmargin.core.special import bessel_kv_ratio
    >>> round(float(bessel_kv_ratio(0.5, 2.0)), 6)  # 1 + 1/x
    1.5
    """
    log_ratio, _, _ = _ratio_parts(v, x)
    return jnp.exp(log_ratio)


@jit
def bessel_kv_ratio_m1(v: ArrayLike, x: ArrayLike) -> jax.Array:
    r""":math:`K_{v+1}(x) / K_v(x) - 1` without cancellation.

    For large ``x`` the ratio is :math:`1 + (2v + 1)/(2x) + O(x^{-2})`;
    subtracting one from the rounded ratio would lose all relative
    precision.  Here the difference is itself a quadrature of the
    single-signed integrand :math:`2\sinh((v+\tfrac12)t)\sinh(t/2)`, so it
    keeps full relative precision for every ``x``.  It is exactly zero at
    ``v = -1/2``, positive for ``v > -1/2`` and negative below.  The order
    ``v`` and the argument ``x`` are as in :func:`log_bessel_kv`.

    Returns
    -------
    jax.Array
        :math:`K_{v+1}(x) / K_v(x) - 1`.

    Examples
    --------
    >>> from bayes_maxmargin.core.special import bessel_kv_ratio_m1
    >>> float(bessel_kv_ratio_m1(0.5, 1e6))  # doctest: +ELLIPSIS
    1.0000...e-06
    """
    _, log_m1_over_c, c = _ratio_parts(v, x)
    return c * jnp.exp(log_m1_over_c)


@jit
def bessel_kv_ratios(v: ArrayLike, x: ArrayLike) -> tuple[jax.Array, jax.Array]:
    r"""Both :math:`K_{v+1}(x)/K_v(x)` and :math:`K_{v+1}(x)/K_v(x) - 1` from one quadrature.

    Equivalent to ``(bessel_kv_ratio(v, x), bessel_kv_ratio_m1(v, x))`` at
    the cost of one of them, with ``v`` and ``x`` as in :func:`log_bessel_kv`.

    Returns
    -------
    ratio : jax.Array
        :math:`K_{v+1}(x) / K_v(x)`.
    ratio_m1 : jax.Array
        :math:`K_{v+1}(x) / K_v(x) - 1`, with full relative precision.
    """
    log_ratio, log_m1_over_c, c = _ratio_parts(v, x)
    return jnp.exp(log_ratio), c * jnp.exp(log_m1_over_c)
