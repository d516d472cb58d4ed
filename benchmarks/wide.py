"""Wide data (p >> n): first and second fit of every linear prior and inference method, n = 20, d = 5000.

With more coefficients than points the linear models work in n dimensions: EM and VB through the
Woodbury identity, Gibbs with the O(n^2 d) draw of Bhattacharya, Chakraborty & Mallick (2016), NUTS
and SVI in the row space of the whitened design (``models.linear.row_space``). The priors of Luts &
Ormerod (2014) (``prior="penalty"``, ``prior="laplace_zero"``, a random intercept per group) are fitted
by VB and Gibbs in the same n-dimensional form. The second fit is the time after compilation (wall
clock; the seconds it still compiled, when a sampler on a loaded machine shortened its chunks to
another length than in the first fit; and the CPU time of the process, which a loaded machine
inflates less); the load average is printed with the table. ``--dataset leukemia`` (72 x 7129, from ``BMM_DATA_DIR``) runs the same
on real p >> n data. ``missing="model"`` is not run: its imputation model has a d x d covariance.

Usage::

    python benchmarks/wide.py                       # prior="gaussian": em, vb, gibbs, svi, nuts
    python benchmarks/wide.py --priors all          # every prior x inference
    python benchmarks/wide.py --priors laplace_zero --methods vb
    python benchmarks/wide.py --dataset leukemia
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, result_name, write_results  # noqa: E402

from bayes_maxmargin import LinearBSVM  # noqa: E402

METHODS = ["em", "vb", "gibbs", "svi", "nuts"]
SETTINGS = {"svi": {"batch_size": 10}}  # batch_size must not exceed n
#: Each prior's estimator settings, its inference methods, and whether it fits a random intercept per group.
PRIORS = {
    "gaussian": ({}, METHODS, False),
    "penalty": ({"prior": "penalty"}, ["vb", "gibbs"], False),
    "laplace_zero": ({"prior": "laplace_zero"}, ["vb", "gibbs"], False),
    "random_intercept": ({}, ["vb", "gibbs"], True),
}
GROUPS = 4  # random_intercept: rows assigned to groups in turn


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "synthetic":
        rng = np.random.default_rng(1)
        X = rng.normal(size=(20, 5000))
        return X, (X[:, 0] + 0.3 * rng.normal(size=20) > 0).astype(int)
    from bayes_maxmargin.data import load_dataset

    data = load_dataset(name)
    X, y = np.asarray(data.X, dtype=float), np.asarray(data.y)
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    return X, y


_COMPILE_SECONDS = [0.0]


def _count_compilation(event: str, seconds: float, **kwargs) -> None:
    if event.startswith("/jax/core/compile/"):
        _COMPILE_SECONDS[0] += seconds


def _fit_times(X: np.ndarray, y: np.ndarray, method: str, prior: str) -> dict:
    """Two fits of one prior and method: wall-clock seconds of each; of the second also its CPU seconds
    and the seconds it compiled (a sampler whose chunks run slowly compiles shorter ones, and on a
    loaded machine the second fit may pick another length than the first)."""
    settings, _, grouped = PRIORS[prior]
    groups = np.arange(X.shape[0]) % GROUPS if grouped else None
    times = []
    for _ in range(2):
        start, cpu, compiling = time.perf_counter(), time.process_time(), _COMPILE_SECONDS[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = LinearBSVM(method, random_state=0, progress_bar=False, **settings, **SETTINGS.get(method, {}))
            est.fit(X, y, groups=groups)
        times.append((time.perf_counter() - start, time.process_time() - cpu, _COMPILE_SECONDS[0] - compiling))
    (first, _, _), (second, second_cpu, second_compile) = times
    return {"prior": prior, "method": method, "first_fit_s": first, "second_fit_s": second,
            "second_fit_compile_s": second_compile, "second_fit_cpu_s": second_cpu,
            "train_accuracy": float((est.predict(X, groups=groups) == y).mean()),
            "posterior": type(est._posterior).__name__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--priors", nargs="+", default=["gaussian"], choices=[*PRIORS, "all"],
                        help="priors to fit ('all': every prior with each of its inference methods)")
    parser.add_argument("--dataset", default="synthetic")
    args = parser.parse_args()
    priors = list(PRIORS) if "all" in args.priors else args.priors
    jax.monitoring.register_event_duration_secs_listener(_count_compilation)
    X, y = _data(args.dataset)
    rows = []
    for prior in priors:
        for method in [m for m in PRIORS[prior][1] if m in args.methods]:
            rows.append(_fit_times(X, y, method, prior))
            print(rows[-1], f"load {os.getloadavg()[0]:.1f}", flush=True)
    load = os.getloadavg()
    columns = ["prior", "method", "first_fit_s", "second_fit_s", "second_fit_compile_s", "second_fit_cpu_s",
               "train_accuracy", "posterior"]
    print(f"{args.dataset}: n = {X.shape[0]}, d = {X.shape[1]}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"(1, 5, 15 min), {os.cpu_count()} CPUs\n{markdown_table(rows, columns)}")
    path = write_results(result_name(f"wide_{args.dataset}", tag="" if priors == ["gaussian"] else "priors"),
                         {"n": X.shape[0], "d": X.shape[1], "rows": rows, "load_average": load})
    print("wrote", path)


if __name__ == "__main__":
    main()
