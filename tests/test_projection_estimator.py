"""MaxMarginProjection: bad input, multi-class one-vs-all, outputs (Chen et al. 2015)."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

from bayes_maxmargin import MaxMarginProjection
from bayes_maxmargin.core.kernels import PolyParams, SEParams, get_kernel
from bayes_maxmargin.core.posterior import Posterior
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.models.projection.gibbs import record_projection
from bayes_maxmargin.models.projection.model import kernel_features


def _three_blobs(n_per=20, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    X = np.concatenate([c + 0.7 * rng.normal(size=(n_per, 2)) for c in centres])
    y = np.repeat(np.array(["a", "b", "c"]), n_per)
    return X, y


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_components=0), "n_components"),
        (dict(kernel="rbf", n_basis=0), "n_basis"),
        (dict(kernel="rbf", n_basis=61), "n_basis"),
        (dict(kernel="sigmoid"), "kernel"),
        (dict(spike_slab=True), "spike_slab"),
        (dict(kernel="rbf", spike_slab=True, num_warmup=10, dense_warmup=11), "dense_warmup.*10"),
        (dict(kernel="rbf", basis="grid"), "basis"),
        (dict(kernel="rbf", kernel_params={"lengthscale": -1.0}), "lengthscale"),
        (dict(kernel="rbf", kernel_params={"gamma": 0.5}), "Invalid key 'gamma'.*lengthscale, amplitude"),
        (dict(kernel="poly", kernel_params={"degree": 1.5}), "degree"),
        (dict(latent_representation="no"), "latent_representation: 'no'"),
        (dict(latent_representation=0), "latent_representation: 0"),
        (dict(latent_representation=None), "latent_representation: None"),
        (dict(kernel="rbf", spike_slab=True, latent_representation=False), "latent_representation.*spike_slab"),
    ],
)
def test_bad_parameters_are_named(kwargs, match):
    X, y = _three_blobs()
    with pytest.raises(ValueError, match=match):
        MaxMarginProjection(**kwargs).fit(X, y)


def test_a_class_with_one_sample_is_rejected():
    X, y = _three_blobs()
    y = y.copy()
    y[0] = "z"
    with pytest.raises(ValueError, match=r"at least 2 training samples.*'z'"):
        MaxMarginProjection().fit(X, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        MaxMarginProjection().fit(X, np.zeros(len(X)))


@pytest.mark.parametrize("kernel,params", [("rbf", SEParams(0.7, 2.0)), ("poly", PolyParams(3, 0.5))])
def test_kernel_features_are_the_library_kernels(kernel, params):
    """K(X, V) in NumPy equals the JAX kernels that GPBSVM uses, at the same parameters."""
    rng = np.random.default_rng(1)
    X, V = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
    with jax.enable_x64(True):
        expected = np.asarray(get_kernel(kernel)(params, X, V))
    np.testing.assert_allclose(kernel_features(X, V, kernel, params), expected, rtol=1e-12)


def _record_with_projection(state):
    """What the estimator keeps per draw, and the draw's projection A (Theta), which it does not keep."""
    return {**record_projection(state), "A": state.A}


@pytest.mark.parametrize("spike_slab", [pytest.param(False, marks=pytest.mark.extended), True])
def test_multiclass_kernel_model(spike_slab, monkeypatch):
    """KMMDP / ssKMMDP one-vs-all on three blobs: accurate, outputs of the documented shapes, and the
    averaged outputs of eq. (23) over the kept draws."""
    X, y = _three_blobs()
    M, K = 12, 2
    runs = []

    def run_keeping_projections(kernel, record, *args, **kwargs):  # the same chains, Theta kept per draw too
        runs.append(run_chains(kernel, _record_with_projection, *args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(sys.modules[MaxMarginProjection.__module__], "run_chains", run_keeping_projections)
    clf = MaxMarginProjection(K, kernel="rbf", kernel_params={"lengthscale": 2**0.5}, n_basis=M,
                              spike_slab=spike_slab, num_warmup=100, num_samples=100, random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.9
    assert clf.kernel_params_ == {"lengthscale": 2**0.5, "amplitude": 1.0}
    U = clf.decision_function(X)
    assert U.shape == (60, 3)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[U.argmax(1)])
    assert clf.transform(X).shape == (60, 3 * K)
    assert clf.coef_.shape == (3, M) and clf.projection_.shape == (3, M, K)
    assert clf.idata_.posterior["w"].shape == (1, 100, 3, K)
    used = clf.n_basis_used_
    assert used.shape == (1, 100, 3) and np.all((used >= 0) & (used <= M))
    assert np.all((clf.basis_usage_ >= 0) & (clf.basis_usage_ <= 1))
    if spike_slab:
        assert clf._model_name() == "ssGKMMDP"
        assert used.mean() < M  # the spike and slab switches basis vectors off
    else:
        assert np.all(clf.basis_usage_ == 1.0)
    # eq. (23) from the kept draws: U_l(x) = mean_t (w_t' z_t + b_t) with z_t = Theta_t' k(V, x), from the
    # stored draws of w and b and the same run's Theta_t; coef_ and intercept_ the means of Theta_t w_t and b_t
    Theta = np.asarray(runs[0].samples["A"])  # (chain, draw, problem, M, K)
    w, b = clf.idata_.posterior["w"].values, clf.idata_.posterior["b"].values
    assert Theta.shape == (1, 100, 3, M, K)
    Theta_w = np.einsum("cdlmk,cdlk->cdlm", Theta, w)
    F = clf._features(X)
    U_draws = np.einsum("nm,cdlm->cdnl", F, Theta_w) + b[:, :, None, :]
    # float64 sums of 100 draws (and of the M = 12 features) in another order: each within (100 + 12) eps of
    # the largest term, 2.5e-14 of it; 1e-12 of it leaves a factor 40 (measured: below 1e-15)
    np.testing.assert_allclose(clf.coef_, Theta_w.mean((0, 1)), rtol=0, atol=1e-12 * np.abs(Theta_w).max())
    np.testing.assert_allclose(clf.intercept_, b.mean((0, 1)), rtol=0, atol=1e-12 * np.abs(b).max())
    np.testing.assert_allclose(U, U_draws.mean((0, 1)), rtol=0, atol=1e-12 * np.abs(U_draws).max())
    # the posterior's latent moments: the averaged output and the spread of w' z + b over the same kept draws. The variance
    # is h' S h from the draws' covariance of (Theta w, b), the same numbers as the variance of the outputs
    # (float64 sums of 100 draws and 13 features in another order): each within 113 eps, 2.5e-14, of
    # bound = (sum_w |h_w| + 1)^2 max|centred draw|^2; 1e-12 of it leaves a factor 40 (measured: 3e-18 of it)
    mean, var = clf._posterior.latent_moments(F)
    np.testing.assert_array_equal(mean, U)
    joint = np.concatenate([Theta_w, b[..., None]], axis=-1)
    centred = joint - joint.mean((0, 1))
    bound = (np.abs(F).sum(1, keepdims=True) + 1.0) ** 2 * np.abs(centred).max() ** 2
    np.testing.assert_allclose(var, U_draws.reshape(100, 60, 3).var(0, ddof=1), rtol=0, atol=1e-12 * bound.max())
    np.testing.assert_array_equal(clf.transform(X), np.einsum("nm,lmk->nlk", F, clf.projection_).reshape(60, -1))


def test_binary_linear_model():
    """MMLDP on two classes: one binary problem, decision (n,), sign decides classes_[1]."""
    X, y = _three_blobs()
    keep = y != "c"
    X, y = X[keep], y[keep]
    clf = MaxMarginProjection(num_warmup=100, num_samples=100, random_state=1).fit(X, y)
    assert clf.n_components_ == 1 and clf.coef_.shape == (1, 2)
    d = clf.decision_function(X)
    assert d.shape == (40,)
    np.testing.assert_array_equal(clf.predict(X), np.where(d > 0, "b", "a"))
    assert clf.score(X, y) > 0.9
    assert clf.transform(X).shape == (40, 1)
    assert isinstance(clf._posterior, Posterior)  # the posterior contract (core.posterior)
    mean, var = clf._posterior.latent_moments(X)
    np.testing.assert_array_equal(mean[:, 0], d)
    assert var.shape == (40, 1) and np.all(var > 0)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :1])


@pytest.mark.filterwarnings("ignore::bayes_maxmargin.MixingWarning")  # 50 draws: a plumbing check
def test_model_without_latent_representation():
    """``latent_representation=False`` (Chen et al. 2015, Sec. 3.2): the three-blob problem one-vs-all
    with the projection drawn from eq. (12); accurate, the outputs of the documented shapes, and the
    model named in the DataTree."""
    X, y = _three_blobs()
    clf = MaxMarginProjection(2, latent_representation=False, num_warmup=50, num_samples=50,
                              random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.9
    assert clf.decision_function(X).shape == (60, 3) and clf.transform(X).shape == (60, 6)
    assert clf.idata_.attrs["model"] == "MMLDP without z_n (eq. 11)"
    assert np.all(np.isfinite(clf.idata_.sample_stats["log_joint"].values))


def test_mixing_is_judged_on_what_the_symmetry_leaves_alone(monkeypatch):
    """The posterior is symmetric under (a_k, z_k, w_k) -> -(a_k, z_k, w_k), so chains started apart may
    settle in opposite signs of w: the mixing check judges coef = A w, b and sigma, and the draws of coef
    average to ``coef_`` (both from the same kept iterations)."""
    from bayes_maxmargin.estimators import projection as estimator

    judged = []
    monkeypatch.setattr(estimator, "check_mixing_after_fit", lambda est, draws: judged.append(draws))
    X, y = _three_blobs()
    clf = MaxMarginProjection(2, num_warmup=50, num_samples=50, num_chains=2, random_state=0).fit(X, y)
    assert set(judged[0].posterior.data_vars) == {"coef", "b", "sigma"}
    coef = clf.idata_.posterior["coef"]
    assert coef.dims == ("chain", "draw", "problem", "feature")
    np.testing.assert_allclose(coef.mean(("chain", "draw")).values, clf.coef_, rtol=1e-10, atol=1e-12)


def test_a_file_without_the_draws_of_Aw_predicts_and_says_it_has_no_spread():
    """A file of an earlier release (tests/data/saved) kept the draws of w and b but not of A w: it predicts
    from the averaged classifier as before, and its posterior names what it lacks for the spread of f."""
    import bayes_maxmargin as bmm

    from .data.make_golden import SAVED_DIR

    old = bmm.load(SAVED_DIR / "MaxMarginProjection-linear.bmm")
    assert "coef" not in old.idata_.posterior
    X = np.zeros((2, old.n_features_in_))
    np.testing.assert_array_equal(old.decision_function(X), (X @ old.coef_.T + old.intercept_)[:, 0])
    with pytest.raises(ValueError, match="no draws of A w .* refit"):
        old._posterior.latent_moments(X)
