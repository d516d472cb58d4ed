"""Tests for bayes_maxmargin.core.linalg.

XLA compilation dominates the run time here, so the tests reuse a few matrix
sizes (8 x 8 and 20 x 20) and bundle related computations into one jitted
function where they can.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core import linalg as LA

DTYPES = ["float32", "float64"]


@contextlib.contextmanager
def precision(dtype: str) -> Iterator[np.dtype]:
    """Run the body in float32 (default) or float64 (``jax.enable_x64``) mode."""
    if dtype == "float64":
        with jax.enable_x64(True):
            yield np.dtype(np.float64)
    else:
        yield np.dtype(np.float32)


def spd(n: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, n))
    return B @ B.T + n * np.eye(n)


def duplicated_kernel_matrix(seed: int = 0) -> np.ndarray:
    """20 x 20 RBF Gram matrix of a data set with 5 duplicated rows: PSD but singular."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(15, 2))
    X = np.vstack([X, X[:5]])
    return np.exp(-(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)) / 2.0**2)


def indefinite(n: int = 20, seed: int = 0) -> np.ndarray:
    """Symmetric matrix with positive mean diagonal and a large negative eigenvalue."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    eig = np.ones(n)
    eig[0] = -10.0
    return (Q * eig) @ Q.T


# --------------------------------------------------------------------------
# jittered Cholesky
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_spd_needs_no_jitter(dtype: str) -> None:
    A = spd()
    with precision(dtype) as dt:
        L, jitter = LA.jittered_cholesky(jnp.asarray(A, dt))
        assert L.dtype == dt and jitter.dtype == dt
    assert float(jitter) == 0.0
    L = np.asarray(L, float)
    np.testing.assert_array_equal(L, np.tril(L))
    rtol = 1e-12 if dt == np.float64 else 1e-5
    np.testing.assert_allclose(L @ L.T, A, rtol=rtol, atol=rtol * np.abs(A).max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_deficient_gets_positive_jitter(dtype: str) -> None:
    A = duplicated_kernel_matrix()
    with precision(dtype) as dt:
        Aj = jnp.asarray(A, dt)
        assert not np.all(np.isfinite(np.asarray(jnp.linalg.cholesky(Aj))))
        L, jitter = LA.jittered_cholesky(Aj)
    jitter = float(jitter)
    L = np.asarray(L, float)
    assert np.all(np.isfinite(L))
    # the jitter is the default initial value times a power of the growth factor 10
    k = np.log10(jitter / (1e-10 if dt == np.float64 else 1e-6))
    assert k > -1e-3 and abs(k - round(k)) < 1e-3
    added = jitter * np.mean(np.diag(A)) * np.eye(A.shape[0])
    np.testing.assert_allclose(L @ L.T, A + added, atol=1e-10 if dt == np.float64 else 1e-5)


def test_initial_jitter_growth_and_max_tries() -> None:
    options = {"initial_jitter": 1e-6, "max_tries": 3, "growth": 2.0}
    with jax.enable_x64(True):
        # the first jittered attempt (jitter = initial_jitter) succeeds
        L, jitter = LA.jittered_cholesky(jnp.asarray(duplicated_kernel_matrix()), **options)
        assert np.all(np.isfinite(np.asarray(L)))
        assert float(jitter) == pytest.approx(1e-6)
        # too little jitter: 3 attempts (0, 1e-6, 2e-6) fail; NaN factor and the last jitter tried
        L, jitter = LA.jittered_cholesky(jnp.asarray(indefinite()), **options)
        assert np.all(np.isnan(np.asarray(L)))
        assert float(jitter) == pytest.approx(2e-6)
    with pytest.raises(ValueError, match="max_tries"):
        LA.jittered_cholesky(spd(), max_tries=0)
    with pytest.raises(ValueError, match="square"):
        LA.jittered_cholesky(np.ones((3, 4)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_indefinite_raises_with_jitter_in_message(dtype: str) -> None:
    A = indefinite()
    with precision(dtype) as dt:
        L, jitter = LA.jittered_cholesky(jnp.asarray(A, dt))
        assert np.all(np.isnan(np.asarray(L)))
        # default: 8 attempts, the last with initial * 10**6
        last = 1e-4 if dt == np.float64 else 1.0
        assert float(jitter) == pytest.approx(last, rel=1e-5)
        message = r"20 x 20 .*jitter " + re.escape(f"{last:.0e} x mean")
        with pytest.raises(np.linalg.LinAlgError, match=message) as info:
            LA.cholesky_or_raise(jnp.asarray(A, dt))
    assert isinstance(info.value, LA.CholeskyError)
    assert "not positive definite" in str(info.value)


def test_cholesky_or_raise_success_stacks_and_other_failures() -> None:
    # float32, 20 x 20: shares its compiled program with the test above
    A = duplicated_kernel_matrix()
    with pytest.raises(LA.CholeskyError, match="non-finite"):
        LA.cholesky_or_raise(np.full((20, 20), np.nan))
    stack = np.stack([spd(20), A, -np.eye(20)])
    with pytest.raises(LA.CholeskyError, match=r"matrix \(2,\) of the stack.*mean diagonal is not positive"):
        LA.cholesky_or_raise(stack)
    stack[2] = spd(20, seed=1)
    L, jitter = LA.cholesky_or_raise(stack)
    assert L.shape == (3, 20, 20) and jitter.shape == (3,)
    assert float(jitter[0]) == 0.0 and float(jitter[1]) > 0.0
    np.testing.assert_allclose(np.asarray(L[0]) @ np.asarray(L[0]).T, stack[0], rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_jittered_cholesky_under_vmap_and_jit(dtype: str) -> None:
    mats = np.stack([spd(20), duplicated_kernel_matrix(), indefinite()])
    with precision(dtype) as dt:
        batch = jnp.asarray(mats, dt)
        L, jitter = jax.jit(jax.vmap(LA.jittered_cholesky))(batch)
        single = [LA.jittered_cholesky(batch[i]) for i in range(3)]
    assert L.shape == mats.shape and jitter.shape == (3,)
    assert float(jitter[0]) == 0.0 and float(jitter[1]) > 0.0
    assert np.all(np.isfinite(np.asarray(L[:2])))
    assert np.all(np.isnan(np.asarray(L[2])))
    # every batch member gets its own jitter and matches its unbatched call
    for i, (Li, ji) in enumerate(single):
        assert float(jitter[i]) == float(ji)
        if i != 1:
            np.testing.assert_allclose(np.asarray(L[i]), np.asarray(Li), rtol=1e-5, atol=1e-6)
    # the factor of the singular matrix is determined only to about eps x its condition number in the
    # trailing rows (a GPU's batched and single factorisations differ there in float32): both
    # reproduce the jittered matrix
    target = mats[1] + float(jitter[1]) * np.eye(len(mats[1]))
    tol = 1e-4 if dtype == "float32" else 1e-12
    for Li in (L[1], single[1][0]):
        Li = np.asarray(Li, np.float64)
        np.testing.assert_allclose(Li @ Li.T, target, atol=tol)


def test_jittered_cholesky_gradients() -> None:
    rng = np.random.default_rng(3)
    A = spd()
    B = rng.normal(size=(8, 3))
    S = B @ B.T  # rank 3, shifted to be robustly indefinite so that the jitter (1e-2)
    S = S - 1e-3 * np.mean(np.diag(S)) * np.eye(8)  # stays the same under small perturbations
    V = rng.normal(size=(8, 8))  # tangent direction
    W = np.tril(rng.normal(size=(8, 8)))  # cotangent direction
    eps = 1e-6

    def chol(M: jax.Array) -> jax.Array:
        return LA.jittered_cholesky(M)[0]

    def chol_jittered(M: jax.Array) -> jax.Array:
        return LA.jittered_cholesky(M, initial_jitter=1e-2)[0]

    @jax.jit
    def derivatives(A: jax.Array, S: jax.Array, V: jax.Array, W: jax.Array) -> tuple[jax.Array, ...]:
        out = []
        for f, M in ((chol, A), (chol_jittered, S)):
            _, tangent = jax.jvp(f, (M,), (V,))
            _, pullback = jax.vjp(f, M)
            (cotangent,) = pullback(W)
            fd = (f(M + eps * V) - f(M - eps * V)) / (2 * eps)
            out += [tangent, cotangent, fd]
        logdet_grad = jax.grad(lambda M: LA.logdet_from_chol(chol(M)))(A)
        return (*out, logdet_grad, LA.jittered_cholesky(S, initial_jitter=1e-2)[1])

    with jax.enable_x64(True):
        *triples, logdet_grad, jitter = derivatives(*map(jnp.asarray, (A, S, V, W)))
    assert float(jitter) == pytest.approx(1e-2)
    for tangent, cotangent, fd in (triples[:3], triples[3:]):
        # forward mode matches finite differences; reverse mode is its transpose
        np.testing.assert_allclose(np.asarray(tangent), np.asarray(fd), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(
            np.sum(np.asarray(cotangent) * V), np.sum(np.asarray(tangent) * W), rtol=1e-8
        )
    # gradient of the log-determinant is A^{-1}
    np.testing.assert_allclose(np.asarray(logdet_grad), np.linalg.inv(A), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------
# solves, determinants, Gaussians
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_chol_solve_and_logdet(dtype: str) -> None:
    A = spd(seed=1)
    B = np.random.default_rng(2).normal(size=(8, 3))
    with precision(dtype) as dt:
        L, _ = LA.jittered_cholesky(jnp.asarray(A, dt))
        X = LA.chol_solve(L, jnp.asarray(B, dt))
        x = LA.chol_solve(L, jnp.asarray(B[:, 0], dt))
        logdet = LA.logdet_from_chol(L)
    assert X.dtype == dt and x.shape == (8,)
    rtol = 1e-10 if dt == np.float64 else 1e-4
    np.testing.assert_allclose(np.asarray(X), np.linalg.solve(A, B), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(A, B[:, 0]), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(float(logdet), np.linalg.slogdet(A)[1], rtol=rtol)


def test_mvn_from_precision() -> None:
    P = spd(seed=4)
    b = np.random.default_rng(5).normal(size=8)
    with jax.enable_x64(True):
        mean, L = LA.mvn_from_precision(jnp.asarray(P), jnp.asarray(b))
        # differentiable w.r.t. the precision and the linear term
        grad = jax.jit(jax.grad(lambda p, v: jnp.sum(LA.mvn_from_precision(p, v)[0]), argnums=(0, 1)))
        g_P, g_b = grad(jnp.asarray(P), jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(mean), np.linalg.solve(P, b), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(L) @ np.asarray(L).T, P, rtol=1e-12)
    # d/db 1^T P^{-1} b = P^{-1} 1 and d/dP 1^T P^{-1} b = -P^{-1} 1 b^T P^{-1} (symmetrised)
    u, m = np.linalg.solve(P, np.ones(8)), np.linalg.solve(P, b)
    np.testing.assert_allclose(np.asarray(g_b), u, rtol=1e-10)
    expected = -np.outer(u, m)
    g_sym = np.asarray(g_P) + np.asarray(g_P).T
    np.testing.assert_allclose(g_sym, expected + expected.T, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_mvn_precision_moments(dtype: str) -> None:
    n, draws = 8, 40_000
    rng = np.random.default_rng(6)
    B = rng.normal(size=(n, n))
    P = B @ B.T + 0.5 * np.eye(n)
    cov = np.linalg.inv(P)  # reference only
    mean = rng.normal(size=n)
    with precision(dtype) as dt:
        L, _ = LA.jittered_cholesky(jnp.asarray(P, dt))
        m = jnp.asarray(mean, dt)
        if dt == np.float64:
            samples = LA.sample_mvn_precision(jax.random.key(0), L, m, sample_shape=(draws,))
        else:  # one draw per key, vmapped
            keys = jax.random.split(jax.random.key(0), draws)
            samples = jax.vmap(lambda k: LA.sample_mvn_precision(k, L, m))(keys)
    assert samples.shape == (draws, n) and samples.dtype == dt
    s = np.asarray(samples, float)
    # Monte Carlo tolerance: 5 standard errors
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(s.mean(0) - mean) < 5 * sd / np.sqrt(draws))
    emp = np.cov(s, rowvar=False)
    se_cov = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / draws)
    assert np.all(np.abs(emp - cov) < 5 * se_cov)


# --------------------------------------------------------------------------
# Woodbury
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_woodbury_matches_dense(dtype: str) -> None:
    rng = np.random.default_rng(7)
    n, m = 20, 4
    d = rng.uniform(0.5, 2.0, size=n)
    U = rng.normal(size=(n, m))
    G = rng.normal(size=(m, m))
    C = G @ G.T + 0.5 * np.eye(m)
    B = rng.normal(size=(n, 2))
    S = np.linalg.inv(C)  # the same A in the Nystrom form U S^{-1} U^T (reference construction only)
    A = np.diag(d) + U @ C @ U.T
    A_inv = np.linalg.inv(A)  # reference only
    scales = np.array([0.5, 2.0])

    @jax.jit
    def bundle(d: jax.Array, U: jax.Array, C: jax.Array, S: jax.Array, B: jax.Array) -> tuple[jax.Array, ...]:
        grad_d, grad_C = jax.grad(LA.woodbury_logdet, argnums=(0, 2))(d, U, C)
        return (
            LA.woodbury_solve(d, U, C, B),
            LA.woodbury_solve(d, U, C, B[:, 0]),
            LA.woodbury_logdet(d, U, C),
            LA.woodbury_solve(d, U, S, B, inverse_c=True),
            LA.woodbury_logdet(d, U, S, inverse_c=True),
            jax.vmap(lambda c: LA.woodbury_logdet(d * c, U, C))(jnp.asarray(scales, d.dtype)),
            grad_d,
            grad_C,
        )

    with precision(dtype) as dt:
        out = bundle(*(jnp.asarray(v, dt) for v in (d, U, C, S, B)))
    X, x, ld, Xi, ldi, lds, grad_d, grad_C = (np.asarray(o, float) for o in out)
    assert out[0].dtype == dt and x.shape == (n,)
    rtol = 1e-9 if dt == np.float64 else 2e-3
    np.testing.assert_allclose(X, np.linalg.solve(A, B), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(x, np.linalg.solve(A, B[:, 0]), rtol=rtol, atol=rtol)
    np.testing.assert_allclose(ld, np.linalg.slogdet(A)[1], rtol=rtol)
    np.testing.assert_allclose(Xi, np.linalg.solve(A, B), rtol=10 * rtol, atol=10 * rtol)
    np.testing.assert_allclose(ldi, np.linalg.slogdet(A)[1], rtol=10 * rtol)
    for c, value in zip(scales, lds):
        np.testing.assert_allclose(value, np.linalg.slogdet(np.diag(d * c) + U @ C @ U.T)[1], rtol=rtol)
    # d log det A / d d_i = [A^{-1}]_ii and d log det A / dC = U^T A^{-1} U (symmetric part)
    np.testing.assert_allclose(grad_d, np.diag(A_inv), rtol=10 * rtol, atol=rtol)
    expected = U.T @ A_inv @ U
    np.testing.assert_allclose(0.5 * (grad_C + grad_C.T), expected, rtol=10 * rtol, atol=10 * rtol)


def test_woodbury_shape_errors() -> None:
    d, U, C = np.ones(5), np.ones((5, 2)), np.eye(2)
    with pytest.raises(ValueError, match="expected d"):
        LA.woodbury_logdet(d[:-1], U, C)
    with pytest.raises(ValueError, match="expected d"):
        LA.woodbury_solve(d, U, np.eye(3), np.ones(5))


@pytest.mark.parametrize("x64", [False, True])
def test_float_precision_asks_for_full_precision_products(x64: bool) -> None:
    """Inside the estimators' context every product is lowered at HIGHEST precision (a GPU's default
    float32 product would use TF32) in the asked dtype; outside, the user's settings are untouched."""
    def lowered_dot(a):
        return next(line for line in jax.jit(lambda m: m @ m).lower(a).as_text().splitlines() if "dot_general" in line)

    before = (jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision)
    with LA.float_precision(x64):
        line = lowered_dot(jnp.ones((3, 3)))
    assert "precision = [HIGHEST, HIGHEST]" in line
    assert ("f64" if x64 else "f32") in line
    assert (jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision) == before
    assert "HIGHEST" not in lowered_dot(jnp.ones((3, 3), jnp.float32))
