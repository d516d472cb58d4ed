"""Henao et al. (2014) Table 2: FITC-BSVM (M = 100) on USPS 3 vs 5 and 4 vs non-4.

The 7291 / 2007 split, 10 repetitions of the k-means initialisation of the pseudo-inputs: mean and
standard deviation of the test error beside the paper's, and the time per fit; see
:func:`bayes_maxmargin.experiments.henao2014.table2`. Needs ``BMM_DATA_DIR``. Writes
``benchmarks/results/henao_table2.json`` (``henao_table2_quick.json`` with ``--quick``).

    python benchmarks/henao_table2.py [--quick] [--tasks 3vs5] [--repetitions 10] [--checkpoint rows.json]

``--checkpoint`` keeps the rows of finished tasks in a JSON file and skips them on a restart.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import result_name, write_results

from bayes_maxmargin.experiments.henao2014 import (
    FITC_TABLE2,
    QUICK_FITC,
    TABLE2_TASKS,
    table2,
    table2_markdown,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="subsets, M = 10, 2 repetitions (a smoke run)")
    parser.add_argument("--tasks", nargs="+", default=list(TABLE2_TASKS), choices=list(TABLE2_TASKS))
    parser.add_argument("--repetitions", type=int, default=None, help="k-means initialisations (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", type=Path, default=None, help="JSON file of finished rows (resume)")
    args = parser.parse_args()
    done = json.loads(args.checkpoint.read_text()) if args.checkpoint and args.checkpoint.exists() else {}
    t0 = time.perf_counter()
    rows = []
    for task in args.tasks:
        if task not in done:
            done[task] = table2([task], repetitions=args.repetitions, seed=args.seed, quick=args.quick)[0][0]
            if args.checkpoint:
                args.checkpoint.write_text(json.dumps(done, default=float))
        rows.append(done[task])
    wall = time.perf_counter() - t0
    fitc = dict(FITC_TABLE2, **(QUICK_FITC if args.quick else {}))
    table = table2_markdown(rows, settings=fitc, seed=args.seed, quick=args.quick)
    print(table)
    settings = {"tasks": args.tasks, "repetitions": args.repetitions, "seed": args.seed, "quick": args.quick}
    path = write_results(result_name("henao_table2", args.quick),
                         {"settings": settings, "wall_time_s": wall, "rows": rows, "table": table})
    print(f"written {path}")


if __name__ == "__main__":
    main()
