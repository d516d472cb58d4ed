"""Tests of :mod:`bayes_maxmargin.core.distributions`.

Statistical checks use fixed seeds: Kolmogorov-Smirnov tests with 20k draws
(p-value > 1e-3) against SciPy's ``invgauss`` / ``geninvgauss`` and against
the closed-form CDF of the skewed Laplace distribution, plus moment checks.
Everything runs in float32 and float64 (``jax.enable_x64`` as a context
manager, never the global flag).

XLA compilation dominates the run time, so each distribution is exercised
through one batched instance per dtype (all parameter sets side by side,
computed once and cached) rather than many small calls, and those instances
skip NumPyro's (eager, separately compiled) argument validation, which is
tested on its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from scipy.integrate import cumulative_trapezoid, simpson

from bayes_maxmargin.core.distributions import GeneralizedInverseGaussian, InverseGaussian, SkewedLaplace

pytestmark = pytest.mark.xla_optimized  # time goes to running compiled code, not compiling it

N_DRAWS = 20_000
KS_PVALUE = 1e-3
X64 = pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])


def _dtype(x64: bool) -> jnp.dtype:
    return jnp.float64 if x64 else jnp.float32


def _eps(x64: bool) -> float:
    return float(np.finfo(np.float64 if x64 else np.float32).eps)


def _log_scale_error(ours: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|ours - ref| relative to max(1, |ref|) (for log densities)."""
    return np.abs(np.asarray(ours, np.float64) - ref) / np.maximum(1.0, np.abs(ref))


def _resolved(mean: np.ndarray, conc: np.ndarray, x64: bool) -> np.ndarray:
    """Whether the relative spread sqrt(mean / conc) of IG(mean, conc) is well
    above the dtype's resolution; below it, the log density at representable
    points is ill-conditioned (a one-ulp change of x moves it by O(1))."""
    return np.sqrt(mean / conc) > 1e3 * _eps(x64)


def _check_moments(samples: np.ndarray, mean: float, var: float, kurt_excess: float) -> None:
    """Sample mean and variance within 5 of their standard errors."""
    n = samples.size
    samples = samples.astype(np.float64)
    assert abs(samples.mean() - mean) < 5.0 * np.sqrt(var / n), (samples.mean(), mean)
    se_var = var * np.sqrt((kurt_excess + 2.0) / n)
    assert abs(samples.var() - var) < 5.0 * se_var, (samples.var(), var)


# Parameters from 1e-8 to 1e8 (finiteness checks), shared by all three.
_EXTREME = np.logspace(-8.0, 8.0, 9)
EXT_A, EXT_B = (a.ravel() for a in np.meshgrid(_EXTREME, _EXTREME, indexing="ij"))

# ---------------------------------------------------------------------------
# Inverse Gaussian
# ---------------------------------------------------------------------------

# Means and concentrations in 1e-3 .. 1e3 (statistical checks).
_IG_VALS = np.logspace(-3.0, 3.0, 5)
IG_MEAN, IG_CONC = (a.ravel() for a in np.meshgrid(_IG_VALS, _IG_VALS, indexing="ij"))
N_IG = IG_MEAN.size
IG_ALL_MEAN = np.concatenate([IG_MEAN, EXT_A])
IG_ALL_CONC = np.concatenate([IG_CONC, EXT_B])


def _scipy_invgauss(mean: float, conc: float) -> st.rv_continuous:
    return st.invgauss(mean / conc, scale=conc)


def _ig_logpdf(x: np.ndarray, mean: np.ndarray, conc: np.ndarray) -> np.ndarray:
    """Float64 reference log density of IG(mean, conc)."""
    return (
        0.5 * np.log(conc / (2.0 * np.pi))
        - 1.5 * np.log(x)
        - conc * (x - mean) ** 2 / (2.0 * mean**2 * x)
    )


_IG_QUANTILES = np.array([1e-3, 0.1, 0.5, 0.9, 0.999])


def _ig_quantile_points() -> np.ndarray:
    """scipy quantiles of the statistical grid; the mean elsewhere."""
    x = np.tile(IG_ALL_MEAN, (len(_IG_QUANTILES), 1))
    x[:, :N_IG] = np.stack([_scipy_invgauss(m, c).ppf(_IG_QUANTILES) for m, c in zip(IG_MEAN, IG_CONC)], -1)
    return x


@functools.lru_cache(maxsize=None)
def _ig_run(x64: bool) -> dict[str, np.ndarray]:
    """One batched InverseGaussian over both parameter grids."""
    with jax.enable_x64(x64):
        dt = _dtype(x64)
        d = InverseGaussian(
            jnp.asarray(IG_ALL_MEAN, dt), jnp.asarray(IG_ALL_CONC, dt), validate_args=False
        )
        draws = d.sample(jax.random.PRNGKey(0), (N_DRAWS,))
        # log_prob at the draws, at quantiles and at the mean in one call
        points = jnp.concatenate([draws, jnp.asarray(_ig_quantile_points(), dt), d.mean[None]])
        lp = np.asarray(d.log_prob(points))
        out = {
            "draws": np.asarray(draws),
            "lp_draws": lp[:N_DRAWS],
            "lp_quantiles": lp[N_DRAWS:-1],
            "lp_mean": lp[-1],
            "mean": np.asarray(d.mean),
            "var": np.asarray(d.variance),
        }
    assert out["draws"].dtype == np.dtype(_dtype(x64))
    return out


@X64
def test_inverse_gaussian_ks_and_moments(x64: bool) -> None:
    run = _ig_run(x64)
    draws, mean, var = run["draws"][:, :N_IG], run["mean"][:N_IG], run["var"][:N_IG]
    assert np.all(np.isfinite(draws)) and np.all(draws > 0)
    rtol = 1e-12 if x64 else 1e-6
    for j, (mu, lam) in enumerate(zip(IG_MEAN, IG_CONC)):
        ref = _scipy_invgauss(mu, lam)
        pvalue = st.kstest(draws[:, j].astype(np.float64), ref.cdf).pvalue
        assert pvalue > KS_PVALUE, (mu, lam, pvalue)
        np.testing.assert_allclose(mean[j], ref.mean(), rtol=rtol)
        np.testing.assert_allclose(var[j], ref.var(), rtol=rtol)
        if mu / lam <= 1.0:  # light enough tails for sample moments
            _check_moments(draws[:, j], mu, mu**3 / lam, 15.0 * mu / lam)


@X64
def test_inverse_gaussian_log_prob_matches_scipy(x64: bool) -> None:
    run = _ig_run(x64)
    # at the draws of the statistical grid ...
    x = run["draws"][:100, :N_IG].astype(np.float64)
    ref = np.stack(
        [_scipy_invgauss(m, c).logpdf(x[:, j]) for j, (m, c) in enumerate(zip(IG_MEAN, IG_CONC))], -1
    )
    tol = 1e-12 if x64 else 1e-4
    assert _log_scale_error(run["lp_draws"][:100, :N_IG], ref).max() < tol
    # ... and at quantiles from 1e-3 to 0.999.
    x = _ig_quantile_points()[:, :N_IG]
    ref = np.stack(
        [_scipy_invgauss(m, c).logpdf(x[:, j]) for j, (m, c) in enumerate(zip(IG_MEAN, IG_CONC))], -1
    )
    assert _log_scale_error(run["lp_quantiles"][:, :N_IG], ref).max() < tol


@X64
def test_inverse_gaussian_extreme_parameters_are_finite(x64: bool) -> None:
    run = _ig_run(x64)
    draws = run["draws"][:, N_IG:]
    assert np.all(np.isfinite(draws)) and np.all(draws > 0)
    assert np.all(np.isfinite(run["lp_draws"])) and np.all(np.isfinite(run["lp_mean"]))
    mean, var = run["mean"][N_IG:], run["var"][N_IG:]
    assert np.all(np.isfinite(var)) and np.all(var > 0)
    np.testing.assert_allclose(mean, EXT_A, rtol=1e-6)
    np.testing.assert_allclose(var, EXT_A**3 / EXT_B, rtol=1e-5)
    # log_prob at the mean against the float64 formula, wherever the
    # relative spread sqrt(mu / lam) is resolved by the dtype.
    ok = _resolved(EXT_A, EXT_B, x64)
    ref = _ig_logpdf(EXT_A, EXT_A, EXT_B)
    assert _log_scale_error(run["lp_mean"][N_IG:][ok], ref[ok]).max() < (1e-12 if x64 else 1e-5)
    # Sample means within 5 standard errors (plus rounding) where the tails
    # are light (coefficient of variation sqrt(mu / lam) <= 1).
    light = EXT_A <= EXT_B
    tol = 5.0 * np.sqrt(var[light] / N_DRAWS) + 100 * _eps(x64) * EXT_A[light]
    sample_mean = draws[:, light].astype(np.float64).mean(axis=0)
    assert np.all(np.abs(sample_mean - EXT_A[light]) < tol)


def test_inverse_gaussian_batching_pytree_and_validation() -> None:
    d = InverseGaussian(jnp.ones((3, 1)), jnp.array([0.5, 1.0, 2.0, 4.0]), validate_args=False)
    assert d.batch_shape == (3, 4)
    key = jax.random.PRNGKey(0)
    assert jax.eval_shape(lambda k: d.sample(k, (2,)), key).shape == (2, 3, 4)
    assert d.log_prob(jnp.ones(4)).shape == (3, 4)
    assert d.mean.shape == d.variance.shape == (3, 4)
    # jit(log_prob) equals the eager evaluation (the distribution is a pytree).
    x = jnp.array([0.1, 1.0, 3.0, 30.0])
    np.testing.assert_allclose(jax.jit(lambda d, x: d.log_prob(x))(d, x), d.log_prob(x), rtol=1e-5)
    # A pytree: vmap over the distribution itself.
    flat = InverseGaussian(jnp.array([1.0, 2.0, 3.0]), jnp.array([0.5, 1.0, 2.0]), validate_args=False)
    by_vmap = jax.vmap(lambda d: d.log_prob(1.5))(flat)
    np.testing.assert_allclose(by_vmap, flat.log_prob(1.5), rtol=1e-6)
    with pytest.raises(ValueError):
        InverseGaussian(-1.0, 1.0, validate_args=True)
    with pytest.raises(ValueError):
        InverseGaussian(1.0, jnp.array([1.0, 0.0]), validate_args=True)
    InverseGaussian(1.0, 2.0, validate_args=True)  # valid parameters pass


# ---------------------------------------------------------------------------
# Generalized inverse Gaussian
# ---------------------------------------------------------------------------

GIG_PARAMS = np.array(
    [
        # p, a, b
        (0.0, 1.0, 1.0),
        (1.3, 2.0, 0.5),
        (-2.7, 0.3, 4.0),
        (5.0, 1e-3, 1e3),
        (-20.0, 1.0, 1.0),
        (0.2, 1e-4, 1e-4),
        (3.0, 1e3, 1e3),
        (-0.7, 50.0, 0.02),
        (50.0, 1.0, 1.0),
        (0.5, 2.0, 3.0),
        (-0.5, 2.0, 3.0),
        (1e-3, 1e-6, 1e-6),
        (-1.2, 1e6, 1e6),
    ]
)
N_GIG = len(GIG_PARAMS)
# p from -50 to 50 with a, b at the ends of 1e-8 .. 1e8 (finiteness checks).
_P_EXT = np.array([-50.0, -3.3, -0.5, 0.0, 0.5, 2.2, 50.0])
_AB_EXT = np.array([(1e-8, 1e-8), (1e-8, 1e8), (1e8, 1e-8), (1e8, 1e8), (1e-8, 1.0)])
GIG_EXT = np.array([(p, a, b) for p in _P_EXT for a, b in _AB_EXT])
GIG_ALL = np.concatenate([GIG_PARAMS, GIG_EXT])
# p = -1/2 at (a, b) = (lam / mu^2, lam) is IG(mu, lam); p = +1/2 at
# (a, b) = (lam, lam / mu^2) is its reciprocal.  Alternating the sign over the
# inverse Gaussian grid (mu, lam in 1e-8 .. 1e8, so omega = lam / mu spans
# 1e-16 .. 1e16) exercises the +-1/2 sampling shortcut.
HALF_NEG = np.arange(IG_ALL_MEAN.size) % 2 == 0
_LAM_MU2 = IG_ALL_CONC / IG_ALL_MEAN**2
GIG_HALF = np.stack(
    [
        np.where(HALF_NEG, -0.5, 0.5),
        np.where(HALF_NEG, _LAM_MU2, IG_ALL_CONC),
        np.where(HALF_NEG, IG_ALL_CONC, _LAM_MU2),
    ],
    -1,
)
N_ALL = len(GIG_ALL)
# log_prob and moments of everything come from one instance with a
# two-dimensional batch shape.
GIG_EVAL = np.concatenate([GIG_ALL, GIG_HALF])
EVAL_BATCH = (2, len(GIG_EVAL) // 2)
# Points at which log_prob is compared with references: multiples of the mean.
_X_FACTORS = np.array([0.1, 0.5, 1.0, 2.0, 5.0])


def _scipy_gig(p: float, a: float, b: float) -> st.rv_continuous:
    return st.geninvgauss(p, np.sqrt(a * b), scale=np.sqrt(b / a))


def _gig(params: np.ndarray, dt: jnp.dtype) -> GeneralizedInverseGaussian:
    return GeneralizedInverseGaussian(
        *(jnp.asarray(c, dt) for c in params.T), validate_args=False
    )


def _gig_numeric_cdf(p: float, a: float, b: float, lo: float, hi: float) -> Callable:
    """CDF from scipy's logpdf integrated on a fine grid in log x.

    scipy's own ``geninvgauss.cdf`` uses adaptive quadrature that fails for
    very small ``sqrt(a b)``; the log-grid integral is accurate everywhere.
    """
    ref = _scipy_gig(p, a, b)
    z = np.linspace(np.log(lo) - 6.0, np.log(hi) + 6.0, 40_001)
    dens = np.exp(ref.logpdf(np.exp(z)) + z)
    cdf = cumulative_trapezoid(dens, z, initial=0.0)
    assert abs(cdf[-1] - 1.0) < 1e-3
    cdf /= cdf[-1]
    return lambda x: np.interp(np.log(x), z, cdf)


def _half_mean(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean of GIG(+-1/2, a, b) from the inverse Gaussian."""
    return np.where(p < 0, np.sqrt(b / a), np.sqrt(b / a) + 1.0 / a)


def _x_grid() -> np.ndarray:
    """(len(_X_FACTORS), len(GIG_EVAL)) evaluation points: multiples of the mean."""
    mean = np.ones(len(GIG_EVAL))
    mean[:N_GIG] = [_scipy_gig(*prm).mean() for prm in GIG_PARAMS]
    mean[N_ALL:] = _half_mean(*GIG_HALF.T)
    return _X_FACTORS[:, None] * mean


@functools.lru_cache(maxsize=None)
def _gig_run(x64: bool) -> dict[str, np.ndarray]:
    """Draws of GIG_ALL (general sampler) and GIG_HALF (inverse Gaussian
    shortcut); log densities and moments of both from one instance."""
    with jax.enable_x64(x64):
        dt = _dtype(x64)
        # Under jit, p is traced, so the general (Devroye) sampler runs for
        # every column, the +-1/2 ones included; a two-dimensional batch shape
        # checks that the sampler's flattening is undone correctly.
        params = (jnp.asarray(c, dt).reshape(2, -1) for c in GIG_ALL.T)
        draws = _sample_traced(jax.random.PRNGKey(2), *params).reshape(N_DRAWS, -1)
        # Same key as the inverse Gaussian run: the same underlying draws.
        half_draws = _gig(GIG_HALF, dt).sample(jax.random.PRNGKey(0), (N_DRAWS,))
        d = GeneralizedInverseGaussian(
            *(jnp.asarray(c, dt).reshape(EVAL_BATCH) for c in GIG_EVAL.T), validate_args=False
        )
        points = jnp.concatenate(
            [jnp.concatenate([draws, half_draws], axis=1), jnp.asarray(_x_grid(), dt)]
        )
        lp = _flatten_batch(d.log_prob(points.reshape((-1,) + EVAL_BATCH)))
        out = {
            "draws": np.asarray(draws),
            "half_draws": np.asarray(half_draws),
            "lp_draws": lp[:N_DRAWS],
            "lp_grid": lp[N_DRAWS:],
            "mean": _flatten_batch(d.mean),
            "var": _flatten_batch(d.variance),
        }
    assert d.batch_shape == EVAL_BATCH
    assert out["draws"].shape == (N_DRAWS, N_ALL)
    assert out["draws"].dtype == out["half_draws"].dtype == np.dtype(_dtype(x64))
    return out


@jax.jit
def _sample_traced(key: jax.Array, p: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    return GeneralizedInverseGaussian(p, a, b, validate_args=False).sample(key, (N_DRAWS,))


def _flatten_batch(x: jax.Array) -> np.ndarray:
    """(..., *EVAL_BATCH) -> (..., prod(EVAL_BATCH)) as a NumPy array."""
    x = np.asarray(x)
    return x.reshape(x.shape[:-2] + (-1,))


#: The float32 GIG runs (a second full sampling run) are extended; finiteness in float32 is checked above.
X64_KS = pytest.mark.parametrize("x64", [pytest.param(False, marks=pytest.mark.extended), True],
                                 ids=["float32", "float64"])


@X64_KS
def test_gig_ks_and_moments(x64: bool) -> None:
    run = _gig_run(x64)
    samples = run["draws"][:, :N_GIG].astype(np.float64)
    assert np.all(np.isfinite(samples)) and np.all(samples > 0)
    for j, (p, a, b) in enumerate(GIG_PARAMS):
        s = samples[:, j]
        cdf = _gig_numeric_cdf(p, a, b, s.min(), s.max())
        pvalue = st.kstest(s, cdf).pvalue
        assert pvalue > KS_PVALUE, (p, a, b, pvalue)
        ref = _scipy_gig(p, a, b)
        if ref.var() < ref.mean() ** 2:  # light enough tails for sample moments
            _check_moments(s, ref.mean(), ref.var(), float(ref.stats(moments="k")))


@X64_KS
def test_gig_half_order_sampling_is_inverse_gaussian(x64: bool) -> None:
    """For p = -1/2 the draws are those of IG(mu, lam), for +1/2 their reciprocals."""
    half, ig = _gig_run(x64)["half_draws"], _ig_run(x64)["draws"]
    assert np.all(np.isfinite(half)) and np.all(half > 0)
    same = np.where(HALF_NEG, half, 1.0 / half)
    # Parameters round differently on the two paths, which can flip an
    # accept decision of the Michael-Schucany-Haas step in float32 for a
    # draw that falls within rounding of the threshold (rare).
    close = np.isclose(same, ig, rtol=1e-10 if x64 else 1e-4, atol=0.0)
    assert close.mean() > 1.0 - 1e-5


@X64
def test_gig_log_prob_mean_variance_match_scipy(x64: bool) -> None:
    run = _gig_run(x64)
    ref_mean = np.array([_scipy_gig(*prm).mean() for prm in GIG_PARAMS])
    ref_var = np.array([_scipy_gig(*prm).var() for prm in GIG_PARAMS])
    x = _x_grid()[:, :N_GIG]
    ref_lp = np.stack([_scipy_gig(*prm).logpdf(x[:, j]) for j, prm in enumerate(GIG_PARAMS)], -1)
    tol = 1e-10 if x64 else 1e-4
    assert _log_scale_error(run["lp_grid"][:, :N_GIG], ref_lp).max() < tol
    # also at (some of) the draws
    xd = run["draws"][:50, :N_GIG].astype(np.float64)
    ref_lpd = np.stack([_scipy_gig(*prm).logpdf(xd[:, j]) for j, prm in enumerate(GIG_PARAMS)], -1)
    assert _log_scale_error(run["lp_draws"][:50, :N_GIG], ref_lpd).max() < tol
    np.testing.assert_allclose(run["mean"][:N_GIG], ref_mean, rtol=1e-9 if x64 else 1e-4)
    np.testing.assert_allclose(run["var"][:N_GIG], ref_var, rtol=1e-6 if x64 else 1e-3)


@X64
def test_gig_half_order_density_and_moments(x64: bool) -> None:
    """GIG(-1/2, a, b) = IG(sqrt(b/a), b) and GIG(1/2, a, b) = 1 / IG(sqrt(a/b), a).

    Here omega = sqrt(ab) spans 1e-16 .. 1e16; for large omega the variance
    is many orders of magnitude below the squared mean.
    """
    run = _gig_run(x64)
    mu, lam = IG_ALL_MEAN, IG_ALL_CONC
    x = _x_grid()[:, N_ALL:]
    ref_lp = np.where(
        HALF_NEG,
        _ig_logpdf(x, mu, lam),
        _ig_logpdf(1.0 / x, mu, lam) - 2.0 * np.log(x),
    )
    ok = _resolved(mu, lam, x64)
    err = _log_scale_error(run["lp_grid"][:, N_ALL:][:, ok], ref_lp[:, ok])
    assert err.max() < (1e-12 if x64 else 1e-5)
    ref_mean = np.where(HALF_NEG, mu, 1.0 / mu + 1.0 / lam)
    ref_var = np.where(HALF_NEG, mu**3 / lam, 1.0 / (mu * lam) + 2.0 / lam**2)
    rtol = 1e-10 if x64 else 1e-4
    np.testing.assert_allclose(run["mean"][N_ALL:], ref_mean, rtol=rtol)
    np.testing.assert_allclose(run["var"][N_ALL:], ref_var, rtol=rtol)


@X64
def test_gig_extreme_parameters_are_finite(x64: bool) -> None:
    run = _gig_run(x64)
    draws = run["draws"][:, N_GIG:].astype(np.float64)
    mean, var = run["mean"][N_GIG:N_ALL], run["var"][N_GIG:N_ALL]
    assert np.all(np.isfinite(draws)) and np.all(draws > 0)
    assert np.all(np.isfinite(run["lp_draws"]))
    assert np.all(np.isfinite(mean)) and np.all(mean > 0)
    assert np.all(np.isfinite(var)) and np.all(var > 0)
    # Sample means within 5 standard errors where the tails are light.
    light = var <= mean**2
    assert light.sum() > len(GIG_EXT) // 2
    tol = 5.0 * np.sqrt(var[light] / N_DRAWS) + 100 * _eps(x64) * mean[light]
    assert np.all(np.abs(draws[:, light].mean(axis=0) - mean[light]) < tol)


def test_gig_batching_and_validation() -> None:
    d = GeneralizedInverseGaussian(
        jnp.array([[0.5], [1.5]]), 1.0, jnp.array([1.0, 2.0, 3.0]), validate_args=False
    )
    assert d.batch_shape == (2, 3)
    key = jax.random.PRNGKey(0)
    assert jax.eval_shape(lambda k: d.sample(k, (5,)), key).shape == (5, 2, 3)
    assert jax.eval_shape(d.log_prob, jnp.ones((4, 1, 1))).shape == (4, 2, 3)
    assert jax.eval_shape(lambda: d.variance).shape == (2, 3)
    x = jnp.array([0.3, 1.0, 4.0])
    np.testing.assert_allclose(jax.jit(lambda d, x: d.log_prob(x))(d, x), d.log_prob(x), rtol=1e-5)
    with pytest.raises(ValueError):
        GeneralizedInverseGaussian(0.5, -1.0, 1.0, validate_args=True)
    with pytest.raises(ValueError):
        GeneralizedInverseGaussian(0.5, 1.0, jnp.array([1.0, -2.0]), validate_args=True)
    GeneralizedInverseGaussian(-3.0, 1.0, 2.0, validate_args=True)  # any real p


# ---------------------------------------------------------------------------
# Skewed Laplace (Henao et al. 2014, eq. 5)
# ---------------------------------------------------------------------------

SL_PARAMS = np.array(
    [(1.0, 1.0), (0.1, 2.0), (5.0, 0.01), (1e-3, 1e3), (1e3, 1e-3), (2.0, 2.0)]
)
N_SL = len(SL_PARAMS)


def _sl_rates(gamma: np.ndarray, gamma0: np.ndarray) -> tuple[np.ndarray, ...]:
    """c and the decay rates of exp(-gamma (c|u| + u)) on u >= 0 and on u < 0."""
    c = np.sqrt(1.0 + 2.0 * gamma0 / gamma)
    return c, gamma * (c + 1.0), gamma * (c - 1.0)


def _sl_cdf(u: np.ndarray, gamma: float, gamma0: float) -> np.ndarray:
    """Closed-form CDF: mass (c+1)/(2c) on u < 0, decaying at rate gamma (c-1)
    to the left; the rest on u >= 0, decaying at rate gamma (c+1)."""
    c, rate_pos, rate_neg = _sl_rates(gamma, gamma0)
    neg_mass = (c + 1.0) / (2.0 * c)
    return np.where(
        u < 0,
        neg_mass * np.exp(rate_neg * np.minimum(u, 0.0)),
        1.0 - (1.0 - neg_mass) * np.exp(-rate_pos * np.maximum(u, 0.0)),
    )


def test_skewed_laplace_density_integrates_to_one_and_matches_formula() -> None:
    g, g0 = SL_PARAMS.T
    c, rate_pos, rate_neg = _sl_rates(g, g0)
    s = np.linspace(0.0, 60.0, 6001)  # in units of each side's decay length
    u = np.concatenate([-(s[::-1, None] / rate_neg), s[1:, None] / rate_pos])
    with jax.enable_x64(True):
        d = SkewedLaplace(g, g0, validate_args=False)
        lp = np.asarray(d.log_prob(u))
        cdf = np.asarray(d.cdf(u))
    dens = np.exp(lp)
    n = s.size
    mass_neg = simpson(dens[:n], x=u[:n], axis=0)
    mass_pos = simpson(dens[n - 1 :], x=u[n - 1 :], axis=0)
    np.testing.assert_allclose(mass_neg + mass_pos, 1.0, rtol=1e-9)
    np.testing.assert_allclose(mass_neg, (c + 1.0) / (2.0 * c), rtol=1e-9)
    # (the plain formulas cancel for u < 0 when c ~ 1, hence the tolerances)
    direct = np.log(g0 / c) - g * (c * np.abs(u) + u)
    np.testing.assert_allclose(lp, direct, rtol=1e-9)
    np.testing.assert_allclose(cdf, _sl_cdf(u, g, g0), rtol=1e-8, atol=1e-15)
    # the CDF is the integral of the density
    cum = cumulative_trapezoid(dens, u, axis=0, initial=0.0)
    np.testing.assert_allclose(cdf[n - 1], cum[n - 1] + cdf[0], rtol=1e-4)


@functools.lru_cache(maxsize=None)
def _sl_run(x64: bool) -> dict[str, np.ndarray]:
    """One batched SkewedLaplace over SL_PARAMS and the 1e-8 .. 1e8 grid."""
    g = np.concatenate([SL_PARAMS[:, 0], EXT_A])
    g0 = np.concatenate([SL_PARAMS[:, 1], EXT_B])
    with jax.enable_x64(x64):
        dt = _dtype(x64)
        d = SkewedLaplace(jnp.asarray(g, dt), jnp.asarray(g0, dt), validate_args=False)
        draws = d.sample(jax.random.PRNGKey(6), (N_DRAWS,))
        points = jnp.concatenate([draws, jnp.zeros((1, g.size), dt)])
        lp = d.log_prob(points)
        out = {
            "draws": draws,
            "lp_draws": lp[:N_DRAWS],
            "lp0": lp[N_DRAWS],
            "cdf_draws": d.cdf(draws),
            "mean": d.mean,
            "var": d.variance,
        }
        out = {k: np.asarray(v) for k, v in out.items()}
    assert out["draws"].dtype == np.dtype(_dtype(x64))
    return out


@X64
def test_skewed_laplace_ks_and_moments(x64: bool) -> None:
    run = _sl_run(x64)
    draws = run["draws"][:, :N_SL].astype(np.float64)
    mean, var, lp = run["mean"][:N_SL], run["var"][:N_SL], run["lp_draws"][:200, :N_SL]
    g, g0 = SL_PARAMS.T
    c, rate_pos, rate_neg = _sl_rates(g, g0)
    # Raw moments of the two-sided exponential: w.p. q it is -Exp(rate_neg),
    # otherwise Exp(rate_pos); E[U^k] = k! ((1 - q) / r_+^k + q (-1)^k / r_-^k).
    q_neg = (c + 1.0) / (2.0 * c)
    raw = {
        k: math.factorial(k) * ((1 - q_neg) / rate_pos**k + q_neg * (-1.0) ** k / rate_neg**k)
        for k in (1, 2, 3, 4)
    }
    m = raw[1]
    central2 = raw[2] - m**2
    central4 = raw[4] - 4 * m * raw[3] + 6 * m**2 * raw[2] - 3 * m**4
    rtol = 1e-12 if x64 else 1e-5
    np.testing.assert_allclose(mean, -1.0 / g0, rtol=rtol)
    np.testing.assert_allclose(mean, m, rtol=1e-4)
    np.testing.assert_allclose(var, 1.0 / (g * g0) + 1.0 / g0**2, rtol=rtol)
    np.testing.assert_allclose(var, central2, rtol=1e-4)
    ref_lp = np.log(g0 / c) - g * (c * np.abs(draws[:200]) + draws[:200])
    assert _log_scale_error(lp, ref_lp).max() < (1e-10 if x64 else 1e-5)
    for j, (gj, g0j) in enumerate(SL_PARAMS):
        pvalue = st.kstest(draws[:, j], lambda u: _sl_cdf(u, gj, g0j)).pvalue
        assert pvalue > KS_PVALUE, (gj, g0j, pvalue)
        _check_moments(draws[:, j], -1.0 / g0j, central2[j], central4[j] / central2[j] ** 2 - 3.0)
        # the cdf method agrees with the derived closed form at the draws
        np.testing.assert_allclose(
            run["cdf_draws"][:, j], _sl_cdf(draws[:, j], gj, g0j), rtol=1e-8 if x64 else 1e-4, atol=1e-7
        )


@X64
def test_skewed_laplace_extreme_parameters_are_finite(x64: bool) -> None:
    run = _sl_run(x64)
    draws = run["draws"][:, N_SL:].astype(np.float64)
    assert np.all(np.isfinite(draws))
    assert np.all(np.isfinite(run["lp_draws"])) and np.all(np.isfinite(run["lp0"]))
    cdf = run["cdf_draws"]
    assert np.all((cdf >= 0) & (cdf <= 1))
    mean, var = run["mean"][N_SL:], run["var"][N_SL:]
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var)) and np.all(var > 0)
    c = np.sqrt(1.0 + 2.0 * EXT_B / EXT_A)
    np.testing.assert_allclose(run["lp0"][N_SL:], np.log(EXT_B) - np.log(c), rtol=1e-5, atol=1e-5)
    # The fraction of negative draws is (c + 1) / (2c) ...
    frac_neg = (draws < 0).mean(axis=0)
    np.testing.assert_allclose(frac_neg, (c + 1.0) / (2.0 * c), atol=0.02)
    # ... and the sample mean is within 5 standard errors of -1 / gamma0.
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5.0 * np.sqrt(var / N_DRAWS))


def test_skewed_laplace_batching_jit_and_validation() -> None:
    d = SkewedLaplace(jnp.array([[1.0], [2.0]]), jnp.array([0.5, 1.0, 4.0]), validate_args=False)
    assert d.batch_shape == (2, 3)
    key = jax.random.PRNGKey(0)
    assert jax.eval_shape(lambda k: d.sample(k, (7,)), key).shape == (7, 2, 3)
    u = jnp.linspace(-3.0, 3.0, 11)[:, None, None]
    np.testing.assert_allclose(jax.jit(lambda d, u: d.log_prob(u))(d, u), d.log_prob(u), rtol=1e-6)
    # Reparametrized sampling: the sample mean's gradient in gamma0 is that of -1/gamma0.
    grad = jax.grad(
        lambda g0: SkewedLaplace(1.0, g0, validate_args=False)
        .sample(jax.random.PRNGKey(1), (N_DRAWS,))
        .mean()
    )(2.0)
    assert float(grad) == pytest.approx(1.0 / 2.0**2, rel=0.05)
    with pytest.raises(ValueError):
        SkewedLaplace(-1.0, 1.0, validate_args=True)
    with pytest.raises(ValueError):
        SkewedLaplace(1.0, 0.0, validate_args=True)


# ---------------------------------------------------------------------------
# Positive normal (the probit augmentation)
# ---------------------------------------------------------------------------

#: Means on both sides of the switch to the tail method at -5, far into the tail and far above 0.
POSITIVE_NORMAL_MEANS = (-40.0, -8.0, -5.01, -4.99, -1.0, 0.0, 3.0, 30.0)


@X64
def test_positive_normal_ks_mean_and_support(x64: bool) -> None:
    """N(m, 1) truncated to (0, inf): KS against SciPy's truncnorm and the mean m + phi(m) / Phi(m)
    within 5 standard errors (sd / sqrt(N): a false alarm about 1 in 1.7 million per mean), for every
    mean, in one batched call; far out (m = -1e6, 1e6) the draws stay positive and finite."""
    from bayes_maxmargin.core.distributions import sample_positive_normal

    with jax.enable_x64(x64):
        means = jnp.asarray(np.repeat(np.asarray(POSITIVE_NORMAL_MEANS)[:, None], N_DRAWS, 1), _dtype(x64))
        u = np.asarray(sample_positive_normal(jax.random.PRNGKey(0), means), np.float64)
        far = np.asarray(sample_positive_normal(jax.random.PRNGKey(1), jnp.asarray([-1e6, 1e6], _dtype(x64))))
    assert u.dtype == np.float64 and np.all(u > 0) and np.all(np.isfinite(u))
    assert np.all(far > 0) and np.all(np.isfinite(far))
    for m, row in zip(POSITIVE_NORMAL_MEANS, u):
        ref = st.truncnorm(-m, np.inf, loc=m)
        assert st.kstest(row, ref.cdf).pvalue > KS_PVALUE, m
        assert abs(row.mean() - ref.mean()) < 5 * ref.std() / math.sqrt(N_DRAWS), m
