"""Full-GP ECM (``GPBSVM(inference="ecm")``, ML-II) against scikit-learn's GaussianProcessClassifier, side by side in one
process: first fit (compilation included) and second fit of each, held-out error and Brier score.

Data: two half moons (``make_moons(n, noise=0.2, random_state=0)``) of ``--moons`` sizes and the iris
data (3 classes, one-vs-rest), each split 70/30 (stratified, seed 0) and standardised on the training
part. Methods:

* ``gpc``: ``GaussianProcessClassifier(ConstantKernel() * RBF(), random_state=0)`` (Laplace, ML-II on
  amplitude and length-scale) with the process's OpenBLAS threads, as a user runs it;
* ``gpc_1thread``: the same under ``threadpoolctl`` with one OpenBLAS thread (what ``GPBSVM``'s ECM uses);
* ``ecm``: ``GPBSVM(inference="ecm")``, its defaults (ML-II rounds of 20 ECM iterations, at most 10, each
  ML-II step and the rounds stopped once log Z gains at most ``mlii_tol="auto"`` = 1e-4 relative, every
  ECM run as SQUAREM cycles, then the last f-step solved exactly);
* ``ecm_paper``: ``GPBSVM(inference="ecm", mlii_tol=None, accelerate=False, solver="fixed_point")``, the
  paper's schedule (10 rounds of 10 L-BFGS iterations, plain ECM iterations to the end);
* ``ecm_fast``: ``GPBSVM(inference="ecm", mlii_tol=1e-3)``.

Brier score: mean over test rows of sum_k (p_k - 1[y = k])^2 (twice the binary Brier score for two
classes). Each fit records the 1-minute load average before it (``os.getloadavg``); read the ratios of
fits timed close together, not the seconds, on a shared machine. Writes
``benchmarks/results/ecm_speed.json`` (``_quick`` with ``--quick``, ``_<tag>`` with ``--tag``).

    python benchmarks/ecm_speed.py [--quick] [--moons 400 1400] [--methods gpc ecm ecm_fast ...] [--no-iris]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import markdown_table, result_name, write_results  # noqa: E402

METHODS = {
    "ecm": {},
    "ecm_paper": {"mlii_tol": None, "accelerate": False, "solver": "fixed_point"},
    "ecm_fast": {"mlii_tol": 1e-3},
}


def datasets(moons: list[int], iris: bool = True) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Standardised 70/30 splits of the moons of each size and of iris."""
    from sklearn.datasets import load_iris, make_moons
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    raw = {f"moons_{n}": make_moons(n, noise=0.2, random_state=0) for n in moons}
    if iris:
        raw["iris"] = load_iris(return_X_y=True)
    out = {}
    for name, (X, y) in raw.items():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        scaler = StandardScaler().fit(Xtr)
        out[name] = (scaler.transform(Xtr), scaler.transform(Xte), ytr, yte)
    return out


def make(method: str) -> Any:
    if method.startswith("gpc"):
        from sklearn.gaussian_process import GaussianProcessClassifier
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel

        return GaussianProcessClassifier(ConstantKernel() * RBF(), random_state=0)
    from bayes_maxmargin import GPBSVM

    return GPBSVM(inference="ecm", progress_bar=False, **METHODS[method])


def timed_fit(method: str, Xtr: np.ndarray, ytr: np.ndarray) -> tuple[Any, float, float]:
    """A fresh estimator fitted once; its wall time and the load average before it."""
    from threadpoolctl import threadpool_limits

    load = os.getloadavg()[0]
    est = make(method)
    t0 = time.perf_counter()
    if method == "gpc_1thread":
        with threadpool_limits(limits=1, user_api="blas"):
            est.fit(Xtr, ytr)
    else:
        est.fit(Xtr, ytr)
    return est, time.perf_counter() - t0, load


def scores(est: Any, Xte: np.ndarray, yte: np.ndarray) -> tuple[float, float]:
    proba = est.predict_proba(Xte)
    onehot = (yte[:, None] == est.classes_[None, :]).astype(float)
    error = float(np.mean(est.classes_[np.argmax(proba, axis=1)] != yte))
    return error, float(np.mean(np.sum((proba - onehot) ** 2, axis=1)))


def run(moons: list[int], methods: list[str], iris: bool = True) -> list[dict[str, Any]]:
    rows = []
    for name, (Xtr, Xte, ytr, yte) in datasets(moons, iris).items():
        for method in methods:
            est, first, load_first = timed_fit(method, Xtr, ytr)
            est, second, load_second = timed_fit(method, Xtr, ytr)
            error, brier = scores(est, Xte, yte)
            row = {"data": name, "n_train": len(ytr), "method": method, "first_fit_s": first,
                   "second_fit_s": second, "error": error, "brier": brier, "load_first": load_first,
                   "load_second": load_second, "n_iter": int(np.sum(getattr(est, "n_iter_", 0)))}
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    for row in rows:  # ratios to GPC on the same data
        ref = {r["method"]: r for r in rows if r["data"] == row["data"]}.get("gpc")
        if ref is not None:
            row["second_vs_gpc"] = row["second_fit_s"] / ref["second_fit_s"]
            row["error_vs_gpc"] = row["error"] / ref["error"] if ref["error"] else float("nan")
            row["brier_vs_gpc"] = row["brier"] / ref["brier"]
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: 100 moons, GPC and the fast ECM only")
    p.add_argument("--moons", type=int, nargs="+", default=[400, 1400])
    p.add_argument("--methods", nargs="+", default=["gpc", "gpc_1thread", *METHODS],
                   choices=["gpc", "gpc_1thread", *METHODS])
    p.add_argument("--no-iris", action="store_true", help="the moons only")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    moons, methods = ([100], ["gpc", "ecm_fast"]) if args.quick else (args.moons, args.methods)
    rows = run(moons, methods, not args.no_iris)
    cols = ["data", "method", "first_fit_s", "second_fit_s", "second_vs_gpc", "error", "brier", "load_second"]
    print(markdown_table(rows, [c for c in cols if all(c in r for r in rows)]))
    path = write_results(result_name("ecm_speed", args.quick, args.tag), {"rows": rows, "moons": moons})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
