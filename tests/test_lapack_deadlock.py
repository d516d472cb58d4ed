"""Batched LAPACK calls and XLA:CPU's thread pool: under jaxlib 0.10 two batched LAPACK calls in one
program could wait on the pool for each other and hang the process for good. The package lowers its
programs with JAX's own (batched) calls, which jaxlib 0.12 runs without that hang: the plain-JAX
reproducer finishes in 20 fresh processes, and the fits that hung finish 20 times in a row
(``-m extended``; the reproducer and the fits run once or twice in ``test_red_team.py``)."""

from __future__ import annotations

import sys

import pytest

from ._hangs import run_until_done_or_hung

pytestmark = [pytest.mark.extended,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hang detection reads /proc")]


@pytest.mark.parametrize("processes", [20])
def test_the_reproducer_finishes_in_fresh_processes(processes):
    """Two batched Cholesky factorisations and triangular solves of 8 x 64 x 64 in one ``jax.jit``
    program, 1000 times, in each of ``processes`` fresh processes (under jax 0.10.2 15 of 20 hung)."""
    hung = []
    for i in range(processes):
        finished, out = run_until_done_or_hung([], limit_s=300.0)
        if not finished:
            hung.append((i, out[-500:]))
    assert not hung, f"{len(hung)} of {processes} runs hung or failed: {hung}"


@pytest.mark.parametrize("repeats", [20])
@pytest.mark.parametrize("fit", ["gp-digits", "linear-missing"])
def test_fits_that_hung_finish_repeatedly(fit, repeats):
    """A 10-class GPBSVM ECM fit of the digits (the classes' loops vmapped in one program) and a linear
    Gibbs fit with modelled missing values, ``repeats`` times in one process."""
    args = ["--fit", fit, "--repeats", str(repeats), "--rows", "60" if fit == "gp-digits" else "80",
            "--max-iter", "2"]
    finished, out = run_until_done_or_hung(args, limit_s=600.0 * repeats)
    assert finished, out[-2000:]
    assert out.count("fit ") == repeats
