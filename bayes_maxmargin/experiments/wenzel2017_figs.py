"""The SUSY run (Sec. 5.2) and Figures 2 and 3 (Sec. 5.4, 5.5) of Wenzel, Galy-Fajou, Deutsch &
Kloft (2017), "Bayesian nonlinear support vector machines for big data", with S-BSVM
(:class:`~bayes_maxmargin.GPBSVM`, ``inference="svi"``).

SUSY (:func:`susy`): S-BSVM with 64 k-means inducing points, minibatches of 100 and a fixed RBF
kernel of length-scale 5.0 (the paper's value, found by its ML-II; ours is the squared convention
exp(-||x - x'||^2 / theta^2), on features standardised on the training rows), trained on all
but the last ``n_test`` rows and scored on those (the usual SUSY split: the last 500 000 of the
5 000 000 rows) by AUC, error and Brier score. ``dataset="susy"`` reads the UCI file
(``load_dataset("susy")``); the default ``"susy_synthetic"`` is the library's seeded stand-in
(same columns, Bayes error about 0.20), so its numbers are not the paper's data.

Figure 2 (:func:`fig2`): the length-scale that S-BSVM tunes itself by ML-II (one Adam ML-II step
every ``mlii_every`` natural-gradient steps, ``learn_kernel=("lengthscale",)``) against a grid
search: the k-fold CV error of S-BSVM at fixed theta on a log grid around the median distance
between standardised points. The tuned model runs in the same folds (its CV error, its mean
theta: the red circle of the paper's figure); the times are the summed fit times of the grid
(folds x grid fits) and of the tuned fits (folds fits). The paper does not name the dataset;
ours is heart.

Figure 3 (:func:`fig3`): k-means++ against random inducing points (both kept fixed, kernel fixed
at the median distance) as their number M grows, k-fold CV error (mean +- sd) and mean fit time on
USPS 3 vs 5 (raw pixels). Before the timed folds of each M one untimed fit compiles its programs,
so the times exclude compilation.

All fits run with OpenBLAS limited to ``blas_threads`` (default 1), as in
:mod:`~bayes_maxmargin.experiments.henao2014`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bayes_maxmargin.experiments.henao2014 import _known_methods, _log, _scale, limit_blas_threads, median_distance
from bayes_maxmargin.experiments.wenzel2017 import _fit_score, _gpbsvm

__all__ = [
    "FIG3_MS",
    "PAPER_FIG2",
    "PAPER_SUSY",
    "fig2",
    "fig2_figures",
    "fig2_folds",
    "fig3",
    "fig3_figures",
    "fig3_folds",
    "susy",
    "susy_figures",
    "susy_folds",
]

#: Sec. 5.2: data size, settings and results of the paper's SUSY run (time: training, 10 minutes on
#: one CPU; dnn_auc: the deep network of Baldi et al. 2014 the paper compares with).
PAPER_SUSY: dict[str, Any] = {"n": 5_000_000, "n_test": 500_000, "d": 18, "num_inducing": 64, "batch_size": 100,
                              "lengthscale": 5.0, "auc": 0.84, "brier": 0.22, "time_s": 600.0, "dnn_auc": 0.88}
#: Sec. 5.4: auto-tuning time, grid-search time and grid size of the paper's Fig. 2.
PAPER_FIG2: dict[str, Any] = {"auto_time_s": 0.3, "grid_time_s": 188.0, "grid_size": 1000, "mlii_updates": 5}
#: Fig. 3: numbers of inducing points.
FIG3_MS: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
#: Fig. 3: inducing-point selections (the paper's GMM failed to converge and is not plotted).
FIG3_INDUCING: tuple[str, ...] = ("kmeans", "random")


def _load(dataset: str, data_dir: str | None, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    from bayes_maxmargin.data import load_dataset

    ds = load_dataset(dataset, data_dir=data_dir, **kwargs)
    return np.asarray(ds.X, dtype=float), np.asarray(ds.y)


def _sbsvm(lengthscale: float, seed: int, precision: str, **kw: Any):
    """S-BSVM with the RBF kernel started (or fixed) at ``lengthscale``, the inducing points fixed."""
    return _gpbsvm("svi", lengthscale, seed, precision, optimize_inducing=False, **kw)


def _folds(n: int, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import KFold

    if not isinstance(k, (int, np.integer)) or k < 2 or k > n:
        raise ValueError(f"folds must be an integer in [2, {n}] (the number of rows), got folds={k!r}")
    return list(KFold(int(k), shuffle=True, random_state=seed).split(np.arange(n)))


def _fit(clf, Xtr, ytr, Xte, yte) -> tuple[float, float]:
    """(fit seconds, held-out error) of ``clf``."""
    fit_s, err, _ = _fit_score(clf, Xtr, ytr, Xte, yte)
    return fit_s, err


# --------------------------------------------------------------------------- SUSY (Sec. 5.2)
def susy(
    *,
    dataset: str = "susy_synthetic",
    n: int | None = None,
    n_test: int = 500_000,
    num_inducing: int = 64,
    batch_size: int = 100,
    epochs: float = 1.0,
    lengthscale: float = 5.0,
    path: str | None = None,
    seed: int = 0,
    quick: bool = False,
    precision: str = "float32",
    blas_threads: int | None = 1,
    data_dir: str | None = None,
    verbose: bool = True,
) -> tuple[list[dict[str, Any]], str]:
    """Wenzel et al. (2017) Sec. 5.2: S-BSVM on SUSY, held-out AUC, error and Brier score.

    Parameters
    ----------
    dataset : {"susy_synthetic", "susy"}
        The seeded synthetic stand-in (generated, seed ``seed``) or the UCI file.
    n : int, optional
        Rows in all, the last ``n_test`` held out. None: 5 000 000 (the whole UCI file);
        3 000 with ``quick``.
    n_test : int
        Held-out rows (500 000 as in the SUSY literature; at most 1 000 with ``quick``).
    num_inducing, batch_size : int
        M k-means inducing points (kept fixed; at most 16 with ``quick``) and minibatch size (the paper's 64 and 100).
    epochs : float
        Passes over the training rows (natural-gradient steps = epochs x n_train / batch_size).
    lengthscale : float
        theta of the fixed RBF kernel exp(-||x - x'||^2 / theta^2) (the paper's 5.0).
    path : str, optional
        ``dataset="susy"``: the ``SUSY.csv(.gz)`` file (default: the ``susy`` folder of the data folder).
    seed, quick, precision, blas_threads, data_dir, verbose
        As in :func:`~bayes_maxmargin.experiments.wenzel2017.table1`; ``precision`` float32 by default
        (S-BSVM's, and the data's).

    Returns
    -------
    rows : list of dict
        One row: ``key`` (the dataset), ``n_train``, ``n_test``, ``d``, the settings, ``sbsvm_auc``,
        ``sbsvm_error``, ``sbsvm_brier``, ``sbsvm_time_s`` (fit seconds), ``roc`` (false and true
        positive rates, at most 101 points), ``calibration`` (mean predicted and observed rate per
        bin of 10), ``bayes_error`` (synthetic data), and the paper's ``paper_*`` numbers.
    table : str
        Markdown: ours beside the paper's.

    Raises
    ------
    ValueError
        If ``dataset`` is neither SUSY dataset, or ``n_test`` leaves fewer than 2 training rows.
    """
    from sklearn.metrics import roc_curve

    from bayes_maxmargin.metrics import auc, brier_score, calibration_bins

    if dataset not in ("susy_synthetic", "susy"):
        raise ValueError(f"dataset must be 'susy_synthetic' or 'susy', got dataset={dataset!r}")
    n = int(n if n is not None else (3_000 if quick else PAPER_SUSY["n"]))
    n_test = min(int(n_test), 1_000) if quick else int(n_test)
    num_inducing = min(int(num_inducing), 16) if quick else int(num_inducing)
    if not 1 <= n_test <= n - 2:
        raise ValueError(f"n_test must be in [1, n - 2] = [1, {n - 2}], got n_test={n_test}")
    kwargs: dict[str, Any] = {"n": n, "dtype": precision}
    if dataset == "susy_synthetic":
        kwargs["random_state"] = int(seed)
    elif path:
        kwargs["path"] = path
    from bayes_maxmargin.data import load_dataset

    ds = load_dataset(dataset, data_dir=data_dir, **kwargs)
    X, y = ds.X, np.asarray(ds.y)
    n = len(y)  # the UCI file may hold fewer rows than asked for
    n_test = min(n_test, n - 2)
    Xtr, Xte = _scale(X[: n - n_test], X[n - n_test:], True)
    ytr, yte = y[: n - n_test], y[n - n_test:]
    steps = max(1, int(round(epochs * len(ytr) / batch_size)))
    clf = _sbsvm(lengthscale, seed, precision, num_inducing=min(num_inducing, len(ytr)), batch_size=batch_size,
                 max_iter=steps)
    _log(verbose, f"[susy] {dataset}: {len(ytr)} training rows, {steps} steps of {batch_size}, M={num_inducing}")
    with limit_blas_threads(blas_threads):
        fit_s, err, _ = _fit_score(clf, Xtr, ytr, Xte, yte)
        proba = clf.predict_proba(Xte)[:, list(clf.classes_).index(1)]
    fpr, tpr, _ = roc_curve(yte == 1, proba)
    keep = np.unique(np.linspace(0, len(fpr) - 1, min(len(fpr), 101)).round().astype(int))
    conf, hit, counts, _ = calibration_bins(proba, (yte == 1).astype(float), 10)
    row = {"key": dataset, "dataset": dataset, "n_train": len(ytr), "n_test": len(yte), "d": int(X.shape[1]),
           "num_inducing": int(clf.inducing_points_.shape[0]), "batch_size": int(batch_size), "steps": steps,
           "epochs": float(epochs), "lengthscale": float(lengthscale), "precision": precision,
           "sbsvm_auc": auc(yte, proba, 1), "sbsvm_error": err, "sbsvm_brier": brier_score(yte, proba, 1),
           "sbsvm_time_s": fit_s, "roc": {"fpr": fpr[keep].tolist(), "tpr": tpr[keep].tolist()},
           "calibration": {"predicted": conf.tolist(), "observed": hit.tolist(), "counts": counts.tolist()},
           "bayes_error": ds.meta.get("bayes_error"),
           **{f"paper_{k}": v for k, v in PAPER_SUSY.items()}}
    _log(verbose, f"[susy] AUC {row['sbsvm_auc']:.3f} error {err:.3f} Brier {row['sbsvm_brier']:.3f} ({fit_s:.1f} s)")
    return [row], susy_markdown([row])


def susy_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Ours beside the paper's Sec. 5.2: AUC, Brier score, error, training time, settings."""
    lines = ["| Data | n train | n test | M | batch | steps | AUC | AUC (paper) | Brier | Brier (paper) | error "
             "| fit s | fit s (paper) |", "|" + "---|" * 13]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['n_train']} | {r['n_test']} | {r['num_inducing']} | {r['batch_size']} "
                     f"| {r['steps']} | {r['sbsvm_auc']:.3f} | {r['paper_auc']} | {r['sbsvm_brier']:.3f} | "
                     f"{r['paper_brier']} | {r['sbsvm_error']:.3f} | {r['sbsvm_time_s']:.1f} | "
                     f"{r['paper_time_s']:.0f} |")
    r = rows[0]
    bayes = f" (Bayes error {r['bayes_error']:.2f})" if r.get("bayes_error") is not None else ""
    lines += ["", f"S-BSVM: GPBSVM(inference='svi'), {r['num_inducing']} fixed k-means inducing points, minibatches "
                  f"of {r['batch_size']}, {r['steps']} natural-gradient steps ({r['epochs']:g} epochs, Robbins-Monro "
                  f"step sizes), RBF exp(-||x-x'||^2/theta^2) with theta = {r['lengthscale']} fixed, features "
                  f"standardised on the training rows, {r['precision']}; the last {r['n_test']} rows held out. "
                  "Brier = mean squared difference of P(y=+1) and the 0/1 label; fit time includes JAX compilation.",
              f"Paper: the UCI SUSY data ({PAPER_SUSY['n']:,} rows), AUC {PAPER_SUSY['auc']}, Brier "
              f"{PAPER_SUSY['brier']}, 10 minutes on one CPU; a 5-layer network reaches AUC {PAPER_SUSY['dnn_auc']}."]
    if r["dataset"] == "susy_synthetic":
        lines.append(f"Ours on susy_synthetic, the library's seeded stand-in for SUSY{bayes}: not the paper's data.")
    return "\n".join(lines)


def susy_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per row: the held-out ``error``, ``auc``, ``brier`` and fit ``time_s``, with the paper's."""
    return [{"dataset": r["key"], "method": "sbsvm", "fold": 0, "metric": "error", "error": r["sbsvm_error"],
             "paper_error": None, "time_s": r["sbsvm_time_s"], "paper_time_s": r["paper_time_s"],
             "auc": r["sbsvm_auc"], "paper_auc": r["paper_auc"], "brier": r["sbsvm_brier"],
             "paper_brier": r["paper_brier"]} for r in rows]


def susy_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``susy.png``: the held-out ROC curve (with the paper's AUC in the legend) and the reliability
    diagram of P(y = +1)."""
    from bayes_maxmargin.experiments.figures import _figure

    r = rows[0]
    fig, (roc, rel) = _figure(2)
    roc.plot(r["roc"]["fpr"], r["roc"]["tpr"], "-", label=f"S-BSVM, AUC {r['sbsvm_auc']:.3f} (paper {r['paper_auc']})")
    roc.plot([0, 1], [0, 1], ":", color="grey")
    roc.set(xlabel="false positive rate", ylabel="true positive rate", title=f"{r['dataset']}: held-out ROC")
    roc.legend(loc="lower right", fontsize="small")
    rel.plot(r["calibration"]["predicted"], r["calibration"]["observed"], "o-",
             label=f"Brier {r['sbsvm_brier']:.3f} (paper {r['paper_brier']})")
    rel.plot([0, 1], [0, 1], ":", color="grey")
    rel.set(xlabel="predicted P(y=+1)", ylabel="observed rate", title="reliability (10 bins)")
    rel.legend(loc="upper left", fontsize="small")
    return {"susy.png": fig}


# --------------------------------------------------------------------------- Figure 2 (Sec. 5.4)
def fig2(
    *,
    dataset: str = "heart",
    folds: int | None = None,
    grid: int | Sequence[float] | None = None,
    num_inducing: int = 32,
    batch_size: int = 20,
    steps: int = 300,
    mlii_every: int = 10,
    mlii_steps: int = 10,
    learning_rate: float = 0.05,
    seed: int = 0,
    quick: bool = False,
    precision: str = "float32",
    blas_threads: int | None = 1,
    data_dir: str | None = None,
    verbose: bool = True,
) -> tuple[list[dict[str, Any]], str]:
    """Wenzel et al. (2017) Fig. 2: ML-II auto-tuned length-scale against the grid-search CV curve.

    Parameters
    ----------
    dataset : str
        A binary dataset of :func:`~bayes_maxmargin.data.load_dataset` (features standardised on
        each training fold).
    folds : int, optional
        CV folds (10; 2 with ``quick``).
    grid : int or sequence of float, optional
        Number of log-spaced length-scales from 0.1 to 10 times the median distance between
        standardised points (15; 3 with ``quick``), or the length-scales themselves.
    num_inducing, batch_size, steps : int
        S-BSVM's k-means inducing points, minibatch size and natural-gradient steps, for every fit
        (with ``quick`` at most 8 inducing points and 20 steps).
    mlii_every, mlii_steps, learning_rate
        The tuned fits: an ML-II step (``mlii_steps`` Adam iterations of ``learning_rate`` on log
        theta) every ``mlii_every`` natural-gradient steps, from the median distance.
    seed, quick, precision, blas_threads, data_dir, verbose
        As in :func:`susy`.

    Returns
    -------
    rows : list of dict
        One row: ``key`` (the dataset), ``n``, ``folds``, ``theta_init`` (median distance),
        ``grid_lengthscales``, ``grid_errors``, ``grid_error_sds``, ``grid_fold_errors``,
        ``grid_fold_times``, ``grid_best_lengthscale``, ``grid_best_error``, ``grid_time_s`` (all
        grid fits), ``auto_lengthscales`` (per fold), ``auto_lengthscale`` (their geometric mean),
        ``auto_error``, ``auto_error_sd``, ``auto_fold_errors``, ``auto_fold_times``,
        ``auto_time_s``, ``time_ratio_grid_over_auto``, ``settings`` and the paper's numbers.
    table : str
        Markdown: the CV curve, the tuned length-scale and the times, beside the paper's.
    """
    X, y = _load(dataset, data_dir)
    folds = folds or (2 if quick else 10)
    splits = _folds(len(y), folds, seed)
    theta0 = median_distance(_scale(X, X, True)[0], 1000, seed)
    if grid is None:
        grid = 3 if quick else 15
    thetas = (theta0 * np.geomspace(0.1, 10.0, int(grid)) if np.ndim(grid) == 0
              else np.asarray(grid, dtype=float).ravel())
    if thetas.size < 1 or not np.all(np.isfinite(thetas) & (thetas > 0)):
        raise ValueError(f"grid must be a positive count or positive length-scales, got grid={grid!r}")
    if quick:
        num_inducing, steps = min(num_inducing, 8), min(steps, 20)
    common = {"num_inducing": num_inducing, "batch_size": batch_size, "max_iter": int(steps), "mlii_every": mlii_every}
    scaled = [_scale(X[tr], X[te], True) for tr, te in splits]

    def cv(theta: float, **kw: Any) -> tuple[list[float], list[float], list[float]]:
        errs, times, tuned = [], [], []
        for (Xtr, Xte), (tr, te) in zip(scaled, splits):
            clf = _sbsvm(theta, seed, precision, **{**common, "num_inducing": min(num_inducing, len(tr)), **kw})
            fit_s, err = _fit(clf, Xtr, y[tr], Xte, y[te])
            errs.append(err), times.append(fit_s), tuned.append(float(clf.kernel_params_["lengthscale"]))
        return errs, times, tuned

    curve = []
    with limit_blas_threads(blas_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for th in thetas:
            errs, times, _ = cv(float(th))
            curve.append((float(th), errs, times))
            _log(verbose, f"[fig2] {dataset} theta={th:.4g}: CV error {np.mean(errs):.4f}")
        auto_errs, auto_times, auto_thetas = cv(theta0, learn_kernel=("lengthscale",), mlii_steps=mlii_steps,
                                                learning_rate=learning_rate)
    _log(verbose, f"[fig2] {dataset} auto-tuned theta {np.exp(np.mean(np.log(auto_thetas))):.4g}: "
                  f"CV error {np.mean(auto_errs):.4f}")
    errors = [float(np.mean(e)) for _, e, _ in curve]
    best = int(np.argmin(errors))
    grid_s, auto_s = float(sum(sum(t) for _, _, t in curve)), float(sum(auto_times))
    row = {"key": dataset, "dataset": dataset, "n": len(y), "d": int(X.shape[1]), "folds": folds,
           "theta_init": theta0, "grid_lengthscales": [c[0] for c in curve], "grid_errors": errors,
           "grid_error_sds": [float(np.std(e)) for _, e, _ in curve], "grid_fold_errors": [c[1] for c in curve],
           "grid_fold_times": [c[2] for c in curve], "grid_best_lengthscale": curve[best][0],
           "grid_best_error": errors[best], "grid_time_s": grid_s, "auto_lengthscales": auto_thetas,
           "auto_lengthscale": float(np.exp(np.mean(np.log(auto_thetas)))), "auto_error": float(np.mean(auto_errs)),
           "auto_error_sd": float(np.std(auto_errs)), "auto_fold_errors": auto_errs, "auto_fold_times": auto_times,
           "auto_time_s": auto_s, "time_ratio_grid_over_auto": grid_s / auto_s if auto_s > 0 else None,
           "settings": {**common, "mlii_steps": mlii_steps, "learning_rate": learning_rate, "precision": precision},
           **{f"paper_{k}": v for k, v in PAPER_FIG2.items()}}
    return [row], fig2_markdown([row])


def fig2_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The CV curve, the tuned length-scale and the times of :func:`fig2`, beside the paper's."""
    r = rows[0]
    lines = ["| theta | CV error | sd |", "|---|---|---|"]
    lines += [f"| {th:.4g} | {e:.4f} | {sd:.4f} |"
              for th, e, sd in zip(r["grid_lengthscales"], r["grid_errors"], r["grid_error_sds"])]
    ratio = r["time_ratio_grid_over_auto"]
    lines += ["", "| | theta | CV error | fit s (all folds) | fit s (paper) |", "|---|---|---|---|---|",
              f"| grid search ({len(r['grid_lengthscales'])} values) | {r['grid_best_lengthscale']:.4g} | "
              f"{r['grid_best_error']:.4f} | {r['grid_time_s']:.1f} | {r['paper_grid_time_s']:.0f} "
              f"({r['paper_grid_size']} values) |",
              f"| ML-II auto-tuned | {r['auto_lengthscale']:.4g} | {r['auto_error']:.4f} | {r['auto_time_s']:.1f} | "
              f"{r['paper_auto_time_s']} |",
              f"| grid / auto time | | | {'n/a' if ratio is None else f'{ratio:.1f}'} | "
              f"{r['paper_grid_time_s'] / r['paper_auto_time_s']:.0f} |",
              "",
              f"{r['dataset']} (n={r['n']}), {r['folds']}-fold CV (KFold, shuffled), features standardised per "
              f"fold; grid around the median distance {r['theta_init']:.4g}. S-BSVM: {r['settings']['num_inducing']} "
              f"k-means inducing points, minibatches of {r['settings']['batch_size']}, {r['settings']['max_iter']} "
              f"steps; tuned: an ML-II step of {r['settings']['mlii_steps']} Adam iterations every "
              f"{r['settings']['mlii_every']} steps from the median distance (theta: geometric mean over folds). "
              "Times include JAX compilation.",
              f"Paper (Sec. 5.4): the tuned theta lands at the grid's optimum after {PAPER_FIG2['mlii_updates']} "
              "ML-II updates; the paper names no dataset."]
    return "\n".join(lines)


def fig2_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per fold and fit: ``method`` ``"grid"`` (per grid length-scale) or ``"auto"``,
    with the ``lengthscale`` (the tuned one for ``"auto"``), held-out ``error`` and fit ``time_s``."""
    out = []
    for r in rows:
        for i, (th, errs, times) in enumerate(zip(r["grid_lengthscales"], r["grid_fold_errors"], r["grid_fold_times"])):
            out += [{"dataset": r["key"], "method": f"grid_{i}", "fold": k, "metric": "error", "error": e,
                     "paper_error": None, "time_s": t, "lengthscale": th} for k, (e, t) in enumerate(zip(errs, times))]
        out += [{"dataset": r["key"], "method": "auto", "fold": k, "metric": "error", "error": e, "paper_error": None,
                 "time_s": t, "lengthscale": th}
                for k, (e, t, th) in enumerate(zip(r["auto_fold_errors"], r["auto_fold_times"],
                                                   r["auto_lengthscales"]))]
    return out


def fig2_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``fig2.png``: CV error against theta (log axis, ± sd) and the auto-tuned theta as a red circle."""
    from bayes_maxmargin.experiments.figures import _figure

    r = rows[0]
    fig, (ax,) = _figure(1, width=5.5, height=3.8)
    ax.errorbar(r["grid_lengthscales"], r["grid_errors"], r["grid_error_sds"], fmt="k.-", capsize=2,
                label=f"grid search ({r['folds']}-fold CV)")
    ax.plot([r["auto_lengthscale"]], [r["auto_error"]], "o", mfc="none", mec="r", ms=12, mew=2,
            label="auto-tuned (ML-II)")
    ax.set_xscale("log")
    ax.set(xlabel="length-scale theta", ylabel="CV error", title=f"S-BSVM on {r['dataset']}")
    ax.legend(fontsize="small")
    return {"fig2.png": fig}


# --------------------------------------------------------------------------- Figure 3 (Sec. 5.5)
def fig3(
    *,
    dataset: str = "usps_3vs5",
    ms: Sequence[int] | None = None,
    inducing: Sequence[str] = FIG3_INDUCING,
    folds: int | None = None,
    batch_size: int = 20,
    steps: int = 500,
    standardize: bool = False,
    warmup: bool = True,
    seed: int = 0,
    quick: bool = False,
    precision: str = "float32",
    blas_threads: int | None = 1,
    data_dir: str | None = None,
    verbose: bool = True,
) -> tuple[list[dict[str, Any]], str]:
    """Wenzel et al. (2017) Fig. 3: CV error and fit time against the number of inducing points.

    Parameters
    ----------
    dataset : str
        A binary dataset of :func:`~bayes_maxmargin.data.load_dataset` (the paper's USPS 3 vs 5).
    ms : sequence of int, optional
        Numbers of inducing points (:data:`FIG3_MS`; 4 and 8 with ``quick``), each at most the
        training fold's size.
    inducing : sequence of {"kmeans", "random"}
        Selections: k-means++ centres or a random subset of the rows, kept fixed.
    folds : int, optional
        CV folds (10; 2 with ``quick``).
    batch_size, steps : int
        S-BSVM's minibatch size and natural-gradient steps (at most 20 with ``quick``).
    standardize : bool
        Standardise the features on each training fold (USPS pixels share one scale: False).
    warmup : bool
        Before the timed folds of each M, one untimed fit that compiles its programs.
    seed, quick, precision, blas_threads, data_dir, verbose
        As in :func:`susy`. The kernel is fixed at the median distance between (standardised) points.

    Returns
    -------
    rows : list of dict
        One per M and selection: ``key`` (``"<inducing>_M<M>"``), ``dataset``, ``M``, ``inducing``,
        ``cv_error``, ``cv_error_sd``, ``fold_errors``, ``time_s`` (mean fit seconds),
        ``time_sd``, ``fold_times``, ``lengthscale``, ``n``, ``folds``.
    table : str
        Markdown of the rows and the paper's findings.
    """
    inducing = _known_methods(inducing, FIG3_INDUCING)
    X, y = _load(dataset, data_dir)
    folds = folds or (2 if quick else 10)
    splits = _folds(len(y), folds, seed)
    ms = tuple(ms) if ms is not None else ((4, 8) if quick else FIG3_MS)
    smallest = min(len(tr) for tr, _ in splits)
    bad = [m for m in ms if isinstance(m, bool) or int(m) != m or not 1 <= m <= smallest]
    if bad or not ms:
        raise ValueError(f"ms must be integers in [1, {smallest}] (the smallest training fold), got ms={list(ms)!r}")
    steps = min(int(steps), 20) if quick else int(steps)
    scaled = [_scale(X[tr], X[te], bool(standardize)) for tr, te in splits]
    theta = median_distance(_scale(X, X, bool(standardize))[0], 1000, seed)

    def fit_fold(M: int, how: str, k: int) -> tuple[float, float]:
        clf = _sbsvm(theta, seed, precision, num_inducing=M, inducing=how, batch_size=batch_size, max_iter=steps)
        (Xtr, Xte), (tr, te) = scaled[k], splits[k]
        return _fit(clf, Xtr, y[tr], Xte, y[te])

    rows = []
    with limit_blas_threads(blas_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for M in ms:
            if warmup:
                fit_fold(int(M), inducing[0], 0)
            for how in inducing:
                res = [fit_fold(int(M), how, k) for k in range(folds)]
                times, errs = [t for t, _ in res], [e for _, e in res]
                rows.append({"key": f"{how}_M{int(M)}", "dataset": dataset, "M": int(M), "inducing": how,
                             "cv_error": float(np.mean(errs)), "cv_error_sd": float(np.std(errs)), "fold_errors": errs,
                             "time_s": float(np.mean(times)), "time_sd": float(np.std(times)), "fold_times": times,
                             "lengthscale": theta, "n": len(y), "folds": folds, "steps": steps,
                             "batch_size": batch_size})
                _log(verbose, f"[fig3] {dataset} M={M} {how}: CV error {np.mean(errs):.4f} ({np.mean(times):.2f} s)")
    return rows, fig3_markdown(rows, standardize=bool(standardize))


def fig3_markdown(rows: Sequence[Mapping[str, Any]], *, standardize: bool = False) -> str:
    """Per M and selection: CV error ± sd and mean fit time; the paper's findings."""
    lines = ["| M | inducing | CV error | sd | fit s | sd |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['M']} | {r['inducing']} | {r['cv_error']:.4f} | {r['cv_error_sd']:.4f} | {r['time_s']:.2f} | "
              f"{r['time_sd']:.2f} |" for r in rows]
    r = rows[0]
    lines += ["", f"{r['dataset']} (n={r['n']}), {r['folds']}-fold CV (KFold, shuffled), "
                  f"{'features standardised per fold' if standardize else 'raw features'}; S-BSVM with the inducing "
                  f"points fixed, RBF theta = {r['lengthscale']:.4g} (median distance) fixed, minibatches of "
                  f"{r['batch_size']}, {r['steps']} steps; fit times after one untimed compiling fit per M.",
              "Paper (Sec. 5.5, USPS 3 vs 5, n=1350, 10-fold CV): k-means inducing points give a much lower error than "
              "random ones at small M; about 1% of the data as inducing points is nearly optimal; the time grows "
              "with M (GMM selection failed to converge)."]
    return "\n".join(lines)


def fig3_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per M, selection and fold (``method``: ``"<inducing> M=<M>"``), held-out ``error``
    and fit ``time_s``."""
    return [{"dataset": r["dataset"], "method": f"{r['inducing']} M={r['M']}", "fold": k, "metric": "error",
             "error": e, "paper_error": None, "time_s": t, "M": r["M"], "inducing": r["inducing"]}
            for r in rows for k, (e, t) in enumerate(zip(r["fold_errors"], r["fold_times"]))]


def fig3_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``fig3.png``: CV error (± sd) and mean fit time (± sd) against M, one line per selection."""
    from bayes_maxmargin.experiments.figures import _figure

    fig, (err, tim) = _figure(2)
    for how in dict.fromkeys(r["inducing"] for r in rows):
        sel = sorted((r for r in rows if r["inducing"] == how), key=lambda r: r["M"])
        ms = [r["M"] for r in sel]
        err.errorbar(ms, [r["cv_error"] for r in sel], [r["cv_error_sd"] for r in sel], fmt="o-", capsize=3, label=how)
        tim.errorbar(ms, [r["time_s"] for r in sel], [r["time_sd"] for r in sel], fmt="o-", capsize=3, label=how)
    err.set(xscale="log", xlabel="inducing points M", ylabel="CV error", title=rows[0]["dataset"])
    tim.set(xscale="log", xlabel="inducing points M", ylabel="fit time [s]")
    err.legend(fontsize="small")
    return {"fig3.png": fig}
