"""FactorBSVM: the estimator, its transform, factor lists and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import FactorBSVM, GPBSVM, LinearBSVM

SMALL = dict(num_warmup=20, num_samples=10, thin=2, n_blocks=2, max_iter=4, m_steps=3, random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n, d = 60, 8
    w = rng.normal(size=(n, 2))
    A = rng.normal(size=(d, 2))
    X = w @ A.T + 0.3 * rng.normal(size=(n, d)) + 2.0
    y = np.where(w[:, 0] > 0, "pos", "neg")
    return X, y


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param(dict(classifier="gp"), marks=pytest.mark.extended),  # NDFM (default suite: 24 rows below)
        pytest.param(dict(classifier="gp", n_blocks=None), marks=pytest.mark.extended),
        dict(classifier="linear", inference="vbem"),  # VLDFM
        dict(classifier="gp", inference="vbem"),  # VNDFM
    ],
    ids=["NDFM", "NDFM-one-score-blocks", "VLDFM", "VNDFM"],
)
def test_fit_predict_transform(data, kw):
    X, y = data
    clf = FactorBSVM(n_factors=2, **{**SMALL, **kw}).fit(X, y)
    assert set(clf.predict(X)) <= set(clf.classes_)
    assert np.mean(clf.predict(X) == y) > 0.8
    p = clf.predict_proba(X)
    assert p.shape == (60, 2) and np.allclose(p.sum(1), 1)
    Z = clf.transform(X)  # every test of these fits predicts on all its rows: one compiled program per shape
    assert Z.shape == (60, 2) and np.all(np.isfinite(Z))
    assert clf.loadings_.shape == (8, 2)
    if clf.inference == "vbem":
        assert clf.n_iter_ == SMALL["max_iter"] and clf.bound_.shape == (2 * clf.n_iter_,)
    else:
        assert clf.n_iter_ == SMALL["num_warmup"] + SMALL["num_samples"] * SMALL["thin"]
    if clf.classifier == "gp" and clf.inference == "gibbs":  # the default kernel: lengthscale sqrt(2 K), unit amplitude
        assert clf.kernel_params_ == {"lengthscale": 2.0, "amplitude": 1.0}
    elif clf.classifier == "gp":  # VB-EM's M-steps move the length-scale from there, not the amplitude
        assert clf.kernel_params_["lengthscale"] != 2.0 and clf.kernel_params_["amplitude"] == 1.0
    else:
        assert not hasattr(clf, "kernel_params_")
    lists = clf.factor_lists(threshold=0.1)
    assert list(lists.columns) == ["factor", "feature", "loading"]
    assert (np.abs(lists["loading"]) > 0.1).all()


def test_float32_fit_is_close_to_float64(data):
    """precision="float32": the VB-EM fit runs in single precision and stays close to float64."""
    X, y = data
    fits = {p: FactorBSVM(n_factors=2, classifier="linear", inference="vbem", precision=p, **SMALL).fit(X, y)
            for p in ("float32", "float64")}
    assert fits["float32"].loadings_.dtype == np.float32 and fits["float64"].loadings_.dtype == np.float64
    np.testing.assert_allclose(fits["float32"].bound_, fits["float64"].bound_, rtol=1e-4)
    np.testing.assert_allclose(fits["float32"].predict_proba(X), fits["float64"].predict_proba(X), atol=1e-3)


@pytest.mark.parametrize(
    "kw,stage2",
    [
        (dict(joint=False, classifier="linear"), LinearBSVM),
        (dict(joint=False, classifier="gp"), GPBSVM),
        # LDFM+N: its first stage, the joint linear Gibbs fit, runs by default in test_idata (factor-gibbs-2)
        # and its second stage (second_stage="gp" after a joint fit) in VLDFM+N below
        pytest.param(dict(classifier="linear", second_stage="gp"), GPBSVM, marks=pytest.mark.extended),
        (dict(classifier="linear", inference="vbem", second_stage="gp"), GPBSVM),
    ],
    ids=["FM+L", "FM+N", "LDFM+N", "VLDFM+N"],
)
def test_two_step(data, kw, stage2):
    """Table 3's two-step variants: the second-stage classifier is fitted to the factor scores and predicts
    from them. On the data's labels, the sign of the first factor, every variant is right on more than 80% of
    the training rows (chance: 50%; measured 98%). The fits share the shapes of test_fit_predict_transform,
    and the second stages one ECM program on the (60, 2) scores."""
    X, y = data
    clf = FactorBSVM(n_factors=2, **{**SMALL, **kw}).fit(X, y)
    assert isinstance(clf._stage2, stage2) and clf._stage2.n_features_in_ == 2
    p = clf.predict_proba(X)
    assert p.shape == (60, 2) and np.all(np.isfinite(p)) and np.allclose(p.sum(1), 1)
    assert np.mean(clf.predict(X) == y) > 0.8
    assert clf.transform(X).shape == (60, 2)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_factors=0), "n_factors"),
        (dict(n_factors=9), "n_factors <= n_features = 8, got 9"),
        (dict(n_factors=2.5), "n_factors"),
        (dict(classifier="tree"), "classifier"),
        (dict(inference="nuts"), "inference"),
        (dict(nu=-1.0), "nu"),
        (dict(precision="float16"), "precision"),
        (dict(joint=False, inference="vbem"), "joint"),
        (dict(link="logit"), "Invalid value for link: 'logit'"),
        (dict(link="probit", inference="vbem"), "link='probit'.*not inference='vbem'"),
        (dict(link="probit", joint=False), "link='probit'.*not joint=False"),
        (dict(link="probit", classifier="linear", second_stage="gp"), "link='probit'.*not second_stage='gp'"),
        (dict(kernel_params={"gamma": 1.0}), "Invalid key 'gamma' in kernel_params.*lengthscale, amplitude"),
        (dict(kernel_params={"lengthscale": 0.0}), r"kernel_params\['lengthscale'\]: 0"),
        (dict(kernel="ard", kernel_params={"lengthscales": [1.0, 2.0, 3.0]}), "3 length-scales for 2 input"),
    ],
)
def test_bad_parameters(data, kwargs, match):
    X, y = data
    with pytest.raises((ValueError, TypeError), match=match):
        FactorBSVM(**{"n_factors": 2, **kwargs}).fit(X, y)


def test_n_factors_bounded_by_n_samples(data):
    X, y = data
    with pytest.raises(ValueError, match="n_factors <= n_samples = 6, got 7"):
        FactorBSVM(n_factors=7).fit(X[:6], y[:6])


def test_constant_column_and_nan(data):
    X, y = data
    Xc = X.copy()
    Xc[:, 3] = 1.5
    with pytest.raises(ValueError, match="constant column.*3"):
        FactorBSVM(n_factors=2).fit(Xc, y)
    Xn = X.copy()
    Xn[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FactorBSVM(n_factors=2).fit(Xn, y)


def test_probit_link(data, tmp_path):
    """The joint nonlinear model with the probit link (NDFM's scores, GP classifier, Albert & Chib Gibbs):
    predict_proba is the mean over the draws of Phi(m_s / sqrt(1 + v_s)), Phi of decision_function, finite
    and ordered far out in the score space too; the draws of z keep the sign of y; no gamma is sampled. After
    4 + 4 sweeps it is right on more than 80% of the 24 training rows as the hinge NDFM fits below (the larger
    class is 58%)."""
    from scipy.special import ndtr

    from bayes_maxmargin.core.linalg import float_precision

    X, y = data
    X, y = X[:24], y[:24]
    clf = FactorBSVM(n_factors=2, classifier="gp", link="probit",
                     **{**SMALL, "num_warmup": 4, "num_samples": 4, "thin": 1}).fit(X, y)
    assert np.mean(clf.predict(X) == y) > 0.8
    p = clf.predict_proba(X)
    with float_precision(True):
        m, v = clf._posterior.latent_draws(X - clf.mean_)
    # the same mean of Phi, taken through log Phi and logsumexp: float64 rounding, a few ulps of each term
    np.testing.assert_allclose(p[:, 1], ndtr(m / np.sqrt(1.0 + v)).mean(0), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ndtr(clf.decision_function(X)), p[:, 1], rtol=1e-12, atol=1e-15)
    codes = np.where(y == clf.classes_[1], 1.0, -1.0)
    assert np.all(clf._posterior.draws["z"] * codes > 0)
    assert "gamma" not in clf.idata_.posterior
    # (all 24 rows in every prediction: the programs compiled for them serve every check)
    far = X + 1e3 * (X - clf.mean_)  # the probabilities round to 0 or 1, the margins stay finite
    assert np.all(np.isfinite(clf.decision_function(far)))
    back = bmm.load(bmm.save(clf, tmp_path / "probit.bmm"))  # the link and the draws of z are saved
    assert back.link == "probit"
    np.testing.assert_array_equal(back.predict_proba(X), p)


@pytest.mark.parametrize("n_blocks", [2, None])
def test_elliptical_slice_subiterations_reach_sample_stats(data, n_blocks):
    """The GP classifier's score update reports its elliptical slice sub-iterations per draw: at least
    one per block (or per score with n_blocks=None), and a whole number. These are the default suite's NDFM
    fits: already after 4 + 4 sweeps they are right on more than 80% of the training rows (measured 92% and
    96%; the larger class is 58% of the 24 rows)."""
    X, y = data
    X, y = X[:24], y[:24]
    clf = FactorBSVM(n_factors=2, classifier="gp", **{**SMALL, "num_warmup": 4, "num_samples": 4, "thin": 1,
                                                      "n_blocks": n_blocks}).fit(X, y)
    sub = clf.idata_.sample_stats["ess_subiterations"].values
    assert sub.shape == (clf.num_chains, 4)
    assert np.all(sub >= (n_blocks or len(X))) and np.issubdtype(sub.dtype, np.integer)
    p = clf.predict_proba(X)
    assert p.shape == (24, 2) and np.all(np.isfinite(p)) and np.allclose(p.sum(1), 1)
    assert np.mean(clf.predict(X) == y) > 0.8
    assert clf.transform(X).shape == (24, 2) and clf.loadings_.shape == (8, 2)


def test_mixing_is_judged_on_what_the_symmetry_leaves_alone(data, monkeypatch):
    """The posterior is symmetric under sign changes and reorderings of the factors with their loadings and
    classifier weights, so raw A and beta may sit in different modes in different chains: the mixing check
    judges psi, gamma, the intercept, f at the training rows and the communalities sum_k a_jk^2 (those of
    the draws of A in idata_)."""
    from bayes_maxmargin.estimators import base

    judged = []
    monkeypatch.setattr(base, "check_mixing_after_fit", lambda est, draws, separable=None: judged.append(draws))
    X, y = data
    clf = FactorBSVM(n_factors=2, classifier="linear", num_chains=2, **SMALL).fit(X, y)
    post = judged[0].posterior
    assert set(post.data_vars) == {"psi", "gamma", "intercept", "f", "communality"}
    assert post["f"].dims == ("chain", "draw", "obs") and post.sizes["obs"] == len(X)
    np.testing.assert_allclose(post["communality"].values, (clf.idata_.posterior["A"].values ** 2).sum(-1),
                               rtol=1e-12)
