"""FITC-sparse ECM, ML-II over theta and pseudo-inputs, predictions (Henao et al. 2014, eq. 8-10)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.models.gp.covariance import fitc_factors, gp_data
from bayes_maxmargin.models.gp.ecm import gp_ecm, gp_ecm_mlii, gp_log_marginal, gp_predict, gp_predict_proba
from bayes_maxmargin.models.gp.model import init_inducing, prior_covariance

from ._gp_problems import KP, finite, make_hyper


@pytest.mark.parametrize("gamma0", [0.0, 0.3])
def test_full_rank_fitc_matches_full_gp(sine, gamma0):
    """M = N, V = X: Q_nn = K_nn, so FITC ECM is the full-GP ECM at fixed theta (eq. 10 -> eq. 9).

    Both use the same absolute jitter (on K and on K_mm, K_nn); FITC's predictive Q_*n equals k_*n up
    to O(sqrt(jitter)) terms, hence the small jitter here.
    """
    X, y = sine
    jit = 1e-8
    Xt = np.linspace(-3.5, 3.5, 41)[:, None]
    with jax.enable_x64(True):
        full = gp_ecm(
            jnp.zeros(len(y)), gp_data(prior_covariance(X, "rbf", KP, jitter=jit), y), make_hyper(gamma0),
            1e-12, max_iter=100, estimate_gamma=False,
        )
        sp = gp_ecm_mlii(X, y, KP, make_hyper(gamma0), 1e-12, V0=X, max_iter=100, mlii_every=0, jitter=jit)
        np.testing.assert_allclose(np.asarray(sp.f), np.asarray(full.f), atol=1e-4)
        m1, v1 = gp_predict(X, Xt, y, full.inv_lam, full.gamma, KP, jitter=jit)
        m2, v2 = gp_predict(X, Xt, y, sp.inv_lam, sp.gamma, KP, V=X, jitter=jit, chunk=16)
        np.testing.assert_allclose(np.asarray(m2), np.asarray(m1), atol=1e-4)
        np.testing.assert_allclose(np.asarray(v2), np.asarray(v1), atol=1e-4)
        p1 = gp_predict_proba(X, Xt, y, full.inv_lam, full.gamma, KP, jitter=jit)
        p2 = gp_predict_proba(X, Xt, y, sp.inv_lam, sp.gamma, KP, V=X, jitter=jit)
        np.testing.assert_allclose(p2, p1, atol=1e-4)


@pytest.mark.parametrize("estimate_gamma", [False, True])
def test_objective_monotone_sparse(sine, estimate_gamma):
    X, y = sine
    V = init_inducing(X, 8, "kmeans", random_state=0)
    with jax.enable_x64(True):
        res = gp_ecm_mlii(X, y, KP, make_hyper(0.3), 1e-12, V0=V, max_iter=200, mlii_every=0,
                          estimate_gamma=estimate_gamma)
        trace = finite(res.objective[0])
        assert len(trace) > 5
        assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
        assert trace[-1] > trace[0]
        assert np.all(np.isfinite(np.asarray(res.f))) and float(res.gamma) > 0
        np.testing.assert_array_equal(np.asarray(res.V), V)


def test_mlii_increases_log_z_and_moves_inducing(sine):
    X, y = sine
    V0 = init_inducing(X, 6, "random", random_state=1)
    p0 = SEParams(lengthscale=2.0, amplitude=0.5)
    with jax.enable_x64(True):
        res = gp_ecm_mlii(X, y, p0, make_hyper(0.0), 1e-10, V0=V0, max_iter=30, mlii_every=10, mlii_steps=30)
        log_z = np.asarray(res.log_z)
        assert log_z.shape == (3, 2)
        assert np.all(np.isfinite(log_z)) and np.all(log_z[:, 1] >= log_z[:, 0])
        assert log_z[0, 1] > log_z[0, 0] + 1e-3
        assert np.max(np.abs(np.asarray(res.V) - V0)) > 1e-3
        assert float(res.theta.lengthscale) != 2.0
        for row in np.asarray(res.objective):
            tr = finite(row)
            assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))
        for leaf in (res.f, res.inv_lam, res.V, res.theta.lengthscale, res.theta.amplitude):
            assert np.all(np.isfinite(np.asarray(leaf)))
        # log Z of eq. (10) at the returned (theta, V) and omega is finite (one compiled program: op by op,
        # every operation compiles a program of its own)
        assert np.isfinite(float(jax.jit(gp_log_marginal)(res.theta, X, y, res.inv_lam, res.gamma, V=res.V)))


def _shapes(jaxpr) -> list[tuple[int, ...]]:
    """Shapes of every variable in a jaxpr and all its sub-jaxprs."""
    out = []
    for eqn in jaxpr.eqns:
        for v in list(eqn.invars) + list(eqn.outvars):
            shape = getattr(getattr(v, "aval", None), "shape", None)
            if shape is not None:
                out.append(tuple(shape))
        for p in eqn.params.values():
            for sub in p if isinstance(p, (tuple, list)) else (p,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out.extend(_shapes(inner))
    return out


def test_large_n_no_n_by_n():
    rng = np.random.default_rng(2)
    n, m = 5000, 20
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 0.5 * np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    V = init_inducing(X, m, "random", random_state=0)
    kw = dict(kernel="rbf", max_iter=20, mlii_every=10, mlii_steps=5, optimizer="lbfgs", learning_rate=0.05,
              estimate_gamma=False, optimize_inducing=True, jitter=1e-6)
    X32, y32, V32 = (jnp.asarray(a, jnp.float32) for a in (X, y, V))
    jaxpr = jax.make_jaxpr(lambda a, b, c: gp_ecm_mlii(a, b, KP, make_hyper(0.0), 1e-8, V0=c, **kw))(X32, y32, V32)
    shapes = _shapes(jaxpr.jaxpr)
    assert shapes and not any(sum(d >= n for d in s) >= 2 for s in shapes)
    res = gp_ecm_mlii(X32, y32, KP, make_hyper(0.0), 1e-8, V0=V32, **kw)
    mean, var = gp_predict(X32, X32[:3000], y32, res.inv_lam, res.gamma, res.theta, V=res.V, chunk=1024)
    assert res.f.shape == (n,) and res.V.shape == (m, 2) and mean.shape == var.shape == (3000,)
    assert np.all(np.isfinite(np.asarray(res.f))) and np.all(np.isfinite(np.asarray(mean)))
    assert np.all(np.asarray(var) > -1e-3)
    acc = np.mean(np.sign(np.asarray(mean)) == y[:3000])
    assert acc > 0.8


@pytest.mark.parametrize("m", [0, -1, 61])
def test_bad_num_inducing(sine, m):
    X, y = sine
    with pytest.raises(ValueError, match="num_inducing"):
        init_inducing(X, m)
    if m > 0:
        V = np.tile(X[:1], (m, 1))
        with pytest.raises(ValueError, match="num_inducing"):
            gp_ecm_mlii(X, y, KP, make_hyper(0.0), V0=V, max_iter=2, mlii_every=0)


def test_init_inducing(sine):
    X, _ = sine
    V = init_inducing(X, 7, "kmeans", random_state=3)
    assert V.shape == (7, 1) and np.all(np.isfinite(V))
    np.testing.assert_array_equal(V, init_inducing(X, 7, "kmeans", random_state=3))
    R = init_inducing(X, 7, "random", random_state=3)
    assert R.shape == (7, 1) and all(np.any(np.all(X == r, axis=1)) for r in R)
    with pytest.raises(ValueError, match="method"):
        init_inducing(X, 3, method="bogus")


def test_factors_full_rank_reproduce_k(sine):
    """With V = X the FITC covariance diag(dq) + U U' equals K + jitter I up to O(jitter)."""
    X, y = sine
    with jax.enable_x64(True):
        # compiled (op by op, every operation compiles a program of its own)
        fac = jax.jit(fitc_factors, static_argnums=(4, 5))(KP, jnp.asarray(X), jnp.asarray(X), jnp.asarray(y), "rbf",
                                                           1e-8)
        Kf = np.asarray(fac.U) @ np.asarray(fac.U).T + np.diag(np.asarray(fac.dq))
        K = np.asarray(jax.jit(prior_covariance, static_argnums=(1, 3))(jnp.asarray(X), "rbf", KP, 1e-8))
    np.testing.assert_allclose(Kf, K, atol=1e-7)
