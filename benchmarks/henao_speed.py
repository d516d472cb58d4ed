"""Speed and mixing of the GP Bayesian SVM (Henao et al. 2014, Sec. 2-3): Gibbs, NUTS and FITC.

Four parts, each printing a markdown table and writing ``<out>/henao_<part>.json`` (``--quick``:
``henao_<part>_quick.json``) with the machine description (CPU, cores, backend, devices), the
BLAS thread pools and the load average before and after the part. Everything runs on JAX's default
device (CPU or GPU) in float64 unless a column says float32.

Gibbs data (parts gibbs_time, gamma0, vs_nuts): a seeded 2-D nonlinear problem, x ~ U[-2, 2]^2 and
y = sign(sin(1.5 x_1) cos(1.5 x_2) + 0.25 e), e ~ N(0, 1) (a 2 x 2-cell checkerboard with label
noise), SE kernel k = exp(-||x - x'||^2 / theta^2) at the fixed theta = 1 (amplitude 1, jitter 1e-6).

``gibbs_time``
    Milliseconds per Gibbs iteration (eq. 7: 1/lambda | f, f | lambda; gamma = 1 fixed, gamma0 =
    0.1) for N = 250, 500, 1000, 2000, one chain, through ``run_chains`` (``lax.scan`` under
    ``jit``) in compiled blocks continuing from the previous state (the first block compiles and is
    not timed; 400 ... 20 iterations by N, or fewer if a setting passes 20 s; the JSON keeps the
    count); wall time, and process CPU time (less sensitive to other load); in float64 and float32,
    each with the BLAS (LAPACK) thread pool as found and limited to one thread (``threadpoolctl``;
    jaxlib's CPU LAPACK kernels come from scipy's OpenBLAS, whose spinning threads collapse when
    other processes share the cores).
    A breakdown at float64 with one BLAS thread times (process CPU time) nested stages of one
    sweep inside a compiled loop (random draws; + forming I + W^1/2 K W^1/2 and its Cholesky;
    + the solves and matrix-vector products of the f draw; + the log joint = the whole kernel)
    and, as separate calls, the formation and the Cholesky (see :func:`breakdown`). Separate calls
    can mislead: a stand-alone ``solve_triangular`` with a row-major factor pays a transposed copy
    of the matrix for LAPACK (about 10x the solve itself at N = 1000), which the compiled loop
    avoids (XLA keeps the factors column-major and copies K and L_K once, outside the loop).
    Target: N = 1000 under 50 ms per iteration.
``gamma0``
    Mixing of gamma sampled from its Gamma conditional (prior Ga(a0, b0) = Ga(1, 1)) for gamma0 in
    {0, 0.01, 0.1, 1}, N = 200, 4 chains vectorised, 1000 warm-up + 10000 kept iterations per chain:
    ArviZ bulk ESS of gamma, the same per 1000 iterations (1000 / tau), its integrated
    autocorrelation time tau = draws / ESS (draws pooled over chains), posterior mean of gamma,
    and min / median bulk ESS over the components of f.
``vs_nuts``
    Effective samples per second of Gibbs and NUTS on the same posterior: N = 200, theta fixed,
    gamma = 1, gamma0 = 0.1; NUTS (NumPyro, default settings, diagonal mass adaptation) on the
    marginal program ``gp_bsvm`` (lambda integrated out); 4 chains vectorised each; ESS = min bulk
    ESS over f; times include warm-up. Gibbs (1000 + 5000 iterations) is timed on a second run of
    the compiled driver. NumPyro's ``MCMC.run`` recompiles on every call (and a second ``run`` of
    the same vectorised ``MCMC`` object fails in numpyro 0.22), so NUTS (500 + 500 iterations)
    runs once after a small warm-up run, and its time excludes the JAX tracing, lowering and XLA
    compilation measured during the run (``jax.monitoring`` duration events); its wall time is
    reported too. ``max_z`` = max over f of |mean_Gibbs - mean_NUTS| / sqrt(MCSE_G^2 + MCSE_N^2)
    checks that both sample the same posterior. Target: ratio >= 10.
``fitc``
    FITC ECM (``gp_ecm_mlii`` with pseudo-inputs, max_iter = 200, mlii_every = 20, the library's defaults otherwise, i.e.
    its ML-II optimiser and steps per round, recorded in the JSON; gamma = 1, gamma0 = 0, ML-II over
    theta and the pseudo-inputs) on USPS 4 vs non-4, the N = 7291 training split, M = 100 k-means
    pseudo-inputs, SE kernel with theta^2 initialised at the median squared distance. Each measurement runs in a fresh subprocess: a baseline that imports
    jax and the package, loads the data and initialises the backend, and the fit, which calls
    it twice (compile + run, then run only) and predicts the 2007 test digits, and a
    third that only compiles the same fit ahead of time (its peak RSS, and XLA's temporary buffer
    size from ``memory_analysis``, separate the compiler's share of the peak from the run's). Peak
    memory is the child's peak RSS (``getrusage``: the child's RUSAGE_SELF, checked against the
    parent's RUSAGE_CHILDREN), reported absolute and above the baseline; on a GPU the device's
    peak bytes in use too. Skipped with a message when BMM_DATA_DIR is not set.
    Targets: peak memory under 1 GB, full fit under 2 minutes. Paper: 2.44% error, 116 s (Matlab).

Commands (from the repository root; ``BMM_DATA_DIR`` must point at the datasets for ``fitc``)::

    BMM_DATA_DIR=/path/to/datasets python benchmarks/henao_speed.py --part all
    python benchmarks/henao_speed.py --part gibbs_time|gamma0|vs_nuts|fitc [--blas-threads 1]
    python benchmarks/henao_speed.py --part gibbs_time --quick --out /tmp/results   # seconds

``--blas-threads K`` limits the BLAS thread pools for the whole run (default: as found).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, markdown_table, result_name, write_results

from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.experiments.henao2014 import limit_blas_threads
from bayes_maxmargin.models.gp.model import GPHyper, prior_covariance

KP = SEParams(lengthscale=1.0, amplitude=1.0)
JITTER = 1e-6
PARTS = ("gibbs_time", "gamma0", "vs_nuts", "fitc")
BLAS_THREADS: int | None = None  # --blas-threads
OUT: Path = RESULTS  # --out


# --------------------------------------------------------------------------- helpers
def synthetic(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x ~ U[-2, 2]^2, y = sign(sin(1.5 x1) cos(1.5 x2) + 0.25 e): a noisy 2 x 2 checkerboard."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, 2))
    y = np.where(np.sin(1.5 * X[:, 0]) * np.cos(1.5 * X[:, 1]) + 0.25 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def gp_problem(n: int, dtype=jnp.float64, gamma0: float = 0.1, a0: float = 1.0, b0: float = 1.0, seed: int = 0):
    """(X, y, GPData, GPHyper) of the synthetic problem at the fixed theta."""
    from bayes_maxmargin.models.gp.covariance import gp_data

    X, y = synthetic(n, seed)
    K = prior_covariance(jnp.asarray(X, dtype), "rbf", KP, JITTER)
    data = gp_data(K, jnp.asarray(y, dtype))
    hyper = GPHyper(*(jnp.asarray(v, dtype) for v in (1.0, a0, b0, gamma0)))
    return X, y, data, hyper


class CompileClock:
    """Seconds JAX spent tracing, lowering and compiling while active (``jax.monitoring`` events)."""

    EVENTS = (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    )
    _registered = False
    _active: list["CompileClock"] = []

    def __init__(self) -> None:
        self.seconds = 0.0
        if not CompileClock._registered:
            jax.monitoring.register_event_duration_secs_listener(CompileClock._listen)
            CompileClock._registered = True

    @staticmethod
    def _listen(event: str, duration: float, **_: Any) -> None:
        if event in CompileClock.EVENTS:
            for clock in CompileClock._active:
                clock.seconds += duration

    def __enter__(self) -> "CompileClock":
        CompileClock._active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        CompileClock._active.remove(self)


def blas_info() -> list[dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        return []
    return [{k: p.get(k) for k in ("internal_api", "prefix", "version", "num_threads")} for p in threadpool_info()]


def load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """ArviZ bulk ESS of (chain, draw, ...) draws, one value per trailing component."""
    import arviz as az

    return np.asarray(az.ess(az.convert_to_dataset({"x": draws}))["x"].values)


def rhat(draws: np.ndarray) -> np.ndarray:
    """ArviZ rank-normalised split R-hat of (chain, draw, ...) draws."""
    import arviz as az

    return np.asarray(az.rhat(az.convert_to_dataset({"x": draws}))["x"].values)


def mcse_mean(draws: np.ndarray) -> np.ndarray:
    import arviz as az

    return np.asarray(az.mcse(az.convert_to_dataset({"x": draws}))["x"].values)


def run_gibbs(data, hyper, sample_gamma: bool, chains: int, warmup: int, samples: int, seed: int):
    """One run of the Gibbs driver (4 chains vectorised, one compiled chunk), blocked until done."""
    from bayes_maxmargin.engine.mcmc import run_chains
    from bayes_maxmargin.models.gp.gibbs import build_gp_kernel, init_gp, record_gp

    n = data.y.shape[0]
    state = jax.vmap(init_gp, (0, None, None, None))(
        jnp.zeros((chains, n), data.K.dtype), data, hyper, sample_gamma
    )
    res = run_chains(build_gp_kernel(sample_gamma), record_gp, state, jax.random.PRNGKey(seed), data, hyper,
                     num_warmup=warmup, num_samples=samples, chunk_size=warmup + samples, progress_bar=False)
    jax.block_until_ready(res.final_state)
    return res


def timed_gibbs(data, hyper, sample_gamma, chains, warmup, samples, seed=0):
    """(result, seconds, compile seconds) of the second run; the first one compiles."""
    run_gibbs(data, hyper, sample_gamma, chains, warmup, samples, seed)
    with CompileClock() as clock:
        t0 = time.perf_counter()
        res = run_gibbs(data, hyper, sample_gamma, chains, warmup, samples, seed + 1)
        elapsed = time.perf_counter() - t0
    return res, elapsed, clock.seconds


def median_time(fn, *args, min_total: float = 0.3, min_reps: int = 3, max_reps: int = 200,
                cpu: bool = False) -> float:
    """Median seconds of ``fn(*args)`` (compiled first), blocking on the result; wall time, or the
    process CPU time with ``cpu=True``."""
    clock = time.process_time if cpu else time.perf_counter
    jax.block_until_ready(fn(*args))
    times: list[float] = []
    while len(times) < min_reps or (sum(times) < min_total and len(times) < max_reps):
        t0 = clock()
        jax.block_until_ready(fn(*args))
        times.append(clock() - t0)
    return float(np.median(times))


# --------------------------------------------------------------------------- part 1
def breakdown(data, hyper) -> dict[str, float]:
    """Where one Gibbs sweep (one chain) spends its time, measured inside a compiled loop.

    Process CPU time (less sensitive to other load than the wall time, which is reported for the
    whole sweep as ``sweep_wall_ms``). Four nested stages of the sweep each run ``reps`` times in a
    jitted ``lax.fori_loop`` with the data as runtime arguments (as in ``run_chains``, so XLA may
    hoist the same loop-invariant work and nothing is constant-folded); the differences between
    stages are the marginal costs (noisy when the machine is busy; a negative one reads as ~0):

    1. ``rng``: the inverse-Gaussian draw of 1 / lambda and the 2 N normals of the f draw;
    2. ``+ form + Cholesky``: I + W^1/2 K W^1/2 and its Cholesky factor (``scaled_factor``);
    3. ``+ solves + matvecs``: the rest of ``sample_f`` (L_K z, two triangular solves, K v);
    4. ``+ log joint``: the whole kernel (``gp_log_joint``: a triangular solve with L_K).

    Stand-alone jitted calls of the two O(N^2) passes and the Cholesky (``jnp.linalg.cholesky``,
    as the kernel calls it, and ``lax.linalg.cholesky(symmetrize_input=False)``) split stage 2.
    """
    from bayes_maxmargin.core.augmentation import sample_inv_lambda
    from bayes_maxmargin.models.gp.covariance import scaled_factor
    from bayes_maxmargin.models.gp.gibbs import build_gp_kernel, init_gp, sample_f

    n, dtype = data.y.shape[0], data.K.dtype
    kernel = build_gp_kernel(False)
    state = init_gp(jnp.zeros(n, dtype), data, hyper, False)
    for i in range(3):  # a typical state, not the start
        state, _ = jax.jit(kernel)(jax.random.PRNGKey(i), state, data, hyper)
    reps = int(min(max(3e9 / n**3, 5), 200))

    def draws(key, f, data, hyper):
        k_lam, k0, ke = jax.random.split(key, 3)
        inv_lam = sample_inv_lambda(k_lam, 1.0 - data.y * f, hyper.gamma, hyper.gamma0)
        return inv_lam, jax.random.normal(k0, (n,), dtype), jax.random.normal(ke, (n,), dtype)

    def stage(level):
        def body(i, carry, data, hyper):
            st = carry
            key = jax.random.fold_in(jax.random.PRNGKey(1), i)
            if level == 4:
                return kernel(key, st, data, hyper)[0]
            inv_lam, z1, z2 = draws(key, st.f, data, hyper)
            if level == 1:
                f = 0.5 * st.f + 1e-3 * (z1 + z2)
            elif level == 2:  # the factor's last entry depends on every entry of the scaled matrix
                f = 0.5 * st.f + 1e-3 * (z1 + z2) + 1e-12 * scaled_factor(data.K, inv_lam, st.gamma)[1][-1, -1]
            else:
                f = sample_f(key, data, inv_lam, st.gamma)
            return st._replace(f=f, inv_lam=inv_lam)

        return jax.jit(lambda st, data, hyper: jax.lax.fori_loop(
            0, reps, lambda i, c: body(i, c, data, hyper), st))

    t = [median_time(stage(level), state, data, hyper, cpu=True) / reps for level in (1, 2, 3, 4)]
    wall = median_time(stage(4), state, data, hyper) / reps
    s = jnp.sqrt(state.gamma * state.inv_lam)
    form = jax.jit(lambda K, s: jnp.eye(K.shape[0], dtype=K.dtype) + s[:, None] * K * s[None, :])
    scaled = form(data.K, s)
    chol = jax.jit(jnp.linalg.cholesky)
    chol_nosym = jax.jit(lambda A: jax.lax.linalg.cholesky(A, symmetrize_input=False))
    ms = {
        "rng_ms": t[0],
        "form_and_cholesky_ms": t[1] - t[0],
        "solves_and_matvecs_ms": t[2] - t[1],
        "log_joint_ms": t[3] - t[2],
        "sweep_ms": t[3],
        "sweep_wall_ms": wall,
        "form_call_ms": median_time(form, data.K, s, cpu=True),
        "cholesky_call_ms": median_time(chol, scaled, cpu=True),
        "cholesky_nosym_call_ms": median_time(chol_nosym, scaled, cpu=True),
    }
    return {"reps": reps, **{k: 1e3 * v for k, v in ms.items()}}


def ms_per_iteration(data, hyper, iters: int, block: int, budget_s: float) -> tuple[float, float, int]:
    """Milliseconds per Gibbs iteration (one chain): ``iters`` iterations in compiled blocks of
    ``block`` (``run_chains`` called on the previous final state), stopping early after
    ``budget_s`` seconds; the first block compiles and is not timed.

    Returns (wall ms, process CPU ms, iterations). The CPU time (all threads of this process) is
    less sensitive to other processes on the machine than the wall time: with single-threaded
    BLAS it approximates the wall time the same work takes on an idle core (spinning BLAS threads
    inflate it)."""
    from bayes_maxmargin.engine.mcmc import run_chains
    from bayes_maxmargin.models.gp.gibbs import build_gp_kernel, init_gp, record_gp

    kernel = build_gp_kernel(False)
    state = jax.vmap(init_gp, (0, None, None, None))(jnp.zeros((1, data.y.shape[0]), data.K.dtype), data, hyper, False)

    def step(state, i):
        res = run_chains(kernel, record_gp, state, jax.random.PRNGKey(i), data, hyper, num_warmup=0,
                         num_samples=block, chunk_size=block, progress_bar=False)
        return jax.block_until_ready(res.final_state)

    state = step(state, 0)  # compiles
    done, t0, c0 = 0, time.perf_counter(), time.process_time()
    while done < iters and (done == 0 or time.perf_counter() - t0 < budget_s):
        state = step(state, done + 1)
        done += block
    return 1e3 * (time.perf_counter() - t0) / done, 1e3 * (time.process_time() - c0) / done, done


def part_gibbs_time(quick: bool) -> dict[str, Any]:
    ns = (50, 100) if quick else (250, 500, 1000, 2000)
    dtypes = ("float64",) if quick else ("float64", "float32")
    threads = ((f"_{BLAS_THREADS}blas", BLAS_THREADS),) if BLAS_THREADS else (("", None), ("_1blas", 1))
    rows, brows = [], []
    for n in ns:
        iters = 10 if quick else int(min(max(60 * (1000 / n) ** 2, 20), 400))
        block = max(2, iters // 4)
        row: dict[str, Any] = {"n": n}
        for dname in dtypes:
            _, _, data, hyper = gp_problem(n, getattr(jnp, dname))
            for label, limit in threads:
                with limit_blas_threads(limit):
                    try:
                        ms, cpu, done = ms_per_iteration(data, hyper, iters, block, budget_s=5.0 if quick else 20.0)
                    except FloatingPointError as err:  # a non-finite state (float32)
                        print(f"n={n} {dname}{label}: {err}", flush=True)
                        ms, cpu, done = float("nan"), float("nan"), 0
                row[f"{dname}{label}_ms"], row[f"{dname}{label}_cpu_ms"] = ms, cpu
                row[f"{dname}{label}_iters"] = done
        rows.append(row)
        print(row, flush=True)
        if quick and n != ns[-1]:
            continue
        _, _, data, hyper = gp_problem(n, jnp.float64)
        with limit_blas_threads(1):
            b = breakdown(data, hyper)
        brows.append({"n": n, **b})
        print(brows[-1], flush=True)
        if not quick:  # a partial result survives an interrupted run
            write_results("henao_gibbs_time_partial", {"rows": rows, "breakdown": brows, "load": load(),
                                                       "blas": blas_info()}, OUT)
    cols = ["n"] + [f"{d}{t}{c}_ms" for d in dtypes for t, _ in threads for c in ("", "_cpu") if c == "" or t]
    print("\nms per Gibbs iteration, one chain (compiled; blank = BLAS threads as found, _1blas = one; "
          "_cpu = process CPU time):")
    print(markdown_table(rows, cols))
    print("\nbreakdown at float64, one BLAS thread (CPU ms per sweep: nested stages in a compiled loop; "
          "*_call_ms: separate calls; sweep_wall_ms: wall time):")
    print(markdown_table(brows, list(brows[0])))
    at_1000 = [r for r in rows if r["n"] == 1000]
    target = None
    if at_1000:
        r = at_1000[0]
        best = min(v for k, v in r.items() if k.startswith("float64") and k.endswith("_ms")
                   and not k.endswith("_cpu_ms") and not math.isnan(v))
        cpu = r.get("float64_1blas_cpu_ms", r.get(f"float64_{BLAS_THREADS}blas_cpu_ms", float("nan")))
        target = {"n": 1000, "target_ms": 50.0, "best_float64_wall_ms": best, "float64_1blas_cpu_ms": cpu,
                  "met_wall": best < 50.0, "met_cpu": cpu < 50.0}
        print(f"\ntarget N=1000 < 50 ms/iteration (float64): best wall {best:.1f} ms -> "
              f"{'met' if best < 50 else 'missed'}; CPU time (one BLAS thread) {cpu:.1f} ms -> "
              f"{'met' if cpu < 50 else 'missed'}")
    settings = {"theta": list(KP), "jitter": JITTER, "gamma": 1.0, "gamma0": 0.1, "chains": 1,
                "block": "max(2, iterations // 4)", "budget_s_per_setting": 5.0 if quick else 20.0}
    return {"settings": settings, "rows": rows, "breakdown": brows, "target": target}


# --------------------------------------------------------------------------- part 2
def part_gamma0(quick: bool) -> dict[str, Any]:
    n, chains = (60, 4) if quick else (200, 4)
    warmup, samples = (100, 400) if quick else (1000, 10000)
    a0, b0 = 1.0, 1.0
    rows = []
    for gamma0 in (0.0, 0.01, 0.1, 1.0):
        _, _, data, hyper = gp_problem(n, jnp.float64, gamma0=gamma0, a0=a0, b0=b0)
        res, sec, _ = timed_gibbs(data, hyper, True, chains, warmup, samples)
        g = res.samples["gamma"]
        ess_g = float(ess_bulk(g))
        ess_f = ess_bulk(res.samples["f"])
        total = chains * samples
        rows.append({
            "gamma0": gamma0,
            "gamma_mean": float(g.mean()), "gamma_sd": float(g.std()),
            "ess_gamma": ess_g, "ess_gamma_per_1000": 1000.0 * ess_g / total, "tau_gamma": total / ess_g,
            "min_ess_f": float(ess_f.min()), "median_ess_f": float(np.median(ess_f)),
            "seconds": sec,
        })
        print(rows[-1], flush=True)
    cols = list(rows[0])
    print(markdown_table(rows, cols))
    settings = {"n": n, "chains": chains, "warmup": warmup, "samples": samples, "gamma_prior": [a0, b0],
                "theta": list(KP), "ess": "arviz bulk", "per_1000": "ESS per 1000 pooled draws = 1000 / tau"}
    return {"settings": settings, "rows": rows}


# --------------------------------------------------------------------------- part 3
def nuts_run(X, y, chains, warmup, samples, seed):
    import functools

    from numpyro.infer import MCMC, NUTS

    from bayes_maxmargin.models.gp.model import gp_bsvm

    model = functools.partial(gp_bsvm, kernel="rbf", kernel_params=KP, gamma=1.0, gamma0=0.1, jitter=JITTER)
    mcmc = MCMC(NUTS(model), num_warmup=warmup, num_samples=samples, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    with CompileClock() as clock:
        t0 = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(seed), jnp.asarray(X), jnp.asarray(y), extra_fields=("num_steps", "diverging"))
        f = mcmc.get_samples(group_by_chain=True)["f"]
        jax.block_until_ready(f)
        wall = time.perf_counter() - t0
    extra = mcmc.get_extra_fields(group_by_chain=True)
    return np.asarray(f), wall, clock.seconds, np.asarray(extra["num_steps"]), np.asarray(extra["diverging"])


def part_vs_nuts(quick: bool) -> dict[str, Any]:
    n, chains = (50, 4) if quick else (200, 4)
    g_warm, g_samp = (200, 1000) if quick else (1000, 5000)
    n_warm, n_samp = (100, 100) if quick else (500, 500)
    X, y, data, hyper = gp_problem(n, jnp.float64, gamma0=0.1)
    res, g_sec, g_comp = timed_gibbs(data, hyper, False, chains, g_warm, g_samp)
    fg = res.samples["f"]
    ess_g = ess_bulk(fg)
    print(f"gibbs: {g_sec:.2f} s, min ESS {ess_g.min():.0f}", flush=True)
    nuts_run(X, y, chains, 20, 20, seed=0)  # warms JAX's caches; NumPyro recompiles the run anyway
    fn, n_wall, n_comp, steps, div = nuts_run(X, y, chains, n_warm, n_samp, seed=1)
    n_sec = n_wall - n_comp
    ess_n = ess_bulk(fn)
    print(f"nuts: {n_wall:.1f} s wall, {n_comp:.1f} s compile, min ESS {ess_n.min():.0f}", flush=True)
    z = np.abs(fg.mean((0, 1)) - fn.mean((0, 1))) / np.sqrt(mcse_mean(fg) ** 2 + mcse_mean(fn) ** 2)
    g_rate, n_rate = ess_g.min() / (g_sec - g_comp), ess_n.min() / n_sec
    row = {
        "n": n,
        "gibbs_min_ess": float(ess_g.min()), "gibbs_s": g_sec, "gibbs_ess_per_s": float(g_rate),
        "nuts_min_ess": float(ess_n.min()), "nuts_s": n_sec, "nuts_wall_s": n_wall,
        "nuts_mean_steps": float(steps.mean()), "nuts_divergent": int(div.sum()),
        "nuts_ess_per_s": float(n_rate), "ratio": float(g_rate / n_rate), "max_z": float(z.max()),
        "gibbs_median_ess": float(np.median(ess_g)), "nuts_median_ess": float(np.median(ess_n)),
        "gibbs_max_rhat": float(rhat(fg).max()), "nuts_max_rhat": float(rhat(fn).max()),
    }
    print(markdown_table([row], list(row)))
    print(f"\ntarget ratio >= 10: {row['ratio']:.1f} -> {'met' if row['ratio'] >= 10 else 'missed'}")
    settings = {"chains": chains, "gibbs": [g_warm, g_samp], "nuts": [n_warm, n_samp], "gamma": 1.0,
                "gamma0": 0.1, "theta": list(KP), "jitter": JITTER, "float64": True,
                "gibbs_compile_s_in_timed_run": g_comp, "nuts_compile_s_excluded": n_comp}
    return {"settings": settings, "rows": [row]}


# --------------------------------------------------------------------------- part 4
def usps_4_vs_rest():
    """USPS training (7291) and test (2007) splits, digit 4 as +1, the rest -1."""
    from bayes_maxmargin.data import load_dataset

    ds = load_dataset("usps")
    X, digit = np.asarray(ds.X, float), np.asarray(ds.y)
    y = np.where(digit == 4, 1.0, -1.0)
    tr, te = ds.split == "train", ds.split == "test"
    return X[tr], y[tr], X[te], y[te]


def fitc_child(mode: str, quick: bool) -> dict[str, Any]:
    """Run in a fresh process: the baseline (data + backend) or the FITC fit; prints a JSON line."""
    jax.config.update("jax_enable_x64", True)
    out: dict[str, Any] = {"mode": mode}
    Xtr, ytr, Xte, yte = usps_4_vs_rest()
    if quick:
        Xtr, ytr, Xte, yte = Xtr[:800], ytr[:800], Xte[:200], yte[:200]
    jnp.zeros(1).block_until_ready()  # initialise the backend
    if mode in ("fit", "compile"):
        from bayes_maxmargin.core.predict import probit_predictive
        from bayes_maxmargin.models.gp.ecm import gp_ecm_mlii, gp_predict
        from bayes_maxmargin.models.gp.model import init_inducing

        M = 20 if quick else 100
        max_iter, every = (40, 20) if quick else (200, 20)
        t0 = time.perf_counter()
        V0 = init_inducing(Xtr, M, "kmeans", random_state=0)
        out["kmeans_s"] = time.perf_counter() - t0
        sub = Xtr[np.random.default_rng(0).choice(len(Xtr), min(1000, len(Xtr)), replace=False)]
        d2 = (sub**2).sum(1)[:, None] + (sub**2).sum(1)[None] - 2 * sub @ sub.T
        theta0 = float(np.sqrt(np.median(d2[np.triu_indices(len(sub), 1)])))
        params0 = SEParams(lengthscale=theta0, amplitude=1.0)
        hyper = GPHyper(*(jnp.asarray(v) for v in (1.0, 1.0, 1.0, 0.0)))
        X, y = jnp.asarray(Xtr), jnp.asarray(ytr)
        out["rss_before_fit_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        def fit(X, y, V0):
            return gp_ecm_mlii(X, y, params0, hyper, V0=V0, max_iter=max_iter, mlii_every=every)

        if mode == "compile":  # compilation alone (ahead of time) and XLA's buffer sizes
            t0 = time.perf_counter()
            compiled = jax.jit(fit).lower(X, y, jnp.asarray(V0)).compile()
            out["compile_s"] = time.perf_counter() - t0
            ma = compiled.memory_analysis()
            for field in ("temp_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
                          "generated_code_size_in_bytes"):
                value = getattr(ma, field, None)
                if value is not None:
                    out[field.replace("_size_in_bytes", "_mb")] = value / 2**20
        else:
            for label in ("compile_and_run_s", "run_s"):
                t0 = time.perf_counter()
                res = jax.block_until_ready(fit(X, y, V0))
                out[label] = time.perf_counter() - t0
            mean, var = gp_predict(X, jnp.asarray(Xte), y, res.inv_lam, res.gamma, res.theta, V=res.V)
            prob = probit_predictive(np.asarray(mean), np.asarray(var))
            defaults = {k: v.default for k, v in inspect.signature(gp_ecm_mlii).parameters.items()
                        if k in ("mlii_steps", "optimizer", "learning_rate", "tol", "optimize_inducing")}
            out.update({
                "fitc_ecm_defaults": defaults,
                "n_train": int(len(Xtr)), "n_test": int(len(Xte)), "d": int(Xtr.shape[1]), "M": M,
                "max_iter": max_iter, "mlii_every": every, "theta0": theta0,
                "theta": float(res.theta.lengthscale), "amplitude": float(res.theta.amplitude),
                "test_error_pct": float(100 * np.mean(np.where(prob > 0.5, 1.0, -1.0) != yte)),
                "log_z_last": [float(v) for v in np.asarray(res.log_z)[-1]],
            })
    out["self_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if jax.default_backend() != "cpu":
        stats = jax.devices()[0].memory_stats() or {}
        out["device_peak_mb"] = stats.get("peak_bytes_in_use", float("nan")) / 2**20
    return out


def part_fitc(quick: bool) -> dict[str, Any] | None:
    from bayes_maxmargin.data.datasets import DATA_DIR_ENV

    if not os.environ.get(DATA_DIR_ENV) or not Path(os.environ[DATA_DIR_ENV]).is_dir():
        print(f"fitc: skipped, {DATA_DIR_ENV} is not set to the datasets folder (USPS is needed)")
        return None
    children: dict[str, dict[str, Any]] = {}
    # baseline first, then the fit: RUSAGE_CHILDREN is a running maximum over the children
    for mode in ("baseline", "fit", "compile"):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--fitc-child", mode] + (["--quick"] if quick else [])
        env = dict(os.environ)
        if BLAS_THREADS is not None:  # the child's OpenBLAS reads this when it loads
            env["OPENBLAS_NUM_THREADS"] = str(BLAS_THREADS)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"fitc child '{mode}' failed:\n{proc.stderr[-4000:]}")
        children[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
        children[mode]["children_maxrss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(children[mode], flush=True)
    base, fit, comp = children["baseline"], children["fit"], children["compile"]
    peak = fit["self_maxrss_mb"]
    assert abs(peak - fit["children_maxrss_mb"]) < 1.0, "RUSAGE_SELF and RUSAGE_CHILDREN disagree"
    row = {
        "n": fit["n_train"], "M": fit["M"],
        "peak_rss_mb": peak, "baseline_rss_mb": base["self_maxrss_mb"],
        "fit_rss_above_baseline_mb": peak - base["self_maxrss_mb"],
        "compile_only_peak_rss_mb": comp["self_maxrss_mb"], "xla_temp_buffers_mb": comp.get("temp_mb", float("nan")),
        "compile_and_run_s": fit["compile_and_run_s"], "run_s": fit["run_s"], "kmeans_s": fit["kmeans_s"],
        "test_error_pct": fit["test_error_pct"], "paper_error_pct": 2.44, "paper_time_s": 116,
    }
    if "device_peak_mb" in fit:
        row["device_peak_mb"] = fit["device_peak_mb"]
    print(markdown_table([row], list(row)))
    mem_ok, time_ok = peak < 1024, fit["compile_and_run_s"] < 120
    print(f"\ntargets: peak RSS < 1 GB -> {'met' if mem_ok else 'missed'}; "
          f"fit < 2 min (compile + run) -> {'met' if time_ok else 'missed'} (run only {fit['run_s']:.1f} s)")
    settings = {k: fit[k] for k in ("max_iter", "mlii_every", "fitc_ecm_defaults", "theta0", "theta", "amplitude",
                                    "log_z_last", "d")}
    settings.update({"task": "USPS 4 vs non-4, standard split", "gamma": 1.0, "gamma0": 0.0,
                     "kernel": "rbf", "inducing": "kmeans", "float64": True})
    return {"settings": settings, "rows": [row], "children": children,
            "targets": {"peak_rss_under_1GB": mem_ok, "fit_under_2min": time_ok}}


# --------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=PARTS + ("all",), default="all")
    parser.add_argument("--quick", action="store_true", help="tiny settings (a smoke run of seconds)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON results")
    parser.add_argument("--blas-threads", type=int, default=None, help="limit the BLAS thread pools")
    parser.add_argument("--fitc-child", choices=("baseline", "fit", "compile"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fitc_child:
        print(json.dumps(fitc_child(args.fitc_child, args.quick)))
        return
    global BLAS_THREADS, OUT
    BLAS_THREADS, OUT = args.blas_threads, args.out
    parts = PARTS if args.part == "all" else (args.part,)
    funcs = {"gibbs_time": part_gibbs_time, "gamma0": part_gamma0, "vs_nuts": part_vs_nuts, "fitc": part_fitc}
    with jax.enable_x64(True), limit_blas_threads(args.blas_threads):
        for part in parts:
            print(f"\n## {part}{' (quick)' if args.quick else ''}  load {load()}", flush=True)
            before = load()
            t0 = time.perf_counter()
            payload = funcs[part](args.quick)
            if payload is None:
                continue
            payload.update({"load_before": before, "load_after": load(), "part_seconds": time.perf_counter() - t0,
                            "blas": blas_info(), "blas_threads_limit": args.blas_threads, "quick": args.quick})
            path = write_results(result_name(f"henao_{part}", args.quick), payload, args.out)
            print(f"written {path}", flush=True)


if __name__ == "__main__":
    main()
