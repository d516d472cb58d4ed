"""``LinearBSVM(inference="em")`` with its two solvers side by side on standardised scikit-learn data
(iris, breast cancer, 10-class digits): iterations, ConvergenceWarnings, first- and second-fit time
(one process, the same machine), the largest difference of the coefficients and the SVM objective
reached. Run: ``python benchmarks/linear_em_solvers.py`` (writes ``results/linear_em_solvers.json``).
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from bayes_maxmargin import LinearBSVM

try:
    from _common import write_results
except ImportError:  # run from elsewhere
    from benchmarks._common import write_results

DATA = {"iris": load_iris, "breast_cancer": load_breast_cancer, "digits": load_digits}


def svm_objective(est: LinearBSVM, X: np.ndarray, y: np.ndarray) -> float:
    """Mean over the one-vs-rest problems of 1/2 w'Aw + 2 gamma sum hinge (what the MAP minimises)."""
    classes = np.unique(y)
    coef, b = np.atleast_2d(est.coef_), np.ravel(est.intercept_)
    if len(classes) == 2:
        codes = [np.where(y == classes[1], 1.0, -1.0)]
    else:
        codes = [np.where(y == c, 1.0, -1.0) for c in classes]
    total = 0.0
    for k, yk in enumerate(codes):
        hinge = np.maximum(1.0 - yk * (X @ coef[k] + b[k]), 0.0).sum()
        total += 0.5 * coef[k] @ coef[k] / est.sigma**2 + 0.5 * b[k] ** 2 / est.intercept_scale**2
        total += 2.0 * est.gamma * hinge
    return total / len(codes)


def fit(name: str, solver: str) -> dict:
    X, y = DATA[name](return_X_y=True)
    X = StandardScaler().fit_transform(X)
    row: dict = {"data": name, "solver": solver}
    for attempt in ("first", "second"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            t0 = time.perf_counter()
            est = LinearBSVM("em", solver=solver, progress_bar=False).fit(X, y)
            row[f"{attempt}_fit_s"] = time.perf_counter() - t0
    row["iterations"] = np.ravel(est.n_iter_).tolist()
    row["convergence_warnings"] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    row["svm_objective"] = svm_objective(est, X, y)
    row["coef"] = np.atleast_2d(est.coef_).tolist()
    return row


def main() -> None:
    rows = []
    load = os.getloadavg()
    for name in DATA:
        for solver in ("fixed_point", "interior_point"):
            rows.append(fit(name, solver))
    for name in DATA:
        a, b = (np.asarray(r["coef"]) for r in rows if r["data"] == name)
        rel = np.max(np.abs(a - b)) / np.max(np.abs(b))
        for r in rows:
            if r["data"] == name:
                r["max_rel_coef_diff_between_solvers"] = float(rel)
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'data':14} {'solver':15} {'iterations (per class)':>40} {'warn':>4} {'first s':>8} {'second s':>8} "
          f"{'objective':>12} {'coef diff':>9}")
    for r in rows:
        its = r["iterations"]
        its = f"{min(its)}-{max(its)}" if len(its) > 1 else str(its[0])
        print(f"{r['data']:14} {r['solver']:15} {its:>40} {r['convergence_warnings']:>4} {r['first_fit_s']:8.2f} "
              f"{r['second_fit_s']:8.2f} {r['svm_objective']:12.6f} {r['max_rel_coef_diff_between_solvers']:9.1e}")
    for r in rows:
        del r["coef"]
    write_results("linear_em_solvers", {"load_average_before": load, "rows": rows})


if __name__ == "__main__":
    main()
