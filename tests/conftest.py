"""Shared fixtures: small problems, the shared datasets folder, headless plotting."""

from __future__ import annotations

import os

# One BLAS (OpenBLAS / LAPACK) thread per process, set before numpy, scipy or jax load it: the suite
# runs as two pytest-xdist workers on two cores, and OpenBLAS's spinning threads in both make
# Cholesky factorisations of a few hundred rows hundreds of times slower. Kept if already set.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import shutil  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

matplotlib.use("Agg")

_CACHE_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def pytest_configure(config: pytest.Config) -> None:
    """One JAX compilation cache for the run, shared by the xdist workers and the subprocesses.

    The suite's time goes mostly to XLA compilation, and the workers and the ``bmm`` subprocesses
    compile many of the same programs. The controller creates a fresh cache folder (removed at the
    end of the run) and exports it before the workers start; a ``JAX_COMPILATION_CACHE_DIR`` already
    set is used as it is.
    """
    if hasattr(config, "workerinput") or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    folder = tempfile.mkdtemp(prefix="bmm-test-jax-cache-")
    config._bmm_jax_cache = folder  # type: ignore[attr-defined]
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    for key, value in _CACHE_ENV.items():
        os.environ.setdefault(key, value)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = getattr(config, "_bmm_jax_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)

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
