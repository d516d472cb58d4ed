"""Inducing points and basis vectors chosen among the distinct training rows: data with fewer distinct
rows than ``num_inducing`` (``n_basis``) use each distinct row once, and no k-means warning reaches the
user."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayes_maxmargin import GPBSVM, MaxMarginProjection
from bayes_maxmargin.diagnostics import MixingWarning
from bayes_maxmargin.models.gp.model import init_inducing


@pytest.fixture(scope="module")
def repeated() -> tuple[np.ndarray, np.ndarray]:
    """500 rows with 13 distinct inputs, labels from the first feature with some flipped."""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(13, 2))
    X = inputs[rng.integers(0, 13, size=500)]
    y = (X[:, 0] + 0.5 * rng.normal(size=500) > 0).astype(int)
    return X, y


def _distinct(X: np.ndarray) -> np.ndarray:
    return np.unique(X, axis=0)


@pytest.mark.parametrize("method", ["kmeans", "random"])
def test_init_inducing_takes_every_distinct_row_once(repeated, method):
    X, _ = repeated
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        V = init_inducing(X, 100, method, 0)
        np.testing.assert_array_equal(_distinct(V), _distinct(X))  # all 13, each once
        assert V.shape == (13, 2)
        few = init_inducing(X, 5, method, 0)  # fewer than the distinct rows: M of them, distinct
    assert few.shape == (5, 2) and _distinct(few).shape == (5, 2)


@pytest.mark.parametrize("est", [
    GPBSVM(inference="fitc", max_iter=40, tol=1e-4, learn_kernel=False, optimize_inducing=False, calibrate=False),
    GPBSVM(inference="svi", max_iter=100, calibrate=False),
    MaxMarginProjection(kernel="rbf", num_warmup=20, num_samples=20, num_chains=1),
], ids=["fitc", "svi", "projection"])
def test_fewer_distinct_rows_than_inducing_points_fit_without_warnings(repeated, est):
    """FITC (M = 100 by default), svi (64) and the kernel projection (n_basis = 100) on 13 distinct rows:
    every distinct row is one inducing point (basis vector), and fit and predict raise no warning (the
    links are not learnt: 13 inputs leave nearly no held-out information, about which the fit rightly
    warns; the projection's 20 draws are too few to mix, on purpose, and its MixingWarning is let through)."""
    X, y = repeated
    est = est.set_params(random_state=0, progress_bar=False) if isinstance(est, GPBSVM) else est.set_params(
        random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=MixingWarning)
        est.fit(X, y)
        scores = est.decision_function(X)  # the training rows (FITC's fit has compiled its prediction for them)
    assert np.isfinite(scores).all()
    points = est.basis_vectors_ if isinstance(est, MaxMarginProjection) else est.inducing_points_
    assert points.shape == (13, 2)
    if isinstance(est, GPBSVM) and est.inference == "svi":  # kept centres: the distinct rows themselves
        np.testing.assert_array_equal(_distinct(points.astype(np.float32)), _distinct(X.astype(np.float32)))
