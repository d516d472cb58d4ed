"""Wenzel et al. (2017), Fig. 2 and Fig. 3 with S-BSVM (``GPBSVM(inference="svi")``, float32): the
experiments of :mod:`bayes_maxmargin.experiments.wenzel2017_figs` (also ``bmm +experiment=wenzel_fig2``
and ``wenzel_fig3``) with this script's options and JSON fields; the plots are the library's
(``fig2_figures``, ``fig3_figures``).

Fig. 2 (``--fig2-dataset``, default heart): the length-scale theta auto-tuned by ML-II inside
S-BSVM (``learn_kernel=("lengthscale",)``, ``mlii_every=10``) against grid search: the
``--folds``-fold CV error of S-BSVM at fixed theta on a log grid of ``--grid`` values
(``median distance x [0.1, 10]``). The auto-tuned model is run in the same folds (its CV error,
the geometric mean of the tuned thetas); the plot shows the CV curve and the auto-tuned theta as a red circle. The
times are the summed fit times: ``folds x grid`` fits against ``folds`` auto-tuning fits.

Fig. 3 (usps_3vs5): k-means++ against random inducing points (kept fixed, kernel fixed at the
median distance) as M grows; ``--fig3-folds``-fold CV error mean +- std and mean training time
(after one untimed warm-up fit per M that compiles its program).

Features are standardised per fold for Fig. 2 (raw pixels for USPS). Runs share JAX's persistent
compilation cache, so each shape compiles once. Writes ``benchmarks/results/wenzel_figs.json``,
``wenzel_fig2.png`` and ``wenzel_fig3.png`` (``_quick`` with ``--quick``).

    python benchmarks/wenzel_figs.py [--quick] [--fig2-dataset heart] [--folds 10] [--grid 15]
                                     [--ms 4 8 16 32 64 128] [--fig3-folds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def fig2(args) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`bayes_maxmargin.experiments.wenzel2017_figs.fig2` with this script's options: its result with this
    script's field names, and the library's row (for its figure)."""
    from bayes_maxmargin.experiments.wenzel2017_figs import fig2 as run_fig2

    (r,), _ = run_fig2(dataset=args.fig2_dataset, folds=args.folds, grid=args.grid, num_inducing=args.fig2_M,
                       batch_size=args.fig2_batch, steps=args.fig2_steps, learning_rate=args.fig2_lr, verbose=True)
    curve = [{"lengthscale": th, "cv_error": e, "cv_std": sd}
             for th, e, sd in zip(r["grid_lengthscales"], r["grid_errors"], r["grid_error_sds"])]
    return r, {"dataset": r["dataset"], "n": r["n"], "folds": r["folds"], "theta_init": r["theta_init"], "curve": curve,
            "grid_best": min(curve, key=lambda c: c["cv_error"]), "grid_time_s": r["grid_time_s"],
            "auto_lengthscale_mean": r["auto_lengthscale"], "auto_lengthscales": r["auto_lengthscales"],
            "auto_cv_error": r["auto_error"], "auto_cv_std": r["auto_error_sd"], "auto_time_s": r["auto_time_s"],
            "time_ratio_grid_over_auto": r["time_ratio_grid_over_auto"], "settings": r["settings"]}


def fig3(args) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """:func:`bayes_maxmargin.experiments.wenzel2017_figs.fig3` on usps_3vs5 with this script's options: the
    library's rows (for its figure) and this script's."""
    from bayes_maxmargin.experiments.wenzel2017_figs import fig3 as run_fig3

    rows, _ = run_fig3(ms=args.ms, folds=args.fig3_folds, batch_size=args.fig3_batch, steps=args.fig3_steps,
                       verbose=True)
    return rows, [{"M": r["M"], "inducing": r["inducing"], "cv_error": r["cv_error"], "cv_std": r["cv_error_sd"],
             "fit_s_mean": r["time_s"], "fit_s_median": float(np.median(r["fold_times"])),
             "lengthscale": r["lengthscale"]} for r in rows]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: 2 folds, 3 grid values, M = 4, 8")
    p.add_argument("--parts", nargs="+", default=["fig2", "fig3"], choices=["fig2", "fig3"])
    p.add_argument("--fig2-dataset", default="heart")
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--grid", type=int, default=15)
    p.add_argument("--fig2-M", type=int, default=32)
    p.add_argument("--fig2-batch", type=int, default=20)
    p.add_argument("--fig2-steps", type=int, default=300)
    p.add_argument("--fig2-lr", type=float, default=0.05)
    p.add_argument("--ms", type=int, nargs="+", default=[4, 8, 16, 32, 64, 128])
    p.add_argument("--fig3-folds", type=int, default=5)
    p.add_argument("--fig3-batch", type=int, default=20)
    p.add_argument("--fig3-steps", type=int, default=500)
    p.add_argument("--out-dir", type=Path, default=None)
    args = p.parse_args(argv)
    if args.quick:  # smaller defaults; options given explicitly still win
        p.set_defaults(folds=2, grid=3, ms=[4, 8], fig3_folds=2, fig2_steps=20, fig3_steps=20, fig2_M=8)
        args = p.parse_args(argv)
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    import jax

    cache = tempfile.mkdtemp(prefix="bmm_jax_cache_")
    import atexit
    import shutil

    atexit.register(shutil.rmtree, cache, True)
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    from _common import RESULTS, markdown_table, write_results

    from bayes_maxmargin.experiments.wenzel2017_figs import fig2_figures, fig3_figures

    out_dir = args.out_dir or RESULTS
    suffix = "_quick" if args.quick else ""
    payload: dict[str, Any] = {"config": {k: v for k, v in vars(args).items() if k != "out_dir"}}
    import matplotlib

    matplotlib.use("Agg")

    with warnings.catch_warnings():  # the library's functions limit OpenBLAS to one thread
        warnings.simplefilter("ignore")
        if "fig2" in args.parts:
            row, f2 = fig2(args)
            payload["fig2"] = f2
            write_results(f"wenzel_figs{suffix}", payload, out_dir)  # partial results
            print(f"## Fig. 2: {f2['dataset']} ({f2['folds']}-fold CV), grid search vs auto-tuned length-scale\n")
            print(markdown_table(f2["curve"], ["lengthscale", "cv_error", "cv_std"]))
            print(f"\ngrid best theta {f2['grid_best']['lengthscale']:.4g} (CV error {f2['grid_best']['cv_error']:.4f}); "
                  f"auto-tuned theta {f2['auto_lengthscale_mean']:.4g} (CV error {f2['auto_cv_error']:.4f}); "
                  f"time grid {f2['grid_time_s']:.1f} s vs auto {f2['auto_time_s']:.1f} s "
                  f"(x{f2['time_ratio_grid_over_auto']:.1f})\n")
            fig2_figures([row], [])["fig2.png"].savefig(out_dir / f"wenzel_fig2{suffix}.png", dpi=120)
        if "fig3" in args.parts:
            rows, f3 = fig3(args)
            payload["fig3"] = f3
            print("## Fig. 3: usps_3vs5, k-means vs random inducing points\n")
            print(markdown_table(f3, ["M", "inducing", "cv_error", "cv_std", "fit_s_mean", "fit_s_median"]))
            fig3_figures(rows, [])["fig3.png"].savefig(out_dir / f"wenzel_fig3{suffix}.png", dpi=120)
    path = write_results(f"wenzel_figs{suffix}", payload, out_dir)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
