"""Section 4 of Luts & Ormerod (2014), "Mean field variational Bayesian inference for support vector
machine classification": the simulation of Sec. 4.2 and the real-data examples of Sec. 4.3-4.5.

Evaluation protocol (Sec. 4): the real data are split into random 3/4 training, 1/4 test sets
(the repeated hold-out of Kim 2009, 100 splits; :func:`repeated_holdout`) and each method is scored
by the balanced error rate (BER, the mean of the two class error rates;
:func:`~bayes_maxmargin.metrics.balanced_error_rate`) on the test part. Predictors are standardised
with the training part's means and standard deviations only. The Bayesian fits are
:class:`~bayes_maxmargin.LinearBSVM` with the paper's hyperparameters sigma_beta^2 = 1e8 and
A_u = B_u = 0.01 (Sec. 3.1), VB run until the lower bound increases by less than 1e-10 (Sec. 4; at
most ``vb_max_iter`` sweeps) and a single Gibbs chain of 5000 burn-in and 5000 kept draws (Sec. 4;
50 000 + 50 000 for the spam data, Sec. 4.4). Classification uses the posterior mean of the
coefficients (Sec. 4).

Default SVM (Sec. 4.1, :func:`default_svm`): a linear SVM with its penalty chosen by a two-stage
grid search, each grid value scored on 100 random hold-out splits of the training data, the second
grid centred on the first's best value. The paper fits it with LIBSVM through e1071 and does not
give its grids; the grids here are :data:`SVM_C_STAGE1` and :data:`SVM_C_STAGE2_FACTORS`. The
solver is scikit-learn's ``LinearSVC(loss="hinge")`` (liblinear's dual coordinate descent on the
same L2-penalised hinge objective, eq. (1) with C = 1 / (2 alpha)) rather than ``SVC(kernel=
"linear")`` (LIBSVM's SMO, the paper's software): on about 1100 standardised toenail rows and
1300 complete acath rows one LIBSVM fit at C = 2^10 took 47 s and 105 s here (liblinear: 0.2 s and
0.3 s), and the grid needs 100 fits per grid value and training set. liblinear penalises the intercept as a feature of constant value
``intercept_scaling`` (10 here, so its penalty is 1 / 100 of a coefficient's); LIBSVM's
intercept is free. ``solver="libsvm"`` selects ``SVC(kernel="linear")`` for a run as in the paper.

Experiments, one per section, each returning ``(rows, markdown_table)`` with the paper's reported
numbers beside ours where it reports them (it gives times in the text; its BERs are only box
plots, Figures 1, 2 and 4, so no BER is copied):

* :func:`simulation` (Sec. 4.2, Figure 1): penalty parameter inference (Example 1 of Sec. 3.1,
  ``prior="penalty"``) on logistic data, n in {100, 200, 500}, d in {10, 50, 100}, independent
  test sets of 1000;
* :func:`toenail` (Sec. 4.3, Figure 2): a random intercept per patient (Example 2 of Sec. 3.1,
  ``fit(..., groups=patient)``) with the fixed effects visit time, treatment and their product;
* :func:`spam` (Sec. 4.4, Figure 3): Laplace-zero variable selection (Sec. 3.2,
  ``prior="laplace_zero"``, rho = 0.01) on the 57 standardised spambase predictors: VB and MCMC
  inclusion probabilities and their agreement;
* :func:`acath` (Sec. 4.5, Figure 4): missing cholesterol values modelled (Sec. 3.3,
  ``missing="model"``) against the default SVM on complete training cases.

Threads: fits run with OpenBLAS limited to ``blas_threads`` threads (see
:func:`~bayes_maxmargin.experiments.henao2014.limit_blas_threads`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from bayes_maxmargin.experiments.henao2014 import limit_blas_threads

__all__ = [
    "BAYES_PRIOR",
    "METHODS",
    "PAPER_ACATH",
    "PAPER_SIMULATION",
    "PAPER_SPAM",
    "PAPER_TOENAIL",
    "SIM_DS",
    "SIM_NS",
    "SVM_C_STAGE1",
    "SVM_C_STAGE2_FACTORS",
    "DefaultSVMResult",
    "acath",
    "acath_design",
    "default_svm",
    "realdata_figures",
    "repeated_holdout",
    "simulate_logistic",
    "simulation",
    "spam",
    "spam_figures",
    "spam_folds",
    "split_folds",
    "standardize",
    "toenail",
    "toenail_design",
]

#: Methods of the comparisons: the default SVM (Sec. 4.1), VB and MCMC (Gibbs).
METHODS: tuple[str, ...] = ("svm", "vb", "mcmc")

#: Prior hyperparameters of Sec. 3.1 in :class:`LinearBSVM` arguments: sigma_beta^2 = 1e8 for the
#: unpenalised coefficients (``intercept_scale=None`` is 1e8 for the intercept) and A_u = B_u = 0.01.
BAYES_PRIOR: dict[str, Any] = {"intercept_scale": None, "A_u": 0.01, "B_u": 0.01}

#: Sec. 4.2: training sizes and dimensions of Figure 1.
SIM_NS: tuple[int, ...] = (100, 200, 500)
SIM_DS: tuple[int, ...] = (10, 50, 100)

#: First grid of the default SVM (Sec. 4.1): C = 2^-8, 2^-6, ..., 2^8 (alpha = 1 / (2 C)).
SVM_C_STAGE1: tuple[float, ...] = tuple(2.0**k for k in range(-8, 9, 2))
#: Second grid: the first grid's best C times these factors (half steps between its neighbours).
SVM_C_STAGE2_FACTORS: tuple[float, ...] = tuple(2.0**k for k in (-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5))

#: Sec. 4.2 text: mean seconds per fit at n = 200, d = 10 (the only times reported).
PAPER_SIMULATION: dict[tuple[int, int], dict[str, float]] = {
    (200, 10): {"svm_time_s": 571.75, "vb_time_s": 1.68, "mcmc_time_s": 82.31},
}
#: Sec. 4.3 text: data sizes and mean seconds per split.
PAPER_TOENAIL: dict[str, Any] = {
    "n": 1908, "n_patients": 294, "n_negative": 1500, "n_positive": 408,
    "svm_time_s": 3668.70, "vb_time_s": 171.85, "mcmc_time_s": 3597.12,
    "finding": "VB and MCMC (random intercept) below the SVM; MCMC slightly below VB (Figure 2)",
}
#: Sec. 4.4 text: 24 variables almost certainly selected by MCMC, all but ``cs`` selected by VB;
#: VB 76 minutes, MCMC over 10 hours (a lower bound).
PAPER_SPAM: dict[str, Any] = {
    "n": 4601, "d": 57, "rho": 0.01, "num_warmup": 50_000, "num_samples": 50_000,
    "n_mcmc_selected": 24, "n_vb_agree": 23, "mcmc_only": ["cs"],
    "lower_for_mcmc": ["hpl", "font"], "smallest_vb_selected": ["email", "table"],
    "vb_time_s": 76 * 60.0, "mcmc_time_s": 10 * 3600.0,
}
#: Sec. 4.5 text: data sizes and mean seconds per split.
PAPER_ACATH: dict[str, Any] = {
    "n": 3504, "n_missing": 1246,
    "svm_time_s": 3109.40, "vb_time_s": 1028.18, "mcmc_time_s": 1718.98,
    "finding": "VB and MCMC (with the incomplete cases) below the complete-case SVM; VB slightly below MCMC (Figure 4)",
}

#: Quick (smoke-test) settings shared by the experiments.
QUICK_GIBBS = {"num_warmup": 100, "num_samples": 100}
QUICK_N_INNER = 3
QUICK_SPLITS = 2
#: Quick default-SVM grids: 2^-4, 1, 2^4, then the best times 1/2, 1, 2.
QUICK_SVM: dict[str, tuple[float, ...]] = {"C_grid": (2.0**-4, 1.0, 2.0**4), "refine_factors": (0.5, 1.0, 2.0)}


# --------------------------------------------------------------------------- validation helpers
def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_methods(methods: Sequence[str], valid: Sequence[str] = METHODS) -> tuple[str, ...]:
    methods = tuple(methods)
    unknown = sorted(set(methods) - set(valid))
    if unknown or not methods:
        raise ValueError(f"Unknown or no methods {unknown or list(methods)}; valid methods are {', '.join(valid)}")
    return methods


def _log(verbose: bool, msg: str) -> None:
    if verbose:
        print(msg, flush=True)


# --------------------------------------------------------------------------- evaluation helpers
def repeated_holdout(
    n_splits: int = 100, test_size: float | int = 0.25, random_state: int | None = 0, *, stratify: bool = True
):
    """The repeated hold-out of Sec. 4 (Kim 2009): ``n_splits`` random training / test splits.

    Parameters
    ----------
    n_splits : int
        Number of splits (paper: 100).
    test_size : float or int
        Fraction in (0, 1) (paper: 1/4) or number of test samples.
    random_state : int or None
        Seed of the splits.
    stratify : bool
        Keep the class proportions in both parts (``StratifiedShuffleSplit``; every test set then
        has both classes, which the BER needs); False: plain random splits (``ShuffleSplit``).

    Returns
    -------
    sklearn.model_selection.StratifiedShuffleSplit or ShuffleSplit
        Call ``.split(X, y)`` for the (train, test) index pairs.

    Raises
    ------
    ValueError
        If ``n_splits`` is not a positive integer or ``test_size`` is neither a fraction in (0, 1)
        nor a positive integer.
    """
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    n_splits = _check_int("n_splits", n_splits, 1)
    if isinstance(test_size, (bool, np.bool_)):
        raise ValueError(f"test_size must be a fraction in (0, 1) or a positive integer, got {test_size!r}")
    if isinstance(test_size, (int, np.integer)):
        if test_size < 1:
            raise ValueError(f"test_size must be a fraction in (0, 1) or a positive integer, got {test_size!r}")
    elif not isinstance(test_size, (float, np.floating)) or not 0.0 < test_size < 1.0:
        raise ValueError(f"test_size must be a fraction in (0, 1) or a positive integer, got {test_size!r}")
    cls = StratifiedShuffleSplit if stratify else ShuffleSplit
    return cls(n_splits=n_splits, test_size=test_size, random_state=random_state)


def standardize(train: np.ndarray, *others: np.ndarray) -> tuple[np.ndarray, ...]:
    """Centre and scale every column by the training part's mean and standard deviation.

    NaN entries are ignored in the statistics and kept; a constant training column is only centred.

    Returns
    -------
    tuple of ndarray
        ``train`` and each of ``others``, standardised.
    """
    train = np.asarray(train, dtype=float)
    mean = np.nanmean(train, axis=0)
    sd = np.nanstd(train, axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return tuple((np.asarray(a, dtype=float) - mean) / sd for a in (train, *others))


class DefaultSVMResult(NamedTuple):
    """Output of :func:`default_svm`.

    Attributes
    ----------
    estimator : LinearSVC or SVC
        Refitted on all of the training data with the selected C.
    C : float
        The selected C (alpha = 1 / (2 C) in eq. (1)).
    stage1_C, stage2_C : tuple of float
        The two grids.
    stage1_score, stage2_score : tuple of float
        Mean hold-out score (BER or error) of every grid value.
    fit_time_s : float
        Wall time of both grid searches and the refit.
    """

    estimator: Any
    C: float
    stage1_C: tuple[float, ...]
    stage2_C: tuple[float, ...]
    stage1_score: tuple[float, ...]
    stage2_score: tuple[float, ...]
    fit_time_s: float

    @property
    def alpha(self) -> float:
        """The penalty of eq. (1): alpha = 1 / (2 C)."""
        return 1.0 / (2.0 * self.C)


def _svm_estimator(solver: str, intercept_scaling: float, max_iter: int, random_state: int | None) -> Any:
    from sklearn.svm import SVC, LinearSVC

    if solver == "liblinear":
        return LinearSVC(loss="hinge", dual=True, intercept_scaling=intercept_scaling, max_iter=max_iter,
                         random_state=random_state)
    return SVC(kernel="linear")  # LIBSVM runs to its own tolerance (no iteration cap)


def default_svm(
    X: Any,
    y: Any,
    *,
    C_grid: Sequence[float] = SVM_C_STAGE1,
    refine_factors: Sequence[float] = SVM_C_STAGE2_FACTORS,
    n_inner: int = 100,
    inner_test_size: float = 0.25,
    scoring: str = "ber",
    solver: str = "liblinear",
    intercept_scaling: float = 10.0,
    max_iter: int = 10_000,
    random_state: int | None = 0,
) -> DefaultSVMResult:
    """The default SVM of Luts & Ormerod (2014), Sec. 4.1: a linear SVM, C by a two-stage grid.

    Stage 1 scores every C of ``C_grid`` by its mean hold-out score over ``n_inner`` random splits
    of the training data (``inner_test_size`` held out; paper: 100 splits); stage 2 scores the
    grid ``best_C * refine_factors`` centred on stage 1's best value on the same splits; the best
    C of stage 2 is refitted on all of ``X``. Both stages are scikit-learn ``GridSearchCV`` over a
    ``StratifiedShuffleSplit``; ties go to the smaller C (the stronger penalty).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Training predictors (standardise them first; no NaN).
    y : array-like of shape (n_samples,)
        Two classes, each with at least 2 samples.
    C_grid : sequence of float
        Stage-1 grid of C > 0 (default :data:`SVM_C_STAGE1`, 2^-8, 2^-6, ..., 2^8; the paper does not
        give its grid).
    refine_factors : sequence of float
        Stage-2 grid as multiples of stage 1's best C (default :data:`SVM_C_STAGE2_FACTORS`,
        2^-1.5 ... 2^1.5 in half steps); a single factor of 1 skips the refinement.
    n_inner : int
        Hold-out splits of the training data per grid value (paper: 100).
    inner_test_size : float
        Fraction held out in each inner split (default 1/4, as the outer protocol).
    scoring : {"ber", "error"}
        Hold-out score minimised: balanced error rate (the paper's performance measure, Sec. 4)
        or the misclassification rate (the paper's wording in Sec. 4.1).
    solver : {"liblinear", "libsvm"}
        ``LinearSVC(loss="hinge", dual=True)`` (default; see the module docstring) or
        ``SVC(kernel="linear")`` (LIBSVM, the paper's software; slow at large C).
    intercept_scaling : float
        liblinear only: value of the constant feature that carries the intercept (its penalty is
        1 / intercept_scaling^2 of a coefficient's).
    max_iter : int
        liblinear iterations per fit (convergence warnings are silenced); LIBSVM is unbounded.
    random_state : int or None
        Seed of the inner splits and of liblinear.

    Returns
    -------
    DefaultSVMResult

    Raises
    ------
    ValueError
        On an empty or non-positive grid, a bad option, ``n_inner`` < 1, an ``inner_test_size``
        outside (0, 1), NaN in ``X``, a shape mismatch, or a class with fewer than 2 samples.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV

    C_grid = np.asarray(C_grid, dtype=float).ravel()
    refine = np.asarray(refine_factors, dtype=float).ravel()
    if C_grid.size == 0 or not np.all(np.isfinite(C_grid)) or np.any(C_grid <= 0):
        raise ValueError(f"C_grid must be a non-empty sequence of finite C > 0, got {C_grid.tolist()}")
    if refine.size == 0 or not np.all(np.isfinite(refine)) or np.any(refine <= 0):
        raise ValueError(f"refine_factors must be a non-empty sequence of finite factors > 0, got {refine.tolist()}")
    if scoring not in ("ber", "error"):
        raise ValueError(f"scoring must be 'ber' or 'error', got {scoring!r}")
    if solver not in ("liblinear", "libsvm"):
        raise ValueError(f"solver must be 'liblinear' or 'libsvm', got {solver!r}")
    if not intercept_scaling > 0:
        raise ValueError(f"intercept_scaling must be > 0, got {intercept_scaling!r}")
    max_iter = _check_int("max_iter", max_iter, 1)
    n_inner = _check_int("n_inner", n_inner, 1)
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"X must be 2-D with one row per label; got X {X.shape} and y {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values; the default SVM needs complete cases")
    classes, counts = np.unique(y, return_counts=True)
    if classes.size != 2 or counts.min() < 2:
        raise ValueError(f"y must have two classes with at least 2 samples each, got counts "
                         f"{dict(zip(classes.tolist(), counts.tolist()))}")
    cv = repeated_holdout(n_inner, inner_test_size, random_state)
    score = "balanced_accuracy" if scoring == "ber" else "accuracy"
    base = _svm_estimator(solver, intercept_scaling, max_iter, random_state)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        stage1 = GridSearchCV(base, {"C": np.sort(C_grid).tolist()}, scoring=score, cv=cv, refit=False,
                              n_jobs=1).fit(X, y)
        c1 = stage1.cv_results_["param_C"].data.astype(float)
        s1 = 1.0 - stage1.cv_results_["mean_test_score"]
        best1 = float(c1[_first_min(s1)])
        grid2 = np.unique(best1 * refine)
        stage2 = GridSearchCV(base, {"C": grid2.tolist()}, scoring=score, cv=cv, refit=True, n_jobs=1).fit(X, y)
    c2 = stage2.cv_results_["param_C"].data.astype(float)
    s2 = 1.0 - stage2.cv_results_["mean_test_score"]
    best = float(c2[_first_min(s2)])
    return DefaultSVMResult(stage2.best_estimator_, best, tuple(c1.tolist()), tuple(c2.tolist()),
                            tuple(s1.tolist()), tuple(s2.tolist()), time.perf_counter() - t0)


def _first_min(scores: np.ndarray) -> int:
    """Index of the smallest score, the first (smallest C) among ties up to rounding."""
    scores = np.asarray(scores, dtype=float)
    return int(np.flatnonzero(scores <= scores.min() + 1e-12)[0])


# --------------------------------------------------------------------------- Bayesian fits
def _bayes(inference: str, *, num_warmup: int, num_samples: int, vb_max_iter: int, precision: str, seed: int,
           num_chains: int = 1, **model: Any) -> Any:
    """An unfitted :class:`LinearBSVM` of the paper's settings: VB, or Gibbs (one chain by default)."""
    from bayes_maxmargin.estimators.linear import LinearBSVM

    return LinearBSVM(inference="vb" if inference == "vb" else "gibbs", **BAYES_PRIOR, **model,
                      num_chains=num_chains, num_warmup=num_warmup, num_samples=num_samples, max_iter=vb_max_iter,
                      precision=precision, progress_bar=False, random_state=seed)


def _timed_fit(clf: Any, X: np.ndarray, y: np.ndarray, **fit_kw: Any) -> tuple[Any, float, bool]:
    """Fit and time ``clf``; also whether VB stopped before ``max_iter`` (True for MCMC)."""
    from sklearn.exceptions import ConvergenceWarning

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y, **fit_kw)
    elapsed = time.perf_counter() - t0
    converged = clf.inference != "vb" or clf.n_iter_ < clf.max_iter
    return clf, elapsed, converged


def _ber(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from bayes_maxmargin.metrics import balanced_error_rate

    return balanced_error_rate(y_true, y_pred)


def _mean_time(times: list[float]) -> float | None:
    """Mean fit time, leaving out the first fit (it includes JIT compilation) when there are more."""
    if not times:
        return None
    return float(np.mean(times[1:] if len(times) > 1 else times))


def _summary(method: str, bers: list[float], times: list[float]) -> dict[str, Any]:
    return {
        f"{method}_ber": float(np.mean(bers)) if bers else None,
        f"{method}_ber_sd": float(np.std(bers, ddof=1)) if len(bers) > 1 else (0.0 if bers else None),
        f"{method}_bers": list(bers) if bers else None,
        f"{method}_fit_times_s": list(times) if times else None,
        f"{method}_time_s": _mean_time(times),
        f"{method}_first_fit_s": float(times[0]) if times else None,
    }


def _evaluate_split(
    methods: tuple[str, ...],
    Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, yte: np.ndarray,
    *,
    bayes_model: dict[str, Any],
    bayes_fit: dict[str, Any],
    bayes_predict: dict[str, Any],
    svm_rows: np.ndarray | None,
    svm_kw: dict[str, Any],
    gibbs: dict[str, int],
    vb_max_iter: int,
    precision: str,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """BER and fit time of every method on one split. ``svm_rows`` selects the SVM's training rows
    (complete cases); ``bayes_fit`` / ``bayes_predict`` are extra keyword arguments (groups)."""
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m == "svm":
            keep = slice(None) if svm_rows is None else svm_rows
            res = default_svm(Xtr[keep], ytr[keep], random_state=seed, **svm_kw)
            out[m] = {"ber": _ber(yte, res.estimator.predict(Xte)), "time": res.fit_time_s, "C": res.C}
        else:
            clf = _bayes(m, vb_max_iter=vb_max_iter, precision=precision, seed=seed, **gibbs, **bayes_model)
            clf, elapsed, converged = _timed_fit(clf, Xtr, ytr, **bayes_fit)
            out[m] = {"ber": _ber(yte, clf.predict(Xte, **bayes_predict)), "time": elapsed,
                      "converged": converged, "n_iter": int(clf.n_iter_)}
    return out


def _collect(results: list[dict[str, dict[str, Any]]], methods: tuple[str, ...]) -> dict[str, Any]:
    """Per-method summaries of a list of :func:`_evaluate_split` outputs (None for methods not run)."""
    row: dict[str, Any] = {}
    for m in METHODS:
        got = [r[m] for r in results if m in r]
        row.update(_summary(m, [g["ber"] for g in got], [g["time"] for g in got]))
    row["svm_C"] = [r["svm"]["C"] for r in results] if "svm" in methods else None
    row["vb_converged"] = [r["vb"]["converged"] for r in results] if "vb" in methods else None
    row["vb_n_iter"] = [r["vb"]["n_iter"] for r in results] if "vb" in methods else None
    return row


def _settings(quick: bool, n_inner: int | None, num_warmup: int | None, num_samples: int | None,
              default_warmup: int = 5000, default_samples: int = 5000) -> tuple[int, dict[str, int]]:
    n_inner = _check_int("n_inner", n_inner if n_inner is not None else (QUICK_N_INNER if quick else 100), 1)
    warm = num_warmup if num_warmup is not None else (QUICK_GIBBS["num_warmup"] if quick else default_warmup)
    keep = num_samples if num_samples is not None else (QUICK_GIBBS["num_samples"] if quick else default_samples)
    return n_inner, {"num_warmup": _check_int("num_warmup", warm, 0), "num_samples": _check_int("num_samples", keep, 1)}


def _split_settings(
    methods: Sequence[str], n_splits: int | None, quick: bool, n_inner: int | None, num_warmup: int | None,
    num_samples: int | None,
) -> tuple[tuple[str, ...], int, int, dict[str, int]]:
    """Checked settings of a repeated hold-out experiment (:func:`toenail`, :func:`acath`).

    Parameters
    ----------
    methods : sequence of str
        Methods to run.
    n_splits : int or None
        Repeated hold-out splits (None: 100, or :data:`QUICK_SPLITS` with ``quick``).
    quick : bool
        Smoke-test defaults.
    n_inner, num_warmup, num_samples : int or None
        As :func:`_settings`.

    Returns
    -------
    methods : tuple of str
    n_splits : int
    n_inner : int
    gibbs : dict
        ``num_warmup`` and ``num_samples``.
    """
    methods = _check_methods(methods)
    n_splits = _check_int("n_splits", n_splits if n_splits is not None else (QUICK_SPLITS if quick else 100), 1)
    n_inner, gibbs = _settings(quick, n_inner, num_warmup, num_samples)
    return methods, n_splits, n_inner, gibbs


def _split_summary(res: dict[str, dict[str, Any]], methods: tuple[str, ...], time_digits: int = 1) -> str:
    """One progress line's worth of :func:`_evaluate_split` output: BER (%) and fit time per method.

    Parameters
    ----------
    res : dict
        Output of :func:`_evaluate_split`.
    methods : tuple of str
        Methods run.
    time_digits : int, default 1
        Decimals of the fit times.

    Returns
    -------
    str
    """
    return ", ".join(f"{m} BER {100 * res[m]['ber']:.1f}% ({res[m]['time']:.{time_digits}f} s)" for m in methods)


def _realdata_result(row: dict[str, Any], results: list[dict[str, dict[str, Any]]], methods: tuple[str, ...],
                     paper: dict[str, Any], paper_keys: tuple[str, ...], *, n_inner: int, gibbs: dict[str, int],
                     seed: int, quick: bool) -> tuple[list[dict[str, Any]], str]:
    """The rows and table of :func:`toenail` or :func:`acath`.

    Parameters
    ----------
    row : dict
        The experiment's own entries (``key`` first); updated in place.
    results : list of dict
        :func:`_evaluate_split` outputs, one per split.
    methods : tuple of str
        Methods run.
    paper : dict
        The paper's numbers (``PAPER_TOENAIL``, ``PAPER_ACATH``).
    paper_keys : tuple of str
        Entries of ``paper`` copied to ``paper_<key>`` after the fit times.
    n_inner, gibbs, seed, quick
        As :func:`realdata_markdown`.

    Returns
    -------
    rows : list of dict
        ``[row]``, with :func:`_collect`'s summaries and the paper's numbers.
    table : str
        :func:`realdata_markdown` of the rows.
    """
    row.update(_collect(results, methods))
    for m in METHODS:
        row[f"paper_{m}_time_s"] = paper[f"{m}_time_s"]
    row.update({f"paper_{k}": paper[k] for k in paper_keys})
    rows = [row]
    return rows, realdata_markdown(rows, row["key"], n_inner=n_inner, gibbs=gibbs, seed=seed, quick=quick)


def _svm_settings(svm: dict[str, Any] | None, n_inner: int, quick: bool) -> dict[str, Any]:
    """Keyword arguments of :func:`default_svm`: the quick grids if ``quick``, then ``svm``."""
    return {**(QUICK_SVM if quick else {}), **dict(svm or {}), "n_inner": n_inner}


def _fmt_ber(row: dict[str, Any], m: str) -> str:
    v = row.get(f"{m}_ber")
    if v is None:
        return "n/a"
    sd = row.get(f"{m}_ber_sd") or 0.0
    return f"{100 * v:.2f} ± {100 * sd:.2f}"


def _fmt_s(v: float | None, digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


# --------------------------------------------------------------------------- Sec. 4.2 simulation
def simulate_logistic(n: int, d: int, n_test: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """One training and one test set of the design of Sec. 4.2.

    beta ~ N(0, 1), u ~ N(0, I_d), d_i ~ N(0, I_d), q_i ~ Bernoulli(expit(beta + d_i' u)),
    y_i = 2 q_i - 1; the test set shares beta and u.

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
    """
    from scipy.special import expit

    beta = rng.normal()
    u = rng.normal(size=d)

    def draw(m: int) -> tuple[np.ndarray, np.ndarray]:
        X = rng.normal(size=(m, d))
        q = rng.uniform(size=m) < expit(beta + X @ u)
        return X, np.where(q, 1, -1)

    Xtr, ytr = draw(n)
    Xte, yte = draw(n_test)
    return Xtr, ytr, Xte, yte


def _simulated_sets(n: int, d: int, n_test: int, seed: int, rep: int, min_class: int) -> tuple[np.ndarray, ...]:
    """:func:`simulate_logistic` with the seed (seed, n, d, rep); redrawn (attempt counter in the
    seed) while a class has fewer than ``min_class`` training or 1 test sample."""
    for attempt in range(100):
        rng = np.random.default_rng([seed, n, d, rep, attempt])
        Xtr, ytr, Xte, yte = simulate_logistic(n, d, n_test, rng)
        if min(np.sum(ytr == 1), np.sum(ytr == -1)) >= min_class and len(np.unique(yte)) == 2:
            return Xtr, ytr, Xte, yte
    raise RuntimeError(f"no simulated training set with both classes at n={n}, d={d}")  # pragma: no cover


def simulation(
    ns: Sequence[int] | None = None,
    ds: Sequence[int] | None = None,
    *,
    repetitions: int | None = None,
    n_test: int | None = None,
    methods: Sequence[str] = METHODS,
    n_inner: int | None = None,
    num_warmup: int | None = None,
    num_samples: int | None = None,
    vb_max_iter: int = 1000,
    svm: dict[str, Any] | None = None,
    precision: str = "float64",
    blas_threads: int | None = 1,
    seed: int = 0,
    quick: bool = False,
    verbose: bool = True,
    on_repetition: Callable[[int, int, int, dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Sec. 4.2 (Figure 1): BER of the default SVM, VB and MCMC with penalty parameter inference.

    For every (n, d), ``repetitions`` training sets of :func:`simulate_logistic` (paper: 200), each
    with an independent test set of ``n_test`` (paper: 1000) from the same beta and u. The Bayesian
    model is Example 1 of Sec. 3.1 (``LinearBSVM(prior="penalty")``: the intercept unpenalised,
    the coefficients u ~ N(0, sigma_u^2 I), sigma_u^2 ~ IG(0.01, 0.01)), fitted by VB (Algorithm 2)
    and Gibbs (Appendix A). The predictors are N(0, 1) by design and are used as drawn.

    Parameters
    ----------
    ns, ds : sequence of int, optional
        Training sizes and dimensions (default :data:`SIM_NS`, :data:`SIM_DS`; (60,) and (5,)
        with ``quick``).
    repetitions : int, optional
        Training sets per (n, d) (200; 2 with ``quick``).
    n_test : int, optional
        Test set size (1000; 200 with ``quick``).
    methods : sequence of {"svm", "vb", "mcmc"}
        Methods to run; the others' columns read n/a.
    n_inner : int, optional
        Hold-out splits per grid value of the default SVM (100; 3 with ``quick``).
    num_warmup, num_samples : int, optional
        Gibbs burn-in and kept draws (5000 each; 100 each with ``quick``).
    vb_max_iter : int
        Cap on the VB sweeps (the 1e-10 stopping rule usually ends them first).
    svm : dict, optional
        Further keyword arguments of :func:`default_svm` (``C_grid``, ``solver``, ...).
    precision : {"float64", "float32"}
        Precision of the Bayesian fits.
    blas_threads : int or None
        OpenBLAS threads during the fits (None: unchanged).
    seed : int
        Base seed: the data of repetition r at (n, d) use ``default_rng([seed, n, d, r, 0])``.
    quick : bool
        Smoke-test settings (seconds): one (n, d) = (60, 5), 2 repetitions, test sets of 200,
        3 inner splits and 3 + 3 C values (:data:`QUICK_SVM`), 100 + 100 Gibbs iterations.
    verbose : bool
        Print one line per repetition.
    on_repetition : callable, optional
        Called as ``on_repetition(n, d, r, result)`` after every repetition (checkpointing).

    Returns
    -------
    rows : list of dict
        One per (n, d): ``key`` ("n200_d10"), ``n``, ``d``, ``repetitions``, ``n_test``; per method m
        in svm, vb, mcmc: ``m_ber`` (mean), ``m_ber_sd``, ``m_bers`` (all), ``m_fit_times_s`` (all),
        ``m_time_s`` (mean fit
        time after the first fit, which includes JIT compilation), ``m_first_fit_s`` (None when not
        run); ``svm_C``, ``vb_converged``, ``vb_n_iter`` per repetition; ``paper_m_time_s`` where the
        paper reports it (n = 200, d = 10), else None.
    table : str
        Markdown table (BER in %, mean ± sd) with the paper's times, and notes.
    """
    methods = _check_methods(methods)
    ns = tuple(ns) if ns is not None else ((60,) if quick else SIM_NS)
    ds = tuple(ds) if ds is not None else ((5,) if quick else SIM_DS)
    for n in ns:
        _check_int("n", n, 8)
    for d in ds:
        _check_int("d", d, 1)
    repetitions = _check_int("repetitions", repetitions if repetitions is not None else (2 if quick else 200), 1)
    n_test = _check_int("n_test", n_test if n_test is not None else (200 if quick else 1000), 2)
    n_inner, gibbs = _settings(quick, n_inner, num_warmup, num_samples)
    svm_kw = _svm_settings(svm, n_inner, quick)
    rows = []
    for n in ns:
        for d in ds:
            results = []
            with limit_blas_threads(blas_threads):
                for r in range(repetitions):
                    Xtr, ytr, Xte, yte = _simulated_sets(n, d, n_test, seed, r, min_class=4)
                    res = _evaluate_split(
                        methods, Xtr, ytr, Xte, yte, bayes_model={"prior": "penalty"}, bayes_fit={},
                        bayes_predict={}, svm_rows=None, svm_kw=svm_kw, gibbs=gibbs, vb_max_iter=vb_max_iter,
                        precision=precision, seed=seed + r,
                    )
                    results.append(res)
                    if on_repetition is not None:
                        on_repetition(n, d, r, res)
                    _log(verbose, f"[simulation] n={n} d={d} rep {r + 1}/{repetitions}: "
                         + _split_summary(res, methods, time_digits=2))
            paper = PAPER_SIMULATION.get((n, d), {})
            row = {"key": f"n{n}_d{d}", "n": n, "d": d, "repetitions": repetitions, "n_test": n_test}
            row.update(_collect(results, methods))
            for m in METHODS:
                row[f"paper_{m}_time_s"] = paper.get(f"{m}_time_s")
            rows.append(row)
    table = simulation_markdown(rows, n_inner=n_inner, gibbs=gibbs, seed=seed, quick=quick)
    return rows, table


def simulation_markdown(rows: list[dict[str, Any]], *, n_inner: int = 100, gibbs: dict[str, int] | None = None,
                        seed: int = 0, quick: bool = False) -> str:
    """Markdown of :func:`simulation`'s rows: BER (%) mean ± sd and mean fit times beside the paper's."""
    header = ["n", "d", "reps", "SVM BER", "VB BER", "MCMC BER", "SVM s", "VB s", "MCMC s",
              "SVM s (paper)", "VB s (paper)", "MCMC s (paper)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [str(r["n"]), str(r["d"]), str(r["repetitions"])]
        cells += [_fmt_ber(r, m) for m in METHODS]
        cells += [_fmt_s(r[f"{m}_time_s"]) for m in METHODS]
        cells += [_fmt_s(r[f"paper_{m}_time_s"]) for m in METHODS]
        lines.append("| " + " | ".join(cells) + " |")
    gibbs = gibbs or {"num_warmup": 5000, "num_samples": 5000}
    notes = [
        "",
        "Luts & Ormerod (2014) Sec. 4.2 / Figure 1: balanced error rate (%) on independent test sets of "
        f"{rows[0]['n_test'] if rows else 1000}, mean ± sd over the repetitions (seed {seed}). The paper shows "
        "BERs only as box plots; its text reports times at n = 200, d = 10 only.",
        "VB / MCMC: LinearBSVM(prior='penalty', intercept_scale=None, A_u=B_u=0.01) (Sec. 3.1, Example 1), "
        f"VB to a lower-bound increase < 1e-10, one Gibbs chain of {gibbs['num_warmup']} + "
        f"{gibbs['num_samples']} draws.",
        f"SVM: LinearSVC(loss='hinge'), C by the two-stage grid of Sec. 4.1 with {n_inner} inner hold-out splits.",
        "Times: mean seconds per fit after the first (which includes JIT compilation).",
    ]
    if quick:
        notes.append("QUICK MODE: smoke-test settings, not a reproduction.")
    return "\n".join(lines + notes)


# --------------------------------------------------------------------------- Sec. 4.3 toenail
def toenail_design(ds: Any, time_column: str = "time") -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Fixed effects of Sec. 4.3 (before standardisation): visit time, treatment, their product.

    Parameters
    ----------
    ds : Dataset
        The ``toenail`` dataset (columns time, treat_terbinafine, visit; ``groups`` the patient).
    time_column : {"time", "visit"}
        The visit time: months since baseline (default) or the visit number 1-7.

    Returns
    -------
    X, y, groups, names
    """
    names = list(ds.feature_names)
    if time_column not in ("time", "visit"):
        raise ValueError(f"time_column must be 'time' or 'visit', got {time_column!r}")
    t = np.asarray(ds.X[:, names.index(time_column)], dtype=float)
    treat = np.asarray(ds.X[:, names.index("treat_terbinafine")], dtype=float)
    X = np.column_stack([t, treat, t * treat])
    return X, np.asarray(ds.y), np.asarray(ds.groups), [time_column, "treat", f"{time_column}_x_treat"]


def _subset_groups(groups: np.ndarray, n_groups: int | None, seed: int) -> np.ndarray:
    """Row mask of a seeded choice of ``n_groups`` groups (all rows when None)."""
    if n_groups is None:
        return np.ones(groups.shape[0], dtype=bool)
    labels = np.unique(groups)
    if n_groups >= labels.size:
        return np.ones(groups.shape[0], dtype=bool)
    keep = np.random.default_rng(seed).choice(labels, n_groups, replace=False)
    return np.isin(groups, keep)


def toenail(
    *,
    n_splits: int | None = None,
    methods: Sequence[str] = METHODS,
    n_inner: int | None = None,
    num_warmup: int | None = None,
    num_samples: int | None = None,
    vb_max_iter: int = 1000,
    time_column: str = "time",
    max_patients: int | None = None,
    svm: dict[str, Any] | None = None,
    precision: str = "float64",
    blas_threads: int | None = 1,
    data_dir: str | None = None,
    seed: int = 0,
    quick: bool = False,
    verbose: bool = True,
) -> tuple[list[dict[str, Any]], str]:
    """Sec. 4.3 (Figure 2): random intercept per patient (VB, MCMC) against the default SVM.

    X = [1, visit time, treatment, visit time x treatment] (standardised on the training part),
    Z = patient indicators: Example 2 of Sec. 3.1, ``LinearBSVM(sigma=1e4, intercept_scale=None)``
    (sigma_beta^2 = 1e8) with ``fit(X, y, groups=patient)``, VB (Algorithm 2) and Gibbs
    (Appendix A). Test observations are predicted with their patient's random intercept (test
    patients are seen in training unless all their visits fall in the test part: then the
    population level). The SVM sees the three fixed effects only; on them the (unweighted) linear
    SVM predicts the majority class "none or mild" for every C tried, LIBSVM alike (BER 0.5).
    Splits: :func:`repeated_holdout` of the 1908 observations.

    Parameters
    ----------
    n_splits : int, optional
        Repeated hold-out splits (100; 2 with ``quick``).
    methods, n_inner, num_warmup, num_samples, vb_max_iter, svm, precision, blas_threads
        As :func:`simulation`.
    time_column : {"time", "visit"}
        The visit time (:func:`toenail_design`).
    max_patients : int, optional
        Seeded subset of patients (None: all 294; 30 with ``quick``).
    data_dir : str, optional
        Dataset folder (default ``BMM_DATA_DIR``).
    seed : int
        Seed of the splits, the patient subset, the inner splits and the samplers.
    quick : bool
        Smoke-test settings: 30 patients, 2 splits, 3 inner splits and 3 + 3 C values, 100 + 100
        Gibbs iterations.
    verbose : bool
        Print one line per split.

    Returns
    -------
    rows : list of dict
        One row (``key`` "toenail"): ``n``, ``n_patients``, ``n_splits``, per method ``m_ber``,
        ``m_ber_sd``, ``m_bers``, ``m_time_s`` (mean fit time after the first), ``m_first_fit_s``;
        ``svm_C``, ``vb_converged``, ``vb_n_iter``; ``paper_m_time_s``, ``paper_n``,
        ``paper_n_patients``, ``paper_finding``.
    table : str
        Markdown table and notes.
    """
    from bayes_maxmargin.data import load_dataset

    methods, n_splits, n_inner, gibbs = _split_settings(methods, n_splits, quick, n_inner, num_warmup, num_samples)
    if max_patients is None and quick:
        max_patients = 30
    if max_patients is not None:
        max_patients = _check_int("max_patients", max_patients, 2)
    ds = load_dataset("toenail", data_dir=data_dir)
    X, y, groups, names = toenail_design(ds, time_column)
    keep = _subset_groups(groups, max_patients, seed)
    X, y, groups = X[keep], y[keep], groups[keep]
    svm_kw = _svm_settings(svm, n_inner, quick)
    results = []
    with limit_blas_threads(blas_threads):
        for k, (tr, te) in enumerate(repeated_holdout(n_splits, 0.25, seed).split(X, y)):
            Xtr, Xte = standardize(X[tr], X[te])
            res = _evaluate_split(
                methods, Xtr, y[tr], Xte, y[te], bayes_model={"sigma": 1e4}, bayes_fit={"groups": groups[tr]},
                bayes_predict={"groups": groups[te]}, svm_rows=None, svm_kw=svm_kw, gibbs=gibbs,
                vb_max_iter=vb_max_iter, precision=precision, seed=seed + k,
            )
            results.append(res)
            _log(verbose, f"[toenail] split {k + 1}/{n_splits}: " + _split_summary(res, methods))
    row: dict[str, Any] = {"key": "toenail", "n": int(y.size), "n_patients": int(np.unique(groups).size),
                           "n_splits": n_splits, "fixed_effects": names}
    return _realdata_result(row, results, methods, PAPER_TOENAIL, ("n", "n_patients", "finding"),
                            n_inner=n_inner, gibbs=gibbs, seed=seed, quick=quick)


# --------------------------------------------------------------------------- Sec. 4.5 acath
def acath_design(ds: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Predictors of Sec. 4.5 before standardisation: age, sex, log(1 + cad_dur), log(choleste).

    cad_dur (months of symptoms) has zeros, hence log(1 + x); choleste (NaN where missing) is
    positive. Returns ``X, y, names``.
    """
    names = list(ds.feature_names)
    X = np.asarray(ds.X, dtype=float).copy()
    X[:, names.index("cad_dur")] = np.log1p(X[:, names.index("cad_dur")])
    X[:, names.index("choleste")] = np.log(X[:, names.index("choleste")])
    out = ["age", "sex", "log1p_cad_dur", "log_choleste"]
    return X[:, [names.index(c) for c in ("age", "sex", "cad_dur", "choleste")]], np.asarray(ds.y), out


def acath(
    *,
    n_splits: int | None = None,
    methods: Sequence[str] = METHODS,
    n_inner: int | None = None,
    num_warmup: int | None = None,
    num_samples: int | None = None,
    vb_max_iter: int = 1000,
    max_rows: int | None = None,
    svm: dict[str, Any] | None = None,
    precision: str = "float64",
    blas_threads: int | None = 1,
    data_dir: str | None = None,
    seed: int = 0,
    quick: bool = False,
    verbose: bool = True,
) -> tuple[list[dict[str, Any]], str]:
    """Sec. 4.5 (Figure 4): missing-data VB and MCMC against the complete-case default SVM.

    Predictors :func:`acath_design`, standardised with the training part's (observed) means and
    standard deviations. Each split holds out round(n / 4) test cases drawn (stratified) from the
    complete cases only, "in such a way that all test cases have observed values for cholesterol
    level"; the rest, with the incomplete cases, is the training part. VB (Algorithm 4) and Gibbs
    (Appendix C) fit ``LinearBSVM(prior="penalty", missing="model")`` on all training cases; the
    SVM on the complete training cases.

    Parameters
    ----------
    n_splits : int, optional
        Repeated hold-out splits (100; 2 with ``quick``).
    methods, n_inner, num_warmup, num_samples, vb_max_iter, svm, precision, blas_threads, data_dir
        As :func:`toenail`.
    max_rows : int, optional
        Seeded stratified subset of the rows (None: all 3504; 300 with ``quick``).
    seed : int
        Seed of the splits, the subset, the inner splits and the samplers.
    quick : bool
        Smoke-test settings: 300 rows, 2 splits, 3 inner splits and 3 + 3 C values, 100 + 100
        Gibbs iterations.
    verbose : bool
        Print one line per split.

    Returns
    -------
    rows : list of dict
        One row (``key`` "acath"): ``n``, ``n_missing``, ``n_train``, ``n_test``,
        ``n_train_complete``, ``n_splits``, the per-method columns of :func:`toenail`, and the
        paper's times and finding.
    table : str
        Markdown table and notes.
    """
    from bayes_maxmargin.data import load_dataset

    methods, n_splits, n_inner, gibbs = _split_settings(methods, n_splits, quick, n_inner, num_warmup, num_samples)
    if max_rows is None and quick:
        max_rows = 300
    ds = load_dataset("acath", data_dir=data_dir)
    X, y, names = acath_design(ds)
    if max_rows is not None:
        max_rows = _check_int("max_rows", max_rows, 20)
        if max_rows < y.size:
            from sklearn.model_selection import train_test_split

            idx, _ = train_test_split(np.arange(y.size), train_size=max_rows, stratify=y, random_state=seed)
            idx = np.sort(idx)
            X, y = X[idx], y[idx]
    complete = np.flatnonzero(~np.isnan(X).any(axis=1))
    n_test = int(round(0.25 * y.size))
    if n_test >= complete.size:
        raise ValueError(f"{n_test} test cases requested but only {complete.size} complete cases")
    svm_kw = _svm_settings(svm, n_inner, quick)
    results, sizes = [], {}
    with limit_blas_threads(blas_threads):
        for k, (_, te_c) in enumerate(repeated_holdout(n_splits, n_test, seed).split(X[complete], y[complete])):
            te = complete[te_c]
            tr = np.setdiff1d(np.arange(y.size), te)
            Xtr, Xte = standardize(X[tr], X[te])
            full = ~np.isnan(Xtr).any(axis=1)
            sizes = {"n_train": int(tr.size), "n_test": int(te.size), "n_train_complete": int(full.sum())}
            res = _evaluate_split(
                methods, Xtr, y[tr], Xte, y[te], bayes_model={"prior": "penalty", "missing": "model"},
                bayes_fit={}, bayes_predict={}, svm_rows=full, svm_kw=svm_kw, gibbs=gibbs,
                vb_max_iter=vb_max_iter, precision=precision, seed=seed + k,
            )
            results.append(res)
            _log(verbose, f"[acath] split {k + 1}/{n_splits}: " + _split_summary(res, methods))
    row: dict[str, Any] = {"key": "acath", "n": int(y.size), "n_missing": int(np.isnan(X).any(axis=1).sum()),
                           "n_splits": n_splits, "predictors": names, **sizes}
    return _realdata_result(row, results, methods, PAPER_ACATH, ("n", "n_missing", "finding"),
                            n_inner=n_inner, gibbs=gibbs, seed=seed, quick=quick)


def realdata_markdown(rows: list[dict[str, Any]], which: str, *, n_inner: int = 100,
                      gibbs: dict[str, int] | None = None, seed: int = 0, quick: bool = False) -> str:
    """Markdown of :func:`toenail`'s or :func:`acath`'s row: BER (%) and fit times beside the paper's."""
    header = ["Data", "n", "splits", "SVM BER", "VB BER", "MCMC BER", "SVM s", "VB s", "MCMC s",
              "SVM s (paper)", "VB s (paper)", "MCMC s (paper)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [r["key"], str(r["n"]), str(r["n_splits"])]
        cells += [_fmt_ber(r, m) for m in METHODS]
        cells += [_fmt_s(r[f"{m}_time_s"]) for m in METHODS]
        cells += [_fmt_s(r[f"paper_{m}_time_s"]) for m in METHODS]
        lines.append("| " + " | ".join(cells) + " |")
    gibbs = gibbs or {"num_warmup": 5000, "num_samples": 5000}
    if which == "toenail":
        what = ("Sec. 4.3 / Figure 2: random intercept per patient (LinearBSVM(sigma=1e4, intercept_scale=None), "
                "groups=patient); fixed effects visit time, treatment, product, standardised on the training part.")
    else:
        what = ("Sec. 4.5 / Figure 4: LinearBSVM(prior='penalty', missing='model', intercept_scale=None) on all "
                "training cases; the SVM on the complete training cases; test cases are complete cases; "
                "age, sex, log(1 + cad_dur), log(choleste), standardised on the training part.")
    notes = [
        "",
        f"Luts & Ormerod (2014) {what}",
        f"Balanced error rate (%), mean ± sd over random 3/4-1/4 splits (seed {seed}); the paper reports BERs only "
        f"as box plots ({rows[0]['paper_finding'] if rows else ''}).",
        f"VB to a lower-bound increase < 1e-10; one Gibbs chain of {gibbs['num_warmup']} + {gibbs['num_samples']} "
        f"draws; SVM: LinearSVC(loss='hinge'), C by the two-stage grid of Sec. 4.1 with {n_inner} inner splits.",
        "Times: mean seconds per fit after the first (which includes JIT compilation); paper: an Intel Core "
        "i7-2760QM, R.",
    ]
    if quick:
        notes.append("QUICK MODE: smoke-test settings, not a reproduction.")
    return "\n".join(lines + notes)


# --------------------------------------------------------------------------- Sec. 4.4 spam
def _short_name(name: str) -> str:
    for prefix in ("word_freq_", "char_freq_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def spam(
    *,
    methods: Sequence[str] = ("vb", "mcmc"),
    rho: float = 0.01,
    num_warmup: int | None = None,
    num_samples: int | None = None,
    vb_max_iter: int = 1000,
    vb_repeats: int | None = None,
    vb_starts: int = 0,
    mcmc_chains: int = 1,
    mcmc_threshold: float = 0.9,
    vb_threshold: float = 0.5,
    max_rows: int | None = None,
    max_features: int | None = None,
    precision: str = "float64",
    blas_threads: int | None = 1,
    data_dir: str | None = None,
    seed: int = 0,
    quick: bool = False,
    verbose: bool = True,
) -> tuple[list[dict[str, Any]], str]:
    """Sec. 4.4 (Figure 3): Laplace-zero inclusion probabilities on spambase, VB against MCMC.

    All 4601 e-mails, the 57 predictors standardised (no split: the paper reports inclusion
    probabilities, not test errors). ``LinearBSVM(prior="laplace_zero", rho=0.01)`` (Sec. 3.2) by
    VB (Algorithm 3) and one Gibbs chain (Appendix B) of 50 000 burn-in and 50 000 kept draws.
    Reported: the variables with MCMC inclusion probability above ``mcmc_threshold`` ("almost
    certainly selected", paper: 24) and how many of them VB includes (probability above
    ``vb_threshold``; paper: all but cs, 23), and the fit times.

    Parameters
    ----------
    methods : sequence of {"vb", "mcmc"}
        Fits to run (the agreement needs both).
    rho : float
        Prior inclusion probability (paper: 0.01).
    num_warmup, num_samples : int, optional
        Gibbs burn-in and kept draws (50 000 each; 100 each with ``quick``).
    vb_max_iter : int
        Cap on the VB sweeps. On spambase the bound still rises by about 1e-3 per sweep after
        1000 sweeps (the 1e-10 rule of Sec. 4 is not reached) while the inclusion probabilities
        above / below 0.5 no longer change; ``vb_converged`` in the row says whether it stopped.
    vb_repeats : int, optional
        VB fits (identical); ``vb_time_s`` is the last, after JIT compilation when > 1 (2; 1 with
        ``quick``).
    vb_starts : int
        Further Algorithm 3 runs from random initial inclusion probabilities (uniform on (0, 1),
        seeded), beside the fit from the full model: mean-field spike-and-slab has several fixed
        points, and the one of the highest lower bound is the VB answer. Each start's bound and
        selected set are reported (``vb_starts`` in the row).
    mcmc_chains : int
        Gibbs chains, run in one vectorised program; the inclusion probabilities pool them, and
        ``mcmc_chain_inclusion`` holds each chain's (to judge mixing).
    mcmc_threshold, vb_threshold : float
        Inclusion thresholds in (0, 1) for "selected" by MCMC and by VB.
    max_rows, max_features : int, optional
        Seeded stratified row subset and the first columns only (None: all; 300 rows and 8
        columns with ``quick``).
    precision, blas_threads, data_dir
        As :func:`toenail`.
    seed : int
        Seed of the sampler and of the row subset.
    quick : bool
        Smoke-test settings: 300 rows, 8 predictors, 100 + 100 Gibbs iterations, one VB fit.
    verbose : bool
        Print the fit times.

    Returns
    -------
    rows : list of dict
        One row (``key`` "spambase"): ``n``, ``d``, ``rho``, ``variables`` (short names),
        ``vb_inclusion``, ``mcmc_inclusion`` (lists, None when not run), ``mcmc_selected`` (names
        above ``mcmc_threshold``), ``vb_selected`` (above ``vb_threshold``), ``n_mcmc_selected``,
        ``n_vb_selected``, ``n_vb_agree`` (MCMC-selected also VB-selected), ``mcmc_only``,
        ``vb_only``, ``vb_time_s``, ``vb_first_fit_s``, ``vb_n_iter``, ``vb_converged``,
        ``vb_lower_bound``, ``vb_starts`` (list of dicts ``lower_bound``, ``n_iter``, ``inclusion``;
        None without starts), ``mcmc_time_s`` (all chains), ``mcmc_iterations`` (per chain),
        ``mcmc_chains``, ``mcmc_chain_inclusion`` (one list per chain), and ``paper_*`` (counts, names, times in s; the
        MCMC time is the paper's lower bound of 10 hours).
    table : str
        Markdown summary and per-variable table.
    """
    from bayes_maxmargin.data import load_dataset

    methods = _check_methods(methods, ("vb", "mcmc"))
    for name, v in (("rho", rho), ("mcmc_threshold", mcmc_threshold), ("vb_threshold", vb_threshold)):
        if not 0.0 < float(v) < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {v!r}")
    _, gibbs = _settings(quick, 1, num_warmup, num_samples, 50_000, 50_000)
    vb_repeats = _check_int("vb_repeats", vb_repeats if vb_repeats is not None else (1 if quick else 2), 1)
    if quick:
        max_rows = max_rows or 300
        max_features = max_features or 8
    ds = load_dataset("spambase", data_dir=data_dir)
    X = np.asarray(ds.X, dtype=float)
    y = np.asarray(ds.y)
    names = [_short_name(c) for c in ds.feature_names]
    if max_features is not None:
        max_features = _check_int("max_features", max_features, 1)
        X, names = X[:, :max_features], names[:max_features]
    if max_rows is not None and _check_int("max_rows", max_rows, 20) < y.size:
        from sklearn.model_selection import train_test_split

        idx, _ = train_test_split(np.arange(y.size), train_size=max_rows, stratify=y, random_state=seed)
        idx = np.sort(idx)
        X, y = X[idx], y[idx]
    (X,) = standardize(X)
    row: dict[str, Any] = {"key": "spambase", "n": int(y.size), "d": int(X.shape[1]), "rho": float(rho),
                           "variables": names, "vb_inclusion": None, "mcmc_inclusion": None,
                           "vb_time_s": None, "vb_first_fit_s": None, "vb_n_iter": None, "vb_converged": None,
                           "vb_lower_bound": None, "vb_starts": None, "mcmc_time_s": None, "mcmc_iterations": None,
                           "mcmc_chains": None, "mcmc_chain_inclusion": None}
    model = {"prior": "laplace_zero", "rho": float(rho)}
    with limit_blas_threads(blas_threads):
        if "vb" in methods:
            times = []
            for _ in range(vb_repeats):
                clf = _bayes("vb", vb_max_iter=vb_max_iter, precision=precision, seed=seed, **gibbs, **model)
                clf, elapsed, converged = _timed_fit(clf, X, y)
                times.append(elapsed)
            row.update(vb_inclusion=clf.inclusion_probabilities_.tolist(), vb_time_s=times[-1],
                       vb_first_fit_s=times[0], vb_n_iter=int(clf.n_iter_), vb_converged=bool(converged),
                       vb_lower_bound=float(clf.lower_bound_[-1]))
            _log(verbose, f"[spam] VB: {times[-1]:.1f} s ({clf.n_iter_} sweeps, first fit {times[0]:.1f} s)")
            if vb_starts:
                row["vb_starts"] = _vb_starts(X, y, rho, _check_int("vb_starts", vb_starts, 0), vb_max_iter,
                                              precision, seed)
        if "mcmc" in methods:
            mcmc_chains = _check_int("mcmc_chains", mcmc_chains, 1)
            clf = _bayes("mcmc", vb_max_iter=vb_max_iter, precision=precision, seed=seed, num_chains=mcmc_chains,
                         **gibbs, **model)
            clf, elapsed, _ = _timed_fit(clf, X, y)
            row.update(mcmc_inclusion=clf.inclusion_probabilities_.tolist(), mcmc_time_s=elapsed,
                       mcmc_iterations=int(clf.n_iter_), mcmc_chains=mcmc_chains,
                       mcmc_chain_inclusion=np.asarray(clf.idata_.posterior["inclusion"]).mean(axis=1).tolist())
            _log(verbose, f"[spam] MCMC: {elapsed:.1f} s ({mcmc_chains} x {clf.n_iter_} iterations)")
    row.update(_agreement(names, row["vb_inclusion"], row["mcmc_inclusion"], vb_threshold, mcmc_threshold))
    row.update({f"paper_{k}": v for k, v in PAPER_SPAM.items()})
    row.update(mcmc_threshold=mcmc_threshold, vb_threshold=vb_threshold, num_warmup=gibbs["num_warmup"],
               num_samples=gibbs["num_samples"])
    rows = [row]
    return rows, spam_markdown(rows, quick=quick)


def _vb_starts(X: np.ndarray, y: np.ndarray, rho: float, starts: int, max_iter: int, precision: str,
               seed: int) -> list[dict[str, Any]]:
    """Algorithm 3 (SQUAREM) on the spam model from ``starts`` random initial inclusion probabilities.

    The model of :func:`spam`'s VB fit (flat intercept, A_u = B_u = 0.01, labels in sorted order
    mapped to -1, +1); per start its lower bound, sweeps and inclusion probabilities.
    """
    import jax.numpy as jnp

    from bayes_maxmargin.core.linalg import float_precision
    from bayes_maxmargin.models.luts.model import LutsHyper, MixedData
    from bayes_maxmargin.models.luts.vb import vb_laplace_zero

    classes = np.unique(y)
    rng = np.random.default_rng(seed)
    out = []
    with float_precision(precision == "float64"):
        dtype = jnp.float64 if precision == "float64" else jnp.float32
        data = MixedData(jnp.ones((y.size, 1), dtype), jnp.asarray(X, dtype),
                         jnp.asarray(np.where(y == classes[-1], 1.0, -1.0), dtype))
        hyper = LutsHyper(*(jnp.asarray(v, dtype) for v in (1e8, BAYES_PRIOR["A_u"], BAYES_PRIOR["B_u"], rho)))
        for _ in range(starts):
            res = vb_laplace_zero(data, hyper, jnp.asarray(rng.uniform(size=X.shape[1]), dtype), 1e-10,
                                  max_iter=max_iter, accelerate=True)
            n_iter = int(res.n_iter)
            out.append({"lower_bound": float(res.lower_bound[n_iter - 1]), "n_iter": n_iter,
                        "inclusion": np.asarray(res.state.mu_gamma, dtype=float).tolist()})
    return out


def _agreement(names: list[str], vb: list[float] | None, mcmc: list[float] | None, vb_threshold: float,
               mcmc_threshold: float) -> dict[str, Any]:
    """Selected sets and their agreement (None where a fit is missing)."""
    vb_sel = [v for v, p in zip(names, vb) if p > vb_threshold] if vb is not None else None
    mc_sel = [v for v, p in zip(names, mcmc) if p > mcmc_threshold] if mcmc is not None else None
    both = vb_sel is not None and mc_sel is not None
    return {
        "vb_selected": vb_sel,
        "mcmc_selected": mc_sel,
        "n_vb_selected": None if vb_sel is None else len(vb_sel),
        "n_mcmc_selected": None if mc_sel is None else len(mc_sel),
        "n_vb_agree": len(set(mc_sel) & set(vb_sel)) if both else None,
        "mcmc_only": [v for v in mc_sel if v not in vb_sel] if both else None,
        "vb_only": [v for v in vb_sel if v not in mc_sel] if both else None,
    }


def spam_markdown(rows: list[dict[str, Any]], *, quick: bool = False) -> str:
    """Markdown of :func:`spam`'s row: agreement and times beside the paper's, then every variable."""
    r = rows[0]
    chains = r.get("mcmc_chain_inclusion")
    per_chain = chains is not None and len(chains) > 1
    k = r.get("mcmc_chains") or 1
    gibbs = "one Gibbs chain" if k == 1 else f"{k} Gibbs chains"

    def n(v: Any) -> str:
        return "n/a" if v is None else str(v)

    lines = [
        "| | ours | paper |",
        "|---|---|---|",
        f"| MCMC-selected (P > {r['mcmc_threshold']}) | {n(r['n_mcmc_selected'])} | {r['paper_n_mcmc_selected']} |",
        f"| of those VB-selected (P > {r['vb_threshold']}) | {n(r['n_vb_agree'])} | {r['paper_n_vb_agree']} |",
        f"| MCMC-selected, not VB | {n(None if r['mcmc_only'] is None else ', '.join(r['mcmc_only']) or '-')} | "
        f"{', '.join(r['paper_mcmc_only'])} |",
        f"| VB-selected (P > {r['vb_threshold']}) | {n(r['n_vb_selected'])} | n/a |",
        f"| VB s | {_fmt_s(r['vb_time_s'], 1)} | {r['paper_vb_time_s']:.0f} |",
        f"| MCMC s | {_fmt_s(r['mcmc_time_s'], 1)} | > {r['paper_mcmc_time_s']:.0f} |",
        "",
        "| variable | VB P(incl.) | MCMC P(incl.) |" + (" MCMC per chain |" if per_chain else ""),
        "|---|---|---|" + ("---|" if per_chain else ""),
    ]
    vb, mc = r["vb_inclusion"], r["mcmc_inclusion"]
    order = np.argsort(-np.asarray(mc if mc is not None else vb if vb is not None else np.zeros(len(r["variables"]))),
                       kind="stable")
    for j in order:
        lines.append(f"| {r['variables'][j]} | {'n/a' if vb is None else f'{vb[j]:.3f}'} | "
                     f"{'n/a' if mc is None else f'{mc[j]:.3f}'} |"
                     + (" " + ", ".join(f"{c[j]:.3f}" for c in chains) + " |" if per_chain else ""))
    lines += [
        "",
        f"Luts & Ormerod (2014) Sec. 4.4 / Figure 3: spambase (n = {r['n']}, d = {r['d']}) standardised, "
        f"LinearBSVM(prior='laplace_zero', rho={r['rho']}, intercept_scale=None, A_u=B_u=0.01); VB "
        f"({n(r['vb_n_iter'])} sweeps, converged to 1e-10: {n(r['vb_converged'])}; time of the last of the VB fits, "
        f"after compilation); {gibbs} of {r['num_warmup']} + {r['num_samples']} draws.",
        "Paper: hpl and font have slightly lower MCMC probabilities; email and table are the two VB-selected "
        "variables with the smallest VB probabilities. Paper times: VB 76 min, MCMC over 10 hours.",
    ]
    if r.get("vb_starts"):
        bounds = [st["lower_bound"] for st in r["vb_starts"]]
        best = r["vb_starts"][int(np.argmax(bounds))]
        agree = _agreement(r["variables"], best["inclusion"], r["mcmc_inclusion"], r["vb_threshold"],
                           r["mcmc_threshold"])["n_vb_agree"]
        lines.append(
            f"VB from {len(bounds)} random initial inclusion probabilities: lower bounds {min(bounds):.1f} to "
            f"{max(bounds):.1f} (the fit above, started from the full model: {r['vb_lower_bound']:.1f}); the best "
            f"random start includes {agree} of the MCMC-selected variables."
        )
    if vb is not None and mc is not None:
        lines.append("VB against MCMC at stricter MCMC thresholds (the paper counts the variables MCMC "
                     "selects \"almost certainly\" and names no threshold): " + _stricter_agreement(r) + ".")
    if quick:
        lines.append("QUICK MODE: smoke-test settings, not a reproduction.")
    return "\n".join(lines)


def _stricter_agreement(row: dict[str, Any], thresholds: Sequence[float] = (0.95, 0.99)) -> str:
    """"P > t: k of m (not VB: ...)" for each MCMC threshold t above the row's, from its inclusions."""
    parts = []
    for t in (t for t in thresholds if t > row["mcmc_threshold"]):
        a = _agreement(row["variables"], row["vb_inclusion"], row["mcmc_inclusion"], row["vb_threshold"], t)
        parts.append(f"P > {t}: {a['n_vb_agree']} of {a['n_mcmc_selected']} included by VB "
                     f"(not by VB: {', '.join(a['mcmc_only']) or '-'})")
    return "; ".join(parts)


# --------------------------------------------------------------------------- per-fold records, figures
def split_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-split records of :func:`simulation`'s, :func:`toenail`'s or :func:`acath`'s rows: one per
    setting / dataset, method and repetition / split with the test BER (``error``, ``metric``
    "ber"), the fit ``time_s`` and the paper's mean fit time (None where it reports none)."""
    out = []
    for r in rows:
        for m in METHODS:
            times = r.get(f"{m}_fit_times_s") or []
            for k, ber in enumerate(r.get(f"{m}_bers") or []):
                out.append({"dataset": r["key"], "method": m, "fold": k, "metric": "ber", "error": ber,
                            "time_s": times[k] if k < len(times) else None,
                            "paper_time_s": r.get(f"paper_{m}_time_s")})
    return out


def realdata_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``bers.png``: box plots of the test BER over the splits per method, as the paper's Figures
    1, 2 and 4 (which give the BERs only as box plots)."""
    from bayes_maxmargin.experiments.figures import box_plots

    return {"bers.png": box_plots(records, title="Luts & Ormerod (2014): balanced error rate over splits")}


def spam_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per fit of :func:`spam` (method vb / mcmc; no test split, so no error): ``time_s``,
    the number of variables selected and the paper's time and count."""
    out = []
    for r in rows:
        for m in ("vb", "mcmc"):
            if r.get(f"{m}_inclusion") is None:
                continue
            out.append({"dataset": r["key"], "method": m, "fold": 0, "metric": "inclusion", "error": None,
                        "time_s": r[f"{m}_time_s"], "n_selected": r[f"n_{m}_selected"],
                        "paper_time_s": r[f"paper_{m}_time_s"],
                        "paper_n_selected": r["paper_n_mcmc_selected"] if m == "mcmc" else None})
    return out


def spam_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``inclusion.png``: VB and MCMC inclusion probabilities per variable with the two selection
    thresholds (the paper's Figure 3)."""
    from bayes_maxmargin.experiments.figures import paired_bars

    r = rows[0]
    return {"inclusion.png": paired_bars(
        r["variables"], {"VB": r["vb_inclusion"], "MCMC": r["mcmc_inclusion"]},
        thresholds={f"VB threshold {r['vb_threshold']}": r["vb_threshold"],
                    f"MCMC threshold {r['mcmc_threshold']}": r["mcmc_threshold"]},
        ylabel="inclusion probability", title=f"Luts & Ormerod (2014) Fig. 3: spambase, rho = {r['rho']}")}
