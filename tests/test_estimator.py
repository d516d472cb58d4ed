"""LinearBSVM as a scikit-learn estimator: the estimator checks, pipelines, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import (
    check_dont_overwrite_parameters,
    check_estimators_nan_inf,
    check_fit_idempotent,
    parametrize_with_checks,
)

from bayes_maxmargin import LinearBSVM


#: EM's settings in this file. The fixed-point solver: the tests fit a dozen data shapes, each compiled anew,
#: and its programs compile in about a third of the time of the interior-point solver's (the default); they
#: test the estimator's API and input handling, one code path for both solvers. tests/test_linear_map.py
#: fits, predicts and checks the interior-point solver through the estimator.
EM = dict(solver="fixed_point", max_iter=200, tol=1e-6)


@parametrize_with_checks([LinearBSVM(inference="em", **EM)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# check_estimators_nan_inf: extended; every inference method validates its input in one place before it
# runs (LinearBSVM._fit_input), which the check runs on the EM estimator above. check_fit_idempotent:
# extended; the seeded draws of a refit are the first fit's in tests/test_determinism.py::
# test_chains_do_not_depend_on_how_many_run[linear], and a refit's API state in the EM estimator's check
@pytest.mark.parametrize("check", [pytest.param(check_fit_idempotent, marks=pytest.mark.extended),
                                   pytest.param(check_estimators_nan_inf, marks=pytest.mark.extended),
                                   check_dont_overwrite_parameters])
def test_sklearn_checks_of_the_sampler(check):
    """The checks where sampling differs from EM (seeded draws, input validation before the chains,
    parameters untouched); every other API check is shared and runs on the EM estimator above."""
    check("LinearBSVM", LinearBSVM(num_samples=60, num_warmup=40, num_chains=2, random_state=0))


def test_cross_val_score_and_pipeline(synthetic_binary):
    X, y = synthetic_binary
    pipe = make_pipeline(StandardScaler(), LinearBSVM(num_samples=100, num_warmup=50, num_chains=2, random_state=0))
    # 198 rows: every training fold has 132 (one data shape, one compiled sampler)
    scores = cross_val_score(pipe, X[:198], y[:198], cv=3)
    assert scores.shape == (3,) and scores.min() > 0.7


@pytest.mark.parametrize("labels", [["no", "yes"], [False, True], [3, 7], [-1.0, 2.0]])
def test_labels_of_any_two_values(synthetic_binary, labels):
    X, y = synthetic_binary
    y_any = np.where(y > 0, labels[1], labels[0])
    clf = LinearBSVM("em", **EM).fit(X, y_any)
    assert list(clf.classes_) == sorted(labels)
    pred = clf.predict(X)
    assert set(pred) <= set(labels)
    assert np.mean(pred == y_any) > 0.7
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0)


def test_dataframe_feature_names(synthetic_binary):
    X, y = synthetic_binary
    # the rows and run lengths of a training fold of test_cross_val_score_and_pipeline: its program serves
    df = pd.DataFrame(X[:132], columns=["age", "dose", "weight"])
    clf = LinearBSVM(num_samples=100, num_warmup=50, num_chains=2).fit(df, y[:132])
    assert list(clf.feature_names_in_) == ["age", "dose", "weight"]
    assert list(clf.idata_.posterior["feature"].values) == ["age", "dose", "weight"]


# ---------------------------------------------------------------------------- bad input
def test_nan_names_columns(synthetic_binary):
    X, y = synthetic_binary
    X = X.copy()
    X[3, 1] = np.nan
    X[5, 2] = np.inf
    with pytest.raises(ValueError, match=r"NaN.*\[1\]"):
        LinearBSVM("em").fit(X, y)


def test_infinite_names_columns(synthetic_binary):
    X, y = synthetic_binary
    X = X.copy()
    X[5, 2] = -np.inf
    with pytest.raises(ValueError, match=r"infinity.*\[2\]"):
        LinearBSVM("em").fit(X, y)


def test_one_class(synthetic_binary):
    X, _ = synthetic_binary
    with pytest.raises(ValueError, match="one class"):
        LinearBSVM("em").fit(X, np.ones(len(X)))


# extended: check_classifiers_train and check_classifiers_classes of test_sklearn_compatible fit the same
# estimator on three classes (one-vs-rest) and check its predictions, decision_function of shape (n, 3) and
# predict_proba; the coefficients' shape here
@pytest.mark.extended
def test_three_classes(synthetic_binary):
    """K > 2 classes are fitted one-vs-rest (tests/test_multiclass.py checks them in detail)."""
    X, y = synthetic_binary
    y3 = y.copy()
    y3[:10] = 2
    clf = LinearBSVM("em", **EM).fit(X, y3)
    assert list(clf.classes_) == [-1, 1, 2] and clf.coef_.shape == (3, X.shape[1])
    assert clf.predict_proba(X).shape == (X.shape[0], 3)


def test_lengths_differ(synthetic_binary):
    X, y = synthetic_binary
    with pytest.raises(ValueError, match=r"200 rows.*199"):
        LinearBSVM("em").fit(X, y[:-1])


def test_empty_input():
    with pytest.raises(ValueError, match="0 sample"):
        LinearBSVM("em").fit(np.empty((0, 3)), np.empty(0))


def test_wrong_number_of_features_at_predict(synthetic_binary):
    X, y = synthetic_binary
    clf = LinearBSVM("em", **EM).fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but LinearBSVM is expecting 3 features"):
        clf.predict(X[:, :2])


def test_non_numeric_data_names_the_column(synthetic_binary):
    X, y = synthetic_binary
    Xo = X.astype(object)
    Xo[7, 2] = "abc"
    with pytest.raises(ValueError, match=r"column 2.*'abc'"):
        LinearBSVM("em").fit(Xo, y)


@pytest.mark.parametrize(
    "param,value,match",
    [
        ("inference", "vi", r"inference.*'vi'.*'em', 'gibbs', 'nuts', 'vb', 'svi'"),
        ("sigma", -1.0, r"sigma.*-1"),
        ("gamma", 0.0, r"gamma.*0"),
        ("gamma0", -0.1, r"gamma0.*-0.1"),
        ("num_samples", 0, r"num_samples.*0"),
        ("num_chains", 2.5, r"num_chains.*2.5"),
        ("thin", -1, r"thin.*-1"),
        ("precision", "float16", r"precision.*float16"),
        ("gamma_prior", (1.0,), r"gamma_prior"),
        ("gamma_prior", (2.0, -1.0), r"b0.*-1"),
        ("tol", float("nan"), r"tol"),
        ("overrelaxation", -1.0, r"overrelaxation.*-1"),
    ],
)
def test_invalid_hyperparameters(synthetic_binary, param, value, match):
    X, y = synthetic_binary
    with pytest.raises((ValueError, TypeError), match=match):
        LinearBSVM(**{param: value}).fit(X, y)


def test_em_gamma_prior_needs_a0_above_one(synthetic_binary):
    X, y = synthetic_binary
    with pytest.raises(ValueError, match=r"a0.*0.5"):
        LinearBSVM("em", gamma_prior=(0.5, 1.0)).fit(X, y)


def test_float32_fit_refuses_inputs_that_would_overflow(synthetic_binary):
    """Inputs of 1e30 made a float32 chain overflow (a NonFiniteStateError naming the iteration, as
    test_driver checks on the driver); they are now refused before sampling, naming the column."""
    X, y = synthetic_binary
    clf = LinearBSVM(precision="float32", num_samples=20, num_warmup=0, num_chains=2, random_state=0)
    with pytest.raises(ValueError, match=r"column 0 .*magnitude .*float32"):
        clf.fit(X * 1e30, y)
    assert np.isfinite(clf.fit(X * 1e10, y).predict_proba(X[:5] * 1e10)).all()


def test_em_warns_when_it_runs_out_of_iterations(synthetic_binary):
    from sklearn.exceptions import ConvergenceWarning

    X, y = synthetic_binary
    # the fixed-point solver's warning (the interior-point solver's, with its duality gap: test_linear_map.py::
    # test_max_iter_too_small_warns_with_the_gap)
    with pytest.warns(ConvergenceWarning, match="EM stopped at max_iter=3 with a relative change"):
        LinearBSVM("em", solver="fixed_point", max_iter=3).fit(X, y)
