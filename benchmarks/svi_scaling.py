"""S-BSVM scaling (Wenzel et al. 2017, Sec. 5.4-5.5): time per epoch against N on susy_synthetic.

For every N (default 1e4, 1e5, 1e6, 5e6; d = 18, float32) the training data are written to a
memory-mapped ``.npy`` file in a temporary folder and one worker process per N streams them through
:func:`bayes_maxmargin.models.gp.svi.svi_gp` (M = 64 inducing points, k-means initialised on a
subsample, length-scale = median distance, kernel fixed). For every batch size:

* a warm-up run of one compiled chunk (compilation included) fills JAX's persistent compilation
  cache; ``compile_s`` = warm-up time minus the warm-up's steps at the steady rate;
* the timed run is one epoch (N / |S| steps) that finds the compiled chunk in the cache, so
  ``epoch_s`` excludes compilation. If the warm-up rate predicts more than ``--max-epoch-seconds``,
  only ``--partial-steps`` steps run and the epoch time is extrapolated (``extrapolated``: true);
* ``s_per_point`` = epoch_s / N (about constant if the cost is linear in N) and ``ratio_to_first``
  compares it with the smallest N.

Each worker reports its peak resident set size (VmHWM of /proc/self/status; ``ru_maxrss``, which on
Linux also holds the parent's RSS at fork time, as an upper bound): data in float32 on a
memory map, so it stays far below the 3.6 GB of X for 5e6 x 18 float64 in memory. The largest N is
scored after one epoch on a held-out set of ``--test-n`` points (AUC, error, Brier). With
``--converge-epochs E`` the largest N also trains E epochs at the largest batch size, scoring the
held-out set after every chunk: the time to converge is the first time the held-out error comes
within ``--converge-tol`` of its value after E epochs (scoring time not counted). With a GPU
visible, the same runs report points per second there (``device`` in the JSON; ``--tag gpu``
keeps the CPU results).

Writes ``benchmarks/results/svi_scaling.json`` (``_quick`` with ``--quick``) and ``svi_scaling.png``.

    python benchmarks/svi_scaling.py [--quick] [--ns 1e4 1e5 1e6 5e6] [--batch-sizes 100 1000 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_INTERNAL = {"worker", "data", "labels", "test_data", "test_labels", "cache_dir", "result", "out_dir"}
SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def setup_jax(cache_dir: str | None, single_thread: bool) -> None:
    """XLA CPU flags (before jax is imported) and the persistent compilation cache."""
    if single_thread and "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD).strip()
    import jax

    jax.config.update("jax_enable_x64", False)
    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def _scores(y, p) -> dict[str, float]:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    y01 = (np.asarray(y) > 0).astype(float)
    return {"auc": float(roc_auc_score(y01, p)), "error": float(np.mean((p > 0.5) != (y01 > 0.5))),
            "brier": float(np.mean((p - y01) ** 2))}


def _vm_hwm_mb() -> float:
    """Peak RSS of this process image (VmHWM; ``ru_maxrss`` also counts the parent's RSS at fork
    time on Linux, an upper bound), falling back to ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Time S-BSVM on one memory-mapped data set (run in its own process)."""
    setup_jax(args.cache_dir, not args.multi_thread)
    import jax
    import numpy as np

    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.core.predict import probit_predictive
    from bayes_maxmargin.engine.svi import predict_moments
    from bayes_maxmargin.experiments.henao2014 import limit_blas_threads, median_distance
    from bayes_maxmargin.models.gp.model import init_inducing
    from bayes_maxmargin.models.gp.svi import svi_gp

    X = np.load(args.data, mmap_mode="r")
    y = np.load(args.labels)
    n = X.shape[0]
    rss_after_load = _vm_hwm_mb()
    sub = np.asarray(X[: min(n, 20_000)])
    theta = median_distance(sub, 1000, 0)
    Z = init_inducing(sub, args.M, "kmeans", 0)
    rows = []
    test = None
    if args.test_data:
        test = (np.load(args.test_data), np.load(args.test_labels))
    with limit_blas_threads(1 if not args.multi_thread else None):
        for B in args.batch_sizes:
            if B > n:
                continue
            k = max(1, min(args.hyper_every, n // B))  # whole rounds of k steps within one epoch
            epoch_steps = -(-max(1, n // B) // k) * k
            n_rounds = epoch_steps // k
            R = max(1, min(n_rounds, (1 << 18) // (k * B)))
            fit = dict(kernel="rbf", batch_size=B, hyper_every=k, dtype=np.float32, seed=0)
            t0 = time.perf_counter()
            res, _ = svi_gp(X, y, SEParams(theta, 1.0), Z, num_steps=R * k, **fit)
            jax.block_until_ready(res.state.nat.eta1)
            warm_s = time.perf_counter() - t0
            # predicted epoch time from the warm-up (an over-estimate: it holds the compilation)
            steps = epoch_steps
            extrapolated = False
            if warm_s / (R * k) * epoch_steps > args.max_epoch_seconds and epoch_steps > args.partial_steps:
                steps, extrapolated = max(R * k, args.partial_steps), True
            t0 = time.perf_counter()
            res, problem = svi_gp(X, y, SEParams(theta, 1.0), Z, num_steps=steps, **fit)
            jax.block_until_ready(res.state.nat.eta1)
            run_s = time.perf_counter() - t0
            done = int(res.state.step)
            per_step = run_s / done
            epoch_s = per_step * n / B  # one pass over the data
            row = {"n": n, "batch_size": B, "M": args.M, "hyper_every": k, "steps": done, "epoch_steps": epoch_steps,
                   "extrapolated": extrapolated, "compile_s": max(warm_s - R * k * per_step, 0.0),
                   "epoch_s": epoch_s, "s_per_point": epoch_s / n, "points_per_s": n / epoch_s,
                   "diverged": bool(res.diverged), "elbo_last": float(res.elbo[-1]) if res.elbo.size else None,
                   "lengthscale": theta}
            if test is not None and not extrapolated:
                m, v = predict_moments(res.state, problem, test[0])
                row.update(_scores(test[1], probit_predictive(m, v)))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        convergence = None
        if args.converge_epochs and test is not None:
            convergence = _converge(args, X, y, theta, Z, test)
    return {"rows": rows, "convergence": convergence, "peak_rss_mb": _vm_hwm_mb(), "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_after_load_mb": rss_after_load, "device": str(jax.devices()[0]),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def _converge(args: argparse.Namespace, X, y, theta: float, Z, test) -> dict[str, Any]:
    """Train for ``--converge-epochs`` epochs at ``|S|`` = the largest batch size, scoring the
    held-out set after every compiled chunk (the scoring time is not counted). Converged: the first
    time the held-out error comes within ``--converge-tol`` of the error at the end of the run."""
    import jax
    import numpy as np

    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.core.predict import probit_predictive
    from bayes_maxmargin.engine.svi import predict_moments
    from bayes_maxmargin.models.gp.svi import svi_gp

    n = X.shape[0]
    B = max(b for b in args.batch_sizes if b <= n)
    k = max(1, min(args.hyper_every, n // B))
    steps = args.converge_epochs * (-(-max(1, n // B) // k) * k)
    curve: list[dict[str, Any]] = []
    scoring = [0.0]
    holder: dict[str, Any] = {}

    def score(state, done, seconds):
        t0 = time.perf_counter()
        m, v = predict_moments(state, holder["problem"], test[0])
        curve.append({"steps": done, "epochs": done * B / n, "seconds": seconds - scoring[0],
                      **_scores(test[1], probit_predictive(m, v))})
        scoring[0] += time.perf_counter() - t0

    fit = dict(kernel="rbf", batch_size=B, hyper_every=k, dtype=np.float32, seed=1)
    # compile the chunk shape of the run below (one chunk) and keep the problem for scoring
    R = max(1, min(steps // k, (1 << 18) // (k * B)))
    _, holder["problem"] = svi_gp(X, y, SEParams(theta, 1.0), Z, num_steps=R * k, **fit)
    res, _ = svi_gp(X, y, SEParams(theta, 1.0), Z, num_steps=steps, callback=score, **fit)
    jax.block_until_ready(res.state.nat.eta1)
    final = curve[-1]["error"]
    reached = next(c for c in curve if c["error"] <= final + args.converge_tol)
    out = {"batch_size": B, "epochs": args.converge_epochs, "steps": int(res.state.step), "tol": args.converge_tol,
           "final_error": final, "final_brier": curve[-1]["brier"], "final_auc": curve[-1]["auc"],
           "train_s": curve[-1]["seconds"], "converged_s": reached["seconds"], "converged_epochs": reached["epochs"],
           "points_per_s": curve[-1]["steps"] * B / curve[-1]["seconds"], "curve": curve}
    print(json.dumps({k: v for k, v in out.items() if k != "curve"}), file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: N = 2000, 5000; |S| = 100, 500")
    p.add_argument("--ns", type=float, nargs="+", default=[1e4, 1e5, 1e6, 5e6])
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--M", type=int, default=64)
    p.add_argument("--hyper-every", type=int, default=10)
    p.add_argument("--test-n", type=int, default=100_000)
    p.add_argument("--max-epoch-seconds", type=float, default=300.0,
                   help="above this predicted epoch time run --partial-steps steps and extrapolate")
    p.add_argument("--partial-steps", type=int, default=5000)
    p.add_argument("--multi-thread", action="store_true", help="keep XLA's multi-threaded CPU runtime")
    p.add_argument("--converge-epochs", type=int, default=0,
                   help="at the largest N, also train this many epochs at the largest batch size, scoring the "
                        "held-out set after every chunk: time to converge")
    p.add_argument("--converge-tol", type=float, default=0.002,
                   help="converged: held-out error within this of its value after the last epoch")
    p.add_argument("--out-dir", type=Path, default=None)
    p.add_argument("--tag", default="", help="appended to the result file name (e.g. gpu)")
    # worker mode (internal)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--labels", help=argparse.SUPPRESS)
    p.add_argument("--test-data", default=None, help=argparse.SUPPRESS)
    p.add_argument("--test-labels", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:  # smaller defaults; options given explicitly still win
        p.set_defaults(ns=[2000, 5000], batch_sizes=[100, 500], test_n=2000)
        args = p.parse_args(argv)
    if args.worker:
        out = worker(args)
        Path(args.result).write_text(json.dumps(out))
        return out

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import RESULTS, markdown_table, result_name, write_results

    from bayes_maxmargin.data.datasets import load_dataset

    ns = sorted(int(v) for v in args.ns)
    out_dir = args.out_dir or RESULTS
    name = result_name("svi_scaling", args.quick, args.tag)
    rows, memory, convergence = [], [], None
    with tempfile.TemporaryDirectory(prefix="bmm_svi_scaling_") as tmp:
        cache = os.path.join(tmp, "jax_cache")
        te = load_dataset("susy_synthetic", n=args.test_n, dtype="float32", random_state=1)
        np.save(os.path.join(tmp, "Xte.npy"), np.asarray(te.X))
        np.save(os.path.join(tmp, "yte.npy"), te.y)
        for n in ns:
            xpath, ypath = os.path.join(tmp, f"X_{n}.npy"), os.path.join(tmp, f"y_{n}.npy")
            t0 = time.perf_counter()
            ds = load_dataset("susy_synthetic", n=n, dtype="float32", path=xpath)
            np.save(ypath, ds.y)
            gen_s = time.perf_counter() - t0
            del ds
            result = os.path.join(tmp, f"res_{n}.json")
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--data", xpath, "--labels", ypath,
                   "--cache-dir", cache, "--result", result, "--M", str(args.M), "--hyper-every", str(args.hyper_every),
                   "--max-epoch-seconds", str(args.max_epoch_seconds), "--partial-steps", str(args.partial_steps),
                   "--batch-sizes", *map(str, args.batch_sizes)]
            if args.multi_thread:
                cmd.append("--multi-thread")
            if n == ns[-1]:
                cmd += ["--test-data", os.path.join(tmp, "Xte.npy"), "--test-labels", os.path.join(tmp, "yte.npy"),
                        "--converge-epochs", str(args.converge_epochs), "--converge-tol", str(args.converge_tol)]
            subprocess.run(cmd, check=True)
            res = json.loads(Path(result).read_text())
            os.remove(xpath)
            memory.append({"n": n, "data_mb": n * 18 * 4 / 2**20, "peak_rss_mb": res["peak_rss_mb"],
                           "ru_maxrss_mb": res.get("ru_maxrss_mb"),
                           "rss_after_load_mb": res["rss_after_load_mb"], "generate_s": gen_s})
            rows += res["rows"]
            convergence = res.get("convergence") or convergence
            device, flags = res["device"], res["xla_flags"]
    for B in args.batch_sizes:
        sel = [r for r in rows if r["batch_size"] == B]
        for r in sel:
            r["ratio_to_first"] = r["s_per_point"] / sel[0]["s_per_point"]
    largest = [r for r in rows if r["n"] == ns[-1]]
    print(f"## S-BSVM time per epoch (M={args.M}, float32, device {device}, XLA_FLAGS={flags!r})\n")
    print(markdown_table(rows, ["n", "batch_size", "steps", "extrapolated", "compile_s", "epoch_s", "s_per_point",
                                "ratio_to_first", "points_per_s"]))
    print("\n## Peak RSS per worker process\n")
    print(markdown_table(memory, ["n", "data_mb", "rss_after_load_mb", "peak_rss_mb"]))
    scored = [r for r in largest if "auc" in r]
    if scored:
        print(f"\n## Held-out after one epoch at N={ns[-1]} ({args.test_n} test points)\n")
        print(markdown_table(scored, ["batch_size", "auc", "error", "brier"]))
    if convergence:
        print(f"\n## Time to converge at N={ns[-1]} (|S|={convergence['batch_size']}, held-out error within "
              f"{convergence['tol']} of its value after {convergence['epochs']} epochs)\n")
        print(markdown_table([convergence], ["batch_size", "epochs", "train_s", "points_per_s", "converged_s",
                                             "converged_epochs", "final_error", "final_brier", "final_auc"]))
    fastest = min((r["epoch_s"] for r in largest), default=float("nan"))
    targets = {"epoch_5e6_under_30s": {"value_s": fastest, "met": bool(ns[-1] >= 5_000_000 and fastest <= 30.0)},
               "rss_under_2gb": {"value_mb": max(m["peak_rss_mb"] for m in memory),
                                 "met": bool(max(m["peak_rss_mb"] for m in memory) < 2048)}}
    payload = {"config": {k: v for k, v in vars(args).items() if k not in _INTERNAL},
               "device": device, "xla_flags": flags, "rows": rows, "memory": memory, "targets": targets,
               "convergence": convergence}
    path = write_results(name, payload, out_dir)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        for B in args.batch_sizes:
            sel = [r for r in rows if r["batch_size"] == B]
            if sel:
                ax[0].loglog([r["n"] for r in sel], [r["epoch_s"] for r in sel], "o-", label=f"|S|={B}")
                ax[1].semilogx([r["n"] for r in sel], [r["s_per_point"] * 1e6 for r in sel], "o-", label=f"|S|={B}")
        ax[0].set(xlabel="N", ylabel="seconds per epoch", title="S-BSVM epoch time")
        ax[1].set(xlabel="N", ylabel="microseconds per point", title="cost per point")
        ax[0].legend()
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}.png", dpi=120)
    except ImportError:
        pass
    print(f"\nwrote {path}")
    return payload


if __name__ == "__main__":
    main()
