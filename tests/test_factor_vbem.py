"""VB-EM of the discriminative factor models (Henao et al. 2014, supplement Sec. 1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core.kernels import SEParams, se
from bayes_maxmargin.core.parameters import from_unconstrained, to_unconstrained
from bayes_maxmargin.models.factor.vbem import (
    VBHyper,
    e_step,
    factor_bound,
    init_vb,
    m_step,
    mstep_bound,
    mstep_grad_w_se,
    run_vbem,
)

HYPER = VBHyper(1.0, 1.0, 1.0, 1.0, 1.0)
LIKE = SEParams(1.0, 1.0)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    n, d, K = 30, 6, 2
    w = rng.normal(size=(n, K))
    A = rng.normal(size=(d, K))
    X = w @ A.T + 0.3 * rng.normal(size=(n, d))
    X -= X.mean(0)
    y = np.where(w[:, 0] ** 2 + 0.3 * rng.normal(size=n) > 0.7, 1.0, -1.0)
    return X, y


def test_bound_never_decreases(problem):
    """F after every E-step and every M-step (L-BFGS over W and the lengthscale) is non-decreasing,
    and the E-step alone (each factor's update) increases it too."""
    X, y = problem
    with jax.enable_x64(True):
        X, y = jnp.asarray(X), jnp.asarray(y)
        s0 = init_vb(X, y, 2, to_unconstrained(SEParams(2.0, 1.0)), HYPER)
        state, trace = run_vbem(X, y, s0, se, LIKE, HYPER, n_iter=6, m_steps=5)
        f = np.asarray(trace).ravel()
        assert np.all(np.isfinite(f))
        assert np.all(np.diff(f) >= -1e-8 * np.abs(f[1:])), np.diff(f)
        assert f[-1] > f[0] + 1.0
        # the lengthscale moved, the amplitude (not learned) did not
        p = from_unconstrained(state.theta, LIKE)
        assert abs(float(p.lengthscale) - 2.0) > 1e-3 and abs(float(p.amplitude) - 1.0) < 1e-12


def test_column_on_a_far_larger_scale_keeps_the_bound_finite(problem):
    """A column 1e11 times larger than the rest: <||X - W A'||^2> is a sum of squares, not a
    difference of terms of order 1e22 that cancels to a negative noise rate (NaN bound)."""
    X, y = problem
    X = X.copy()
    X[:, 0] *= 1e11
    with jax.enable_x64(True):
        X, y = jnp.asarray(X), jnp.asarray(y)
        s0 = init_vb(X, y, 2, to_unconstrained(SEParams(2.0, 1.0)), HYPER)
        state, trace = run_vbem(X, y, s0, se, LIKE, HYPER, n_iter=3, m_steps=5)
        f = np.asarray(trace).ravel()
        assert np.all(np.isfinite(f)) and float(state.psi_b) > 0
        assert np.all(np.diff(f) >= -1e-8 * np.abs(f[1:])), np.diff(f)


@pytest.mark.extended
def test_e_step_alone_increases_bound(problem):
    X, y = problem
    with jax.enable_x64(True):
        X, y = jnp.asarray(X), jnp.asarray(y)
        s = init_vb(X, y, 2, to_unconstrained(SEParams(2.0, 1.0)), HYPER)
        step = jax.jit(lambda s: e_step(s, X, y, se, LIKE, HYPER))
        bound = jax.jit(lambda s: factor_bound(s, X, y, se, LIKE, HYPER))
        s = step(s)
        values = []
        for _ in range(4):
            s = step(s)
            values.append(float(bound(s)))
        assert np.all(np.diff(values) >= -1e-9 * abs(values[0]))


def test_mstep_gradient_matches_autodiff(problem):
    """The supplement's dL/dW (SE kernel), written out, equals the autodiff gradient of the bound."""
    X, y = problem
    with jax.enable_x64(True):
        X, y = jnp.asarray(X), jnp.asarray(y)
        th = to_unconstrained(SEParams(1.3, 1.0))
        s = init_vb(X, y, 2, th, HYPER)
        # compiled programs rather than one per operation (op by op, this test took several times longer)
        s = jax.jit(lambda s: e_step(s, X, y, se, LIKE, HYPER))(s)
        W = s.W + 0.3 * jax.random.normal(jax.random.PRNGKey(0), s.W.shape, s.W.dtype)
        auto = jax.jit(jax.grad(lambda W: mstep_bound(W, th, s, X, y, se, LIKE, HYPER)))(W)
        analytic = jax.jit(lambda W: mstep_grad_w_se(W, 1.3, 1.0, s, X, y))(W)
        np.testing.assert_allclose(analytic, auto, rtol=1e-7, atol=1e-9 * float(jnp.abs(auto).max()))
        assert float(jnp.abs(auto).max()) > 1e-2  # a non-trivial point


@pytest.mark.extended
def test_m_step_keeps_only_improvements(problem):
    X, y = problem
    with jax.enable_x64(True):
        X, y = jnp.asarray(X), jnp.asarray(y)
        s = init_vb(X, y, 2, to_unconstrained(SEParams(2.0, 1.0)), HYPER)
        s = e_step(s, X, y, se, LIKE, HYPER)
        before = float(factor_bound(s, X, y, se, LIKE, HYPER))
        s2 = m_step(s, X, y, se, LIKE, HYPER, 5, ("lengthscale",))
        assert float(factor_bound(s2, X, y, se, LIKE, HYPER)) >= before
