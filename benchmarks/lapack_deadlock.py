"""Two batched LAPACK calls in one XLA:CPU program: a hang with jaxlib 0.10 unless each matrix gets its own call.

One program factorises two independent stacks of SPD matrices (batched Cholesky, then a batched
triangular solve each) and is run ``--iterations`` times. With jaxlib 0.10 each batched LAPACK call
waits on XLA:CPU's intra-op thread pool for the chunks of its stack; when two of them run at once on
a 2-core machine both pool threads wait and the process hangs (no CPU in use, Ctrl-C ignored). The
package's :func:`bayes_maxmargin.core.compilation.jit` lowers each stack as one call per matrix.

``--fit`` runs, ``--repeats`` times in one process, one of the two fits that were seen to hang:
``gp-digits``, a 10-class :class:`~bayes_maxmargin.GPBSVM` ECM fit of scikit-learn's digits (the
classes' ECM loops vmapped in one program; ``--rows`` rows, ``--max-iter`` iterations), and
``linear-missing``, a ``LinearBSVM(prior="penalty", missing="model", inference="gibbs")`` fit with
missing values. ``--jax-lowering`` keeps JAX's batched LAPACK calls in the package's programs
(``compilation.UNBATCHED_LAPACK = False``), to see the hang.

Run it in a subprocess under a timeout: a hang never returns. Exit status 0 and one line ``done
<seconds> <checksum>`` when everything finished.

Usage::

    timeout -s KILL 60 python benchmarks/lapack_deadlock.py --jit jax       # JAX's lowering
    timeout -s KILL 60 python benchmarks/lapack_deadlock.py --jit package   # one call per matrix
    python benchmarks/lapack_deadlock.py --fit gp-digits --repeats 20
    python benchmarks/lapack_deadlock.py --fit linear-missing --repeats 20 [--jax-lowering]
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
    parser.add_argument("--jit", choices=("jax", "package"), default="jax",
                        help="jax.jit (JAX's lowering) or bayes_maxmargin's jit (one LAPACK call per matrix)")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--fit", choices=("gp-digits", "linear-missing"), default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--max-iter", type=int, default=10)
    parser.add_argument("--jax-lowering", action="store_true",
                        help="keep JAX's batched LAPACK calls in the package's programs")
    args = parser.parse_args(argv)
    if args.jax_lowering:
        from bayes_maxmargin.core import compilation

        compilation.UNBATCHED_LAPACK = False
    if args.fit is not None:
        start, total = time.perf_counter(), 0.0
        for i in range(args.repeats):
            total += fit_once(args.fit, args.rows, args.max_iter, seed=i)
            print(f"fit {i + 1}/{args.repeats} {time.perf_counter() - start:.1f} s", flush=True)
        print(f"done {time.perf_counter() - start:.2f} {total!r}", flush=True)
        return total
    jax.config.update("jax_enable_x64", True)
    if args.jit == "package":
        from bayes_maxmargin.core.compilation import jit

        program = jit(two_factorisations)
    else:
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
