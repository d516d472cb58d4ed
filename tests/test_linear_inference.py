"""The linear Bayesian SVM: the kernels target the NumPyro program, agree with NUTS and with LIBSVM."""

from __future__ import annotations

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from sklearn.svm import SVC

from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.diagnostics import APPROXIMATION_DRAWS
from bayes_maxmargin.engine import mcmc as driver
from bayes_maxmargin.models.linear.em import linear_em
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, linear_bsvm, prior_precision

from ._posterior import assert_jit_equals_eager, assert_posteriors_agree
from .reference import LINEAR, load_reference


def _problem(X, y, gamma0=0.0, gamma_prior=None, intercept_scale=10.0):
    design = jnp.asarray(np.hstack([X, np.ones((len(X), 1))]))
    data = LinearData(design, jnp.asarray(y, design.dtype))
    a0, b0 = gamma_prior or (1.0, 1.0)
    hyper = LinearHyper(
        prior_precision(X.shape[1], 1.0, intercept_scale, True), *(jnp.asarray(v, design.dtype) for v in (1.0, a0, b0, gamma0))
    )
    kwargs = dict(sigma=1.0, intercept_scale=intercept_scale, gamma=1.0, gamma_prior=gamma_prior, gamma0=gamma0)
    return data, hyper, kwargs


@pytest.mark.parametrize("alpha", [0.0, -0.9, 0.5])
def test_overrelaxed_draw_leaves_the_gaussian_invariant(alpha):
    """x ~ N(m, P^-1) stays N(m, P^-1) after the (overrelaxed) Gaussian move."""
    from bayes_maxmargin.core.augmentation import GaussianConditional, sample_gaussian

    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        A = rng.normal(size=(3, 3))
        prec = A @ A.T + 3 * np.eye(3)
        cov = np.linalg.inv(prec)
        mean = np.array([1.0, -2.0, 0.5])
        cond = GaussianConditional(jnp.asarray(mean), jnp.linalg.cholesky(jnp.asarray(prec)))
        n = 200_000
        x = mean + rng.normal(size=(n, 3)) @ np.linalg.cholesky(cov).T
        keys = jax.random.split(jax.random.PRNGKey(0), n)
        step = jax.vmap(lambda k, prev: sample_gaussian(k, cond, prev, alpha))
        x_new = np.asarray(step(keys, jnp.asarray(x)))
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(x_new.mean(0) - mean) < 4 * se_mean)
    np.testing.assert_allclose(np.cov(x_new.T), cov, atol=4 * np.sqrt(2.0 / n) * np.abs(cov).max())
    # the lag-one correlation of each coordinate is alpha (the move is an AR(1) in whitened space)
    corr = [np.corrcoef(x[:, j], x_new[:, j])[0, 1] for j in range(3)]
    np.testing.assert_allclose(corr, alpha, atol=0.01)


@pytest.mark.parametrize(
    "gamma0,gamma_prior,intercept_scale", [(0.0, None, 10.0), (0.5, (2.0, 1.0), 10.0), (0.0, (2.0, 1.0), None)]
)
def test_log_joint_is_the_augmented_program(synthetic_binary, gamma0, gamma_prior, intercept_scale):
    """The Gibbs state's log joint equals NumPyro's log density of the augmented program."""
    X, y = synthetic_binary
    with jax.enable_x64(True):
        data, hyper, kwargs = _problem(X, y, gamma0, gamma_prior, intercept_scale)
        sample_gamma = gamma_prior is not None
        kernel = jax.jit(build_linear_kernel(sample_gamma))
        state = init_linear(jnp.full(4, 0.1), data, hyper, sample_gamma)
        for i in range(3):
            state, _ = kernel(jax.random.PRNGKey(i), state, data, hyper)
        params = {"beta": state.coef[:3], "intercept": state.coef[3], "lam": 1.0 / state.inv_lam}
        if sample_gamma:
            params["gamma"] = state.gamma
        # one compiled program rather than one per operation of the model
        expected = jax.jit(lambda p: log_density(linear_bsvm, (jnp.asarray(X), jnp.asarray(y, float)),
                                                 {**kwargs, "augmented": True}, p)[0])(params)
        np.testing.assert_allclose(state.log_joint, expected, rtol=1e-10)


@pytest.mark.extended  # compiled and op-by-op agree: a compiler check, slow op by op
@pytest.mark.parametrize("moves", [False, True], ids=["conditional", "with-moves"])
def test_jit_equals_eager(synthetic_binary, moves):
    X, y = synthetic_binary[0][:30], synthetic_binary[1][:30]
    with jax.enable_x64(True):
        data, hyper, _ = _problem(X, y, 0.1, (2.0, 1.0))
        state = init_linear(jnp.zeros(4), data, hyper, True, directions=moves)
        kernel = build_linear_kernel(True, -0.9 if moves else 0.0, directions=moves)
        assert_jit_equals_eager(kernel, jax.random.PRNGKey(3), state, data, hyper)


def test_second_fit_does_not_recompile(synthetic_binary):
    X, y = synthetic_binary
    clf = LinearBSVM(num_samples=20, num_warmup=10, num_chains=2, random_state=0)
    clf.fit(X, y)
    size = driver._run_chunk._cache_size()
    em_size = linear_em._cache_size()
    clf.set_params(random_state=1, gamma=2.0).fit(X + 1.0, y)
    assert driver._run_chunk._cache_size() == size
    em = LinearBSVM(inference="em").fit(X, y)
    em_size = linear_em._cache_size()
    em.set_params(gamma=3.0).fit(X * 2.0, y)
    assert linear_em._cache_size() == em_size


@pytest.mark.slow
@pytest.mark.parametrize(
    "dataset,gamma0,gamma_prior,overrelaxation",
    [
        pytest.param("synthetic", 0.0, None, 0.0, marks=pytest.mark.extended),
        ("synthetic", LINEAR["gamma0"], LINEAR["gamma_prior"], -0.9),  # the stored reference
        pytest.param("wdbc", 0.5, (2.0, 2.0), -0.9, marks=pytest.mark.extended),
    ],
)
def test_gibbs_agrees_with_nuts(request, dataset, gamma0, gamma_prior, overrelaxation):
    """Gibbs (plain and overrelaxed) and NUTS posteriors agree. gamma is sampled only with
    gamma0 > 0: with the hinge its Gibbs chain mixes slowly, as Henao et al. (2014) report. The
    synthetic problem with gamma sampled uses the stored NUTS reference ``linear_synthetic_gamma``
    (``LinearBSVM("nuts", num_samples=700, num_warmup=300, **common)``), the others fit NUTS here."""
    X, y = request.getfixturevalue("synthetic_binary" if dataset == "synthetic" else "wdbc_small")
    common = dict(gamma0=gamma0, gamma_prior=gamma_prior, num_chains=LINEAR["num_chains"],
                  random_state=LINEAR["random_state"])
    gibbs = LinearBSVM("gibbs", num_samples=2500, num_warmup=300, overrelaxation=overrelaxation, **common)
    gibbs.fit(X, y)
    names = ["beta", "intercept"] + (["gamma"] if gamma_prior else [])
    if (dataset, gamma0, gamma_prior) == ("synthetic", LINEAR["gamma0"], LINEAR["gamma_prior"]):
        nuts = load_reference("linear_synthetic_gamma").draws
    else:
        nuts = LinearBSVM("nuts", num_samples=LINEAR["num_samples"], num_warmup=LINEAR["num_warmup"], **common).fit(X, y)
        nuts = {k: nuts.idata_.posterior[k].values for k in names}
    assert_posteriors_agree({k: gibbs.idata_.posterior[k].values for k in names}, nuts, names)


@pytest.mark.parametrize("solver", ["fixed_point", "interior_point"])
@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_em_map_is_the_libsvm_solution(wdbc_small, gamma, solver):
    """EM with a flat intercept prior = SVC(kernel='linear', C = 2 gamma sigma^2); the fixed-point
    iteration increases the log posterior at every step, the interior-point solution is its maximum."""
    from bayes_maxmargin import load_dataset

    ds = load_dataset("wdbc")
    X = (ds.X - ds.X.mean(0)) / ds.X.std(0)
    y = ds.y
    sigma = 0.5
    em = LinearBSVM("em", gamma=gamma, sigma=sigma, intercept_scale=None, max_iter=5000, tol=1e-14, solver=solver).fit(X, y)
    svc = SVC(kernel="linear", C=2 * gamma * sigma**2, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(em.coef_, svc.coef_, rtol=1e-3, atol=1e-3 * np.abs(svc.coef_).max())
    np.testing.assert_allclose(em.intercept_, svc.intercept_, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(em.predict(X), svc.predict(X))
    obj = em.objective_
    if solver == "fixed_point":
        assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:])), "EM objective decreased"
    else:
        assert obj[-1] == obj.max()


@pytest.mark.parametrize("gamma0", [0.0, 0.3])
def test_ecm_with_gamma_prior_is_monotone(synthetic_binary, gamma0):
    X, y = synthetic_binary
    a0, b0 = 3.0, 1.0
    em = LinearBSVM("em", gamma0=gamma0, gamma_prior=(a0, b0), max_iter=1000, tol=0.0).fit(X, y)
    obj = em.objective_
    assert len(obj) > 10
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:])), "ECM objective decreased"
    assert obj[-1] > obj[0]
    if gamma0 == 0.0:
        # fixed point of the hinge's marginal posterior in gamma: (a0 - 1) / (b0 + 2 sum hinge)
        f = X @ em.coef_[0] + em.intercept_[0]
        hinge = np.maximum(1 - y * f, 0).sum()
        np.testing.assert_allclose(em.gamma_, (a0 - 1) / (b0 + 2 * hinge), rtol=1e-3)


def test_heldout_error_close_to_linear_svc():
    """On the built-in dataset the Gibbs fit is within 1 point of scikit-learn's LinearSVC."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    from bayes_maxmargin import load_dataset
    from bayes_maxmargin.data import train_test_split_stratified

    ds = load_dataset("wdbc")
    X_tr, X_te, y_tr, y_te = train_test_split_stratified(ds.X, ds.y, test_size=0.3, random_state=0)
    ours = make_pipeline(StandardScaler(), LinearBSVM(num_samples=500, num_warmup=200, random_state=0))
    ref = make_pipeline(StandardScaler(), LinearSVC())
    err = 1 - ours.fit(X_tr, y_tr).score(X_te, y_te)
    err_ref = 1 - ref.fit(X_tr, y_tr).score(X_te, y_te)
    assert abs(err - err_ref) <= 0.01 + 1e-12, (err, err_ref)


def test_idata_and_summary(synthetic_binary):
    X, y = synthetic_binary
    clf = LinearBSVM(num_samples=200, num_warmup=100, num_chains=2, gamma0=0.2, gamma_prior=(2.0, 1.0), random_state=0).fit(X, y)
    idata = clf.idata_
    assert set(idata.children) >= {"posterior", "sample_stats", "observed_data", "log_likelihood"}
    assert idata.posterior["beta"].shape == (2, 200, 3)
    assert idata.sample_stats["log_joint"].shape == (2, 200)
    summ = az.summary(idata, var_names=["beta", "intercept", "gamma"])
    assert {"r_hat", "ess_bulk"} <= set(summ.columns) and np.isfinite(summ["r_hat"]).all()
    np.testing.assert_allclose(clf.coef_[0], idata.posterior["beta"].mean(("chain", "draw")))
    em = LinearBSVM("em").fit(X, y)
    # draws of the Gaussian conditional at the mode: centred on coef_, with the covariance predictions use
    assert em.idata_.posterior["beta"].shape == (*APPROXIMATION_DRAWS, 3)
    assert em.idata_.sample_stats["objective"].shape[-1] == em.n_iter_ + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        summ = az.summary(em.idata_)
    assert not summ.isna().any().any()
    draws = em.idata_.posterior["beta"].values.reshape(-1, 3)
    sd = np.sqrt(np.diag(em._posterior.weight_moment(3) - np.outer(em.coef_[0], em.coef_[0])))
    # 400 independent draws: their mean within 5 standard errors, their sd within 5 standard errors of
    # an sd (sd / sqrt(2 (S - 1)) for a Gaussian)
    S = draws.shape[0]
    assert np.all(np.abs(draws.mean(0) - em.coef_[0]) < 5 * sd / np.sqrt(S))
    assert np.all(np.abs(draws.std(0, ddof=1) - sd) < 5 * sd / np.sqrt(2 * (S - 1)))


def test_probabilities_are_the_probit_predictive(synthetic_binary):
    from scipy.stats import norm

    X, y = synthetic_binary
    clf = LinearBSVM(num_samples=300, num_warmup=100, num_chains=2, random_state=0).fit(X, y)
    m, v = clf.predict_latent(X[:20])
    f = np.hstack([X[:20], np.ones((20, 1))]) @ clf._posterior.draws.T
    np.testing.assert_allclose(m, f.mean(1))
    np.testing.assert_allclose(v, f.var(1))
    np.testing.assert_allclose(clf.predict_proba(X[:20])[:, 1], norm.cdf(m / np.sqrt(1 + v)))
    np.testing.assert_array_equal(clf.predict(X[:20]), np.where(m > 0, 1, -1))
