"""Chen et al. (2015) Table 4: CPU seconds of 200 Gibbs iterations of MMLDP, KMMDP, ssKMMDP beside
scikit-learn LDA and LinearSVC, and the USPS speed check (KMMDP, 100 basis vectors, K = 9, 10 classes
one-vs-all; ssKMMDP beside it).

See :func:`bayes_maxmargin.experiments.chen2015.table4`. Needs ``BMM_DATA_DIR``. Writes
``benchmarks/results/chen_table4.json`` (``chen_table4_quick.json`` with ``--quick``).

    python benchmarks/chen_table4.py [--quick] [--datasets usps heart] [--methods KMMDP ssKMMDP] [--tag NAME]
    python benchmarks/chen_table4.py --usps-speed     # the standard 7291-digit training set only
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bayes_maxmargin import MaxMarginProjection, load_dataset
from bayes_maxmargin.experiments.chen2015 import TABLE4_METHODS, table4

from _common import result_name, write_results


def usps_speed(iterations: int = 100, seed: int = 0) -> dict:
    """KMMDP (M = 100 k-means basis vectors, K = 9, Gaussian kernel) and ssKMMDP on the standard
    USPS training set (7291 digits, 10 classes one-vs-all), 100 burn-in + 100 kept iterations:
    wall and CPU seconds of a first fit (compilation included) and of a second (compiled) fit, and
    the test accuracy on the 2007 test digits."""
    ds = load_dataset("usps")
    tr = ds.split == "train"
    X, y, X_te, y_te = ds.X[tr], ds.y[tr], ds.X[~tr], ds.y[~tr]
    out = {"n_train": int(tr.sum())}
    for name, ss in (("KMMDP", False), ("ssKMMDP", True)):
        for rep in ("first", "second"):
            m = MaxMarginProjection(9, kernel="rbf", kernel_params={"lengthscale": 10.0}, n_basis=100, spike_slab=ss,
                                    num_warmup=iterations, num_samples=iterations, random_state=seed)
            t, c = time.perf_counter(), time.process_time()
            m.fit(X, y)
            out[f"{name}_{rep}_wall"], out[f"{name}_{rep}_cpu"] = time.perf_counter() - t, time.process_time() - c
        out[f"{name}_accuracy"] = float(m.score(X_te, y_te))
        out[f"{name}_mean_basis_used"] = float(np.mean(m.n_basis_used_))
        print(name, {k: round(v, 3) for k, v in out.items() if k.startswith(name)}, flush=True)
    out["ss_over_kmmdp_wall"] = out["ssKMMDP_second_wall"] / out["KMMDP_second_wall"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 datasets, 20 + 20 iterations")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--methods", nargs="+", default=None, choices=list(TABLE4_METHODS),
                        help="a subset of the columns (the others read '-')")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--usps-speed", action="store_true", help="only the USPS KMMDP / ssKMMDP speed check")
    parser.add_argument("--tag", default="", help="appended to the result file name")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.usps_speed:
        out = usps_speed(seed=args.seed)
        print(f"written {write_results('chen_usps_speed', {'settings': vars(args), **out})}")
        return
    rows, table = table4(args.datasets, seed=args.seed, quick=args.quick, verbose=True, methods=args.methods)
    print(table)
    path = write_results(result_name("chen_table4", args.quick, args.tag),
                         {"settings": vars(args), "wall_time_s": time.perf_counter() - t0, "rows": rows,
                          "table": table})
    print(f"written {path}")


if __name__ == "__main__":
    main()
