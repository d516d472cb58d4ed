"""The link of a calibrated GPBSVM on more than ``LINK_ROWS`` training rows: one seeded subset of whole
groups of repeated rows (:func:`~bayes_maxmargin.core.predict.link_rows`) gives both the leave-one-out
moments, computed for those rows only, and the labels the link is fitted to, for every inference method
with a Gaussian posterior."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import bayes_maxmargin.estimators.gp as gp_module
from bayes_maxmargin import GPBSVM
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.memory import available_memory, dense_bytes
from bayes_maxmargin.core.predict import fit_probit_link, link_rows, tie_groups

QUIET = dict(progress_bar=False, random_state=0)
#: Small fits of each calibrated inference method (few iterations, the kernel fixed: the link's code path is
#: under test, and each fit compiles no kernel-parameter gradients).
FITS = {
    "ecm": dict(max_iter=20, learn_kernel=False),
    "fitc": dict(num_inducing=10, max_iter=20, learn_kernel=False, optimize_inducing=False),
    "vi": dict(max_iter=20, learn_kernel=False),
    "svi": dict(num_inducing=10, max_iter=60, learn_kernel=False, optimize_inducing=False),
}


@pytest.fixture(scope="module")
def twins() -> tuple[np.ndarray, np.ndarray]:
    """120 half-moon rows: 20 inputs given three times, 20 twice and 20 once."""
    from sklearn.datasets import make_moons

    X, y = make_moons(60, noise=0.3, random_state=0)
    rows = np.r_[0:60, 0:40, 0:20]
    return X[rows], y[rows]


def _pm(y: np.ndarray) -> np.ndarray:
    return np.where(y == 1, 1.0, -1.0)


def test_link_rows_draws_whole_groups_within_the_limit(twins):
    X, _ = twins
    labels = tie_groups(X)
    for seed in range(5):
        rows = link_rows(X, 50, seed)
        assert 0 < rows.size <= 50 and np.all(np.diff(rows) > 0)
        # every twin of a drawn row is drawn: the groups of the subset are the groups of all rows
        np.testing.assert_array_equal(np.isin(np.arange(len(X)), rows), np.isin(labels, labels[rows]))
    assert link_rows(X, len(X), 0) is None
    distinct = np.arange(30.0)[:, None]  # no repeated rows: a plain seeded subset of exactly the limit
    assert link_rows(distinct, 10, 0).size == 10


@pytest.mark.filterwarnings("ignore:GPBSVM.inference='fitc'. stopped at max_iter")  # 20 iterations on purpose
@pytest.mark.parametrize("inference", list(FITS))
def test_a_link_on_more_rows_than_link_rows_is_fitted_on_one_subset(twins, inference, monkeypatch):
    """LINK_ROWS lowered to 50 on the 120 rows: the fit learns its link from the moments and the labels of
    the one subset :func:`link_rows` draws from the fit's seed (ECM, FITC and vi used to pair the moments
    of all 120 rows with the labels of 50, and failed). Those moments, computed for the 50 rows only
    (``rows``), equal the moments of all rows at them, the leave-group-out ones of the twins included: the
    same sums over the same factors on fewer columns, so to float rounding (1e-9 in float64, 1e-5 for
    svi's float32, whose padded row buckets make the programs differ)."""
    monkeypatch.setattr(gp_module, "LINK_ROWS", 50)
    X, y = twins
    clf = GPBSVM(inference=inference, **FITS[inference], **QUIET).fit(X, y)
    post, ypm = clf._posterior, _pm(y)
    rows = link_rows(X, 50, clf._fit_seed())
    dtype = jnp.float64 if clf._x64 else jnp.float32
    tol = dict(rtol=1e-9, atol=1e-9) if clf._x64 else dict(rtol=1e-5, atol=1e-5)
    with float_precision(clf._x64):
        sub = post.loo_latent(X[rows], ypm[rows], clf.gamma_, dtype, groups=tie_groups(X[rows]), rows=rows)
        full = post.loo_latent(X, ypm, clf.gamma_, dtype, groups=tie_groups(X))
        plain = post.loo_latent(X[rows], ypm[rows], clf.gamma_, dtype, rows=rows)
        plain_full = post.loo_latent(X, ypm, clf.gamma_, dtype)
    for a, b in zip((*sub, *plain), (*full, *plain_full)):
        assert a.shape == (rows.size,)
        np.testing.assert_allclose(a, b[rows], **tol)
    # the subset's link (each of these fits learns one: a = 1.1-1.45), the same numbers as fitted here
    np.testing.assert_allclose(clf.link_, fit_probit_link(*sub, ypm[rows]), rtol=1e-12)
    assert clf.link_[0] > 1.05
    assert np.isfinite(clf.predict_proba(X[:5])).all()


def _large(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)


@pytest.mark.extended
@pytest.mark.filterwarnings("ignore:GPBSVM.inference='fitc'. stopped at max_iter")  # 3 iterations on purpose
def test_fitc_calibrates_above_link_rows():
    """FITC on 20 500 rows (5 fixed random inducing points, a few ECM iterations): the link is learnt on 20 000 of
    them (this failed with "operands could not be broadcast together with shapes (20000,) (20500,)"). Under -m extended: the
    default run covers the same path with LINK_ROWS lowered
    (test_a_link_on_more_rows_than_link_rows_is_fitted_on_one_subset[fitc])."""
    X, y = _large(20_500)
    clf = GPBSVM(inference="fitc", num_inducing=5, inducing="random", max_iter=3, learn_kernel=False,
                 optimize_inducing=False, **QUIET).fit(X, y)
    assert clf.link_[0] > 0 and np.isfinite(clf.link_).all()
    assert np.isfinite(clf.predict_proba(X[:5])).all()


@pytest.mark.extended
def test_vi_calibrates_above_link_rows():
    """Batch VI on 20 500 rows (14 dense N x N float32 matrices, 24 GB): the link is learnt on 20 000 of them.
    Skipped where that memory is not available (the fast test of the same path lowers LINK_ROWS)."""
    X, y = _large(20_500)
    need = dense_bytes(X.shape[0], "float32", gp_module.GP_METHODS["vi"].dense_buffers)
    if available_memory() < need:
        pytest.skip(f"needs {need / 1e9:.3g} GB of memory")
    clf = GPBSVM(inference="vi", max_iter=3, precision="float32", **QUIET).fit(X, y)
    assert clf.link_[0] > 0 and np.isfinite(clf.link_).all()
