"""Henao et al. (2014) Table 1: BSVM (GPBSVM, ECM + ML-II) beside scikit-learn SVC and GPC.

Mean 10-fold stratified CV error on ionosphere, sonar, wisconsin, crabs, pima and USPS 3 vs 5, the
paper's numbers beside ours, and the wall time of each method; see
:func:`bayes_maxmargin.experiments.henao2014.table1` for the settings and preprocessing. Needs
``BMM_DATA_DIR``. Writes ``benchmarks/results/henao_table1.json`` (``henao_table1_quick.json``
with ``--quick``).

    python benchmarks/henao_table1.py [--quick] [--datasets sonar crabs] [--methods bsvm svm]
                                      [--checkpoint rows.json]

``--checkpoint`` keeps the finished (dataset, method) results in a JSON file; a restarted run
computes only the missing ones, so the columns can also be run one at a time into one table
(``--methods bsvm --checkpoint rows.json``, then ``--checkpoint rows.json``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bayes_maxmargin.experiments.henao2014 import (
    BSVM_TABLE1,
    QUICK_BSVM,
    QUICK_DATASETS,
    TABLE1_DATASETS,
    table1,
    table1_markdown,
)

from _common import result_name, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 datasets, 2 folds, few iterations (a smoke run)")
    parser.add_argument("--datasets", nargs="+", default=None, help="subset of the six datasets")
    parser.add_argument("--methods", nargs="+", default=["bsvm", "svm", "gpc"], choices=["bsvm", "svm", "gpc"])
    parser.add_argument("--folds", type=int, default=None, help="outer CV folds (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", type=Path, default=None, help="JSON file of finished rows (resume)")
    args = parser.parse_args()
    names = args.datasets or list(QUICK_DATASETS if args.quick else TABLE1_DATASETS)
    done = json.loads(args.checkpoint.read_text()) if args.checkpoint and args.checkpoint.exists() else {}
    t0 = time.perf_counter()
    rows = []
    for name in names:
        row = done.get(name, {})
        missing = [m for m in args.methods if row.get(f"{m}_error") is None]
        if missing:
            new = table1([name], methods=missing, n_folds=args.folds, seed=args.seed, quick=args.quick)[0][0]
            row.update({k: v for k, v in new.items() if v is not None or k not in row})
            done[name] = row
            if args.checkpoint:
                args.checkpoint.write_text(json.dumps(done, default=float))
        rows.append(row)
    wall = time.perf_counter() - t0
    n_folds = rows[0]["n_folds"]
    bsvm = dict(BSVM_TABLE1, **(QUICK_BSVM if args.quick else {}))
    table = table1_markdown(rows, bsvm_settings=bsvm, n_folds=n_folds, inner_folds=2 if args.quick else 5,
                            seed=args.seed, quick=args.quick)
    print(table)
    settings = {"datasets": args.datasets, "methods": args.methods, "folds": args.folds, "seed": args.seed,
                "quick": args.quick}
    path = write_results(result_name("henao_table1", args.quick),
                         {"settings": settings, "wall_time_s": wall, "rows": rows, "table": table})
    print(f"written {path}")


if __name__ == "__main__":
    main()
