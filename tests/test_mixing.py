"""MixingWarning: an MCMC fit whose chains have not mixed says so, naming the worst variable."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest

from bayes_maxmargin import GPBSVM, LinearBSVM, MixingWarning
from bayes_maxmargin.diagnostics import MAX_RHAT, MIN_ESS_PER_CHAIN, mixing_problem, warn_if_not_mixed


def _ar1(rng, chains, draws, phi, shift=None):
    """AR(1) chains (autocorrelation ``phi``), chain c shifted by ``shift[c]``."""
    x = np.zeros((chains, draws))
    x[:, 0] = rng.normal(size=chains)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + np.sqrt(1 - phi**2) * rng.normal(size=chains)
    return x + (0.0 if shift is None else np.asarray(shift)[:, None])


def test_separated_chains_name_the_worst_element():
    rng = np.random.default_rng(0)
    good = rng.normal(size=(4, 500, 3))
    stuck = rng.normal(size=(4, 500)) + np.array([0.0, 0.0, 0.0, 1.5])[:, None]
    idata = az.from_dict({"posterior": {"beta": good, "intercept": stuck}}, coords={"feature": ["a", "b", "c"]},
                         dims={"beta": ["feature"]})
    problem = mixing_problem(idata)
    assert problem.name == "intercept" and problem.rhat > MAX_RHAT and problem.chains == 4
    with pytest.warns(MixingWarning, match=r"intercept has R-hat 1\.\d+ \(above 1\.01\) and bulk ESS \d+ "
                      r"\(below 400 = 100 per chain\), over 4 chain"):
        warn_if_not_mixed(idata, "LinearBSVM")


def test_the_value_shown_is_on_the_side_of_the_limit_it_is():
    """An R-hat of 1.0149 reads 1.015 (not "1.01" beside "R-hat <= 1.01"), and an ESS below the limit is
    rounded down (399.6 reads 399 beside "ESS >= 400")."""
    from bayes_maxmargin.diagnostics import MixingProblem, _shown_above

    assert _shown_above(1.0149, MAX_RHAT) == "1.015"
    assert _shown_above(1.0100004, MAX_RHAT) == "1.0100004"
    assert _shown_above(1.26, MAX_RHAT) == "1.26"
    problems = [MixingProblem("b", 1.0149, 2000.0, 4, 1000), MixingProblem("b", 1.005, 399.6, 4, 1000)]
    messages = []
    for problem in problems:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("bayes_maxmargin.diagnostics.mixing_problem", lambda idata, skip_classes=(), p=problem: p)
            with pytest.warns(MixingWarning) as record:
                warn_if_not_mixed(None, "LinearBSVM")
        messages.append(str(record[0].message))
    assert "b has R-hat 1.015 (above 1.01) and bulk ESS 2000, over 4 chain(s)" in messages[0]
    assert "b has R-hat 1.005 and bulk ESS 399 (below 400 = 100 per chain), over 4 chain(s)" in messages[1]


def test_low_ess_names_the_coordinate():
    rng = np.random.default_rng(1)
    beta = rng.normal(size=(2, 400, 3))
    beta[:, :, 1] = _ar1(rng, 2, 400, 0.99)
    idata = az.from_dict({"posterior": {"beta": beta}}, coords={"feature": ["a", "b", "c"]}, dims={"beta": ["feature"]})
    problem = mixing_problem(idata)
    assert problem.name == "beta[feature=b]" and problem.ess_bulk < MIN_ESS_PER_CHAIN * 2


def test_single_chain_is_not_judged_by_rhat():
    rng = np.random.default_rng(2)
    drifting = np.linspace(0.0, 3.0, 1000)[None] + rng.normal(size=(1, 1000))  # split R-hat would flag it
    assert mixing_problem(az.from_dict({"posterior": {"b": drifting}})) is None or np.isnan(
        mixing_problem(az.from_dict({"posterior": {"b": drifting}})).rhat)
    sticky = _ar1(rng, 1, 1000, 0.995)
    problem = mixing_problem(az.from_dict({"posterior": {"b": sticky}}))
    assert problem is not None and np.isnan(problem.rhat) and problem.ess_bulk < MIN_ESS_PER_CHAIN
    with pytest.warns(MixingWarning) as record:
        warn_if_not_mixed(az.from_dict({"posterior": {"b": sticky}}))
    assert "R-hat 1" not in str(record[0].message) and "bulk ESS" in str(record[0].message)


def test_mixed_chains_and_point_estimates_do_not_warn():
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        assert warn_if_not_mixed(az.from_dict({"posterior": {"b": rng.normal(size=(4, 1000))}})) is None
        assert warn_if_not_mixed(az.from_dict({"posterior": {"b": np.zeros((1, 1, 3))}})) is None


def test_short_gibbs_fit_warns_and_em_does_not(synthetic_binary):
    # the Gibbs fit of test_warning_points_at_the_callers_line
    X, y = synthetic_binary[0][:60], synthetic_binary[1][:60]
    with pytest.warns(MixingWarning, match=r"LinearBSVM have not mixed: (beta|intercept|gamma)"):
        LinearBSVM(num_samples=20, num_warmup=5, num_chains=2, progress_bar=False, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        LinearBSVM(inference="em", random_state=0).fit(X, y)


@pytest.mark.parametrize("make, multiclass", [
    (lambda: LinearBSVM(num_samples=20, num_warmup=5, num_chains=2, progress_bar=False, random_state=0), False),
    (lambda: LinearBSVM(num_samples=20, num_warmup=5, num_chains=2, progress_bar=True, random_state=0), True),
    (lambda: GPBSVM(inference="gibbs", num_samples=20, num_warmup=5, num_chains=2, progress_bar=True,
                    random_state=0), False),
])
def test_warning_points_at_the_callers_line(synthetic_binary, make, multiclass):
    """Whatever the estimator and however deep the check runs (progress reporting, one-vs-rest), the
    warning names the line that called fit."""
    X, y = synthetic_binary
    X, y = X[:60], np.arange(60) % 3 if multiclass else y[:60]
    with pytest.warns(MixingWarning) as record:
        make().fit(X, y)
    assert [w.filename for w in record if w.category is MixingWarning] == [__file__]


def test_rank_diagnostics_equal_arviz():
    """The vectorised R-hat and bulk ESS equal ArviZ's element by element: autocorrelated chains with
    offsets, odd and even numbers of draws, ties, constant elements and one chain."""
    from bayes_maxmargin.diagnostics import rank_diagnostics

    rng = np.random.default_rng(0)
    for chains, draws in [(1, 40), (2, 7), (3, 33), (4, 120), (2, 501)]:
        phi = np.array([-0.5, 0.0, 0.6, 0.95, 0.3, 0.0])
        x = np.zeros((chains, draws, 6))
        noise = rng.normal(size=x.shape)
        x[:, 0] = noise[:, 0]
        for t in range(1, draws):
            x[:, t] = phi * x[:, t - 1] + noise[:, t]
        x += rng.normal(size=(chains, 1, 6)) * np.array([0, 0, 0.5, 0, 2.0, 0])
        x[..., 4] = np.round(x[..., 4])  # ties
        x[..., 5] = 3.0  # constant
        rhat, ess = rank_diagnostics(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_ess = [float(az.ess(x[..., j], method="bulk")) for j in range(6)]
            ref_rhat = [float(az.rhat(x[..., j])) if chains > 1 else np.nan for j in range(6)]
        np.testing.assert_allclose(ess, ref_ess, rtol=1e-9, equal_nan=True)
        np.testing.assert_allclose(rhat, ref_rhat, rtol=1e-9, equal_nan=True)


SHORT = dict(num_samples=20, num_warmup=5, num_chains=2, random_state=0)


def test_warning_comes_once_after_the_progress_bar_closes(synthetic_binary):
    """The warning of a fit that reports its progress is issued after its reporter has closed (below the
    bar, not inside it), once for a multi-class fit of three classes."""
    from bayes_maxmargin.core import progress

    X, y = synthetic_binary
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, *a, **k: seen.append((category, progress.active()))
        LinearBSVM(progress_bar=True, **SHORT).fit(X[:60], np.arange(60) % 3)
    assert [active for category, active in seen if category is MixingWarning] == [None]


def test_inner_fits_of_a_search_do_not_warn_and_its_refit_does(synthetic_binary):
    """GridSearchCV (2 settings x 2 folds) and cross_val_score: the inner fits, on clones the user never
    sees, issue no MixingWarning; the search's refit on all rows issues one. Each of these short chains
    has not mixed (the refit's warning shows it)."""
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y = synthetic_binary
    X, y = X[:60], y[:60]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        GridSearchCV(LinearBSVM(**SHORT), {"gamma0": [0.1, 1.0]}, cv=2).fit(X, y)
        refit = [w for w in record if w.category is MixingWarning]
        cross_val_score(LinearBSVM(**SHORT), X, y, cv=2)
    assert len(refit) == 1 and [w for w in record if w.category is MixingWarning] == refit
