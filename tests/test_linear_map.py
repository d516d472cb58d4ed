"""The exact MAP of the linear hinge model (``LinearBSVM(inference="em", solver="interior_point")``):
it meets the KKT conditions of the linear SVM (checked here with numpy alone), equals scikit-learn's
SVC and the converged fixed point of Polson & Scott's EM, converges at its defaults on standardised
iris, breast cancer and 10-class digits, and leaves the ECM (gamma estimated) and skewed-Laplace paths
on the fixed-point iteration."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.engine.hinge_qp import crossover, duality_gap, hinge_qp_objective

EXACT = dict(inference="em", solver="interior_point", progress_bar=False)


def _standardised(loader):
    X, y = loader(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _kkt_residual(X, y_pm, coef, intercept, C, prec_beta, prec_b, margin_tol=1e-7):
    """KKT residual of min 1/2 w'Aw + C sum (1 - y_i f_i)_+ at w = (coef, intercept), with numpy.

    Points with u = 1 - y f > margin_tol must have a = C, u < -margin_tol a = 0, the rest a in [0, C];
    the margin points' a are the least-squares solution of A w = Z'a. Returns the largest stationarity
    residual and the largest violation of the box, both relative to C max|Z|.
    """
    Z = np.hstack([X, np.ones((X.shape[0], 1))]) * y_pm[:, None]
    w = np.append(coef, intercept)
    prec = np.append(np.full(X.shape[1], prec_beta), prec_b)
    u = 1.0 - Z @ w
    upper, margin = u > margin_tol, np.abs(u) <= margin_tol
    target = prec * w - C * Z[upper].sum(0)
    a_m = np.linalg.lstsq(Z[margin].T, target, rcond=None)[0]
    stationarity = np.abs(Z[margin].T @ a_m - target).max()
    box = max(0.0, -a_m.min(initial=0.0), a_m.max(initial=0.0) - C)
    scale = C * np.abs(Z).max()
    return stationarity / scale, box / scale


@pytest.mark.parametrize("intercept_scale", [10.0, None])
def test_solution_meets_the_svm_kkt_conditions(intercept_scale):
    X, y = _standardised(load_breast_cancer)
    gamma, sigma = 0.7, 1.3
    est = LinearBSVM(gamma=gamma, sigma=sigma, intercept_scale=intercept_scale, **EXACT).fit(X, y)
    assert est.n_iter_ <= 40
    prec_b = 0.0 if intercept_scale is None else intercept_scale**-2
    stationarity, box = _kkt_residual(X, np.where(y == 1, 1.0, -1.0), est.coef_[0], est.intercept_[0],
                                      2 * gamma, sigma**-2, prec_b)
    assert stationarity < 1e-9 and box < 1e-9, (stationarity, box)


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_equals_libsvm_decision_function(synthetic_binary, gamma):
    """With a flat intercept the MAP is SVC(kernel='linear', C = 2 gamma sigma^2) (on the data of the other
    tests of synthetic_binary, so that the fit reuses their compiled program)."""
    X, y = synthetic_binary
    sigma = 0.5
    est = LinearBSVM(gamma=gamma, sigma=sigma, intercept_scale=None, **EXACT).fit(X, y)
    svc = SVC(kernel="linear", C=2 * gamma * sigma**2, tol=1e-12).fit(X, y)
    f = X @ est.coef_[0] + est.intercept_[0]
    np.testing.assert_allclose(f, svc.decision_function(X), atol=1e-6 * np.abs(f).max())


def test_equals_the_converged_fixed_point(synthetic_binary):
    """The EM fixed point (run until its objective stops changing) is the same MAP, to its margin floor."""
    X, y = synthetic_binary
    fixed = LinearBSVM("em", solver="fixed_point", max_iter=20000, tol=0.0, progress_bar=False).fit(X, y)
    assert fixed.n_iter_ < 20000  # stopped because the objective no longer changed
    exact = LinearBSVM(**EXACT).fit(X, y)
    scale = np.abs(exact.coef_).max()
    np.testing.assert_allclose(fixed.coef_, exact.coef_, atol=1e-6 * scale)
    np.testing.assert_allclose(fixed.intercept_, exact.intercept_, atol=1e-6 * scale)
    assert exact.objective_[-1] >= fixed.objective_[-1] - 1e-12 * abs(fixed.objective_[-1])
    assert exact.objective_[-1] == np.nanmax(exact.objective_)


# digits (10 classes, 64 features) under -m extended: the one-vs-rest interior point of iris (3 classes) and
# of breast cancer (30 features) give the same code path and the same promise in the default run
@pytest.mark.parametrize("loader", [load_iris, load_breast_cancer, pytest.param(load_digits, marks=pytest.mark.extended)],
                         ids=["iris", "bc", "digits"])
def test_converges_on_everyday_data(loader):
    X, y = _standardised(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = LinearBSVM(**EXACT).fit(X, y)
    n_iter = np.ravel(est.n_iter_)
    print(f"{loader.__name__}: interior-point steps per problem {n_iter.tolist()}")
    assert n_iter.max() <= 40


def test_wide_form_gives_the_same_map():
    """p > n: the estimator's n x n (Woodbury) solves give the MAP of the p x p problem: the point meets
    its KKT conditions, checked with numpy alone as above (the objective is strictly convex: its KKT
    point is the one MAP)."""
    rng = np.random.default_rng(1)
    n, d = 30, 80
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    est = LinearBSVM(sigma=1.5**-0.5, gamma=0.7, intercept_scale=10.0, **EXACT).fit(X, y)
    assert type(est._posterior).__name__ == "LowRankPosterior"  # the estimator chose the wide form
    stationarity, box = _kkt_residual(X, y, est.coef_[0], est.intercept_[0], 1.4, 1.5, 0.01)
    assert stationarity < 1e-9 and box < 1e-9, (stationarity, box)


def test_duality_gap_bounds_the_suboptimality(synthetic_binary):
    """At any w and any box-feasible a (here: random), P(w) - min P <= duality_gap(w, a)."""
    X, y = synthetic_binary
    Z = np.hstack([X, np.ones((X.shape[0], 1))]) * y[:, None]
    # the estimator's defaults (sigma = 1, intercept_scale = 10, gamma = 1): prec = (1, .., 1, 0.01), C = 2;
    # its MAP (the compiled program of the other tests of synthetic_binary) is the minimiser
    prec, c = np.r_[np.ones(X.shape[1]), 0.01], 2.0
    with warnings.catch_warnings():  # converged: min P is within its duality-gap tolerance of p_min, far
        warnings.simplefilter("error", ConvergenceWarning)  # below the excesses of the 0.1 moves below
        best = LinearBSVM(**EXACT).fit(X, y)
    w_min = np.append(best.coef_[0], best.intercept_)
    with float_precision(True):
        Zj, pj, cj = (jnp.asarray(v, jnp.float64) for v in (Z, prec, c))
        p_min = float(hinge_qp_objective(Zj, pj, cj, jnp.asarray(w_min)))
        rng = np.random.default_rng(0)
        for _ in range(5):
            w = w_min + 0.1 * rng.normal(size=Z.shape[1])
            a = rng.uniform(0.0, c, size=Z.shape[0])
            excess = float(hinge_qp_objective(Zj, pj, cj, jnp.asarray(w))) - p_min
            assert 0.0 <= excess <= float(duality_gap(Zj, pj, cj, jnp.asarray(w), jnp.asarray(a)))


def test_crossover_reports_no_candidate_beyond_p_margin_points():
    """More margin points than weights: the p x p crossover gives NaN (never a wrong point)."""
    from bayes_maxmargin.engine.hinge_qp import IPMState

    n, p = 6, 2
    z = jnp.asarray(np.random.default_rng(0).normal(size=(n, p)))
    ones = jnp.ones(n)
    state = IPMState(jnp.zeros(p), ones, ones, 1e-9 * ones, 1e-9 * ones)  # every point on the margin
    w, _ = jax.jit(crossover)(state, z, jnp.ones(p), jnp.asarray(2.0))  # one program, not one per operation
    assert np.all(np.isnan(w))


# the skewed-Laplace fits run the compiled fixed-point program of test_equals_the_converged_fixed_point
# (max_iter is static; gamma0 is not)
@pytest.mark.parametrize("kwargs", [dict(gamma_prior=(2.0, 1.0), max_iter=40), dict(gamma0=0.3, max_iter=20000)])
def test_ecm_and_skewed_laplace_keep_the_fixed_point_iteration(synthetic_binary, kwargs):
    X, y = synthetic_binary
    a = LinearBSVM(**EXACT, **kwargs).fit(X, y)
    b = LinearBSVM("em", solver="fixed_point", progress_bar=False, **kwargs).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.objective_, b.objective_)


def test_float32_converges_to_the_float64_map(synthetic_binary):
    """(On the data of the other tests of synthetic_binary: the float64 fit reuses their compiled program.)"""
    X, y = synthetic_binary
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        f32 = LinearBSVM(precision="float32", **EXACT).fit(X, y)
    f64 = LinearBSVM(**EXACT).fit(X, y)
    np.testing.assert_allclose(f32.coef_, f64.coef_, atol=1e-5 * np.abs(f64.coef_).max())


def test_max_iter_too_small_warns_with_the_gap():
    X, y = _standardised(load_breast_cancer)
    with pytest.warns(ConvergenceWarning, match=r"solver='interior_point'\) stopped at max_iter=3 with a duality gap"):
        LinearBSVM(max_iter=3, **EXACT).fit(X, y)


def test_bad_solver_is_named():
    with pytest.raises(ValueError, match="solver"):
        LinearBSVM("em", solver="newton").fit(np.ones((4, 2)), np.array([0, 1, 0, 1]))


def test_jit_programs_are_reused(synthetic_binary):
    """A second fit with other hyperparameters reuses the compiled program."""
    from bayes_maxmargin.models.linear.em import linear_map

    X, y = synthetic_binary
    LinearBSVM(**EXACT).fit(X, y)
    size = linear_map._cache_size()
    LinearBSVM(gamma=3.0, sigma=0.4, **EXACT).fit(X * 2.0, y)
    assert linear_map._cache_size() == size
