"""Shared fixtures: small problems, the shared datasets folder, headless plotting."""

from __future__ import annotations

import os

# One BLAS (OpenBLAS / LAPACK) thread per process, set before numpy, scipy or jax load it: the suite
# runs as two pytest-xdist workers on two cores, and OpenBLAS's spinning threads in both make
# Cholesky factorisations of a few hundred rows hundreds of times slower. Kept if already set.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# On a GPU the pytest-xdist workers share one card: without this each JAX process takes 75 % of its memory
# and the later workers' first allocations fail (docs/user_guide/workflow.md).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# XLA:CPU's intra-op (Eigen) thread pool off, set before jax starts its backend (and inherited by the
# `bmm` subprocesses): one thread per worker process, as for BLAS.
if "--xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()

import faulthandler  # noqa: E402
import gc  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

matplotlib.use("Agg")

_CACHE_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def pytest_configure(config: pytest.Config) -> None:
    """One JAX compilation cache for the run's subprocesses, and a folder for the hang reports of the
    workers (:func:`pytest_runtest_protocol`).

    The ``bmm`` and script subprocesses of the suite compile many of the same programs. The
    controller creates a fresh cache folder (removed at the end of the run) and exports it before the
    workers start, so that every subprocess uses it; a ``JAX_COMPILATION_CACHE_DIR`` already set is
    used as it is. The xdist workers themselves compile without it, keeping their programs in
    memory only (:data:`MAX_MAPS`).
    """
    if hasattr(config, "workerinput"):
        jax.config.update("jax_compilation_cache_dir", None)
        return
    config._bmm_hangs = tempfile.mkdtemp(prefix="bmm-test-hangs-")  # type: ignore[attr-defined]
    os.environ["BMM_TEST_HANG_DIR"] = config._bmm_hangs  # type: ignore[attr-defined]
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    folder = tempfile.mkdtemp(prefix="bmm-test-jax-cache-")
    config._bmm_jax_cache = folder  # type: ignore[attr-defined]
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    for key, value in _CACHE_ENV.items():
        os.environ.setdefault(key, value)


def pytest_unconfigure(config: pytest.Config) -> None:
    for name in ("_bmm_jax_cache", "_bmm_hangs"):
        folder = getattr(config, name, None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


#: A test of an xdist worker still running after this many seconds is taken as hung: the worker
#: writes every thread's Python traceback to the hang folder and exits (xdist reports the test as
#: crashed, the other worker finishes the run, ``--max-worker-restart=0`` in pyproject.toml, and the
#: controller prints the traceback), so that the run fails instead of waiting for the CI time
#: limit. The longest test takes well under a minute.
HANG_TIMEOUT_S = 900


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    folder = os.environ.get("BMM_TEST_HANG_DIR")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not (folder and worker):
        yield
        return
    with open(Path(folder) / f"{worker}.txt", "w", encoding="utf-8") as report:
        report.write(f"{item.nodeid} still running after {HANG_TIMEOUT_S} s; its worker's threads:\n")
        report.flush()
        faulthandler.dump_traceback_later(HANG_TIMEOUT_S, exit=True, file=report)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            report.truncate(0)


#: Memory maps of a worker after which its compiled programs are released (``jax.clear_caches()``).
#: Every program XLA:CPU compiles keeps its code mapped (3 or more maps each) while JAX's caches hold
#: it, and a worker compiles thousands (26 600 maps after the 61 tests of test_multiclass and
#: test_properties); at the kernel's limit (``vm.max_map_count``, 65 530 by default) the next
#: compilation aborts the process. Clearing released 12 874 of them down to 2 132.
MAX_MAPS = 30_000


def _memory_maps() -> int:
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux
        return 0


@pytest.fixture
def python_signal_defaults():
    """SIGINT and SIGTERM at Python's defaults during the test, whatever an earlier test in this
    worker left (a fit leaves an ignored signal ignored), and as they were afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler), signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGINT, previous[0])
    signal.signal(signal.SIGTERM, previous[1])


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    yield
    if _memory_maps() > MAX_MAPS:
        jax.clear_caches()
        gc.collect()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    folder = getattr(config, "_bmm_hangs", None)
    for path in sorted(Path(folder).glob("*.txt")) if folder else []:
        text = path.read_text(encoding="utf-8")
        if text:
            terminalreporter.section(f"hung test ({path.stem})", sep="=", red=True)
            terminalreporter.write(text)


# XLA's expensive optimisation passes off in the test processes: the suite's time is mostly
# compilation of small problems, and this cuts its CPU time by about a quarter. Tests marked
# ``xla_optimized`` (long runs of compiled code: many draws of the distributions) and the
# command-line test of the default `bmm` job keep the default, optimised build.
jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture(autouse=True)
def _xla_optimisation(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("xla_optimized") is None:
        yield
        return
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", True)


#: Further settings of tests that also run in the default suite at another setting; they run with
#: ``-m extended`` (the default suite must stay within its 10-minute CI budget).
EXTENDED_REPEATS = (
    # the stored NUTS references are recomputed with NUTS under -m extended (tests/reference)
    "tests/test_references.py::test_live_nuts_reproduces_the_stored_reference",
    # the log joint of the Gibbs state against the NumPyro program: first setting in the default suite
    "tests/test_gp_gibbs.py::test_log_joint_is_the_augmented_program[0.1-None-rbf]",
    "tests/test_gp_gibbs.py::test_log_joint_is_the_augmented_program[0.5-gamma_prior2-rbf]",
    "tests/test_gp_theta.py::test_log_joint_is_the_augmented_program[rbf-params1-0.0-gamma_prior1-1e-06]",
    "tests/test_gp_theta.py::test_log_joint_is_the_augmented_program[poly-params3-0.1-None-0.001]",
    "tests/test_linear_inference.py::test_log_joint_is_the_augmented_program[0.5-gamma_prior1-10.0]",
    # the estimator with the polynomial and linear kernels (each kernel is unit-tested in test_kernels)
    "tests/test_gp_estimator.py::test_other_kernels[linear]",
    "tests/test_gp_estimator.py::test_other_kernels[poly]",
    # SQUAREM against plain sweeps: Alg. 2 and Alg. 4 in the default suite
    "tests/test_luts_vb.py::test_lower_bound_never_decreases_and_squarem_reaches_the_same_fixed_point[alg1]",
    "tests/test_luts_vb.py::test_lower_bound_never_decreases_and_squarem_reaches_the_same_fixed_point[alg3]",
    "tests/test_luts_vb.py::test_lower_bound_never_decreases_and_squarem_reaches_the_same_fixed_point"
    "[alg2_random_intercept]",
    # each prior once under Gibbs or VB
    "tests/test_luts_estimator.py::test_priors_fit_and_predict[vb-penalty]",
    "tests/test_luts_estimator.py::test_priors_fit_and_predict[vb-laplace_zero]",
    # check_classifiers_train again on read-only memory maps (the plain check runs by default)
    "tests/test_gp_estimator.py::test_sklearn_compatible[GPBSVM(inference='ecm',learn_kernel=False,max_iter=30,tol=1e-06)"
    "-check_classifiers_train(readonly_memmap=True)]",
    "tests/test_gp_estimator.py::test_sklearn_compatible[GPBSVM(inference='ecm',learn_kernel=False,max_iter=30,tol=1e-06)"
    "-check_classifiers_train(readonly_memmap=True,X_dtype=float32)]",
    # the blocked GP ESS sampler of the scores with a linear kernel against the linear sampler: the
    # default suite keeps the one-score-at-a-time sampler's comparison (the blocked sampler's moves
    # are the same elliptical slice step, tested alone, and its golden refit); the linear sampler is
    # compared with NUTS there
    "tests/test_factor_gibbs.py::test_gp_ess_sampler_with_linear_kernel_is_the_linear_sampler[blocks]",
    # repeated fits are identical: the linear model's samplers in the default suite
    "tests/test_determinism.py::test_repeated_fits_are_identical[gp-svi]",
    "tests/test_determinism.py::test_repeated_fits_are_identical[projection]",
    # the overwrite refusal is one code path for every estimator
    "tests/test_persistence.py::test_existing_file_is_not_replaced_without_overwrite[projection-sskmmdp]",
    "tests/test_persistence.py::test_existing_file_is_not_replaced_without_overwrite[gp-svi]",
    "tests/test_persistence.py::test_existing_file_is_not_replaced_without_overwrite[linear-vb-laplace_zero]",
)
#: The scikit-learn checks of GPBSVM, compiled per data shape: these fitting checks in the default suite,
#: the rest (each compiles a fit for its own data shape; the base-class behaviour they test is covered by
#: LinearBSVM's full set) with -m extended (MaxMarginProjection's and FactorBSVM's: all extended, see
#: test_multiclass.test_sklearn_compatible)
SKLEARN_CHECK_SETS = ("tests/test_gp_estimator.py::test_sklearn_compatible",)
SKLEARN_DEFAULT_CHECKS = ("check_classifiers_train]", "check_fit_idempotent]", "check_estimators_pickle]",
                          "check_n_features_in_after_fitting]", "check_estimators_nan_inf]",
                          "check_non_transformer_estimators_n_iter]", "check_transformer_n_iter]")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # one worker runs all of a module's tests (``--dist loadgroup``): they fit the same estimators
        # on the same data, and a program compiled for one test then serves the next; test time of
        # the suite 2724 -> 2414 s
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        in_set = item.nodeid.startswith(SKLEARN_CHECK_SETS)
        if item.nodeid in EXTENDED_REPEATS or (in_set and not item.nodeid.endswith(SKLEARN_DEFAULT_CHECKS)):
            item.add_marker(pytest.mark.extended)


# Property tests: the same examples on every run (a red run is reproducible, never a new random draw);
# BMM_HYPOTHESIS_PROFILE=explore draws fresh examples and keeps failures in .hypothesis/ for replay.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("BMM_HYPOTHESIS_PROFILE", "repeatable"))


def run_bmm(*args: str, cwd: Path, optimised: bool = False, timeout: float = 300,
            unset_env: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run `bmm` as a fresh process (the entry point as a user runs it); with XLA's expensive
    optimisation passes off unless ``optimised``, as in the test processes, and without the
    environment variables ``unset_env``."""
    code = "from bayes_maxmargin.cli import main; main()"
    env = dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS="0" if optimised else "1")
    for name in unset_env:
        env.pop(name, None)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


DATA_DIR = os.environ.get("BMM_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(),
    reason="BMM_DATA_DIR is not set to the benchmark datasets folder",
)


@pytest.fixture(scope="session")
def synthetic_binary() -> tuple[np.ndarray, np.ndarray]:
    """A seeded, overlapping two-class problem: 200 x 3, labels +-1."""
    from .reference import synthetic_binary as make

    return make()


@pytest.fixture(scope="session")
def wdbc_small() -> tuple[np.ndarray, np.ndarray]:
    """The built-in breast-cancer data, standardised, first 5 features (a real, small problem)."""
    from bayes_maxmargin import load_dataset

    ds = load_dataset("wdbc")
    X = ds.X[:, :5]
    X = (X - X.mean(0)) / X.std(0)
    return X, np.asarray(ds.y)


@pytest.fixture(scope="session")
def sine() -> tuple[np.ndarray, np.ndarray]:
    """n = 60 1-D inputs, labels from a noisy sine (overlapping classes): the GP ECM / FITC problem."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-3.0, 3.0, 60))
    y = np.where(np.sin(1.5 * x) + 0.3 * rng.normal(size=60) > 0, 1.0, -1.0)
    return x[:, None], y
