"""Chen et al. (2015) Fig. 1: the average norm of a_k over the Gibbs iterations of MMLDP without
and with the latent representation z_n (Sec. 3.2); see
:func:`bayes_maxmargin.experiments.chen2015.figure1`. Needs ``BMM_DATA_DIR``.
Writes ``docs/reproductions/chen2015_fig1.png`` and ``benchmarks/results/chen_figure1.json``
(the norms every 10 iterations and their quantiles).

    python benchmarks/chen_figure1.py [--dataset diabetis] [--iterations 5000] [--out PATH]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bayes_maxmargin.experiments.chen2015 import figure1

from _common import write_results

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="diabetis")
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--components", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "docs" / "reproductions" / "chen2015_fig1.png"))
    args = parser.parse_args()
    start = time.perf_counter()
    _, traces = figure1(args.out, dataset=args.dataset, n_iter=args.iterations, n_components=args.components,
                        seed=args.seed)
    summary = {model: {prior: {"every_10": v[::10].tolist(), "median": float(np.median(v)),
                               "q95": float(np.quantile(v, 0.95)), "max": float(v.max())}
                       for prior, v in series.items()} for model, series in traces.items()}
    for model, series in summary.items():
        for prior, q in series.items():
            print(f"{model:12s} {prior}: median {q['median']:.2f}, 95 % {q['q95']:.2f}, max {q['max']:.2f}")
    write_results("chen_figure1", {"settings": vars(args), "seconds": time.perf_counter() - start,
                                   "traces": summary})
    print("wrote", args.out)


if __name__ == "__main__":
    main()
