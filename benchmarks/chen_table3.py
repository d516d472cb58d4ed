"""Chen et al. (2015) Table 3: MMLDP, G/PKMMDP, ssG/PKMMDP beside the baselines (SVCs, LDA, LDE, KLDA, KLDE).

Mean test accuracy and sd over stratified 70 / 30 splits, the paper's numbers beside ours; see
:func:`bayes_maxmargin.experiments.chen2015.table3` for the settings. Needs ``BMM_DATA_DIR``.
Writes ``benchmarks/results/chen_table3.json`` (``chen_table3_quick.json`` with ``--quick``).

    python benchmarks/chen_table3.py [--quick] [--datasets heart diabetis] [--methods GKMMDP LiSVM]
                                     [--splits 5] [--max-seconds 3600] [--iterations 1000 1000]
                                     [--lengthscale-grid 1 2 4] [--tag selected]
"""

from __future__ import annotations

import argparse
import time

from bayes_maxmargin.experiments.chen2015 import TABLE3_METHODS, table3

from _common import result_name, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 datasets, 2 splits, 20 + 20 iterations")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--methods", nargs="+", default=None, choices=list(TABLE3_METHODS))
    parser.add_argument("--splits", type=int, default=None, help="splits per dataset (default: the paper's)")
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, nargs=2, metavar=("WARMUP", "KEPT"), default=None,
                        help="Gibbs iterations of the Bayesian methods (default: 100 100)")
    parser.add_argument("--lengthscale-grid", type=float, nargs="+", default=None,
                        help="Gaussian-kernel length-scales (x sqrt(P)) chosen by 3-fold CV on each training split")
    parser.add_argument("--tag", default="", help="appended to the result file name")
    args = parser.parse_args()
    overrides = {"lengthscale_grid": args.lengthscale_grid}
    if args.iterations:
        overrides.update(num_warmup=args.iterations[0], num_samples=args.iterations[1])
    t0 = time.perf_counter()
    rows, table = table3(args.datasets, args.methods, n_splits=args.splits, seed=args.seed, quick=args.quick,
                         max_seconds=args.max_seconds, settings=overrides, verbose=True)
    print(table)
    settings = vars(args)
    path = write_results(result_name("chen_table3", args.quick, args.tag),
                         {"settings": settings, "wall_time_s": time.perf_counter() - t0, "rows": rows, "table": table})
    print(f"written {path}")


if __name__ == "__main__":
    main()
