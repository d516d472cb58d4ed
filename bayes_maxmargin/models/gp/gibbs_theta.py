"""Gibbs sampler of the GP Bayesian SVM with the kernel parameters theta sampled (Henao et al. 2014, Sec. 3).

The program is ``gp_bsvm(X, y, kernel_prior=prior, augmented=True)``: log theta_j ~ N(loc_j,
scale_j^2) on every positive kernel field, f | theta ~ N(0, K_theta), lambda_n ~ Exp(gamma0) (flat
for gamma0 = 0) and the augmented factor N(1 + lambda_n - y_n f_n | 0, lambda_n / gamma) of eq. (5).
One sweep, with t = Y (1 + lambda) and D = Lambda / gamma:

1. 1 / lambda_n | f, gamma ~ IG(c / ``|1 - y_n f_n|``, gamma + 2 gamma0), eq. (7);
2. theta | lambda, gamma, with f integrated out: a slice-sampling step (below) that leaves

       p(theta | lambda, gamma, y)  proportional to  p(theta) N(t | 0, K_theta + D)

   invariant; the Gaussian factor is the marginal Z of eq. (9) (:func:`gp_log_marginal`);
3. f | theta, lambda, gamma ~ N(m, S) of eq. (7), exact (:func:`~.gp_gibbs.sample_f`);
4. gamma | f, lambda ~ Ga(a0 + N/2, b0 + eps' Lambda^-1 eps / 2), eq. (7), when gamma has a prior,
   and gamma0 | lambda ~ Ga(c0 + N, d0 + sum_n lambda_n) when gamma0 has a Ga(c0, d0) prior
   (:func:`~bayes_maxmargin.core.augmentation.draw_scales`).

Steps 2-3 together draw (theta, f) from a kernel that leaves p(theta, f | lambda, gamma) invariant:
step 2 moves theta by a kernel invariant for its marginal p(theta | lambda, gamma), step 3 draws f
exactly from p(f | theta, lambda, gamma). Step 2 has two forms (``theta_sampler``):

* ``"collapsed"`` (default) slices p(theta | lambda, gamma) above. No auxiliary variable is needed,
  because given lambda the augmented likelihood *is* Gaussian (t = f + e, e ~ N(0, D), eq. 5): f is
  integrated out altogether, one Cholesky factor per density evaluation;
* ``"surrogate"`` is the surrogate-data slice sampler of Murray & Adams (2010), which Henao et al.
  use: surrogate data g ~ N(f, D) are drawn, f is held whitened under its Gaussian conditional given
  g, and theta is sliced with those fixed (:func:`surrogate_log_conditional`), two Cholesky factors
  per evaluation. On 150 x 30 rows (RBF, 4 chains of 500 adapted warm-up and 1000 kept sweeps, 2
  shared cores at load 8.5) it took 85 s against 35 s for the same number of evaluations, for bulk
  ESS of log length-scale / log amplitude 131 / 31 against 164 / 30: 0.37 effective draws of the
  slower coordinate per second against 0.87 (per CPU second 0.55 against 1.25). The amplitude's
  mixing is set by its coupling with lambda, which neither step removes.

The redraw of f after theta moves is essential: without it (f, theta) would follow the wrong joint
(the NUTS test detects this through log N(f | 0, K_theta)).

The theta step is a univariate slice sampler with stepping out and shrinkage (Neal 2003, Fig. 3
and 5) applied to each coordinate of log theta in turn, bracket width ``data.slice_width`` in log
space (default 1; stepping out makes the width uncritical). It was compared with BlackJAX's
elliptical slice sampler (``blackjax.elliptical_slice``, with the log-normal prior on log theta as
its Gaussian, one or two steps per sweep) on a 2-D problem with an SE kernel, 4 chains x 1000
sweeps, in effective draws of log lengthscale / log amplitude per second:

    ======  ======================  ======================  ======================
    N       coordinate-wise slice   elliptical, 1 step      elliptical, 2 steps
    ======  ======================  ======================  ======================
    100     14.5 / 14.9             13.2 / 5.2              10.6 / 5.3
    200     3.5 / 6.6               3.0 / 2.3               2.0 / 1.8
    ======  ======================  ======================  ======================

An elliptical step costs fewer evaluations of log Z (6 against 10 per sweep at N = 100) but moves
less: its proposals are drawn at the prior's scale, much wider than the conditional of theta
given lambda, and shrink towards the current point (effective draws of log amplitude per sweep
0.07 against 0.22 at N = 100); the coordinate-wise sampler fits its bracket to the conditional
by stepping out and shrinking. All loops are ``lax.while_loop`` / ``lax.scan``: the kernel is
jit-able and vmappable over chains, in float64 and float32.

Cost. A sweep's time is its evaluations of the target: at N = 150, d = 30 (RBF, one chain, XLA:CPU,
OpenBLAS on one thread) a collapsed evaluation takes 0.3 ms (kernel matrix 0.08 ms, Cholesky factor
0.14 ms), a surrogate one 0.8 ms, and the rest of the sweep (lambda, the factor of K, f, the log
joint) about 1 ms; the compiled sweep has no host callback. With ``data.adapt_steps`` (the
estimator's warm-up) the widths adapt (:func:`slice_settings`): evaluations per sweep fell from 9.9
to 5.9 for the two coordinates, 4 chains ran 125 against 65 sweeps per second (CPU time 24 against
33 s for 6000 chain-sweeps), and the effective draws of theta per CPU second stayed within their
Monte Carlo error (log amplitude 1.25 against 1.39). Threaded OpenBLAS slows every factor down by
orders of magnitude on shared cores (a 150 x 150 Cholesky factor took 455 ms with two threads at load
10), so the estimator runs Gibbs with one (:func:`~bayes_maxmargin.core.linalg.limit_blas_threads`).

The state's ``log_joint`` is the log density of the augmented program in NumPyro's
parametrisation of its sites (theta, f, lambda[, gamma]): with respect to theta, not log theta,
as ``numpyro.infer.util.log_density`` reports it (tested).

References
----------
I. Murray and R. P. Adams (2010). Slice sampling covariance hyperparameters of latent Gaussian
models. NeurIPS 23.

R. M. Neal (2003). Slice sampling. Annals of Statistics 31(3), 705-767.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.scipy.linalg import solve_triangular
from jax.typing import ArrayLike

from bayes_maxmargin.core.augmentation import (
    MoveInfo,
    augmented_log_likelihood,
    draw_scales,
    elliptical_moves,
    expected_inv_lambda,
    sample_inv_lambda,
)
from bayes_maxmargin.core.linalg import gaussian_log_density
from bayes_maxmargin.core.slice import LogDensity, slice_sweep
from bayes_maxmargin.core.kernels import KernelFn, get_kernel
from bayes_maxmargin.core.parameters import Unflatten, field_values, flatten
from bayes_maxmargin.models.gp.covariance import GPData, gp_data
from bayes_maxmargin.models.gp.ecm import gp_log_marginal
from bayes_maxmargin.models.gp.gibbs import gp_log_joint, sample_f
from bayes_maxmargin.models.gp.model import (
    GPHyper,
    KernelPrior,
    covered_log_theta,
    kernel_log_prior,
    prior_covariance,
    sampled_coordinates,
)

__all__ = ["THETA_SAMPLERS", "GPThetaData", "GPThetaState", "ThetaSweepInfo", "build_gp_theta_kernel",
           "build_gp_theta_record", "gp_theta_data", "gp_theta_log_joint", "init_gp_theta",
           "sampled_field_values", "slice_settings", "surrogate_log_conditional",
           "surrogate_whiten", "theta_log_conditional"]


class GPThetaData(NamedTuple):
    """The data of the GP sampler with theta sampled.

    Attributes
    ----------
    X : Array, shape (n, d)
        Training inputs (their dtype is the sampler's).
    y : Array, shape (n,)
        Labels coded +-1.
    prior : KernelPrior
        Log-normal prior of every positive kernel field (:func:`~bayes_maxmargin.models.gp.model.kernel_prior`).
    jitter : Array
        Diagonal jitter of the prior covariance, K_theta + jitter I (as in the program).
    slice_width : Array
        Initial bracket width of the slice sampler, in log theta (scalar or one per coordinate).
    adapt_steps : Array
        Warm-up sweeps over which the bracket widths adapt (:func:`slice_settings`); 0: the widths stay
        ``slice_width`` throughout.
    """

    X: Array
    y: Array
    prior: KernelPrior
    jitter: Array
    slice_width: Array
    adapt_steps: Any = 0


def gp_theta_data(
    X: ArrayLike, y: ArrayLike, prior: KernelPrior, jitter: float = 1e-6, slice_width: ArrayLike = 1.0,
    adapt_steps: int = 0,
) -> GPThetaData:
    """:class:`GPThetaData` with every array in the dtype of ``X`` (a 1-D ``X`` is one feature)."""
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    if X.ndim == 1:
        X = X[:, None]
    cast = functools.partial(jnp.asarray, dtype=X.dtype)
    prior = KernelPrior(*(jax.tree.map(cast, d) for d in prior))
    return GPThetaData(X, cast(y), prior, cast(jitter), cast(slice_width), np.asarray(adapt_steps, np.int32))


class ThetaSweepInfo(NamedTuple):
    """The Info of a sweep with theta sampled, recorded per draw in ``sample_stats``: the slice steps on log
    theta (:class:`~bayes_maxmargin.core.slice.SliceInfo`) and the elliptical moves of f
    (:class:`~bayes_maxmargin.core.augmentation.MoveInfo`)."""

    slice_evaluations: Array
    slice_stalled: Array
    move_evaluations: Array
    move_stalled: Array


class GPThetaState(NamedTuple):
    """State of the GP sampler with theta sampled (one chain): the fields of
    :class:`~bayes_maxmargin.models.gp.gibbs.GPGibbsState` and ``log_theta`` (shape (p,)), the positive
    kernel fields on the log scale (:func:`~bayes_maxmargin.core.parameters.flatten`); ``log_joint`` is the
    log density of the augmented program (:func:`gp_theta_log_joint`). ``iteration`` counts the sweeps
    done and ``step_sum`` (shape (p,)) sums the size of the slice steps of each coordinate over the
    second half of the warm-up, from which the bracket widths are set (:func:`slice_settings`)."""

    f: Array
    inv_lam: Array
    gamma: Array
    gamma0: Array
    log_theta: Array
    log_joint: Array
    iteration: Array
    step_sum: Array


# --------------------------------------------------------------------------- densities
def theta_log_conditional(
    log_theta: Array,
    inv_lam: Array,
    gamma: Array,
    data: GPThetaData,
    kernel: str | KernelFn,
    unflatten: Unflatten,
) -> Array:
    """log p(log theta | lambda, gamma, y) up to a constant: the target of the slice step.

    log p(log theta) + log N(Y (1 + lambda) | 0, K_theta + Lambda / gamma), the second term the
    marginal of eq. (9) with f integrated out (:func:`~.gp_ecm.gp_log_marginal`).
    """
    params = unflatten(log_theta)
    log_z = gp_log_marginal(params, data.X, data.y, inv_lam, gamma, kernel=kernel, jitter=data.jitter)
    return kernel_log_prior(log_theta, data.prior, unflatten) + log_z


def gp_theta_log_joint(
    f: Array,
    inv_lam: Array,
    gamma: Array,
    log_theta: Array,
    data: GPThetaData,
    hyper: GPHyper,
    *,
    kernel: str | KernelFn,
    unflatten: Unflatten,
    sample_gamma: bool,
    sample_gamma0: bool = False,
) -> Array:
    """Log density of ``gp_bsvm(..., augmented=True, kernel_prior=data.prior)`` (eq. 5-6).

    sum_j log LogNormal(theta_j | loc_j, scale_j) + log N(f | 0, K_theta) + augmented likelihood
    + log p(lambda) [+ log Ga(gamma | a0, b0)], with respect to (theta, f, lambda[, gamma]) as
    NumPyro evaluates the program's sites. Factorises K_theta once; use
    :func:`~.gp_gibbs.gp_log_joint` directly where that factor already exists.
    """
    gdata = gp_data(_covariance(log_theta, data, kernel, unflatten), data.y)
    return _log_joint_from(f, inv_lam, gamma, log_theta, gdata, data, hyper, unflatten, sample_gamma,
                           sample_gamma0)


def _covariance(log_theta: Array, data: GPThetaData, kernel: str | KernelFn, unflatten: Unflatten) -> Array:
    """K_theta + jitter I at the training inputs (the program's prior covariance, eq. 6)."""
    return prior_covariance(data.X, kernel, unflatten(log_theta), data.jitter)


def _log_joint_from(
    f: Array,
    inv_lam: Array,
    gamma: Array,
    log_theta: Array,
    gdata: GPData,
    data: GPThetaData,
    hyper: GPHyper,
    unflatten: Unflatten,
    sample_gamma: bool,
    sample_gamma0: bool = False,
) -> Array:
    """Log joint given the factorised K_theta (``gdata``): the theta prior as NumPyro's log-normal
    sites (log p(log theta) - sum log theta) plus the augmented joint at fixed theta."""
    log_prior_theta = (kernel_log_prior(log_theta, data.prior, unflatten)
                       - jnp.sum(covered_log_theta(log_theta, data.prior, unflatten)))
    return log_prior_theta + gp_log_joint(f, inv_lam, gamma, gdata, hyper, sample_gamma, sample_gamma0)


def init_gp_theta(
    f: ArrayLike,
    params: Any,
    data: GPThetaData,
    hyper: GPHyper,
    *,
    kernel: str | KernelFn = "rbf",
    sample_gamma: bool = False,
    sample_gamma0: bool = False,
) -> GPThetaState:
    """A state at (f, theta = ``params``) with 1 / lambda at its conditional mean (eq. 8), gamma
    at ``hyper.gamma`` and gamma0 at ``hyper.gamma0``."""
    dtype = data.X.dtype
    f = jnp.asarray(f, dtype)
    gamma = jnp.asarray(hyper.gamma, dtype)
    gamma0 = jnp.asarray(hyper.gamma0, dtype)
    log_theta, unflatten = flatten(params)
    log_theta = log_theta.astype(dtype)
    inv_lam = expected_inv_lambda(1.0 - data.y * f, gamma, gamma0)
    log_joint = gp_theta_log_joint(
        f, inv_lam, gamma, log_theta, data, hyper._replace(gamma0=gamma0), kernel=kernel, unflatten=unflatten,
        sample_gamma=sample_gamma, sample_gamma0=sample_gamma0,
    )
    return GPThetaState(f, inv_lam, gamma, gamma0, log_theta, log_joint, jnp.asarray(0, jnp.int32),
                        jnp.zeros_like(log_theta))


#: Neal's m (stepping-out steps per update) during the warm-up, and throughout without adaptation.
MAX_STEPS = 8

#: After an adapted warm-up: the bracket width of each coordinate in units of its mean step size over the
#: warm-up's second half (with stepping out, about its conditional standard deviation), and Neal's m.
#: On a standard normal a width of 4 sd with m = 2 costs 2.9 evaluations per update (lag-1 correlation
#: 0.26), against 4.3 (0.08) for a width of 1-4 sd with m = 8; in the Gibbs sweep, where theta's
#: conditional moves with lambda, the fewer evaluations are the better trade (module docstring).
ADAPTED_WIDTH, ADAPTED_MAX_STEPS = 4.0, 2


def slice_settings(state: GPThetaState, data: GPThetaData) -> tuple[Array, Array]:
    """Bracket widths (shape (p,)) and Neal's m of this sweep's slice updates.

    Before ``data.adapt_steps`` sweeps, and always when it is 0: ``data.slice_width`` with m =
    :data:`MAX_STEPS`. From then on, fixed: :data:`ADAPTED_WIDTH` times each coordinate's mean step
    size over sweeps ``adapt_steps // 2`` to ``adapt_steps - 1`` (``state.step_sum``), with m =
    :data:`ADAPTED_MAX_STEPS` (a coordinate that never moved keeps ``slice_width``). Slice sampling
    leaves its target invariant for any width and m, so the kernel is exact once the widths are fixed.
    """
    p = state.log_theta.shape[-1]
    base = jnp.broadcast_to(jnp.asarray(data.slice_width, state.log_theta.dtype), (p,))
    counted = data.adapt_steps - data.adapt_steps // 2
    adapted = (state.iteration >= data.adapt_steps) & (counted > 0)
    mean_step = state.step_sum / jnp.maximum(counted, 1)
    width = jnp.where(adapted & (mean_step > 0), ADAPTED_WIDTH * mean_step, base)
    return width, jnp.where(adapted, ADAPTED_MAX_STEPS, MAX_STEPS)


def _count_steps(state: GPThetaState, data: GPThetaData, log_theta: Array) -> tuple[Array, Array]:
    """The state's ``iteration`` and ``step_sum`` after a sweep that moved log theta to ``log_theta``."""
    counted = (state.iteration >= data.adapt_steps // 2) & (state.iteration < data.adapt_steps)
    step_sum = state.step_sum + jnp.where(counted, jnp.abs(log_theta - state.log_theta), 0.0)
    return state.iteration + 1, step_sum


# --------------------------------------------------------------------------- surrogate data
#: The samplers of theta | lambda, gamma: the collapsed slice sampler, and the surrogate-data slice
#: sampler of Murray & Adams (2010) (:func:`surrogate_log_conditional`).
THETA_SAMPLERS = ("collapsed", "surrogate")


def _surrogate_factors(
    log_theta: Array, g: Array, inv_lam: Array, gamma: Array, data: GPThetaData, kernel: str | KernelFn,
    unflatten: Unflatten,
) -> tuple[Array, Array, Array, Array]:
    """L_K, L_P, v and log N(g | 0, K_theta + S) at theta, with S = Lambda / gamma, W = S^-1,
    P = I + L_K' W L_K = L_P L_P' and v = L_P^-1 L_K' W g (:func:`surrogate_log_conditional`)."""
    K = _covariance(log_theta, data, kernel, unflatten)
    chol_k = jnp.linalg.cholesky(K)
    w = gamma * inv_lam
    scaled = jnp.sqrt(w)[:, None] * chol_k
    chol_p = jnp.linalg.cholesky(jnp.eye(K.shape[-1], dtype=K.dtype) + scaled.T @ scaled)
    wg = w * g
    v = solve_triangular(chol_p, chol_k.T @ wg, lower=True)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol_p))) - jnp.sum(jnp.log(w))
    return chol_k, chol_p, v, gaussian_log_density(g @ wg - v @ v, log_det, g.shape[-1])


def _surrogate_f(chol_k: Array, chol_p: Array, v: Array, nu: Array) -> Array:
    """f = m + L_R nu = L_K L_P^-T (v + nu): the latent values that the whitened nu stand for at theta."""
    return chol_k @ solve_triangular(chol_p.T, v + nu, lower=False)


def surrogate_whiten(
    f: Array, g: Array, log_theta: Array, inv_lam: Array, gamma: Array, data: GPThetaData,
    kernel: str | KernelFn, unflatten: Unflatten,
) -> Array:
    """nu = L_R^-1 (f - m) = L_P' L_K^-1 f - v: f whitened under its conditional given the surrogate
    data ``g`` at theta (the inverse of the map of :func:`surrogate_log_conditional`)."""
    chol_k, chol_p, v, _ = _surrogate_factors(log_theta, g, inv_lam, gamma, data, kernel, unflatten)
    return chol_p.T @ solve_triangular(chol_k, f, lower=True) - v


def surrogate_log_conditional(
    log_theta: Array, nu: Array, g: Array, inv_lam: Array, gamma: Array, data: GPThetaData,
    kernel: str | KernelFn, unflatten: Unflatten,
) -> Array:
    """log p(log theta | nu, g, lambda, gamma, y) up to a constant: the surrogate-data target of
    Murray & Adams (2010), Sec. 3, with the augmented likelihood as the likelihood.

    Surrogate data g = f + e, e ~ N(0, S), are drawn with S = Lambda / gamma (the augmented
    likelihood's own noise, eq. 5); given g, f ~ N(m, R), R = (K^-1 + S^-1)^-1, m = R S^-1 g, and f
    is held as nu = L_R^-1 (f - m) (:func:`surrogate_whiten`). With nu and g fixed, theta has the
    density

        p(log theta) N(g | 0, K_theta + S) N(Y (1 + lambda) | f_theta, Lambda / gamma),
        f_theta = m_theta + L_R,theta nu.

    With W = S^-1 and L_K L_K' = K, R = L_K P^-1 L_K', P = I + L_K' W L_K (every eigenvalue >= 1), so
    L_R = L_K L_P^-T and m = L_K L_P^-T v with v = L_P^-1 L_K' W g; log det(K + S) = log det P
    - sum log W and g' (K + S)^-1 g = g' W g - v' v (Woodbury). Two Cholesky factors per evaluation
    (K and P), where the collapsed target (:func:`theta_log_conditional`) needs one. A K that does not
    factorise gives NaN, outside every slice.
    """
    chol_k, chol_p, v, log_n_g = _surrogate_factors(log_theta, g, inv_lam, gamma, data, kernel, unflatten)
    f = _surrogate_f(chol_k, chol_p, v, nu)
    log_lik = jnp.sum(augmented_log_likelihood(1.0 - data.y * f, inv_lam, gamma))
    return kernel_log_prior(log_theta, data.prior, unflatten) + log_n_g + log_lik


def _theta_target(
    key: Array, theta_sampler: str, f: Array, log_theta: Array, inv_lam: Array, gamma: Array, data: GPThetaData,
    kernel: KernelFn, unflatten: Unflatten,
) -> LogDensity:
    """The log density of log theta that the sweep's slice step leaves invariant: the collapsed
    conditional p(log theta | lambda, gamma), or the surrogate-data one given a fresh g and the nu of f."""
    if theta_sampler == "collapsed":
        return lambda lt: theta_log_conditional(lt, inv_lam, gamma, data, kernel, unflatten)
    g = f + jax.random.normal(key, f.shape, f.dtype) / jnp.sqrt(gamma * inv_lam)  # g ~ N(f, S)
    nu = surrogate_whiten(f, g, log_theta, inv_lam, gamma, data, kernel, unflatten)
    return lambda lt: surrogate_log_conditional(lt, nu, g, inv_lam, gamma, data, kernel, unflatten)


# --------------------------------------------------------------------------- the kernel
def build_gp_theta_kernel(kernel: str | KernelFn, params_like: Any, sample_gamma: bool, sample_gamma0: bool = False,
                          theta_sampler: str = "collapsed", elliptical_steps: int = 0):
    """The Gibbs kernel of the GP Bayesian SVM with theta sampled (module docstring; eq. 7, 9).

    Cached: the same (kernel, parameter structure, ``sample_gamma``, ``sample_gamma0``, ``theta_sampler``) returns
    the same function, so repeated runs of :func:`~.driver.run_chains` do not recompile.

    Parameters
    ----------
    kernel : str or callable
        Covariance function (``"rbf"``, ``"ard"``, ``"poly"``, ``"linear"`` or a function).
    params_like : NamedTuple
        A kernel parameter container: its type, the shapes of its positive fields (the sampled
        theta; their values are ignored) and its fixed fields (the polynomial degree).
    sample_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is sampled.
    sample_gamma0 : bool
        Whether gamma0 has a Gamma(``hyper.gamma0_shape``, ``hyper.gamma0_rate``) prior and is sampled.
    theta_sampler : {"collapsed", "surrogate"}
        The slice step's target (:data:`THETA_SAMPLERS`): theta | lambda, gamma with f integrated out
        (:func:`theta_log_conditional`), or theta | nu, g, lambda, gamma given surrogate data
        (:func:`surrogate_log_conditional`).
    elliptical_steps : int
        Elliptical slice updates of f under the new theta with lambda integrated out, after the f
        draw (:func:`~bayes_maxmargin.core.augmentation.elliptical_moves`), then a fresh lambda draw
        given the moved f before gamma's. 0: the plain sweep.

    Returns
    -------
    callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)`` on :class:`GPThetaState`,
        :class:`GPThetaData` and :class:`~bayes_maxmargin.models.gp.model.GPHyper`; pure and
        jit-able; ``info`` a :class:`ThetaSweepInfo`.
    """
    if theta_sampler not in THETA_SAMPLERS:
        raise ValueError(f"Invalid value for theta_sampler: {theta_sampler!r} (must be one of {THETA_SAMPLERS})")
    return _build_kernel(get_kernel(kernel), Unflatten.of(params_like), bool(sample_gamma), bool(sample_gamma0),
                         theta_sampler, int(elliptical_steps))


@functools.cache
def _build_kernel(kernel_fn: KernelFn, unflatten: Unflatten, sample_gamma: bool, sample_gamma0: bool,
                  theta_sampler: str = "collapsed", elliptical_steps: int = 0):
    def step(rng_key: Array, state: GPThetaState, data: GPThetaData, hyper: GPHyper):
        k_lam, k_theta, k_f, k_gamma = jax.random.split(rng_key, 4)
        k_g = jax.random.fold_in(k_theta, 1)  # the surrogate data's (the collapsed sweep's keys as they were)
        gamma = state.gamma
        hyper = hyper._replace(gamma0=state.gamma0)
        inv_lam = sample_inv_lambda(k_lam, 1.0 - data.y * state.f, gamma, hyper.gamma0)  # eq. (7)
        # p(log theta | lambda, gamma), eq. (9), or its surrogate-data form
        target = _theta_target(k_g, theta_sampler, state.f, state.log_theta, inv_lam, gamma, data, kernel_fn,
                               unflatten)
        width, max_steps = slice_settings(state, data)
        log_theta, _, sliced = slice_sweep(k_theta, target, state.log_theta, width, max_steps,
                                           index=sampled_coordinates(data.prior, unflatten))
        gdata = gp_data(_covariance(log_theta, data, kernel_fn, unflatten), data.y)
        f = sample_f(k_f, gdata, inv_lam, gamma)  # f | theta, lambda, gamma, eq. (7)
        moved = MoveInfo.none()
        if elliptical_steps:  # f | theta, gamma with lambda integrated out, then lambda | f afresh
            f, moved = elliptical_moves(jax.random.fold_in(rng_key, 7), f, gdata.chol, data.y, gamma, hyper.gamma0,
                                        elliptical_steps)
            inv_lam = sample_inv_lambda(jax.random.fold_in(rng_key, 8), 1.0 - data.y * f, gamma, hyper.gamma0)
        gamma, gamma0 = draw_scales(k_gamma, 1.0 - data.y * f, inv_lam, gamma, hyper, sample_gamma, sample_gamma0)
        log_joint = _log_joint_from(f, inv_lam, gamma, log_theta, gdata, data, hyper._replace(gamma0=gamma0),
                                    unflatten, sample_gamma, sample_gamma0)
        info = ThetaSweepInfo(sliced.num_evaluations, sliced.num_stalled, *moved)
        counts = _count_steps(state, data, log_theta)
        return GPThetaState(f, inv_lam, gamma, gamma0, log_theta, log_joint, *counts), info

    return step


def build_gp_theta_record(params_like: Any, fields: tuple[str, ...] | None = None):
    """What the driver keeps per draw: ``"f"``, ``"gamma"``, ``"gamma0"``, ``"log_joint"`` and every sampled
    kernel field (``fields``; None: every positive one) by path, constrained (e.g. ``"lengthscale"``). Cached."""
    return _build_record(Unflatten.of(params_like), None if fields is None else tuple(fields))


@functools.cache
def sampled_field_values(unflatten: Unflatten, fields: tuple[str, ...] | None) -> Callable[[Array], dict[str, Array]]:
    """``log_theta -> {path: value}``: the sampled kernel fields (``fields``; None: every positive one) of a
    flat log theta (:func:`~bayes_maxmargin.core.parameters.flatten`), constrained. Cached."""
    names = unflatten.paths if fields is None else fields

    def values(log_theta: Array) -> dict[str, Array]:
        theta = field_values(unflatten(log_theta))
        return {name: theta[name] for name in names}

    return values


@functools.cache
def _build_record(unflatten: Unflatten, fields: tuple[str, ...] | None):
    theta = sampled_field_values(unflatten, fields)

    def record(state: GPThetaState) -> dict[str, Array]:
        return {"f": state.f, "gamma": state.gamma, "gamma0": state.gamma0, "log_joint": state.log_joint,
                **theta(state.log_theta)}

    return record
