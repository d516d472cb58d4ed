"""Univariate slice sampling (Neal 2003): one coordinate, or every coordinate of a vector in turn.

Shared by the samplers that slice a density with no conjugate conditional: the GP kernel parameters
(:mod:`~bayes_maxmargin.models.gp.gibbs_theta`), the factor models' kernel parameters and the linear
model's directional moves (:mod:`~bayes_maxmargin.models.linear.gibbs`). Every loop is a
``lax.while_loop`` / ``lax.scan``: the updates are jit-able and vmappable over chains.

References
----------
R. M. Neal (2003). Slice sampling. Annals of Statistics 31(3), 705-767.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array, lax
from jax.typing import ArrayLike

__all__ = ["MAX_SHRINK", "Directions", "LogDensity", "SliceInfo", "adapt_directions", "direction_sweep",
           "init_directions", "slice_1d", "slice_sweep"]

#: A log density of one argument (unnormalised; NaN counts as outside every slice).
LogDensity = Callable[[Array], Array]

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


# --------------------------------------------------------------------------- directions adapted in warm-up
class Directions(NamedTuple):
    """The basis of :func:`direction_sweep` and the warm-up moments it is estimated from (one chain).

    Attributes
    ----------
    iteration : Array
        Sweeps done (int32).
    count : Array
        Draws in the current adaptation window.
    mean : Array
        Running mean of the window's draws, shape (p,).
    scatter : Array
        Running sum of outer products of their deviations (Welford), shape (p, p).
    basis : Array, shape (p, p)
        The directions, one per row: the transposed lower Cholesky factor of the regularised
        covariance of the last window (the identity before the first window ends), so that slicing
        along them is slicing the whitened coordinates.
    """

    iteration: Array
    count: Array
    mean: Array
    scatter: Array
    basis: Array


def init_directions(p: int, dtype: Any) -> Directions:
    """Directions before any adaptation: the coordinate axes."""
    zeros = jnp.zeros((p,), dtype)
    return Directions(jnp.asarray(0, jnp.int32), jnp.asarray(0, dtype), zeros, jnp.zeros((p, p), dtype),
                      jnp.eye(p, dtype=dtype))


def adapt_directions(state: Directions, x: Array, adapt_steps: Array) -> Directions:
    """``state`` after the sweep that ended at ``x``: windowed covariance adaptation in warm-up.

    With W = ``adapt_steps``, the draws of sweeps [W/4, W/2) and [W/2, W) form two windows (as in
    Stan's windowed adaptation). At the end of each, ``basis`` becomes L' with L L' = the window's
    covariance shrunk towards 10^-3 I by 5 / (count + 5) (Stan's regulariser), and the moments
    restart (a window whose covariance has no finite Cholesky factor keeps the previous basis). From
    sweep W on nothing changes, so a kernel using the basis is a fixed kernel after warm-up and exact.
    W = 0 keeps the coordinate axes.
    """
    i = state.iteration
    first, middle = adapt_steps // 4, adapt_steps // 2
    counted = (i >= first) & (i < adapt_steps)
    count = state.count + counted
    delta = x - state.mean
    mean = jnp.where(counted, state.mean + delta / jnp.maximum(count, 1), state.mean)
    scatter = jnp.where(counted, state.scatter + jnp.outer(delta, x - mean), state.scatter)
    window_ends = counted & ((i + 1 == middle) | (i + 1 == adapt_steps)) & (count >= 2)
    p = x.shape[-1]
    shrink = 5.0 / (count + 5.0)
    sample_cov = 0.5 * (scatter + scatter.T) / jnp.maximum(count - 1.0, 1.0)
    cov = (1.0 - shrink) * sample_cov + shrink * 1e-3 * jnp.eye(p, dtype=x.dtype)
    chol = jnp.linalg.cholesky(cov).T
    # a covariance that rounding left indefinite (draws of enormous spread) keeps the previous basis
    basis = jnp.where(window_ends & jnp.all(jnp.isfinite(chol)), chol, state.basis)
    restart = lambda v: jnp.where(window_ends, jnp.zeros_like(v), v)  # noqa: E731
    return Directions(i + 1, restart(count), restart(mean), restart(scatter), basis)


def direction_sweep(
    key: Array, logdensity: Callable[[Array, Array], Array], x: Array, image: Array, basis: Array,
    image_basis: Array, width: ArrayLike = 4.0, max_steps: int = 4,
) -> tuple[Array, Array, SliceInfo]:
    """Univariate slice updates (:func:`slice_1d`) of ``x`` along each row of ``basis`` in turn.

    The density may depend on x through a linear image A x (a margin X beta, say) that is costly to
    recompute: ``logdensity(x, image)`` is evaluated with ``image`` = A x kept up to date by the
    columns of ``image_basis`` = A ``basis``' (one O(n) update per evaluation). Each update moves x
    by t b_k with t drawn by slice sampling p(x + t b_k) in t, which leaves p invariant for any fixed
    direction b_k (a Gibbs update of the coordinate t).

    Returns
    -------
    x, image : Array
        The new point and its image.
    info : SliceInfo
        Density evaluations and stalled updates, summed over the directions.
    """

    def one(carry, inputs):
        x, image, lp = carry
        k, b, a = inputs
        along = lambda t: logdensity(x + t * b, image + t * a)  # noqa: E731
        t, lp, info = slice_1d(k, along, jnp.zeros((), x.dtype), lp, jnp.asarray(width, x.dtype), max_steps)
        return (x + t * b, image + t * a, lp), info

    keys = jax.random.split(key, basis.shape[0])
    (x, image, _), info = lax.scan(one, (x, image, logdensity(x, image)), (keys, basis, image_basis.T))
    return x, image, SliceInfo(*(jnp.sum(v) for v in info))
