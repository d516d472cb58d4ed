"""GPBSVM as a scikit-learn estimator: it reproduces the inference functions it wraps, keeps the
user's JAX settings, exposes the support vectors of eq. (13), and rejects bad input clearly."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayes_maxmargin import GPBSVM
from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.kernels import RBF, Linear
from bayes_maxmargin.core.predict import linked_moments, probit_margin
from bayes_maxmargin.core.checks import InvalidParameterError
from bayes_maxmargin.models.gp.ecm import gp_ecm_mlii, gp_predict
from bayes_maxmargin.models.gp.model import GPHyper, kernel_prior

from ._compilations import compilation_log

QUIET = dict(progress_bar=False, random_state=0)
#: S-BSVM at its defaults (GPBSVM() itself on the few rows of these tests is ECM:
#: test_default_inference_is_ecm_with_a_cross_fitted_link_up_to_full_gp_max_rows)
SVI = dict(inference="svi", **QUIET)
#: The ECM fit of test_support_vectors_follow_eq13 (theta held); tests that need such a fit on the moons use
#: it, so that one compiled program serves them all.
FIXED_ECM = dict(inference="ecm", learn_kernel=False, kernel_params={"lengthscale": 1.0}, gamma=0.5, max_iter=2000,
                 **QUIET)


@parametrize_with_checks([GPBSVM(inference="ecm", learn_kernel=False, max_iter=30, tol=1e-6)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def moons() -> tuple[np.ndarray, np.ndarray]:
    """80 points of two noisy interleaved half circles (a nonlinear boundary), labels 0 / 1."""
    from sklearn.datasets import make_moons

    X, y = make_moons(80, noise=0.25, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def ecm80(moons) -> GPBSVM:
    """GPBSVM(inference="ecm") at its defaults (kernel, precision, ML-II every 20 iterations) on the moons."""
    return GPBSVM(inference="ecm", max_iter=40, **QUIET).fit(*moons)


#: The ECM fit with ML-II every 10 iterations (ecm100): test_ecm_is_gp_ecm_mlii, test_ecm_fast_options_...,
#: test_mlii_tol_auto_... and test_ecm_solver_... fit with these settings, so that one compiled program serves them
ECM100 = dict(max_iter=100, mlii_every=10, **QUIET)


@pytest.fixture(scope="module")
def ecm100(moons) -> GPBSVM:
    """GPBSVM(inference="ecm", max_iter=100, mlii_every=10) (mlii_tol="auto") on the moons."""
    return GPBSVM(inference="ecm", **ECM100).fit(*moons)


@pytest.fixture(scope="module")
def moons150() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, GPBSVM]:
    """150 training and 2000 test points of half moons (noise 0.3) and GPBSVM() fitted on the 150 (svi in
    float32 with the k-means centres kept; random_state=0)."""
    from sklearn.datasets import make_moons

    X, y = make_moons(150, noise=0.3, random_state=0)
    X_test, y_test = make_moons(2000, noise=0.3, random_state=1)
    return X, y, X_test, y_test, GPBSVM(**SVI).fit(X, y)


def test_ecm_is_gp_ecm_mlii(moons):
    """The estimator's ECM fit and predictions are those of gp_ecm_mlii (at mlii_tol="auto" = 1e-4, with
    accelerate, the exact last f-step and ECM's default criterion, the leave-one-out one with the log-normal
    prior of kernel_prior_scale = 1 around the initial kernel parameters) and gp_predict (through the learnt
    link)."""
    X, y = moons
    # the settings of the ecm100 fixture (one compiled program); the call below passes what the estimator
    # passes, as the same (strongly typed float64) arrays and static arguments, in the estimator's precision
    # setting (part of what a compiled program is looked up by), so that program serves it too
    clf = GPBSVM(inference="ecm", kernel_params={"lengthscale": 1.0}, **ECM100).fit(X, y)
    ypm = np.where(y == 1, 1.0, -1.0)
    with float_precision(True):
        f64 = lambda v: jnp.asarray(v, jnp.float64)  # noqa: E731
        theta0 = SEParams(f64(1.0), f64(1.0))
        res = gp_ecm_mlii(jnp.asarray(X), jnp.asarray(ypm), theta0, GPHyper(*map(f64, (1.0, 2.0, 1.0, 0.0, 1.0, 1.0))),
                          f64(1e-10), kernel="rbf", max_iter=100, mlii_every=10, mlii_steps=10, optimizer="lbfgs",
                          learning_rate=0.05, estimate_gamma=False, jitter=1e-6, trainable=("lengthscale", "amplitude"),
                          mlii_tol=1e-4, accelerate=True, exact=True, criterion="loo",
                          theta_prior=kernel_prior(theta0, f64(1.0)))
        mean, var = gp_predict(jnp.asarray(X), jnp.asarray(X[:7]), jnp.asarray(ypm), res.inv_lam, res.gamma,
                               res.theta)
    np.testing.assert_allclose(clf.f_, res.f, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(clf.kernel_params_["lengthscale"], res.theta.lengthscale, rtol=1e-10)
    np.testing.assert_allclose(clf.predict_latent(X[:7]), (mean, var), rtol=1e-8)
    np.testing.assert_allclose(clf.decision_function(X[:7]),
                               probit_margin(*linked_moments(np.asarray(mean), np.asarray(var), clf.link_)), rtol=1e-8)
    trace = clf.objective_
    assert trace.ndim == 1 and np.all(np.isfinite(trace))
    np.testing.assert_allclose(clf.log_z_, np.asarray(res.log_z)[: len(clf.log_z_)], rtol=1e-10)
    assert 1 <= len(clf.log_z_) <= 100 // 10 and np.isnan(np.asarray(res.log_z)[len(clf.log_z_):]).all()
    assert np.all(clf.log_z_[:, 1] >= clf.log_z_[:, 0] - 1e-9)


def test_support_vectors_follow_eq13(moons):
    """ECM with gamma0 = 0: alpha_n = 2 gamma y_n strictly inside the margin, 0 outside it, and
    dual_coef_ holds alpha at support_ (y f <= 1)."""
    X, y = moons
    clf = GPBSVM(**FIXED_ECM).fit(X, y)
    ypm = np.where(y == 1, 1.0, -1.0)
    margin = ypm * clf.f_
    inside, outside = margin < 1 - 1e-3, margin > 1 + 1e-3
    assert inside.sum() >= 5 and outside.sum() >= 5
    np.testing.assert_allclose(clf.alpha_[inside], 2 * 0.5 * ypm[inside], rtol=1e-3)
    np.testing.assert_allclose(clf.alpha_[outside], 0.0, atol=1e-3)
    np.testing.assert_array_equal(clf.support_, np.flatnonzero(margin <= 1 + 1e-3))
    np.testing.assert_array_equal(clf.dual_coef_[0], clf.alpha_[clf.support_])
    np.testing.assert_array_equal(clf.support_vectors_, X[clf.support_])
    # the representer weights reproduce the predictive mean (eq. 12)
    mean, _ = clf.predict_latent(X[:5])
    from bayes_maxmargin.core.kernels import se

    K = np.asarray(se(SEParams(1.0, 1.0), X[:5], X))
    np.testing.assert_allclose(mean, K @ clf.alpha_, rtol=1e-6, atol=1e-8)


@pytest.mark.extended  # Gibbs vs NUTS: test_gp_gibbs.py; FITC with M = N: test_fitc.py
def test_samplers_and_fitc_agree_with_ecm(moons):
    """Gibbs, NUTS (fixed theta) and FITC with M = N classify like ECM and give sensible
    probabilities; the MCMC posterior lands in idata_ with its chains."""
    X, y = moons
    kp = {"lengthscale": 1.0, "amplitude": 1.0}
    # jitter 1e-6: at 1e-8 the 80 x 80 K_mm of FITC is too ill-conditioned for its objective to reach
    # tol (a ConvergenceWarning after max_iter, 1e-3 from ECM)
    ecm = GPBSVM(inference="ecm", learn_kernel=False, kernel_params=kp, gamma0=0.1, jitter=1e-6, **QUIET).fit(X, y)
    fitc = GPBSVM(inference="fitc", num_inducing=len(X), inducing="random", learn_kernel=False,
                  optimize_inducing=False, kernel_params=kp, gamma0=0.1, jitter=1e-6, **QUIET).fit(X, y)
    np.testing.assert_allclose(fitc.decision_function(X), ecm.decision_function(X), atol=1e-4)
    mc = dict(kernel_params=kp, learn_kernel=False, num_chains=2, **QUIET)
    gibbs = GPBSVM(inference="gibbs", num_samples=300, num_warmup=200, **mc).fit(X, y)
    nuts = GPBSVM(inference="nuts", num_samples=150, num_warmup=150, **mc).fit(X, y)
    assert gibbs.idata_.posterior["f"].shape == (2, 300, len(X))
    p_ecm, p_gibbs, p_nuts = (c.predict_proba(X)[:, 1] for c in (ecm, gibbs, nuts))
    assert np.mean(np.abs(p_gibbs - p_nuts)) < 0.03
    assert np.mean((p_gibbs > 0.5) == (p_ecm > 0.5)) > 0.9
    assert np.mean(gibbs.predict(X) == y) > 0.8
    assert "log_likelihood" in gibbs.idata_.children  # gamma0 > 0: normalised skewed Laplace


def test_ecm_and_fitc_warn_when_max_iter_ends_them_short_of_tol(moons):
    """A final ECM run that takes its whole budget with the objective still moving by more than tol
    warns, naming max_iter and the last relative change; a converged run does not."""
    from sklearn.exceptions import ConvergenceWarning

    X, y = moons
    common = dict(learn_kernel=False, kernel_params={"lengthscale": 1.0, "amplitude": 1.0}, gamma0=0.1, **QUIET)
    # FITC: the fit of test_mlii_tol_auto_is_the_ecm_default_and_off_for_fitc (one compiled program), whose
    # final run of 40 iterations ends with a relative change of 4e-6
    for est in (GPBSVM(inference="ecm", max_iter=6, **common),
                GPBSVM(inference="fitc", max_iter=40, mlii_every=10, progress_bar=False, random_state=0)):
        with pytest.warns(ConvergenceWarning, match=rf"stopped at max_iter={est.max_iter} with a relative change .* "
                                                    r"above tol=1e-10"):
            est.fit(X, y)
    with warnings.catch_warnings():  # converged: the ecm80 fixture's fit (one compiled program)
        warnings.simplefilter("error", ConvergenceWarning)
        GPBSVM(inference="ecm", max_iter=40, **QUIET).fit(X, y)


@pytest.mark.extended  # the kernel-sampling sweep itself is checked against NUTS in test_gp_theta.py
def test_samplers_with_kernel_parameters_sampled(moons):
    """learn_kernel=True under Gibbs and NUTS: theta is sampled (its invariance is tested against
    NUTS in test_gp_theta.py); the draws land in idata_ and predictions average over them."""
    X, y = moons[0][:30], moons[1][:30]
    mc = dict(kernel_params={"lengthscale": 1.0, "amplitude": 1.0}, num_samples=60, num_warmup=40,
              num_chains=1, **QUIET)
    for inference in ("gibbs", "nuts"):
        clf = GPBSVM(inference=inference, **mc).fit(X, y)
        ell = clf.idata_.posterior["lengthscale"].values
        assert ell.shape == (1, 60) and np.unique(ell).size > 10
        assert clf.kernel_params_["lengthscale"] == pytest.approx(ell.mean())
        p = clf.predict_proba(X)[:, 1]
        assert np.all(np.isfinite(p)) and np.mean((p > 0.5) == y) > 0.7
    for inference in ("gibbs", "nuts"):  # a subset: the rest stays at its initial value
        clf = GPBSVM(inference=inference, learn_kernel=("lengthscale",), **mc).fit(X, y)
        assert "amplitude" not in clf.idata_.posterior and clf.kernel_params_["amplitude"] == 1.0
        assert np.unique(clf.idata_.posterior["lengthscale"].values).size > 10
        p = clf.predict_proba(X)[:, 1]  # each draw's theta: the sampled field's draw, the fixed one's value
        assert np.all(np.isfinite(p)) and np.mean((p > 0.5) == y) > 0.7
    composed = GPBSVM(inference="gibbs", kernel=RBF() + Linear(), learn_kernel=("k1__lengthscale",),
                      **{k: v for k, v in mc.items() if k != "kernel_params"}).fit(X, y)
    assert np.all(np.isfinite(composed.predict_proba(X)))


@pytest.mark.extended
def test_gibbs_sampling_a_subset_of_theta_agrees_with_nuts(moons):
    """learn_kernel=("lengthscale",) with the amplitude held at 2: Gibbs (slice steps on the sampled
    coordinate of log theta only) and NUTS (log-normal sites on the sampled field only) target the same
    posterior."""
    from ._posterior import assert_posteriors_agree

    X, y = moons[0][:40], moons[1][:40]
    kw = dict(kernel_params={"lengthscale": 1.0, "amplitude": 2.0}, learn_kernel=("lengthscale",),
              num_samples=1500, num_warmup=300, num_chains=2, **QUIET)
    fits = [GPBSVM(inference=inference, **kw).fit(X, y) for inference in ("gibbs", "nuts")]
    draws = [{"log_lengthscale": np.log(f.idata_.posterior["lengthscale"].values),
              "f0": f.idata_.posterior["f"].values[..., 0]} for f in fits]
    assert all(f.kernel_params_["amplitude"] == 2.0 for f in fits)
    assert_posteriors_agree(*draws, ["log_lengthscale", "f0"], z=4.0, sd_rtol=0.15)


def test_float64_by_default_without_touching_global_setting(moons):
    X, y = moons
    before = jax.config.jax_enable_x64
    clf = GPBSVM(**FIXED_ECM).fit(X, y)
    assert jax.config.jax_enable_x64 == before
    assert clf.predict_proba(X).dtype == np.float64
    f32 = GPBSVM(**{**FIXED_ECM, "precision": "float32"}).fit(X, y)
    np.testing.assert_allclose(f32.f_, clf.f_, atol=1e-3)


@pytest.fixture(scope="module")
def ard_lengthscales(moons) -> GPBSVM:
    """ECM with the ARD kernel learning its length-scales only (the amplitude held at 1): the ARD fit of
    test_other_kernels and the fit of test_learn_kernel_subset_keeps_the_rest, one compiled program."""
    return GPBSVM(inference="ecm", kernel="ard", learn_kernel=("lengthscales",),
                  kernel_params={"lengthscales": [0.3, 0.3]}, max_iter=40, mlii_every=10, **QUIET).fit(*moons)


@pytest.mark.parametrize("kernel", ["ard", "poly", "linear"])
def test_other_kernels(moons, kernel, request):
    X, y = moons
    if kernel == "ard":
        clf = request.getfixturevalue("ard_lengthscales")
    else:
        clf = GPBSVM(inference="ecm", kernel=kernel, max_iter=20, mlii_every=10, mlii_steps=10, **QUIET).fit(X, y)
    assert np.all(np.isfinite(clf.predict_proba(X))) and np.mean(clf.predict(X) == y) > 0.75
    if kernel == "ard":
        assert clf.kernel_params_["lengthscales"].shape == (2,)


def test_learn_kernel_subset_keeps_the_rest(ard_lengthscales):
    clf = ard_lengthscales
    ell = clf.kernel_params_["lengthscales"]
    assert clf.kernel_params_["amplitude"] == 1.0 and np.all(ell != 0.3)


def test_precision_none_is_float32_for_svi_and_float64_for_the_other_methods(moons, moons150, ecm80):
    """precision=None (the default) fits S-BSVM in float32, with N // 3 inducing points below 192 rows (the
    cap of 64: test_default_kernel_is_ard_plus_constant_for_svi_from_ard_min_rows), and ECM in float64; an
    explicit precision is kept; a bad precision is named. On 150 half-moon rows the float32 and float64
    S-BSVM fits predict alike (their stochastic paths part by rounding, so not to the bit)."""
    X, y, X_test, y_test, svi = moons150
    assert svi.precision is None and svi._posterior.state.nat.eta1.dtype == np.float32
    assert svi.inducing_points_.shape == (50, 2)
    svi64 = GPBSVM(precision="float64", **SVI).fit(X, y)
    assert svi64._posterior.state.nat.eta1.dtype == np.float64
    # measured: mean |p32 - p64| 7e-4 (max 5e-3) and test errors 0.1030 / 0.1035 on the 2000 test points;
    # 0.01 and 0.005 (10 of the 2000 points) leave room for rounding, well below a real change of the fit
    # (seeds part by 0.01-0.02 in test error, test_svi_keeps_the_kmeans_centres_...)
    p32, p64 = svi.predict_proba(X_test)[:, 1], svi64.predict_proba(X_test)[:, 1]
    assert np.mean(np.abs(p32 - p64)) < 0.01
    assert abs(np.mean(svi.predict(X_test) != y_test) - np.mean(svi64.predict(X_test) != y_test)) <= 0.005
    assert ecm80.f_.dtype == np.float64 and ecm80._x64
    with pytest.raises(InvalidParameterError, match="precision"):
        GPBSVM(precision="float16", **QUIET).fit(*moons)


def test_svi_keeps_the_kmeans_centres_below_ard_min_rows_and_moves_them_above(moons150):
    """optimize_inducing=None: svi keeps the k-means centres on fewer than ARD_MIN_ROWS rows (with the
    "rbf" kernel there), where moving them let ML-II shrink the amplitude and the fit depend on the seed
    (150 half-moon rows: test error 0.14-0.22 over three seeds, GPC 0.10); an explicit bool is kept and
    anything else is named. That they move from ARD_MIN_ROWS rows on:
    test_default_kernel_is_ard_plus_constant_for_svi_from_ard_min_rows; that an explicit True moves them
    below: test_default_is_svi_with_inducing_points_and_minibatches_capped_at_n; FITC moving them:
    test_mlii_tol_auto_is_the_ecm_default_and_off_for_fitc."""
    from bayes_maxmargin.models.gp.model import init_inducing

    X, y, X_test, y_test, seed0 = moons150
    assert seed0.kernel_ == "rbf" and np.ndim(seed0.kernel_params_["lengthscale"]) == 0
    errors = []
    for clf in (seed0, *(GPBSVM(**{**SVI, "random_state": seed}).fit(X, y) for seed in (1, 2))):
        np.testing.assert_allclose(clf.inducing_points_, init_inducing(X, 50, "kmeans", clf._fit_seed()), rtol=1e-6)
        errors.append(np.mean(clf.predict(X_test) != y_test))
    assert max(errors) < 0.125 and max(errors) - min(errors) < 0.02
    with pytest.raises(InvalidParameterError, match="optimize_inducing"):
        GPBSVM(optimize_inducing="yes").fit(X, y)


def test_default_svi_steps_depend_on_the_kernel_numbers_ml_ii_learns(moons):
    """max_iter=None runs 20 epochs, at least 250 steps where ML-II learns at most two kernel numbers
    (RBF: amplitude and length-scale, or one of them) and at least 1000 where it learns more (ARD)."""
    from bayes_maxmargin.estimators.gp import default_svi_steps

    X, y = moons
    assert GPBSVM(**SVI).fit(X, y).n_iter_ == 250
    assert GPBSVM(kernel="ard", **SVI).fit(X, y).n_iter_ == 1000  # 2 length-scales and the amplitude
    assert GPBSVM(kernel="ard", learn_kernel=("lengthscales",), **SVI).fit(X, y).n_iter_ == 250  # 2 numbers
    assert default_svi_steps(300_000, 100, 2) == 60_000 and default_svi_steps(10**8, 100, 19) == 100_000


def test_default_is_svi_with_inducing_points_and_minibatches_capped_at_n(moons):
    """svi with its defaults: with fewer than 100 rows its minibatches are all N rows and with fewer
    than 192 its inducing points N // 3, at least one (the same fit as num_inducing=N // 3,
    batch_size=N); an explicit M up to N is kept, M > N stays an error."""
    from bayes_maxmargin.models.gp.model import init_inducing

    X, y = moons  # 80 rows: the fit of test_default_svi_steps_... (one compiled program)
    default = GPBSVM(**SVI).fit(X, y)
    assert default.inference == "svi" and default.inducing_points_.shape == (26, 2)
    explicit = GPBSVM(inference="svi", num_inducing=26, batch_size=80, **QUIET).fit(X, y)
    np.testing.assert_array_equal(default.predict_proba(X), explicit.predict_proba(X))
    # an explicit optimize_inducing=True is kept below ARD_MIN_ROWS (the default keeps the k-means centres)
    moved = GPBSVM(num_inducing=80, optimize_inducing=True, max_iter=40, **SVI).fit(X, y)
    assert moved.inducing_points_.shape == (80, 2)
    assert not np.allclose(moved.inducing_points_, init_inducing(X, 80, "kmeans", moved._fit_seed()), atol=1e-3)
    assert GPBSVM(max_iter=40, **SVI).fit(X[:5], np.array([0, 1, 0, 1, 1])).inducing_points_.shape == (1, 2)
    with pytest.raises(InvalidParameterError, match=r"num_inducing: 81"):
        GPBSVM(num_inducing=81, **SVI).fit(X, y)


def test_default_kernel_is_ard_plus_constant_for_svi_from_ard_min_rows(tmp_path, monkeypatch, ecm80):
    """kernel=None: svi on >= ARD_MIN_ROWS rows fits ARD + Constant (one length-scale per feature, the
    relevant feature's the shortest, and a learnt intercept variance) with an ML-II step every 5
    steps, the same fit as those set explicitly, and moves its min(64, N // 3) inducing points from the
    k-means centres; on fewer rows, and for ECM, the isotropic "rbf" (ECM: ML-II every 20 iterations;
    an svi fit on fewer rows: test_svi_keeps_the_kmeans_centres_...). A saved default fit predicts the
    same after loading."""
    from bayes_maxmargin import load, save
    from bayes_maxmargin.core.kernels import ARD, Constant
    from bayes_maxmargin.estimators import gp
    from bayes_maxmargin.models.gp.model import init_inducing

    assert gp.default_kernel("svi", gp.ARD_MIN_ROWS) == ARD() + Constant()
    assert gp.default_kernel("svi", gp.ARD_MIN_ROWS - 1) == "rbf"
    # the threshold lowered to 300 rows: the same code paths as on 600 rows in a fraction of the time (on
    # 300 rows the relevant length-scale is 0.98 against 3.4 and 4.1, 500 rows: 0.88, 3.8 and 5.0)
    svi = dataclasses.replace(gp.GP_METHODS["svi"], ard_from=300, optimize_inducing_from=300)
    monkeypatch.setitem(gp.GP_METHODS._methods, "svi", svi)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.where(np.sin(2.0 * X[:, 0]) + 0.3 * rng.normal(size=len(X)) > 0, 1, -1)
    small = dict(batch_size=50, max_iter=300, **SVI)
    default = GPBSVM(**small).fit(X, y)
    assert default.kernel is None and default.kernel_ == ARD() + Constant() and default.elbo_.size == 300 // 5
    assert default.inducing_points_.shape == (64, 3)
    assert not np.allclose(default.inducing_points_, init_inducing(X, 64, "kmeans", default._fit_seed()), atol=1e-3)
    ell = default.kernel_params_["k1__lengthscales"]
    assert ell.shape == (3,) and ell[0] < 0.5 * min(ell[1:])
    assert default.kernel_params_["k2__variance"] != 1.0  # learnt
    explicit = GPBSVM(kernel=ARD() + Constant(), mlii_every=5, **small).fit(X, y)
    np.testing.assert_array_equal(default.predict_proba(X), explicit.predict_proba(X))
    save(default, tmp_path / "default.bmm")
    loaded = load(tmp_path / "default.bmm")
    assert loaded.kernel is None and loaded.kernel_ == ARD() + Constant() and loaded.inference_ == "svi"
    np.testing.assert_array_equal(loaded.predict_proba(X[:50]), default.predict_proba(X[:50]))
    assert ecm80.kernel_ == "rbf" and ecm80.log_z_.shape == (40 // 20, 2)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(kernel_params={"lengthscale": -1.0}), r"kernel_params\['lengthscale'\]: -1"),
        (dict(kernel_params={"lengthscale": float("nan")}), r"kernel_params\['lengthscale'\]: nan"),
        (dict(kernel_params={"amplitude": float("inf")}), r"kernel_params\['amplitude'\]: inf"),
        (dict(kernel_params={"amplitude": 0.0}), r"kernel_params\['amplitude'\]: 0"),
        (dict(kernel_params={"lengthscales": 1.0}), r"'lengthscales'.*valid keys are lengthscale, amplitude"),
        (dict(kernel="ard", kernel_params={"lengthscales": [1.0, 2.0, 3.0]}), r"3 length-scales for 2 input dimensions"),
        (dict(kernel="ard", kernel_params={"lengthscales": [1.0, -2.0]}), r"entry 1 is -2"),
        (dict(learn_kernel=("degree",)), r"learn_kernel: 'degree'"),
        (dict(inference="fitc", num_inducing=0), r"num_inducing: 0"),
        (dict(inference="fitc", num_inducing=500), r"num_inducing: 500 .*N = 80"),
        (dict(kernel="matern"), r"kernel: 'matern'"),
        (dict(mlii_every=0), r"mlii_every: 0"),
        (dict(inference="em"), r"inference: 'em'"),
        (dict(inference="ecm", gamma_prior=(1.0, 1.0)), r"a0.*ECM needs a0 > 1"),
        (dict(mlii_tol=-1e-3), r"mlii_tol"),
        (dict(mlii_tol="fast"), r"mlii_tol: 'fast' \(must be a number >= 0, 'auto' or None\)"),
        (dict(accelerate="yes"), r"accelerate: 'yes'"),
        (dict(solver="newton"), r"solver: 'newton'"),
    ],
)
def test_bad_parameters_are_named(moons, kwargs, match):
    X, y = moons
    with pytest.raises(InvalidParameterError, match=match):
        GPBSVM(**kwargs).fit(X, y)


def test_kernel_matrix_singular_after_jitter_is_a_clear_error(moons):
    X, y = moons
    clf = GPBSVM(inference="ecm", kernel="poly", kernel_params={"degree": 400, "offset": 1e3}, learn_kernel=False)
    with pytest.raises(ValueError, match=r"kernel_params = .*degree.: 400.*not positive definite even after jitter"):
        clf.fit(X * 1e3, y)


@pytest.mark.parametrize("inference", ["ecm", *(pytest.param(m, marks=pytest.mark.extended) for m in ("gibbs", "fitc"))])
def test_duplicates_and_separable_data_fit_without_nan(inference):
    """Duplicated training points (singular K without jitter) and perfectly separable classes."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2))
    X = np.vstack([X, X[:20]])  # 20 exact duplicates
    y = (X[:, 0] > 0).astype(int)
    X[:, 0] += np.where(y == 1, 2.0, -2.0)  # a wide gap: separable
    # ECM: the fit of the ecm80 fixture (80 x 2, max_iter=40), one compiled program for both
    kw = {"gibbs": dict(num_samples=100, num_warmup=50, num_chains=2), "ecm": dict(max_iter=40)}.get(inference, {})
    if inference == "fitc":
        kw["num_inducing"] = 10
    clf = GPBSVM(inference=inference, **kw, **QUIET).fit(X, y)
    assert np.all(np.isfinite(clf.f_)) and np.all(np.isfinite(clf.predict_proba(X)))
    assert np.all(clf.predict(X) == y)


def test_ecm_fast_options_and_blas_threads(moons, ecm100):
    """mlii_tol stops the ML-II rounds early (log_z_ holds the rounds run, n_iter_ the ECM iterations of the
    runs made); accelerate (the default) counts SQUAREM cycles; ECM fits run with OpenBLAS on one thread and
    restore it. (The rounds stop after the first ML-II step that gains at most mlii_tol:
    test_gp_ecm.py::test_mlii_tol_stops_the_iterations_and_the_rounds.)"""
    from threadpoolctl import threadpool_info

    from bayes_maxmargin.core.linalg import limit_blas_threads

    X, y = moons
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with limit_blas_threads(1):
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    # the ecm100 fit (mlii_tol="auto" = 1e-4, accelerate=True): fewer rounds than the 100 // 10 of the schedule
    rounds = len(ecm100.log_z_)
    assert ecm100.accelerate and 1 <= rounds < 100 // 10 and np.all(np.isfinite(ecm100.log_z_))
    assert ecm100.n_iter_ == ecm100.objective_.size - (rounds + 1)  # one start value per run: the rounds, the final
    # SQUAREM cycles of three ECM iterations: at most 10 // 3 per round and 100 // 3 in the final run
    assert ecm100.n_iter_ <= rounds * (10 // 3) + 100 // 3 and ecm100.score(X, y) > 0.8
    GPBSVM(**FIXED_ECM).fit(X, y)  # an ECM fit (the program of test_support_vectors_follow_eq13)
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_mlii_tol_auto_is_the_ecm_default_and_off_for_fitc(moons, ecm100):
    """mlii_tol="auto" (the default) fits ECM as mlii_tol=1e-4, to the bit, in fewer ML-II rounds than
    the paper's schedule (mlii_tol=None) with nearly its predictions; FITC as mlii_tol=None, with
    num_inducing=None min(100, N) points moved from the k-means centres."""
    from bayes_maxmargin.models.gp.model import init_inducing

    X, y = moons
    kw = dict(ECM100)
    auto = ecm100
    explicit = GPBSVM(inference="ecm", mlii_tol=1e-4, **kw).fit(X, y)
    paper = GPBSVM(inference="ecm", mlii_tol=None, **kw).fit(X, y)
    np.testing.assert_array_equal(auto.predict_proba(X), explicit.predict_proba(X))
    assert len(auto.log_z_) < len(paper.log_z_) == 10
    np.testing.assert_allclose(auto.predict_proba(X), paper.predict_proba(X), atol=0.1)
    assert np.mean(auto.predict(X) == paper.predict(X)) >= 0.95
    kw.update(inference="fitc", max_iter=40)
    fitc = GPBSVM(**kw).fit(X, y)
    np.testing.assert_array_equal(fitc.predict_proba(X), GPBSVM(mlii_tol=None, **kw).fit(X, y).predict_proba(X))
    assert fitc.inducing_points_.shape == (80, 2)
    assert not np.allclose(fitc.inducing_points_, init_inducing(X, 80, "kmeans", fitc._fit_seed()), atol=1e-3)


# gamma0 = 0: no pointwise log likelihood, which stays op by op (compiled as one program, XLA rewrites its
# log(sqrt(.)) and changes the last bits of idata_.log_likelihood). FITC with theta and the inducing points
# held: ML-II runs inside the main program (whatever it does there, nothing runs op by op), whose compilation
# without it costs a fraction; FITC's criterion ("evidence") has no theta prior, and the samplers' is
# kwargs1's
@pytest.mark.parametrize("inference,kwargs", [
    ("fitc", dict(num_inducing=4, max_iter=5, learn_kernel=False, optimize_inducing=False)),
    ("gibbs", dict(num_samples=5, num_warmup=5, num_chains=2, gamma0=0.0)),
    ("gibbs", dict(num_samples=5, num_warmup=5, num_chains=2, gamma0=0.0, learn_kernel=False)),
])
def test_fits_run_the_model_code_in_compiled_programs(inference, kwargs):
    """Before and after its main program a fit runs the model's code (kernel matrices, FITC's factors, the
    chains' initial states, theta's prior) in compiled programs: none of its JAX operations runs on its own, which would
    compile one small program per operation, again for every new data shape."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(29, 3))  # a shape no other test uses: an operation run on its own would compile here
    y = (X[:, 0] > 0).astype(int)
    with compilation_log() as compiled:
        GPBSVM(inference=inference, **kwargs, **QUIET).fit(X, y)
    model_code = sorted({f for f in compiled.files if f.startswith(("models/gp/", "core/"))})
    assert not model_code, f"JAX operations run one by one from {model_code}"


def test_ecm_solver_interior_point_is_the_fixed_point_solved_exactly(moons, ecm100):
    """solver="interior_point" (the default) and "fixed_point" fit the same kernel (the ML-II rounds are
    ECM's in both) and predict alike; the exact last f-step has a log posterior at least ECM's. With
    gamma estimated (ECM for gamma) both are the same ECM fit, to the bit."""
    X, y = moons
    kw = dict(inference="ecm", **ECM100)
    exact = ecm100
    ecm = GPBSVM(solver="fixed_point", **kw).fit(X, y)
    for name, value in exact.kernel_params_.items():  # one program each: the rounds agree to rounding
        np.testing.assert_allclose(value, ecm.kernel_params_[name], rtol=1e-6)
    # ECM's last run (at most max_iter iterations) stops short of the fixed point by about 1e-2 in f
    np.testing.assert_allclose(exact.predict_proba(X), ecm.predict_proba(X), atol=1e-2)
    assert exact.objective_[-1] >= ecm.objective_[-1] - 1e-9 * abs(ecm.objective_[-1])
    # theta held (learn_kernel=False: ECM's run alone, a far smaller program than with ML-II rounds); the
    # solver's choice does not depend on it
    kw.update(gamma_prior=(2.0, 1.0), learn_kernel=False)
    np.testing.assert_array_equal(GPBSVM(**kw).fit(X, y).predict_proba(X),
                                  GPBSVM(solver="fixed_point", **kw).fit(X, y).predict_proba(X))


def test_svi_idata_is_built_when_first_read_and_saved_built(moons, tmp_path):
    """An svi fit defers idata_ (building it costs more than a small fit's steps): the first read
    builds it, a refit replaces the one built before, and a saved fit holds it built."""
    from bayes_maxmargin import load, save

    X, y = moons
    est = GPBSVM(**SVI).fit(X, y)  # 250 steps: the fit of test_default_svi_steps_... (one compiled program)
    assert "idata_" not in vars(est)
    assert est.idata_.sample_stats["elbo"].shape == (1, 1, 250 // 5)
    assert "idata_" in vars(est) and "_idata_parts" not in vars(est)
    est.set_params(num_inducing=80, optimize_inducing=True, max_iter=40).fit(X, y)  # a fit of test_default_is_svi_...
    assert est.idata_.sample_stats["elbo"].shape == (1, 1, 40 // 5)
    est.fit(X, y)
    save(est, tmp_path / "svi.bmm")
    assert "idata_" in vars(load(tmp_path / "svi.bmm"))
    with pytest.raises(AttributeError, match="has no attribute 'idata_'"):
        GPBSVM().idata_


def test_gibbs_keeps_2000_draws_per_chain_by_default(moons):
    """num_samples=None: Gibbs keeps 2000 draws per chain (its effective draws per draw with theta sampled
    are 0.14-0.22, and R-hat over every value of f needs about 1000 effective draws of each); an explicit
    count is kept."""
    X, y = moons[0][:20], moons[1][:20]
    settings = dict(inference="gibbs", learn_kernel=False, num_chains=1, num_warmup=10, **QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one short chain: its mixing is not the point
        default = GPBSVM(**settings).fit(X, y)
        explicit = GPBSVM(num_samples=30, **settings).fit(X, y)
    assert default.idata_.posterior.sizes["draw"] == 2000 and default.n_iter_ == 2010
    assert explicit.idata_.posterior.sizes["draw"] == 30
