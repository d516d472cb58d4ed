"""ECM point estimate of the GP Bayesian SVM, ML-II kernel learning and predictions.

Henao et al. (2014), Sec. 3 "ECM" (eq. 8 and the updates after it, eq. 9) and "Predictions"
(eq. 11-13). With u = 1 - Y f, omega_n = E[1 / lambda_n], Lambda = diag(1 / omega) and
B = K + Lambda / gamma, one ECM iteration is

1. E-step: omega_n = c / ``|u_n|``, c = sqrt(1 + 2 gamma0 / gamma) (eq. 8,
   :func:`~bayes_maxmargin.core.augmentation.expected_inv_lambda`);
2. CM-step for f: f = K B^-1 Y (1 + lambda) (the update after eq. 8; derivation in
   :func:`f_update`);
3. CM-step for gamma (with a Gamma(a0, b0) prior only):
   gamma = (a0 - 1 + N/2) / (b0 + 1/2 sum_n (omega_n u_n^2 + 2 u_n + <lambda_n>)), with u at the
   new f and <lambda_n> = E[lambda_n] (:func:`~bayes_maxmargin.core.augmentation.expected_lambda`).

The objective, the log posterior of (f, gamma) with lambda integrated out,

    log N(f | 0, K) + sum_n log sLa(u_n | gamma, gamma0) [+ log Ga(gamma | a0, b0)],

is recorded every iteration and never decreases (:func:`gp_objective`). Every ``mlii_every``
iterations the kernel parameters theta are moved uphill on the ML-II marginal
log Z = log N(Y (1 + lambda) | 0, K_theta + Lambda / gamma) of eq. (9) at lambda = <lambda> =
E[lambda | f, gamma] (:func:`mlii_update`, an Optax optimiser, L-BFGS by default, on the
unconstrained parameters of :mod:`bayes_maxmargin.core.kernels`; see :func:`gp_ecm_mlii`).

Predictions (eq. 11-12) use alpha = B^-1 Y (1 + lambda): mean k_*' alpha, variance
k(x_*, x_*) - k_*' B^-1 k_*, and P(y_* = 1) = Phi(m / sqrt(1 + v))
(:func:`~bayes_maxmargin.core.predict.probit_predictive`). At convergence with gamma0 = 0,
alpha_n = y_n gamma (1 + sign(u_n)) away from the margin (eq. 13 with c = 1): 2 gamma y_n inside
the margin, 0 outside, so the predictor is sparse in the support vectors.

Nowhere is K^-1 or B^-1 formed: B enters through the Cholesky factor of the scaled matrix
I + W^1/2 K W^1/2, W = gamma Omega (:func:`~bayes_maxmargin.models.gp.covariance.scaled_factor`),
K through its (jittered) Cholesky factor.

Under the FITC prior of Snelson & Ghahramani (2006), the paper's Sec. 3 "Speeding up inference"
(eq. 10), the same ECM, ML-II and predictions run with K replaced by Kf. With M pseudo-inputs
V (M x d), f_m ~ N(0, K_mm) and f | f_m independent across n,

    f ~ N(0, Kf),   Kf = Q_nn + diag(K_nn - Q_nn),   Q_nn = K_nm K_mm^-1 K_mn.

Write K_mm = L L' (jittered Cholesky), U = K_nm L^-T (n x M), so Q_nn = U U', and
dq = diag(K_nn - Q_nn) (:func:`~bayes_maxmargin.models.gp.covariance.fitc_factors`). Every matrix
that enters, Kf and Kf + Lambda / gamma = diag(dq + lambda / gamma) + U U', is diagonal plus rank M,
handled by Woodbury with M x M Cholesky factors only: O(N M^2) time, O(N M) memory, nothing N x N
is formed. ML-II (eq. 10) moves the pseudo-inputs with theta; the FITC predictive is
q_* = Q_*n alpha, v_* = k_** - Q_*n (Kf + Lambda / gamma)^-1 Q_n*. Pass ``V0`` to
:func:`gp_ecm_mlii` and ``V`` to :func:`gp_predict`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import optax
from jax import Array
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.typing import ArrayLike

from bayes_maxmargin.core.augmentation import (
    expected_inv_lambda,
    gamma_cm_step,
    inv_mean_lambda,
    marginal_log_likelihood,
)
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.kernels import KernelFn, feature_scale, get_kernel, kernel_diag
from bayes_maxmargin.core.linalg import jittered_cholesky, woodbury_solve
from bayes_maxmargin.core.parameters import field_values, flatten, free_fields, replace_fields
from bayes_maxmargin.core.predict import probit_predictive
from bayes_maxmargin.engine import resumable
from bayes_maxmargin.engine.fixed_point import ecm_loop, squarem_cycle
from bayes_maxmargin.engine.hinge_qp import hinge_qp
from bayes_maxmargin.models.gp.covariance import (
    Covariance,
    GPData,
    alpha,
    alpha_from_factor,
    as_2d,
    chol_mm,
    fitc_factors,
    gp_data,
    log_marginal,
    loo_moments,
    log_prior,
    prior_matvec,
    pseudo_obs,
    scaled_factor,
)
from bayes_maxmargin.models.gp.model import (
    GPHyper,
    KernelPrior,
    check_num_inducing,
    kernel_log_prior,
    prior_covariance,
)

__all__ = ["GPECMMLIIResult", "GPECMResult", "ML2_OPTIMIZERS", "MLII_CRITERIA", "MLIIResult", "SQUAREM_STEPS",
           "alternate_ecm_mlii", "criterion_covariance", "ecm_runs", "f_update", "gp_ecm", "gp_ecm_mlii",
           "gp_log_marginal", "gp_loo_log_predictive", "gp_map", "gp_objective", "gp_predict",
           "gp_predict_from_draws", "gp_predict_from_theta_draws", "gp_predict_proba", "map_row_chunks",
           "marginal_log_posterior", "ml2_ascent", "mlii_update", "support_vector_mask", "support_vectors"]

# --------------------------------------------------------------------------- ECM at fixed theta
class GPECMResult(NamedTuple):
    """Output of :func:`gp_ecm`.

    Attributes
    ----------
    f : Array, shape (n,)
        MAP estimate of the latent function at the training inputs.
    gamma : Array
        MAP (or fixed value) of gamma.
    inv_lam : Array, shape (n,)
        omega = E[1 / lambda] of the E-step at the returned (f, gamma), eq. (8) (the input of
        :func:`gp_predict` and of :func:`mlii_update`).
    objective : Array, shape (max_iter + 1,)
        Objective (:func:`gp_objective`) at the start and after every iteration; NaN after
        convergence.
    n_iter : Array
        Iterations run.
    """

    f: Array
    gamma: Array
    inv_lam: Array
    objective: Array
    n_iter: Array


def gp_objective(f: Array, gamma: Array, cov: Covariance, hyper: GPHyper, estimate_gamma: bool) -> Array:
    """Log posterior of (f, gamma) with lambda integrated out, the quantity ECM increases.

    log N(f | 0, K) + sum_n log sLa(u_n) (eq. 4-6,
    :func:`~bayes_maxmargin.core.augmentation.marginal_log_likelihood`) [+ log Ga(gamma | a0, b0)], with
    u = 1 - Y f and K in either representation (:func:`~bayes_maxmargin.models.gp.covariance.log_prior`).
    """
    return marginal_log_posterior(log_prior(cov, f), f, cov.y, gamma, hyper, estimate_gamma)


def marginal_log_posterior(
    log_prior_f: Array, f: Array, y: Array, gamma: Array, hyper: GPHyper, estimate_gamma: bool
) -> Array:
    """log p(f) + sum_n log sLa(1 - y_n f_n | gamma, gamma0) [+ log Ga(gamma | a0, b0)] given the
    prior's log density ``log_prior_f`` at f."""
    lp = log_prior_f + marginal_log_likelihood(f, y, gamma, hyper.gamma0)
    if estimate_gamma:
        lp = lp + dist.Gamma(hyper.a0, hyper.b0).log_prob(gamma)
    return lp


def f_update(cov: Covariance, inv_lam: Array, gamma: Array) -> Array:
    """CM-step for f: f = K (K + Lambda / gamma)^-1 Y (1 + lambda), lambda = 1 / omega.

    Derivation (Henao et al. 2014, eq. 5-8). The expected complete-data log posterior, with the
    expectation over lambda | f^(i), gamma^(i) and omega_n = E[1 / lambda_n] (eq. 8), is in f

        Q(f) = -1/2 f' K^-1 f - gamma/2 sum_n E[(1 + lambda_n - y_n f_n)^2 / lambda_n] + const
             = -1/2 f' K^-1 f - gamma/2 sum_n (omega_n u_n^2 + 2 u_n) + const,   u_n = 1 - y_n f_n.

    Expanding with y_n^2 = 1, omega_n u_n^2 + 2 u_n = omega_n f_n^2 - 2 y_n f_n (1 + omega_n) + const
    = omega_n (f_n - t_n)^2 + const with t_n = y_n (1 + 1 / omega_n). So

        Q(f) = -1/2 f' K^-1 f - 1/2 sum_n (gamma omega_n) (f_n - t_n)^2 + const,

    the log posterior of GP regression on the pseudo-observations t = Y (1 + lambda) with
    independent noise of variance 1 / (gamma omega_n) = lambda_n / gamma. Its maximiser is the
    regression posterior mean

        f = K (K + D)^-1 t,   D = Lambda / gamma = (gamma Omega)^-1,

    the update after eq. (8), for any prior covariance: computed as K alpha with alpha from
    :func:`~bayes_maxmargin.models.gp.covariance.alpha` (the scaled Cholesky of I + W^1/2 K W^1/2,
    W = gamma Omega, for the dense K; Woodbury on diag(dq + lambda / gamma) + U U' under FITC, eq. 10).
    """
    return prior_matvec(cov, alpha(cov, inv_lam, gamma))


class _ECMState(NamedTuple):
    """(f, gamma), the state SQUAREM extrapolates (:func:`gp_ecm` with ``accelerate``)."""

    f: Array
    gamma: Array


def _accelerated_step(f: Array, gamma: Array, cov: Covariance, hyper: GPHyper, estimate_gamma: bool):
    """One safeguarded SQUAREM cycle (:func:`~bayes_maxmargin.engine.fixed_point.squarem_cycle`) of three
    ECM iterations: every returned state is the output of an ECM iteration, and its objective is at least
    that of two plain iterations."""
    state, _ = squarem_cycle(
        lambda s: _ECMState(*_ecm_step(s.f, s.gamma, cov, hyper, estimate_gamma)),
        lambda s: gp_objective(s.f, s.gamma, cov, hyper, estimate_gamma),
        {"f": "linear", "gamma": "log"} if estimate_gamma else {"f": "linear"},
        _ECMState(f, gamma),
    )
    return state.f, state.gamma


#: ECM iterations per SQUAREM cycle (:func:`gp_ecm` with ``accelerate``).
SQUAREM_STEPS = 3


def ecm_runs(max_iter: int, accelerate: bool) -> int:
    """Loop iterations of :func:`gp_ecm` for a budget of ``max_iter`` ECM iterations: ``max_iter``, or
    with ``accelerate`` its SQUAREM cycles of :data:`SQUAREM_STEPS` iterations (at least one)."""
    return max(max_iter // SQUAREM_STEPS, 1) if accelerate else max_iter


def _ecm_step(f: Array, gamma: Array, cov: Covariance, hyper: GPHyper, estimate_gamma: bool):
    u = 1.0 - cov.y * f
    inv_lam = expected_inv_lambda(u, gamma, hyper.gamma0)  # E-step, eq. (8)
    f = f_update(cov, inv_lam, gamma)  # CM-step for f
    if estimate_gamma:  # CM-step for gamma, expectations from the E-step
        u_new = 1.0 - cov.y * f
        gamma = gamma_cm_step(u_new, u, inv_lam, gamma, hyper.gamma0, hyper.a0, hyper.b0)
    return f, gamma


@partial(jit, static_argnames=("max_iter", "estimate_gamma", "accelerate"))
def gp_ecm(
    f0: Array, cov: Covariance, hyper: GPHyper, tol: ArrayLike, *, max_iter: int, estimate_gamma: bool,
    accelerate: bool = False,
) -> GPECMResult:
    """ECM for the MAP of (f, gamma) at fixed kernel parameters (Henao et al. 2014, Sec. 3, eq. 8),
    under the dense prior or its FITC approximation (eq. 10).

    Iterates E-step (eq. 8), :func:`f_update` and, with ``estimate_gamma``, the gamma CM-step,
    until the relative change of :func:`gp_objective` is at most ``tol``.

    Parameters
    ----------
    f0 : Array, shape (n,)
        Initial latent function (zeros is a good default).
    cov : GPData or FITCFactors
        The prior covariance with the +-1 labels: K (jitter included) and its Cholesky factor
        (:func:`~bayes_maxmargin.models.gp.covariance.gp_data`), or the FITC factors
        (:func:`~bayes_maxmargin.models.gp.covariance.fitc_factors`).
    hyper : GPHyper
        Hyperparameters; ``hyper.gamma`` is the fixed or initial gamma.
    tol : ArrayLike
        Stop when ``|objective_t - objective_{t-1}|`` <= tol * max(``|objective_t|``, 1).
    max_iter : int
        Maximum number of iterations.
    estimate_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is updated by its CM-step (needs a0 > 1).
    accelerate : bool
        Iterate SQUAREM cycles (Varadhan & Roland 2008) of three ECM iterations instead of single
        iterations, at most ``max_iter // 3`` of them (:func:`ecm_runs`): the same fixed points and
        monotone objective, reached in far fewer iterations where ECM crawls near the hinge (400
        standardised two-moons rows: 120 iterations instead of 533 to the same relative change 1e-10,
        ending nearer the fixed point). ``objective`` and ``n_iter`` then count cycles.

    Returns
    -------
    GPECMResult
    """
    dtype = cov.y.dtype
    update = _accelerated_step if accelerate else _ecm_step
    f, gamma, _, trace, n_iter = ecm_loop(
        lambda f, g: (*update(f, g, cov, hyper, estimate_gamma), None),
        lambda f, g: gp_objective(f, g, cov, hyper, estimate_gamma),
        jnp.asarray(f0, dtype), jnp.asarray(hyper.gamma, dtype), None, tol, ecm_runs(max_iter, accelerate),
    )
    inv_lam = expected_inv_lambda(1.0 - cov.y * f, gamma, hyper.gamma0)
    return GPECMResult(f, gamma, inv_lam, trace, n_iter)


@partial(jit, static_argnames=("max_iter",))
def gp_map(cov: GPData, hyper: GPHyper, tol: ArrayLike, *, max_iter: int) -> GPECMResult:
    """The ECM fixed point of the hinge (gamma0 = 0) at fixed theta and gamma, solved exactly: the MAP
    of f, a kernel SVM without bias.

    With K = L L' (``cov.chol``, jitter included) and f = L w, w ~ N(0, I), the negative log posterior
    (eq. 4-6 with gamma0 = 0) is 1/2 w'w + 2 gamma sum_n max(1 - y_n (L w)_n, 0): the linear SVM of
    :func:`~bayes_maxmargin.engine.hinge_qp.hinge_qp` with Z = Y L, unit prior precisions and
    C = 2 gamma, solved in its n x n form (Z Z' = Y K Y) by the interior-point method with an exact
    active-set crossover and stopped when the duality gap is at most ``tol`` max(P, 1). ECM reaches
    the same point only sublinearly near the hinge (a point on the margin needs omega -> infinity).

    Parameters
    ----------
    cov : GPData
        The dense prior covariance and its Cholesky factor (:func:`~bayes_maxmargin.models.gp.covariance.gp_data`).
    hyper : GPHyper
        ``hyper.gamma`` is the fixed gamma; ``hyper.gamma0`` must be 0 (not read).
    tol : ArrayLike
        Relative tolerance on the duality gap.
    max_iter : int
        Most interior-point steps (each one N x N Cholesky, the cost of an ECM iteration).

    Returns
    -------
    GPECMResult
        f, gamma, the E-step's omega at f, the log posterior (:func:`gp_objective`) at the start and
        after every step (not monotone: the iterates are not ECM's), and the steps run.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> from bayes_maxmargin.core.kernels import SEParams
    >>> from bayes_maxmargin.models.gp.covariance import gp_data
    >>> from bayes_maxmargin.models.gp.model import GPHyper, prior_covariance
    >>> X = jnp.linspace(-2.0, 2.0, 20)[:, None]
    >>> y = jnp.where(X[:, 0] > 0, 1.0, -1.0)
    >>> cov = gp_data(prior_covariance(X, "rbf", SEParams(jnp.asarray(1.0), jnp.asarray(1.0))), y)
    >>> res = gp_map(cov, GPHyper(*map(jnp.asarray, (1.0, 2.0, 1.0, 0.0))), 1e-8, max_iter=50)
    >>> bool(jnp.all(jnp.sign(res.f) == y)), int(res.n_iter) < 50
    (True, True)
    """
    gamma = jnp.asarray(hyper.gamma, cov.K.dtype)
    z = cov.y[:, None] * cov.chol
    res = hinge_qp(z, jnp.ones(cov.y.shape, cov.K.dtype), 2.0 * gamma, tol, max_iter,
                   lambda w: gp_objective(cov.chol @ w, gamma, cov, hyper, False),
                   gram_z=cov.y[:, None] * cov.K * cov.y[None, :])
    f = cov.chol @ res.w
    return GPECMResult(f, gamma, expected_inv_lambda(1.0 - cov.y * f, gamma, hyper.gamma0), res.trace, res.n_iter)


# --------------------------------------------------------------------------- ML-II, eq. (9)
def criterion_covariance(theta: Any, X: ArrayLike, y: ArrayLike, V: ArrayLike | None, kernel: str | KernelFn,
                         jitter: float) -> Covariance:
    """The prior covariance at theta (and V) as the ML-II criteria and the leave-one-out moments read it:
    the dense K_theta without a factor of its own (they factorise K + Lambda / gamma), or the FITC
    factors on the pseudo-inputs ``V`` (eq. 10)."""
    X = as_2d(X)
    if V is None:
        K = prior_covariance(X, kernel, theta, jitter)
        return GPData(K, jnp.asarray(y, K.dtype), None)
    return fitc_factors(theta, X, jnp.asarray(as_2d(V), X.dtype), y, kernel, jitter)


def gp_log_marginal(
    theta: Any,
    X: ArrayLike,
    y: ArrayLike,
    inv_lam: ArrayLike,
    gamma: ArrayLike,
    *,
    V: ArrayLike | None = None,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
) -> Array:
    """ML-II objective log Z = log N(Y (1 + lambda) | 0, K_theta + Lambda / gamma): eq. (9) with the
    dense K_theta, eq. (10) with its FITC form on the pseudo-inputs ``V``.

    :func:`~bayes_maxmargin.models.gp.covariance.log_marginal` at theta (and V); differentiable in
    ``theta`` and ``V``.

    Parameters
    ----------
    theta : NamedTuple
        Kernel parameters theta.
    X, y : ArrayLike, shapes (n, d) and (n,)
        Training inputs and their labels coded +-1.
    inv_lam : ArrayLike, shape (n,)
        omega = 1 / lambda.
    gamma : ArrayLike
        Hinge scale.
    V : ArrayLike, shape (M, d), optional
        FITC pseudo-inputs; None for the dense prior.
    kernel : str or callable
        Covariance function.
    jitter : float
        Diagonal jitter of the prior covariance (as in
        :func:`~bayes_maxmargin.models.gp.model.prior_covariance`; absolute jitter of K_mm and K_nn
        under FITC).
    """
    cov = criterion_covariance(theta, X, y, V, kernel, jitter)
    return log_marginal(cov, jnp.asarray(inv_lam, cov.y.dtype), jnp.asarray(gamma, cov.y.dtype))


#: The criteria ML-II can maximise over the kernel parameters (:func:`mlii_update`).
MLII_CRITERIA = ("evidence", "loo")


def gp_loo_log_predictive(
    theta: Any,
    X: ArrayLike,
    y: ArrayLike,
    inv_lam: ArrayLike,
    gamma: ArrayLike,
    *,
    V: ArrayLike | None = None,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
) -> Array:
    """Leave-one-out log predictive probability ``sum_n log Phi(y_n m_n / sqrt(1 + s_n))`` at fixed
    lambda = 1 / ``inv_lam`` and gamma: the papers' predictive Phi(f) (Henao et al. 2014, eq. 11-12)
    of each training point from the others, with the leave-one-out mean and variance ``(m_n, s_n)`` of f_n
    (:func:`~bayes_maxmargin.models.gp.covariance.loo_moments`; Rasmussen & Williams 2006, eq. 5.12),
    the predictive criterion of Sundararajan & Keerthi (2001) for choosing the kernel parameters.
    Differentiable in ``theta`` and ``V``; arguments as :func:`gp_log_marginal`.
    """
    cov = criterion_covariance(theta, X, y, V, kernel, jitter)
    mean, var = loo_moments(cov, jnp.asarray(inv_lam, cov.y.dtype), jnp.asarray(gamma, cov.y.dtype))
    return jnp.sum(jax.scipy.special.log_ndtr(cov.y * mean / jnp.sqrt(1.0 + jnp.maximum(var, 0.0))))


def _criterion(name: str):
    return {"evidence": gp_log_marginal, "loo": gp_loo_log_predictive}[name]


class MLIIResult(NamedTuple):
    """Output of :func:`mlii_update`.

    Attributes
    ----------
    theta : NamedTuple
        Updated kernel parameters (the best iterate of the optimiser).
    V : Array or None
        Updated FITC pseudo-inputs (None for the dense prior).
    log_z_before, log_z_after : Array
        ML-II's objective (log Z of eq. (9) / (10), or the criterion given, plus the log prior if any) at the
        initial and at the returned parameters (after >= before).
    """

    theta: Any
    V: Array | None
    log_z_before: Array
    log_z_after: Array


@partial(
    jit,
    static_argnames=("kernel", "steps", "optimizer", "learning_rate", "optimize_inducing", "jitter", "trainable",
                     "tol", "criterion"),
)
def mlii_update(
    theta: Any,
    X: Array,
    y: Array,
    inv_lam: Array,
    gamma: Array,
    *,
    V: Array | None = None,
    kernel: str | KernelFn = "rbf",
    steps: int = 10,
    optimizer: str = "lbfgs",
    learning_rate: float = 0.05,
    optimize_inducing: bool = True,
    jitter: float = 1e-6,
    trainable: tuple[str, ...] | None = None,
    tol: float | None = None,
    criterion: str = "evidence",
    theta_prior: KernelPrior | None = None,
) -> MLIIResult:
    """One ML-II step: move theta (and the FITC pseudo-inputs V) uphill on log Z of eq. (9) / (10)
    (:func:`gp_log_marginal`), or on another ``criterion``, at fixed lambda = 1 / omega and gamma
    (:func:`gp_ecm_mlii` passes omega = 1 / E[lambda]).

    At most ``steps`` Optax iterations (:func:`ml2_ascent`) on log theta (the flat vector of
    :func:`~bayes_maxmargin.core.parameters.flatten`) and on V in units of the spread of X
    (:func:`~bayes_maxmargin.core.kernels.feature_scale`), fewer with ``tol``; the best iterate seen is
    returned, so log Z never decreases. Neither coordinate depends on the units of X: inputs multiplied
    by c give length-scales and pseudo-inputs multiplied by c and the same kernel matrices.

    Parameters
    ----------
    theta : NamedTuple
        Current kernel parameters theta.
    X, y : Array
        Training inputs (n, d) and +-1 labels (n,).
    inv_lam : Array, shape (n,)
        omega = 1 / lambda at which log Z is evaluated.
    gamma : Array
        Hinge scale.
    V : Array, shape (M, d), optional
        Current FITC pseudo-inputs; None for the dense prior.
    kernel : str or callable
        Covariance function (static).
    steps : int
        Optimiser iterations.
    optimizer : {"lbfgs", "adam"}
        Optax optimiser (:data:`ML2_OPTIMIZERS`).
    learning_rate : float
        Adam step size in log theta and in V over the spread of X (L-BFGS chooses its own by line search).
    optimize_inducing : bool
        Whether V moves with theta (FITC only).
    jitter : float
        Diagonal jitter of K.
    trainable : tuple of str, optional
        The kernel fields that move (paths, :func:`~bayes_maxmargin.core.parameters.free_fields`); the
        others stay at their current values (:meth:`~bayes_maxmargin.core.parameters.Unflatten.hold_fixed`).
        None: all of them.
    tol : float, optional
        Stop the iterations once one raises log Z by at most ``tol`` relative to it (:func:`ml2_ascent`);
        None: all ``steps`` run.
    criterion : {"evidence", "loo"}
        What is maximised (:data:`MLII_CRITERIA`): log Z of eq. (9) / (10) (:func:`gp_log_marginal`), or
        the leave-one-out log predictive probability of the same Gaussian (:func:`gp_loo_log_predictive`);
        ``log_z_before`` / ``log_z_after`` of the result are its values.
    theta_prior : KernelPrior, optional
        A log-normal prior on theta whose log density (:func:`~bayes_maxmargin.models.gp.model.kernel_log_prior`)
        is added to the criterion (MAP-II; ``log_z_before`` / ``log_z_after`` include it); None: the
        criterion alone.
    """
    log_theta0, unflatten = flatten(theta)
    trainable = unflatten.paths if trainable is None else trainable

    def theta_of(log_theta):
        return unflatten(unflatten.hold_fixed(log_theta, trainable))

    criterion_fn = _criterion(criterion)

    def objective(log_theta, *args, **kwargs):
        value = criterion_fn(theta_of(log_theta), *args, **kwargs)
        return value if theta_prior is None else value + kernel_log_prior(log_theta, theta_prior, unflatten)

    if V is None:
        def log_z(log_theta):
            return objective(log_theta, X, y, inv_lam, gamma, kernel=kernel, jitter=jitter)

        best, before, after = ml2_ascent(log_z, log_theta0, steps, optimizer, learning_rate, tol)
        return MLIIResult(theta_of(best), None, before, after)

    scale = feature_scale(X)  # V moves in units of the data's spread

    def log_z_sparse(raw):
        Vr = raw["V"] * scale if optimize_inducing else jax.lax.stop_gradient(V)
        return objective(raw["theta"], X, y, inv_lam, gamma, V=Vr, kernel=kernel, jitter=jitter)

    raw0 = {"theta": log_theta0, "V": V / scale}
    best_raw, before, after = ml2_ascent(log_z_sparse, raw0, steps, optimizer, learning_rate, tol)
    return MLIIResult(theta_of(best_raw["theta"]), best_raw["V"] * scale if optimize_inducing else V, before, after)


def map_row_chunks(fn, X: Array, chunk: int) -> tuple[Array, ...]:
    """Apply ``fn(X_block) -> (a, b, ...)``, each output of shape (chunk,), to blocks of ``chunk``
    rows (``lax.map``; the last block padded with copies of the first row, which are dropped),
    bounding memory to chunk rows."""
    m = X.shape[0]
    n_chunks = -(-m // chunk)
    padded = jnp.concatenate([X, jnp.repeat(X[:1], n_chunks * chunk - m, axis=0)], axis=0)
    out = jax.lax.map(fn, padded.reshape(n_chunks, chunk, X.shape[1]))
    return tuple(a.reshape(-1)[:m] for a in out)


def alternate_ecm_mlii(run_ecm, mlii, theta0: Any, f0: Array, gamma_init: Array, n_rounds: int, every: int,
                       final: int, *, gamma0: Array, stop_tol: ArrayLike | None = None, run_final=None):
    """Alternate ECM runs and ML-II steps for ``n_rounds`` rounds, then one final ECM run (Sec. 3).

    ``run_ecm(theta, f, gamma, iters)`` returns an ECM result (fields f, gamma, inv_lam, objective)
    of at most ``iters`` iterations started from (f, gamma) at the kernel parameters ``theta``;
    ``mlii(theta, inv_lam, gamma)`` returns (theta, log_z_before, log_z_after) and is called with
    the paper's <lambda>: omega = 1 / E[lambda | f, gamma] at the round's final f
    (:func:`~bayes_maxmargin.core.augmentation.inv_mean_lambda`, with lambda's Exp rate ``gamma0``), not
    the f-step's E[1 / lambda] (see :func:`gp_ecm_mlii`). Each round runs ``every`` ECM iterations;
    the final run, at the final theta, up to ``final`` iterations (to the ECM fixed point, where eq. 13
    holds), by ``run_final`` (same signature) where given. Returns the final ECM result, the final
    theta, the objective traces by round (the final run last; rows NaN-padded to ``final + 1``), log Z
    before / after each ML-II step, and theta after each step.

    With ``stop_tol``, the rounds stop early, after the first ML-II step whose gain is at most
    ``stop_tol`` relative to log Z (log_z_after - log_z_before <= stop_tol max(``|log_z_after|``, 1)):
    theta is then (nearly) stationary for log Z at the current lambda, and further rounds only follow the
    ECM's slow drift of f. The rounds not run have NaN objective traces and log Z, and theta repeated.

    The rounds and the final run are resumable loops (:mod:`bayes_maxmargin.engine.resumable`): a fit
    with a checkpoint writes one after every round and every chunk of the final run.
    """

    def round_fn(carry, _):
        theta, f, gamma = carry
        res = run_ecm(theta, f, gamma, every)
        theta, before, after = mlii(theta, inv_mean_lambda(res.inv_lam, res.gamma, gamma0), res.gamma)
        return (theta, res.f, res.gamma), (res.objective, jnp.stack([before, after]), theta)

    if stop_tol is None and not resumable.tracing():
        (theta, f, gamma), (traces, log_z, theta_trace) = jax.lax.scan(
            round_fn, (theta0, f0, gamma_init), None, length=n_rounds
        )
    else:
        stop = None if stop_tol is None else jnp.asarray(stop_tol, f0.dtype)
        theta, f, gamma, traces, log_z, theta_trace = _rounds_until_stationary(
            round_fn, (theta0, f0, gamma_init), n_rounds, every, stop)
    last = (run_final or run_ecm)(theta, f, gamma, final)
    width = max(final, every) + 1
    pad = lambda t: jnp.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, width - t.shape[-1])], constant_values=jnp.nan)  # noqa: E731
    return last, theta, jnp.concatenate([pad(traces), pad(last.objective[None])], axis=0), log_z, theta_trace


def _rounds_until_stationary(round_fn, carry0: tuple, n_rounds: int, every: int, stop_tol: Array | None):
    """At most ``n_rounds`` of ``round_fn`` (a ``lax.scan`` body of :func:`alternate_ecm_mlii`) in a
    resumable ``while_loop`` that stops after the first round whose ML-II gain is at most ``stop_tol``
    relative to log Z (None: all rounds run); the outputs of the rounds not run are NaN (theta: the
    last one repeated)."""
    dtype = carry0[1].dtype
    traces = jnp.full((n_rounds, every + 1), jnp.nan, dtype)
    log_z = jnp.full((n_rounds, 2), jnp.nan, dtype)
    theta_trace = jax.tree.map(lambda a: jnp.broadcast_to(a, (n_rounds,) + a.shape), carry0[0])

    def cond_fn(state):
        _, _, _, _, i, stop = state
        return (i < n_rounds) & ~stop

    def body(state):
        carry, traces, log_z, theta_trace, i, _ = state
        carry, (trace, lz, theta) = round_fn(carry, None)
        later = jnp.arange(n_rounds) >= i  # rounds i, i + 1, ...: theta of round i until overwritten
        theta_trace = jax.tree.map(lambda t, a: jnp.where(later.reshape((-1,) + (1,) * a.ndim), a, t),
                                   theta_trace, theta)
        gain = lz[1] - lz[0]
        stop = jnp.asarray(False) if stop_tol is None else gain <= stop_tol * jnp.maximum(jnp.abs(lz[1]), 1.0)
        return carry, traces.at[i, : trace.shape[0]].set(trace), log_z.at[i].set(lz), theta_trace, i + 1, stop

    state = (carry0, traces, log_z, theta_trace, jnp.asarray(0), jnp.asarray(False))
    (theta, f, gamma), traces, log_z, theta_trace, _, _ = resumable.while_loop(cond_fn, body, state)
    return theta, f, gamma, traces, log_z, theta_trace


#: The Optax optimisers ML-II can use: L-BFGS with its zoom line search (the default: a few
#: iterations converge on the handful of kernel parameters) or Adam with a fixed step size.
ML2_OPTIMIZERS = ("lbfgs", "adam")


def ml2_ascent(
    objective, x0: Any, steps: int, optimizer: str = "lbfgs", learning_rate: float = 0.05, tol: float | None = None
) -> tuple[Any, Array, Array]:
    """Maximise ``objective`` from ``x0`` by at most ``steps`` Optax iterations; keep the best iterate.

    ``optimizer`` is ``"lbfgs"`` (``optax.lbfgs()``: L-BFGS with a zoom line search, step size
    chosen by the line search) or ``"adam"`` (``optax.adam(learning_rate)``). With ``tol`` the
    iterations stop once one has raised the objective by at most ``tol`` relative to it (gain <=
    tol max(``|objective|``, 1); seen at the start of the next iteration, which still moves; a
    ``lax.while_loop``), the iterates up to there being those of the full run; None: all ``steps``
    run (a ``lax.scan``). Returns the best point seen (so the objective never ends below its start;
    NaN values are never best), the objective at ``x0`` and at the returned point.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> x, before, after = ml2_ascent(lambda x: -jnp.sum((x - 3.0) ** 2), jnp.zeros(2), steps=20, tol=1e-8)
    >>> bool(jnp.allclose(x, 3.0, atol=1e-3)), float(before)
    (True, -18.0)
    """
    loss = lambda x: -objective(x)  # noqa: E731
    if optimizer == "lbfgs":
        opt = optax.lbfgs()
        value_and_grad = optax.value_and_grad_from_state(loss)  # reuses the line search's values
    elif optimizer == "adam":
        opt = optax.with_extra_args_support(optax.adam(learning_rate))
        plain = jax.value_and_grad(loss)
        value_and_grad = lambda x, state: plain(x)  # noqa: E731
    else:
        raise ValueError(f"optimizer must be one of {ML2_OPTIMIZERS}, got {optimizer!r}")
    loss0 = loss(x0)

    def keep_better(x, value, best_x, best_loss):
        better = value < best_loss
        return jax.tree.map(lambda a, b: jnp.where(better, a, b), x, best_x), jnp.where(better, value, best_loss)

    def step(carry):
        x, state, best_x, best_loss = carry
        value, grad = value_and_grad(x, state=state)
        best_x, best_loss = keep_better(x, value, best_x, best_loss)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=loss)
        return (optax.apply_updates(x, updates), state, best_x, best_loss), value

    carry = (x0, opt.init(x0), x0, loss0)
    if tol is None:
        (x, _, best_x, best_loss), _ = jax.lax.scan(lambda c, _: step(c), carry, None, length=steps)
    else:
        # an iteration's gain is known once the next one has evaluated its start
        def body(state):
            i, carry, previous, _ = state
            carry, start = step(carry)
            return i + 1, carry, start, (i == 0) | (previous - start > tol * jnp.maximum(jnp.abs(start), 1.0))

        _, (x, _, best_x, best_loss), _, _ = jax.lax.while_loop(
            lambda state: (state[0] < steps) & state[3], body, (jnp.asarray(0), carry, loss0, jnp.asarray(True)))
    best_x, best_loss = keep_better(x, loss(x), best_x, best_loss)
    return best_x, -loss0, -best_loss


class GPECMMLIIResult(NamedTuple):
    """Output of :func:`gp_ecm_mlii`.

    Attributes
    ----------
    f, gamma, inv_lam : Array
        Final ECM state at the final kernel parameters (as in :class:`GPECMResult`).
    theta : NamedTuple
        Final kernel parameters theta.
    V : Array or None
        Final FITC pseudo-inputs (None for the dense prior).
    objective : Array, shape (n_rounds + 1, max(max_iter, mlii_every) + 1)
        ECM objective traces: row r is the ECM run of round r at the theta of that round (start
        value first, NaN after early convergence); the last row is the final run at the final
        theta. The objective never decreases within a row; it jumps between rows as theta moves.
        Without ML-II one row, the one ECM run.
    log_z : Array, shape (n_rounds, 2)
        ML-II's objective (log Z of eq. (9) / (10), or the criterion given, plus the log prior if any) before
        and after each ML-II step.
    theta_trace : NamedTuple of arrays, leading axis n_rounds
        Kernel parameters after each ML-II step.
    """

    f: Array
    gamma: Array
    inv_lam: Array
    theta: Any
    V: Array | None
    objective: Array
    log_z: Array
    theta_trace: Any


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
        "trainable",
        "mlii_tol",
        "accelerate",
        "exact",
        "criterion",
    ),
)
def gp_ecm_mlii(
    X: Array,
    y: Array,
    theta0: Any,
    hyper: GPHyper,
    tol: ArrayLike = 1e-10,
    *,
    V0: Array | None = None,
    kernel: str | KernelFn = "rbf",
    max_iter: int = 200,
    mlii_every: int = 20,
    mlii_steps: int = 10,
    optimizer: str = "lbfgs",
    learning_rate: float = 0.05,
    estimate_gamma: bool = False,
    optimize_inducing: bool = True,
    jitter: float = 1e-6,
    trainable: tuple[str, ...] | None = None,
    mlii_tol: float | None = None,
    accelerate: bool = False,
    exact: bool = False,
    criterion: str = "evidence",
    theta_prior: KernelPrior | None = None,
) -> GPECMMLIIResult:
    """ECM with ML-II kernel learning every ``mlii_every`` iterations (Henao et al. 2014, Sec. 3),
    under the dense prior or, given pseudo-inputs ``V0``, its FITC form (eq. 10).

    ``max_iter // mlii_every`` rounds, in a ``lax.scan``: the prior covariance is rebuilt (K_theta
    factorised, or the FITC factors of (theta, V)), :func:`gp_ecm` runs for at most ``mlii_every``
    iterations (warm-started from the previous f and gamma), then :func:`mlii_update` moves theta
    (and V) uphill on log Z (eq. 9 / 10) at the E-step's <lambda> = E[lambda | f, gamma] at the
    round's final f (:func:`~bayes_maxmargin.core.augmentation.inv_mean_lambda`). That is the
    paper's <lambda_n>, also in its supplement's U = K + <gamma^-1> <Lambda>. The reciprocal
    1 / E[1 / lambda], the lambda of the f-step, leaves margin points nearly noise-free in eq. (9),
    and ML-II then over-smooths: on USPS 3 vs 5 (7291 / 2007 split) the length-scale went from 14.5
    to 28.0 and the test error to 7.1 %, against 15.3 and 4.9 % here. A last ECM run at the final
    theta, to convergence (``tol``) or at most ``max_iter`` iterations, gives the returned f, gamma
    and omega, so that they are an ECM fixed point (where the alpha structure of eq. 13 holds). The
    paper's setting is ``max_iter = 200``, ``mlii_every = 20``. With ``mlii_every = 0`` (or
    ``mlii_steps = 0``) no ML-II is done: one ECM run of ``max_iter`` iterations at fixed theta.

    Parameters
    ----------
    X : Array, shape (n, d)
        Training inputs.
    y : Array, shape (n,)
        Labels coded +-1.
    theta0 : NamedTuple
        Initial kernel parameters theta.
    hyper : GPHyper
        Hyperparameters; ``hyper.gamma`` is the fixed or initial gamma.
    tol : ArrayLike
        Relative-change tolerance of each ECM run.
    V0 : Array, shape (M, d), optional
        Initial FITC pseudo-inputs, 1 <= M <= n (:func:`~bayes_maxmargin.models.gp.model.init_inducing`);
        None for the dense prior.
    kernel : str or callable
        Covariance function (static).
    max_iter, mlii_every, mlii_steps : int
        Total ECM iterations before the final run, ECM iterations between ML-II steps, optimiser
        iterations per ML-II step.
    optimizer : {"lbfgs", "adam"}
        Optax optimiser of the ML-II steps.
    learning_rate : float
        Adam step size in log theta (and in V over the spread of X).
    estimate_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and its CM-step is run.
    optimize_inducing : bool
        Whether ML-II also moves V (FITC only).
    jitter : float
        Diagonal jitter of K (absolute jitter of K_mm and K_nn under FITC).
    trainable : tuple of str, optional
        The kernel fields ML-II moves (:func:`mlii_update`); None: all of them.
    mlii_tol : float, optional
        Stop the optimiser iterations of an ML-II step once one raises log Z by at most ``mlii_tol``
        relative to it (:func:`mlii_update`), and the rounds, before ``max_iter // mlii_every`` of them,
        after the first ML-II step whose gain is at most that (:func:`alternate_ecm_mlii`); the final
        ECM run follows as always. None: every round runs its ``mlii_steps`` iterations.
    accelerate : bool
        Run every ECM run as SQUAREM cycles of three iterations (:func:`gp_ecm`); the budgets
        ``mlii_every`` and ``max_iter`` still count ECM iterations.
    exact : bool
        Dense prior, hinge (gamma0 = 0) with gamma fixed only: the final run solves the f-step's fixed
        point exactly (:func:`gp_map`, at most ``max_iter`` interior-point steps, ``tol`` on the
        duality gap) instead of iterating ECM towards it; the rounds stay ECM's.
    criterion : {"evidence", "loo"}
        What the ML-II steps maximise (:func:`mlii_update`): eq. (9) / (10), the paper's, or the
        leave-one-out log predictive probability.
    theta_prior : KernelPrior, optional
        A log-normal prior on theta added to the criterion (:func:`mlii_update`); None: none.
    """
    if exact and (V0 is not None or estimate_gamma):
        raise ValueError("exact=True needs the dense prior and gamma fixed (the hinge with gamma0 = 0)")
    X = as_2d(X)
    sparse = V0 is not None
    if sparse:
        V0 = as_2d(V0)
        if V0.ndim != 2 or V0.shape[1] != X.shape[1]:
            raise ValueError(f"V0 must have shape (num_inducing, {X.shape[1]}), got {V0.shape}")
        check_num_inducing(V0.shape[0], X.shape[0])
    dtype = X.dtype
    y = jnp.asarray(y, dtype)
    theta0 = jax.tree.map(lambda a: jnp.asarray(a, dtype), theta0)
    point0 = (theta0, jnp.asarray(V0, dtype)) if sparse else theta0  # what ML-II moves: theta (and V)

    def prior(point) -> Covariance:
        if sparse:
            theta, V = point
            return fitc_factors(theta, X, V, y, kernel, jitter)
        return gp_data(prior_covariance(X, kernel, point, jitter), y)

    def run_ecm(point, f, gamma, iters):
        return gp_ecm(f, prior(point), hyper._replace(gamma=gamma), tol, max_iter=iters, estimate_gamma=estimate_gamma,
                      accelerate=accelerate)

    def run_exact(point, f, gamma, iters):
        return gp_map(prior(point), hyper._replace(gamma=gamma), tol, max_iter=iters)

    def split(point):
        return point if sparse else (point, None)

    f_init = jnp.zeros(X.shape[0], dtype)
    gamma_init = jnp.asarray(hyper.gamma, dtype)
    if mlii_every <= 0 or mlii_steps <= 0:  # ECM only, at fixed theta (and V)
        res = (run_exact if exact else run_ecm)(point0, f_init, gamma_init, max_iter)
        no_rounds = jax.tree.map(lambda a: jnp.zeros((0,) + a.shape, a.dtype), theta0)
        return GPECMMLIIResult(res.f, res.gamma, res.inv_lam, *split(point0), res.objective[None],
                               jnp.zeros((0, 2), dtype), no_rounds)

    def mlii(point, inv_lam, gamma):
        theta, V = split(point)
        ml = mlii_update(
            theta, X, y, inv_lam, gamma, V=V, kernel=kernel, steps=mlii_steps, optimizer=optimizer,
            learning_rate=learning_rate, optimize_inducing=optimize_inducing, jitter=jitter, trainable=trainable,
            tol=mlii_tol, criterion=criterion, theta_prior=theta_prior,
        )
        return ((ml.theta, ml.V) if sparse else ml.theta), ml.log_z_before, ml.log_z_after

    final, point, objective, log_z, point_trace = alternate_ecm_mlii(
        run_ecm, mlii, point0, f_init, gamma_init, max(max_iter // mlii_every, 1), mlii_every, max_iter,
        gamma0=hyper.gamma0, stop_tol=mlii_tol, run_final=run_exact if exact else None,
    )
    theta_trace = point_trace[0] if sparse else point_trace
    return GPECMMLIIResult(final.f, final.gamma, final.inv_lam, *split(point), objective, log_z, theta_trace)


# --------------------------------------------------------------------------- predictions
@partial(jit, static_argnames=("kernel", "jitter", "chunk"))
def gp_predict(
    X_train: Array,
    X_test: Array,
    y: Array,
    inv_lam: Array,
    gamma: Array,
    theta: Any,
    *,
    V: Array | None = None,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
    chunk: int = 1024,
) -> tuple[Array, Array]:
    """Predictive mean and variance of f_* (Henao et al. 2014, eq. 11-12), under the dense prior or,
    given pseudo-inputs ``V``, its FITC form (eq. 10).

    Dense: mean = k_*' alpha with alpha = (K + Lambda / gamma)^-1 Y (1 + lambda) (eq. 12),
    var = k(x_*, x_*) - k_*' (K + Lambda / gamma)^-1 k_* = k(x_*, x_*) - ||L^-1 (s k_*)||^2, where
    L L' = I + S K S, s = sqrt(gamma omega) (eq. 11). FITC: with a_* = L^-1 k_m* (L L' = K_mm),
    Q_*n = a_*' U', so mean = Q_*n alpha = a_*' (U' alpha) and var = k_** - a_*' P a_* with
    P = U' (Kf + Lambda / gamma)^-1 U (M x M, one Woodbury solve with M right-hand sides). Test rows
    are processed ``chunk`` at a time (``lax.map``), bounding memory by n x chunk (M x chunk).

    Parameters
    ----------
    X_train : Array, shape (n, d)
        Training inputs.
    X_test : Array, shape (m, d)
        Test inputs.
    y : Array, shape (n,)
        Training labels coded +-1.
    inv_lam : Array, shape (n,)
        Final omega = E[1 / lambda] (e.g. :attr:`GPECMResult.inv_lam`).
    gamma : Array
        Final gamma.
    theta : NamedTuple
        Kernel parameters theta.
    V : Array, shape (M, d), optional
        FITC pseudo-inputs of the fit; None for the dense prior.
    kernel : str or callable
        Covariance function (static).
    jitter : float
        Diagonal jitter of the fit; not added to k(x_*, x_*).
    chunk : int
        Test rows per block.

    Returns
    -------
    mean, var : Array, shape (m,)
    """
    X_train = as_2d(X_train)
    X_test = jnp.asarray(as_2d(X_test), X_train.dtype)
    kfn = get_kernel(kernel)
    inv_lam = jnp.asarray(inv_lam, X_train.dtype)
    gamma = jnp.asarray(gamma, X_train.dtype)
    if V is None:
        K = prior_covariance(X_train, kfn, theta, jitter)
        s, chol_b = scaled_factor(K, inv_lam, gamma)
        alpha = alpha_from_factor(s, chol_b, jnp.asarray(y, K.dtype), inv_lam, gamma)

        def one_block(Xb):
            Kb = kfn(theta, X_train, Xb)  # (n, chunk)
            half = solve_triangular(chol_b, s[:, None] * Kb, lower=True)
            return Kb.T @ alpha, kernel_diag(kfn, theta, Xb) - jnp.sum(half**2, axis=0)

        return map_row_chunks(one_block, X_test, chunk)

    V = jnp.asarray(as_2d(V), X_train.dtype)
    fac = fitc_factors(theta, X_train, V, y, kernel, jitter)
    L = chol_mm(kfn, theta, V, jitter)
    g = fac.dq + 1.0 / (gamma * inv_lam)
    # one Woodbury solve for both right-hand sides: [alpha, (Kf + Lambda / gamma)^-1 U]
    rhs = jnp.column_stack([pseudo_obs(fac.y, inv_lam), fac.U])
    sol = fac.U.T @ woodbury_solve(g, fac.U, jnp.eye(fac.U.shape[1], dtype=fac.U.dtype), rhs)  # (M, 1 + M)
    Ua, P = sol[:, 0], 0.5 * (sol[:, 1:] + sol[:, 1:].T)

    def one_block_fitc(Xb):
        A = solve_triangular(L, kfn(theta, V, Xb), lower=True)  # (M, chunk)
        return A.T @ Ua, kernel_diag(kfn, theta, Xb) - jnp.sum(A * (P @ A), axis=0)

    return map_row_chunks(one_block_fitc, X_test, chunk)


@partial(jit, static_argnames=("kernel", "jitter", "chunk"))
def gp_predict_from_draws(
    X_train: Array,
    X_test: Array,
    F: Array,
    theta: Any,
    *,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
    chunk: int = 1024,
) -> tuple[Array, Array, Array]:
    """Moments of the posterior predictive of f_* from posterior draws of f at one theta.

    Given f, f_* | f ~ N(k_*' K^-1 f, k_** - k_*' K^-1 k_*) (the GP conditional); over S draws
    f^(s) of the posterior the predictive is the mixture of these Gaussians (Henao et al. 2014,
    eq. 11 averaged over MCMC draws). K^-1 F' comes from one Cholesky factor of K (S right-hand
    sides); test rows are processed ``chunk`` at a time.

    Parameters
    ----------
    X_train : Array, shape (n, d)
    X_test : Array, shape (m, d)
    F : Array, shape (S, n)
        Draws of f at the training inputs, all at the kernel parameters ``theta``.
    theta : NamedTuple
        Kernel parameters theta.
    kernel, jitter, chunk
        As in :func:`gp_predict`.

    Returns
    -------
    mean : Array, shape (m,)
        Average over draws of the conditional means.
    mean_sq : Array, shape (m,)
        Average over draws of the squared conditional means.
    cond_var : Array, shape (m,)
        The conditional variance k_** - k_*' K^-1 k_* (the same for every draw). The mixture's
        variance is ``cond_var + mean_sq - mean**2``.
    """
    X_train = jnp.asarray(X_train)
    if X_train.ndim == 1:
        X_train = X_train[:, None]
    X_test = jnp.asarray(X_test, X_train.dtype).reshape(-1, X_train.shape[1])
    kfn = get_kernel(kernel)
    chol, _ = jittered_cholesky(prior_covariance(X_train, kfn, theta, jitter))
    A = cho_solve((chol, True), jnp.asarray(F, X_train.dtype).T)  # (n, S)

    def one_block(Xb):
        Kb = kfn(theta, X_train, Xb)  # (n, chunk)
        means = Kb.T @ A  # (chunk, S)
        half = solve_triangular(chol, Kb, lower=True)
        cond_var = kernel_diag(kfn, theta, Xb) - jnp.sum(half**2, axis=0)
        return means.mean(axis=1), (means**2).mean(axis=1), cond_var

    return map_row_chunks(one_block, X_test, chunk)


@partial(jit, static_argnames=("kernel", "jitter", "chunk"))
def gp_predict_from_theta_draws(
    X_train: Array,
    X_test: Array,
    F: Array,
    theta: Any,
    *,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
    chunk: int = 1024,
) -> tuple[Array, Array]:
    """Mean and variance of the posterior predictive of f_* from joint draws of (theta, f).

    The mixture over draws s of N(k_*' K_s^-1 f^(s), k_** - k_*' K_s^-1 k_*), each term at its own
    theta^(s) (:func:`gp_predict_from_draws` with one draw, in a ``lax.map``: one Cholesky per draw).

    Parameters
    ----------
    X_train, X_test, kernel, jitter, chunk
        As in :func:`gp_predict_from_draws`.
    F : Array, shape (S, n)
        Draws of f.
    theta : NamedTuple
        The kernel parameters of each draw: its positive fields with leading axis S (fixed fields, the
        polynomial degree, as they are).

    Returns
    -------
    mean, var : Array, shape (m,)
    """

    def one(draw):
        values, f = draw
        drawn = replace_fields(theta, values)
        return gp_predict_from_draws(X_train, X_test, f[None], drawn, kernel=kernel, jitter=jitter, chunk=chunk)

    sampled = {path: value for path, value in field_values(theta).items() if path in free_fields(theta)}
    mean, mean_sq, cond_var = jax.lax.map(one, (sampled, F))
    m = mean.mean(axis=0)
    return m, jnp.maximum((mean_sq + cond_var).mean(axis=0) - m**2, 0.0)


def gp_predict_proba(
    X_train: ArrayLike,
    X_test: ArrayLike,
    y: ArrayLike,
    inv_lam: ArrayLike,
    gamma: ArrayLike,
    theta: Any,
    *,
    V: ArrayLike | None = None,
    kernel: str | KernelFn = "rbf",
    jitter: float = 1e-6,
    chunk: int = 1024,
) -> np.ndarray:
    """P(y_* = +1) = Phi(m / sqrt(1 + v)) from :func:`gp_predict` (eq. 11; the paper drops the
    square root, :func:`~bayes_maxmargin.core.predict.probit_predictive` keeps it)."""
    mean, var = gp_predict(
        X_train, X_test, y, inv_lam, gamma, theta, V=V, kernel=kernel, jitter=jitter, chunk=chunk
    )
    return probit_predictive(np.asarray(mean), np.asarray(var))


def support_vector_mask(f: ArrayLike, y: ArrayLike, tol: float = 1e-3) -> Array:
    """Support vectors of eq. (13): y_n f_n < 1 (inside the margin) or on it, ``|1 - y_n f_n|`` <= tol.

    Equivalently y_n f_n <= 1 + tol; every other point has alpha_n = 0 at convergence with
    gamma0 = 0.
    """
    f = jnp.asarray(f)
    return jnp.asarray(y, f.dtype) * f <= 1.0 + tol


def support_vectors(f: ArrayLike, y: ArrayLike, tol: float = 1e-3) -> np.ndarray:
    """Indices of the support vectors (:func:`support_vector_mask`), computed on the host."""
    f = np.asarray(f)
    return np.flatnonzero(np.asarray(y, f.dtype) * f <= 1.0 + tol)
