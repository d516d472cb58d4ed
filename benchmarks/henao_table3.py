"""Henao et al. (2014) Table 3: the eight discriminative factor models on USPS 3 vs 5 and p53_proxy.

See :func:`bayes_maxmargin.experiments.henao2014_factor.table3` for the settings. Needs
``BMM_DATA_DIR``. Writes ``benchmarks/results/henao_table3.json`` (``henao_table3_quick.json`` with
``--quick``).

    python benchmarks/henao_table3.py [--quick] [--datasets usps_3vs5] [--variants NDFM VNDFM]
                                      [--repetitions 5] [--num-warmup 600 --num-samples 60]
"""

from __future__ import annotations

import argparse

from bayes_maxmargin.experiments.henao2014_factor import VARIANTS, table3

from _common import write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke settings (not a reproduction)")
    parser.add_argument("--datasets", nargs="+", default=["usps_3vs5", "p53_proxy"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--num-warmup", type=int, default=None)
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--n-blocks", type=int, default=None)
    parser.add_argument("--thin", type=int, default=None)
    parser.add_argument("--vb-iter", type=int, default=None)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    factor = {k: v for k, v in dict(num_warmup=args.num_warmup, num_samples=args.num_samples,
                                    n_blocks=args.n_blocks, thin=args.thin,
                                    max_iter=args.vb_iter).items() if v is not None}
    rows, table = table3(args.datasets, args.variants, repetitions=args.repetitions, folds=args.folds,
                         quick=args.quick, factor=factor)
    print(table)
    name = "henao_table3" + ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag else "")
    write_results(name, {"rows": rows, "table": table, "args": vars(args)})


if __name__ == "__main__":
    main()
