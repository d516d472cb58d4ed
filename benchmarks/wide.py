"""Wide data (p >> n): first and second fit of every linear inference method, n = 20, d = 5000.

With more coefficients than points the linear models work in n dimensions: EM and VB through the
Woodbury identity, Gibbs with the O(n^2 d) draw of Bhattacharya, Chakraborty & Mallick (2016), NUTS
and SVI in the row space of the whitened design (``models.linear.row_space``). The second fit is the
time after compilation. ``--dataset leukemia`` (72 x 7129, from ``BMM_DATA_DIR``) runs the same on
real p >> n data.

Usage::

    python benchmarks/wide.py                     # n = 20, d = 5000 (the default settings of each method)
    python benchmarks/wide.py --methods em vb     # a subset
    python benchmarks/wide.py --dataset leukemia
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, result_name, write_results  # noqa: E402

from bayes_maxmargin import LinearBSVM  # noqa: E402

METHODS = ["em", "vb", "gibbs", "svi", "nuts"]
SETTINGS = {"svi": {"batch_size": 10}}  # batch_size must not exceed n


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--dataset", default="synthetic")
    args = parser.parse_args()
    X, y = _data(args.dataset)
    rows = []
    for method in args.methods:
        times = []
        for _ in range(2):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = LinearBSVM(method, random_state=0, progress_bar=False, **SETTINGS.get(method, {})).fit(X, y)
            times.append(time.perf_counter() - start)
        rows.append({"method": method, "first_fit_s": times[0], "second_fit_s": times[1],
                     "train_accuracy": float((est.predict(X) == y).mean())})
        print(rows[-1], flush=True)
    load = os.getloadavg()
    table = markdown_table(rows, ["method", "first_fit_s", "second_fit_s", "train_accuracy"])
    print(f"{args.dataset}: n = {X.shape[0]}, d = {X.shape[1]}; load average {load[0]:.1f}\n{table}")
    path = write_results(result_name(f"wide_{args.dataset}"), {"n": X.shape[0], "d": X.shape[1], "rows": rows,
                                                               "load_average": load})
    print("wrote", path)


if __name__ == "__main__":
    main()
