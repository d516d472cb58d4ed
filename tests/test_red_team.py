"""Reproductions of reported failures, one section per report; each test states the failing case and
checks the behaviour that replaced it (a finite result or a clear error)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayes_maxmargin import (
    GPBSVM,
    DivergenceWarning,
    DivergentSamplerError,
    FactorBSVM,
    LinearBSVM,
    MaxMarginProjection,
)
from bayes_maxmargin.core.memory import MEMORY_ENV, InsufficientMemoryError, available_memory, largest_n
from bayes_maxmargin.data.validation import check_magnitude, magnitude_limit
from bayes_maxmargin.engine.mcmc import NonFiniteStateError, _check_finite, float64_hint
from bayes_maxmargin.engine.nuts import check_divergences


def _data(n: int = 40):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


# ================================================================================================
# Input magnitudes: inputs near sqrt(finfo.max) made the fits and predictions NaN (onset between
# 1e150 and 1e200), or ended in a bare LinAlgError / a NonFiniteStateError.
# ================================================================================================
MAGNITUDE_ERROR = r"column \d+.*magnitude .*StandardScaler"


@pytest.fixture(scope="module")
def vb_fit():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LinearBSVM(inference="vb", max_iter=50, random_state=0).fit(X, y)


@pytest.mark.parametrize("method", ["predict_proba", "predict", "decision_function", "predict_latent"])
def test_linear_vb_predict_on_huge_row_is_refused(vb_fit, method):
    """predict_proba(X[6:7] * 1e300) was [[nan, nan]] and predict gave class 0."""
    X, _ = _data()
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        getattr(vb_fit, method)(X[6:7] * 1e300)


def test_linear_vb_predict_below_the_limit_is_finite(vb_fit):
    X, _ = _data()
    scale = 0.5 * magnitude_limit(np.float64, X.shape[1]) / np.abs(X[6]).max()
    proba = vb_fit.predict_proba(X[6:7] * scale)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("classifier", ["linear", "gp"])
def test_factor_vbem_fit_on_huge_inputs_is_refused(classifier):
    """FactorBSVM(vbem).fit(X * 1e200) fitted, then predict_proba and transform were NaN everywhere."""
    X, y = _data()
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        FactorBSVM(n_factors=2, classifier=classifier, inference="vbem", max_iter=5).fit(X * 1e200, y)


def test_factor_transform_on_huge_inputs_is_refused():
    X, y = _data()
    est = FactorBSVM(n_factors=2, inference="vbem", max_iter=5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        est.transform(X * 1e300)
    assert np.isfinite(est.transform(X)).all()


def test_factor_gp_gibbs_predict_proba_on_huge_inputs_is_refused():
    """FactorBSVM(classifier="gp") with Gibbs gave NaN on predict_proba(X * 1e300)."""
    X, y = _data(20)
    est = FactorBSVM(n_factors=2, classifier="gp", num_samples=4, num_warmup=4, thin=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        est.predict_proba(X * 1e300)


def test_projection_rbf_fit_on_huge_inputs_is_refused():
    """MaxMarginProjection(kernel="rbf").fit(X * 1e300) raised a bare LinAlgError: SVD did not converge."""
    X, y = _data()
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        MaxMarginProjection(kernel="rbf", num_samples=2, num_warmup=2).fit(X * 1e300, y)


def test_magnitude_error_names_the_dataframe_column():
    pd = pytest.importorskip("pandas")
    X, y = _data()
    X[:, 2] *= 1e300
    df = pd.DataFrame(X, columns=["a", "b", "income", "d"])
    with pytest.raises(ValueError, match=r"column 2 \('income'\) has a value of magnitude [0-9.]+e\+300"):
        LinearBSVM(inference="em", max_iter=5).fit(df, y)


def test_magnitude_limit_keeps_the_sums_of_squares_finite():
    """The limit M of n_terms squared inputs: 4 n_terms M^2 times the headroom stays below finfo.max."""
    for dtype in (np.float32, np.float64):
        for n_terms in (1, 4, 160, 10**6):
            M = magnitude_limit(dtype, n_terms)
            x = np.full(n_terms, 2 * M, dtype=dtype)  # differences of two inputs of magnitude M
            with np.errstate(over="raise"):
                total = np.dot(x, x)
            assert total == pytest.approx(np.finfo(dtype).max / 2.0**32, rel=1e-2)
    assert magnitude_limit(np.float32, 1) < 1e15 < 1e148 < magnitude_limit(np.float64, 1)


def test_check_magnitude_uses_the_dtype_and_skips_nan():
    X = np.array([[1.0, np.nan], [2.0, 1e20]])
    check_magnitude(X, dtype=np.float64, n_terms=4)
    with pytest.raises(ValueError, match=r"column 1 .*float32"):
        check_magnitude(X, dtype=np.float32, n_terms=4)


# ================================================================================================
# NUTS divergences: LinearBSVM(inference="nuts").fit(X * 1e300) diverged on every transition and
# returned a 0.45-accuracy fit without a word.
# ================================================================================================
def test_nuts_fit_where_every_transition_diverges_is_an_error():
    X, y = _data(20)
    with pytest.raises(DivergentSamplerError, match=r"all 10 NUTS transitions .*diverged.*[Ss]tandardise"):
        LinearBSVM(inference="nuts", num_samples=10, num_warmup=10, num_chains=1, random_state=0).fit(X * 1e100, y)


def test_nuts_fit_reports_its_divergences():
    X, y = _data(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        est = LinearBSVM(inference="nuts", num_samples=10, num_warmup=10, num_chains=1, random_state=0).fit(X, y)
    diverging = est.idata_.sample_stats["diverging"].values
    assert est.num_divergences_ == int(diverging.sum())
    assert est.divergence_fraction_ == pytest.approx(diverging.mean())


def test_check_divergences_counts_warns_and_refuses():
    none = np.zeros((2, 5), dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_divergences(none) == (0, 0.0)
    some = none.copy()
    some[0, :3] = True
    with pytest.warns(DivergenceWarning, match=r"3 of 10 .*fraction 0\.300"):
        assert check_divergences(some) == (3, 0.3)
    # one-vs-rest: the second problem diverged everywhere
    per_class = np.stack([none, np.ones((2, 5), dtype=bool)])
    with pytest.raises(DivergentSamplerError, match="all 10"):
        check_divergences(per_class)
    assert issubclass(DivergenceWarning, UserWarning) and issubclass(DivergentSamplerError, RuntimeError)


# ================================================================================================
# NonFiniteStateError hints: "or use float64" was suggested to fits that already ran in float64.
# ================================================================================================
def test_float64_hint_depends_on_the_dtype():
    assert float64_hint(np.float64) == ""
    assert "float64" in float64_hint(np.float32)


@pytest.mark.parametrize("dtype, hinted", [(np.float64, False), (np.float32, True)])
def test_chain_error_hint_depends_on_the_dtype(dtype, hinted):
    bad = (np.array([-1, 3]), np.array([0, 1]))
    with pytest.raises(NonFiniteStateError, match="chain 1 .* 'b' at iteration 3") as info:
        _check_finite(bad, ("a", "b"), dtype)
    assert ("or use float64" in str(info.value)) == hinted


# ================================================================================================
# Memory: GPBSVM(inference="ecm" | "gibbs" | "vi").fit on 30 000 x 5 sat for 600 s in the jittered
# Cholesky. The fits now compare their N x N buffers with the available memory first.
# ================================================================================================
@pytest.mark.parametrize("est", [
    GPBSVM(inference="ecm"), GPBSVM(inference="gibbs"), GPBSVM(inference="vi"), GPBSVM(inference="nuts"),
    FactorBSVM(n_factors=2, classifier="gp", inference="vbem"), FactorBSVM(n_factors=2, classifier="gp"),
], ids=lambda e: f"{type(e).__name__}-{e.inference}")
def test_dense_fit_that_does_not_fit_in_memory_is_refused(est, monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "1e4")
    X, y = _data(40)
    with pytest.raises(InsufficientMemoryError, match=r"N = 40 .*only 1e-05 GB") as info:
        est.fit(X, y)
    message = str(info.value)
    largest = largest_n(10**4, 8, int(message.split("for its ")[1].split()[0]))
    assert f"at most N = {largest} points" in message and 0 < largest < 40
    assert isinstance(info.value, (MemoryError, ValueError))
    if isinstance(est, GPBSVM):
        assert "inference='fitc'" in message and "inference='svi'" in message


def test_sparse_gp_fit_is_not_refused_for_memory(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "1e4")
    X, y = _data(40)
    est = GPBSVM(inference="fitc", num_inducing=5, max_iter=3, learn_kernel=False).fit(X, y)
    assert np.isfinite(est.predict_proba(X[:5])).all()


def test_available_memory_reads_the_override(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "12345")
    assert available_memory() == 12345
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match=MEMORY_ENV):
        available_memory()
    monkeypatch.delenv(MEMORY_ENV)
    assert available_memory() > 0
