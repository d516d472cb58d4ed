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
4. gamma | f, lambda ~ Ga(a0 + N/2, b0 + eps' Lambda^-1 eps / 2), eq. (7), when gamma has a prior.

Steps 2-3 together draw (theta, f) from a kernel that leaves p(theta, f | lambda, gamma) invariant:
step 2 moves theta by a kernel invariant for its marginal p(theta | lambda, gamma), step 3 draws f
exactly from p(f | theta, lambda, gamma). Murray & Adams (2010) slice-sample theta given auxiliary
Gaussian "surrogate data" g = f + noise, with f reparametrised around its Gaussian conditional given
g; here no auxiliary variable is needed, because given lambda the augmented likelihood *is* Gaussian
(t = f + e, e ~ N(0, D), eq. 5), so the surrogate data are t themselves, with their exact noise D,
and f can be integrated out altogether (the collapsed limit of their construction). The redraw of f
after theta moves is essential: without it (f, theta) would follow the wrong joint (the NUTS test
detects this through log N(f | 0, K_theta)).

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
from jax import Array, lax
from jax.scipy.stats import norm
from jax.typing import ArrayLike

from bayes_maxmargin.core.augmentation import draw_gamma, expected_inv_lambda, sample_inv_lambda
from bayes_maxmargin.core.kernels import KernelFn, get_kernel
from bayes_maxmargin.core.parameters import (
    coordinates,
    field_values,
    free_fields,
    pack,
    pack_values,
    template,
    thaw,
    unpack,
)
from bayes_maxmargin.models.gp.covariance import GPData, gp_data
from bayes_maxmargin.models.gp.ecm import gp_log_marginal
from bayes_maxmargin.models.gp.gibbs import gp_log_joint, sample_f
from bayes_maxmargin.models.gp.model import GPHyper, KernelPrior, prior_covariance

__all__ = ["GPThetaData", "GPThetaState", "SliceInfo", "build_gp_theta_kernel", "build_gp_theta_record", "gp_theta_data",
           "gp_theta_log_joint", "init_gp_theta", "log_theta_prior",
           "slice_1d", "slice_sweep", "theta_log_conditional"]

LogDensity = Callable[[Array], Array]


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
    """

    X: Array
    y: Array
    prior: KernelPrior
    jitter: Array
    slice_width: Array


def gp_theta_data(
    X: ArrayLike, y: ArrayLike, prior: KernelPrior, jitter: float = 1e-6, slice_width: ArrayLike = 1.0
) -> GPThetaData:
    """:class:`GPThetaData` with every array in the dtype of ``X`` (a 1-D ``X`` is one feature)."""
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    if X.ndim == 1:
        X = X[:, None]
    cast = functools.partial(jnp.asarray, dtype=X.dtype)
    prior = KernelPrior(*(jax.tree.map(cast, d) for d in prior))
    return GPThetaData(X, cast(y), prior, cast(jitter), cast(slice_width))


class GPThetaState(NamedTuple):
    """State of the GP sampler with theta sampled (one chain): the fields of
    :class:`~bayes_maxmargin.models.gp.gibbs.GPGibbsState` and ``log_theta`` (shape (p,)), the positive
    kernel fields on the log scale (:func:`~bayes_maxmargin.core.parameters.pack`); ``log_joint`` is the
    log density of the augmented program (:func:`gp_theta_log_joint`)."""

    f: Array
    inv_lam: Array
    gamma: Array
    log_theta: Array
    log_joint: Array


def sampled_coordinates(prior: KernelPrior, params_like: Any) -> np.ndarray | None:
    """The coordinates of log theta that are sampled: those of the fields the prior covers (the trainable
    ones, :func:`~bayes_maxmargin.models.gp.model.kernel_prior`); None when that is all of them."""
    idx = coordinates(params_like, prior.loc)
    return None if idx.size == coordinates(params_like, free_fields(params_like)).size else idx


def _sampled(log_theta: Array, idx: np.ndarray | None) -> Array:
    return log_theta if idx is None else log_theta[idx]


def log_theta_prior(log_theta: Array, prior: KernelPrior, params_like: Any) -> Array:
    """log p(log theta) = sum_j log N(log theta_j | loc_j, scale_j^2), the density of the sampled log theta
    (the fields the prior covers; the others are fixed).

    The density of theta itself (NumPyro's log-normal sites) is this minus sum_j log theta_j.
    """
    loc, scale = (pack_values(d, params_like) for d in prior)
    return jnp.sum(norm.logpdf(_sampled(log_theta, sampled_coordinates(prior, params_like)), loc, scale))


# --------------------------------------------------------------------------- densities
def theta_log_conditional(
    log_theta: Array,
    inv_lam: Array,
    gamma: Array,
    data: GPThetaData,
    kernel: str | KernelFn,
    params_like: Any,
) -> Array:
    """log p(log theta | lambda, gamma, y) up to a constant: the target of the slice step.

    log p(log theta) + log N(Y (1 + lambda) | 0, K_theta + Lambda / gamma), the second term the
    marginal of eq. (9) with f integrated out (:func:`~.gp_ecm.gp_log_marginal`).
    """
    params = unpack(log_theta, params_like)
    log_z = gp_log_marginal(params, data.X, data.y, inv_lam, gamma, kernel=kernel, jitter=data.jitter)
    return log_theta_prior(log_theta, data.prior, params_like) + log_z


def gp_theta_log_joint(
    f: Array,
    inv_lam: Array,
    gamma: Array,
    log_theta: Array,
    data: GPThetaData,
    hyper: GPHyper,
    *,
    kernel: str | KernelFn,
    params_like: Any,
    sample_gamma: bool,
) -> Array:
    """Log density of ``gp_bsvm(..., augmented=True, kernel_prior=data.prior)`` (eq. 5-6).

    sum_j log LogNormal(theta_j | loc_j, scale_j) + log N(f | 0, K_theta) + augmented likelihood
    + log p(lambda) [+ log Ga(gamma | a0, b0)], with respect to (theta, f, lambda[, gamma]) as
    NumPyro evaluates the program's sites. Factorises K_theta once; use
    :func:`~.gp_gibbs.gp_log_joint` directly where that factor already exists.
    """
    gdata = gp_data(_covariance(log_theta, data, kernel, params_like), data.y)
    return _log_joint_from(f, inv_lam, gamma, log_theta, gdata, data, hyper, params_like, sample_gamma)


def _covariance(log_theta: Array, data: GPThetaData, kernel: str | KernelFn, params_like: Any) -> Array:
    """K_theta + jitter I at the training inputs (the program's prior covariance, eq. 6)."""
    return prior_covariance(data.X, kernel, unpack(log_theta, params_like), data.jitter)


def _log_joint_from(
    f: Array,
    inv_lam: Array,
    gamma: Array,
    log_theta: Array,
    gdata: GPData,
    data: GPThetaData,
    hyper: GPHyper,
    params_like: Any,
    sample_gamma: bool,
) -> Array:
    """Log joint given the factorised K_theta (``gdata``): the theta prior as NumPyro's log-normal
    sites (log p(log theta) - sum log theta) plus the augmented joint at fixed theta."""
    idx = sampled_coordinates(data.prior, params_like)
    log_prior_theta = log_theta_prior(log_theta, data.prior, params_like) - jnp.sum(_sampled(log_theta, idx))
    return log_prior_theta + gp_log_joint(f, inv_lam, gamma, gdata, hyper, sample_gamma)


def init_gp_theta(
    f: ArrayLike,
    params: Any,
    data: GPThetaData,
    hyper: GPHyper,
    *,
    kernel: str | KernelFn = "rbf",
    sample_gamma: bool = False,
) -> GPThetaState:
    """A state at (f, theta = ``params``) with 1 / lambda at its conditional mean (eq. 8) and gamma
    at ``hyper.gamma``."""
    dtype = data.X.dtype
    f = jnp.asarray(f, dtype)
    gamma = jnp.asarray(hyper.gamma, dtype)
    log_theta = pack(params).astype(dtype)
    inv_lam = expected_inv_lambda(1.0 - data.y * f, gamma, hyper.gamma0)
    log_joint = gp_theta_log_joint(
        f, inv_lam, gamma, log_theta, data, hyper, kernel=kernel, params_like=params, sample_gamma=sample_gamma
    )
    return GPThetaState(f, inv_lam, gamma, log_theta, log_joint)


# --------------------------------------------------------------------------- slice sampling
#: Most shrinkage steps of one univariate slice update; beyond it the point is kept (the bracket is
#: then narrower than the float resolution around it, which a finite density never needs).
MAX_SHRINK = 64

# phases of one univariate update
_LEFT, _RIGHT, _SHRINK, _DONE = 0, 1, 2, 3


class _SliceCarry(NamedTuple):
    """Loop state of :func:`slice_1d`: the bracket, the stepping-out budgets left on each side, the
    phase, the number of shrinkage draws and of density evaluations so far and the last accepted point."""

    left: Array
    right: Array
    budget_left: Array
    budget_right: Array
    phase: Array
    n_shrink: Array
    n_eval: Array
    x: Array
    lp: Array


class SliceInfo(NamedTuple):
    """What slice updates did (:func:`slice_1d` for one coordinate, :func:`slice_sweep` summed).

    Attributes
    ----------
    num_evaluations : Array
        Evaluations of the log density: stepping-out steps and shrinkage draws (sub-iterations).
    num_stalled : Array
        Updates that accepted no point within :data:`MAX_SHRINK` shrinkage draws and kept the
        current one.
    """

    num_evaluations: Array
    num_stalled: Array


def _skip_spent(phase: Array, budget_left: Array, budget_right: Array) -> Array:
    """Leave a stepping-out phase whose budget is spent (no evaluation is made for it)."""
    phase = jnp.where((phase == _LEFT) & (budget_left <= 0), _RIGHT, phase)
    return jnp.where((phase == _RIGHT) & (budget_right <= 0), _SHRINK, phase)


def slice_1d(
    key: Array, logdensity: LogDensity, x0: Array, lp0: Array, width: Array, max_steps: int = 8
) -> tuple[Array, Array, SliceInfo]:
    """One univariate slice-sampling update: stepping out, then shrinkage (Neal 2003, Fig. 3, 5).

    With a height log y = log p(x0) - Exp(1), a bracket of width w placed at random around x0 is
    stepped out by w on each side while its end lies in the slice {x: log p(x) > log y} (at most
    ``max_steps`` steps in all, split at random between the sides), then points are drawn uniformly
    from it, and it is shrunk to the rejected point's side of x0, until one lies in the slice.
    This leaves p invariant for any w and ``max_steps``. All phases run in one ``lax.while_loop``
    with one evaluation of ``logdensity`` per iteration: the density is compiled once, and under
    ``vmap`` chains in different phases advance together.

    Parameters
    ----------
    key : Array
        PRNG key.
    logdensity : callable
        Unnormalised log density of a scalar; NaN counts as outside every slice.
    x0, lp0 : Array
        Current point and ``logdensity(x0)``.
    width : Array
        Bracket width w.
    max_steps : int
        Neal's m: most stepping-out steps, both sides together.

    Returns
    -------
    x, lp : Array
        New point and its log density (x0 and lp0 if no point was accepted within
        :data:`MAX_SHRINK` draws).
    info : SliceInfo
        The number of density evaluations, and whether the update stalled (1) or not (0).
    """
    # every uniform the update can use, drawn at once: height, bracket offset, budget split, and
    # one per shrinkage draw (no random-number generation inside the loop)
    u = jax.random.uniform(key, (3 + MAX_SHRINK,), dtype=x0.dtype)
    logy = lp0 + jnp.log1p(-u[0])  # log of a uniform height under p(x0); 1 - u[0] > 0
    left = x0 - width * u[1]
    budget_left = jnp.floor(max_steps * u[2]).astype(jnp.int32)
    budget_right = max_steps - 1 - budget_left

    def draw(c: _SliceCarry) -> Array:
        return c.left + u[3 + c.n_shrink] * (c.right - c.left)

    def cond(c: _SliceCarry) -> Array:
        return (c.phase != _DONE) & (c.n_shrink < MAX_SHRINK)

    def body(c: _SliceCarry) -> _SliceCarry:
        point = jnp.select([c.phase == _LEFT, c.phase == _RIGHT], [c.left, c.right], draw(c))
        lp = logdensity(point)
        inside = lp > logy
        stepping_left, stepping_right = c.phase == _LEFT, c.phase == _RIGHT
        shrinking = c.phase == _SHRINK
        left = jnp.where(stepping_left & inside, c.left - width, c.left)
        right = jnp.where(stepping_right & inside, c.right + width, c.right)
        # a rejected draw becomes the bracket's end on its side of x0
        left = jnp.where(shrinking & ~inside & (point < x0), point, left)
        right = jnp.where(shrinking & ~inside & (point >= x0), point, right)
        budget_left = c.budget_left - (stepping_left & inside)
        budget_right = c.budget_right - (stepping_right & inside)
        phase = jnp.where(
            shrinking, jnp.where(inside, _DONE, _SHRINK),
            jnp.where(inside, c.phase, c.phase + 1),  # an end outside the slice: next phase
        )
        phase = _skip_spent(phase, budget_left, budget_right)
        accept = shrinking & inside
        return _SliceCarry(
            left, right, budget_left, budget_right, phase, c.n_shrink + shrinking, c.n_eval + 1,
            jnp.where(accept, point, c.x), jnp.where(accept, lp, c.lp),
        )

    init = _SliceCarry(
        left, left + width, budget_left, budget_right,
        _skip_spent(jnp.asarray(_LEFT), budget_left, budget_right), jnp.asarray(0), jnp.asarray(0), x0, lp0,
    )
    out = lax.while_loop(cond, body, init)
    return out.x, out.lp, SliceInfo(out.n_eval, (out.phase != _DONE).astype(out.n_eval.dtype))


def slice_sweep(
    key: Array, logdensity: LogDensity, x: Array, width: ArrayLike, max_steps: int = 8, index: Any = None
) -> tuple[Array, Array, SliceInfo]:
    """Univariate slice updates (:func:`slice_1d`) of every coordinate of ``x`` (or those in ``index``) in
    turn (``lax.scan``).

    Parameters
    ----------
    key : Array
        PRNG key.
    logdensity : callable
        Unnormalised log density of the whole vector ``x``.
    x : Array, shape (p,)
        Current point.
    width : ArrayLike
        Bracket width (scalar or one per coordinate).
    max_steps : int
        Most stepping-out steps per coordinate.
    index : array of int, optional
        The coordinates to update (the others stay); None: all.

    Returns
    -------
    x : Array, shape (p,)
        The new point.
    lp : Array
        ``logdensity`` at it.
    info : SliceInfo
        Density evaluations and stalled updates, summed over the coordinates.
    """
    p = x.shape[-1]
    widths = jnp.broadcast_to(jnp.asarray(width, x.dtype), (p,))
    coords = jnp.arange(p) if index is None else jnp.asarray(index)
    widths = widths if index is None else widths[coords]

    def one(carry, inputs):
        x, lp = carry
        i, k, w = inputs
        along = lambda t: logdensity(x.at[i].set(t))  # noqa: E731
        xi, lp, info = slice_1d(k, along, x[i], lp, w, max_steps)
        return (x.at[i].set(xi), lp), info

    keys = jax.random.split(key, coords.shape[0])
    (x, lp), info = lax.scan(one, (x, logdensity(x)), (coords, keys, widths))
    return x, lp, SliceInfo(*(jnp.sum(v) for v in info))


# --------------------------------------------------------------------------- the kernel
def build_gp_theta_kernel(kernel: str | KernelFn, params_like: Any, sample_gamma: bool):
    """The Gibbs kernel of the GP Bayesian SVM with theta sampled (module docstring; eq. 7, 9).

    Cached: the same (kernel, parameter structure, ``sample_gamma``) returns the same function, so
    repeated runs of :func:`~.driver.run_chains` do not recompile.

    Parameters
    ----------
    kernel : str or callable
        Covariance function (``"rbf"``, ``"ard"``, ``"poly"``, ``"linear"`` or a function).
    params_like : NamedTuple
        A kernel parameter container: its type, the shapes of its positive fields (the sampled
        theta; their values are ignored) and its fixed fields (the polynomial degree).
    sample_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is sampled.

    Returns
    -------
    callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)`` on :class:`GPThetaState`,
        :class:`GPThetaData` and :class:`~bayes_maxmargin.models.gp.model.GPHyper`; pure and
        jit-able. ``info`` holds the sweep's :class:`SliceInfo` as ``{"slice_evaluations",
        "slice_stalled"}``.
    """
    return _build_kernel(get_kernel(kernel), template(params_like), bool(sample_gamma))


@functools.cache
def _build_kernel(kernel_fn: KernelFn, frozen: tuple, sample_gamma: bool):
    params_like = thaw(frozen)

    def step(rng_key: Array, state: GPThetaState, data: GPThetaData, hyper: GPHyper):
        k_lam, k_theta, k_f, k_gamma = jax.random.split(rng_key, 4)
        gamma = state.gamma
        inv_lam = sample_inv_lambda(k_lam, 1.0 - data.y * state.f, gamma, hyper.gamma0)  # eq. (7)

        def target(log_theta: Array) -> Array:  # p(log theta | lambda, gamma), eq. (9)
            return theta_log_conditional(log_theta, inv_lam, gamma, data, kernel_fn, params_like)

        log_theta, _, sliced = slice_sweep(k_theta, target, state.log_theta, data.slice_width,
                                           index=sampled_coordinates(data.prior, params_like))
        gdata = gp_data(_covariance(log_theta, data, kernel_fn, params_like), data.y)
        f = sample_f(k_f, gdata, inv_lam, gamma)  # f | theta, lambda, gamma, eq. (7)
        if sample_gamma:
            gamma = draw_gamma(k_gamma, 1.0 - data.y * f, inv_lam, hyper.a0, hyper.b0)
        log_joint = _log_joint_from(f, inv_lam, gamma, log_theta, gdata, data, hyper, params_like, sample_gamma)
        info = {"slice_evaluations": sliced.num_evaluations, "slice_stalled": sliced.num_stalled}
        return GPThetaState(f, inv_lam, gamma, log_theta, log_joint), info

    return step


def build_gp_theta_record(params_like: Any, fields: tuple[str, ...] | None = None):
    """What the driver keeps per draw: ``"f"``, ``"gamma"``, ``"log_joint"`` and every sampled kernel
    field (``fields``; None: every positive one) by path, constrained (e.g. ``"lengthscale"``). Cached."""
    return _build_record(template(params_like), None if fields is None else tuple(fields))


@functools.cache
def _build_record(frozen: tuple, fields: tuple[str, ...] | None):
    params_like = thaw(frozen)
    names = free_fields(params_like) if fields is None else fields

    def record(state: GPThetaState) -> dict[str, Array]:
        theta = field_values(unpack(state.log_theta, params_like))
        return {
            "f": state.f,
            "gamma": state.gamma,
            "log_joint": state.log_joint,
            **{name: theta[name] for name in names},
        }

    return record
