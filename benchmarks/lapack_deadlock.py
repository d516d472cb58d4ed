"""Two batched LAPACK calls in one XLA:CPU program, and two fits that run such programs: a hang check.

One program factorises two independent stacks of SPD matrices (batched Cholesky, then a batched
triangular solve each) and is run ``--iterations`` times with ``jax.jit``. With jaxlib 0.10 each
batched LAPACK call waited on XLA:CPU's intra-op thread pool for the chunks of its stack; when two
ran at once on a 2-core machine both pool threads waited and the process hung for good (no CPU in
use, Ctrl-C ignored): 15 of 20 fresh processes under jax 0.10.2, none of 20 under jax 0.12.0.1, the
lower bound the package now requires (``docs/performance.md``).

``--fit`` runs, ``--repeats`` times in one process, one of the two fits that hung under jax 0.10:
``gp-digits``, a 10-class :class:`~bayes_maxmargin.GPBSVM` ECM fit of scikit-learn's digits (the
classes' ECM loops vmapped in one program; ``--rows`` rows, ``--max-iter`` iterations), and
``linear-missing``, a ``LinearBSVM(prior="penalty", missing="model", inference="gibbs")`` fit with
missing values.

Run it in a subprocess under a timeout: a hang never returns. Exit status 0 and one line ``done
<seconds> <checksum>`` when everything finished.

Usage::

    timeout -s KILL 40 python benchmarks/lapack_deadlock.py
    timeout -s KILL 40 python benchmarks/lapack_deadlock.py --fit gp-digits
    python benchmarks/lapack_deadlock.py --fit linear-missing --repeats 20
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular


def two_factorisations(a: jax.Array, b: jax.Array, y: jax.Array) -> jax.Array:
    """Two independent batched Cholesky factorisations and triangular solves, summed."""
    xa = solve_triangular(jnp.linalg.cholesky(a), y, lower=True)
    xb = solve_triangular(jnp.linalg.cholesky(b), y, lower=True)
    return xa.sum() + xb.sum()


def spd_stack(rng: np.random.Generator, batch: int, n: int) -> np.ndarray:
    """``batch`` well-conditioned SPD ``n x n`` matrices."""
    m = rng.normal(size=(batch, n, n))
    return m @ m.transpose(0, 2, 1) + n * np.eye(n)


def fit_once(kind: str, rows: int, max_iter: int, seed: int) -> float:
    """One fit of ``kind`` (``gp-digits`` or ``linear-missing``); the sum of its decision values."""
    from bayes_maxmargin import GPBSVM, LinearBSVM

    if kind == "gp-digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X, y = X[:rows] / 16.0, y[:rows]
        model = GPBSVM(inference="ecm", max_iter=max_iter, random_state=seed).fit(X, y)
    else:
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(rows, 4))
        y = np.where(X @ [1.5, -1.0, 0.5, 0.0] + rng.normal(size=rows) > 0, 1, 0)
        X[rng.uniform(size=rows) < 0.2, 1] = np.nan
        X[rng.uniform(size=rows) < 0.1, 3] = np.nan
        model = LinearBSVM("gibbs", prior="penalty", missing="model", num_samples=200, num_warmup=100,
                           num_chains=2, random_state=seed).fit(X, y)
    return float(np.sum(model.decision_function(np.nan_to_num(X))))


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--fit", choices=("gp-digits", "linear-missing"), default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--max-iter", type=int, default=10)
    args = parser.parse_args(argv)
    if args.fit is not None:
        start, total = time.perf_counter(), 0.0
        for i in range(args.repeats):
            total += fit_once(args.fit, args.rows, args.max_iter, seed=i)
            print(f"fit {i + 1}/{args.repeats} {time.perf_counter() - start:.1f} s", flush=True)
        print(f"done {time.perf_counter() - start:.2f} {total!r}", flush=True)
        return total
    jax.config.update("jax_enable_x64", True)
    program = jax.jit(two_factorisations)
    rng = np.random.default_rng(0)
    a, b = spd_stack(rng, args.batch, args.size), spd_stack(rng, args.batch, args.size)
    y = rng.normal(size=(args.batch, args.size, 3))
    start, total = time.perf_counter(), 0.0
    for i in range(args.iterations):
        total += float(program(a + i * 1e-3, b, y))
    print(f"done {time.perf_counter() - start:.2f} {total!r}", flush=True)
    return total


if __name__ == "__main__":
    main()
