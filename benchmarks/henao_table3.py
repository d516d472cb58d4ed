"""Henao et al. (2014) Table 3: the eight discriminative factor models on USPS 3 vs 5 and p53_proxy.

See :func:`bayes_maxmargin.experiments.henao2014_factor.table3` for the settings. Needs
``BMM_DATA_DIR``. Writes ``benchmarks/results/henao_table3.json`` (``henao_table3_quick.json`` with
``--quick``).

    python benchmarks/henao_table3.py [--quick] [--datasets usps_3vs5] [--variants NDFM VNDFM NDFM-probit]
                                      [--repetitions 5] [--num-warmup 600 --num-samples 60]
                                      [--checkpoint rows.json] [--one-score] [--model-seed 1] [--tag name]
    python benchmarks/henao_table3.py --baselines [--repetitions 5]

``--checkpoint`` keeps each finished (dataset, variant) row in a JSON file; a restarted run
computes only the missing ones. ``--baselines`` instead runs RBF SVCs on the pixels and on 10 and 20
principal components of the same USPS splits (``table3_baselines`` of
``bayes_maxmargin.experiments.henao2014_factor``) and writes ``henao_table3_baselines.json``.
``--model-seed`` seeds the estimators apart from the splits (default 0, the splits' seed), for another
chain on the same splits.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bayes_maxmargin.experiments.henao2014_factor import (
    EXTRA_VARIANTS,
    VARIANTS,
    table3,
    table3_baselines,
    table3_markdown,
    table3_settings,
)

from _common import result_name, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke settings (not a reproduction)")
    parser.add_argument("--datasets", nargs="+", default=["usps_3vs5", "p53_proxy"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS + EXTRA_VARIANTS))
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--num-warmup", type=int, default=None)
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--n-blocks", type=int, default=None)
    parser.add_argument("--one-score", action="store_true",
                        help="update the factor scores one at a time (n_blocks=None, the paper's scheme)")
    parser.add_argument("--thin", type=int, default=None)
    parser.add_argument("--vb-iter", type=int, default=None)
    parser.add_argument("--model-seed", type=int, default=None, help="the estimators' random_state")
    parser.add_argument("--tag", default="")
    parser.add_argument("--checkpoint", type=Path, default=None, help="JSON file of finished rows (resume)")
    parser.add_argument("--baselines", action="store_true",
                        help="only the SVC baselines (pixels, 10 and 20 principal components) on the USPS splits")
    args = parser.parse_args()
    if args.baselines:
        rows = table3_baselines(args.repetitions, max_n=100 if args.quick else None)
        table = "\n".join(["| USPS 3 vs 5, RBF SVC on | error % (mean ± sd) | per split |", "|---|---|---|"] + [
            f"| {r['features']} | {100 * r['error']:.2f} ± {100 * r['error_sd']:.2f} | "
            + ", ".join(f"{100 * e:.2f}" for e in r["errors"]) + " |" for r in rows])
        print(table)
        write_results(result_name("henao_table3_baselines", args.quick),
                      {"rows": rows, "table": table, "args": {"repetitions": args.repetitions, "quick": args.quick}})
        return
    done = json.loads(args.checkpoint.read_text()) if args.checkpoint and args.checkpoint.exists() else {}
    factor = {k: v for k, v in dict(num_warmup=args.num_warmup, num_samples=args.num_samples,
                                    n_blocks=args.n_blocks, thin=args.thin,
                                    max_iter=args.vb_iter, random_state=args.model_seed).items() if v is not None}
    if args.one_score:
        factor["n_blocks"] = None
    rows = []
    for dataset in args.datasets:
        for variant in args.variants:
            key = f"{dataset}/{variant}"
            if key not in done:
                done[key] = table3([dataset], [variant], repetitions=args.repetitions, folds=args.folds,
                                   quick=args.quick, factor=factor)[0][0]
                if args.checkpoint:
                    args.checkpoint.write_text(json.dumps(done))
            rows.append(done[key])
    table = table3_markdown(rows, quick=args.quick, settings=table3_settings(args.quick, factor))
    print(table)
    write_results(result_name("henao_table3", args.quick, args.tag),
                  {"rows": rows, "table": table,
                   "args": {**vars(args), "checkpoint": args.checkpoint and str(args.checkpoint)}})


if __name__ == "__main__":
    main()
