"""The two representations of the GP prior covariance that ECM, ML-II and prediction work on.

* Dense (:class:`GPData`): K itself with its Cholesky factor, O(N^3) to factorise (Henao et al.
  2014, Sec. 3).
* FITC (:class:`FITCFactors`): low rank plus diagonal, Kf = diag(K_nn - Q_nn) + Q_nn with
  Q_nn = K_nm K_mm^-1 K_mn from M pseudo-inputs (Snelson & Ghahramani 2006; the paper's eq. 10),
  O(N M^2).

Every operation the ECM needs is written once per representation and dispatched on the type:
:func:`alpha` (alpha = (K + Lambda / gamma)^-1 Y (1 + lambda), eq. 12), :func:`prior_matvec` (K a),
:func:`log_prior` (log N(f | 0, K)) and :func:`log_marginal` (log Z of eq. 9 / 10 at fixed lambda and
gamma). Nowhere is K^-1 or (K + Lambda / gamma)^-1 formed: the dense form uses the Cholesky factor of
the scaled matrix I + W^1/2 K W^1/2 (W = gamma Lambda^-1, every eigenvalue >= 1), the FITC form
Woodbury on M x M factors.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.typing import ArrayLike

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.kernels import KernelFn, get_kernel, kernel_diag
from bayes_maxmargin.core.linalg import (
    gaussian_log_density,
    jittered_cholesky,
    mvn_logpdf_chol,
    woodbury_logdet,
    woodbury_solve,
)

__all__ = ["Covariance", "FITCFactors", "GPData", "alpha", "alpha_from_factor", "as_2d", "chol_mm",
           "dense_log_marginal", "fitc_factors", "gp_alpha", "gp_data", "leave_groups_out", "log_marginal", "log_prior",
           "loo_moments", "prior_matvec", "pseudo_obs", "pseudo_obs_scaled", "scaled_factor"]


# --------------------------------------------------------------------------- dense
class GPData(NamedTuple):
    """The data of the GP sampler at fixed kernel parameters.

    Attributes
    ----------
    K : Array, shape (n, n)
        Prior covariance of f at the training inputs, jitter included (the covariance of the
        program's site ``"f"``, :func:`~bayes_maxmargin.models.gp.model.prior_covariance`).
    y : Array, shape (n,)
        Labels coded +-1.
    chol : Array, shape (n, n)
        Lower Cholesky factor of K (used for the prior draw f0 ~ N(0, K) and for log N(f | 0, K)).
    """

    K: Array
    y: Array
    chol: Array


def gp_data(K: ArrayLike, y: ArrayLike) -> GPData:
    """:class:`GPData` from the prior covariance K and labels y, factorising K once.

    The factor comes from :func:`~bayes_maxmargin.core.linalg.jittered_cholesky`: when K factorises as
    is (always, in float64, with the program's default jitter) the target is exactly the
    program's; otherwise the sampler targets the prior N(0, K + delta I) with the small relative
    jitter delta that made the factorisation succeed.
    """
    K = jnp.asarray(K)
    chol, _ = jittered_cholesky(K)
    return GPData(K, jnp.asarray(y, K.dtype), chol)


def scaled_factor(K: Array, inv_lam: Array, gamma: Array) -> tuple[Array, Array]:
    """s = W^1/2 = sqrt(gamma / lambda) and the Cholesky factor of I + diag(s) K diag(s).

    B = K + D = W^-1/2 (I + W^1/2 K W^1/2) W^-1/2 with W = D^-1 = gamma Lambda^-1; the scaled
    matrix has every eigenvalue >= 1, so a plain Cholesky succeeds however small lambda_n get.
    """
    s = jnp.sqrt(gamma * inv_lam)
    scaled = jnp.eye(K.shape[-1], dtype=K.dtype) + s[:, None] * K * s[None, :]
    return s, jnp.linalg.cholesky(scaled)


def pseudo_obs_scaled(y: Array, inv_lam: Array, gamma: Array) -> Array:
    """W^1/2 t with t = Y (1 + lambda): y sqrt(gamma) (inv_lam^1/2 + inv_lam^-1/2), overflow-free."""
    r = jnp.sqrt(inv_lam)
    return y * jnp.sqrt(gamma) * (r + 1.0 / r)


@jit
def gp_alpha(data: GPData, inv_lam: Array, gamma: Array) -> Array:
    """alpha = (K + Lambda / gamma)^-1 Y (1 + lambda) of Henao et al. (2014), eq. (12).

    The conditional mean of eq. (7) is m = K alpha, and the predictive mean at new inputs is
    K_*' alpha (eq. 11-12). Computed as W^1/2 (I + W^1/2 K W^1/2)^-1 W^1/2 t (see
    :func:`sample_f`).
    """
    s, chol_b = scaled_factor(data.K, inv_lam, gamma)
    return alpha_from_factor(s, chol_b, data.y, inv_lam, gamma)


def alpha_from_factor(s: Array, chol_b: Array, y: Array, inv_lam: Array, gamma: Array) -> Array:
    """alpha = W^1/2 (I + W^1/2 K W^1/2)^-1 W^1/2 t from an existing :func:`scaled_factor`."""
    return s * cho_solve((chol_b, True), pseudo_obs_scaled(y, inv_lam, gamma))


# --------------------------------------------------------------------------- FITC
# --------------------------------------------------------------------------- FITC prior
class FITCFactors(NamedTuple):
    """Low-rank-plus-diagonal form of the FITC prior covariance Kf = diag(dq) + U U' (eq. 10).

    Attributes
    ----------
    U : Array, shape (n, M)
        K_nm L^-T with L L' = K_mm + jitter I, so that Q_nn = U U'.
    dq : Array, shape (n,)
        diag(K_nn - Q_nn), K_nn with the absolute jitter (clipped at >= jitter).
    y : Array, shape (n,)
        Labels coded +-1.
    """

    U: Array
    dq: Array
    y: Array


def as_2d(X: ArrayLike) -> Array:
    """Inputs as a floating (n, d) array (a 1-D ``X`` is one feature)."""
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    return X[:, None] if X.ndim == 1 else X


def chol_mm(kfn: KernelFn, params: Any, V: Array, jitter: float) -> Array:
    """Cholesky factor of K_mm + jitter I (M x M)."""
    Kmm = kfn(params, V, V)
    Kmm = 0.5 * (Kmm + Kmm.T) + jitter * jnp.eye(V.shape[0], dtype=Kmm.dtype)
    return jnp.linalg.cholesky(Kmm)


def fitc_factors(
    params: Any, X: Array, V: Array, y: Array, kernel: str | KernelFn = "rbf", jitter: float = 1e-6
) -> FITCFactors:
    """Build U = K_nm L^-T and dq = diag(K_nn - Q_nn) of the FITC prior (eq. 10), O(N M^2).

    The full GP's convention K + jitter I is kept on the diagonal of K_nn, and K_mm gets the same
    jitter; with V = X (M = N) this gives Kf = K + jitter I up to O(jitter) off the diagonal.

    Parameters
    ----------
    params : NamedTuple
        Kernel parameters theta.
    X : Array, shape (n, d)
        Training inputs.
    V : Array, shape (M, d)
        Pseudo-inputs.
    y : Array, shape (n,)
        Labels coded +-1.
    kernel : str or callable
        Covariance function.
    jitter : float
        Absolute diagonal jitter of K_mm and K_nn.

    Returns
    -------
    FITCFactors
    """
    kfn = get_kernel(kernel)
    L = chol_mm(kfn, params, V, jitter)
    Knm = kfn(params, X, V)  # (n, M)
    U = solve_triangular(L, Knm.T, lower=True).T  # K_nm L^-T
    knn = kernel_diag(kfn, params, X) + jitter
    dq = jnp.maximum(knn - jnp.sum(U**2, axis=1), jitter)
    return FITCFactors(U, dq, jnp.asarray(y, U.dtype))


def _eye_like(U: Array) -> Array:
    return jnp.eye(U.shape[1], dtype=U.dtype)


def pseudo_obs(y: Array, inv_lam: Array) -> Array:
    """t = Y (1 + lambda) with lambda = 1 / omega."""
    return y * (1.0 + 1.0 / inv_lam)


def fitc_alpha(fac: FITCFactors, inv_lam: Array, gamma: Array) -> Array:
    """alpha = (Kf + Lambda / gamma)^-1 Y (1 + lambda), Woodbury on diag(g) + U U'."""
    g = fac.dq + 1.0 / (gamma * inv_lam)
    return woodbury_solve(g, fac.U, _eye_like(fac.U), pseudo_obs(fac.y, inv_lam))


def _kf_matvec(fac: FITCFactors, a: Array) -> Array:
    """Kf a = U (U' a) + dq a, O(N M)."""
    return fac.U @ (fac.U.T @ a) + fac.dq * a


# --------------------------------------------------------------------------- either
#: A prior covariance in either representation.
Covariance = GPData | FITCFactors


def alpha(cov: Covariance, inv_lam: Array, gamma: Array) -> Array:
    """alpha = (K + Lambda / gamma)^-1 Y (1 + lambda), lambda = 1 / ``inv_lam`` (eq. 12).

    The ECM's f-step is f = K alpha (:func:`prior_matvec`), the predictive mean k_*' alpha.
    """
    return fitc_alpha(cov, inv_lam, gamma) if isinstance(cov, FITCFactors) else gp_alpha(cov, inv_lam, gamma)


def prior_matvec(cov: Covariance, a: Array) -> Array:
    """K a: the dense product, or U (U' a) + dq a in O(N M) under FITC."""
    return _kf_matvec(cov, a) if isinstance(cov, FITCFactors) else cov.K @ a


def log_prior(cov: Covariance, f: Array) -> Array:
    """log N(f | 0, K): through the Cholesky factor of K, or by Woodbury on the FITC factors."""
    if isinstance(cov, FITCFactors):
        eye = _eye_like(cov.U)
        quad = f @ woodbury_solve(cov.dq, cov.U, eye, f)
        return gaussian_log_density(quad, woodbury_logdet(cov.dq, cov.U, eye), f.shape[-1])
    return mvn_logpdf_chol(f, cov.chol)


def log_marginal(cov: Covariance, inv_lam: Array, gamma: Array) -> Array:
    """log Z = log N(Y (1 + lambda) | 0, K + Lambda / gamma), the ML-II objective of eq. (9) (dense)
    and eq. (10) (FITC) at fixed lambda = 1 / ``inv_lam`` and gamma.

    Dense, with W = gamma Omega, s = W^1/2 and B = K + W^-1 = S^-1 (I + S K S) S^-1:
    log det B = log det(I + S K S) - 2 sum log s and t' B^-1 t = ||L^-1 (s t)||^2 with
    L L' = I + S K S (:func:`scaled_factor`); ``cov.chol`` is not used. FITC: Woodbury solve and
    log-determinant of diag(dq + lambda / gamma) + U U' (M x M factors only).
    """
    if isinstance(cov, FITCFactors):
        g = cov.dq + 1.0 / (gamma * inv_lam)
        eye = _eye_like(cov.U)
        t = pseudo_obs(cov.y, inv_lam)
        quad = t @ woodbury_solve(g, cov.U, eye, t)
        return gaussian_log_density(quad, woodbury_logdet(g, cov.U, eye), t.shape[-1])
    return dense_log_marginal(cov.K, cov.y, inv_lam, gamma)


def loo_moments(cov: Covariance, inv_lam: Array, gamma: Array, groups: Array | None = None,
                rows: Array | None = None) -> tuple[Array, Array]:
    """Leave-one-out mean and variance of every f_n (of the rows ``rows`` only, when given) at fixed
    lambda = 1 / ``inv_lam`` and gamma; with ``groups``, leave-group-out ones for the rows of each group
    (:func:`leave_groups_out`).

    Given lambda, the ECM posterior is GP regression on the pseudo-observations t = Y (1 + lambda)
    with noise variances lambda / gamma (eq. 7, 12). With B = K + Lambda / gamma and alpha = B^-1 t,
    t_n given the other points is N(t_n - alpha_n / [B^-1]_nn, 1 / [B^-1]_nn) (Rasmussen & Williams
    2006, eq. 5.12), so f_n = t_n - e_n, e_n ~ N(0, lambda_n / gamma), has mean t_n - alpha_n /
    [B^-1]_nn and variance 1 / [B^-1]_nn - lambda_n / gamma: the point's site divided out of the
    posterior without the cancellation of the precision form when lambda_n is tiny (a support vector
    on the margin). Dense: [B^-1]_nn = s_n^2 ||L^-1 e_n||^2 (:func:`scaled_factor`); FITC: Woodbury on
    diag(g) + U U', B^-1 = G^-1 - H' H with H = C^-1 U' G^-1 and C C' = I + U' G^-1 U, which gives
    both alpha and the diagonal.

    ``groups`` (shape (G, m), row indices, -1 padding) lists groups of rows whose inputs are identical:
    their f are one value, so leaving one of them out leaves its twins' information about it in, and
    the leave-one-out predictive is as sure of f_n as the fit itself.

    ``rows`` (shape (S,), indices of training rows): the moments of those rows only, in their order, and
    ``groups`` then index into ``rows`` (each group must lie within them, every twin included). The
    factors of B are those of all N rows; only the diagonal of B^-1 is taken at the S rows (FITC: S
    columns of the M x N factor; dense: L^-1 on S unit vectors, O(N^2 S) instead of O(N^3)).
    """
    t, noise = pseudo_obs(cov.y, inv_lam), 1.0 / (gamma * inv_lam)
    take = (lambda v: v) if rows is None else (lambda v: jnp.take(v, rows, axis=-1))
    if isinstance(cov, FITCFactors):
        g = cov.dq + noise
        Ug = cov.U / g[:, None]
        half = solve_triangular(jnp.linalg.cholesky(_eye_like(cov.U) + cov.U.T @ Ug), Ug.T, lower=True)
        a = t / g - half.T @ (half @ t)
        g, half = take(g), take(half)
        diag = 1.0 / g - jnp.sum(half**2, axis=0)  # B^-1 = G^-1 - half' half

        def block(idx):  # [B^-1]_GG
            return jnp.diag(1.0 / g[idx]) - half[:, idx].T @ half[:, idx]
    else:
        s, chol_b = scaled_factor(cov.K, inv_lam, gamma)
        n = s.shape[0]
        unit = (jnp.eye(n, dtype=s.dtype) if rows is None  # the unit vectors of the rows
                else jnp.zeros((n, rows.shape[0]), s.dtype).at[rows, jnp.arange(rows.shape[0])].set(1.0))
        inv_chol = solve_triangular(chol_b, unit, lower=True)
        a = alpha_from_factor(s, chol_b, cov.y, inv_lam, gamma)
        s = take(s)
        diag = s**2 * jnp.sum(inv_chol**2, axis=0)

        def block(idx):  # [B^-1]_GG = (L^-1 S)_G' (L^-1 S)_G
            cols = inv_chol[:, idx] * s[idx]
            return cols.T @ cols
    t, noise, a = take(t), take(noise), take(a)
    mean, var = t - a / diag, jnp.maximum(1.0 / diag - noise, 0.0)
    if groups is None:
        return mean, var
    return leave_groups_out(mean, var, t, noise, a, block, groups)


def leave_groups_out(mean: Array, var: Array, t: Array, noise: Array, a: Array, block: Any,
                     groups: Array) -> tuple[Array, Array]:
    """``mean`` and ``var`` with the rows of every group replaced by their leave-group-out moments.

    The block form of :func:`loo_moments` (Rasmussen & Williams 2006, eq. 5.12 for a set of points):
    t_G given the points outside group G is N(t_G - Sigma_G alpha_G, Sigma_G) with Sigma_G =
    ([B^-1]_GG)^-1, and f_G = t_G - e_G has covariance Sigma_G - diag(lambda_G / gamma): one m x m
    solve per group.

    Parameters
    ----------
    mean, var : Array, shape (n,)
        Leave-one-out moments of every row.
    t, noise, a : Array, shape (n,)
        Pseudo-observations, their noise variances lambda / gamma and alpha = B^-1 t.
    block : callable
        Row indices (m,) -> the (m, m) block of B^-1.
    groups : Array, shape (G, m)
        Row indices of each group, padded with -1.
    """
    n, m = mean.shape[0], groups.shape[1]
    valid = groups >= 0
    idx = jnp.where(valid, groups, 0)
    eye = jnp.eye(m, dtype=mean.dtype)
    blocks = jnp.where(valid[:, :, None] & valid[:, None, :], jax.vmap(block)(idx), eye)  # padding: identity
    sigma = jax.vmap(lambda c: cho_solve((c, True), eye))(jnp.linalg.cholesky(blocks))
    a_g = jnp.where(valid, a[idx], 0.0)
    mean_g = t[idx] - jnp.einsum("gij,gj->gi", sigma, a_g)
    var_g = jnp.maximum(jnp.diagonal(sigma, axis1=1, axis2=2) - noise[idx], 0.0)
    rows = jnp.where(valid, groups, n)  # padding: out of range, dropped
    return mean.at[rows].set(mean_g, mode="drop"), var.at[rows].set(var_g, mode="drop")


def _dense_log_marginal(K: Array, y: Array, inv_lam: Array, gamma: Array) -> tuple[Array, tuple[Array, Array]]:
    """log Z of the dense prior (:func:`log_marginal`) and the factor its gradient reuses."""
    s, chol_b = scaled_factor(K, inv_lam, gamma)
    white = solve_triangular(chol_b, pseudo_obs_scaled(y, inv_lam, gamma), lower=True)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol_b))) - 2.0 * jnp.sum(jnp.log(s))
    return gaussian_log_density(jnp.sum(white**2), logdet, y.shape[-1]), (s, chol_b)


@jax.custom_vjp
def dense_log_marginal(K: Array, y: Array, inv_lam: Array, gamma: Array) -> Array:
    """log Z = log N(t | 0, B), B = K + D, D = diag(1 / (gamma omega)), t = Y (1 + 1 / omega): eq. (9).

    Its gradient is written out (Rasmussen & Williams 2006, eq. 5.9): with alpha = B^-1 t,

        d log Z / dK = (alpha alpha' - B^-1) / 2,   d log Z / dD_nn = (alpha_n^2 - (B^-1)_nn) / 2,
        d log Z / dt = -alpha,

    and the chain rule through D and t to omega, gamma and y. B^-1 = S (L L')^-1 S from the factor of
    the value (:func:`scaled_factor`): two triangular solves with N right-hand sides (67 ms at N = 1400
    against 116 ms for L^-1 S and the product of it with itself); the whole gradient takes 30-40 % less
    time than differentiating through the Cholesky factorisation at N = 500-1400.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> K = jnp.array([[2.0, 0.5], [0.5, 1.0]])
    >>> grad = jax.grad(dense_log_marginal)(K, jnp.array([1.0, -1.0]), jnp.array([0.5, 2.0]), jnp.asarray(1.0))
    >>> bool(jnp.allclose(grad, grad.T))
    True
    """
    return _dense_log_marginal(K, y, inv_lam, gamma)[0]


def _dense_log_marginal_fwd(K, y, inv_lam, gamma):
    value, factors = _dense_log_marginal(K, y, inv_lam, gamma)
    return value, (*factors, y, inv_lam, gamma)


def _dense_log_marginal_bwd(res, g):
    s, chol_b, y, inv_lam, gamma = res
    a = alpha_from_factor(s, chol_b, y, inv_lam, gamma)  # B^-1 t
    b_inv = s[:, None] * cho_solve((chol_b, True), jnp.eye(s.shape[0], dtype=s.dtype)) * s[None, :]  # S (L L')^-1 S
    d_noise = 0.5 * g * (a**2 - jnp.diagonal(b_inv))  # d log Z / dD_nn
    d_t = -g * a
    g_K = 0.5 * g * (jnp.outer(a, a) - b_inv)
    g_inv_lam = -d_noise / (gamma * inv_lam**2) - d_t * y / inv_lam**2
    g_gamma = -jnp.sum(d_noise / inv_lam) / gamma**2
    return g_K, d_t * (1.0 + 1.0 / inv_lam), g_inv_lam, jnp.reshape(g_gamma, jnp.shape(gamma))


dense_log_marginal.defvjp(_dense_log_marginal_fwd, _dense_log_marginal_bwd)
