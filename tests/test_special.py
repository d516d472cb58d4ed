"""Tests of :mod:`bayes_maxmargin.core.special` against SciPy's Bessel functions.

Compilation dominates the run time, so every test evaluates one fixed grid
per dtype (computed once and cached) instead of many small calls.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from bayes_maxmargin.core.special import bessel_kv_ratio, bessel_kv_ratio_m1, log_bessel_kv

# Orders in [-30, 30] (including the closed-form points +-1/2, points next to
# them and next to zero) times arguments in [1e-8, 1e8]: all within the range
# where scipy's kve is finite.
_ORDERS = np.concatenate(
    [np.linspace(-30.0, 30.0, 61), [-0.5, 0.5, 0.4999, 0.5001, 1e-3, 0.1, 2.5, 7.3]]
)
_ARGS = np.logspace(-8.0, 8.0, 97)
V_GRID, X_GRID = (a.ravel() for a in np.meshgrid(_ORDERS, _ARGS, indexing="ij"))

# Extreme corner: x in [1e-10, 1e10], |v| <= 50 (K_50(1e-10) ~ 1e530 overflows
# float64, and scipy's kve returns nan for x >= ~1e10).
V_EXT, X_EXT = (
    a.ravel()
    for a in np.meshgrid(
        np.array([0.0, 0.5, 1.0, 7.5, 25.0, 50.0, -50.0]),
        np.logspace(-10.0, 10.0, 21),
        indexing="ij",
    )
)
N_GRID = V_GRID.size


def _dtype(x64: bool) -> jnp.dtype:
    return jnp.float64 if x64 else jnp.float32


@functools.lru_cache(maxsize=None)
def _log_kv_on_grids(x64: bool) -> tuple[np.ndarray, np.ndarray]:
    """log_bessel_kv on (V_GRID, X_GRID) and (V_EXT, X_EXT), one compiled call."""
    v = np.concatenate([V_GRID, V_EXT])
    x = np.concatenate([X_GRID, X_EXT])
    with jax.enable_x64(x64):
        out = np.asarray(log_bessel_kv(jnp.asarray(v, _dtype(x64)), jnp.asarray(x, _dtype(x64))))
    assert out.dtype == np.dtype(_dtype(x64))
    return out[:N_GRID], out[N_GRID:]


def _ref_log_kv(v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """log K_v(x) from scipy's exponentially scaled kve (nan/inf where kve fails)."""
    with np.errstate(all="ignore"):
        return np.log(sp.kve(v, x)) - x


def _log_scale_error(ours: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|log K - log K_ref| relative to max(1, |log K_ref|)."""
    return np.abs(ours - ref) / np.maximum(1.0, np.abs(ref))


@pytest.mark.parametrize("x64,tol", [(True, 1e-10), (False, 5e-5)])
def test_log_bessel_kv_matches_scipy(x64: bool, tol: float) -> None:
    ours, _ = _log_kv_on_grids(x64)
    ref = _ref_log_kv(V_GRID, X_GRID)
    assert np.all(np.isfinite(ref))
    assert np.all(np.isfinite(ours))
    err = _log_scale_error(ours.astype(np.float64), ref)
    i = err.argmax()
    assert err[i] < tol, (V_GRID[i], X_GRID[i], ours[i], ref[i])


@pytest.mark.parametrize("x64,tol", [(True, 1e-10), (False, 5e-5)])
def test_extreme_arguments_and_orders(x64: bool, tol: float) -> None:
    """Finite over x in [1e-10, 1e10], |v| <= 50, beyond where K_v overflows."""
    _, ours = _log_kv_on_grids(x64)
    ours = ours.astype(np.float64)
    assert np.all(np.isfinite(ours))
    # K is even in v.
    pos50, neg50 = V_EXT == 50.0, V_EXT == -50.0
    np.testing.assert_array_equal(ours[pos50], ours[neg50])
    ref = _ref_log_kv(V_EXT, X_EXT)
    ok = np.isfinite(ref)
    assert _log_scale_error(ours[ok], ref[ok]).max() < tol
    # Overflow of K_v (small x, large v): log K_v(x) ~ lgamma(v) + v log(2/x) - log 2.
    small = ~ok & (X_EXT < 1.0)
    assert small.any()
    av = np.abs(V_EXT[small])
    asym = sp.gammaln(av) + av * np.log(2.0 / X_EXT[small]) - np.log(2.0)
    assert _log_scale_error(ours[small], asym).max() < tol
    # Large x where scipy gives up: Hankel expansion
    # K_v(x) ~ sqrt(pi / 2x) e^{-x} (1 + (4v^2 - 1) / (8x)).
    big = ~ok & (X_EXT >= 1.0)
    assert big.any()
    v, x = V_EXT[big], X_EXT[big]
    hankel = 0.5 * np.log(np.pi / (2.0 * x)) - x + np.log1p((4.0 * v**2 - 1.0) / (8.0 * x))
    assert _log_scale_error(ours[big], hankel).max() < tol


@pytest.mark.parametrize("x64", [False, True])
def test_closed_form_at_half_order(x64: bool) -> None:
    ours, _ = _log_kv_on_grids(x64)
    half = np.abs(V_GRID) == 0.5
    with jax.enable_x64(x64):
        x = jnp.asarray(X_GRID[half], _dtype(x64))
        exact = np.asarray(0.5 * jnp.log(jnp.pi / (2.0 * x)) - x)
    np.testing.assert_array_equal(ours[half], exact)


_GRAD_V, _GRAD_X = (
    a.ravel()
    for a in np.meshgrid(
        np.array([0.0, 0.3, 0.5, -0.5, 1.0, 2.5, -7.0, 17.2, 30.0]),
        np.logspace(-8.0, 8.0, 17),
        indexing="ij",
    )
)
_grads = jax.jit(jax.vmap(jax.grad(log_bessel_kv, argnums=(0, 1))))


def test_grad_in_x_matches_bessel_identity() -> None:
    """d/dx log K_v = -(K_{v-1} + K_{v+1}) / (2 K_v), float64 and float32."""
    v, x = _GRAD_V, _GRAD_X
    ref = -(sp.kve(v - 1.0, x) + sp.kve(v + 1.0, x)) / (2.0 * sp.kve(v, x))
    with jax.enable_x64(True):
        _, gx = _grads(v, x)
        gx = np.asarray(gx)
    assert np.all(np.isfinite(gx))
    np.testing.assert_allclose(gx, ref, rtol=1e-10)
    _, gx32 = _grads(v.astype(np.float32), x.astype(np.float32))
    assert np.all(np.isfinite(gx32))
    np.testing.assert_allclose(np.asarray(gx32), ref, rtol=1e-3)


def test_grad_matches_finite_differences() -> None:
    v, x = _GRAD_V, _GRAD_X
    with jax.enable_x64(True):
        gv, gx = (np.asarray(g) for g in _grads(v, x))
    h = 1e-5
    with np.errstate(all="ignore"):
        fd_v = (np.log(sp.kve(v + h, x)) - np.log(sp.kve(v - h, x))) / (2.0 * h)
        hx = 1e-6 * x
        fd_x = (
            np.log(sp.kve(v, x + hx)) - (x + hx) - np.log(sp.kve(v, x - hx)) + (x - hx)
        ) / (2.0 * hx)
    assert np.all(np.isfinite(gv))
    np.testing.assert_allclose(gv, fd_v, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gx, fd_x, rtol=1e-5)
    # K is even in v, so the derivative (essentially) vanishes at v = 0.
    assert np.all(np.abs(gv[v == 0.0]) < 1e-8)


def test_broadcasting_vmap_and_dtypes() -> None:
    # vmap over the orders; inside, a scalar order broadcasts against all x.
    rows = jax.vmap(log_bessel_kv, in_axes=(0, None))(
        jnp.asarray(_ORDERS, jnp.float32), jnp.asarray(_ARGS, jnp.float32)
    )
    assert rows.shape == (_ORDERS.size, _ARGS.size)
    assert rows.dtype == jnp.float32
    ours, _ = _log_kv_on_grids(False)
    err = _log_scale_error(np.asarray(rows, np.float64).ravel(), ours.astype(np.float64))
    assert err.max() < 1e-6
    # Broadcasting of array arguments.
    shape = jax.eval_shape(log_bessel_kv, jnp.zeros((3, 1)), jnp.ones(4)).shape
    assert shape == (3, 4)
    # Integer inputs are promoted to the default float dtype.
    assert jax.eval_shape(log_bessel_kv, 2, 3).dtype == jnp.float32
    with jax.enable_x64(True):
        assert jax.eval_shape(log_bessel_kv, 2, 3).dtype == jnp.float64
        f32 = jax.ShapeDtypeStruct((), jnp.float32)
        assert jax.eval_shape(log_bessel_kv, f32, f32).dtype == jnp.float32


@settings(max_examples=40, deadline=None)
@given(
    v=st.floats(min_value=0.0, max_value=25.0),
    log10_x=st.floats(min_value=-4.0, max_value=4.0),
)
def test_three_term_recurrence(v: float, log10_x: float) -> None:
    """K_{v+1}(x) = K_{v-1}(x) + (2v/x) K_v(x) for v >= 0 (all terms positive)."""
    x = 10.0**log10_x
    with jax.enable_x64(True):
        lk = np.asarray(log_bessel_kv(jnp.array([v - 1.0, v, v + 1.0]), jnp.full(3, x)))
    rhs = np.logaddexp(lk[0], np.log(2.0 * v / x) + lk[1]) if v > 0 else lk[0]
    np.testing.assert_allclose(lk[2], rhs, rtol=1e-11, atol=1e-11)


@jax.jit
def _ratios(v: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    return bessel_kv_ratio(v, x), bessel_kv_ratio_m1(v, x)


_LARGE_X_V = np.array([-3.0, -0.75, -0.5, 0.0, 0.25, 0.5, 1.0, 5.0])


def test_ratios_match_scipy() -> None:
    v = np.concatenate([V_GRID, _LARGE_X_V])
    x = np.concatenate([X_GRID, np.full(_LARGE_X_V.size, 1e7)])
    with jax.enable_x64(True):
        ratio, m1 = (np.asarray(r)[:N_GRID] for r in _ratios(v, x))
    ref = sp.kve(V_GRID + 1.0, X_GRID) / sp.kve(V_GRID, X_GRID)
    np.testing.assert_allclose(ratio, ref, rtol=1e-11)
    # Where the ratio is not close to one, ratio - 1 can be checked directly.
    far = np.abs(ref - 1.0) > 1e-2
    np.testing.assert_allclose(m1[far], ref[far] - 1.0, rtol=1e-11)
    np.testing.assert_allclose(m1, ratio - 1.0, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("x64", [False, True])
def test_ratio_m1_keeps_relative_precision_for_large_x(x64: bool) -> None:
    """K_{v+1}/K_v - 1 = (2v+1)/(2x) (1 + O(1/x)); exactly 1/x at v = 1/2."""
    x = 1e7
    v = np.concatenate([V_GRID, _LARGE_X_V])
    xx = np.concatenate([X_GRID, np.full(_LARGE_X_V.size, x)])
    with jax.enable_x64(x64):
        _, m1 = _ratios(jnp.asarray(v, _dtype(x64)), jnp.asarray(xx, _dtype(x64)))
        m1 = np.asarray(m1)[N_GRID:]
    leading = (2.0 * _LARGE_X_V + 1.0) / (2.0 * x)
    np.testing.assert_allclose(m1, leading, rtol=1e-5)
    assert m1[_LARGE_X_V == -0.5][0] == 0.0
    assert m1[_LARGE_X_V == 0.5][0] == pytest.approx(1.0 / x, rel=1e-12 if x64 else 1e-5)
