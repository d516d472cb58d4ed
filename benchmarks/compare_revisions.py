"""Two revisions of the package side by side: the same draws and predictions, and their run times.

Each workload runs through the public API only, so the same code runs on any layout of the package:

* ``linear-gibbs``: ``LinearBSVM(inference="gibbs")``, 4 chains, on the (500, 10) problem of
  ``gibbs_vs_nuts.py``; ``linear-nuts``: the same with NUTS;
* ``gp-gibbs``: ``GPBSVM(inference="gibbs", learn_kernel=False)`` at N = 1000 (the fixed-theta sampler
  of ``henao_speed.py --part gibbs_time``, at its size);
* ``gp-ecm``: ``GPBSVM(inference="ecm")`` on 400 rows and ``gp-svi``: S-BSVM (``inference="svi"``) on 1000.

Every workload runs in a fresh process per revision (so the first fit pays compilation), fits twice
and reports both times and a SHA-256 of the posterior draws and the predictive probabilities. The
revisions alternate, ``--repeats`` times, and the table gives the median time of each and their ratio.

    python benchmarks/compare_revisions.py --base REV [--head REV] [--repeats 3] [--workloads ...]

``--head`` defaults to the working tree. Other revisions are checked out with ``git worktree`` into a
temporary folder and removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import RESULTS, markdown_table, write_results

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = r'''
import hashlib, json, sys, time
import numpy as np

def linear(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    beta = rng.normal(size=d) / np.sqrt(d) * 2.0
    return X, np.where(X @ beta + rng.logistic(size=n) * 0.5 > 0, 1, 0)

def gp(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    return X, (np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)

name, tree = sys.argv[1], sys.argv[2]
import bayes_maxmargin
assert bayes_maxmargin.__file__.startswith(tree), f"imported {bayes_maxmargin.__file__}, not the tree {tree}"
from bayes_maxmargin import GPBSVM, LinearBSVM
if name == "linear-gibbs":
    X, y = linear(500, 10); make = lambda: LinearBSVM(inference="gibbs", num_chains=4, num_warmup=500, num_samples=1000, random_state=0)
elif name == "linear-nuts":
    X, y = linear(500, 10); make = lambda: LinearBSVM(inference="nuts", num_chains=4, num_warmup=300, num_samples=300, random_state=0)
elif name == "gp-gibbs":
    X, y = gp(1000); make = lambda: GPBSVM(inference="gibbs", learn_kernel=False, num_chains=2, num_warmup=100,
                                           num_samples=200, random_state=0)
elif name == "gp-ecm":
    X, y = gp(400); make = lambda: GPBSVM(inference="ecm", random_state=0)
elif name == "gp-svi":
    X, y = gp(1000); make = lambda: GPBSVM(inference="svi", random_state=0)
else:
    raise SystemExit(f"unknown workload {name!r}")
times = []
for _ in range(2):
    est = make()
    start = time.perf_counter(); est.fit(X, y); times.append(time.perf_counter() - start)
digest = hashlib.sha256()
idata = getattr(est, "idata_", None)
if idata is not None and hasattr(idata, "posterior"):
    for var in sorted(idata.posterior.data_vars):
        digest.update(np.ascontiguousarray(idata.posterior[var].values).tobytes())
digest.update(np.ascontiguousarray(est.predict_proba(X)).tobytes())
print(json.dumps({"first_fit_s": times[0], "second_fit_s": times[1], "sha256": digest.hexdigest()}))
'''

WORKLOADS = ("linear-gibbs", "linear-nuts", "gp-gibbs", "gp-ecm", "gp-svi")


def run(tree: Path, workload: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", WORKLOAD, workload, str(tree)], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir(), check=False)
    if proc.returncode:
        raise RuntimeError(f"{workload} at {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def checkout(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(where), rev],
                   check=True, capture_output=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--head", default=None, help="the other revision (default: the working tree)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": checkout(args.base, Path(tmp) / "base")}
        trees["head"] = checkout(args.head, Path(tmp) / "head") if args.head else ROOT
        try:
            results = {w: {"base": [], "head": []} for w in args.workloads}
            for r in range(args.repeats):
                for w in args.workloads:
                    order = ("base", "head") if r % 2 == 0 else ("head", "base")
                    for side in order:
                        results[w][side].append(run(trees[side], w))
                        print(f"repeat {r}: {w} at {side}: {results[w][side][-1]}", flush=True)
        finally:
            for side in ("base", "head"):
                if trees[side] != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees[side])],
                                   check=False, capture_output=True)
    rows, summary = [], {}
    for w, sides in results.items():
        med = {s: {k: statistics.median(r[k] for r in sides[s]) for k in ("first_fit_s", "second_fit_s")}
               for s in sides}
        same = len({r["sha256"] for s in sides for r in sides[s]}) == 1
        ratios = {k: med["head"][k] / med["base"][k] for k in ("first_fit_s", "second_fit_s")}
        summary[w] = {"identical": same, "median": med, "ratio": ratios, "runs": sides}
        rows.append({"workload": w, "identical": "yes" if same else "NO",
                     "base first s": med["base"]["first_fit_s"], "head first s": med["head"]["first_fit_s"],
                     "first ratio": ratios["first_fit_s"],
                     "base second s": med["base"]["second_fit_s"], "head second s": med["head"]["second_fit_s"],
                     "second ratio": ratios["second_fit_s"]})
    print(markdown_table(rows, list(rows[0])))
    print(f"load average at the end: {os.getloadavg()}")
    write_results("compare_revisions", {"base": args.base, "head": args.head or "working tree",
                                        "repeats": args.repeats, "workloads": summary}, args.out_dir)

if __name__ == "__main__":
    main()
