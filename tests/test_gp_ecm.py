"""ECM, ML-II and predictions of the GP Bayesian SVM (Henao et al. 2014, Sec. 3, eq. 8-13)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.core.kernels import SEParams, se
from bayes_maxmargin.models.gp.covariance import gp_alpha, gp_data
from bayes_maxmargin.models.gp.ecm import (
    gp_ecm,
    gp_ecm_mlii,
    gp_log_marginal,
    gp_map,
    gp_predict,
    gp_predict_proba,
    ml2_ascent,
    mlii_update,
    support_vector_mask,
)
from bayes_maxmargin.models.gp.model import prior_covariance

from ._gp_problems import KP, finite, make_hyper

#: gp_log_marginal as one compiled program (run op by op it compiles a few dozen small programs per call shape)
log_marginal = jax.jit(gp_log_marginal)


@pytest.mark.parametrize("gamma0", [0.0, 0.3])
@pytest.mark.parametrize("estimate_gamma", [False, True])
def test_objective_monotone(sine, gamma0, estimate_gamma):
    X, y = sine
    with jax.enable_x64(True):
        data = gp_data(prior_covariance(X, "rbf", KP), y)
        # max_iter of test_accelerated_ecm_... (static: one compiled program for both; every run here
        # stops at tol within 1000 iterations)
        res = gp_ecm(jnp.zeros(len(y)), data, make_hyper(gamma0), 1e-12, max_iter=20000, estimate_gamma=estimate_gamma)
        trace = finite(res.objective)
        assert len(trace) == int(res.n_iter) + 1 > 5
        assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
        assert trace[-1] > trace[0]
        assert np.all(np.isfinite(np.asarray(res.f))) and float(res.gamma) > 0


def test_linear_kernel_matches_linear_em():
    """K = sigma^2 X X' + s_b^2 11': the GP fixed point is X beta + b of the linear EM MAP."""
    rng = np.random.default_rng(1)
    n, d, sigma, s_b = 60, 3, 0.8, 2.0
    X = rng.normal(size=(n, d))
    y = np.where(X @ np.array([1.0, -1.0, 0.5]) + 0.2 + rng.normal(size=n) > 0, 1, -1)
    with jax.enable_x64(True):
        est = LinearBSVM(inference="em", sigma=sigma, intercept_scale=s_b, tol=1e-14, max_iter=5000)
        est.fit(X, y)
        f_lin = X @ np.asarray(est.coef_)[0] + np.asarray(est.intercept_)[0]
        K = sigma**2 * X @ X.T + s_b**2 + 1e-9 * np.eye(n)
        data = gp_data(jnp.asarray(K), y.astype(float))
        res = gp_ecm(jnp.zeros(n), data, make_hyper(0.0), 1e-14, max_iter=20000, estimate_gamma=False)  # as above
        f_gp = np.asarray(res.f)
    np.testing.assert_allclose(f_gp, f_lin, rtol=1e-4, atol=1e-4 * np.abs(f_lin).max())


def test_alpha_support_vector_structure(sine):
    """Eq. (13) with gamma0 = 0: alpha_n = 2 gamma y_n inside the margin, 0 outside it."""
    X, y = sine
    gamma = 0.7
    with jax.enable_x64(True):
        data = gp_data(prior_covariance(X, "rbf", KP), y)
        res = gp_ecm(jnp.zeros(len(y)), data, make_hyper(0.0, gamma), 1e-15, max_iter=20000, estimate_gamma=False)
        alpha = np.asarray(gp_alpha(data, res.inv_lam, res.gamma))
        f = np.asarray(res.f)
        np.testing.assert_allclose(np.asarray(data.K) @ alpha, f, atol=1e-5)
    u = 1.0 - y * f
    inside, outside = u > 1e-2, u < -1e-2
    assert inside.sum() >= 3 and outside.sum() >= 3
    np.testing.assert_allclose(alpha[inside], 2.0 * gamma * y[inside], rtol=1e-4)
    np.testing.assert_allclose(alpha[outside], 0.0, atol=1e-4)
    sv = np.asarray(support_vector_mask(f, y, tol=1e-2))
    assert np.all(sv[inside]) and not np.any(sv[outside])
    assert np.all(np.abs(alpha[~sv]) < 1e-4)  # sparse: alpha vanishes off the support vectors


@pytest.fixture(scope="module")
def smooth_boundary() -> tuple[np.ndarray, np.ndarray]:
    """n = 60 1-D inputs, y = sign(sin(x)): a smooth boundary with zeros 3.14 apart."""
    x = np.linspace(-6.0, 6.0, 60)
    y = np.where(np.sin(x) > 0, 1.0, -1.0)
    return x[:, None], y


def test_mlii_step_increases_log_z(sine):
    X, y = sine
    with jax.enable_x64(True):
        data = gp_data(prior_covariance(X, "rbf", SEParams(3.0, 1.0)), y)
        res = gp_ecm(jnp.zeros(len(y)), data, make_hyper(0.0), 1e-10, max_iter=20, estimate_gamma=False)
        ml = mlii_update(SEParams(3.0, 1.0), jnp.asarray(X), jnp.asarray(y), res.inv_lam, res.gamma, kernel="rbf")
        before = log_marginal(SEParams(3.0, 1.0), X, y, res.inv_lam, res.gamma)
        after = log_marginal(ml.theta, X, y, res.inv_lam, res.gamma)
    assert float(ml.log_z_after) > float(ml.log_z_before) + 1e-3
    np.testing.assert_allclose(float(before), float(ml.log_z_before), rtol=1e-12)
    np.testing.assert_allclose(float(after), float(ml.log_z_after), rtol=1e-12)


def test_log_marginal_matches_dense(sine):
    X, y = sine
    rng = np.random.default_rng(2)
    inv_lam = rng.uniform(0.2, 50.0, len(y))
    gamma = 0.8
    with jax.enable_x64(True):
        log_z = float(log_marginal(KP, X, y, inv_lam, gamma))
        K = np.asarray(prior_covariance(X, "rbf", KP))
    B = K + np.diag(1.0 / (gamma * inv_lam))
    t = y * (1.0 + 1.0 / inv_lam)
    _, logdet = np.linalg.slogdet(B)
    ref = -0.5 * t @ np.linalg.solve(B, t) - 0.5 * logdet - 0.5 * len(y) * np.log(2 * np.pi)
    np.testing.assert_allclose(log_z, ref, rtol=1e-10)


@pytest.mark.parametrize("lengthscale0", [0.2, 8.0])
def test_ecm_mlii(smooth_boundary, lengthscale0):
    """ML-II raises log Z at every step, ECM never decreases between them, and the lengthscale
    ends at the order of magnitude of the boundary's scale."""
    X, y = smooth_boundary
    with jax.enable_x64(True):
        res = gp_ecm_mlii(
            jnp.asarray(X), jnp.asarray(y), SEParams(lengthscale0, 1.0), make_hyper(0.0), 1e-12,
            kernel="rbf", max_iter=120, mlii_every=20, mlii_steps=40,
        )
        log_z = np.asarray(res.log_z)
        assert np.all(log_z[:, 1] >= log_z[:, 0])
        assert log_z[0, 1] > log_z[0, 0] + 1e-3
        for row in np.asarray(res.objective):
            row = finite(row)
            assert np.all(np.diff(row) >= -1e-9 * np.abs(row[1:]))
        ell = float(res.theta.lengthscale)
        assert 0.4 < ell < 5.0, ell
        f = np.asarray(res.f)
    assert np.mean(np.sign(f) == y) > 0.95


def test_predictions_match_dense(sine):
    X, y = sine
    rng = np.random.default_rng(3)
    X_test = rng.uniform(-3.5, 3.5, (37, 1))
    with jax.enable_x64(True):
        data = gp_data(prior_covariance(X, "rbf", KP), y)
        res = gp_ecm(jnp.zeros(len(y)), data, make_hyper(0.0), 1e-12, max_iter=20000, estimate_gamma=False)
        inv_lam, gamma = np.asarray(res.inv_lam), float(res.gamma)
        mean, var = gp_predict(X, X_test, y, inv_lam, gamma, KP, kernel="rbf", chunk=8)
        proba = gp_predict_proba(X, X_test, y, inv_lam, gamma, KP, kernel="rbf", chunk=16)
        mean_tr, _ = gp_predict(X, X, y, inv_lam, gamma, KP, kernel="rbf")
        K = np.asarray(prior_covariance(X, "rbf", KP))
        Ks = np.asarray(se(KP, X, X_test))
    B = K + np.diag(1.0 / (gamma * inv_lam))
    t = y * (1.0 + 1.0 / inv_lam)
    ref_mean = Ks.T @ np.linalg.solve(B, t)
    ref_var = 1.0 - np.sum(Ks * np.linalg.solve(B, Ks), axis=0)
    np.testing.assert_allclose(np.asarray(mean), ref_mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(var), ref_var, rtol=1e-6, atol=1e-8)
    assert np.all(np.asarray(var) > -1e-10)
    assert proba.shape == (37,) and np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_array_equal(proba > 0.5, np.asarray(mean) > 0)
    # training-input predictive mean is the ECM f (K alpha), up to the last iteration's change
    np.testing.assert_allclose(np.asarray(mean_tr), np.asarray(res.f), atol=1e-3)


def test_mlii_evaluates_eq9_at_the_mean_lambda(sine):
    """Each ML-II step of the ECM evaluates eq. (9) at lambda = E[lambda | f, gamma] (the paper's
    <lambda>), not at 1 / E[1 / lambda]: the first log Z equals gp_log_marginal there after the
    same first ECM run."""
    from bayes_maxmargin.core.augmentation import expected_lambda

    X, y = sine
    p0 = SEParams(3.0, 1.0)
    with jax.enable_x64(True):
        hyper = make_hyper(0.3)  # float64 as test_ecm_mlii's: made outside enable_x64 it is float32, a new program
        # the static settings of test_ecm_mlii and the first ECM run of test_mlii_step_increases_log_z
        # (their compiled programs serve)
        res = gp_ecm_mlii(jnp.asarray(X), jnp.asarray(y), p0, hyper, 1e-12, kernel="rbf", max_iter=120,
                          mlii_every=20, mlii_steps=40)
        first = gp_ecm(jnp.zeros(len(y)), gp_data(prior_covariance(X, "rbf", p0), y), hyper, 1e-12, max_iter=20,
                       estimate_gamma=False)
        u = 1.0 - jnp.asarray(y) * first.f
        mean_lam = expected_lambda(u, first.gamma, hyper.gamma0)
        at_mean = log_marginal(p0, X, y, 1.0 / mean_lam, first.gamma)
        at_inverse = log_marginal(p0, X, y, first.inv_lam, first.gamma)
    np.testing.assert_allclose(float(res.log_z[0, 0]), float(at_mean), rtol=1e-10)
    assert abs(float(at_mean) - float(at_inverse)) > 1e-3


def _plain_and_accelerated(cov, hyper, estimate_gamma, tol=1e-14, max_iter=20000):
    n = cov.y.shape[0]
    plain = gp_ecm(jnp.zeros(n), cov, hyper, tol, max_iter=max_iter, estimate_gamma=estimate_gamma)
    fast = gp_ecm(jnp.zeros(n), cov, hyper, tol, max_iter=max_iter, estimate_gamma=estimate_gamma, accelerate=True)
    return plain, fast


@pytest.mark.parametrize(("gamma0", "estimate_gamma", "sparse"), [
    (0.0, False, False), (0.3, False, False), (0.3, True, False), (0.0, False, True), (0.3, False, True),
    # FITC with gamma estimated: each of the two by default ([0.3-False-True], [0.3-True-False]), through the
    # one gp_ecm code for both priors
    pytest.param(0.3, True, True, marks=pytest.mark.extended),
])
def test_accelerated_ecm_reaches_the_ecm_fixed_point(sine, sparse, gamma0, estimate_gamma):
    """SQUAREM cycles of ECM iterations (accelerate=True) end at the fixed point that plain ECM converges
    to, dense and FITC: the same f, gamma and predictions (within 1e-4), a never-decreasing objective,
    and, on the hinge (gamma0 = 0, where ECM converges sublinearly), fewer ECM iterations (three per
    cycle). With gamma0 > 0 ECM converges linearly in a few hundred iterations and tol = 1e-14 sits at
    the rounding floor of the objective, so which run stops first depends on the machine's last bits
    (FITC: 3 x 163 SQUAREM against 355 plain iterations on an AMD EPYC with jaxlib 0.12)."""
    from bayes_maxmargin.models.gp.covariance import fitc_factors
    from bayes_maxmargin.models.gp.ecm import SQUAREM_STEPS
    from bayes_maxmargin.models.gp.model import init_inducing

    X, y = sine
    with jax.enable_x64(True):
        V = jnp.asarray(init_inducing(X, 12, "kmeans", random_state=0)) if sparse else None
        cov = jax.jit(fitc_factors)(KP, jnp.asarray(X), V, jnp.asarray(y)) if sparse else gp_data(  # one program
            prior_covariance(X, "rbf", KP), y)
        hyper = make_hyper(gamma0)
        plain, fast = _plain_and_accelerated(cov, hyper, estimate_gamma)
        assert int(plain.n_iter) < 20000  # converged
        np.testing.assert_allclose(np.asarray(fast.f), np.asarray(plain.f), atol=1e-4)
        np.testing.assert_allclose(float(fast.gamma), float(plain.gamma), rtol=1e-4)
        Xt = np.linspace(-3.5, 3.5, 25)[:, None]
        pred = [gp_predict_proba(X, Xt, y, r.inv_lam, r.gamma, KP, V=V) for r in (plain, fast)]
        np.testing.assert_allclose(pred[1], pred[0], atol=1e-4)
        trace = finite(fast.objective)
        assert len(trace) == int(fast.n_iter) + 1
        assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
        assert trace[-1] >= finite(plain.objective)[-1] - 1e-9 * abs(trace[-1])
        if gamma0 == 0.0:
            assert SQUAREM_STEPS * int(fast.n_iter) < int(plain.n_iter)


def test_accelerated_ecm_budget_counts_ecm_iterations(sine):
    """accelerate=True runs at most max_iter // 3 cycles of three ECM iterations."""
    from bayes_maxmargin.models.gp.ecm import ecm_runs

    X, y = sine
    assert ecm_runs(20, True) == 6 and ecm_runs(2, True) == 1 and ecm_runs(20, False) == 20
    with jax.enable_x64(True):
        data = gp_data(prior_covariance(X, "rbf", KP), y)
        res = gp_ecm(jnp.zeros(len(y)), data, make_hyper(0.0), 0.0, max_iter=20, estimate_gamma=False,
                     accelerate=True)
    assert int(res.n_iter) == 6 and res.objective.shape == (7,)


def test_ml2_ascent_tol_stops_the_iterations_of_the_full_run():
    """With tol, ml2_ascent's iterations are those of the full run up to the first whose gain is at most
    tol relative (seen at the start of the next one, which still moves); without, all steps run."""
    def objective(x):  # an ill-conditioned concave quadratic: L-BFGS gains shrink over many iterations
        return -jnp.sum(jnp.array([1.0, 30.0, 900.0]) * (x - 1.0) ** 2)

    with jax.enable_x64(True):
        x0 = jnp.zeros(3)
        # one compiled program for every number of steps and tol (both traced); with tol = -inf no
        # iteration stops the run, so runs[j - 1] is the best point after j iterations
        ascent = jax.jit(lambda steps, tol: ml2_ascent(objective, x0, steps, tol=tol))
        runs = [ascent(j, -jnp.inf) for j in range(1, 13)]
        full = ml2_ascent(objective, x0, 12)  # the full run (the lax.scan without tol): the same iterates
        np.testing.assert_allclose(np.asarray(full[0]), np.asarray(runs[-1][0]), rtol=1e-12)
        np.testing.assert_allclose(float(full[2]), float(runs[-1][2]), rtol=1e-12)
        values = [float(objective(x0))] + [float(r[2]) for r in runs]
        gains = np.diff(values) / np.maximum(np.abs(values[1:]), 1.0)
        tol = float(np.sort(gains[:8])[3])  # some early iteration gains less: the run stops there
        first = int(np.argmax(gains <= tol))  # iteration first + 1 gains at most tol
        assert 0 < first < 10
        x, before, after = ascent(12, tol)
        np.testing.assert_allclose(np.asarray(x), np.asarray(runs[first + 1][0]), rtol=1e-12)
        np.testing.assert_allclose([float(before), float(after)], [values[0], values[first + 2]], rtol=1e-12)
        assert float(ascent(12, 0.0)[2]) >= values[-1] - 1e-9


def test_mlii_tol_stops_the_iterations_and_the_rounds(smooth_boundary):
    """With mlii_tol every ML-II step stops its iterations once one gains at most mlii_tol, and the rounds
    stop after the first step whose gain is at most mlii_tol relative to log Z; the rest are NaN, theta
    is the last step's, and the final ECM run is monotone. The settings of test_ecm_mlii (the full
    run's compiled program serves)."""
    X, y = smooth_boundary
    kw = dict(kernel="rbf", max_iter=120, mlii_every=20, mlii_steps=40)
    with jax.enable_x64(True):
        args = (jnp.asarray(X), jnp.asarray(y), SEParams(1.0, 1.0), make_hyper(0.0), 1e-12)
        full = gp_ecm_mlii(*args, **kw)
        log_z = np.asarray(full.log_z)
        gain = (log_z[:, 1] - log_z[:, 0]) / np.maximum(np.abs(log_z[:, 1]), 1.0)
        tol = float(np.sort(gain)[len(gain) // 2])
        early = gp_ecm_mlii(*args, mlii_tol=tol, **kw)
        lz = np.asarray(early.log_z)
        ran = ~np.isnan(lz).all(axis=1)
        stop = int(np.count_nonzero(ran)) - 1
        assert 0 < stop < len(gain) - 1 and ran[: stop + 1].all()
        early_gain = (lz[: stop + 1, 1] - lz[: stop + 1, 0]) / np.maximum(np.abs(lz[: stop + 1, 1]), 1.0)
        assert np.all(early_gain[:-1] > tol) and early_gain[-1] <= tol and np.all(early_gain >= 0)
        # the first step starts where the full run's does, and stops no later
        np.testing.assert_allclose(lz[0, 0], log_z[0, 0], rtol=1e-12)
        assert lz[0, 1] <= log_z[0, 1] + 1e-9 * abs(log_z[0, 1])
        np.testing.assert_allclose(np.asarray(early.theta_trace.lengthscale[stop:]),
                                   float(early.theta.lengthscale), rtol=1e-12)
        assert np.all(np.isnan(np.asarray(early.objective)[stop + 1: -1]))
        final = finite(np.asarray(early.objective)[-1])
        assert np.all(np.diff(final) >= -1e-9 * np.abs(final[1:]))


def test_dense_log_marginal_gradient_is_the_autodiff_gradient():
    """The written-out gradient of eq. (9) (dense_log_marginal's VJP) in K, y, omega and gamma equals
    the gradient differentiated through the Cholesky factor (K's symmetrised), and its value is the same."""
    from bayes_maxmargin.models.gp.covariance import _dense_log_marginal, dense_log_marginal

    rng = np.random.default_rng(0)
    n = 30
    A = rng.normal(size=(n, n))
    with jax.enable_x64(True):
        args = (jnp.asarray(A @ A.T / n + 0.1 * np.eye(n)), jnp.asarray(np.sign(rng.normal(size=n))),
                jnp.asarray(rng.uniform(0.1, 10.0, n)), jnp.asarray(0.7))
        # compiled: op by op the two gradients take many more small compilations
        auto = [np.asarray(g) for g in
                jax.jit(jax.grad(lambda *a: _dense_log_marginal(*a)[0], argnums=(0, 1, 2, 3)))(*args)]
        written = [np.asarray(g) for g in jax.jit(jax.grad(dense_log_marginal, argnums=(0, 1, 2, 3)))(*args)]
        assert float(jax.jit(dense_log_marginal)(*args)) == float(jax.jit(lambda *a: _dense_log_marginal(*a)[0])(*args))
    np.testing.assert_allclose(written[0], 0.5 * (auto[0] + auto[0].T), rtol=1e-10, atol=1e-12)
    for got, want in zip(written[1:], auto[1:]):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_exact_map_is_the_ecm_fixed_point(sine, gamma):
    """gp_map (interior point + crossover) ends where plain ECM converges (tol 1e-14): the same f and
    predictions within 1e-4, a log posterior at least ECM's, the duality-gap tolerance met in a few
    dozen steps; and the support-vector structure of eq. (13): points beyond the margin have alpha = 0."""
    X, y = sine
    with jax.enable_x64(True):
        cov = gp_data(prior_covariance(X, "rbf", KP), y)
        hyper = make_hyper(0.0, gamma)
        plain = gp_ecm(jnp.zeros(len(y)), cov, hyper, 1e-14, max_iter=20000, estimate_gamma=False)
        exact = gp_map(cov, hyper, 1e-12, max_iter=100)
        assert int(plain.n_iter) < 20000 and int(exact.n_iter) < 60
        np.testing.assert_allclose(np.asarray(exact.f), np.asarray(plain.f), atol=1e-4)
        Xt = np.linspace(-3.5, 3.5, 25)[:, None]
        pred = [gp_predict_proba(X, Xt, y, r.inv_lam, r.gamma, KP) for r in (plain, exact)]
        np.testing.assert_allclose(pred[1], pred[0], atol=1e-4)
        assert finite(exact.objective)[-1] >= finite(plain.objective)[-1] - 1e-9 * abs(finite(plain.objective)[-1])
        alpha = np.asarray(gp_alpha(cov, exact.inv_lam, exact.gamma))
        beyond = np.asarray(y * exact.f) > 1.0 + 1e-6
        assert beyond.any() and np.abs(alpha[beyond]).max() < 1e-6
