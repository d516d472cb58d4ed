"""The exact MAP of a hinge-loss model that is linear in its weights: a primal-dual interior-point
method with an active-set crossover, stopped by the duality gap.

With f = Phi w, labels y, z_i = y_i phi_i and A = diag(prec) (prec >= 0; 0 for a flat prior), the
problem is the linear SVM

    min_w  P(w) = 1/2 w'Aw + C sum_i max(u_i, 0),    u = 1 - Z w,

whose dual is max_a 1'a - 1/2 a'Z A^-1 Z'a over the box 0 <= a <= C (and Z_j'a = 0 for every flat
weight j). Polson & Scott's (2011) EM converges to this point only sublinearly near the hinge (a point
on the margin needs E[1/lambda] = 1 / ``|u|`` -> infinity); here it is reached in a few dozen Newton steps:

* interior point (Mehrotra's predictor-corrector on the QP min 1/2 w'Aw + C 1'xi, Zw + xi >= 1,
  xi >= 0, with multipliers a, nu = C - a and slack s): each step solves one p x p system
  A + Z' D Z (D diagonal > 0), the cost of one EM M-step, or its n x n Woodbury form for p > n
  (Ferris & Munson 2002, Sec. 3);
* crossover: from the multipliers, every point is put in R (a = 0, u <= 0), E (a = C, u >= 0) or M
  (on the margin, u = 0); the KKT equations A w = Z'a, z_i'w = 1 (i in M) are then one linear solve,
  whose solution is the exact MAP when the partition is right;
* stop: :func:`duality_gap`, an upper bound on P(w) - min P, at most ``tol`` max(P(w), 1) (plus its
  rounding error, :func:`gap_rounding`), at the crossover point (then exact up to rounding) or at the
  interior-point iterate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array, lax
from jax.scipy.linalg import cho_solve

from bayes_maxmargin.core.progress import loop_start, tick
from bayes_maxmargin.engine import resumable

__all__ = ["HingeQPResult", "IPMState", "crossover", "duality_gap", "gap_rounding", "hinge_qp", "hinge_qp_objective",
           "ipm_step"]

#: Fraction of the step to the boundary that an interior-point step takes.
STEP_FRACTION = 0.99


class IPMState(NamedTuple):
    """Iterate of the interior-point method: weights w (p,), multipliers a of Zw + xi - s = 1 and nu
    of xi >= 0 (a + nu = C), slacks s (n,) and hinge variables xi (n,), all but w positive."""

    w: Array
    a: Array
    nu: Array
    s: Array
    xi: Array


class HingeQPResult(NamedTuple):
    """Output of :func:`hinge_qp`.

    Attributes
    ----------
    w : Array
        The solution (the crossover point where it met the tolerance, else the last iterate).
    a : Array
        Its dual variables in [0, C].
    gap : Array
        :func:`duality_gap` of (w, a).
    converged : Array
        Whether gap <= tol max(P(w), 1) + :func:`gap_rounding`.
    trace : Array, shape (max_iter + 1,)
        ``objective(w)`` at the start and after every step; NaN after the stop.
    n_iter : Array
        Interior-point steps run.
    """

    w: Array
    a: Array
    gap: Array
    converged: Array
    trace: Array
    n_iter: Array


def hinge_qp_objective(z: Array, prec: Array, c: Array, w: Array) -> Array:
    """P(w) = 1/2 w' diag(prec) w + c sum_i max(1 - z_i'w, 0)."""
    return 0.5 * jnp.sum(prec * w**2) + c * jnp.sum(jnp.maximum(1.0 - z @ w, 0.0))


def duality_gap(z: Array, prec: Array, c: Array, w: Array, a: Array) -> Array:
    """Upper bound on P(w) - min P from the multipliers ``a`` (clipped to [0, c]).

    With r = A w - Z'a and u = 1 - Z w, P(w) - D(a) = sum_i (c max(u_i, 0) - a_i u_i) + 1/2 sum_j
    r_j^2 / prec_j: the first sum is the complementarity of each point (>= 0 on the box), the second
    the stationarity residual. A zero prior precision (a flat intercept) makes D(a) finite only for
    r_j = 0; there the first-order term ``|w_j r_j|`` stands in (exact when r_j = 0).
    """
    a = jnp.clip(a, 0.0, c)
    u = 1.0 - z @ w
    r = prec * w - z.T @ a
    proper = prec > 0
    stationarity = jnp.where(proper, 0.5 * r**2 / jnp.where(proper, prec, 1.0), jnp.abs(w * r))
    return jnp.sum(c * jnp.maximum(u, 0.0) - a * u) + jnp.sum(stationarity)


def _max_step(v: Array, dv: Array) -> Array:
    """Largest t <= 1 with v + t dv >= 0."""
    return jnp.minimum(1.0, jnp.min(jnp.where(dv < 0, -v / jnp.where(dv < 0, dv, -1.0), jnp.inf)))


def _newton_solver(z: Array, prec: Array, dinv: Array, gram_z: Array | None) -> Callable[[Array], Array]:
    """v -> (A + Z' diag(1 / dinv) Z)^-1 v: a p x p Cholesky, or with ``gram_z`` = Z A^-1 Z' (all
    prec > 0) the Woodbury form A^-1 v - A^-1 Z' (diag(dinv) + Z A^-1 Z')^-1 Z A^-1 v (n x n)."""
    if gram_z is None:
        chol = jnp.linalg.cholesky(jnp.diag(prec) + z.T @ (z / dinv[:, None]))
        return lambda v: cho_solve((chol, True), v)
    chol = jnp.linalg.cholesky(gram_z + jnp.diag(dinv))
    return lambda v: v / prec - (z.T @ cho_solve((chol, True), z @ (v / prec))) / prec


def ipm_step(state: IPMState, z: Array, prec: Array, c: Array, gram_z: Array | None = None) -> IPMState:
    """One Mehrotra predictor-corrector step of the primal-dual interior-point method.

    Residuals r1 = A w - Z'a, r3 = Z w + xi - s - 1; the complementarity pairs a s and nu xi are
    driven to sigma mu (mu their mean, sigma = (mu_aff / mu)^3 from the affine predictor, Mehrotra
    1992). Eliminating s, xi and a leaves (A + Z' D Z) dw = -r1 + Z' D (g - r3), D = diag(1 / (xi / nu
    + s / a)). The step is ``STEP_FRACTION`` of the step to the boundary of the positive variables.
    """
    w, a, nu, s, xi = state
    n = a.shape[-1]
    r1 = prec * w - z.T @ a
    r3 = z @ w + xi - s - 1.0
    mu = (a @ s + nu @ xi) / (2 * n)
    dinv = xi / nu + s / a
    solve = _newton_solver(z, prec, dinv, gram_z)

    def direction(ca, cn):
        g = ca / a - cn / nu
        dw = solve(-r1 + z.T @ ((g - r3) / dinv))
        da = (-r3 - z @ dw + g) / dinv
        return dw, da, (ca - s * da) / a, (cn + xi * da) / nu

    def step_length(da, ds, dxi):
        return jnp.minimum(jnp.minimum(_max_step(a, da), _max_step(nu, -da)),
                           jnp.minimum(_max_step(s, ds), _max_step(xi, dxi)))

    _, da, ds, dxi = direction(-a * s, -nu * xi)  # affine predictor
    t = step_length(da, ds, dxi)
    mu_aff = ((a + t * da) @ (s + t * ds) + (nu - t * da) @ (xi + t * dxi)) / (2 * n)
    target = (mu_aff / mu) ** 3 * mu
    dw, da2, ds2, dxi2 = direction(target - a * s - da * ds, target - nu * xi + da * dxi)  # corrector
    t = STEP_FRACTION * step_length(da2, ds2, dxi2)
    return IPMState(w + t * dw, a + t * da2, nu - t * da2, s + t * ds2, xi + t * dxi2)


def _partition(state: IPMState, c: Array) -> tuple[Array, Array]:
    """(E, M): points whose multiplier is at its upper bound C, and points on the margin; the rest
    (R) have a = 0. A point is in R when a < C s (its slack dominates), in E when nu < C xi."""
    rest = state.a < c * state.s
    upper = ~rest & (state.nu < c * state.xi)
    return upper, ~(rest | upper)


def crossover(state: IPMState, z: Array, prec: Array, c: Array, gram_z: Array | None = None) -> tuple[Array, Array]:
    """The exact KKT point of the partition of :func:`_partition`: a = C on E, 0 on R, and on M the
    values that put every M point on the margin, with A w = Z'a.

    p x p form: the system [[A, -Z_M'], [Z_M, 0]] [w; a_M] = [C Z_E'1; 1] over at most p margin
    points (more: no candidate, NaN); it allows a flat weight. With ``gram_z`` = Z A^-1 Z' (every
    prec > 0) the n x n dual form (Z A^-1 Z')_MM a_M = 1 - C (Z A^-1 Z')_ME 1, w = A^-1 Z'a. A wrong
    partition gives a point whose :func:`duality_gap` is large (or NaN when the system is singular).
    """
    upper, margin = _partition(state, c)
    a_fixed = jnp.where(upper, c, 0.0)
    n, p = z.shape
    if gram_z is not None:
        mask = margin.astype(z.dtype)
        lhs = gram_z * jnp.outer(mask, mask) + jnp.diag(1.0 - mask)
        a_m = jnp.linalg.solve(lhs, mask * (1.0 - gram_z @ a_fixed))
        a = jnp.where(margin, a_m, a_fixed)
        return (z.T @ a) / prec, a
    slots = min(n, p)
    idx = lax.top_k(margin.astype(z.dtype), slots)[1]
    valid = margin[idx]
    zm = z[idx] * valid[:, None].astype(z.dtype)
    lhs = jnp.block([[jnp.diag(prec), -zm.T], [zm, jnp.diag(1.0 - valid.astype(z.dtype))]])
    sol = jnp.linalg.solve(lhs, jnp.concatenate([z.T @ a_fixed, valid.astype(z.dtype)]))
    a = a_fixed.at[idx].set(jnp.where(valid, sol[p:], a_fixed[idx]))
    fits = jnp.sum(margin) <= slots
    return jnp.where(fits, sol[:p], jnp.nan), a


def _start(z: Array, c: Array) -> IPMState:
    n, p = z.shape
    ones = jnp.ones((n,), z.dtype)
    return IPMState(jnp.zeros((p,), z.dtype), 0.5 * c * ones, 0.5 * c * ones, ones, ones)


def gap_rounding(z: Array, c: Array, w: Array, a: Array) -> Array:
    """Rounding error of :func:`duality_gap` at (w, a): 4 eps (c sum ``|u_i|`` + sum_i a_i ``|z_i|'|w|``), the
    size of the terms whose cancellation it measures (negligible in float64, about 1e-6 of P in float32)."""
    eps = jnp.finfo(z.dtype).eps
    return 4.0 * eps * (c * jnp.sum(jnp.abs(1.0 - z @ w)) + jnp.clip(a, 0.0, c) @ (jnp.abs(z) @ jnp.abs(w)))


def hinge_qp(z: Array, prec: Array, c: Array, tol: Array, max_iter: int,
             objective: Callable[[Array], Array], gram_z: Array | None = None) -> HingeQPResult:
    """Solve min_w P(w) (module docstring) as one ``lax.while_loop`` of :func:`ipm_step`.

    After every step the :func:`crossover` point and the iterate are candidates; the one with the
    smaller relative :func:`duality_gap` is kept when it beats the best so far. The loop stops when the
    best has gap <= ``tol`` max(P(w), 1) + :func:`gap_rounding` (converged), when the steps can no
    longer make progress (the mean complementarity mu is below eps C, or a step is not finite: the
    iterate is kept), or after ``max_iter`` steps. The start is w = 0, a = nu = C / 2, s = xi = 1
    (infeasible; the method needs no feasible start).

    Parameters
    ----------
    z : Array, shape (n, p)
        Rows y_i phi_i.
    prec : Array, shape (p,)
        Prior precisions (>= 0).
    c : Array
        C > 0.
    tol : Array
        Relative tolerance on the duality gap.
    max_iter : int
        Most interior-point steps.
    objective : callable
        w -> the quantity recorded in the trace (the model's log posterior).
    gram_z : Array, shape (n, n), optional
        Z A^-1 Z' for the n-dimensional forms (every prec > 0).
    """
    dtype = z.dtype
    tol = jnp.asarray(tol, dtype)
    eps = jnp.finfo(dtype).eps
    state = _start(z, c)
    trace = jnp.full((max_iter + 1,), jnp.nan, dtype).at[0].set(objective(state.w))

    def assess(w, a):
        gap = duality_gap(z, prec, c, w, a)
        scale = jnp.maximum(hinge_qp_objective(z, prec, c, w), 1.0)
        rel = jnp.where(jnp.isfinite(gap), gap / scale, jnp.inf)
        return gap, rel, gap <= tol * scale + gap_rounding(z, c, w, a)

    def cond_fn(carry):
        *_, i, done = carry
        return (i < max_iter) & ~done

    def body(carry):
        state, best, trace, i, _ = carry
        tick(i)
        new = ipm_step(state, z, prec, c, gram_z)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in new]))
        state = jax.tree_util.tree_map(lambda x, y: jnp.where(finite, x, y), new, state)
        w_x, a_x = crossover(state, z, prec, c, gram_z)
        a_i = jnp.clip(state.a, 0.0, c)
        gap_x, rel_x, ok_x = assess(w_x, a_x)
        gap_i, rel_i, ok_i = assess(state.w, a_i)
        use_x = ok_x | (rel_x < rel_i)
        cand = (jnp.where(use_x, w_x, state.w), jnp.where(use_x, jnp.clip(a_x, 0.0, c), a_i),
                jnp.where(use_x, gap_x, gap_i), jnp.where(use_x, rel_x, rel_i), jnp.where(use_x, ok_x, ok_i))
        better = cand[4] | (cand[3] < best[3])
        best = jax.tree_util.tree_map(lambda x, y: jnp.where(better, x, y), cand, best)
        mu = (state.a @ state.s + state.nu @ state.xi) / (2 * z.shape[0])
        stalled = ~finite | (mu <= eps * c)
        return state, best, trace.at[i + 1].set(objective(best[0])), i + 1, best[4] | stalled

    inf = jnp.asarray(jnp.inf, dtype)
    best = (state.w, jnp.clip(state.a, 0.0, c), inf, inf, jnp.asarray(False))
    init = (state, best, trace, jnp.asarray(0), jnp.asarray(False))
    loop_start()
    _, (w, a, gap, _, converged), trace, n_iter, _ = resumable.while_loop(cond_fn, body, init)
    return HingeQPResult(w, a, gap, converged, trace, n_iter)
