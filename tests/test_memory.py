"""The memory guard (:mod:`bayes_maxmargin.core.memory`): every class of a one-vs-rest fit and every size
parameter (inducing points, basis vectors, minibatch, features) counted; a fit that does not fit is
refused before any heavy work, with the parameter to lower. The estimates are checked against peaks
measured once (the resident memory of a fit over that of the process before it; XLA's buffers are
not seen by tracemalloc)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from bayes_maxmargin import GPBSVM, MaxMarginProjection
from bayes_maxmargin.core.memory import MEMORY_ENV, InsufficientMemoryError, check_dense_memory, matrix_bytes
from bayes_maxmargin.estimators.gp import GP_METHODS, inducing_memory
from bayes_maxmargin.estimators.projection import PROJECTION_MATRICES

#: Seconds a refused fit may take: data checks and the estimate only, no kernel matrix, k-means or
#: compilation (each of which takes seconds to minutes at these sizes).
REFUSED_S = 10.0


def _classes(n: int, k: int, d: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    return X, np.argmax(X @ rng.normal(size=(d, k)) + 0.5 * rng.normal(size=(n, k)), axis=1)


def _refused(est, X, y, pattern: str) -> str:
    start = time.perf_counter()
    with pytest.raises(InsufficientMemoryError, match=pattern) as info:
        est.fit(X, y)
    assert time.perf_counter() - start < REFUSED_S
    return str(info.value)


def test_a_one_vs_rest_fit_counts_every_class(monkeypatch):
    """ECM on 1500 rows with 300 MB: the binary fit's 13 N x N matrices (234 MB) are admitted, the
    6-class fit, whose six problems run as one vmapped program (peak 1.8 GB: 13 N x N matrices per
    class), is refused."""
    monkeypatch.setenv(MEMORY_ENV, "3e8")
    X, y = _classes(1500, 6)
    check_dense_memory(1500, "float64", GP_METHODS["ecm"].dense_buffers, what="binary", advice="")  # admitted
    message = _refused(GPBSVM(inference="ecm"), X, y, r"N = 1500 .*for its 78 dense N x N float64 matrices")
    assert "(13 for each of the 6 one-vs-rest classes, fitted together)" in message
    assert "at most N = 693 points" in message  # sqrt(3e8 / (78 * 8)) = 693.4: the largest N that fits
    # the same count for the inducing-point fits: the binary estimate (81 MB) admitted, six times it refused
    assert inducing_memory("fitc", 1500, 300, 100, "float64") < 3e8
    message = _refused(GPBSVM(inference="fitc", num_inducing=300), X, y, r"lower num_inducing \(300\)")
    need = 6 * inducing_memory("fitc", 1500, 300, 100, "float64")
    assert f"needs about {need / 1e9:.3g} GB" in message and "for 6 one-vs-rest classes" in message


@pytest.mark.parametrize("est, lower", [
    (GPBSVM(inference="fitc", num_inducing=3000), "lower num_inducing (3000) or the training points (3000)"),
    (GPBSVM(inference="svi", num_inducing=3000), "lower num_inducing (3000) or batch_size (100)"),
    (MaxMarginProjection(kernel="rbf", n_basis=3000), "lower n_basis (3000) or the training points (3000)"),
], ids=["fitc", "svi", "projection"])
def test_every_size_parameter_is_counted(est, lower, monkeypatch):
    """num_inducing = 3000 (FITC, svi) and n_basis = 3000 on 3000 rows with 100 MB (resident at their
    peaks: svi 2.7 GB, the projection 1.0 GB): refused before the k-means of 3000 centres, naming the
    parameter to lower."""
    monkeypatch.setenv(MEMORY_ENV, "1e8")
    X, y = _classes(3000, 2)
    _refused(est, X, y, re.escape(lower))


def test_the_features_of_a_linear_projection_are_counted(monkeypatch):
    """MaxMarginProjection without a kernel works on the features themselves: their number is the
    size to lower."""
    monkeypatch.setenv(MEMORY_ENV, "1e6")
    X, y = _classes(100, 2, d=3000)
    _refused(MaxMarginProjection(), X, y, re.escape("lower the number of features (3000) or the training points (100)"))


#: Peak resident memory of float64 fits over the process's memory before them, in MB (/proc/self/status
#: VmHWM, reset before the fit), by (N, M, minibatch), and the part of it that does not grow with the sizes
#: (compilation and XLA's runtime: the intercept of the least-squares fit of the counts).
MEASURED = {
    "fitc": ([(3000, 1500, 100, 1466.1), (3000, 750, 100, 855.8), (1500, 750, 100, 694.6),
              (1500, 1500, 100, 1141.4)], 438.0),
    "svi": ([(3000, 1500, 100, 952.9), (3000, 750, 100, 422.3), (3000, 1500, 400, 1002.5),
             (1500, 750, 100, 409.1), (1500, 1500, 100, 876.1), (3000, 3000, 100, 2395.5)], 269.0),
    "projection": ([(3000, 1500, None, 384.0), (3000, 750, None, 350.4), (1500, 750, None, 317.4),
                    (1500, 1500, None, 333.8), (3000, 3000, None, 681.0)], 264.0),
}


def _estimate(method: str, n: int, m: int, batch: int | None) -> float:
    if method == "projection":
        c = PROJECTION_MATRICES
        return matrix_bytes([(c["nd"], n, m), (c["dd"], m, m), (c["dk"], m, 1)], "float64") / 1e6
    return inducing_memory(method, n, m, batch, "float64") / 1e6


@pytest.mark.parametrize("method", ["fitc", "svi", "projection"])
def test_the_estimate_covers_the_measured_peaks(method):
    """An admitted fit stays within its estimate: for every measured fit the estimate is at least the
    part of its peak that grows with the sizes (the counts are least-squares fits rounded up to cover
    every peak) and at most the whole peak (rounding up does not turn the estimate into a bound
    several times too large)."""
    runs, constant = MEASURED[method]
    for n, m, batch, peak in runs:
        estimate = _estimate(method, n, m, batch)
        assert peak - constant <= estimate <= peak, (n, m, batch, estimate, peak)


def test_matrix_bytes_counts_every_shape():
    assert matrix_bytes([(18, 3000, 1500), (22, 1500, 1500)], "float64") == (18 * 3000 + 22 * 1500) * 1500 * 8
    assert matrix_bytes([(2, 10, 10)], "float32") == 800
    assert set(PROJECTION_MATRICES) == {"nd", "dd", "dk"}
