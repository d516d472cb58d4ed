"""Multi-class (K > 2) one-vs-rest fits of every estimator (:mod:`bayes_maxmargin.estimators.multiclass`).

The correctness check: the batched multi-class fit (one vmapped solver call, or one stacked Gibbs
run of K * num_chains chains) equals K separate binary fits of "class k vs rest" whose PRNG key is
``fold_in(key, k)``, ``key`` the estimator's key from ``random_state``.
"""

from __future__ import annotations

import pickle
import warnings

import jax
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayes_maxmargin import GPBSVM, LinearBSVM, MaxMarginProjection, load, save
from bayes_maxmargin.core.kernels import RBF, Constant
from bayes_maxmargin.engine import svi
from bayes_maxmargin.engine.nuts import nuts_chains
from bayes_maxmargin.estimators import base as est_module
from bayes_maxmargin.estimators.base import _random_key
from bayes_maxmargin.estimators.factor import FactorBSVM

LABELS = np.array(["ant", "bee", "cat"])
#: One setting per inference method, shared by the tests so that each program compiles once.
EM = dict(inference="em", max_iter=100, tol=1e-8)
GIBBS = dict(num_samples=15, num_warmup=5, num_chains=2, progress_bar=False)


def _gp_ecm() -> GPBSVM:
    """The file's one GP setting (one compiled program for the blobs): a kernel object, fixed."""
    return GPBSVM(inference="ecm", kernel=RBF() + Constant(), learn_kernel=False, max_iter=20, random_state=0)


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    """Three well separated blobs of 12 points in 3-d (the third feature is noise), string labels."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 3.0, 0.0], [3.0, -1.5, 0.0], [-3.0, -1.5, 0.0]])
    X = np.concatenate([c + 0.6 * rng.normal(size=(12, 3)) for c in centres])
    return X, np.repeat(LABELS, 12)


def _fit_quiet(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


@pytest.fixture(scope="module")
def gp_multi(blobs):
    """The one-vs-rest fit of :func:`_gp_ecm` on the blobs, read by several tests."""
    return _fit_quiet(_gp_ecm(), *blobs)


def _check_outputs(est, X, y):
    assert list(est.classes_) == list(LABELS)
    proba = est.predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    assert np.all(np.isfinite(proba)) and np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    dec = est.decision_function(X)
    assert dec.shape == (X.shape[0], 3)
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, LABELS[np.argmax(dec, axis=1)])
    np.testing.assert_array_equal(pred, LABELS[np.argmax(proba, axis=1)])
    assert np.mean(pred == y) > 0.9  # chance: 1/3
    m, v = est.predict_latent(X)
    assert m.shape == v.shape == (X.shape[0], 3)
    assert len(est.estimators_) == 3


def _binary_fits_agree(make, X, y, rtol=1e-7, atol=1e-9, multi=None):
    """The multi-class fit (random_state=0; ``multi`` when given, fitted by the caller from
    ``make()``) and the K binary fits with random_state the JAX key fold_in(key, k) (integer seeds
    of host-side generators: randint(fold_in(key, k)))."""
    multi = _fit_quiet(make(), X, y) if multi is None else multi
    _check_outputs(multi, X, y)
    m_multi, v_multi = multi.predict_latent(X)
    key = _random_key(0)
    for k, label in enumerate(LABELS):
        binary = make().set_params(random_state=jax.random.fold_in(key, k))
        binary = _fit_quiet(binary, X, (y == label).astype(int))  # 1 = class k, coded +1
        assert multi.estimators_[k].get_params()["random_state"].tolist() == jax.random.fold_in(key, k).tolist()
        m, v = binary.predict_latent(X)
        np.testing.assert_allclose(m_multi[:, k], m, rtol=rtol, atol=atol)
        np.testing.assert_allclose(v_multi[:, k], v, rtol=rtol, atol=atol)
    return multi


def test_linear_em_equals_binary_fits(blobs):
    X, y = blobs
    multi = _binary_fits_agree(lambda: LinearBSVM(**EM, random_state=0), X, y)
    assert multi.coef_.shape == (3, 3) and multi.intercept_.shape == (3,)
    assert multi.gamma_.shape == (3,)
    assert multi.idata_.posterior["beta"].dims == ("class", "chain", "draw", "feature")
    assert list(multi.idata_.posterior["class"].values) == list(LABELS)


def test_linear_gibbs_equals_binary_fits(blobs):
    X, y = blobs
    multi = _binary_fits_agree(lambda: LinearBSVM(**GIBBS, random_state=0), X, y)
    assert multi.idata_.posterior["beta"].shape == (3, 2, 15, 3)


def test_linear_vb_equals_binary_fits(blobs):
    X, y = blobs
    _binary_fits_agree(lambda: LinearBSVM("vb", max_iter=50, tol=1e-8, random_state=0), X, y)


def test_linear_nuts_equals_binary_fits_in_one_program(blobs, monkeypatch):
    """NUTS one-vs-rest: the K binary samplers vmapped in one call of nuts_chains. The vmapped
    program rounds differently in the last bits, and the leapfrog trajectories amplify that."""
    X, y = blobs
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return nuts_chains(*args, **kwargs)

    make = lambda: LinearBSVM("nuts", num_samples=20, num_warmup=20, num_chains=2, random_state=0)  # noqa: E731
    monkeypatch.setattr(est_module, "nuts_chains", counted)
    multi = _fit_quiet(make(), X, y)
    assert len(calls) == 1 and multi.idata_.posterior["beta"].shape == (3, 2, 20, 3)
    monkeypatch.undo()
    _binary_fits_agree(make, X, y, rtol=1e-4, atol=1e-6, multi=multi)


def test_linear_svi_equals_binary_fits_in_one_run(blobs, monkeypatch):
    """SVI one-vs-rest: one host-side minibatch loop over labels of shape (K, N), its compiled
    chunk vmapped over the classes; every class keeps its own minibatch stream."""
    X, y = blobs
    labels = []
    run_svi = svi.run_svi
    monkeypatch.setattr(svi, "run_svi", lambda *a, **kw: labels.append(a[3].shape) or run_svi(*a, **kw))
    make = lambda: LinearBSVM("svi", max_iter=100, batch_size=12, random_state=0)  # noqa: E731
    multi = _fit_quiet(make(), X, y)
    assert labels == [(3, X.shape[0])]
    assert multi.elbo_.shape[0] == 3 and multi.n_iter_.tolist() == [100] * 3
    monkeypatch.undo()
    _binary_fits_agree(make, X, y, rtol=1e-6, atol=1e-8, multi=multi)


def test_gp_ecm_equals_binary_fits(blobs, gp_multi):
    X, y = blobs
    multi = _binary_fits_agree(_gp_ecm, X, y, multi=gp_multi)
    assert multi.f_.shape == (3, X.shape[0])
    assert multi.idata_.posterior["f"].dims[:3] == ("class", "chain", "draw")


@pytest.mark.extended  # VB-EM of the factor model: tens of seconds on two cores
def test_factor_vbem_equals_binary_fits(blobs):
    X, y = blobs
    make = lambda: FactorBSVM(n_factors=2, inference="vbem", max_iter=3, m_steps=2, random_state=0)  # noqa: E731
    multi = _binary_fits_agree(make, X, y, rtol=1e-6, atol=1e-8)
    assert multi.transform(X).shape == (X.shape[0], 3 * 2)


def test_save_load_multiclass(blobs, tmp_path):
    X, y = blobs
    est = _fit_quiet(LinearBSVM(**GIBBS, random_state=1), X, y)
    path = save(est, tmp_path / "mc.bmm")
    back = load(path)
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    np.testing.assert_array_equal(back.coef_, est.coef_)
    assert back.estimators_[2].idata_.posterior["beta"].shape == (2, 15, 3)


def test_binary_path_is_untouched(blobs):
    """Two classes never take the one-vs-rest path."""
    X, y = blobs
    y2 = np.where(y == "cat", "bee", y)
    est = _fit_quiet(LinearBSVM(**EM), X, y2)
    assert not hasattr(est, "estimators_") and est.coef_.shape == (1, 3)
    assert est.decision_function(X).shape == (X.shape[0],)
    assert est.predict_proba(X).shape == (X.shape[0], 2)


def test_refit_binary_after_multiclass(blobs):
    X, y = blobs
    est = _fit_quiet(LinearBSVM(**EM), X, y)
    _fit_quiet(est, X, (y == "ant").astype(int))
    assert not hasattr(est, "estimators_") and est.predict_proba(X).shape == (X.shape[0], 2)


# A Gibbs / VB-EM program compiled per data shape of each check: with -m extended. By default
# test_multiclass_fit_inside_pipeline fits both estimators on three classes, refits them (the fit is
# idempotent) and pickles them; FactorBSVM's input checks and outputs are the base class's (the full set
# of LinearBSVM in test_estimator), its n_iter_ is checked in test_factor_estimator; MaxMarginProjection's
# input checks in test_projection_estimator (a wrong number of features) and test_properties (non-finite
# and non-numeric inputs to fit, non-finite ones to predict and transform).
@pytest.mark.extended
@parametrize_with_checks([
    MaxMarginProjection(num_samples=10, num_warmup=10, random_state=0),
    # two factors of the checks' two features: the classifier on the scores can take any direction
    # (one factor, started at the first principal axis, does not separate the three blobs)
    FactorBSVM(n_factors=2, inference="vbem", max_iter=2, m_steps=1, random_state=0),
])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.mark.extended
@pytest.mark.parametrize("make", [
    lambda: LinearBSVM(prior="penalty", inference="vb", max_iter=50, random_state=0),
    lambda: GPBSVM(inference="gibbs", learn_kernel=False, num_samples=20, num_warmup=10, num_chains=2,
                   progress_bar=False, random_state=0),
    lambda: GPBSVM(inference="ecm", max_iter=20, mlii_every=10, mlii_steps=2, random_state=0),
    lambda: GPBSVM(inference="fitc", num_inducing=8, max_iter=20, mlii_every=10, mlii_steps=2, random_state=0),
    lambda: GPBSVM(inference="vi", max_iter=20, random_state=0),
    # float64: the one-vs-rest program and the binary fits agree to rounding, and float32's is 1e-6
    lambda: GPBSVM(inference="svi", num_inducing=8, batch_size=12, max_iter=100, precision="float64", random_state=0),
    # 8 sweeps: the factor samplers carry the last bits in which the stacked program's reductions round
    # otherwise than a binary program's, and the sweeps amplify them; the predictive means and variances of
    # the two agreed to 1e-10 relative after 8 sweeps, 2e-8 after 14, only 3e-4 after 30 (AMD EPYC)
    lambda: FactorBSVM(n_factors=2, inference="gibbs", num_samples=6, num_warmup=2, num_chains=1, random_state=0),
    lambda: FactorBSVM(n_factors=2, inference="gibbs", link="probit", num_samples=6, num_warmup=2, num_chains=1,
                       random_state=0),
], ids=["linear-penalty-vb", "gp-gibbs", "gp-ecm-mlii", "gp-fitc", "gp-vi", "gp-svi",
        "factor-gibbs", "factor-gibbs-probit"])
def test_every_inference_method_fits_three_classes(blobs, make):
    X, y = blobs
    _binary_fits_agree(make, X, y, rtol=1e-6, atol=1e-8)


def test_a_kernel_object_stays_one_kernel_of_the_classes(gp_multi):
    """kernel_ of a one-vs-rest fit is the classes' common kernel, a string or a kernel object (the
    default kernel from 600 rows on is ARD() + Constant()); kernel_params_ one dict per class."""
    est = gp_multi
    assert est.kernel_ == RBF() + Constant()
    assert len(est.kernel_params_) == 3
    assert set(est.kernel_params_[0]) == {"k1__lengthscale", "k1__amplitude", "k2__variance"}


def test_random_state_takes_a_jax_key(blobs, tmp_path):
    """A typed key and its raw uint32 pair give the same fit; one-vs-rest classes keep their keys
    fold_in(key, k) as their random_state, raw so that the fit saves and loads."""
    X, y = blobs
    typed = _fit_quiet(LinearBSVM(**GIBBS, random_state=jax.random.key(7)), X, y)
    raw = _fit_quiet(LinearBSVM(**GIBBS, random_state=jax.random.PRNGKey(7)), X, y)
    np.testing.assert_array_equal(typed.predict_proba(X), raw.predict_proba(X))
    for k, sub in enumerate(typed.estimators_):
        assert np.asarray(sub.random_state).tolist() == jax.random.fold_in(jax.random.PRNGKey(7), k).tolist()
    path = save(typed, tmp_path / "keyed.bmm")
    np.testing.assert_array_equal(load(path).predict_proba(X), typed.predict_proba(X))


# ------------------------------------------------------------------ inside scikit-learn meta-estimators
#: One cheap multi-class fit per estimator and inference method; scikit-learn's meta-estimators set
#: ``_parent_callback_ctx`` on the final estimator before ``fit`` and delete it afterwards.
META_CASES = {
    "linear-em": lambda: LinearBSVM(**EM, random_state=0),
    "linear-vb": lambda: LinearBSVM("vb", max_iter=50, tol=1e-8, random_state=0),
    "linear-gibbs": lambda: LinearBSVM(**GIBBS, random_state=0),
    "gp-ecm": _gp_ecm,
    "factor-vbem": lambda: FactorBSVM(n_factors=2, inference="vbem", max_iter=1, m_steps=1, random_state=0),
    "projection-gibbs": lambda: MaxMarginProjection(num_samples=10, num_warmup=10, random_state=0),
}


@pytest.mark.parametrize("name", list(META_CASES))
def test_multiclass_fit_inside_pipeline(blobs, name):
    """A Pipeline's multi-class fit keeps the caller's attributes and equals the fit outside it
    (bit for bit: the scaled inputs and the key are the same); refitting it gives the same fit, and
    so does a pickled copy."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = blobs
    pipe = _fit_quiet(make_pipeline(StandardScaler(), META_CASES[name]()), X, y)
    assert not hasattr(pipe[-1], "_parent_callback_ctx")
    decision = pipe.decision_function(X)
    Xs = StandardScaler().fit_transform(X)
    direct = _fit_quiet(META_CASES[name](), Xs, y)
    np.testing.assert_array_equal(decision, direct.decision_function(Xs))
    assert np.mean(pipe.predict(X) == y) > 0.9
    # the fits' JAX arrays are pickled as NumPy arrays (unpickled, a JAX array takes JAX's default
    # precision, float32): a pickled float64 fit predicts the same bits
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(pipe)).decision_function(X), decision)
    np.testing.assert_array_equal(_fit_quiet(pipe, X, y).decision_function(X), decision)


def test_multiclass_refit_keeps_caller_attributes(blobs):
    """The fitted state that a multi-class refit clears is the fit's own: a metadata request set by
    ``set_fit_request``-like callers and a parent callback context survive it."""
    X, y = blobs
    est = LinearBSVM(**EM, random_state=0)
    marker = object()
    est._parent_callback_ctx = marker
    _fit_quiet(est, X, y)
    _fit_quiet(est, X, y)
    assert est._parent_callback_ctx is marker
    assert "_parent_callback_ctx" not in est._saved_state()
    del est._parent_callback_ctx


# gp-ecm compiles its fits for the folds' rows: with -m extended (the meta-estimators' calls are the
# base class's, run by linear-em; the GP's one-vs-rest fit in a pipeline: test_multiclass_fit_inside_pipeline)
@pytest.mark.parametrize("name", ["linear-em", pytest.param("gp-ecm", marks=pytest.mark.extended)])
def test_multiclass_grid_search_and_cross_val_score(blobs, name):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = blobs
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    pipe = make_pipeline(StandardScaler(), META_CASES[name]())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = cross_val_score(pipe, X, y, cv=cv, error_score="raise")
        param = "linearbsvm__sigma" if name.startswith("linear") else "gpbsvm__gamma"
        grid = GridSearchCV(pipe, {param: [1.0, 2.0]}, cv=cv, error_score="raise").fit(X, y)
    assert scores.shape == (3,) and np.all(scores > 0.8)
    assert grid.best_score_ > 0.8 and grid.best_estimator_[-1].classes_.tolist() == LABELS.tolist()
    assert len(grid.best_estimator_[-1].estimators_) == 3
