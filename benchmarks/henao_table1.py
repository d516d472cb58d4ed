"""Henao et al. (2014) Table 1: BSVM (GPBSVM, ECM + ML-II) beside scikit-learn SVC and GPC.

Mean 10-fold stratified CV error on ionosphere, sonar, wisconsin, crabs, pima and USPS 3 vs 5, the
paper's numbers beside ours, and the wall time of each method; see
:func:`bayes_maxmargin.experiments.henao2014.table1` for the settings and preprocessing. Needs
``BMM_DATA_DIR``. Writes ``benchmarks/results/henao_table1.json`` (``henao_table1_quick.json``
with ``--quick``).

    python benchmarks/henao_table1.py [--quick] [--datasets sonar crabs] [--methods bsvm svm]
                                      [--checkpoint rows.json] [--partitions 6]

``--checkpoint`` keeps the finished (dataset, method) results in a JSON file; a restarted run
computes only the missing ones, so the columns can also be run one at a time into one table
(``--methods bsvm --checkpoint rows.json``, then ``--checkpoint rows.json``).

``--partitions R`` repeats the 10-fold CV over R fold partitions (seeds ``--seed`` to
``--seed + R - 1``) and writes each method's mean CV error per partition, their mean and sd to
``henao_table1_partitions.json``: how much of a gap to the paper's column one partition can explain.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bayes_maxmargin.experiments.henao2014 import (
    BSVM_TABLE1,
    QUICK_BSVM,
    QUICK_DATASETS,
    TABLE1_DATASETS,
    table1,
    table1_markdown,
)

from _common import markdown_table, result_name, write_results


def partitions(names: list[str], methods: list[str], seeds: range, folds: int | None, quick: bool) -> None:
    """Each method's CV error over the fold partitions of ``seeds``, written to
    ``henao_table1_partitions.json``."""
    t0 = time.perf_counter()
    runs = {s: table1(names, methods=methods, n_folds=folds, seed=s, quick=quick)[0] for s in seeds}
    rows = []
    for i, name in enumerate(names):
        paper = runs[seeds[0]][i]["paper_bsvm_error"]
        row = {"dataset": name, "paper_bsvm_%": None if paper is None else 100 * paper}
        for m in methods:
            errs = [100 * runs[s][i][f"{m}_error"] for s in seeds]
            row.update({f"{m}_%_per_partition": errs, f"{m}_%": float(np.mean(errs)),
                        f"{m}_sd": float(np.std(errs, ddof=1))})
        rows.append(row)
    cols = ["dataset", *[c for m in methods for c in (f"{m}_%", f"{m}_sd")], "paper_bsvm_%"]
    table = markdown_table(rows, cols)
    print(table)
    settings = {"datasets": names, "methods": methods, "folds": folds, "seeds": list(seeds), "quick": quick}
    payload = {"settings": settings, "wall_time_s": time.perf_counter() - t0, "rows": rows, "table": table}
    path = write_results(result_name("henao_table1_partitions", quick), payload)
    print(f"written {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 datasets, 2 folds, few iterations (a smoke run)")
    parser.add_argument("--datasets", nargs="+", default=None, help="subset of the six datasets")
    parser.add_argument("--methods", nargs="+", default=["bsvm", "svm", "gpc"], choices=["bsvm", "svm", "gpc"])
    parser.add_argument("--folds", type=int, default=None, help="outer CV folds (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", type=Path, default=None, help="JSON file of finished rows (resume)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="repeat the CV over this many fold partitions (seeds --seed, --seed + 1, ...)")
    args = parser.parse_args()
    if args.partitions is not None and args.partitions < 2:
        parser.error(f"--partitions {args.partitions}: give at least 2")
    if args.partitions and args.checkpoint:
        parser.error("--partitions runs every partition afresh and takes no --checkpoint")
    names = args.datasets or list(QUICK_DATASETS if args.quick else TABLE1_DATASETS)
    if args.partitions:
        partitions(names, args.methods, range(args.seed, args.seed + args.partitions), args.folds, args.quick)
        return
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
