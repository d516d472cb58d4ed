"""Numerical stress: every model and inference method on data built to break naive code.

Cases: perfectly separable data (lambda -> 0 at the margin), points exactly on the margin,
duplicated points, feature scales from 1e-6 to 1e6, n much smaller than d, and float32
throughout. For each model x case the table reports the non-finite values in the fitted
state (``idata_`` posterior), the predicted probabilities and the decision values (all must be 0),
or the error the fit raised (a clear ``ValueError`` is an accepted outcome, a NaN is not).

Where the fixes act (documented in their docstrings): the 1 / lambda floor
(``augmentation.margin_floor``) for points on the margin; jittered Cholesky
(``linalg.jittered_cholesky``) for duplicated points and ill-conditioned kernels; float64 by default
for GP models; the driver's non-finite check that stops a run with a named variable.

Usage::

    python benchmarks/stress.py            # every model and case
    python benchmarks/stress.py --quick    # a few models, small settings
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, result_name, write_results  # noqa: E402

from bayes_maxmargin import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection

N, D = 24, 4
MC = dict(num_samples=40, num_warmup=40, num_chains=2, progress_bar=False, random_state=0)


def _base(seed: int = 0, n: int = N, d: int = D) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1, -1)


def _separable() -> tuple[np.ndarray, np.ndarray]:
    X, _ = _base()
    y = np.where(X[:, 0] > 0, 1, -1)
    X[:, 0] += 3.0 * y  # a wide gap: every hinge term goes to 0, lambda -> 0
    return X, y


def _on_margin() -> tuple[np.ndarray, np.ndarray]:
    X, y = _base()
    X[:, 0] = y * 1.0  # y x_0 = 1 exactly: 1 - y f = 0 for f = x_0
    X[:, 1:] = 0.0
    return X, y


def _duplicates() -> tuple[np.ndarray, np.ndarray]:
    X, y = _base()
    X[N // 2 :], y[N // 2 :] = X[: N // 2], y[: N // 2]
    return X, y


def _scales() -> tuple[np.ndarray, np.ndarray]:
    X, y = _base()
    return X * np.logspace(-6, 6, D), y


def _n_much_smaller_than_d() -> tuple[np.ndarray, np.ndarray]:
    return _base(n=12, d=200)


def _float32() -> tuple[np.ndarray, np.ndarray]:
    X, y = _base()
    return X.astype(np.float32), y


CASES: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "separable": _separable,
    "on margin": _on_margin,
    "duplicates": _duplicates,
    "scales 1e-6..1e6": _scales,
    "n << d": _n_much_smaller_than_d,
    "float32": _float32,
}

MODELS: dict[str, Callable[[], Any]] = {
    "linear gibbs": lambda: LinearBSVM(**MC),
    "linear em": lambda: LinearBSVM(inference="em", gamma_prior=(2.0, 1.0)),
    "linear nuts": lambda: LinearBSVM(inference="nuts", **MC),
    "linear vb": lambda: LinearBSVM(inference="vb"),
    "linear vb laplace_zero": lambda: LinearBSVM(inference="vb", prior="laplace_zero"),
    "linear gibbs penalty": lambda: LinearBSVM(prior="penalty", **MC),
    "linear svi": lambda: LinearBSVM(inference="svi", batch_size=8, max_iter=200, random_state=0),
    "gp ecm": lambda: GPBSVM(inference="ecm", max_iter=50, random_state=0),
    "gp fitc": lambda: GPBSVM(inference="fitc", num_inducing=6, max_iter=50, random_state=0),
    "gp gibbs": lambda: GPBSVM(inference="gibbs", learn_kernel=False, **MC),
    "gp vi": lambda: GPBSVM(inference="vi"),
    "gp svi": lambda: GPBSVM(inference="svi", num_inducing=6, batch_size=8, max_iter=200, random_state=0),
    "mmldp": lambda: MaxMarginProjection(n_components=2, num_samples=20, num_warmup=20, random_state=0),
    "sskmmdp": lambda: MaxMarginProjection(n_components=2, kernel="rbf", n_basis=8, spike_slab=True,
                                           num_samples=20, num_warmup=20, random_state=0),
    "factor gibbs gp": lambda: FactorBSVM(n_factors=2, classifier="gp", num_samples=10, num_warmup=20,
                                          random_state=0),
    "factor vbem gp": lambda: FactorBSVM(n_factors=2, classifier="gp", inference="vbem", random_state=0),
}
QUICK = ("linear em", "linear vb", "gp vi", "sskmmdp")


def _nonfinite(values: Any) -> int:
    arr = np.asarray(values, dtype=float)
    return int(arr.size - np.isfinite(arr).sum())


def stress(model: str, case: str) -> dict[str, Any]:
    """Fit ``model`` on ``case``; count non-finite values in its outputs, or record its error."""
    X, y = CASES[case]()
    est = MODELS[model]()
    if X.dtype == np.float32 and "precision" in est.get_params():  # float32 throughout
        est.set_params(precision="float32")
    row: dict[str, Any] = {"model": model, "case": case}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
    except (ValueError, TypeError, FloatingPointError) as err:
        row.update(nonfinite=0, outcome=f"{type(err).__name__}: {str(err)[:80]}", seconds=time.perf_counter() - t0)
        return row
    counts = sum(_nonfinite(v.values) for v in est.idata_.posterior.data_vars.values())
    counts += _nonfinite(est.decision_function(X))
    if hasattr(est, "predict_proba"):
        proba = est.predict_proba(X)
        counts += _nonfinite(proba) + int(((proba < 0) | (proba > 1)).sum())
    row.update(nonfinite=counts, outcome=f"fit, train accuracy {np.mean(est.predict(X) == y):.2f}",
               seconds=time.perf_counter() - t0)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--out", type=Path, default=None, help="folder for the JSON result")
    args = parser.parse_args(argv)
    models = QUICK if args.quick else tuple(MODELS)
    rows = [stress(m, c) for m in models for c in CASES]
    print(markdown_table(rows, ["model", "case", "nonfinite", "outcome", "seconds"]))
    total = sum(r["nonfinite"] for r in rows)
    print(f"\nnon-finite values in all outputs: {total}")
    name = result_name("stress", args.quick)
    write_results(name, {"rows": rows, "total_nonfinite": total}, *([args.out] if args.out else []))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
