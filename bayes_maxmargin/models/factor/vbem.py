"""Variational Bayes EM for the discriminative factor models (Henao et al. 2014, Sec. 5; supplement Sec. 1).

E-step: coordinate ascent on q(A) prod_k q(Phi_k) q(psi) q(f) q(lambda) q(gamma) (gamma0 = 0, the
hinge, as the paper sets for VB-EM); M-step: the factor scores W and the kernel parameters theta
maximise the bound by L-BFGS (Optax). The bound tracked, F, is the evidence lower bound with q(f)
at its optimum given everything else (so F is the bound "with f marginalised" that the M-step of
the supplement maximises)::

    F = E[log p(X | A, W, psi)] - KL(q(psi) || p(psi)) + H[q(A)]
        + sum_ik { log(sqrt(nu) / 2) - sqrt(nu m0_ik) + (m0_ik - <a_ik^2>) sqrt(nu / m0_ik) / 2 }
        + log N(W | 0, I)
        + log N(t | 0, K(W) + D) + sum_n { log(2 pi D_n) / 2 + <gamma> / (2 c_n) }
        + sum_n { <log gamma> / 2 + (g0 - <gamma>) <lambda_n> / 2 + b0_n c_n / 2 - sqrt(g0 b0_n) - log(g0) / 2 }
        - KL(q(gamma) || p(gamma)),

with c_n = <1 / lambda_n>, D = diag(1 / (<gamma> c)), t = Y (1 + 1 / c), q(phi_ik) proportional to
phi^-1/2 exp(-(nu phi + m0_ik / phi) / 2) (1 / phi ~ IG(sqrt(nu / m0_ik), nu), set at m0 = <a^2>)
and q(lambda_n) proportional to lambda^-1/2 exp(-(g0 lambda + b0_n / lambda) / 2) (1 / lambda ~
IG(sqrt(g0 / b0_n), g0), set at g0 = <gamma>, b0_n = <gamma> chi_n, chi_n = <(1 - y_n f_n)^2>).
The phi and lambda terms are E[log p] - E[log q] in closed form (the terms in log phi and log
lambda cancel). Every E-step update is the supplement's:

    q(a_i) = N(P_i^-1 <psi> W' x_(i), P_i^-1), P_i = diag(<1/phi_i>) + <psi> W'W   (rows of A jointly),
    q(1/phi_ik) = IG(sqrt(nu / <a_ik^2>), nu),
    q(psi) = Ga(a_psi + n d / 2, b_psi + <||X - W A'||^2> / 2),
    q(f) = N(<gamma> S Y (1 + c), S),  S = (K^-1 + <gamma> diag(c))^-1,
    q(1/lambda_n) = IG(chi_n^-1/2, <gamma>),
    q(gamma) = Ga(a0 + n / 2, b0 + sum_n c_n chi_n / 2 + <u_n> + <lambda_n> / 2),

and each maximises F over its factor with the others fixed, so F never decreases (tested); the
M-step keeps the L-BFGS iterate only when it increases F. The W-part of F is the supplement's
L(W) with U = K + D (the mean-field noise 1 / (<gamma> <1/lambda>)) and its gradient is the
supplement's dL/dW (:func:`mstep_grad_w_se`, checked against autodiff).

The linear classifier (VLDFM) is the same algorithm with the kernel k(w, w') = w'w + s^2 (f = beta'w
+ b with beta ~ N(0, I), b ~ N(0, s^2) integrated out).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import Array
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import digamma, gammaln

from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.core.linalg import LOG_2PI
from bayes_maxmargin.core.parameters import from_unconstrained, hold_fixed
from bayes_maxmargin.engine import resumable

__all__ = ["VBState", "e_step", "factor_bound", "init_vb", "m_step", "mstep_bound", "mstep_grad_w_se",
           "predict_f", "q_f", "run_vbem", "vbem_loop"]


class VBState(NamedTuple):
    """Variational parameters and point estimates.

    Attributes
    ----------
    mA : (d, K) means of q(A);  SA : (d, K, K) row covariances of q(A);
    m0 : (d, K) the <a^2> at which q(phi) was set;  psi_a, psi_b : q(psi) shape and rate;
    W : (n, K) factor scores (M-step);  theta : dict of unconstrained kernel parameters (M-step);
    c : (n,) <1/lambda>;  g0 : <gamma> when q(lambda) was set;  b0 : (n,) its b parameters;
    gam_a, gam_b : q(gamma) shape and rate.
    """

    mA: Array
    SA: Array
    m0: Array
    psi_a: Array
    psi_b: Array
    W: Array
    theta: Any
    c: Array
    g0: Array
    b0: Array
    gam_a: Array
    gam_b: Array


class VBHyper(NamedTuple):
    nu: float
    a_psi: float
    b_psi: float
    a0: float
    b0: float


def _kl_gamma(a, b, a0, b0):
    """KL(Ga(a, b) || Ga(a0, b0)) (shape, rate)."""
    return (a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (jnp.log(b) - jnp.log(b0)) + a * (b0 - b) / b


def _gram(kernel_fn, theta_raw, like, W):
    params = from_unconstrained(theta_raw, like) if like is not None else None
    n = W.shape[0]
    return kernel_fn(params, W, W) + 1e-6 * jnp.eye(n, dtype=W.dtype)


def _expected_residual(X, W, mA, SA):
    """<||X - W A'||^2> under q(A) = prod_j N(mA_j, SA_j): ||X - W <A>'||^2 + tr(sum_j SA_j W'W).

    The sum of squares of the mean residual, not ||X||^2 - 2 tr(X' <A> W') + tr(<A'A> W'W): that
    difference of large terms cancels catastrophically (even to a negative value) when a column of X
    is many orders of magnitude larger than the residual.
    """
    return jnp.sum((X - W @ mA.T) ** 2) + jnp.sum(jnp.sum(SA, 0) * (W.T @ W))


def _factor_w_terms(W, mA, SA, X, Epsi):
    """W-dependent factor-model terms: -<psi> <||X - W A'||^2> / 2 - ||W||^2 / 2."""
    return -0.5 * Epsi * _expected_residual(X, W, mA, SA) - 0.5 * jnp.sum(W**2)


def _collapsed(K, y, c, gbar):
    """log N(t | 0, K + D) + sum_n [log(2 pi D_n) / 2 + <gamma> / (2 c_n)], D = 1 / (<gamma> c).

    Via s = sqrt(<gamma> c) = D^-1/2 and the Cholesky factor of I + diag(s) K diag(s).
    """
    n = y.shape[0]
    s = jnp.sqrt(gbar * c)
    t = y * (1.0 + 1.0 / c)
    L = jnp.linalg.cholesky(jnp.eye(n, dtype=K.dtype) + s[:, None] * K * s[None, :])
    v = solve_triangular(L, s * t, lower=True)
    # log|K + D| = log|I + sKs| - sum log s^2
    log_n = -0.5 * jnp.sum(v**2) - jnp.sum(jnp.log(jnp.diag(L))) + jnp.sum(jnp.log(s)) - 0.5 * n * LOG_2PI
    return log_n + jnp.sum(0.5 * (LOG_2PI - jnp.log(gbar * c)) + gbar / (2.0 * c))


def mstep_bound(W, theta_raw, state: VBState, X, y, kernel_fn, like, hyper: VBHyper):
    """The W- and theta-dependent part of F (the supplement's L(W) with the correct U = K + D)."""
    Epsi = state.psi_a / state.psi_b
    gbar = state.gam_a / state.gam_b
    K = _gram(kernel_fn, theta_raw, like, W)
    return _factor_w_terms(W, state.mA, state.SA, X, Epsi) + _collapsed(K, y, state.c, gbar)


def mstep_grad_w_se(W, lengthscale, amplitude, state: VBState, X, y):
    """Analytic dL/dW of the supplement for the SE kernel k = a exp(-||w - w'||^2 / theta^2):

    <psi> (X - W <A>') <A> - <psi> W sum_j S_Aj - W + sum_j 2 G_nj dK_nj / dw_n,  G = (alpha alpha' - U^-1) / 2,

    alpha = U^-1 t, U = K + D; with M = G o K, row n of the last term is
    -4 / theta^2 (sum_j M_nj w_n - sum_j M_nj w_j). (U^-1 comes from its Cholesky factor; the
    gradient of log|U| needs it.)
    """
    Epsi = state.psi_a / state.psi_b
    gbar = state.gam_a / state.gam_b
    n = W.shape[0]
    sq = jnp.sum(W**2, 1)
    K = amplitude * jnp.exp(-(sq[:, None] + sq[None, :] - 2 * W @ W.T) / lengthscale**2)
    U = K + 1e-6 * jnp.eye(n, dtype=W.dtype) + jnp.diag(1.0 / (gbar * state.c))
    t = y * (1.0 + 1.0 / state.c)
    L = jnp.linalg.cholesky(U)
    alpha = cho_solve((L, True), t)
    U_inv = cho_solve((L, True), jnp.eye(n, dtype=W.dtype))
    G = 0.5 * (jnp.outer(alpha, alpha) - U_inv)
    M = G * K
    kernel_part = -4.0 / lengthscale**2 * (jnp.sum(M, 1)[:, None] * W - M @ W)
    resid = X - W @ state.mA.T
    return Epsi * (resid @ state.mA - W @ jnp.sum(state.SA, 0)) - W + kernel_part


def factor_bound(state: VBState, X, y, kernel_fn, like, hyper: VBHyper) -> Array:
    """The full bound F (module docstring), with q(f) at its optimum."""
    n, d = X.shape
    mA, SA = state.mA, state.SA
    Epsi = state.psi_a / state.psi_b
    Elogpsi = digamma(state.psi_a) - jnp.log(state.psi_b)
    W = state.W
    R = _expected_residual(X, W, mA, SA)
    lik_x = 0.5 * n * d * (Elogpsi - LOG_2PI) - 0.5 * Epsi * R
    kl_psi = _kl_gamma(state.psi_a, state.psi_b, hyper.a_psi, hyper.b_psi)
    K = mA.shape[1]
    _, logdets = jnp.linalg.slogdet(SA)
    h_a = 0.5 * jnp.sum(logdets) + 0.5 * d * K * (1.0 + LOG_2PI)
    a2 = mA**2 + jnp.diagonal(SA, axis1=1, axis2=2)
    nu = hyper.nu
    phi_terms = jnp.sum(jnp.log(jnp.sqrt(nu) / 2) - jnp.sqrt(nu * state.m0)
                        + 0.5 * (state.m0 - a2) * jnp.sqrt(nu / state.m0))
    log_pw = -0.5 * jnp.sum(W**2) - 0.5 * n * K * LOG_2PI
    gbar = state.gam_a / state.gam_b
    Eloggam = digamma(state.gam_a) - jnp.log(state.gam_b)
    Kmat = _gram(kernel_fn, state.theta, like, W)
    coll = _collapsed(Kmat, y, state.c, gbar)
    E_lam = jnp.sqrt(state.b0 / state.g0) + 1.0 / state.g0
    lam_terms = jnp.sum(0.5 * Eloggam + 0.5 * (state.g0 - gbar) * E_lam + 0.5 * state.b0 * state.c
                        - jnp.sqrt(state.g0 * state.b0) - 0.5 * jnp.log(state.g0))
    kl_gam = _kl_gamma(state.gam_a, state.gam_b, hyper.a0, hyper.b0)
    return lik_x - kl_psi + h_a + phi_terms + log_pw + coll + lam_terms - kl_gam


def q_f(K, y, c, gbar) -> tuple[Array, Array]:
    """Mean and marginal variances of q(f) = N(<gamma> S Y (1 + c), S): GP regression of t = Y (1 +
    1 / c) with noise D = 1 / (<gamma> c): m = K (K + D)^-1 t, S = K - K (K + D)^-1 K."""
    n = y.shape[0]
    s = jnp.sqrt(gbar * c)
    t = y * (1.0 + 1.0 / c)
    L = jnp.linalg.cholesky(jnp.eye(n, dtype=K.dtype) + s[:, None] * K * s[None, :])
    alpha = s * cho_solve((L, True), s * t)
    V = solve_triangular(L, s[:, None] * K, lower=True)
    return K @ alpha, jnp.diag(K) - jnp.sum(V**2, 0)


def e_step(state: VBState, X, y, kernel_fn, like, hyper: VBHyper) -> VBState:
    """One sweep of the E-step updates (supplement, Sec. 1), in the order A, Phi, psi, lambda, gamma
    (q(f) re-optimised implicitly wherever it is used)."""
    n, d = X.shape
    W = state.W
    Epsi = state.psi_a / state.psi_b
    inv_phi = jnp.sqrt(hyper.nu / state.m0)
    gram = Epsi * (W.T @ W)
    rhs = Epsi * (X.T @ W)

    def row(ip, r):
        L = jnp.linalg.cholesky(gram + jnp.diag(ip))
        S = cho_solve((L, True), jnp.eye(W.shape[1], dtype=W.dtype))
        return S @ r, S

    mA, SA = jax.vmap(row)(inv_phi, rhs)
    a2 = mA**2 + jnp.diagonal(SA, axis1=1, axis2=2)
    m0 = jnp.maximum(a2, jnp.finfo(a2.dtype).tiny ** 0.5)
    R = _expected_residual(X, W, mA, SA)
    psi_a = hyper.a_psi + 0.5 * n * d
    psi_b = hyper.b_psi + 0.5 * R
    K = _gram(kernel_fn, state.theta, like, W)
    gbar = state.gam_a / state.gam_b
    m, v = q_f(K, y, state.c, gbar)
    chi = jnp.maximum((1.0 - y * m) ** 2 + v, jnp.finfo(m.dtype).eps)
    c = 1.0 / jnp.sqrt(chi)
    g0 = gbar
    b0 = gbar * chi
    m, v = q_f(K, y, c, gbar)
    chi = (1.0 - y * m) ** 2 + v
    E_lam = jnp.sqrt(b0 / g0) + 1.0 / g0
    gam_a = hyper.a0 + 0.5 * n
    gam_b = hyper.b0 + jnp.sum(0.5 * c * chi + (1.0 - y * m) + 0.5 * E_lam)
    return state._replace(mA=mA, SA=SA, m0=m0, psi_a=psi_a, psi_b=psi_b, c=c, g0=g0, b0=b0,
                          gam_a=gam_a, gam_b=gam_b)


def m_step(state: VBState, X, y, kernel_fn, like, hyper: VBHyper, n_steps: int, learn: tuple = ()) -> VBState:
    """L-BFGS (``optax.lbfgs``, zoom line search) on the W- and theta-part of F; the result is kept
    only if it increases F. ``learn`` names the kernel parameters optimised (the others held; the
    paper's SE kernel has no amplitude, gamma being the trade-off, so the default learns only the
    lengthscale)."""

    def neg(params):
        W, th = params
        return -mstep_bound(W, hold_fixed(th, learn), state, X, y, kernel_fn, like, hyper)

    opt = optax.lbfgs()
    params = (state.W, state.theta)
    vg = optax.value_and_grad_from_state(neg)

    def body(carry, _):
        params, opt_state = carry
        value, grad = vg(params, state=opt_state)
        updates, opt_state = opt.update(grad, opt_state, params, value=value, grad=grad, value_fn=neg)
        return (optax.apply_updates(params, updates), opt_state), None

    (new, _), _ = jax.lax.scan(body, (params, opt.init(params)), None, length=n_steps)
    f_old, f_new = neg(params), neg(new)
    better = jnp.isfinite(f_new) & (f_new < f_old)
    W = jnp.where(better, new[0], state.W)
    theta = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), new[1], state.theta)
    return state._replace(W=W, theta=theta)


def init_vb(X, y, n_factors: int, theta_raw, hyper: VBHyper, gamma: float = 1.0) -> VBState:
    """Start from the principal components (as the Gibbs sampler), q(f) from f = 0."""
    n, d = X.shape
    U, S, Vt = jnp.linalg.svd(X, full_matrices=False)
    W = jnp.sqrt(n) * U[:, :n_factors]
    mA = Vt[:n_factors].T * S[:n_factors] / jnp.sqrt(n)
    resid = X - W @ mA.T
    psi = 1.0 / jnp.maximum(jnp.mean(resid**2), 1e-6)
    SA = jnp.broadcast_to(jnp.eye(n_factors, dtype=X.dtype) * 1e-3, (d, n_factors, n_factors))
    g = jnp.asarray(gamma, X.dtype)
    return VBState(mA, SA, jnp.maximum(mA**2, 1e-6), 1.0 + 0 * psi, 1.0 / psi, W, theta_raw,
                   jnp.ones(n, X.dtype), g, g * jnp.ones(n, X.dtype), g, jnp.asarray(1.0, X.dtype))


@functools.partial(jit, static_argnames=("kernel_fn", "m_steps", "learn", "track"))
def _vbem_iteration(state, X, y, like, hyper, *, kernel_fn, m_steps, learn, track):
    """One E-step and one M-step, the bound after each (compiled once per kernel and shapes)."""
    state = e_step(state, X, y, kernel_fn, like, hyper)
    fe = factor_bound(state, X, y, kernel_fn, like, hyper) if track else jnp.nan
    state = m_step(state, X, y, kernel_fn, like, hyper, m_steps, learn)
    fm = factor_bound(state, X, y, kernel_fn, like, hyper) if track else jnp.nan
    return state, jnp.stack([fe, fm])


@functools.partial(jit, static_argnames=("kernel_fn", "n_iter", "m_steps", "learn", "track"))
def vbem_loop(state, X, y, like, hyper, *, kernel_fn, n_iter, m_steps, learn, track):
    """The iterations of :func:`run_vbem` as one resumable loop
    (:func:`~bayes_maxmargin.engine.resumable.while_loop`), for a run with a checkpoint."""
    trace0 = jnp.full((n_iter, 2), jnp.nan, X.dtype)

    def body(carry):
        state, trace, i = carry
        state, f = _vbem_iteration(state, X, y, like, hyper, kernel_fn=kernel_fn, m_steps=m_steps, learn=learn,
                                   track=track)
        return state, trace.at[i].set(f.astype(X.dtype)), i + 1

    state, trace, _ = resumable.while_loop(lambda c: c[2] < n_iter, body, (state, trace0, jnp.asarray(0, jnp.int32)))
    return state, trace


def run_vbem(X, y, state: VBState, kernel_fn, like, hyper: VBHyper, *, n_iter: int = 30, m_steps: int = 10,
             learn: tuple = ("lengthscale", "lengthscales"), track: bool = True, checkpoint=None, resume=None):
    """Alternate E- and M-steps; returns the final state and the bound after every E and M step
    (shape (n_iter, 2)) when ``track``. ``like`` (the kernel parameter container that ``theta``
    unpacks into) and ``hyper`` are traced, so new values do not recompile. With ``checkpoint`` or
    ``resume`` (a folder) the iterations run as :func:`vbem_loop`, in chunks with a checkpoint after each
    (:func:`~bayes_maxmargin.engine.resumable.run_resumable`)."""
    X = jnp.asarray(X)
    y = jnp.asarray(y, X.dtype)
    hyper = VBHyper(*(jnp.asarray(v, X.dtype) for v in hyper))
    like = None if like is None else jax.tree_util.tree_map(lambda v: jnp.asarray(v, X.dtype), like)
    # strong-typed leaves: a weakly typed initial theta would compile the iteration a second time
    state = jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.asarray(v).dtype), state)
    if checkpoint is not None or resume is not None:
        return resumable.run_resumable(vbem_loop, state, X, y, like, hyper, kernel_fn=kernel_fn, n_iter=n_iter,
                                       m_steps=m_steps, learn=tuple(learn), track=track, checkpoint=checkpoint,
                                       resume=resume)
    trace = []
    for _ in range(n_iter):
        state, f = _vbem_iteration(state, X, y, like, hyper, kernel_fn=kernel_fn, m_steps=m_steps,
                                   learn=tuple(learn), track=track)
        trace.append(f)
    return state, jnp.stack(trace)


def run_vbem_batched(fn, per_class, kwargs):
    """K calls of :func:`run_vbem` with the same X (one-vs-rest problems differing in y and the
    starting state) as one loop of the class-``vmap``ped iteration (:mod:`bayes_maxmargin.estimators.multiclass`)."""
    X, _, _, kernel_fn, like, hyper = per_class[0]
    if any(a[3] != kernel_fn for a in per_class):
        return None
    n_iter = kwargs.get("n_iter", 30)
    static = dict(kernel_fn=kernel_fn, m_steps=kwargs.get("m_steps", 10),
                  learn=tuple(kwargs.get("learn", ("lengthscale", "lengthscales"))), track=kwargs.get("track", True))
    X = jnp.asarray(X)
    Y = jnp.stack([jnp.asarray(a[1], X.dtype) for a in per_class])
    state = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *(a[2] for a in per_class))
    hyper = VBHyper(*(jnp.asarray(v, X.dtype) for v in hyper))
    like = None if like is None else jax.tree_util.tree_map(lambda v: jnp.asarray(v, X.dtype), like)
    step = jax.vmap(functools.partial(_vbem_iteration, **static), in_axes=(0, None, 0, None, None))
    trace = []
    for _ in range(n_iter):
        state, f = step(state, X, Y, like, hyper)
        trace.append(f)
    trace = jnp.stack(trace, axis=1)
    return [(jax.tree_util.tree_map(lambda a, k=k: a[k], state), trace[k]) for k in range(len(per_class))]


def predict_f(state: VBState, X, y, Xnew_scores, kernel_fn, like) -> tuple[Array, Array]:
    """Predictive mean and variance of f at new scores: k_*'(K + D)^-1 t, k_** - k_*'(K + D)^-1 k_*."""
    params = from_unconstrained(state.theta, like) if like is not None else None
    W = state.W
    gbar = state.gam_a / state.gam_b
    K = _gram(kernel_fn, state.theta, like, W)
    n = W.shape[0]
    s = jnp.sqrt(gbar * state.c)
    t = y * (1.0 + 1.0 / state.c)
    L = jnp.linalg.cholesky(jnp.eye(n, dtype=K.dtype) + s[:, None] * K * s[None, :])
    alpha = s * cho_solve((L, True), s * t)
    Ks = kernel_fn(params, Xnew_scores, W)
    V = solve_triangular(L, (s[:, None] * Ks.T), lower=True)
    kss = jnp.diag(kernel_fn(params, Xnew_scores, Xnew_scores))
    return Ks @ alpha, jnp.maximum(kss - jnp.sum(V**2, 0), 0.0)
