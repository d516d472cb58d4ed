"""Fixed-point loops that know no model: EM / ECM and coordinate-ascent VB (CAVI) with SQUAREM.

Each loop runs a model's update ``step`` under ``lax.while_loop`` until the relative change of its
objective (a log posterior or an evidence lower bound) falls below ``tol``, and returns the objective
trace, so that tests can check that it never decreases. The loops are resumable
(:func:`~bayes_maxmargin.engine.resumable.while_loop`): a fit with a checkpoint runs them in chunks."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from bayes_maxmargin.core.progress import loop_start, tick
from bayes_maxmargin.engine import resumable

__all__ = ["VBResult", "cavi_loop", "ecm_loop", "squarem_cycle"]


def ecm_loop(step, objective, x0: Any, gamma0: Array, aux0: Any, tol: Array, max_iter: int):
    """The EM / ECM iteration every model shares, as one ``lax.while_loop``.

    Repeats ``(x, gamma, aux) = step(x, gamma)`` until the relative change of ``objective(x, gamma)``
    is at most ``tol`` (``|o_t - o_{t-1}|`` <= tol max(``|o_t|``, 1)) or ``max_iter`` iterations ran.

    Returns
    -------
    x, gamma, aux
        The last iterate (``aux``: what the last step returned besides x and gamma).
    trace : Array, shape (max_iter + 1,)
        The objective at the start and after every iteration, NaN after the stop.
    n_iter : Array
        Iterations run.
    """
    dtype = jnp.asarray(gamma0).dtype
    tol = jnp.asarray(tol, dtype)
    trace = jnp.full((max_iter + 1,), jnp.nan, dtype).at[0].set(objective(x0, gamma0))

    def cond_fn(carry):
        *_, i, delta = carry
        return (i < max_iter) & (delta > tol)

    def body(carry):
        x, gamma, _, trace, i, _ = carry
        tick(i)
        x, gamma, aux = step(x, gamma)
        obj = objective(x, gamma)
        delta = jnp.abs(obj - trace[i]) / jnp.maximum(jnp.abs(obj), 1.0)
        return x, gamma, aux, trace.at[i + 1].set(obj), i + 1, delta

    init = (x0, gamma0, aux0, trace, jnp.asarray(0), jnp.asarray(jnp.inf, dtype))
    loop_start()
    x, gamma, aux, trace, n_iter, _ = resumable.while_loop(cond_fn, body, init)
    return x, gamma, aux, trace, n_iter


class VBResult(NamedTuple):
    """Output of the VB algorithms.

    Attributes
    ----------
    state : NamedTuple
        The variational parameters after the last sweep.
    lower_bound : Array, shape (max_iter,)
        log p(y; q) after every iteration (entry k after iteration k + 1); NaN after the stop.
    n_iter : Array
        Iterations run (the valid entries are ``lower_bound[:n_iter]``): sweeps, or SQUAREM
        cycles of three sweeps each with ``accelerate=True``.
    """

    state: Any
    lower_bound: Array
    n_iter: Array


#: Maps between a positive / probability / real field of a VB state and the real line, for
#: SQUAREM's extrapolation (:func:`cavi_loop`).
_TO_REAL = {
    "log": jnp.log,
    "logit": lambda p: jnp.log(p) - jnp.log1p(-p),
    "linear": lambda x: x,
}
_FROM_REAL = {"log": jnp.exp, "logit": jax.nn.sigmoid, "linear": lambda x: x}


def _clip_probability(x: Array) -> Array:
    eps = jnp.finfo(x.dtype).eps
    return jnp.clip(x, jnp.finfo(x.dtype).tiny, 1.0 - eps)


def squarem_cycle(step, bound, extrapolate: dict[str, str], state: Any) -> tuple[Any, Array]:
    """One safeguarded SQUAREM cycle (Varadhan & Roland 2008, scheme S3) of the sweep ``step``.

    From s0, two sweeps give s1, s2; with r = u(s1) - u(s0), v = u(s2) - 2 u(s1) + u(s0) in the
    unconstrained coordinates u of the fields named in ``extrapolate`` (``"log"`` for positive,
    ``"logit"`` for probabilities, ``"linear"``), alpha = min(-||r|| / ||v||, -1) and the
    extrapolated point u(s0) - 2 alpha r + alpha^2 v (the other fields from s2) is followed by one
    sweep, s3. s3 is kept if its lower bound is at least that of s2, else s2: every returned state
    is the output of a sweep (so its closed-form bound holds) and the bound never decreases.
    """
    s1 = step(state)
    s2 = step(s1)

    def unconstrained(s):
        return {k: _TO_REAL[t](_clip_probability(getattr(s, k)) if t == "logit" else getattr(s, k))
                for k, t in extrapolate.items()}

    u0, u1, u2 = unconstrained(state), unconstrained(s1), unconstrained(s2)
    r = {k: u1[k] - u0[k] for k in u0}
    v = {k: u2[k] - 2.0 * u1[k] + u0[k] for k in u0}
    norm_r = jnp.sqrt(sum(jnp.sum(x**2) for x in r.values()))
    norm_v = jnp.sqrt(sum(jnp.sum(x**2) for x in v.values()))
    dtype = norm_r.dtype
    alpha = jnp.minimum(-norm_r / jnp.maximum(norm_v, jnp.finfo(dtype).tiny), -1.0)
    jumped = s2._replace(**{
        k: _FROM_REAL[t](u0[k] - 2.0 * alpha * r[k] + alpha**2 * v[k]) for k, t in extrapolate.items()
    })
    s3 = step(jumped)
    b2, b3 = bound(s2), bound(s3)
    keep = jnp.isfinite(b3) & (b3 >= b2)
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), s3, s2)
    return new, jnp.where(keep, b3, b2)


def cavi_loop(step, bound, state0: Any, tol: Array, max_iter: int,
              extrapolate: dict[str, str] | None = None) -> VBResult:
    """Coordinate ascent as one ``lax.while_loop``: ``state = step(state)`` while the lower bound
    increases by at least ``tol`` ("while the increase in log p(y; q) is significant", Algorithms
    1-4; the paper stops below 1e-10, Sec. 4), at most ``max_iter`` iterations.

    With ``extrapolate`` (field name -> ``"log"`` / ``"logit"`` / ``"linear"``), each iteration is
    a :func:`squarem_cycle` of three sweeps instead of one sweep: the same fixed points, the same
    monotone bound and stopping rule, far fewer sweeps where plain coordinate ascent crawls.

    The first sweep runs before the first evaluation: the closed-form bounds hold only after a
    sweep (see the module docstring).
    """
    if extrapolate is None:
        def advance(s):
            s = step(s)
            return s, bound(s)
    else:
        advance = partial(squarem_cycle, step, bound, extrapolate)

    state = step(state0)
    b0 = bound(state)
    dtype = b0.dtype
    trace = jnp.full((max_iter,), jnp.nan, dtype).at[0].set(b0)

    def cond_fn(carry):
        _, _, i, increase = carry
        return (i < max_iter) & (increase >= tol)

    def body(carry):
        state, trace, i, _ = carry
        tick(i)
        state, b = advance(state)
        return state, trace.at[i].set(b), i + 1, b - trace[i - 1]

    init = (state, trace, jnp.asarray(1), jnp.asarray(jnp.inf, dtype))
    loop_start()
    state, trace, n_iter, _ = resumable.while_loop(cond_fn, body, init)
    return VBResult(state, trace, n_iter)
