"""Row buckets: fits of nearby sizes share one compiled program, and padding rows reach no result."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayes_maxmargin.estimators.linear as linear_estimator
from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.core.compilation import BUCKET_STEPS, bucket_rows
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, padded_data, prior_precision

from ._compilations import compilation_log


def test_buckets_cover_every_size_with_at_most_a_quarter_of_padding():
    n = np.arange(1, 20_000)
    rows = np.array([bucket_rows(int(k)) for k in n])
    assert np.all(rows >= n)
    assert np.all(np.diff(rows) >= 0)
    large = n > 16
    assert np.all(rows[large] <= n[large] * (1 + 1 / BUCKET_STEPS))
    assert len(np.unique(rows)) < 70  # a few programs for four orders of magnitude
    assert bucket_rows(900) == bucket_rows(1000)


def test_any_integer_is_a_row_count_and_anything_else_is_named():
    """NumPy integers (a shape, a count from ``np.sum``) bucket as Python ints do; floats, strings and
    bools raise a TypeError naming n, negative counts a ValueError."""
    for kind in (np.int64, np.int32, np.uint16, int):
        assert bucket_rows(kind(17)) == bucket_rows(17) == 20
        assert type(bucket_rows(kind(1000))) is int
    assert bucket_rows(0) == 16
    for bad in (17.0, np.float64(17), "17", True, None):
        with pytest.raises(TypeError, match=r"bucket_rows: n must be an integer number of rows, got"):
            bucket_rows(bad)
    with pytest.raises(ValueError, match=r"bucket_rows: n must be a number of rows >= 0, got -1"):
        bucket_rows(np.int64(-1))


def _problem(n, gamma0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    design = np.hstack([X, np.ones((n, 1))])
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    data = LinearData(jnp.asarray(design), jnp.asarray(y))
    hyper = LinearHyper(jnp.asarray(prior_precision(3, 1.0, 10.0, True)),
                        *(jnp.asarray(v, jnp.float64) for v in (1.3, 2.0, 1.5, gamma0)))
    return data, hyper, jnp.asarray(0.3 * rng.normal(size=4))


@pytest.mark.parametrize("sample_gamma, gamma0", [(False, 0.0), (True, 0.0), (True, 0.7)])
def test_padded_sweeps_equal_the_unpadded_ones(sample_gamma, gamma0):
    """Sweeps on a design padded with zero rows give the same coefficients, 1 / lambda of the data
    rows, gamma and log joint (the log likelihood, the lambda prior and the gamma conditional sum over
    the data rows only)."""
    n = 37
    with float_precision(True):
        data, hyper, coef = _problem(n, gamma0)
        padded = padded_data(data, bucket_rows(n))
        assert padded.y.shape[0] > n and padded.design.dtype == jnp.float64
        kernel = jax.jit(build_linear_kernel(sample_gamma, -0.5))
        init = jax.jit(init_linear, static_argnums=3)  # one program (op by op, every operation compiles its own)
        state = init(coef, data, hyper, sample_gamma)
        state_p = init(coef, padded, hyper, sample_gamma)
        for i in range(3):
            key = jax.random.PRNGKey(i)
            state, _ = kernel(key, state, data, hyper)
            state_p, _ = kernel(key, state_p, padded, hyper)
            np.testing.assert_allclose(state_p.coef, state.coef, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(state_p.inv_lam[:n], state.inv_lam, rtol=1e-10)
            np.testing.assert_allclose(state_p.gamma, state.gamma, rtol=1e-10)
            np.testing.assert_allclose(state_p.log_joint, state.log_joint, rtol=1e-10)
    if sample_gamma:
        assert float(state.gamma) != pytest.approx(1.3)  # gamma moved: its conditional was exercised


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] - 0.5 * X[:, 1] + 0.4 * rng.normal(size=n) > 0).astype(int)


def test_bucketed_gibbs_fit_agrees_with_the_unpadded_fit(monkeypatch):
    """The default (padded) Gibbs fit and a fit on the unpadded rows draw from the same posterior:
    posterior means within Monte Carlo error, the same log joint on average."""
    X, y = _data(150, 2, 3)
    assert bucket_rows(150) > 150
    kw = dict(num_samples=600, num_warmup=200, num_chains=2, random_state=0, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        padded = LinearBSVM(**kw).fit(X, y)
        monkeypatch.setattr(linear_estimator, "bucket_rows", lambda n: n)
        exact = LinearBSVM(**kw).fit(X, y)
    for name in ("beta", "intercept"):
        a, b = padded.idata_.posterior[name].values, exact.idata_.posterior[name].values
        a, b = a.reshape(-1, *a.shape[2:]), b.reshape(-1, *b.shape[2:])
        se = np.sqrt(a.var(axis=0) / 60 + b.var(axis=0) / 60)  # ESS of at least 60 of the 1200 draws
        assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 4 * se), name
    lj_a = padded.idata_.sample_stats["log_joint"].values
    lj_b = exact.idata_.sample_stats["log_joint"].values
    assert abs(lj_a.mean() - lj_b.mean()) < 4 * np.sqrt(lj_a.var() / 60 + lj_b.var() / 60)


def test_fits_of_nearby_sizes_reuse_the_compiled_sampler():
    """LinearBSVM() on 900 rows after 1000 rows (one bucket) compiles neither the sampler nor the
    initialisation; 600 rows (another bucket) compile the sampler."""
    X, y = _data(1000, 7, 4)
    kw = dict(num_samples=37, num_warmup=23, num_chains=2, random_state=0, progress_bar=False)
    with compilation_log() as compiled:
        LinearBSVM(**kw).fit(X, y)
        nearby = compiled.during(lambda: LinearBSVM(**kw).fit(X[:900], y[:900]))
        other = compiled.during(lambda: LinearBSVM(**kw).fit(X[:600], y[:600]))  # another bucket
    assert "jit(_chunk_program)" in other
    assert "jit(_chunk_program)" not in nearby
    assert "jit(_init_chains)" not in nearby


def test_sparse_gp_fits_of_other_sizes_reuse_the_compiled_program():
    """S-BSVM's program sees minibatches and inducing points only, and the pass of its link over the
    training rows pads them to a bucket: svi on 280 rows after 300 rows (both with 64 inducing
    points and minibatches of 100, one bucket of 320 rows) compiles nothing new."""
    from bayes_maxmargin import GPBSVM

    X, y = _data(300, 3, 5)
    kw = dict(inference="svi", max_iter=60, random_state=0, progress_bar=False)
    with compilation_log() as compiled:
        first = compiled.during(lambda: GPBSVM(**kw).fit(X, y))
        nearby = compiled.during(lambda: GPBSVM(**kw).fit(X[:280], y[:280]))
    # the log sees the training program where it compiles (that another shape compiles it again:
    # test_fits_of_nearby_sizes_reuse_the_compiled_sampler's other bucket)
    assert "jit(fn)" in first
    assert nearby == []


def test_a_second_fit_with_the_progress_bar_compiles_nothing():
    """With the progress bar on (the default), the first fit compiles its program once with a progress
    reporter; a program with no progress callback in it (S-BSVM below 100 000 steps) then serves the
    second fit, with or without the bar, instead of being compiled again without the reporter."""
    from bayes_maxmargin import GPBSVM

    X, y = _data(300, 6, 5)  # a shape of its own: no other test has compiled its program
    kw = dict(inference="svi", max_iter=60, random_state=0)
    with compilation_log() as compiled:
        first = compiled.during(lambda: GPBSVM(progress_bar=True, **kw).fit(X, y))
        again = compiled.during(lambda: GPBSVM(progress_bar=True, **kw).fit(X, y))
        quiet = compiled.during(lambda: GPBSVM(progress_bar=False, **kw).fit(X, y))
    assert "jit(fn)" in first
    assert "jit(fn)" not in again and "jit(fn)" not in quiet
