"""Tables 3 and 4 of Chen et al. (2015), "Max-Margin Discriminant Projection via Data Augmentation"
(IEEE TKDE 27(7)), Sec. 5.3.

Table 3: mean test accuracy (%) and sd over random stratified 70 / 30 splits (the paper: 50 splits,
20 for dna, satimage, isolet and usps) of MMLDP, GKMMDP, PKMMDP, ssGKMMDP and ssPKMMDP
(:class:`~bayes_maxmargin.MaxMarginProjection`) beside scikit-learn's linear and RBF ``SVC``, every
feature standardised with the training split's mean and sd (Sec. 5.3), the paper's numbers beside.

Table 4: CPU seconds of 200 Gibbs iterations (100 burn-in) of MMLDP, KMMDP and ssKMMDP with
K = L - 1 components and M = min(20 % of the training set, 100) basis vectors (Sec. 5.3), beside
scikit-learn's LDA and linear SVC (``LinearSVC``), on one 70 / 30 training split.

Settings the paper leaves open or chooses on test data, fixed here without looking at test splits
(:data:`TABLE3_SETTINGS`): the paper picks the kernel parameter from gamma in {0.01, 0.1, 1, 10} and
d in {1..6} and the number of components "best" per data set, apparently on the test accuracy.
Here gamma = 1 / P (lengthscale sqrt(P), the estimator's default; scikit-learn's "scale" heuristic
for standardised features), d = 2 on the inputs scaled by 1 / sqrt(P), i.e. (x'v / P + 1)^2, the
same scaling (the unscaled (x'v + 1)^2 of standardised inputs grows like P^2 and the samplers stop at
the majority class: 52 % on dna, 64 % on leukemia), K = L - 1 for L > 2 classes and K = 5 for two
classes, M = min(200, N) k-means basis vectors (the paper's 200 candidates), 100 burn-in and 100 kept
iterations (the paper's Table 4 setting; the spike-and-slab models' first 50 burn-in sweeps are
dense, the estimator's default ``dense_warmup``), one chain. MMLDP is not run for P > 1000 (nor
was it in the paper). dorothea (800 x 88119, sparse) is densified. With ``lengthscale_grid`` set
(``benchmarks/chen_table3.py --lengthscale-grid``), the Gaussian-kernel models choose their
length-scale from that grid x sqrt(P) by cross-validation on each training split instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "PAPER_TABLE3",
    "PAPER_TABLE4",
    "QUICK_DATASETS",
    "TABLE3_DATASETS",
    "TABLE3_METHODS",
    "TABLE3_SETTINGS",
    "TABLE4_METHODS",
    "table3",
    "table3_figures",
    "table3_folds",
    "table4",
    "table4_figures",
    "table4_folds",
]

_T3_COLS = ("LiSVM", "GKSVM", "MMLDP", "GKMMDP", "PKMMDP", "ssGKMMDP", "ssPKMMDP")
_T3 = {
    "diabetis": ("72.2(2.1)", "79.4(1.8)", "77.7(1.9)", "80.1(1.7)", "78.2(2.2)", "80.8(1.9)", "80.0(2.0)"),
    "heart": ("83.7(3.7)", "86.0(3.5)", "86.1(3.6)", "88.2(3.7)", "85.2(3.3)", "88.3(3.3)", "88.1(3.2)"),
    "ringnorm": ("77.6(0.5)", "97.5(0.2)", "76.3(0.4)", "98.8(0.3)", "97.5(0.1)", "98.0(0.3)", "97.7(0.2)"),
    "waveform": ("88.0(0.8)", "88.9(0.4)", "88.2(0.7)", "89.7(0.6)", "88.5(0.7)", "89.1(0.8)", "87.9(0.8)"),
    "german": ("67.9(1.0)", "77.1(1.8)", "70.6(1.1)", "78.2(1.6)", "79.0(1.1)", "77.9(2.3)", "72.5(2.7)"),
    "satimage": ("74.6(0.6)", "86.6(0.7)", "76.0(0.9)", "88.7(0.7)", "86.3(0.8)", "89.6(0.9)", "86.1(0.9)"),
    "arcene": ("68.7(4.1)", "50.0(0.0)", None, "72.4(4.0)", "81.7(4.2)", "70.8(4.1)", "82.4(4.2)"),
    "dorothea": ("62.3(3.0)", "50.0(0.0)", None, "89.7(2.7)", "90.8(2.6)", "84.7(2.9)", "88.9(3.2)"),
    "leukemia": ("97.9(2.5)", "96.2(2.0)", "98.7(2.0)", "96.7(2.3)", "97.4(2.2)", "93.2(2.3)", "93.6(2.1)"),
    "isolet": ("93.9(0.8)", "90.4(0.5)", "93.7(0.8)", "94.7(0.5)", "92.2(0.6)", "94.8(0.8)", "93.4(0.8)"),
    "dna": ("94.2(0.6)", "94.7(0.1)", "94.2(0.9)", "94.4(0.8)", "94.8(0.7)", "91.0(0.9)", "95.1(0.8)"),
    "usps": ("92.9(0.5)", "93.9(0.5)", "93.6(0.6)", "96.8(0.8)", "95.8(0.6)", "96.1(0.8)", "95.2(0.7)"),
}


def _parse(cell: str | None) -> tuple[float, float] | None:
    if cell is None:
        return None
    m, s = cell.rstrip(")").split("(")
    return float(m), float(s)


#: Table 3 of the paper: dataset -> method -> (mean %, sd %) (None: not run in the paper).
PAPER_TABLE3: dict[str, dict[str, tuple[float, float] | None]] = {
    d: {c: _parse(v) for c, v in zip(_T3_COLS, row)} for d, row in _T3.items()
}

#: Table 4 of the paper (CPU seconds; None: beyond 3600 s).
PAPER_TABLE4: dict[str, dict[str, float | None]] = {
    "ringnorm": {"LiSVM": 1.57, "LDA": 0.55, "MMLDP": 0.86, "KMMDP": 1.50, "ssKMMDP": 4.71},
    "satimage": {"LiSVM": 1.72, "LDA": 2.66, "MMLDP": 6.06, "KMMDP": 9.22, "ssKMMDP": 39.90},
    "usps": {"LiSVM": 132.87, "LDA": 4.67, "MMLDP": 26.90, "KMMDP": 15.29, "ssKMMDP": 51.90},
    "waveform": {"LiSVM": 0.88, "LDA": 0.78, "MMLDP": 2.45, "KMMDP": 1.95, "ssKMMDP": 14.04},
    "diabetis": {"LiSVM": 0.21, "LDA": 0.25, "MMLDP": 0.23, "KMMDP": 0.30, "ssKMMDP": 0.78},
    "german": {"LiSVM": 0.36, "LDA": 0.20, "MMLDP": 0.28, "KMMDP": 0.34, "ssKMMDP": 0.84},
    "heart": {"LiSVM": 0.18, "LDA": 0.15, "MMLDP": 0.19, "KMMDP": 0.21, "ssKMMDP": 0.34},
    "dna": {"LiSVM": 0.55, "LDA": 0.57, "MMLDP": 2.02, "KMMDP": 1.34, "ssKMMDP": 4.49},
    "isolet": {"LiSVM": 966.57, "LDA": 28.00, "MMLDP": 191.06, "KMMDP": 67.67, "ssKMMDP": 147.07},
    "arcene": {"LiSVM": None, "LDA": 152.12, "MMLDP": None, "KMMDP": 0.18, "ssKMMDP": 0.21},
    "dorothea": {"LiSVM": None, "LDA": 928.71, "MMLDP": None, "KMMDP": 0.40, "ssKMMDP": 0.71},
    "leukemia": {"LiSVM": 327.51, "LDA": 391.25, "MMLDP": 0.65, "KMMDP": 0.29, "ssKMMDP": 0.60},
}

TABLE3_DATASETS: tuple[str, ...] = tuple(_T3)
TABLE3_METHODS: tuple[str, ...] = ("MMLDP", "GKMMDP", "PKMMDP", "ssGKMMDP", "ssPKMMDP", "LiSVM", "GKSVM")
TABLE4_METHODS: tuple[str, ...] = ("LDA", "LiSVM", "MMLDP", "KMMDP", "ssKMMDP")
QUICK_DATASETS: tuple[str, ...] = ("heart", "diabetis")
#: Datasets that the paper ran with 20 splits instead of 50.
TWENTY_SPLITS = frozenset({"dna", "satimage", "isolet", "usps"})

#: Fixed settings of the Bayesian methods (module docstring).
TABLE3_SETTINGS: dict[str, Any] = {
    "n_basis": 200,
    "degree": 2,
    "num_warmup": 100,
    "num_samples": 100,
    "binary_components": 5,
    "lengthscale_grid": None,
    "select_folds": 3,
}


def _load(name: str) -> tuple[np.ndarray, np.ndarray]:
    from bayes_maxmargin.data import load_dataset

    ds = load_dataset(name)
    X = ds.X.toarray() if hasattr(ds.X, "toarray") else np.asarray(ds.X, dtype=float)
    return X, np.asarray(ds.y)


def _standardise(X_tr: np.ndarray, X_te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = X_tr.mean(0), X_tr.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X_tr - mu) / sd, (X_te - mu) / sd


def _scaled(X: np.ndarray, p: int) -> np.ndarray:
    return X / np.sqrt(p)


def _bayes_model(method: str, n: int, p: int, L: int, settings: dict[str, Any], seed: int):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from bayes_maxmargin.estimators.projection import MaxMarginProjection

    K = L - 1 if L > 2 else settings["binary_components"]
    kw: dict[str, Any] = dict(n_components=K, num_warmup=settings["num_warmup"],
                              num_samples=settings["num_samples"], random_state=seed)
    if method != "MMLDP":
        rbf = "G" in method
        kw.update(kernel="rbf" if rbf else "poly", n_basis=min(settings["n_basis"], n),
                  kernel_params={"lengthscale": p**0.5} if rbf else {"degree": settings["degree"]},
                  spike_slab=method.startswith("ss"))
        if not rbf:  # (x'v / P + 1)^d
            return make_pipeline(FunctionTransformer(_scaled, kw_args={"p": p}), MaxMarginProjection(**kw))
    return MaxMarginProjection(**kw)


def _select_lengthscale(model, X: np.ndarray, y: np.ndarray, settings: dict[str, Any], seed: int) -> float:
    """The length-scale of a Gaussian-kernel model chosen from ``lengthscale_grid`` x sqrt(P) by
    stratified ``select_folds``-fold cross-validation on the training split (the inner fits use at
    most as many basis vectors as an inner training fold has rows): the paper picks the kernel
    parameter from a grid "to get the best performance", here without looking at the test split."""
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    k = settings["select_folds"]
    folds = StratifiedKFold(k, shuffle=True, random_state=seed)
    inner = clone(model).set_params(n_basis=min(model.n_basis, len(y) - -(-len(y) // k)))
    grid = [f * X.shape[1] ** 0.5 for f in settings["lengthscale_grid"]]
    scores = [cross_val_score(clone(inner).set_params(kernel_params={"lengthscale": ls}), X, y, cv=folds).mean()
              for ls in grid]
    return grid[int(np.argmax(scores))]


def _svc(method: str):
    from sklearn.svm import SVC

    return SVC(kernel="linear") if method == "LiSVM" else SVC(kernel="rbf", gamma="scale")


def table3(
    datasets: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    n_splits: int | None = None,
    seed: int = 0,
    quick: bool = False,
    max_seconds: float = 3600.0,
    settings: dict[str, Any] | None = None,
    verbose: bool = False,
) -> tuple[list[dict[str, Any]], str]:
    """Mean accuracy and sd over stratified 70 / 30 splits (Chen et al. 2015, Table 3).

    Parameters
    ----------
    datasets, methods : sequences, optional
        Subsets of :data:`TABLE3_DATASETS` and :data:`TABLE3_METHODS`.
    n_splits : int, optional
        Splits per dataset; None: the paper's 50 (20 for dna, satimage, isolet, usps), 2 if quick.
    quick : bool
        Smoke setting: 2 splits, 20 + 20 iterations, 30 basis vectors.
    max_seconds : float
        A (dataset, method) stops adding splits once it has run this long (the issue's one-hour
        budget); the row says how many splits it used.
    settings : dict, optional
        Overrides of :data:`TABLE3_SETTINGS`.

    Returns
    -------
    rows : list of dict
        One per dataset: ``key``, ``dataset``, ``n``, ``p``, ``classes``; per method m
        ``m`` = (mean accuracy %, sd, splits) or None (not run), ``m_seconds`` (all splits),
        ``m_accuracies`` and ``m_split_seconds`` (fit and score) per split.
    table : str
        Markdown table, ours beside the paper's.
    """
    from sklearn.model_selection import train_test_split

    settings = {**TABLE3_SETTINGS, **(settings or {})}
    if quick:
        settings.update(num_warmup=20, num_samples=20, n_basis=30)
    names = list(datasets or (QUICK_DATASETS if quick else TABLE3_DATASETS))
    methods = list(methods or TABLE3_METHODS)
    rows = []
    for name in names:
        X, y = _load(name)
        splits = n_splits or (2 if quick else 20 if name in TWENTY_SPLITS else 50)
        L = len(np.unique(y))
        row: dict[str, Any] = {"key": name, "dataset": name, "n": X.shape[0], "p": X.shape[1], "classes": L}
        for method in methods:
            if method == "MMLDP" and X.shape[1] > 1000:
                row[method] = None
                continue
            accs, times, t0 = [], [], time.perf_counter()
            for s in range(splits):
                X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed + s)
                X_tr, X_te = _standardise(X_tr, X_te)
                model = (_svc(method) if method in ("LiSVM", "GKSVM")
                         else _bayes_model(method, len(X_tr), X.shape[1], L, settings, seed + s))
                t_split = time.perf_counter()
                if settings["lengthscale_grid"] and method in ("GKMMDP", "ssGKMMDP"):
                    ls = _select_lengthscale(model, X_tr, y_tr, settings, seed + s)
                    model.set_params(kernel_params={"lengthscale": ls})
                    row.setdefault(f"{method}_lengthscales", []).append(ls)
                accs.append(100.0 * model.fit(X_tr, y_tr).score(X_te, y_te))
                times.append(time.perf_counter() - t_split)
                if time.perf_counter() - t0 > max_seconds:
                    break
            row[method] = (float(np.mean(accs)), float(np.std(accs)), len(accs))
            row[f"{method}_seconds"] = time.perf_counter() - t0
            row[f"{method}_accuracies"] = accs
            row[f"{method}_split_seconds"] = times
            if verbose:
                print(name, method, row[method], f"{row[f'{method}_seconds']:.1f}s", flush=True)
        rows.append(row)
    return rows, table3_markdown(rows, methods)


def table3_markdown(rows: list[dict[str, Any]], methods: Sequence[str]) -> str:
    """Our accuracy (sd, splits) / the paper's, per dataset and method."""
    lines = ["| dataset | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for r in rows:
        cells = []
        for m in methods:
            ours = r.get(m)
            paper = PAPER_TABLE3.get(r["dataset"], {}).get(m)
            o = "-" if ours is None else f"{ours[0]:.1f} ({ours[1]:.1f}; {ours[2]})"
            pp = "-" if paper is None else f"{paper[0]:.1f} ({paper[1]:.1f})"
            cells.append(f"{o} / {pp}")
        lines.append(f"| {r['dataset']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nours: mean (sd; splits) / paper: mean (sd), accuracy %"


def table4(
    datasets: Sequence[str] | None = None,
    seed: int = 0,
    quick: bool = False,
    verbose: bool = False,
    methods: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """CPU and wall seconds of 200 Gibbs iterations (100 burn-in) beside LDA and linear SVC
    (Chen et al. 2015, Table 4), on one stratified 70 % training split.

    Each Bayesian model is fitted twice: the first fit includes XLA compilation (reported as
    ``*_first_wall``), the second reuses the compiled program and is the one reported. ``quick``:
    2 datasets, 20 + 20 iterations. ``methods``: a subset of LDA, LiSVM, MMLDP, KMMDP, ssKMMDP
    (default all; the others read "-").
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.model_selection import train_test_split
    from sklearn.svm import LinearSVC

    from bayes_maxmargin.estimators.projection import MaxMarginProjection

    names = list(datasets or (QUICK_DATASETS if quick else TABLE3_DATASETS))
    unknown = sorted(set(methods or ()) - set(TABLE4_METHODS))
    if unknown:
        raise ValueError(f"Unknown methods {unknown}; valid methods are {', '.join(TABLE4_METHODS)}")
    it = 20 if quick else 100
    rows = []
    for name in names:
        X, y = _load(name)
        X_tr, _, y_tr, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
        X_tr, _ = _standardise(X_tr, X_tr[:1])
        n, p = X_tr.shape
        L = len(np.unique(y))
        M = max(1, min(int(0.2 * n), 100))
        row: dict[str, Any] = {"key": name, "dataset": name, "n_train": n, "p": p, "classes": L, "n_basis": M}
        models = {
            "LDA": lambda: LinearDiscriminantAnalysis(),
            "LiSVM": lambda: LinearSVC(),
            "MMLDP": lambda: MaxMarginProjection(num_warmup=it, num_samples=it, random_state=seed),
            "KMMDP": lambda: MaxMarginProjection(kernel="rbf", n_basis=M, num_warmup=it, num_samples=it,
                                                 random_state=seed),
            "ssKMMDP": lambda: MaxMarginProjection(kernel="rbf", n_basis=M, spike_slab=True, num_warmup=it,
                                                   num_samples=it, random_state=seed),
        }
        for method, make in models.items():
            if methods is not None and method not in methods:
                row[method] = row[f"{method}_wall"] = None
                continue
            if method == "MMLDP" and p > 1000:
                row[method] = row[f"{method}_wall"] = None
                continue
            reps = 2 if method.endswith("MMDP") or method == "MMLDP" else 1
            for r in range(reps):
                t, c = time.perf_counter(), time.process_time()
                make().fit(X_tr, y_tr)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                if r == 0 and reps == 2:
                    row[f"{method}_first_wall"] = wall
            row[method], row[f"{method}_wall"] = cpu, wall
            if verbose:
                print(name, method, f"cpu {cpu:.2f}s wall {wall:.2f}s", flush=True)
        rows.append(row)
    return rows, table4_markdown(rows)


def table4_markdown(rows: list[dict[str, Any]]) -> str:
    cols = ("LiSVM", "LDA", "MMLDP", "KMMDP", "ssKMMDP")
    lines = ["| dataset | n | M | " + " | ".join(cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    for r in rows:
        paper = PAPER_TABLE4.get(r["dataset"], {})
        cells = []
        for c in cols:
            o = "-" if r.get(c) is None else f"{r[c]:.2f} ({r[c + '_wall']:.2f})"
            pp = "-" if paper.get(c) is None else f"{paper[c]:.2f}"
            cells.append(f"{o} / {pp}")
        lines.append(f"| {r['dataset']} | {r['n_train']} | {r['n_basis']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + (
        "\n\nours: CPU s (wall s), compiled program (second fit) / paper CPU s; "
        "Bayesian models: 100 burn-in + 100 kept iterations"
    )


# --------------------------------------------------------------------------- per-fold records, figures
def table3_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-split records of :func:`table3`'s rows: one per dataset, method and split with the test
    ``error`` (1 - accuracy), ``accuracy`` (%), ``time_s`` and the paper's mean error and sd."""
    out = []
    for r in rows:
        for method in TABLE3_METHODS:
            accs = r.get(f"{method}_accuracies")
            if not accs:
                continue
            paper = PAPER_TABLE3.get(r["dataset"], {}).get(method)
            for k, (acc, t) in enumerate(zip(accs, r[f"{method}_split_seconds"])):
                out.append({"dataset": r["dataset"], "method": method, "fold": k, "metric": "error",
                            "error": 1.0 - acc / 100.0, "paper_error": None if paper is None else 1.0 - paper[0] / 100.0,
                            "paper_error_sd": None if paper is None else paper[1] / 100.0, "time_s": t,
                            "accuracy": acc})
    return out


def table3_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``errors.png``: test error (1 - accuracy) per dataset and method beside the paper's Table 3."""
    from bayes_maxmargin.experiments.figures import error_bars

    return {"errors.png": error_bars(records, paper_sd="paper_error_sd",
                                     title="Chen et al. (2015) Table 3: 1 - accuracy")}


def table4_folds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per dataset and method of :func:`table4` (a timing, no error): CPU seconds
    ``time_s`` of the compiled program, ``wall_s`` and the paper's CPU seconds."""
    out = []
    for r in rows:
        paper = PAPER_TABLE4.get(r["dataset"], {})
        for method in ("LiSVM", "LDA", "MMLDP", "KMMDP", "ssKMMDP"):
            if r.get(method) is None:
                continue
            out.append({"dataset": r["dataset"], "method": method, "fold": 0, "metric": "cpu_s", "error": None,
                        "time_s": r[method], "wall_s": r[f"{method}_wall"], "paper_time_s": paper.get(method)})
    return out


def table4_figures(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``times.png``: CPU seconds per dataset and method beside the paper's Table 4 (log scale)."""
    from bayes_maxmargin.experiments.figures import error_bars

    return {"times.png": error_bars(records, value="time_s", paper="paper_time_s", ylabel="CPU seconds", log=True,
                                    title="Chen et al. (2015) Table 4: CPU seconds")}
