"""FITC-sparse ECM of the GP Bayesian SVM, ML-II over theta and the pseudo-inputs, predictions.

Henao et al. (2014), Sec. 3 "Speeding up inference" (eq. 10), with the ECM of eq. (8)-(9)
(:mod:`bayes_maxmargin.models.gp.ecm`) run under the FITC prior of Snelson & Ghahramani
(2006). With M pseudo-inputs V (M x d), f_m ~ N(0, K_mm) and f | f_m independent across n,

    f ~ N(0, Kf),   Kf = Q_nn + diag(K_nn - Q_nn),   Q_nn = K_nm K_mm^-1 K_mn.

Write K_mm = L L' (jittered Cholesky), U = K_nm L^-T (n x M), so Q_nn = U U', and
dq = diag(K_nn - Q_nn) (K_nn with the same absolute jitter as the full GP's K + jitter I). Every
matrix that enters, Kf and Kf + Lambda / gamma = diag(dq + lambda / gamma) + U U', is
"diagonal plus rank M", handled by :func:`~bayes_maxmargin.core.linalg.woodbury_solve` and
:func:`~bayes_maxmargin.core.linalg.woodbury_logdet` with M x M Cholesky factors only: O(N M^2) time,
O(N M) memory, nothing N x N is ever formed.

One ECM iteration (eq. 8 and the updates after it, with K replaced by Kf):

1. E-step: omega_n = E[1 / lambda_n] (:func:`~bayes_maxmargin.core.augmentation.expected_inv_lambda`);
2. CM-step for f: alpha = (Kf + Lambda / gamma)^-1 Y (1 + lambda), f = Kf alpha
   = U (U' alpha) + dq * alpha (:func:`fitc_f_update`);
3. optional CM-step for gamma (:func:`~bayes_maxmargin.core.augmentation.gamma_cm_step`).

The objective log N(f | 0, Kf) + sum_n log sLa(u_n) [+ log Ga(gamma)] (:func:`fitc_objective`) is
recorded and never decreases at fixed theta and V. Every ``mlii_every`` iterations, log Z of
eq. (10), log N(Y (1 + lambda) | 0, Kf + Lambda / gamma) at lambda = E[lambda | f, gamma] (as in
:func:`~bayes_maxmargin.models.gp.ecm.gp_ecm_mlii`), is maximised over the kernel parameters
and the pseudo-inputs with an Optax optimiser (:func:`fitc_mlii_update`).

Predictions (FITC predictive, eq. 11-12 with Kf): q_* = Q_*n alpha, v_* = k_** - Q_*n (Kf +
Lambda / gamma)^-1 Q_n*, P(y_* = 1) = Phi(q_* / sqrt(1 + v_*)) (:func:`fitc_predict`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.scipy.linalg import solve_triangular
from jax.typing import ArrayLike

from bayes_maxmargin.core.augmentation import expected_inv_lambda, gamma_cm_step
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.kernels import (
    KernelFn,
    from_unconstrained,
    get_kernel,
    kernel_diag,
    to_unconstrained,
)
from bayes_maxmargin.core.linalg import gaussian_log_density, woodbury_logdet, woodbury_solve
from bayes_maxmargin.core.predict import probit_predictive
from bayes_maxmargin.engine.fixed_point import ecm_loop
from bayes_maxmargin.models.gp.ecm import (
    alternate_ecm_mlii,
    hold_fixed,
    map_row_chunks,
    marginal_log_posterior,
    ml2_ascent,
)
from bayes_maxmargin.models.gp.model import GPHyper, _check_num_inducing

__all__ = ["FITCECMResult", "FITCFactors", "FITCMLIIResult", "FITCResult", "fitc_alpha", "fitc_ecm",
           "fitc_ecm_fixed", "fitc_f_update", "fitc_factors", "fitc_log_marginal", "fitc_mlii_update",
           "fitc_objective", "fitc_predict", "fitc_predict_proba"]

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


def _as_2d(X: ArrayLike) -> Array:
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    return X[:, None] if X.ndim == 1 else X


def _chol_mm(kfn: KernelFn, params: Any, V: Array, jitter: float) -> Array:
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
    L = _chol_mm(kfn, params, V, jitter)
    Knm = kfn(params, X, V)  # (n, M)
    U = solve_triangular(L, Knm.T, lower=True).T  # K_nm L^-T
    knn = kernel_diag(kfn, params, X) + jitter
    dq = jnp.maximum(knn - jnp.sum(U**2, axis=1), jitter)
    return FITCFactors(U, dq, jnp.asarray(y, U.dtype))


def _eye_like(U: Array) -> Array:
    return jnp.eye(U.shape[1], dtype=U.dtype)


def _pseudo_obs(y: Array, inv_lam: Array) -> Array:
    """t = Y (1 + lambda) with lambda = 1 / omega."""
    return y * (1.0 + 1.0 / inv_lam)


def fitc_alpha(fac: FITCFactors, inv_lam: Array, gamma: Array) -> Array:
    """alpha = (Kf + Lambda / gamma)^-1 Y (1 + lambda), Woodbury on diag(g) + U U'."""
    g = fac.dq + 1.0 / (gamma * inv_lam)
    return woodbury_solve(g, fac.U, _eye_like(fac.U), _pseudo_obs(fac.y, inv_lam))


def _kf_matvec(fac: FITCFactors, a: Array) -> Array:
    """Kf a = U (U' a) + dq a, O(N M)."""
    return fac.U @ (fac.U.T @ a) + fac.dq * a


# --------------------------------------------------------------------------- ECM at fixed theta, V
class FITCECMResult(NamedTuple):
    """Output of :func:`fitc_ecm_fixed`.

    Attributes
    ----------
    f : Array, shape (n,)
        MAP of the latent function under the FITC prior.
    gamma : Array
        MAP (or fixed value) of gamma.
    inv_lam : Array, shape (n,)
        omega = E[1 / lambda] of the E-step (eq. 8) at the returned (f, gamma).
    objective : Array, shape (max_iter + 1,)
        :func:`fitc_objective` at the start and after every iteration; NaN after convergence.
    n_iter : Array
        Iterations run.
    """

    f: Array
    gamma: Array
    inv_lam: Array
    objective: Array
    n_iter: Array


def fitc_objective(f: Array, gamma: Array, fac: FITCFactors, hyper: GPHyper, estimate_gamma: bool) -> Array:
    """Log posterior of (f, gamma), lambda integrated out, under the FITC prior (eq. 4-6, 10).

    log N(f | 0, Kf) + sum_n log_pseudo_likelihood(u_n) [+ log Ga(gamma | a0, b0)], u = 1 - Y f;
    log det Kf and f' Kf^-1 f by Woodbury (M x M factors only).
    """
    eye = _eye_like(fac.U)
    quad = f @ woodbury_solve(fac.dq, fac.U, eye, f)
    log_prior_f = gaussian_log_density(quad, woodbury_logdet(fac.dq, fac.U, eye), f.shape[-1])
    return marginal_log_posterior(log_prior_f, f, fac.y, gamma, hyper, estimate_gamma)


def fitc_f_update(fac: FITCFactors, inv_lam: Array, gamma: Array) -> Array:
    """CM-step for f under the FITC prior: f = Kf (Kf + Lambda / gamma)^-1 Y (1 + lambda).

    The update after eq. (8) with K replaced by Kf (the derivation of
    :func:`~bayes_maxmargin.models.gp.ecm.f_update` holds for any prior covariance). With
    g = dq + lambda / gamma, Kf + Lambda / gamma = diag(g) + U U', so alpha comes from
    :func:`~bayes_maxmargin.core.linalg.woodbury_solve` and f = U (U' alpha) + dq alpha.
    """
    return _kf_matvec(fac, fitc_alpha(fac, inv_lam, gamma))


def _ecm_step(f: Array, gamma: Array, fac: FITCFactors, hyper: GPHyper, estimate_gamma: bool):
    u = 1.0 - fac.y * f
    inv_lam = expected_inv_lambda(u, gamma, hyper.gamma0)  # E-step, eq. (8)
    f = fitc_f_update(fac, inv_lam, gamma)  # CM-step for f
    if estimate_gamma:
        gamma = gamma_cm_step(1.0 - fac.y * f, u, inv_lam, gamma, hyper.gamma0, hyper.a0, hyper.b0)
    return f, gamma


@partial(jit, static_argnames=("max_iter", "estimate_gamma"))
def fitc_ecm_fixed(
    f0: Array, fac: FITCFactors, hyper: GPHyper, tol: ArrayLike, *, max_iter: int, estimate_gamma: bool
) -> FITCECMResult:
    """ECM for the MAP of (f, gamma) under the FITC prior at fixed theta and V (eq. 8, 10).

    Same loop as :func:`~bayes_maxmargin.models.gp.ecm.gp_ecm` (``lax.while_loop``), stopping
    when ``|objective_t - objective_{t-1}|`` <= tol * max(``|objective_t|``, 1).

    Parameters
    ----------
    f0 : Array, shape (n,)
        Initial latent function.
    fac : FITCFactors
        FITC prior factors (:func:`fitc_factors`).
    hyper : GPHyper
        Hyperparameters; ``hyper.gamma`` is the fixed or initial gamma.
    tol : ArrayLike
        Relative-change tolerance.
    max_iter : int
        Maximum number of iterations.
    estimate_gamma : bool
        Whether the gamma CM-step is run (Gamma(a0, b0) prior, a0 > 1).

    Returns
    -------
    FITCECMResult
    """
    dtype = fac.U.dtype
    f, gamma, _, trace, n_iter = ecm_loop(
        lambda f, g: (*_ecm_step(f, g, fac, hyper, estimate_gamma), None),
        lambda f, g: fitc_objective(f, g, fac, hyper, estimate_gamma),
        jnp.asarray(f0, dtype), jnp.asarray(hyper.gamma, dtype), None, tol, max_iter,
    )
    inv_lam = expected_inv_lambda(1.0 - fac.y * f, gamma, hyper.gamma0)
    return FITCECMResult(f, gamma, inv_lam, trace, n_iter)


# --------------------------------------------------------------------------- ML-II, eq. (10)
def fitc_log_marginal(
    params: Any,
    V: ArrayLike,
    X: ArrayLike,
    y: ArrayLike,
    inv_lam: ArrayLike,
    gamma: ArrayLike,
    *,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
) -> Array:
    """log Z = log N(Y (1 + lambda) | 0, Q_nn + diag(K_nn - Q_nn) + Lambda / gamma), eq. (10).

    Woodbury solve and log-determinant of diag(dq + lambda / gamma) + U U' (M x M factors only).
    Differentiable in ``params`` and ``V``.

    Parameters
    ----------
    params : NamedTuple
        Kernel parameters theta.
    V : ArrayLike, shape (M, d)
        Pseudo-inputs.
    X : ArrayLike, shape (n, d)
        Training inputs.
    y : ArrayLike, shape (n,)
        Labels coded +-1.
    inv_lam : ArrayLike, shape (n,)
        omega = E[1 / lambda] from the current E-step.
    gamma : ArrayLike
        Hinge scale.
    kernel : str or callable
        Covariance function.
    jitter : float
        Absolute jitter of K_mm and K_nn.
    """
    X = _as_2d(X)
    V = jnp.asarray(_as_2d(V), X.dtype)
    fac = fitc_factors(params, X, V, y, kernel, jitter)
    inv_lam = jnp.asarray(inv_lam, X.dtype)
    gamma = jnp.asarray(gamma, X.dtype)
    g = fac.dq + 1.0 / (gamma * inv_lam)
    eye = _eye_like(fac.U)
    t = _pseudo_obs(fac.y, inv_lam)
    quad = t @ woodbury_solve(g, fac.U, eye, t)
    logdet = woodbury_logdet(g, fac.U, eye)
    return gaussian_log_density(quad, logdet, t.shape[-1])


class FITCMLIIResult(NamedTuple):
    """Output of :func:`fitc_mlii_update`.

    Attributes
    ----------
    params : NamedTuple
        Updated kernel parameters (best iterate).
    V : Array, shape (M, d)
        Updated pseudo-inputs (best iterate).
    log_z_before, log_z_after : Array
        log Z of eq. (10) at the initial and returned (theta, V); after >= before.
    """

    params: Any
    V: Array
    log_z_before: Array
    log_z_after: Array


@partial(
    jit,
    static_argnames=("kernel", "steps", "optimizer", "learning_rate", "optimize_inducing", "jitter", "fixed"),
)
def fitc_mlii_update(
    params: Any,
    V: Array,
    X: Array,
    y: Array,
    inv_lam: Array,
    gamma: Array,
    *,
    kernel: str | KernelFn = "rbf",
    steps: int = 10,
    optimizer: str = "lbfgs",
    learning_rate: float = 0.05,
    optimize_inducing: bool = True,
    jitter: float = 1e-6,
    fixed: tuple[str, ...] = (),
) -> FITCMLIIResult:
    """ML-II step of eq. (10): (unconstrained theta, V) uphill on :func:`fitc_log_marginal`.

    ``steps`` Optax iterations (:func:`~bayes_maxmargin.models.gp.ecm.ml2_ascent`, L-BFGS or
    Adam) in a ``lax.scan``; the best iterate seen is returned, so log Z never decreases. With
    ``optimize_inducing=False`` V is held fixed.

    Parameters
    ----------
    params : NamedTuple
        Current kernel parameters.
    V : Array, shape (M, d)
        Current pseudo-inputs.
    X, y : Array
        Training inputs (n, d) and +-1 labels (n,).
    inv_lam : Array, shape (n,)
        omega = 1 / lambda at which eq. (10) is evaluated (the ECM passes 1 / E[lambda], as
        :func:`~bayes_maxmargin.models.gp.ecm.gp_ecm_mlii` does).
    gamma : Array
        Hinge scale.
    kernel : str or callable
        Covariance function (static).
    steps : int
        Optimiser iterations.
    optimizer : {"lbfgs", "adam"}
        Optax optimiser.
    learning_rate : float
        Adam step size.
    optimize_inducing : bool
        Whether V is optimised along with theta.
    jitter : float
        Absolute jitter of K_mm and K_nn.
    fixed : tuple of str
        Kernel fields held at their current values.
    """
    def log_z(raw):
        Vr = raw["V"] if optimize_inducing else jax.lax.stop_gradient(V)
        return fitc_log_marginal(
            from_unconstrained(hold_fixed(raw["theta"], fixed), params), Vr, X, y, inv_lam, gamma, kernel=kernel, jitter=jitter
        )

    raw0 = {"theta": to_unconstrained(params), "V": V}
    best_raw, before, after = ml2_ascent(log_z, raw0, steps, optimizer, learning_rate)
    V_out = best_raw["V"] if optimize_inducing else V
    return FITCMLIIResult(from_unconstrained(best_raw["theta"], params), V_out, before, after)


class FITCResult(NamedTuple):
    """Output of :func:`fitc_ecm`.

    Attributes
    ----------
    f, gamma, inv_lam : Array
        Final ECM state at the final (theta, V).
    params : NamedTuple
        Final kernel parameters.
    V : Array, shape (M, d)
        Final pseudo-inputs.
    objective : Array, shape (n_rounds + 1, max(max_iter, mlii_every) + 1)
        ECM objective traces per round (row r at the (theta, V) of round r; NaN after early
        convergence); the last row is the final run. Non-decreasing within a row.
    log_z : Array, shape (n_rounds, 2)
        log Z of eq. (10) before and after each ML-II step (zeros-length when ML-II is off).
    """

    f: Array
    gamma: Array
    inv_lam: Array
    params: Any
    V: Array
    objective: Array
    log_z: Array


@partial(
    jit,
    static_argnames=(
        "kernel",
        "max_iter",
        "mlii_every",
        "mlii_steps",
        "optimizer",
        "learning_rate",
        "estimate_gamma",
        "optimize_inducing",
        "jitter",
        "fixed",
    ),
)
def _fitc_ecm(
    X: Array,
    y: Array,
    V0: Array,
    params0: Any,
    hyper: GPHyper,
    tol: ArrayLike,
    *,
    kernel: str | KernelFn,
    max_iter: int,
    mlii_every: int,
    mlii_steps: int,
    optimizer: str,
    learning_rate: float,
    estimate_gamma: bool,
    optimize_inducing: bool,
    jitter: float,
    fixed: tuple[str, ...],
) -> FITCResult:
    """Jitted body of :func:`fitc_ecm` (inputs already validated)."""
    dtype = X.dtype
    y = jnp.asarray(y, dtype)
    gamma_init = jnp.asarray(hyper.gamma, dtype)
    f_init = jnp.zeros(X.shape[0], dtype)
    params0 = jax.tree.map(lambda a: jnp.asarray(a, dtype), params0)
    V0 = jnp.asarray(V0, dtype)

    def run_ecm(params, V, f, gamma, iters):
        fac = fitc_factors(params, X, V, y, kernel, jitter)
        return fitc_ecm_fixed(f, fac, hyper._replace(gamma=gamma), tol, max_iter=iters, estimate_gamma=estimate_gamma)

    if mlii_every <= 0 or mlii_steps <= 0:  # ECM only, at fixed theta and V
        res = run_ecm(params0, V0, f_init, gamma_init, max_iter)
        return FITCResult(res.f, res.gamma, res.inv_lam, params0, V0, res.objective[None],
                          jnp.zeros((0, 2), dtype))

    n_rounds = max(max_iter // mlii_every, 1)

    def mlii(theta, inv_lam, gamma):
        ml = fitc_mlii_update(*theta, X, y, inv_lam, gamma, kernel=kernel, steps=mlii_steps, optimizer=optimizer,
                              learning_rate=learning_rate, optimize_inducing=optimize_inducing, jitter=jitter,
                              fixed=fixed)
        return (ml.params, ml.V), ml.log_z_before, ml.log_z_after

    final, (params, V), objective, log_z, _ = alternate_ecm_mlii(
        lambda theta, f, gamma, iters: run_ecm(*theta, f, gamma, iters), mlii, (params0, V0), f_init,
        gamma_init, n_rounds, mlii_every, max_iter, gamma0=hyper.gamma0,
    )
    return FITCResult(final.f, final.gamma, final.inv_lam, params, V, objective, log_z)


def fitc_ecm(
    X: ArrayLike,
    y: ArrayLike,
    V0: ArrayLike,
    params0: Any,
    hyper: GPHyper,
    tol: ArrayLike = 1e-10,
    *,
    kernel: str | KernelFn = "rbf",
    max_iter: int = 200,
    mlii_every: int = 20,
    mlii_steps: int = 10,
    optimizer: str = "lbfgs",
    learning_rate: float = 0.05,
    estimate_gamma: bool = False,
    optimize_inducing: bool = True,
    jitter: float = 1e-6,
    fixed: tuple[str, ...] = (),
) -> FITCResult:
    """FITC ECM with ML-II over theta and the pseudo-inputs (Henao et al. 2014, Sec. 3, eq. 8-10).

    ``max_iter // mlii_every`` rounds (``lax.scan``): the FITC factors are rebuilt, ECM
    (:func:`fitc_ecm_fixed`) runs at most ``mlii_every`` iterations warm-started from the previous
    f and gamma, then :func:`fitc_mlii_update` moves (theta, V) uphill on log Z of eq. (10). A last
    ECM run at the final (theta, V) gives the returned state. With ``mlii_every = 0`` (or
    ``mlii_steps = 0``) no ML-II is done: one ECM run of ``max_iter`` iterations at fixed
    (theta, V). Cost O(N M^2) per iteration, O(N M) memory.

    Parameters
    ----------
    X : ArrayLike, shape (n, d)
        Training inputs.
    y : ArrayLike, shape (n,)
        Labels coded +-1.
    V0 : ArrayLike, shape (M, d)
        Initial pseudo-inputs (:func:`init_inducing`).
    params0 : NamedTuple
        Initial kernel parameters theta.
    hyper : GPHyper
        Hyperparameters; ``hyper.gamma`` is the fixed or initial gamma.
    tol : ArrayLike
        Relative-change tolerance of each ECM run.
    kernel : str or callable
        Covariance function.
    max_iter, mlii_every, mlii_steps : int
        ECM iterations in all, ECM iterations between ML-II steps, optimiser iterations per ML-II
        step.
    optimizer : {"lbfgs", "adam"}
        Optax optimiser of the ML-II steps.
    learning_rate : float
        Adam step size (unconstrained theta and V).
    estimate_gamma : bool
        Whether the gamma CM-step is run.
    optimize_inducing : bool
        Whether ML-II also moves V.
    jitter : float
        Absolute jitter of K_mm and K_nn.
    fixed : tuple of str
        Kernel fields ML-II leaves at their initial values.

    Returns
    -------
    FITCResult
    """
    X = _as_2d(X)
    V0 = _as_2d(V0)
    if V0.ndim != 2 or V0.shape[1] != X.shape[1]:
        raise ValueError(f"V0 must have shape (num_inducing, {X.shape[1]}), got {V0.shape}")
    _check_num_inducing(V0.shape[0], X.shape[0])
    return _fitc_ecm(
        X, jnp.asarray(y), V0, params0, hyper, tol, kernel=kernel, max_iter=max_iter,
        mlii_every=mlii_every, mlii_steps=mlii_steps, optimizer=optimizer, learning_rate=learning_rate,
        estimate_gamma=estimate_gamma, optimize_inducing=optimize_inducing, jitter=jitter,
        fixed=tuple(fixed),
    )


# --------------------------------------------------------------------------- predictions
@partial(jit, static_argnames=("kernel", "jitter", "chunk"))
def fitc_predict(
    X_train: Array,
    X_test: Array,
    y: Array,
    V: Array,
    inv_lam: Array,
    gamma: Array,
    params: Any,
    *,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
    chunk: int = 1024,
) -> tuple[Array, Array]:
    """FITC predictive mean and variance of f_* (eq. 11-12 under the prior of eq. 10).

    With a_* = L^-1 k_m* (L L' = K_mm), Q_*n = a_*' U', so

        mean = Q_*n alpha = a_*' (U' alpha),
        var  = k_** - Q_*n (Kf + Lambda / gamma)^-1 Q_n* = k_** - a_*' P a_*,

    P = U' (Kf + Lambda / gamma)^-1 U (M x M, one Woodbury solve with M right-hand sides).
    Test rows are processed ``chunk`` at a time (``lax.map``), memory M x chunk.

    Parameters
    ----------
    X_train : Array, shape (n, d)
        Training inputs.
    X_test : Array, shape (m, d)
        Test inputs.
    y : Array, shape (n,)
        Training labels coded +-1.
    V : Array, shape (M, d)
        Pseudo-inputs.
    inv_lam : Array, shape (n,)
        Final omega = E[1 / lambda].
    gamma : Array
        Final gamma.
    params : NamedTuple
        Kernel parameters.
    kernel : str or callable
        Covariance function (static).
    jitter : float
        Jitter of the fit; not added to k(x_*, x_*).
    chunk : int
        Test rows per block.

    Returns
    -------
    mean, var : Array, shape (m,)
    """
    X_train = _as_2d(X_train)
    X_test = jnp.asarray(_as_2d(X_test), X_train.dtype)
    V = jnp.asarray(_as_2d(V), X_train.dtype)
    kfn = get_kernel(kernel)
    fac = fitc_factors(params, X_train, V, y, kernel, jitter)
    inv_lam = jnp.asarray(inv_lam, X_train.dtype)
    gamma = jnp.asarray(gamma, X_train.dtype)
    L = _chol_mm(kfn, params, V, jitter)
    g = fac.dq + 1.0 / (gamma * inv_lam)
    # one Woodbury solve for both right-hand sides: [alpha, (Kf + Lambda / gamma)^-1 U]
    rhs = jnp.column_stack([_pseudo_obs(fac.y, inv_lam), fac.U])
    sol = fac.U.T @ woodbury_solve(g, fac.U, _eye_like(fac.U), rhs)  # (M, 1 + M)
    Ua, P = sol[:, 0], 0.5 * (sol[:, 1:] + sol[:, 1:].T)


    def one_block(Xb):
        A = solve_triangular(L, kfn(params, V, Xb), lower=True)  # (M, chunk)
        mean = A.T @ Ua
        var = kernel_diag(kfn, params, Xb) - jnp.sum(A * (P @ A), axis=0)
        return mean, var

    return map_row_chunks(one_block, X_test, chunk)


def fitc_predict_proba(
    X_train: ArrayLike,
    X_test: ArrayLike,
    y: ArrayLike,
    V: ArrayLike,
    inv_lam: ArrayLike,
    gamma: ArrayLike,
    params: Any,
    *,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
    chunk: int = 1024,
) -> np.ndarray:
    """P(y_* = +1) = Phi(m / sqrt(1 + v)) from :func:`fitc_predict`
    (:func:`~bayes_maxmargin.core.predict.probit_predictive`, eq. 11)."""
    mean, var = fitc_predict(
        X_train, X_test, y, V, inv_lam, gamma, params, kernel=kernel, jitter=jitter, chunk=chunk
    )
    return probit_predictive(np.asarray(mean), np.asarray(var))
