"""Wenzel et al. (2017) Table 1 (S-BSVM, ECM, GPC, SVM + Platt: 10-fold CV error, Brier score, time)
and, with ``--fig1``, Figure 1 (held-out error against training time on waveform).

See :mod:`bayes_maxmargin.experiments.wenzel2017` for the settings. Needs ``BMM_DATA_DIR``. Writes
``benchmarks/results/wenzel_table1.json`` (``wenzel_table1_quick.json`` with ``--quick``) and,
with ``--fig1``, ``wenzel_fig1.json`` and ``wenzel_fig1.png``.

    python benchmarks/wenzel_table1.py [--quick] [--datasets heart german] [--methods sbsvm svm]
                                       [--folds 10] [--checkpoint results/wenzel_table1_ckpt.json]
                                       [--max-folds gpc:waveform=1 ecm:splice=2] [--fig1]

``--checkpoint`` (default ``benchmarks/results/wenzel_table1_checkpoint.json``; ``none`` to
disable) keeps every finished (dataset, method); a rerun computes only the missing ones, so the
columns can be run one at a time (``--methods sbsvm svm``, then ``--methods ecm gpc``); a bare
``--methods`` fits nothing and tabulates what the checkpoint holds.
"""

from __future__ import annotations

import argparse
import time

from bayes_maxmargin.experiments.wenzel2017 import METHODS, QUICK_DATASETS, TABLE1_DATASETS, fig1, table1

from _common import RESULTS, result_name, write_results

#: Default fold caps of the slow methods on the large sets (GPC took 8691 s on waveform in the paper).
DEFAULT_MAX_FOLDS = ("gpc:waveform=2", "gpc:splice=3", "ecm:waveform=2", "ecm:splice=3")


def _parse_caps(items):
    caps: dict[str, dict[str, int] | int] = {}
    for item in items or ():
        method, _, rest = item.partition(":")
        if "=" in rest:
            name, _, k = rest.partition("=")
            caps.setdefault(method, {})[name] = int(k)
        else:
            caps[method] = int(rest)
    return caps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 datasets, 2 folds, few steps (a smoke run)")
    parser.add_argument("--datasets", nargs="+", default=None, help="subset of the seven datasets")
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS),
                        help="methods to fit; none (a bare --methods): only tabulate the checkpoint")
    parser.add_argument("--folds", type=int, default=None, help="CV folds (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=str(RESULTS / "wenzel_table1_checkpoint.json"),
                        help="JSON file of finished (dataset, method) results; 'none' to disable")
    parser.add_argument("--max-folds", nargs="*", default=list(DEFAULT_MAX_FOLDS),
                        help="fold caps METHOD=K or METHOD:DATASET=K (default: %(default)s)")
    parser.add_argument("--fig1", action="store_true", help="run Figure 1 (waveform, error vs time) instead")
    parser.add_argument("--fig1-train", type=int, default=4000)
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.fig1:
        png = RESULTS / ("wenzel_fig1_quick.png" if args.quick else "wenzel_fig1.png")
        rows, table = fig1(quick=args.quick, seed=args.seed, n_train=args.fig1_train, output=str(png))
        print(table)
        path = write_results(result_name("wenzel_fig1", args.quick),
                             {"settings": vars(args), "wall_time_s": time.perf_counter() - t0, "rows": rows,
                              "table": table, "png": str(png)})
        print(f"written {path} and {png}")
        return
    checkpoint = None if args.checkpoint.lower() == "none" else args.checkpoint
    if args.quick and checkpoint and checkpoint.endswith("wenzel_table1_checkpoint.json"):
        checkpoint = checkpoint.replace("checkpoint.json", "quick_checkpoint.json")
    names = args.datasets or list(QUICK_DATASETS if args.quick else TABLE1_DATASETS)
    caps = _parse_caps(args.max_folds)
    rows, table = table1(names, methods=args.methods, folds=args.folds, seed=args.seed, quick=args.quick,
                         checkpoint=checkpoint, max_folds=caps)
    print(table)
    settings = dict(vars(args), max_folds=caps, checkpoint=checkpoint)
    path = write_results(result_name("wenzel_table1", args.quick),
                         {"settings": settings, "wall_time_s": time.perf_counter() - t0, "rows": rows,
                          "table": table})
    print(f"written {path}")


if __name__ == "__main__":
    main()
