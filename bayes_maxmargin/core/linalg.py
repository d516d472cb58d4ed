"""Cholesky-based linear algebra in pure JAX.

Everything here works from Cholesky factors: no function forms an explicit
matrix inverse. All functions except :func:`cholesky_or_raise` are
jit-compilable, vmappable and differentiable.

Conventions: ``L`` always denotes a *lower* triangular Cholesky factor,
``A = L L^T``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from functools import partial
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.typing import ArrayLike

from bayes_maxmargin.core.compilation import jit

__all__ = ["CholeskyError", "LOG_2PI", "chol_solve", "cholesky_or_raise", "gaussian_log_density",
           "jittered_cholesky", "limit_blas_threads", "logdet_from_chol", "mvn_from_precision", "mvn_logpdf_chol",
           "psd_sqrt", "sample_mvn_precision", "woodbury_logdet", "woodbury_solve"]


def psd_sqrt(cov: np.ndarray) -> np.ndarray:
    """A factor F with F F' = ``cov`` (host, float64): the symmetric square root from the eigenvectors,
    defined also for a singular (positive semi-definite) ``cov``, whose negative rounding eigenvalues
    count as 0."""
    values, vectors = np.linalg.eigh(np.asarray(cov, dtype=np.float64))
    return vectors * np.sqrt(np.maximum(values, 0.0))

#: log(2 pi), the normalising constant of every Gaussian density in the library.
LOG_2PI = 1.8378770664093453


@contextlib.contextmanager
def float_precision(x64: bool) -> Iterator[None]:
    """Compute in float64 (``x64``) or float32, with every matrix product at that precision.

    ``jax.enable_x64`` for the duration only (the user's global setting is unchanged), and
    ``jax.default_matmul_precision("highest")``: on a GPU, JAX's default float32 product rounds its
    inputs to TF32 (a 10-bit mantissa), which a float32 fit must not inherit. Every fit and
    prediction of the estimators runs inside it.
    """
    with jax.enable_x64(x64), jax.default_matmul_precision("highest"):
        yield


@contextlib.contextmanager
def limit_blas_threads(n: int | None) -> Iterator[None]:
    """Limit OpenBLAS (numpy, scipy and JAX's CPU LAPACK calls) to ``n`` threads (threadpoolctl);
    None: leave as is.

    JAX's CPU Cholesky factorisations and triangular solves go through scipy's OpenBLAS. Threaded,
    on matrices of a few hundred rows, they are no faster than single-threaded ones, and when the
    cores are shared with other processes they become tens to hundreds of times slower (a 400 x 400
    Cholesky factor: 0.47 s with OpenBLAS's 2 threads on a loaded 2-core machine, 0.009 s with one).
    JAX's own (Eigen) thread pool is untouched.
    """
    with limit_threads(n, "blas"):
        yield


@contextlib.contextmanager
def limit_threads(n: int | None, user_api: str) -> Iterator[None]:
    """Limit the thread pools of one kind, threadpoolctl's ``user_api`` ("blas" or "openmp"), to ``n``
    threads; None: leave them as they are. The libraries are found once per process
    (:func:`_threadpools`: a few milliseconds per search, a tenth of a small fit's time)."""
    if n is None:
        yield
        return
    with _threadpools().limit(limits=int(n), user_api=user_api):
        yield


@functools.cache
def _threadpools() -> Any:
    """threadpoolctl's controller of the thread pools loaded at the first fit (numpy's and scipy's
    OpenBLAS, which the package imports before any fit)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def gaussian_log_density(quad: ArrayLike, logdet: ArrayLike, n: int) -> Array:
    """log N(x | m, S) = -(quad + logdet + n log 2 pi) / 2 from quad = (x - m)' S^-1 (x - m) and
    logdet = log det S (both computed by the caller from a factorisation, never from S^-1)."""
    return -0.5 * (quad + logdet + n * LOG_2PI)


def mvn_logpdf_chol(x: ArrayLike, chol: ArrayLike) -> Array:
    """log N(x | 0, L L') from the lower Cholesky factor L (one triangular solve)."""
    white = solve_triangular(chol, x, lower=True)
    return gaussian_log_density(jnp.sum(white**2), logdet_from_chol(chol), jnp.shape(x)[-1])

Array: TypeAlias = jax.Array


class CholeskyError(np.linalg.LinAlgError):
    """A Cholesky factorisation failed even after adding jitter to the diagonal."""


# --------------------------------------------------------------------------
# jittered Cholesky
# --------------------------------------------------------------------------
def _default_jitter(dtype: np.dtype) -> float:
    """Initial relative jitter: ``1e-10`` for float64, ``1e-6`` for lower precision."""
    return 1e-10 if jnp.finfo(dtype).bits >= 64 else 1e-6


def _diag_mean(A: Array) -> tuple[Array, Array]:
    """Mean of the diagonal and whether it is a positive finite number.

    A matrix whose mean diagonal is not positive cannot be positive definite,
    and no relative jitter is tried for it.
    """
    m = jnp.mean(jnp.diagonal(A))
    return m, jnp.isfinite(m) & (m > 0)


def _all_finite(L: Array) -> Array:
    """Whether a Cholesky factor is finite.

    Checking the diagonal suffices: a non-finite entry ``L_ik`` enters
    ``L_ii = sqrt(A_ii - sum_k L_ik^2)`` and makes it non-finite too.
    """
    return jnp.all(jnp.isfinite(jnp.diagonal(L)))


def _search(A: Array, initial_jitter: float, max_tries: int, growth: float) -> tuple[Array, Array]:
    """The jitter loop: returns ``(L, jitter)`` (``L`` is NaN if every try failed).

    Iteration 0 is the plain factorisation (jitter 0), iteration ``k >= 1``
    uses ``initial_jitter * growth**(k - 1)``; one Cholesky in the loop body
    keeps the compiled program small.
    """
    n = A.shape[-1]
    A = 0.5 * (A + A.T)  # as jnp.linalg.cholesky(symmetrize_input=True) would
    eye = jnp.eye(n, dtype=A.dtype)
    scale, valid = _diag_mean(A)
    first = jnp.asarray(initial_jitter, dtype=A.dtype)

    def cond(state: tuple[Array, Array, Array, Array]) -> Array:
        tries, _, _, ok = state
        retry = jnp.logical_not(ok) & valid & (tries < max_tries)
        return (tries == 0) | retry

    def body(state: tuple[Array, Array, Array, Array]) -> tuple[Array, Array, Array, Array]:
        tries, _, last, _ = state
        jitter = jnp.where(tries == 0, 0.0, jnp.where(tries == 1, first, last * growth))
        jitter = jitter.astype(A.dtype)
        L = jnp.linalg.cholesky(A + (jitter * scale) * eye, symmetrize_input=False)
        return tries + 1, L, jitter, _all_finite(L)

    init = (
        jnp.zeros((), jnp.int32),
        jnp.zeros_like(A),
        jnp.zeros((), dtype=A.dtype),
        jnp.zeros((), dtype=bool),
    )
    _, L, jitter, ok = lax.while_loop(cond, body, init)
    L = jnp.where(ok, L, jnp.full_like(L, jnp.nan))
    return L, jitter


def _mm(A: Array, B: Array) -> Array:
    """Matrix product at full float precision (no reduced-precision matmul on accelerators)."""
    return jnp.matmul(A, B, precision=lax.Precision.HIGHEST)


def _phi(X: Array) -> Array:
    """Lower triangle of ``X`` with the diagonal halved."""
    return jnp.tril(X) - 0.5 * jnp.diag(jnp.diagonal(X))


@partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _jittered_cholesky(
    A: Array, initial_jitter: float, max_tries: int, growth: float
) -> tuple[Array, Array]:
    return _search(A, initial_jitter, max_tries, growth)


@_jittered_cholesky.defjvp
def _jittered_cholesky_jvp(
    initial_jitter: float,
    max_tries: int,
    growth: float,
    primals: tuple[Array],
    tangents: tuple[Array],
) -> tuple[tuple[Array, Array], tuple[Array, Array]]:
    # The jitter is piecewise constant in A, so the factor is that of
    # A + jitter * s(A) * I with s(A) the mean diagonal; differentiate that
    # with the standard Cholesky rule dL = L phi(L^{-1} dA L^{-T}).
    (A,) = primals
    (dA,) = tangents
    L, jitter = _jittered_cholesky(A, initial_jitter, max_tries, growth)
    dA = 0.5 * (dA + dA.T)  # jnp.linalg.cholesky symmetrises its input
    _, valid = _diag_mean(A)
    dscale = jnp.where(valid, jnp.mean(jnp.diagonal(dA)), 0.0)
    dA = dA + (jitter * dscale) * jnp.eye(A.shape[-1], dtype=A.dtype)
    tmp = solve_triangular(L, dA, lower=True)  # L^{-1} dA
    inner = solve_triangular(L, tmp.T, lower=True)  # L^{-1} dA L^{-T} (symmetric)
    dL = _mm(L, _phi(inner))
    return (L, jitter), (dL, jnp.zeros_like(jitter))


# compiled once per shape, dtype and setting (also when called outside of jit)
_jittered_cholesky_jit = jit(_jittered_cholesky, static_argnums=(1, 2, 3))


def jittered_cholesky(
    A: ArrayLike,
    *,
    initial_jitter: float | None = None,
    max_tries: int = 8,
    growth: float = 10.0,
) -> tuple[Array, Array]:
    """Cholesky factor of ``A``, adding diagonal jitter if the plain factorisation fails.

    First ``cholesky(A)`` is tried. If the factor has non-finite entries,
    ``jitter * mean(diag(A)) * I`` is added and the factorisation retried,
    with ``jitter = initial_jitter * growth**k`` for ``k = 0, ..., max_tries - 2``,
    stopping at the first success (``max_tries`` attempts in all, the plain
    one included; with the defaults the largest relative jitter is ``1e-4``
    in float64 and ``1`` in float32). The search runs inside JAX
    (:func:`jax.lax.while_loop`), so the function can be jit-compiled and
    vmapped (under :func:`jax.vmap` every batch member gets its own jitter).
    It is differentiable with respect to ``A`` (forward and reverse mode);
    the jitter itself is treated as a constant, which is exact because it is
    piecewise constant in ``A``. The input is symmetrised, ``(A + A^T) / 2``,
    as :func:`jax.numpy.linalg.cholesky` does by default.

    Parameters
    ----------
    A : ArrayLike
        Symmetric matrix of shape ``(n, n)``.
    initial_jitter : float, optional
        First relative jitter tried (a Python number). Defaults to ``1e-10``
        for float64 and ``1e-6`` for float32 inputs.
    max_tries : int, default 8
        Maximum number of factorisations, the plain one included (``>= 1``).
    growth : float, default 10.0
        Factor by which the jitter grows between attempts.

    Returns
    -------
    L : Array
        Lower triangular factor with ``L L^T = A + jitter * mean(diag(A)) * I``;
        all NaN if every attempt failed.
    jitter : Array
        Scalar relative jitter actually used: ``0`` when ``A`` factorised as
        is, the last value tried when every attempt failed. A matrix whose
        mean diagonal is not a positive number cannot be positive definite:
        no jitter is tried for it and it fails with jitter ``0``.

    Notes
    -----
    Use :func:`cholesky_or_raise` outside of jit to turn a failure into an
    exception.
    """
    A = jnp.asarray(A)
    if not jnp.issubdtype(A.dtype, jnp.floating):
        A = A.astype(jnp.result_type(float))
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square (n, n) matrix, got shape {A.shape}")
    if max_tries < 1:
        raise ValueError(f"max_tries must be at least 1, got {max_tries}")
    if initial_jitter is None:
        initial_jitter = _default_jitter(A.dtype)
    return _jittered_cholesky_jit(A, float(initial_jitter), int(max_tries), float(growth))


@partial(jit, static_argnames=("initial_jitter", "max_tries", "growth"))
def _batched_jittered_cholesky(
    A: Array, *, initial_jitter: float | None, max_tries: int, growth: float
) -> tuple[Array, Array, Array]:
    """:func:`jittered_cholesky` mapped over the stack ``A`` of shape ``(..., n, n)``, and whether
    each factor is finite; compiled once per shape."""
    n = A.shape[-1]
    L, jitter = jax.vmap(
        partial(
            jittered_cholesky,
            initial_jitter=initial_jitter,
            max_tries=max_tries,
            growth=growth,
        )
    )(A.reshape((-1, n, n)))
    return L.reshape(A.shape), jitter.reshape(A.shape[:-2]), jnp.all(jnp.isfinite(L), axis=(-2, -1))


def cholesky_or_raise(
    A: ArrayLike,
    *,
    initial_jitter: float | None = None,
    max_tries: int = 8,
    growth: float = 10.0,
) -> tuple[Array, Array]:
    """Host-side :func:`jittered_cholesky` that raises instead of returning NaN.

    Not for use inside :func:`jax.jit` (it inspects the result on the host).
    A stack of matrices of shape ``(..., n, n)`` is factorised matrix by
    matrix (each with its own jitter).

    Parameters
    ----------
    A : ArrayLike
        Symmetric matrix of shape ``(n, n)`` or a stack ``(..., n, n)``.
    initial_jitter, max_tries, growth
        As in :func:`jittered_cholesky`.

    Returns
    -------
    L : Array
        Lower triangular factor(s), same shape as ``A``.
    jitter : Array
        Relative jitter used, shape ``A.shape[:-2]``.

    Raises
    ------
    CholeskyError
        (a subclass of :class:`numpy.linalg.LinAlgError`) if the factorisation
        fails even with the largest jitter; the message names the matrix size
        and that jitter.
    """
    A = jnp.asarray(A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expected a square (..., n, n) matrix, got shape {A.shape}")
    n = A.shape[-1]
    batch = A.shape[:-2]
    L, jitter, ok = _batched_jittered_cholesky(
        A, initial_jitter=initial_jitter, max_tries=max_tries, growth=growth
    )
    ok = np.asarray(ok).ravel()
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        index = tuple(int(i) for i in np.unravel_index(bad, batch))
        where = f" (matrix {index} of the stack)" if batch else ""
        jit = float(np.asarray(jitter).ravel()[bad])
        Ab = np.asarray(A).reshape((-1, n, n))[bad]
        if not np.all(np.isfinite(Ab)):
            raise CholeskyError(
                f"Cholesky failed for a {n} x {n} matrix{where}: it has non-finite "
                f"entries (check the kernel parameters / the data for non-finite rows)"
            )
        if not np.mean(np.diagonal(Ab)) > 0:
            raise CholeskyError(
                f"Cholesky failed for a {n} x {n} matrix{where}: its mean diagonal is "
                f"not positive, so it is not positive definite and no jitter was tried "
                f"(check the kernel parameters)"
            )
        raise CholeskyError(
            f"Cholesky failed for a {n} x {n} matrix{where} even with jitter {jit:.0e} "
            f"x mean diagonal added; the matrix is not positive definite (check the "
            f"kernel parameters / the data for duplicated or non-finite rows)"
        )
    return L, jitter


# --------------------------------------------------------------------------
# solves, determinants, Gaussians
# --------------------------------------------------------------------------
@jit
def chol_solve(L: ArrayLike, B: ArrayLike) -> Array:
    """Solve ``A X = B`` given the lower Cholesky factor ``L`` of ``A``.

    Two triangular solves: ``L Y = B`` then ``L^T X = Y``.

    Parameters
    ----------
    L : ArrayLike
        Lower triangular factor of shape ``(n, n)``.
    B : ArrayLike
        Right-hand side of shape ``(n,)`` or ``(n, k)``.

    Returns
    -------
    Array
        ``X = A^{-1} B`` with the shape of ``B``.
    """
    return cho_solve((jnp.asarray(L), True), jnp.asarray(B))


@jit
def logdet_from_chol(L: ArrayLike) -> Array:
    """``log det A = 2 sum_i log L_ii`` from the Cholesky factor of ``A``.

    Parameters
    ----------
    L : ArrayLike
        Cholesky factor(s) of shape ``(..., n, n)``.

    Returns
    -------
    Array
        Log-determinant(s), shape ``L.shape[:-2]``.
    """
    L = jnp.asarray(L)
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


@partial(jit, static_argnames=("sample_shape",))
def sample_mvn_precision(
    key: Array,
    L_prec: ArrayLike,
    mean: ArrayLike,
    sample_shape: tuple[int, ...] = (),
) -> Array:
    """Draw from ``N(mean, P^{-1})`` given the lower Cholesky factor of the precision ``P``.

    With ``P = L L^T`` and ``z ~ N(0, I)``, ``x = mean + L^{-T} z`` has
    covariance ``L^{-T} L^{-1} = P^{-1}``; one triangular solve, no inverse.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    L_prec : ArrayLike
        Lower Cholesky factor of the precision, shape ``(n, n)``.
    mean : ArrayLike
        Mean vector of shape ``(n,)``.
    sample_shape : tuple of int, default ()
        Leading shape of independent draws.

    Returns
    -------
    Array
        Draws of shape ``sample_shape + (n,)``.
    """
    L = jnp.asarray(L_prec)
    mean = jnp.asarray(mean)
    dtype = jnp.result_type(L.dtype, mean.dtype)
    n = mean.shape[-1]
    z = jax.random.normal(key, tuple(sample_shape) + (n,), dtype=dtype)
    z = z.reshape((-1, n)).T  # (n, S)
    x = solve_triangular(L, z, lower=True, trans="T")  # L^{-T} z
    return mean + x.T.reshape(tuple(sample_shape) + (n,))


@jit
def mvn_from_precision(P: ArrayLike, b: ArrayLike) -> tuple[Array, Array]:
    """Gaussian in canonical form: precision ``P`` and linear term ``b``.

    The density ``exp(-x^T P x / 2 + b^T x)`` is ``N(P^{-1} b, P^{-1})``. The
    mean is computed by two triangular solves with the Cholesky factor of
    ``P`` (from :func:`jittered_cholesky`, so a numerically semi-definite
    ``P`` gets a small relative jitter).

    Parameters
    ----------
    P : ArrayLike
        Symmetric positive definite precision of shape ``(n, n)``.
    b : ArrayLike
        Linear term of shape ``(n,)``.

    Returns
    -------
    mean : Array
        ``P^{-1} b``, shape ``(n,)``.
    L : Array
        Lower Cholesky factor of ``P``, to pass to :func:`sample_mvn_precision`
        or :func:`logdet_from_chol`. NaN if ``P`` is not positive definite.
    """
    L, _ = jittered_cholesky(P)
    return chol_solve(L, b), L


# --------------------------------------------------------------------------
# Woodbury identities for A = D + U C U^T
# --------------------------------------------------------------------------
def _woodbury_parts(
    d: ArrayLike, U: ArrayLike, C: ArrayLike, inverse_c: bool, factor_c: bool
) -> tuple[Array, Array, Array, Array | None]:
    """Shared pieces: ``d``, ``U`` and the small factors ``(L_inner, L_C)``.

    ``L_C`` (the factor of the ``C`` argument) is computed only when
    ``factor_c`` is set or the ``C`` form needs it.
    """
    d = jnp.asarray(d)
    U = jnp.asarray(U)
    C = jnp.asarray(C)
    if U.ndim != 2 or d.shape != U.shape[:1] or C.shape != (U.shape[1], U.shape[1]):
        raise ValueError(
            f"expected d (n,), U (n, m), C (m, m); got {d.shape}, {U.shape}, {C.shape}"
        )
    Lc = jittered_cholesky(C)[0] if (factor_c or not inverse_c) else None
    UtDU = _mm(U.T, U / d[:, None])  # U^T D^{-1} U
    if inverse_c:
        # C holds S = C^{-1}: inner matrix S + U^T D^{-1} U (as ill-conditioned as S may be).
        inner = C + UtDU
        Li = jittered_cholesky(0.5 * (inner + inner.T))[0]
    else:
        # W = U L_C, inner matrix I + W^T D^{-1} W = I + L_C^T (U^T D^{-1} U) L_C: its
        # eigenvalues are >= 1, so a plain Cholesky suffices.
        inner = jnp.eye(U.shape[1], dtype=UtDU.dtype) + _mm(_mm(Lc.T, UtDU), Lc)
        Li = jnp.linalg.cholesky(inner)
    return d, U, Li, Lc


@partial(jit, static_argnames=("inverse_c",))
def woodbury_solve(
    d: ArrayLike,
    U: ArrayLike,
    C: ArrayLike,
    B: ArrayLike,
    *,
    inverse_c: bool = False,
) -> Array:
    """Solve ``(D + U C U^T) X = B`` with ``D = diag(d)``, using only ``m x m`` Choleskys.

    With ``C = L_C L_C^T`` and ``W = U L_C`` the Woodbury identity reads

    ``(D + W W^T)^{-1} = D^{-1} - D^{-1} W (I_m + W^T D^{-1} W)^{-1} W^T D^{-1}``,

    so the only factorisations are of the ``m x m`` matrices ``C`` and
    ``K = I_m + W^T D^{-1} W`` (whose eigenvalues are ``>= 1``). When
    ``inverse_c=True`` the argument ``C`` holds ``S = C^{-1}`` instead (e.g.
    ``K_mm`` in the Nystrom form ``K_nm K_mm^{-1} K_mn``) and the identity is
    used as

    ``(D + U S^{-1} U^T)^{-1} = D^{-1} - D^{-1} U (S + U^T D^{-1} U)^{-1} U^T D^{-1}``,

    factorising ``S + U^T D^{-1} U``. Cost ``O(n m^2 + m^3)``.

    Parameters
    ----------
    d : ArrayLike
        Positive diagonal of ``D``, shape ``(n,)``.
    U : ArrayLike
        Low-rank factor of shape ``(n, m)``.
    C : ArrayLike
        Symmetric positive definite ``(m, m)`` matrix ``C`` (or ``C^{-1}``,
        see ``inverse_c``).
    B : ArrayLike
        Right-hand side of shape ``(n,)`` or ``(n, k)``.
    inverse_c : bool, default False
        Whether ``C`` holds the inverse of the middle matrix.

    Returns
    -------
    Array
        ``X = (D + U C U^T)^{-1} B`` with the shape of ``B``.
    """
    d, U, Li, Lc = _woodbury_parts(d, U, C, inverse_c, factor_c=False)
    B = jnp.asarray(B)
    dB = B / d if B.ndim == 1 else B / d[:, None]  # D^{-1} B
    if inverse_c:
        inner = chol_solve(Li, _mm(U.T, dB))  # (S + U^T D^{-1} U)^{-1} U^T D^{-1} B
        correction = _mm(U, inner)
    else:
        W = _mm(U, Lc)
        correction = _mm(W, chol_solve(Li, _mm(W.T, dB)))
    return dB - (correction / d if B.ndim == 1 else correction / d[:, None])


@partial(jit, static_argnames=("inverse_c",))
def woodbury_logdet(
    d: ArrayLike,
    U: ArrayLike,
    C: ArrayLike,
    *,
    inverse_c: bool = False,
) -> Array:
    """``log det(D + U C U^T)`` with ``D = diag(d)``, using only ``m x m`` Choleskys.

    By the matrix determinant lemma, with ``C = L_C L_C^T`` and ``W = U L_C``,

    ``log det(D + W W^T) = sum_i log d_i + log det(I_m + W^T D^{-1} W)``.

    When ``inverse_c=True`` the argument ``C`` holds ``S = C^{-1}`` and

    ``log det(D + U S^{-1} U^T) = sum_i log d_i + log det(S + U^T D^{-1} U) - log det S``.

    Parameters
    ----------
    d, U, C, inverse_c
        As in :func:`woodbury_solve`.

    Returns
    -------
    Array
        Scalar log-determinant.
    """
    d, U, Li, Lc = _woodbury_parts(d, U, C, inverse_c, factor_c=True)
    out = jnp.sum(jnp.log(d)) + logdet_from_chol(Li)
    if inverse_c:
        out = out - logdet_from_chol(Lc)
    return out
