"""Luts & Ormerod (2014) Sec. 4.2 / Figure 1: default SVM, VB and MCMC on simulated logistic data.

For every n in {100, 200, 500} and d in {10, 50, 100}: ``--repetitions`` training sets (paper: 200)
of the design of Sec. 4.2, each with an independent test set of 1000; balanced error rates of the
default SVM (Sec. 4.1, ``--n-inner`` hold-out splits per grid value; paper: 100), VB and MCMC
(penalty parameter inference, Sec. 3.1 Example 1; one Gibbs chain of 5000 + 5000), and the mean
fit times (after the first fit of each setting, which includes JIT compilation); see
:func:`bayes_maxmargin.experiments.luts2014.simulation`. Writes
``benchmarks/results/luts_simulation.json`` and the box plots ``luts_simulation.png`` (one panel
per (n, d), as Figure 1; ``_quick`` with ``--quick``).

    python benchmarks/luts_simulation.py [--quick] [--repetitions 200] [--n-inner 100]
                                         [--ns 100 200] [--ds 10] [--methods svm vb mcmc]
                                         [--checkpoint rows.json]

``--checkpoint`` keeps the finished (n, d) rows in a JSON file; a restarted run computes only the
missing ones.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bayes_maxmargin.experiments.luts2014 import (
    METHODS,
    PAPER_SIMULATION,
    SIM_DS,
    SIM_NS,
    simulation,
    simulation_markdown,
)

from _common import RESULTS, result_name, write_results

LABELS = {"svm": "SVM", "vb": "VB", "mcmc": "MCMC"}


def plot(rows: list[dict[str, Any]], path: Path) -> Path:
    """Box plots of the BERs, one panel per (n, d) (rows n, columns d), mean fit times in the titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted({r["n"] for r in rows})
    ds = sorted({r["d"] for r in rows})
    fig, axes = plt.subplots(len(ns), len(ds), figsize=(3.6 * len(ds), 2.9 * len(ns)), sharey=True, squeeze=False)
    by_key = {(r["n"], r["d"]): r for r in rows}
    for i, n in enumerate(ns):
        for j, d in enumerate(ds):
            ax = axes[i][j]
            r = by_key.get((n, d))
            if r is None:
                ax.set_axis_off()
                continue
            methods = [m for m in METHODS if r.get(f"{m}_bers")]
            ax.boxplot([r[f"{m}_bers"] for m in methods])
            ax.set_xticks(range(1, len(methods) + 1), [LABELS[m] for m in methods])
            times = ", ".join(f"{LABELS[m]} {r[f'{m}_time_s']:.2g}s" for m in methods)
            ax.set_title(f"n={n}, d={d}\n{times}", fontsize=8)
            if j == 0:
                ax.set_ylabel("balanced error rate")
    fig.suptitle(f"Sec. 4.2 / Fig. 1: {rows[0]['repetitions']} reps, test sets of {rows[0]['n_test']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small setting, 2 repetitions (a smoke run)")
    parser.add_argument("--repetitions", type=int, default=None, help="training sets per (n, d) (default 200)")
    parser.add_argument("--n-inner", type=int, default=None, help="SVM hold-out splits per grid value (default 100)")
    parser.add_argument("--ns", type=int, nargs="+", default=None, help=f"training sizes (default {list(SIM_NS)})")
    parser.add_argument("--ds", type=int, nargs="+", default=None, help=f"dimensions (default {list(SIM_DS)})")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--num-warmup", type=int, default=None, help="Gibbs burn-in (default 5000)")
    parser.add_argument("--num-samples", type=int, default=None, help="Gibbs kept draws (default 5000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", type=Path, default=None, help="JSON file of finished rows (resume)")
    args = parser.parse_args()
    ns = args.ns or ([60] if args.quick else list(SIM_NS))
    ds = args.ds or ([5] if args.quick else list(SIM_DS))
    done = json.loads(args.checkpoint.read_text()) if args.checkpoint and args.checkpoint.exists() else {}
    t0 = time.perf_counter()
    rows = []
    for n in ns:
        for d in ds:
            key = f"n{n}_d{d}"
            if key not in done:
                done[key] = simulation([n], [d], repetitions=args.repetitions, methods=args.methods,
                                       n_inner=args.n_inner, num_warmup=args.num_warmup,
                                       num_samples=args.num_samples, seed=args.seed, quick=args.quick)[0][0]
                if args.checkpoint:
                    args.checkpoint.write_text(json.dumps(done, default=float))
            rows.append(done[key])
    wall = time.perf_counter() - t0
    n_inner = args.n_inner or (3 if args.quick else 100)
    gibbs = {"num_warmup": args.num_warmup or (100 if args.quick else 5000),
             "num_samples": args.num_samples or (100 if args.quick else 5000)}
    table = simulation_markdown(rows, n_inner=n_inner, gibbs=gibbs, seed=args.seed, quick=args.quick)
    print(table)
    name = result_name("luts_simulation", args.quick)
    png = plot(rows, RESULTS / f"{name}.png")
    settings = {"ns": ns, "ds": ds, "repetitions": rows[0]["repetitions"], "n_inner": n_inner, **gibbs,
                "methods": args.methods, "seed": args.seed, "quick": args.quick}
    paper = {f"n{n}_d{d}": v for (n, d), v in PAPER_SIMULATION.items()}
    path = write_results(name, {"settings": settings, "wall_time_s": wall, "rows": rows, "table": table,
                                "paper_times_s": paper, "figure": png.name})
    print(f"written {path} and {png}")


if __name__ == "__main__":
    main()
