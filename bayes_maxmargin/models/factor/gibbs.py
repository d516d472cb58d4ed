"""Gibbs kernels of the discriminative factor models (Henao et al. 2014, Sec. 5).

One sweep updates, in turn (each step an exact conditional draw of the augmented joint
``factor_bsvm(..., augmented=True)``, or a move that leaves that conditional invariant):

1. 1 / phi_ik | a_ik ~ IG(sqrt(nu / a_ik^2), nu)                           (supplement, Sec. 1);
2. a_i | W, psi, phi ~ N(P_i^-1 psi W' x_(i), P_i^-1), P_i = diag(1 / phi_i) + psi W'W, the rows
   of A as blocks (one K x K Cholesky per row; the paper's element-wise updates are the same
   conditional one coordinate at a time);
3. psi | A, W ~ Ga(a_psi + n d / 2, b_psi + ||X - W A'||^2 / 2);
4. the classifier and the factor scores:

   * ``"linear"`` (Polson & Scott 2011 within the factor model): 1 / lambda | f (eq. 7);
     [beta, b] | W, lambda, gamma Gaussian (:func:`~bayes_maxmargin.core.augmentation.gaussian_conditional`),
     then (max-margin link) slice moves of [beta, b] along each axis with lambda integrated out
     (:func:`~bayes_maxmargin.core.augmentation.marginal_moves`) and 1 / lambda | f afresh, a blocked update
     of ([beta, b], lambda): given lambda the margin points pin f_n, and the conditional draws alone move
     [beta, b] slowly;
     w_n | A, psi, beta, b, lambda, gamma ~ N, precision I + psi A'A + gamma beta beta' / lambda_n
     (all n at once: the w_n are conditionally independent), then the scale of each factor moved with
     W A' and f fixed (:func:`rescale_factors`); 1 / g_k | beta_k ~ IG(sqrt(rho /
     beta_k^2), rho) with factor-score selection; gamma | f, lambda (eq. 7);
   * ``"gp"``: W | A, psi, lambda, gamma with f marginalised (eq. 14) by elliptical slice sampling
     (BlackJAX), prior N(S_N psi A' x_n, S_N) per score and likelihood Z = N(Y(1 + lambda) | 0,
     K(W) + Lambda / gamma) (eq. 9); with theta sampled, log theta | W, lambda, gamma, f still
     marginalised, by the slice sweep of the GP sampler (Sec. 3, :func:`draw_log_theta`) on the new
     scores, after the scale of each factor moved with W A' fixed and f marginalised
     (:func:`rescale_factors`); then f | W, theta, lambda, gamma exactly (eq. 7,
     :func:`~bayes_maxmargin.models.gp.gibbs.sample_f`), then (max-margin link) elliptical slice updates
     of f with lambda integrated out (:func:`~bayes_maxmargin.core.augmentation.elliptical_moves`, as in
     GP Gibbs) and 1 / lambda | f afresh; gamma | f, lambda;
   * ``"none"`` (the factor model alone, first stage of FM+L / FM+N): w_n | A, psi ~ N(S_N psi A'
     x_n, S_N).

   With the probit link (``link="probit"``, Henao et al. 2014, Sec. 6) the augmentation is Albert &
   Chib's (1993): z_n | f_n, y_n ~ N(f_n, 1) truncated to the sign of y_n in place of 1 / lambda | f;
   given z, every step above is the max-margin one with lambda = 1, gamma = 1 and labels z / 2
   (:func:`~bayes_maxmargin.models.factor.model.probit_pseudo_labels`): for the GP classifier, W |
   A, psi, z with f marginalised has likelihood N(z | 0, K(W) + I), and f | W, z is the GP
   regression posterior with unit noise.

Blocked elliptical slice update (GP classifier). The paper updates one w_n at a time, each
evaluation of Z costing an O(n^3) factorisation: n factorisations (times the slice shrinkage
steps) per sweep. Here the scores are split at random, every sweep, into ``n_blocks`` blocks, and
each block is moved by one elliptical slice step on its prior, the product over its members of
N(S_N psi A' x_n, S_N), with likelihood Z at the full W. Validity: the prior of a block given
everything else is that Gaussian product (the w_n are a priori conditionally independent given A,
psi), so elliptical slice sampling on it leaves p(W_block | rest) of eq. (14) invariant (Murray et
al. 2010); the random partition is drawn independently of the state, so the mixture of these
kernels is invariant too. A small number of blocks costs n_blocks (not n) factorisations per
sweep. The step works in whitened coordinates z_n = L'(w_n - m_n), S_N^-1 = L L', where the prior
is N(0, I) (the ellipse maps linearly, so it is the same move); scores outside the block enter
BlackJAX's ellipse as dummy coordinates that the likelihood ignores and that are then reset, which
leaves the block's move exactly the elliptical slice step on the block.

One score at a time (``n_blocks=None``, the paper's scheme), in the same whitened coordinates.
Moving w_n changes only row and column n of K(W), and the part of log Z that depends on w_n is a
Schur complement, ``log N(s_n t_n | c' Q s_-n t_-n, B_nn - c' Q c)`` with ``B = I + diag(s) K
diag(s)``, ``c = B_-n,n`` and ``Q = B_-n^-1`` (:func:`score_loglik`): O(n^2) per evaluation from
P = B^-1, which the sweep factorises once and updates after every move
(:func:`replace_score_inverse`). On USPS 3 vs 5 (767 training digits, K = 10, 1200 sweeps) it
gave the same test errors as ``n_blocks=8`` on two splits (2.98 and 4.01 %), in about 710 s per
fit against 230 s.

Numerics of Z: with s = sqrt(gamma / lambda), log Z = -||L_B^-1 (s t)||^2 / 2 - sum log diag L_B +
const, L_B the Cholesky factor of I + diag(s) K diag(s) (eigenvalues >= 1, so the factorisation
always succeeds), t = Y (1 + lambda); no inverse is formed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array
from jax.scipy.linalg import cho_solve, solve_triangular

from bayes_maxmargin.core.augmentation import (
    ELLIPTICAL_STEPS,
    MoveInfo,
    draw_gamma,
    elliptical_moves,
    expected_inv_lambda,
    gaussian_conditional,
    marginal_moves,
    sample_gaussian,
    sample_inv_lambda,
)
from bayes_maxmargin.core.distributions import InverseGaussian, sample_positive_normal
from bayes_maxmargin.core.kernels import get_kernel
from bayes_maxmargin.core.parameters import Unflatten, flatten
from bayes_maxmargin.core.slice import slice_sweep
from bayes_maxmargin.models.factor.model import FactorData, FactorHyper, probit_pseudo_labels, score_conditional
from bayes_maxmargin.models.gp.covariance import gp_data, pseudo_obs_scaled
from bayes_maxmargin.models.gp.gibbs import sample_f
from bayes_maxmargin.models.gp.gibbs_theta import GPThetaData, sampled_field_values, theta_log_conditional
from bayes_maxmargin.models.gp.model import sampled_coordinates

__all__ = ["FactorState", "FactorSweepInfo", "build_factor_kernel", "build_factor_record", "draw_inv_scale",
           "draw_log_theta", "ess_step", "init_factor", "log_marginal_z", "record_factor", "rescale_factors"]


class FactorSweepInfo(NamedTuple):
    """The Info of a factor-model sweep, recorded per draw in ``sample_stats`` (fields that a classifier does
    not have are None and not recorded): the moves of the classifier with lambda integrated out
    (:class:`~bayes_maxmargin.core.augmentation.MoveInfo`: the linear classifier's slice moves of [beta, b],
    the GP classifier's elliptical updates of f; zeros without a classifier or with the probit link), and
    with the GP classifier the elliptical slice sub-iterations of the score update (``ess_subiterations``:
    one likelihood evaluation per step plus one per shrinkage of the bracket) and, with theta sampled, the
    slice sweep's evaluations and stalled updates of log theta; with the linear classifier the density
    evaluations of the factors' scale move (``scale_evaluations``, :func:`rescale_factors`)."""

    move_evaluations: Array
    move_stalled: Array
    ess_subiterations: Array | None = None
    slice_evaluations: Array | None = None
    slice_stalled: Array | None = None
    scale_evaluations: Array | None = None


class FactorState(NamedTuple):
    """State of one chain: ``A`` (d, K) loadings; ``inv_phi`` (d, K) 1 / phi_ik; ``psi`` the noise
    precision; ``W`` (n, K) factor scores; ``coef`` (K + 1,) [beta, intercept] (linear classifier); ``f``
    (n,) the classifier function at the scores; ``inv_lam`` (n,) 1 / lambda_n; ``gamma`` the hinge scale;
    ``inv_g`` (K,) 1 / g_k (factor-score selection); ``log_theta`` (p,) the GP kernel's positive fields on
    the log scale (:func:`~bayes_maxmargin.core.parameters.flatten`) when theta is sampled, else None; ``z``
    (n,) the probit augmentation z_n (``link="probit"``; lambda = 1 and gamma = 1 there), else None.
    """

    A: Array
    inv_phi: Array
    psi: Array
    W: Array
    coef: Array
    f: Array
    inv_lam: Array
    gamma: Array
    inv_g: Array
    log_theta: Array | None = None
    z: Array | None = None


def draw_inv_scale(key: Array, value: Array, rate: Array) -> Array:
    """1 / phi | a ~ IG(sqrt(nu / a^2), nu) for a ~ N(0, phi), phi ~ Exp(nu / 2) (supplement, Sec. 1).

    Also the update of 1 / g_k given beta_k with rho for nu. a^2 is floored at the square of the
    margin floor so that the draw stays finite.
    """
    a2 = jnp.maximum(value**2, jnp.finfo(value.dtype).eps)
    mean = jnp.sqrt(rate / a2)
    return InverseGaussian(mean, jnp.broadcast_to(rate, mean.shape)).sample(key)


def _draw_loadings(key: Array, X: Array, W: Array, psi: Array, inv_phi: Array) -> Array:
    """a_i | W, psi, phi_i ~ N(P_i^-1 psi W' x_(i), P_i^-1), every row i at once."""
    gram = psi * (W.T @ W)
    rhs = psi * (X.T @ W)  # (d, K)

    def row(k, inv_phi_i, rhs_i):
        chol = jnp.linalg.cholesky(gram + jnp.diag(inv_phi_i))
        mean = cho_solve((chol, True), rhs_i)
        z = jax.random.normal(k, mean.shape, mean.dtype)
        return mean + solve_triangular(chol, z, lower=True, trans="T")

    keys = jax.random.split(key, X.shape[1])
    return jax.vmap(row)(keys, inv_phi, rhs)


def _draw_psi(key: Array, X: Array, A: Array, W: Array, hyper: FactorHyper) -> Array:
    resid = X - W @ A.T
    shape = hyper.a_psi + 0.5 * X.size
    rate = hyper.b_psi + 0.5 * jnp.sum(resid**2)
    return jax.random.gamma(key, shape, dtype=X.dtype) / rate


def _draw_scores_linear(
    key: Array, X: Array, y: Array, A: Array, psi: Array, coef: Array, inv_lam: Array, gamma: Array
) -> Array:
    """w_n | A, psi, beta, b, lambda, gamma for all n (conditionally independent Gaussians).

    Precision I + psi A'A + gamma / lambda_n beta beta'; linear term psi A' x_n + gamma beta
    (y_n (1 + 1 / lambda_n) - b / lambda_n), from the augmented factor N(y_n (1 + lambda_n) - f_n |
    0, lambda_n / gamma) with f_n = beta' w_n + b.
    """
    Kf = A.shape[1]
    beta, b = coef[:Kf], coef[Kf]
    base = psi * (A.T @ A) + jnp.eye(Kf, dtype=A.dtype)
    rhs = psi * (X @ A) + (gamma * (y * (1.0 + inv_lam) - b * inv_lam))[:, None] * beta[None, :]

    def one(k, c, r):
        chol = jnp.linalg.cholesky(base + c * jnp.outer(beta, beta))
        mean = cho_solve((chol, True), r)
        z = jax.random.normal(k, mean.shape, mean.dtype)
        return mean + solve_triangular(chol, z, lower=True, trans="T")

    keys = jax.random.split(key, X.shape[0])
    return jax.vmap(one)(keys, gamma * inv_lam, rhs)


def rescale_factors(key: Array, A: Array, W: Array, beta: Array | None, inv_phi: Array, inv_g: Array,
                    loglik: Callable[[Array], Array] | None = None) -> tuple[Array, Array, Array | None, Array]:
    """The scale of each factor moved with the fit unchanged: a parameter-expanded step (Liu & Wu 1999).

    The map (a_k, w_k, beta_k) -> (c_k a_k, w_k / c_k, c_k beta_k), c_k > 0, leaves W A' and the classifier
    f = W beta + b unchanged, so only the priors of the moved coordinates see it: a_ik ~ N(0, phi_ik),
    w_nk ~ N(0, 1), beta_k ~ N(0, g_k). Each t_k = log c_k is drawn by a slice update from

        -e^{2 t} (sum_i a_ik^2 / phi_ik + beta_k^2 / g_k) / 2 - e^{-2 t} ||w_k||^2 / 2 + (d + 1 - n) t,

    the density of the moved point times the Jacobian c^(d + 1 - n) of the map, with respect to the
    group's invariant measure dc / c = dt: a generalised Gibbs step (Liu & Sabatti 2000), which leaves the
    conditional of (A, W, beta) given everything else invariant. Given W the loadings, and given A the
    scores, pin each other's scale; this move changes both at once.

    With the GP classifier (``beta`` None) the map (a_k, w_k) -> (c_k a_k, w_k / c_k) keeps W A' but not the
    kernel matrix K(W): the density gains ``loglik(W / c)``, log Z of eq. (9) with f integrated out
    (:func:`log_marginal_z`, one n x n factor per evaluation), and the Jacobian is c^(d - n). Bulk ESS per
    draw of the communalities sum_k a_ik^2 (200 breast-cancer rows, 3 factors, 4 chains of 500 after 300),
    the least and the median: 0.010 and 0.022 without the move (largest R-hat 1.14), 0.027 and 0.13 with it
    (1.06), at 1.5 times the time per sweep.

    Returns
    -------
    A, W, beta : Array
        The moved loadings, scores and classifier weights (None without ``beta``).
    evaluations : Array
        Density evaluations of the slice updates.

    Examples
    --------
    >>> A, W, beta = jnp.ones((4, 2)), jnp.ones((10, 2)), jnp.ones(2)
    >>> A2, W2, beta2, _ = rescale_factors(jax.random.PRNGKey(0), A, W, beta, jnp.ones((4, 2)), jnp.ones(2))
    >>> bool(jnp.allclose(W2 @ A2.T, W @ A.T, rtol=1e-5)), bool(jnp.allclose(W2 @ beta2, W @ beta, rtol=1e-5))
    (True, True)
    """
    d, n = A.shape[0], W.shape[0]
    s_a = 0.5 * jnp.sum(A**2 * inv_phi, axis=0) + (0.0 if beta is None else 0.5 * beta**2 * inv_g)
    s_w = 0.5 * jnp.sum(W**2, axis=0)
    power = d - n + (beta is not None)

    def logdensity(t: Array) -> Array:
        prior = jnp.sum(-jnp.exp(2.0 * t) * s_a - jnp.exp(-2.0 * t) * s_w + power * t)
        return prior if loglik is None else prior + loglik(W * jnp.exp(-t))

    t, _, info = slice_sweep(key, logdensity, jnp.zeros((A.shape[1],), A.dtype),
                             1.0 / jnp.sqrt(jnp.asarray(n + d, A.dtype)))
    c = jnp.exp(t)
    return A * c, W / c, None if beta is None else beta * c, jnp.asarray(info.num_evaluations, jnp.int32)


def log_marginal_z(W: Array, data: FactorData, kernel_fn, inv_lam: Array, gamma: Array) -> Array:
    """log Z(y, W, lambda, gamma, theta) of eq. (9) with W for X, up to terms free of W.

    log N(t | 0, K(W) + Lambda / gamma), t = Y (1 + lambda), computed as -||L_B^-1 s t||^2 / 2 -
    sum log diag L_B with L_B L_B' = I + diag(s) (K + jitter I) diag(s), s = sqrt(gamma / lambda)
    (the dropped terms depend on lambda and gamma only).
    """
    n = W.shape[0]
    K = kernel_fn(data.theta, W, W) + data.jitter * jnp.eye(n, dtype=W.dtype)
    s = jnp.sqrt(gamma * inv_lam)
    chol = jnp.linalg.cholesky(jnp.eye(n, dtype=W.dtype) + s[:, None] * K * s[None, :])
    v = solve_triangular(chol, pseudo_obs_scaled(data.y, inv_lam, gamma), lower=True)
    return -0.5 * jnp.sum(v**2) - jnp.sum(jnp.log(jnp.diag(chol)))


def ess_step(
    key: Array, z: Array, mask: Array, loglik, current: Array | None = None
) -> tuple[Array, Array, Array]:
    """One elliptical slice step (BlackJAX) on the rows of ``z`` selected by ``mask``.

    ``z`` has prior N(0, I) (whitened coordinates); ``loglik(z)`` the log-likelihood, ``current``
    its value at ``z`` when known (saves one evaluation). Rows outside the mask are held fixed: the
    likelihood sees them at their current values and they are restored after the step, so the move
    is the elliptical slice step on the block alone. Returns the new z, the log-likelihood there
    and the number of likelihood evaluations of the step (excluding ``current``).
    """
    m = mask[:, None]

    def block_loglik(zp):
        return loglik(jnp.where(m, zp, z))

    import blackjax  # here, not at import: importing blackjax starts a JAX backend

    algo = blackjax.elliptical_slice(block_loglik, mean=jnp.zeros(()), cov=jnp.ones(z.size, z.dtype))
    state = algo.init(z) if current is None else blackjax.mcmc.elliptical_slice.EllipSliceState(z, current)
    new, info = algo.step(key, state)
    return jnp.where(m, new.position, z), new.logdensity, info.subiter


def _draw_scores_gp(
    key: Array, data: FactorData, kernel_fn, A: Array, psi: Array, W: Array, inv_lam: Array, gamma: Array,
    n_blocks: int,
) -> tuple[Array, Array]:
    """Blocked elliptical slice update of W | A, psi, lambda, gamma, f marginalised (eq. 14); also
    returns the elliptical slice sub-iterations (likelihood evaluations) summed over the blocks."""
    mean, chol = score_conditional(data.X, A, psi)
    z = (W - mean) @ chol  # z_n = L'(w_n - m_n)

    def to_w(zz):
        return mean + solve_triangular(chol, zz.T, lower=True, trans="T").T

    def loglik(zz):
        return log_marginal_z(to_w(zz), data, kernel_fn, inv_lam, gamma)

    n = W.shape[0]
    k_perm, k_ess = jax.random.split(key)
    block = jnp.zeros(n, jnp.int32).at[jax.random.permutation(k_perm, n)].set(jnp.arange(n, dtype=jnp.int32) % n_blocks)

    def body(carry, j):
        zz, ll = carry
        zz, ll, subiter = ess_step(jax.random.fold_in(k_ess, j), zz, block == j, loglik, ll)
        return (zz, ll), subiter

    (z, _), subiter = jax.lax.scan(body, (z, loglik(z)), jnp.arange(n_blocks))
    return to_w(z), jnp.sum(subiter)


def q_solve(P: Array, j: Array, x: Array) -> Array:
    """``Q x_-j`` with ``Q = B_-j^-1`` (B without row and column j) from P = B^-1: P x - p p'x / P_jj
    with x_j set to 0, p = P e_j; the result is zero at j."""
    keep = 1.0 - jax.nn.one_hot(j, P.shape[0], dtype=P.dtype)
    p = P[:, j]
    x = x * keep
    return (P @ x - p * (p @ x) / p[j]) * keep


def score_loglik(
    w: Array, j: Array, W: Array, P: Array, v: Array, s: Array, st: Array, data: FactorData, kernel_fn
) -> tuple[Array, Array, Array]:
    """The part of log Z (eq. 9) that depends on w_j, given the other scores, in O(n^2).

    With s = sqrt(gamma / lambda) and B = I + diag(s) K(W) diag(s) (eigenvalues >= 1), log Z =
    log N(s t | 0, B) + const and, for ``c = B_-j,j`` and ``Q = B_-j^-1``::

        log N(s t | 0, B) = log N(s_-j t_-j | 0, B_-j) + log N(s_j t_j | c' Q s_-j t_-j, B_jj - c' Q c),

    whose first term is free of w_j (row and column j of B are the only ones w_j enters).

    Parameters
    ----------
    w : (K,) candidate value of w_j;  j : index;  W : (n, K) current scores;  P : (n, n) B^-1 at W;
    v : (n,) ``Q s_-j t_-j``, ``q_solve(P, j, st)``;  s : (n,) sqrt(gamma / lambda);  st : (n,) s t,
    t = Y (1 + lambda);  data, kernel_fn : as the sampler.

    Returns
    -------
    loglik : the second term above;  var : B_jj - c' Q c (>= 1);  qc : (n,) Q c (zero at j).
    """
    c = s[j] * s * kernel_fn(data.theta, w[None], W)[0]
    qc = q_solve(P, j, c)
    var = 1.0 + s[j] ** 2 * (kernel_fn(data.theta, w[None], w[None])[0, 0] + data.jitter) - c @ qc
    return -0.5 * (st[j] - c @ v) ** 2 / var - 0.5 * jnp.log(var), var, qc


def replace_score_inverse(P: Array, j: Array, var: Array, qc: Array) -> Array:
    """B^-1 after row and column j of B change: P - p p' / P_jj + (Q c - e_j)(Q c - e_j)' / var, from
    the block form of the inverse (``var`` and ``qc`` of :func:`score_loglik` at the new w_j)."""
    p = P[:, j]
    u = qc - jax.nn.one_hot(j, P.shape[0], dtype=P.dtype)
    return P - jnp.outer(p, p) / p[j] + jnp.outer(u, u) / var


def _draw_scores_gp_single(
    key: Array, data: FactorData, kernel_fn, A: Array, psi: Array, W: Array, inv_lam: Array, gamma: Array
) -> tuple[Array, Array]:
    """The paper's update of W (eq. 14): one elliptical slice step per score w_n, in random order;
    also returns the elliptical slice sub-iterations summed over the scores.

    Each likelihood evaluation is the O(n^2) conditional term of :func:`score_loglik` instead of an
    O(n^3) factorisation of K(W) + Lambda / gamma; the sweep factorises B = I + diag(s) K diag(s)
    once, keeps P = B^-1 (eigenvalues in (0, 1]) and updates it after each move
    (:func:`replace_score_inverse`), O(n^2).
    """
    mean, chol = score_conditional(data.X, A, psi)
    n, Kf = W.shape
    eye = jnp.eye(n, dtype=W.dtype)
    s = jnp.sqrt(gamma * inv_lam)
    st = pseudo_obs_scaled(data.y, inv_lam, gamma)
    K = kernel_fn(data.theta, W, W) + data.jitter * eye
    P = cho_solve((jnp.linalg.cholesky(eye + s[:, None] * K * s[None, :]), True), eye)
    k_perm, k_ess = jax.random.split(key)
    order = jax.random.permutation(k_perm, n)

    def update_one(i, carry):
        W, P, total = carry
        j = order[i]

        def to_w(z):
            return mean[j] + solve_triangular(chol, z, lower=True, trans="T")

        v = q_solve(P, j, st)

        def loglik(z):
            return score_loglik(to_w(z), j, W, P, v, s, st, data, kernel_fn)[0]

        import blackjax

        algo = blackjax.elliptical_slice(loglik, mean=jnp.zeros((), W.dtype), cov=jnp.ones(Kf, W.dtype))
        new, info = algo.step(jax.random.fold_in(k_ess, i), algo.init(chol.T @ (W[j] - mean[j])))
        w = to_w(new.position)
        _, var, qc = score_loglik(w, j, W, P, v, s, st, data, kernel_fn)
        return W.at[j].set(w), replace_score_inverse(P, j, var, qc), total + info.subiter.astype(total.dtype)

    W, _, total = jax.lax.fori_loop(0, n, update_one, (W, P, jnp.zeros((), jnp.int32)))
    return W, total


def _draw_scores_prior(key: Array, X: Array, A: Array, psi: Array) -> Array:
    mean, chol = score_conditional(X, A, psi)
    z = jax.random.normal(key, mean.shape, mean.dtype)
    return mean + solve_triangular(chol, z.T, lower=True, trans="T").T


def draw_log_theta(
    key: Array, log_theta: Array, W: Array, inv_lam: Array, gamma: Array, data: FactorData, kernel_fn,
    unflatten: Unflatten,
):
    """log theta | W, lambda, gamma, f integrated out: the slice sweep of the GP sampler with theta
    sampled (Sec. 3; :func:`~bayes_maxmargin.core.slice.slice_sweep` on
    :func:`~bayes_maxmargin.models.gp.gibbs_theta.theta_log_conditional`), the GP's inputs being the
    current factor scores W.

    Given W the classifier is the GP SVM of Sec. 3 on inputs W, and the target, p(log theta) N(Y (1 +
    lambda) | 0, K_theta(W) + Lambda / gamma), is the conditional of log theta in the factor model too
    (A, psi and X enter only through W). Returns the new log theta and its
    :class:`~bayes_maxmargin.core.slice.SliceInfo`.
    """
    width = jnp.asarray(1.0 if data.slice_width is None else data.slice_width, W.dtype)
    gdata = GPThetaData(X=W, y=data.y, prior=data.prior, jitter=data.jitter, slice_width=width)

    def target(lt: Array) -> Array:
        return theta_log_conditional(lt, inv_lam, gamma, gdata, kernel_fn, unflatten)

    log_theta, _, info = slice_sweep(key, target, log_theta, width,
                                     index=sampled_coordinates(data.prior, unflatten))
    return log_theta, info


def init_factor(
    data: FactorData, hyper: FactorHyper, n_factors: int, classifier: str, link: str = "hinge"
) -> FactorState:
    """A starting state from the principal components: W = sqrt(n) U_K, A = V_K S_K / sqrt(n),
    psi = 1 / residual variance, 1 / phi at its conditional mean, f = 0 (classifier coefficients
    0), 1 / lambda at its conditional mean (eq. 8), gamma at ``hyper.gamma``, g = 1; log theta at
    ``data.theta`` when ``data.prior`` is given (theta sampled), else None; with ``link="probit"``
    z = y, lambda = 1 and gamma = 1."""
    X = data.X
    n, d = X.shape
    U, S, Vt = jnp.linalg.svd(X, full_matrices=False)
    root_n = jnp.sqrt(jnp.asarray(n, X.dtype))
    W = root_n * U[:, :n_factors]
    A = Vt[:n_factors].T * S[:n_factors] / root_n
    resid = X - W @ A.T
    psi = 1.0 / jnp.maximum(jnp.mean(resid**2), 1e-6)
    inv_phi = jnp.sqrt(hyper.nu / jnp.maximum(A**2, 1e-12))
    f = jnp.zeros(n, X.dtype)
    gamma = jnp.asarray(hyper.gamma, X.dtype)
    inv_lam = expected_inv_lambda(1.0 - data.y * f, gamma, hyper.gamma0)
    log_theta = None if data.prior is None or classifier != "gp" else flatten(data.theta)[0].astype(X.dtype)
    z = None
    if link == "probit" and classifier != "none":
        z, inv_lam, gamma = data.y.astype(X.dtype), jnp.ones(n, X.dtype), jnp.ones((), X.dtype)
    return FactorState(
        A, inv_phi, psi, W, jnp.zeros(n_factors + 1, X.dtype), f, inv_lam, gamma, jnp.ones(n_factors, X.dtype),
        log_theta, z,
    )


def _augment(key: Array, y: Array, f: Array, gamma: Array, hyper: FactorHyper, link: str):
    """The likelihood's augmentation given f: ``(labels, 1 / lambda, gamma, z)`` for the classifier's
    Gaussian step. Max-margin: 1 / lambda | f (eq. 7), the labels and gamma as they are, z None.
    Probit (Albert & Chib 1993): z_n ~ N(f_n, 1) truncated to the sign of y_n
    (:func:`~bayes_maxmargin.core.distributions.sample_positive_normal`), then the labels z / 2 with
    lambda = 1 and gamma = 1 (:func:`~bayes_maxmargin.models.factor.model.probit_pseudo_labels`)."""
    if link == "probit":
        z = y * sample_positive_normal(key, y * f)
        return probit_pseudo_labels(z), jnp.ones_like(f), jnp.ones_like(gamma), z
    return y, sample_inv_lambda(key, 1.0 - y * f, gamma, hyper.gamma0), gamma, None


@functools.cache
def build_factor_kernel(
    classifier: str,
    sample_gamma: bool = False,
    sample_g: bool = False,
    fit_intercept: bool = True,
    kernel: str = "rbf",
    n_blocks: int | None = 1,
    theta_unflatten: Unflatten | None = None,
    link: str = "hinge",
):
    """The Gibbs kernel of one factor-model structure (cached: one compiled kernel per structure).

    Parameters
    ----------
    classifier : {"linear", "gp", "none"}
        Classifier on the scores, or none (the factor model alone).
    sample_gamma : bool
        Whether gamma has a Gamma(a0, b0) prior and is sampled.
    sample_g : bool
        Factor-score selection g_k ~ Exp(rho / 2) (linear classifier).
    fit_intercept : bool
        Linear classifier with an intercept (prior precision ``hyper.intercept_prec``).
    kernel : str
        Covariance function of the GP classifier (``"rbf"`` or ``"ard"``).
    n_blocks : int or None
        Blocks of the elliptical slice update of W (GP classifier); None for one score at a time
        (the paper's scheme, :func:`score_loglik`).
    theta_unflatten : Unflatten or None
        GP classifier with theta sampled: the :class:`~bayes_maxmargin.core.parameters.Unflatten` of the
        kernel's parameters (:func:`~bayes_maxmargin.core.parameters.flatten`); each sweep then moves log
        theta by :func:`draw_log_theta` after W, on the new scores, and redraws f at the new (W, theta),
        both steps with f integrated out (the state needs ``log_theta``, the data ``prior``:
        :func:`init_factor`). None: theta fixed at ``data.theta``.
    link : {"hinge", "probit"}
        The max-margin pseudo-likelihood, or the probit link (Albert & Chib 1993: each sweep draws z | f,
        y, then the classifier and the scores given z as the max-margin steps with lambda = 1, gamma = 1
        and labels z / 2, :func:`~bayes_maxmargin.models.factor.model.probit_pseudo_labels`; the state
        needs ``z``: :func:`init_factor` with the same ``link``). No gamma to sample with the probit link.

    Returns
    -------
    callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)``, ``info`` a :class:`FactorSweepInfo`.
    """
    if link not in ("hinge", "probit"):
        raise ValueError(f"link must be 'hinge' or 'probit', got {link!r}")
    if link == "probit" and sample_gamma:
        raise ValueError("link='probit' has no hinge scale gamma to sample: sample_gamma must be False")
    kernel_fn = get_kernel(kernel)

    def step(rng_key: Array, state: FactorState, data: FactorData, hyper: FactorHyper):
        keys = jax.random.split(rng_key, 8)
        X, y = data.X, data.y
        inv_phi = draw_inv_scale(keys[0], state.A, hyper.nu)
        A = _draw_loadings(keys[1], X, state.W, state.psi, inv_phi)
        psi = _draw_psi(keys[2], X, A, state.W, hyper)
        W, coef, f, inv_lam, gamma, inv_g, log_theta, z = (
            state.W, state.coef, state.f, state.inv_lam, state.gamma, state.inv_g, state.log_theta, state.z
        )
        Kf = W.shape[1]
        info = FactorSweepInfo(*MoveInfo.none())
        if classifier == "none":
            W = _draw_scores_prior(keys[3], X, A, psi)
        elif classifier == "linear":
            y, inv_lam, gamma, z = _augment(keys[3], y, f, gamma, hyper, link)
            design = jnp.concatenate([W, jnp.ones((W.shape[0], 1), W.dtype)], axis=1)
            icpt = hyper.intercept_prec if fit_intercept else jnp.asarray(1e12, W.dtype)
            prior_prec = jnp.concatenate([inv_g, jnp.reshape(icpt, (1,)).astype(W.dtype)])
            coef = sample_gaussian(keys[4], gaussian_conditional(design, y, inv_lam, gamma, prior_prec))
            if not fit_intercept:
                coef = coef.at[Kf].set(0.0)
            if link == "hinge":  # [beta, b] with lambda integrated out, then lambda | f afresh
                axes = jnp.eye(Kf + 1, dtype=coef.dtype)[: Kf + fit_intercept]  # a fixed intercept stays at 0
                coef, moved = marginal_moves(jax.random.fold_in(keys[4], 1), coef, design, y,
                                             lambda c: -0.5 * jnp.sum(prior_prec * c**2), gamma, hyper.gamma0, axes)
                info = info._replace(**moved._asdict())
                inv_lam = sample_inv_lambda(jax.random.fold_in(keys[3], 1), 1.0 - y * (design @ coef), gamma,
                                            hyper.gamma0)
            if sample_g:
                inv_g = draw_inv_scale(keys[5], coef[:Kf], hyper.rho)
            W = _draw_scores_linear(keys[6], X, y, A, psi, coef, inv_lam, gamma)
            A, W, beta, evaluations = rescale_factors(jax.random.fold_in(keys[6], 1), A, W, coef[:Kf], inv_phi,
                                                      inv_g)
            coef = coef.at[:Kf].set(beta)
            info = info._replace(scale_evaluations=evaluations)
            f = W @ coef[:Kf] + coef[Kf]
        elif classifier == "gp":
            y, inv_lam, gamma, z = _augment(keys[3], y, f, gamma, hyper, link)
            data = data._replace(y=y)
            if theta_unflatten is not None:  # the scores move at the current theta
                data = data._replace(theta=theta_unflatten(log_theta))
            if n_blocks is None:
                W, subiter = _draw_scores_gp_single(keys[4], data, kernel_fn, A, psi, W, inv_lam, gamma)
            else:
                W, subiter = _draw_scores_gp(keys[4], data, kernel_fn, A, psi, W, inv_lam, gamma, n_blocks)
            # the scale of each factor, f integrated out (log Z of eq. 9 at the moved scores)
            A, W, _, evaluations = rescale_factors(jax.random.fold_in(keys[4], 1), A, W, None, inv_phi, inv_g,
                                                   lambda V: log_marginal_z(V, data, kernel_fn, inv_lam, gamma))
            info = info._replace(ess_subiterations=subiter, scale_evaluations=evaluations)
            if theta_unflatten is not None:  # theta | W, lambda, gamma at the new scores
                log_theta, sliced = draw_log_theta(keys[6], log_theta, W, inv_lam, gamma, data, kernel_fn,
                                                   theta_unflatten)
                data = data._replace(theta=theta_unflatten(log_theta))
                info = info._replace(slice_evaluations=sliced.num_evaluations, slice_stalled=sliced.num_stalled)
            K = kernel_fn(data.theta, W, W) + data.jitter * jnp.eye(W.shape[0], dtype=W.dtype)
            gdata = gp_data(K, y)
            f = sample_f(keys[5], gdata, inv_lam, gamma)
            if link == "hinge":  # f with lambda integrated out, then lambda | f afresh
                f, moved = elliptical_moves(jax.random.fold_in(keys[5], 1), f, gdata.chol, y, gamma, hyper.gamma0,
                                            ELLIPTICAL_STEPS)
                info = info._replace(**moved._asdict())
                inv_lam = sample_inv_lambda(jax.random.fold_in(keys[3], 1), 1.0 - y * f, gamma, hyper.gamma0)
        else:
            raise ValueError(f"classifier must be 'linear', 'gp' or 'none', got {classifier!r}")
        if sample_gamma and classifier != "none":
            gamma = draw_gamma(keys[7], 1.0 - y * f, inv_lam, hyper.a0, hyper.b0)
        return FactorState(A, inv_phi, psi, W, coef, f, inv_lam, gamma, inv_g, log_theta, z), info

    return step


def record_factor(state: FactorState) -> dict[str, Array]:
    """What the driver keeps per draw (everything but 1 / phi; ``z`` with the probit link)."""
    extra = {} if state.z is None else {"z": state.z}
    return extra | {
        "A": state.A,
        "psi": state.psi,
        "W": state.W,
        "coef": state.coef,
        "f": state.f,
        "inv_lam": state.inv_lam,
        "gamma": state.gamma,
        "inv_g": state.inv_g,
    }


def build_factor_record(theta_unflatten: Unflatten | None = None, fields: tuple[str, ...] | None = None):
    """What the driver keeps per draw: :func:`record_factor`, and with theta sampled (``theta_unflatten``
    as for :func:`build_factor_kernel`) every sampled kernel field (``fields``; None: every positive one)
    by path, constrained (e.g. ``"lengthscale"``). Cached."""
    if theta_unflatten is None:
        return record_factor
    return _build_theta_record(theta_unflatten, None if fields is None else tuple(fields))


@functools.cache
def _build_theta_record(theta_unflatten: Unflatten, fields: tuple[str, ...] | None):
    theta = sampled_field_values(theta_unflatten, fields)

    def record(state: FactorState) -> dict[str, Array]:
        return {**record_factor(state), **theta(state.log_theta)}

    return record
