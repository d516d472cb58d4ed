"""Chen et al. (2015) Table 4: CPU seconds of 200 Gibbs iterations of MMLDP, KMMDP, ssKMMDP beside
scikit-learn LDA and LinearSVC, and the USPS speed check (KMMDP, 100 basis vectors, K = 9, 10 classes
one-vs-all; ssKMMDP beside it).

See :func:`bayes_maxmargin.experiments.chen2015.table4`. Needs ``BMM_DATA_DIR``. Writes
``benchmarks/results/chen_table4.json`` (``chen_table4_quick.json`` with ``--quick``).

    python benchmarks/chen_table4.py [--quick] [--datasets usps heart]
"""

from __future__ import annotations

import argparse
import time

from bayes_maxmargin.experiments.chen2015 import table4

from _common import write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 datasets, 20 + 20 iterations")
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows, table = table4(args.datasets, seed=args.seed, quick=args.quick, verbose=True)
    print(table)
    path = write_results("chen_table4" + ("_quick" if args.quick else ""),
                         {"settings": vars(args), "wall_time_s": time.perf_counter() - t0, "rows": rows,
                          "table": table})
    print(f"written {path}")


if __name__ == "__main__":
    main()
