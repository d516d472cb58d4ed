"""LinearBSVM with the Luts & Ormerod (2014) models: priors, groups, missing values, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.diagnostics import APPROXIMATION_DRAWS

FAST = dict(num_samples=150, num_warmup=100, num_chains=2, random_state=0)


@pytest.fixture(scope="module")
def grouped():
    rng = np.random.default_rng(0)
    n = 80
    X = rng.normal(size=(n, 3))
    g = rng.integers(0, 4, n)
    y = np.where(X @ [1.5, -1.0, 0.0] + np.array([-1.0, 0.0, 0.5, 1.0])[g] + rng.normal(size=n) > 0, "b", "a")
    return X, y, g


@pytest.mark.parametrize(
    ("inference", "prior"),
    [("vb", "gaussian"), ("vb", "penalty"), ("vb", "laplace_zero"), ("gibbs", "penalty"), ("gibbs", "laplace_zero")],
)
def test_priors_fit_and_predict(grouped, prior, inference):
    X, y, _ = grouped
    clf = LinearBSVM(inference, prior=prior, rho=0.3, **FAST).fit(X, y)
    assert clf.score(X, y) > 0.7
    assert clf.coef_.shape == (1, 3) and clf.intercept_.shape == (1,)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(clf.decision_function(X) > 0).astype(int)])
    if prior == "laplace_zero":
        p = clf.inclusion_probabilities_
        assert p.shape == (3,) and np.all((p >= 0) & (p <= 1))
    else:
        assert not hasattr(clf, "inclusion_probabilities_")
    if inference == "vb":
        lb = clf.lower_bound_
        assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
        assert clf.idata_.posterior["beta"].shape == (*APPROXIMATION_DRAWS, 3)  # draws of q(beta)


@pytest.mark.parametrize("inference", ["vb", "gibbs"])
def test_random_intercepts(grouped, inference):
    X, y, g = grouped
    labels = np.array(["w", "x", "y", "z"])[g]
    clf = LinearBSVM(inference, **FAST).fit(X, y, groups=labels)
    assert list(clf.groups_) == ["w", "x", "y", "z"]
    assert clf.random_effects_.shape == (4,)
    # generating intercepts -1 (group w) and +1 (group z); y = "b" is the positive class
    assert clf.random_effects_[3] > clf.random_effects_[0] + 0.5
    m_known, _ = clf.predict_latent(X, groups=labels)
    m_pop, _ = clf.predict_latent(X)
    m_new, _ = clf.predict_latent(X, groups=["unseen"] * len(X))
    np.testing.assert_allclose(m_new, m_pop)
    np.testing.assert_allclose(m_known - m_pop, clf.random_effects_[g], rtol=1e-8, atol=1e-8)
    assert clf.score(X, y) > 0.7


@pytest.mark.parametrize("inference", ["vb", "gibbs"])
def test_missing_values(grouped, inference):
    X, y, _ = grouped
    Xm = X.copy()
    holes = np.random.default_rng(1).uniform(size=len(X)) < 0.2
    Xm[holes, 1] = np.nan
    clf = LinearBSVM(inference, prior="penalty", missing="model", **FAST).fit(Xm, y)
    assert clf.X_imputed_.shape == X.shape
    np.testing.assert_array_equal(clf.X_imputed_[~holes], X[~holes])
    assert np.all(np.isfinite(clf.X_imputed_))
    assert clf.score(X, y) > 0.7
    # predictions integrate the missing entries over the fitted imputation model
    m, v = clf.predict_latent(Xm)
    m_full, v_full = clf.predict_latent(X)
    np.testing.assert_allclose(m[~holes], m_full[~holes])
    mu, S = clf.imputation_mean_, clf.imputation_cov_
    filled = Xm.copy()
    filled[holes, 1] = mu[1] + (S[1, [0, 2]] @ np.linalg.solve(S[np.ix_([0, 2], [0, 2])], (X[holes][:, [0, 2]] - mu[[0, 2]]).T))
    m_f, v_f = clf.predict_latent(filled)
    np.testing.assert_allclose(m[holes], m_f[holes])
    assert np.all(v[holes] > v_f[holes]) and np.allclose(v[~holes], v_full[~holes])
    assert clf.score(Xm, y) > 0.7


def test_missing_model_without_missing_values_is_the_plain_fit(grouped):
    X, y, _ = grouped
    plain = LinearBSVM("vb", prior="penalty").fit(X, y)
    model = LinearBSVM("vb", prior="penalty", missing="model").fit(X, y)
    np.testing.assert_allclose(model.coef_, plain.coef_)
    np.testing.assert_allclose(model.lower_bound_, plain.lower_bound_)


def test_bad_input(grouped):
    X, y, g = grouped
    Xm = X.copy()
    Xm[0, 1] = np.nan
    with pytest.raises(ValueError, match="missing='model'"):
        LinearBSVM("vb", prior="penalty").fit(Xm, y)
    with pytest.raises(ValueError, match=r"NaN in column\(s\) \[1\].*no imputation model"):
        LinearBSVM("vb", prior="penalty").fit(X, y).predict(Xm)
    with pytest.raises(ValueError, match="groups"):
        LinearBSVM("vb").fit(X, y, groups=g[:-1])
    with pytest.raises(ValueError, match="groups"):
        LinearBSVM("vb").fit(X, y, groups=np.where(g == 0, np.nan, g))
    Xe = X.copy()
    Xe[:, 2] = np.nan
    with pytest.raises(ValueError, match=r"no observed value in column\(s\) \[2\]"):
        LinearBSVM("vb", prior="penalty", missing="model").fit(Xe, y)
    with pytest.raises(ValueError, match="missing"):
        LinearBSVM("vb", missing="model").fit(Xm, y)
    y_nan = np.where(np.arange(len(y)) == 3, np.nan, np.where(y == "a", 0.0, 1.0))
    with pytest.raises(ValueError, match=r"y contains NaN \(missing labels\) at row\(s\) \[3\]"):
        LinearBSVM("vb").fit(X, y_nan)
    for rho in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="rho"):
            LinearBSVM("vb", prior="laplace_zero", rho=rho).fit(X, y)
    with pytest.raises(ValueError, match="inference"):
        LinearBSVM("em", prior="penalty").fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        LinearBSVM("vb", prior="penalty", gamma=2.0).fit(X, y)
