"""Batched LAPACK calls and XLA:CPU's thread pool: the package's programs make one LAPACK call per matrix
(jaxlib 0.10's batched calls wait on the pool and can hang a program that runs two of them at once),
with results identical to the bit, and the fits that were seen to hang finish 20 times in a row
(``-m extended``; the reproducer and the fits run once or twice in ``test_red_team.py``)."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import solve_triangular

from bayes_maxmargin.core import compilation
from bayes_maxmargin.core.compilation import jit

from ._hangs import run_until_done_or_hung


def spd(rng: np.random.Generator, batch: tuple[int, ...], n: int) -> np.ndarray:
    m = rng.normal(size=(*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _lapack_calls(hlo: str) -> int:
    return hlo.count("lapack_")


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.skipif(not compilation._batched_lapack_blocks(), reason="this jaxlib's batched LAPACK calls do not wait")
def test_a_stack_is_lowered_as_one_lapack_call_per_matrix(x64):
    a = spd(np.random.default_rng(0), (2, 3), 8)
    program = jit(lambda a: jnp.linalg.cholesky(a))  # a fresh function: no lowering cached from elsewhere
    assert _lapack_calls(program.lower(a).as_text()) == 6
    # the user's own programs keep JAX's single batched call
    assert _lapack_calls(jax.jit(lambda a: jnp.linalg.cholesky(a)).lower(a).as_text()) == 1
    # beyond UNROLL_LAPACK_BATCH matrices: one call in a loop
    big = spd(np.random.default_rng(1), (compilation.UNROLL_LAPACK_BATCH + 1,), 3)
    text = jit(lambda a: jnp.linalg.cholesky(a)).lower(big).as_text()
    assert _lapack_calls(text) == 1 and "stablehlo.while" in text


def _linalg_cases(rng: np.random.Generator) -> dict:
    tri = np.linalg.cholesky(spd(rng, (7,), 12))
    return {
        "cholesky": (lambda a: jnp.linalg.cholesky(a), (spd(rng, (3, 4), 10),)),
        "cholesky-loop": (lambda a: jnp.linalg.cholesky(a), (spd(rng, (40,), 5),)),
        "triangular-solve": (lambda l, b: solve_triangular(l, b, lower=True, trans="T"), (tri, rng.normal(size=(7, 12, 3)))),
        "vmapped-cho-solve": (jax.vmap(lambda a, b: jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(a), True), b)),
                              (spd(rng, (5,), 9), rng.normal(size=(5, 9)))),
        "slogdet": (lambda a: jnp.linalg.slogdet(a), (spd(rng, (4,), 6),)),
        "solve": (lambda a, b: jnp.linalg.solve(a, b), (spd(rng, (4,), 6), rng.normal(size=(4, 6, 2)))),
        "eigh": (lambda a: jnp.linalg.eigh(a), (spd(rng, (3,), 7),)),
        "svd": (lambda a: jnp.linalg.svd(a), (rng.normal(size=(3, 8, 5)),)),
        "qr": (lambda a: jnp.linalg.qr(a), (rng.normal(size=(3, 8, 5)),)),
        "float32": (lambda a: jnp.linalg.cholesky(a), (spd(rng, (5,), 6).astype(np.float32),)),
    }


@pytest.mark.parametrize("case", list(_linalg_cases(np.random.default_rng(0))))
def test_one_call_per_matrix_gives_the_same_bits(x64, case):
    fun, args = _linalg_cases(np.random.default_rng(0))[case]
    expected = jax.jit(lambda *a: fun(*a))(*args)  # JAX's batched calls
    got = jit(lambda *a: fun(*a))(*args)
    for e, g in zip(jax.tree.leaves(expected), jax.tree.leaves(got), strict=True):
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_unbatched_lapack_applies_only_within_the_block(x64):
    a = spd(np.random.default_rng(0), (3,), 4)
    with compilation.unbatched_lapack() as installed:
        inside = jax.jit(lambda a: jnp.linalg.cholesky(a)).lower(a).as_text()
    outside = jax.jit(lambda a: jnp.linalg.cholesky(a)).lower(a).as_text()
    assert _lapack_calls(inside) == (3 if installed else 1)
    assert _lapack_calls(outside) == 1
    assert installed == compilation._batched_lapack_blocks()


@pytest.mark.extended
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hang detection reads /proc")
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
