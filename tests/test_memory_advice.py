"""The advice of a memory refusal: only settings that fit the refused fit's N in the same available memory
(``BMM_AVAILABLE_MEMORY``), from the guard's own estimates, and where nothing fits, a message that says so."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bayes_maxmargin import GPBSVM
from bayes_maxmargin.core.memory import MEMORY_ENV, InsufficientMemoryError
import bayes_maxmargin.estimators.gp as gp_module
from bayes_maxmargin.estimators.gp import inducing_memory

N = 400
FITC = dict(inference="fitc", progress_bar=False, random_state=0)


class Admitted(Exception):
    """Raised by the first step after the memory check: the fit was admitted (and nothing is compiled)."""


@pytest.fixture
def admitted(monkeypatch):
    """``GPBSVM.fit`` raises :class:`Admitted` right after its memory check."""
    def stop(*args, **kwargs):
        raise Admitted

    monkeypatch.setattr(gp_module, "_initial_kernel_params", stop)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 2))
    return X, (X[:, 0] > 0).astype(int)


def _refusal(est: GPBSVM, X: np.ndarray, y: np.ndarray) -> str:
    with pytest.raises(InsufficientMemoryError) as info:
        est.fit(X, y)
    return str(info.value)


def _bound(message: str, pattern: str) -> int:
    found = re.search(pattern, message)
    assert found, message
    return int(found.group(1))


@pytest.mark.parametrize("available, default_fits", [(1e7, True), (4e6, False)])
def test_an_ecm_refusal_names_the_fitc_size_that_fits(data, available, default_fits, admitted, monkeypatch):
    """ECM on 400 rows needs 13 N x N float64 matrices (16.6 MB). With 10 MB FITC fits with its default 100
    inducing points and the advice says up to how many; with 4 MB the default does not fit (18 N x M + 22
    M x M matrices: 8.3 MB at M = 100) and the advice lowers num_inducing. The advised FITC fit is admitted
    (it passes the memory check) and one more inducing point is refused; svi's advice is the largest M that
    fits at its batch size."""
    monkeypatch.setenv(MEMORY_ENV, str(available))
    X, y = data
    message = _refusal(GPBSVM(inference="ecm"), X, y)
    m = _bound(message, r"inference='fitc' with num_inducing <= (\d+)")
    assert (m >= 100) == default_fits
    with pytest.raises(Admitted):  # the advice fits
        GPBSVM(num_inducing=m, **FITC).fit(X, y)
    refused = _refusal(GPBSVM(num_inducing=m + 1, **FITC), X, y)
    assert f"lower num_inducing ({m + 1})" in refused and f"num_inducing <= {m}" in refused
    if default_fits:
        with pytest.raises(Admitted):
            GPBSVM(**FITC).fit(X, y)
    else:
        assert "lower num_inducing (100)" in _refusal(GPBSVM(**FITC), X, y)
    m_svi = _bound(message, r"inference='svi' with num_inducing <= (\d+) \(batch_size=100\)")
    assert inducing_memory("svi", N, m_svi, 100, "float32") <= available  # svi in its default float32
    assert inducing_memory("svi", N, m_svi + 1, 100, "float32") > available


def test_an_svi_refusal_names_smaller_minibatches(data, admitted, monkeypatch):
    """svi with 100 inducing points in minibatches of 100 on 400 rows (float32: 27 M x M, 31 |S| x M and 5 N x M
    matrices, 3.1 MB) under 2 MB: the advice lowers num_inducing at batch_size 100, or batch_size at 100
    inducing points (to 9: 27e4 + 3100 |S| + 2e5 numbers of 4 bytes fit 2 MB up to |S| = 9), and the next
    larger minibatch is refused."""
    monkeypatch.setenv(MEMORY_ENV, "2e6")
    X, y = data
    message = _refusal(GPBSVM(inference="svi", num_inducing=100, batch_size=100), X, y)
    assert "lower num_inducing (100) or batch_size (100)" in message
    batch = _bound(message, r"inference='svi' with batch_size <= (\d+) \(num_inducing=100\)")
    assert batch == 9
    with pytest.raises(Admitted):
        GPBSVM(inference="svi", num_inducing=100, batch_size=batch).fit(X, y)
    assert "batch_size (10)" in _refusal(GPBSVM(inference="svi", num_inducing=100, batch_size=batch + 1), X, y)


@pytest.mark.parametrize("inference", ["ecm", "fitc", "svi"])
def test_a_refusal_where_nothing_fits_says_so(data, inference, monkeypatch):
    """5 kB: not even svi with one inducing point in minibatches of one fits 400 rows (its link's 400 x 1
    matrices alone take 8 kB in float32): no setting is advised, the message says nothing fits and names
    the training points to lower."""
    monkeypatch.setenv(MEMORY_ENV, "5e3")
    X, y = data
    message = _refusal(GPBSVM(inference=inference, num_inducing=1, batch_size=1), X, y)
    assert f"no inference method fits N = {N} points in this memory" in message
    assert "lower the number of training points" in message
    assert "num_inducing <=" not in message and "batch_size <=" not in message
