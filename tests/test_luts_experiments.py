"""The Luts & Ormerod (2014) Sec. 4 reproductions: evaluation helpers (default SVM, repeated hold-out,
standardisation, simulated data, the VB / MCMC agreement). The four experiments' smoke runs, checked
for sizes and error rates, are in test_experiment_runner.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bayes_maxmargin.experiments import EXPERIMENTS
from bayes_maxmargin.experiments.luts2014 import (
    PAPER_SIMULATION,
    SVM_C_STAGE1,
    SVM_C_STAGE2_FACTORS,
    _agreement,
    _stricter_agreement,
    default_svm,
    repeated_holdout,
    simulate_logistic,
    standardize,
)


def _easy_problem(n: int = 160, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(2.0 * X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X, y


# --------------------------------------------------------------------------- helpers
def test_repeated_holdout_gives_distinct_quarter_splits():
    X, y = _easy_problem(200)
    splits = list(repeated_holdout(5, 0.25, random_state=3).split(X, y))
    assert len(splits) == 5
    for tr, te in splits:
        assert len(te) == 50 and len(tr) == 150
        assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == 200
        assert abs(np.mean(y[te] == 1) - np.mean(y == 1)) < 0.03  # stratified
    assert len({tuple(np.sort(te)) for _, te in splits}) == 5
    again = list(repeated_holdout(5, 0.25, random_state=3).split(X, y))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(splits, again))
    tr, te = next(repeated_holdout(1, 30, random_state=0, stratify=False).split(X, y))
    assert len(te) == 30 and len(tr) == 170


@pytest.mark.parametrize("kwargs", [{"n_splits": 0}, {"n_splits": 2.5}, {"test_size": 0.0}, {"test_size": 1.0},
                                    {"test_size": -3}, {"test_size": True}, {"test_size": "quarter"}])
def test_repeated_holdout_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="n_splits|test_size"):
        repeated_holdout(**kwargs)


def test_standardize_uses_training_statistics_only():
    rng = np.random.default_rng(0)
    train = rng.normal(3.0, 2.0, size=(50, 2))
    train[4, 1] = np.nan
    test = rng.normal(100.0, 1.0, size=(10, 2))
    s_train, s_test = standardize(train, test)
    np.testing.assert_allclose(np.nanmean(s_train, axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.nanstd(s_train, axis=0), 1.0)
    assert np.isnan(s_train[4, 1])
    expected = (test - np.nanmean(train, axis=0)) / np.nanstd(train, axis=0)
    np.testing.assert_allclose(s_test, expected)


def test_default_svm_picks_C_from_its_two_grids_and_classifies():
    X, y = _easy_problem()
    res = default_svm(X[:120], y[:120], n_inner=4, random_state=0)
    assert res.stage1_C == tuple(sorted(SVM_C_STAGE1))
    best1 = res.stage1_C[int(np.argmin(res.stage1_score))]
    np.testing.assert_allclose(res.stage2_C, sorted(best1 * np.asarray(SVM_C_STAGE2_FACTORS)))
    assert res.C in res.stage2_C
    assert min(res.stage2_score) <= min(res.stage1_score) + 1e-12  # stage 2 contains stage 1's best
    assert res.stage2_score[res.stage2_C.index(res.C)] == pytest.approx(min(res.stage2_score))
    assert res.alpha == pytest.approx(1.0 / (2.0 * res.C))
    assert all(0.0 <= s <= 1.0 for s in res.stage1_score + res.stage2_score)
    from bayes_maxmargin.metrics import balanced_error_rate

    assert balanced_error_rate(y[120:], res.estimator.predict(X[120:])) < 0.15
    assert res.estimator.C == res.C and res.fit_time_s > 0


def test_default_svm_rejects_bad_input():
    X, y = _easy_problem(40)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    bad = [
        ((Xn, y), {}, "NaN"),
        ((X, np.ones_like(y)), {}, "two classes"),
        ((X, np.r_[1, -np.ones(39, dtype=int)]), {}, "at least 2"),
        ((X[:, 0], y), {}, "2-D"),
        ((X, y[:-1]), {}, "one row per label"),
        ((X, y), {"C_grid": []}, "C_grid"),
        ((X, y), {"C_grid": [1.0, -2.0]}, "C_grid"),
        ((X, y), {"refine_factors": [0.0]}, "refine_factors"),
        ((X, y), {"scoring": "auc"}, "scoring"),
        ((X, y), {"solver": "sgd"}, "solver"),
        ((X, y), {"n_inner": 0}, "n_inner"),
        ((X, y), {"inner_test_size": 1.5}, "test_size"),
        ((X, y), {"max_iter": 0}, "max_iter"),
    ]
    for args, kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            default_svm(*args, n_inner=kwargs.pop("n_inner", 2), **kwargs)


def test_simulated_data_follow_the_design():
    Xtr, ytr, Xte, yte = simulate_logistic(300, 4, 500, np.random.default_rng(0))
    assert Xtr.shape == (300, 4) and Xte.shape == (500, 4)
    assert set(np.unique(ytr)) <= {-1, 1} and set(np.unique(yte)) <= {-1, 1}
    assert abs(Xtr.std() - 1.0) < 0.1 and abs(Xtr.mean()) < 0.1
    assert PAPER_SIMULATION[(200, 10)]["vb_time_s"] == 1.68


def test_experiments_are_registered():
    for name in ("luts_simulation", "luts_toenail", "luts_spam", "luts_acath"):
        assert name in EXPERIMENTS
        config = Path(__file__).resolve().parents[1] / "bayes_maxmargin" / "configs" / "experiment" / f"{name}.yaml"
        assert f"name: {name}" in config.read_text()


# --------------------------------------------------------------------------- spam agreement
def test_spam_agreement_of_selected_sets():
    names = ["a", "b", "c", "d", "e"]
    vb = [0.99, 0.2, 0.7, 0.6, 0.0]
    mcmc = [0.95, 0.97, 0.91, 0.5, 0.1]
    got = _agreement(names, vb, mcmc, vb_threshold=0.5, mcmc_threshold=0.9)
    assert got["mcmc_selected"] == ["a", "b", "c"] and got["vb_selected"] == ["a", "c", "d"]
    assert got["n_mcmc_selected"] == 3 and got["n_vb_agree"] == 2
    assert got["mcmc_only"] == ["b"] and got["vb_only"] == ["d"]
    assert _agreement(names, vb, None, 0.5, 0.9)["n_vb_agree"] is None
    row = {"variables": names, "vb_inclusion": vb, "mcmc_inclusion": mcmc, "vb_threshold": 0.5, "mcmc_threshold": 0.9}
    assert _stricter_agreement(row) == ("P > 0.95: 0 of 1 included by VB (not by VB: b); "
                                        "P > 0.99: 0 of 0 included by VB (not by VB: -)")
