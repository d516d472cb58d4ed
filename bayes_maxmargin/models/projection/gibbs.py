"""Gibbs samplers of max-margin discriminant projection (Chen et al. 2015, Sec. 4, Algorithm 1).

One kernel serves MMLDP (Sec. 4.1), KMMDP (Sec. 4.3: MMLDP on the kernel features
h_n = K(V, x_n), computed once; eq. 20 is eq. 7 with x_n -> h_n) and ssKMMDP (Sec. 4.4: the
projection step replaced by the spike-and-slab step of eq. 21-22, plus the update of pi). Features
are written F (n, D) with rows x_n (D = P) or h_n (D = M); the projection is A (D, K) (Theta in the
kernel models). One sweep for one binary problem, in the order of Algorithm 1:

1. [w; b] | Z, lambda, sigma ~ N(mu_w, Sigma_w), eq. (9) with the bias appended to z_n
   (:func:`~bayes_maxmargin.core.augmentation.gaussian_conditional`, one (K+1)-Cholesky); then a slice
   move of [w; b] along each axis under the hinge with lambda integrated out and the N(0, I / sigma)
   prior (:func:`~bayes_maxmargin.core.augmentation.marginal_moves`, the linear sampler's remedy: given
   lambda the margin points pin f_n, and with step 2 the pair is a blocked update of ([w; b], lambda));
2. 1 / lambda_n | - ~ IG(1 / ``|1 - y_n f_n|``, 1), eq. (10) (lambda_n ~ GIG(1/2, 1, xi_n^2); the
   shared :func:`~bayes_maxmargin.core.augmentation.sample_inv_lambda`), drawn after step 3's moves
   (nothing between steps 1 and 3 uses lambda);
3. a_k | Z, alpha_k ~ N((F'F + alpha_k I)^-1 F' z_k, (F'F + alpha_k I)^-1), eq. (7) / (20), for
   all k at once. F'F = V diag(s^2) V' (thin SVD of F, computed once), so that
   F'F + alpha_k I = V diag(s^2 + alpha_k) V' + alpha_k (I - V V') and a draw costs two products
   with V instead of a D x D Cholesky per column and iteration (no inverse is formed). When
   D > n (MMLDP on arcene, dorothea, leukemia) the complement (I - V V') eps / sqrt(alpha_k)
   carries the prior in the null space of F;
   ssKMMDP: theta_lk | - for l = 1..M in turn (eq. 22), see :func:`spike_slab_step`; during the
   first ``hyper.dense_warmup`` sweeps of the burn-in the draw of eq. (20) instead. The
   element-wise step mixes slowly between sparse and dense usage: started cold on satimage
   (M = 200, K = 5, six one-vs-all problems), its chains use 43 % of the theta_lk after 200 sweeps
   and 48 % after 4000, with 85.3 % and 87.4 % test accuracy (KMMDP: 88.8 %, 90.1 %); started
   after 50 dense sweeps they use 73 % and reach 87.7 % in 200 sweeps;
   then two slice moves of scales with lambda integrated out (:func:`scale_moves`): of A with the residuals
   Z - F A kept, and of [w; b] with Z kept; then 1 / lambda afresh as in step 2;
4. (A, b) | R = Z - F A, w, lambda (:func:`ancillary_projection_step`): A drawn again with the residuals
   held instead of Z, which interweaves the ancillary augmentation (A, R) with the sufficient one (A, Z) of
   step 3 (Yu & Meng 2011): given Z, A is pinned by the n rows of F; given R, only through f. Then
   z_n | A, w, b, lambda_n: the K conditionals of eq. (8) are the coordinates of one Gaussian,
   precision I_K + w w' / lambda_n and linear term A' x_n + (1 + lambda_n - y_n b) y_n w / lambda_n;
   it is drawn as a block (exact by Sherman-Morrison, O(K) per point, all n at once), which is the
   systematic scan of eq. (8) collapsed into one exact conditional draw; then the bias moves with
   every z_n (:func:`bias_shift`): (b, z_n) -> (b + delta, z_n - delta w / ``|w|^2``) keeps every f_n,
   and so the likelihood, and delta is drawn from its exact Gaussian conditional. Given lambda the
   margin points pin f_n = w' z_n + b, so b moves only as fast as all the z_n move together otherwise
   (bulk ESS of b per draw, four chains of 5000 after 500: breast cancer 0.0025 without the shift,
   0.0038 with it; two half moons 0.0011 and 0.021).

   Bulk ESS per draw of the smallest entry of A w / b / sigma (one component, four chains of 5000 after
   500, ``benchmarks/gibbs_vs_nuts.py``) and second-fit seconds, without step 3's moves and step 4's
   ancillary draw, with the moves, and with both: breast cancer 0.0018 / 0.0012 / 0.0027 (1.0 s), 0.0065 /
   0.0077 / 0.080 (1.0 s), 0.015 / 0.015 / 0.085 (1.6-2.2 s); iris (three classes, a separable one) 0.0007 /
   0.0007 / 0.0008 (1.8 s), 0.0055 / 0.017 / 0.060 (1.8 s), 0.050 / 0.060 / 0.062 (1.9 s); two half moons
   (200 rows) 0.0078 / 0.026 / 0.010, 0.056 / 0.042 / 0.067, 0.057 / 0.041 / 0.069 (0.5 s each). The
   ancillary draw costs a D x D factor of F' Lambda^-1 F per sweep: with the RBF kernel (D = 100 basis
   vectors, 4 chains of 2000 after 500) on breast cancer the least ESS per draw goes from 0.0019 (b) to 0.012
   (A w) at 3.2 times the time per sweep, on 2000 half moons from 0.0009 (b) to 0.0017 (A w) at 3.5 times;
5. alpha_k ~ Ga(c0 + nnz_k / 2, d0 + ||a_k||^2 / 2) (nnz_k = D for the dense prior, the number of
   non-zero theta_lk for the spike and slab, Sec. 4.4), sigma ~ Ga(a0 + (K+1) / 2,
   b0 + (||w||^2 + b^2) / 2) (the normal-gamma updates the paper leaves to its supplement:
   conjugate Gamma posteriors of the precisions of Gaussian vectors), and for ssKMMDP
   pi_l ~ Beta(e0 + sum_k 1(theta_lk != 0), f0 + sum_k 1(theta_lk = 0)).

Without the latent representation (``latent=False``; Sec. 3.2, eq. 11: f_n = w' A' x_n + b, no z_n)
the sweep is steps 1, 2, 3' and 5, with ``Z`` holding F A (the classifier's inputs) and

3'. a_k | w, b, lambda, alpha_k for k = 1..K in turn, eq. (12): with xi_n^-k = 1 - y_n (sum_{j != k}
   w_j a_j' x_n + b), the k-th column enters (1 + lambda_n - y_n f_n)^2 / lambda_n as
   (xi_n^-k + lambda_n - y_n w_k a_k' x_n)^2 / lambda_n, so

       Sigma_ak = (w_k^2 sum_n x_n x_n' / lambda_n + alpha_k I)^-1,
       mu_ak = Sigma_ak w_k sum_n (xi_n^-k + lambda_n) / lambda_n y_n x_n,

   the conditional of :func:`~bayes_maxmargin.core.augmentation.gaussian_conditional` with design
   w_k F and the labels y_n scaled by (xi_n^-k + lambda_n) / (1 + lambda_n) (its n-dimensional form
   when D > n). One D x D (or n x n) Cholesky per column and sweep: the paper's Step 5 cost.

Integrating z_{1k}..z_{nk} out of the MMLDP joint instead gives the conditional of a_k of eq. (13),
eq. (12) with every lambda_n in a denominator replaced by lambda_n + w_k^2 (and xi_n^-k computed
from the other coordinates of z_n): with z_n the term w_k^2 bounds the weight of the data on a_k
where w_k is large, and the prior alpha_k keeps a_k small where w_k is small; without z_n nothing
ties the scale of a_k to that of w_k but the priors, and ||a_k|| drifts far out along the ridge
w_k a_k = const (Fig. 1; :func:`bayes_maxmargin.experiments.chen2015.figure1`).

The state's ``log_joint`` is the log density of the augmented program
:func:`~bayes_maxmargin.models.projection.model.mmdp` (tested). Multi-class problems (Sec. 4.5) run the L
one-vs-all binary samplers side by side: the kernel vmaps the binary sweep over a leading class axis
of the state, inside one compiled program. After ``hyper.num_warmup`` iterations the state
accumulates sums for the posterior averages: A w and b (the averaged outputs of eq. 23-24 are linear
in x: U(x) = x' mean(A_t w_t) + mean(b_t)), A (posterior-mean projection) and 1(A != 0) (the
basis-vector usage matrix of Fig. 2).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from bayes_maxmargin.core.augmentation import (
    MoveInfo,
    augmented_log_likelihood,
    gaussian_conditional,
    marginal_moves,
    sample_conditional,
    sample_gaussian,
    sample_inv_lambda,
    scale_move,
)
from bayes_maxmargin.models.projection.model import ProjectionData, ProjectionHyper

__all__ = ["ProjectionState", "bias_shift", "build_projection_kernel", "direct_projection_step", "gamma_draws",
           "init_projection", "projection_log_joint", "record_projection", "Scaled", "ancillary_projection_step",
           "scale_moves", "spike_slab_step"]

_LOG_2PI = math.log(2.0 * math.pi)


class ProjectionState(NamedTuple):
    """State of the L binary samplers of one chain (every field has a leading class axis L).

    Attributes
    ----------
    A : (L, D, K) projection A (MMLDP) or coefficients Theta (KMMDP, ssKMMDP).
    Z : (L, n, K) latent features z_n (F A without the latent representation).
    w : (L, K) classifier weights.  b : (L,) bias.
    inv_lam : (L, n) 1 / lambda_n.
    alpha : (L, K) precisions of the columns of A.  sigma : (L,) precision of [w; b].
    pi : (L, D) usage probabilities of the basis vectors (ones without the spike and slab).
    log_joint : (L,) log density of the augmented program.
    iteration : (L,) iterations done.  n_kept : (L,) iterations accumulated (after warm-up).
    Aw_sum : (L, D), b_sum : (L,), A_sum : (L, D, K), usage_sum : (L, D, K) running sums.
    """

    A: Array
    Z: Array
    w: Array
    b: Array
    inv_lam: Array
    alpha: Array
    sigma: Array
    pi: Array
    log_joint: Array
    iteration: Array
    n_kept: Array
    Aw_sum: Array
    b_sum: Array
    A_sum: Array
    usage_sum: Array


def gamma_draws(key: Array, shape: Array, n_tries: int = 12) -> Array:
    """Gamma(shape, 1) variates by Marsaglia & Tsang's (2000) squeeze-free rejection method with a
    fixed number of proposals, all drawn at once (no while loop: ``jax.random.gamma``'s loop costs
    seconds of XLA compilation in every kernel that calls it).

    For shape >= 1 a proposal is accepted with probability > 0.95, so all ``n_tries = 12`` are
    rejected with probability < 0.05^12 < 2.5e-16 (then the mode-like d = shape - 1/3 is
    returned); shape < 1 uses Gamma(a) = Gamma(a + 1) U^(1/a).
    """
    k1, k2, k3 = jax.random.split(key, 3)
    boost = shape < 1.0
    a = jnp.where(boost, shape + 1.0, shape)
    d = a - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    x = jax.random.normal(k1, (n_tries,) + shape.shape, shape.dtype)
    log_u = jnp.log(jax.random.uniform(k2, (n_tries,) + shape.shape, shape.dtype))
    v = (1.0 + c * x) ** 3
    ok = (v > 0) & (log_u < 0.5 * x**2 + d - d * v + d * jnp.log(jnp.where(v > 0, v, 1.0)))
    first = jnp.argmax(ok, axis=0)
    g = d * jnp.where(jnp.any(ok, axis=0), jnp.take_along_axis(v, first[None], axis=0)[0], 1.0)
    u_boost = jax.random.uniform(k3, shape.shape, shape.dtype)
    return jnp.where(boost, g * u_boost ** (1.0 / shape), g)


def _gamma_logpdf(x: Array, shape: Array, rate: Array) -> Array:
    return shape * jnp.log(rate) - jax.lax.lgamma(shape) + (shape - 1.0) * jnp.log(x) - rate * x


def projection_log_joint(
    A: Array, Z: Array, FA: Array, w: Array, b: Array, inv_lam: Array, alpha: Array, sigma: Array,
    pi: Array, y: Array, hyper: ProjectionHyper, spike_slab: bool, latent: bool = True,
) -> Array:
    """Log density of the augmented program (one binary problem) at the state.

    ``latent=False``: the program without the latent representation (eq. 11), no density of Z
    (which is then F A).

    For the spike and slab (eq. 21) the density of Theta is taken with respect to the product of
    (Lebesgue + point mass at 0) measures: pi_l N(theta_lk | 0, 1 / alpha_k) where theta_lk != 0
    and 1 - pi_l where theta_lk = 0; plus the Beta(e0, f0) densities of pi.
    """
    D, K = A.shape
    n = Z.shape[0]
    lp = jnp.sum(_gamma_logpdf(alpha, hyper.c0, hyper.d0)) + _gamma_logpdf(sigma, hyper.a0, hyper.b0)
    gauss = 0.5 * (jnp.log(alpha) - _LOG_2PI) - 0.5 * alpha * A**2
    if spike_slab:
        on = A != 0
        lp = lp + jnp.sum(jnp.where(on, jnp.log(pi)[:, None] + gauss, jnp.log1p(-pi)[:, None]))
        lp = lp + jnp.sum(
            (hyper.e0 - 1.0) * jnp.log(pi) + (hyper.f0 - 1.0) * jnp.log1p(-pi)
            + jax.lax.lgamma(hyper.e0 + hyper.f0) - jax.lax.lgamma(hyper.e0) - jax.lax.lgamma(hyper.f0)
        )
    else:
        lp = lp + jnp.sum(gauss)
    lp = lp + 0.5 * (K + 1) * (jnp.log(sigma) - _LOG_2PI) - 0.5 * sigma * (jnp.sum(w**2) + b**2)
    if latent:
        lp = lp - 0.5 * n * K * _LOG_2PI - 0.5 * jnp.sum((Z - FA) ** 2)
    u = 1.0 - y * (Z @ w + b)
    return lp + jnp.sum(augmented_log_likelihood(u, inv_lam, 1.0))


def _dense_projection_step(key: Array, Z: Array, alpha: Array, data: ProjectionData, full_rank: bool) -> Array:
    """Eq. (7) / (20) for every column at once through the SVD of F (module docstring, step 3)."""
    k1, k2 = jax.random.split(key)
    FtZ = data.features.T @ Z  # (D, K)
    prec = data.s2[:, None] + alpha[None, :]  # (r, K)
    coord = (data.V.T @ FtZ) / prec + jax.random.normal(k1, prec.shape, Z.dtype) / jnp.sqrt(prec)
    A = data.V @ coord
    if not full_rank:
        eps = jax.random.normal(k2, A.shape, Z.dtype)
        A = A + (eps - data.V @ (data.V.T @ eps)) / jnp.sqrt(alpha)[None, :]
    return A


def _offset_labels(y: Array, inv_lam: Array, offset: Array) -> Array:
    """Labels for :func:`~bayes_maxmargin.core.augmentation.gaussian_conditional` when f = design @ x + ``offset``:
    its linear term sum_n y_n (1 + lambda_n) / lambda_n x~_n becomes sum_n (y_n (1 + lambda_n) - offset_n) /
    lambda_n x~_n, the conditional of x given the offset (y_n = +-1)."""
    one_plus_lam = 1.0 + 1.0 / inv_lam
    return y * (one_plus_lam - y * offset) / one_plus_lam


def direct_projection_step(
    key: Array, A: Array, w: Array, b: Array, inv_lam: Array, alpha: Array, F: Array, y: Array, full_rank: bool,
) -> Array:
    """a_k | w, b, lambda, alpha_k for k = 1..K in turn, without the latent representation (eq. 12;
    module docstring, step 3').

    Parameters
    ----------
    key : Array
    A : Array, shape (D, K)
        Current projection.
    w : Array, shape (K,)
    b : Array
    inv_lam : Array, shape (n,)
    alpha : Array, shape (K,)
    F : Array, shape (n, D)
    y : Array, shape (n,)
        Labels coded +-1.
    full_rank : bool
        n >= D: the D x D form of the conditional; otherwise its n x n (Woodbury) form.

    Returns
    -------
    Array, shape (D, K)
        The new projection.
    """
    D, K = A.shape
    keys = jax.random.split(key, K)

    def column(k, A):
        a_k = jax.lax.dynamic_index_in_dim(A, k, axis=1, keepdims=False)
        w_k = w[k]
        design = w_k * F
        rest = F @ (A @ w) + b - design @ a_k  # sum_{j != k} w_j a_j' x_n + b
        # xi^-k + lambda = 1 + lambda - y rest: eq. (12)'s linear term sum_n y_n (xi^-k + lambda_n) / lambda_n x~_n
        scaled_y = _offset_labels(y, inv_lam, rest)
        prec = jnp.full((D,), alpha[k], A.dtype)
        new = sample_conditional(keys[k], design, scaled_y, inv_lam, 1.0, prec, wide=not full_rank)
        return jax.lax.dynamic_update_index_in_dim(A, new, k, axis=1)

    return jax.lax.fori_loop(0, K, column, A)


def spike_slab_step(key: Array, A: Array, B: Array, gram: Array, alpha: Array, pi: Array) -> Array:
    """The spike-and-slab update of Theta (Chen et al. 2015, eq. 22), one row l after another.

    Given Z, alpha and pi the likelihood N(z_n | Theta' h_n, I_K) factorises over the K columns, so
    the K entries theta_l1..theta_lK of row l are conditionally independent and drawn at once; the
    rows are coupled through the residuals z_kn^(l) = z_kn - sum_{m != l} theta_mk h_mn and are
    updated in sequence (a systematic scan over l = 1..M). The sufficient statistic
    sum_n z_kn^(l) h_ln = B_lk - sum_m G_lm theta_mk + G_ll theta_lk uses B = F'Z and G = F'F,
    so a row costs O(M K) and the sweep O(M^2 K) after one O(n M K) product for B::

        Sigma_lk = 1 / (alpha_k + G_ll),   mu_lk = Sigma_lk sum_n z_kn^(l) h_ln,
        logit pi~_lk = logit pi_l + log N(0 | 0, 1/alpha_k) - log N(0 | mu_lk, Sigma_lk)
                     = logit pi_l + (log alpha_k + log Sigma_lk + mu_lk^2 / Sigma_lk) / 2,
        theta_lk = 0 with probability 1 - pi~_lk, else ~ N(mu_lk, Sigma_lk).

    Parameters
    ----------
    key : Array
    A : Array, shape (M, K)
        Current Theta.
    B : Array, shape (M, K)
        F'Z.
    gram : Array, shape (M, M)
        F'F.
    alpha : Array, shape (K,)
    pi : Array, shape (M,)

    Returns
    -------
    Array, shape (M, K)
        The new Theta.
    """
    M, K = A.shape
    k_u, k_e = jax.random.split(key)
    log_u = jnp.log(jax.random.uniform(k_u, (M, K), A.dtype))
    eps = jax.random.normal(k_e, (M, K), A.dtype)
    logit_pi = jnp.log(pi) - jnp.log1p(-pi)

    def row(theta, l):
        g = gram[l]
        gll = g[l]
        r = B[l] - g @ theta + gll * theta[l]
        prec = alpha + gll
        mu = r / prec
        logit = logit_pi[l] + 0.5 * (jnp.log(alpha) - jnp.log(prec) + mu**2 * prec)
        # u < sigmoid(logit)  <=>  log u < -softplus(-logit)
        on = log_u[l] < -jax.nn.softplus(-logit)
        new = jnp.where(on, mu + eps[l] / jnp.sqrt(prec), 0.0)
        return theta.at[l].set(new), None

    theta, _ = jax.lax.scan(row, A, jnp.arange(M))
    return theta


def _z_step(key: Array, FA: Array, w: Array, b: Array, inv_lam: Array, y: Array) -> Array:
    """z_n | - for all n (module docstring, step 4): mean P^-1 v, draw P^-1/2 eps, P = I + w w' / lambda_n.

    P^-1 = I - w w' / (lambda_n + |w|^2) and P^-1/2 = I + g w w' with
    g = -1 / (lambda_n s (1 + s)), s = sqrt(1 + |w|^2 / lambda_n), finite at w = 0.
    """
    lam = 1.0 / inv_lam
    ww = jnp.sum(w**2)
    c = 1.0 + lam - y * b
    v = FA + (c * y * inv_lam)[:, None] * w[None, :]
    mean = v - ((v @ w) / (lam + ww))[:, None] * w[None, :]
    s = jnp.sqrt(1.0 + ww * inv_lam)
    g = -inv_lam / (s * (1.0 + s))
    eps = jax.random.normal(key, FA.shape, FA.dtype)
    return mean + eps + (g * (eps @ w))[:, None] * w[None, :]


def bias_shift(key: Array, Z: Array, FA: Array, w: Array, b: Array, sigma: Array) -> tuple[Array, Array]:
    """(b + delta, Z - delta u'), u = w / ``|w|^2``, with delta drawn from its conditional: a Gibbs step
    along the translation that keeps every f_n = w' z_n + b (w' u = 1), so the (augmented) likelihood
    drops out and only the priors b ~ N(0, 1 / sigma) and z_n ~ N(A' x_n, I) stay (the translation's
    Jacobian is 1; Liu & Sabatti 2000). With r_n = z_n - A' x_n (``FA`` = rows A' x_n),

        delta ~ N((u' sum_n r_n - sigma b) / P, 1 / P),   P = sigma + n ``|u|^2`` = sigma + n / ``|w|^2``.
    """
    u = w / jnp.sum(w**2)
    prec = sigma + Z.shape[0] * jnp.sum(u**2)
    delta = (jnp.sum((Z - FA) @ u) - sigma * b) / prec + jax.random.normal(key, (), Z.dtype) / jnp.sqrt(prec)
    return b + delta, Z - delta * u


class Scaled(NamedTuple):
    """The state of one binary problem after :func:`scale_moves` (FA = F A)."""

    A: Array
    Z: Array
    FA: Array
    w: Array
    b: Array


def scale_moves(
    key: Array, A: Array, Z: Array, FA: Array, w: Array, b: Array, alpha: Array, sigma: Array, y: Array,
) -> tuple[Scaled, MoveInfo]:
    """Slice moves of two scales, each along a group of transformations and with lambda integrated out
    (:func:`~bayes_maxmargin.core.augmentation.scale_move`; Liu & Wu 1999, Liu & Sabatti 2000):

    * (A, Z) -> (c A, Z + (c - 1) F A), the scale of A with the residuals z_n - A' x_n kept, so that
      p(Z | A) is unchanged and f_n = w' z_n + b moves by (c - 1) w' A' x_n. The density of t = log c is
      the program's at the moved point times c^N_A, N_A the non-zero entries of A (the Jacobian of the
      move, with the group's Haar measure dc / c);
    * (w, b) -> c (w, b), Z kept, so that f -> c f, times c^(K + 1).

    Given Z the columns of A are pinned by the n rows of F (eq. 7), Z by A and by the points on the margin
    (eq. 8), and [w; b] by the points on the margin given lambda (eq. 9), so the scales of A and of w move
    by small steps in steps 1-4 alone; the module docstring has the effective draws with and without these
    moves. lambda must be drawn afresh before it is used (step 2).
    """
    k_a, k_w = jax.random.split(key)
    K = w.shape[0]
    dtype = Z.dtype
    zero = jnp.zeros((), dtype)
    n_on = jnp.sum(A != 0).astype(dtype)
    a_norm = jnp.sum(alpha * jnp.sum(A**2, axis=0))
    signal = FA @ w
    t, moved_a = scale_move(k_a, zero, Z @ w + b - signal, signal, y,
                            lambda t: n_on * t - 0.5 * jnp.exp(2.0 * t) * a_norm)
    c = jnp.exp(t)
    Z, A, FA = Z + (c - 1.0) * FA, c * A, c * FA
    wb_norm = jnp.sum(w**2) + b**2
    t, moved_w = scale_move(k_w, zero, jnp.zeros_like(signal), Z @ w + b, y,
                            lambda t: (K + 1) * t - 0.5 * sigma * jnp.exp(2.0 * t) * wb_norm)
    c = jnp.exp(t)
    return Scaled(A, Z, FA, c * w, c * b), moved_a.plus(moved_w)


def ancillary_projection_step(
    key: Array, A: Array, R: Array, w: Array, b: Array, inv_lam: Array, alpha: Array, sigma: Array, F: Array,
    y: Array, full_rank: bool,
) -> tuple[Array, Array]:
    """(A, b) | R, w, lambda, alpha, sigma with the residuals R = Z - F A held: the ancillary augmentation's draw,
    interwoven with the sufficient one (eq. 7, A | Z) as in Yu & Meng (2011) (module docstring, step 4).

    In (A, R) the residuals are N(0, I) whatever A (the change of variables has Jacobian 1), and
    f_n = x_n' u + r_n' w + b depends on A only through u = A w. Under the prior the entries of A in use
    (non-zero; all of them without the spike and slab) are N(0, 1 / alpha_k), so u_d ~ N(0, kappa_d) with
    kappa_d = sum_k 1(a_dk != 0) w_k^2 / alpha_k, and [u; b] | lambda is the linear model's conditional
    (:func:`~bayes_maxmargin.core.augmentation.gaussian_conditional`, offset r_n' w; its n-dimensional form
    when D > n), drawn in the prior's whitened coordinates u_d / sqrt(kappa_d)
    and b sqrt(sigma) (design columns x_d sqrt(kappa_d) and 1 / sqrt(sigma), precision I plus a positive
    semi-definite matrix: its factor exists whatever the columns' units and the size of w), overrelaxed
    about the current [A w; b] (alpha = -0.9, which leaves it invariant). Row d of A given u_d is the prior
    conditioned on a_d' w = u_d: a_d = a0_d + (u_d - a0_d' w) g_d with a0 a prior draw on the entries in use
    and g_dk = 1(a_dk != 0) w_k / (alpha_k kappa_d) (Matheron's rule), exact; entries not in use stay 0. With
    one component a_d = u_d / w, computed so: a prior draw would leave rounding of the order of its own scale
    in a_d, where the posterior of a column in large units is far narrower.

    Returns
    -------
    A : Array, shape (D, K)
    b : Array
    """
    D, K = A.shape
    dtype = A.dtype
    on = (A != 0).astype(dtype)
    root = jnp.sqrt(on @ (w**2 / alpha))  # the prior sd of each u_d (0: a row not in use, which stays 0)
    safe = jnp.where(root > 0, root, 1.0)
    b_sd = 1.0 / jnp.sqrt(sigma)
    design = jnp.concatenate([F * root[None, :], jnp.full((F.shape[0], 1), b_sd, dtype)], axis=1)
    scaled_y = _offset_labels(y, inv_lam, R @ w)
    prec = jnp.ones((D + 1,), dtype)
    current = jnp.concatenate([A @ w / safe, (b / b_sd)[None]])
    k_u, k_a = jax.random.split(key)
    new = sample_conditional(k_u, design, scaled_y, inv_lam, 1.0, prec, not full_rank, current, -0.9)
    gain = on * (w / alpha)[None, :] / safe[:, None]  # g_d sqrt(kappa_d)
    if K == 1:  # a_d = u_d / w exactly: nothing of A is left to draw (no rounding of a0_d - a0_d w g_d)
        return new[:D, None] * gain, new[D] * b_sd
    A0 = on * jax.random.normal(k_a, A.shape, dtype) / jnp.sqrt(alpha)[None, :]
    # a0_d + (u_d - a0_d' w) g_d, both factors in units of sqrt(kappa_d)
    return A0 + (new[:D] - A0 @ w / safe)[:, None] * gain, new[D] * b_sd


def _binary_sweep(
    key: Array, st: ProjectionState, data: ProjectionData, y: Array, hyper: ProjectionHyper,
    spike_slab: bool, full_rank: bool, latent: bool = True,
) -> tuple[ProjectionState, MoveInfo]:
    """One sweep of Algorithm 1 for one binary problem (state fields without the class axis), and the
    :class:`~bayes_maxmargin.core.augmentation.MoveInfo` of its slice moves; with ``latent=False`` the
    sweep without the latent representation (module docstring)."""
    k_w, k_lam, k_a, k_z, k_alpha = jax.random.split(key, 5)
    F = data.features
    n, K = st.Z.shape
    dtype = st.Z.dtype
    # 1. [w; b] | Z, lambda, sigma (eq. 9; Z = F A without the latent representation)
    design = jnp.concatenate([st.Z, jnp.ones((n, 1), dtype)], axis=1)
    cond = gaussian_conditional(design, y, st.inv_lam, 1.0, jnp.full((K + 1,), st.sigma, dtype))
    wb = sample_gaussian(k_w, cond)
    # then slice moves of [w; b] along each axis with lambda integrated out (step 2 redraws lambda)
    wb, moved = marginal_moves(jax.random.fold_in(k_w, 1), wb, design, y,
                               lambda c: -0.5 * st.sigma * jnp.sum(c**2), 1.0, 0.0, jnp.eye(K + 1, dtype=dtype))
    w, b = wb[:K], wb[K]
    Z = st.Z
    if latent:
        # 3. A | Z, alpha (eq. 7 / 20), or Theta | Z, alpha, pi (eq. 22); then the scales of A and [w; b]
        A = _dense_projection_step(k_a, Z, st.alpha, data, full_rank)
        if spike_slab:
            A = jnp.where(st.iteration < hyper.dense_warmup, A,
                          spike_slab_step(k_a, st.A, F.T @ Z, data.gram, st.alpha, st.pi))
        (A, Z, FA, w, b), scaled = scale_moves(jax.random.fold_in(k_a, 1), A, Z, F @ A, w, b, st.alpha, st.sigma, y)
        moved = moved.plus(scaled)
    # 2. 1 / lambda | w, b, Z (eq. 10)
    inv_lam = sample_inv_lambda(k_lam, 1.0 - y * (Z @ w + b), 1.0, 0.0)
    if latent:
        # 4. (A, b) | Z - F A, w, lambda (the ancillary augmentation), then Z | A, w, b, lambda (eq. 8, as a
        # block), then (b, Z) along the translation that keeps f
        R = Z - FA
        A, b = ancillary_projection_step(jax.random.fold_in(k_a, 2), A, R, w, b, inv_lam, st.alpha, st.sigma, F, y,
                                         full_rank)
        FA = F @ A
        Z = _z_step(k_z, FA, w, b, inv_lam, y)
        b, Z = bias_shift(jax.random.fold_in(k_z, 1), Z, FA, w, b, st.sigma)
    else:
        # 3'. a_k | w, b, lambda, alpha_k (eq. 12), no z_n
        A = direct_projection_step(k_a, st.A, w, b, inv_lam, st.alpha, F, y, full_rank)
        FA = Z = F @ A
    # 5. alpha, sigma (normal-gamma), pi (Beta)
    # one call of the Gamma sampler for every Gamma and Beta draw
    D = A.shape[0]
    on = A != 0
    n_on = jnp.sum(on, axis=0).astype(dtype) if spike_slab else jnp.full((K,), D, dtype)
    shapes = [hyper.c0 + 0.5 * n_on, (hyper.a0 + 0.5 * (K + 1))[None]]
    if spike_slab:
        used = jnp.sum(on, axis=1).astype(dtype)
        shapes += [hyper.e0 + used, hyper.f0 + K - used]
    g = gamma_draws(k_alpha, jnp.concatenate(shapes).astype(dtype))
    alpha = g[:K] / (hyper.d0 + 0.5 * jnp.sum(A**2, axis=0))
    sigma = g[K] / (hyper.b0 + 0.5 * (jnp.sum(w**2) + b**2))
    if spike_slab:
        g_on, g_off = g[K + 1 : K + 1 + D], g[K + 1 + D :]
        tiny = jnp.finfo(dtype).eps
        pi = jnp.clip(g_on / (g_on + g_off), tiny, 1.0 - tiny)  # Beta(e0 + used, f0 + K - used)
    else:
        pi = st.pi
    log_joint = projection_log_joint(A, Z, FA, w, b, inv_lam, alpha, sigma, pi, y, hyper, spike_slab, latent)
    iteration = st.iteration + 1
    keep = (iteration > hyper.num_warmup).astype(dtype)
    return ProjectionState(
        A, Z, w, b, inv_lam, alpha, sigma, pi, log_joint, iteration, st.n_kept + keep,
        st.Aw_sum + keep * (A @ w), st.b_sum + keep * b, st.A_sum + keep * A,
        st.usage_sum + keep * (A != 0).astype(dtype),
    ), moved


@functools.cache
def build_projection_kernel(spike_slab: bool, full_rank: bool = True, latent: bool = True):
    """The Gibbs kernel of MMLDP / KMMDP (``spike_slab=False``) or ssKMMDP (cached per structure).

    Parameters
    ----------
    spike_slab : bool
        Spike-and-slab prior on the projection (ssKMMDP, eq. 21-22).
    full_rank : bool
        Whether F has at least as many rows as columns (n >= D); otherwise the projection draw
        adds the prior's component in the null space of F.
    latent : bool
        False: the model without the latent representation z_n (Sec. 3.2, eq. 11-12; not with
        ``spike_slab``).

    Returns
    -------
    callable
        ``kernel(rng_key, state, data, hyper) -> (state, info)``, the L one-vs-all binary sweeps
        vmapped over the leading class axis of ``state`` and ``data.Y``; ``info`` the
        :class:`~bayes_maxmargin.core.augmentation.MoveInfo` of their moves, summed over the classes.
    """

    if spike_slab and not latent:
        raise ValueError("spike_slab=True needs latent=True (eq. 22 draws Theta given Z)")

    def kernel(rng_key: Array, state: ProjectionState, data: ProjectionData, hyper: ProjectionHyper):
        L = data.Y.shape[0]
        keys = jax.random.split(rng_key, L)
        sweep = jax.vmap(
            lambda k, s, y: _binary_sweep(k, s, data, y, hyper, spike_slab, full_rank, latent), in_axes=(0, 0, 0)
        )
        state, moved = sweep(keys, state, data.Y)
        return state, MoveInfo(*(jnp.sum(v) for v in moved))

    return kernel


def init_projection(
    rng: np.random.Generator | int, data: ProjectionData, n_components: int, spike_slab: bool,
    num_chains: int | None = None,
) -> ProjectionState:
    """Starting states of the L binary samplers, built in NumPy (no program to compile):
    A ~ N(0, 1 / D), Z = F A, w ~ N(0, 1), b = 0, lambda = 1, alpha = sigma = 1, pi = 1/2 (every
    basis vector in use). ``log_joint`` starts at 0 (the first sweep computes it).

    With ``num_chains`` the fields get a leading chain axis (independent starts).
    """
    if num_chains is not None:
        rng = np.random.default_rng(rng)
        states = [init_projection(rng, data, n_components, spike_slab) for _ in range(num_chains)]
        return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *states)
    rng = np.random.default_rng(rng)
    L, n = data.Y.shape
    F = np.asarray(data.features)
    D = F.shape[1]
    K = n_components
    dtype = F.dtype
    A = (rng.normal(size=(L, D, K)) / np.sqrt(D)).astype(dtype)
    Z = np.einsum("nd,ldk->lnk", F, A)
    w = rng.normal(size=(L, K)).astype(dtype)
    zeros = np.zeros((L,), dtype)
    fields = (
        A, Z, w, zeros, np.ones((L, n), dtype), np.ones((L, K), dtype), np.ones((L,), dtype),
        np.full((L, D), 0.5 if spike_slab else 1.0, dtype), zeros, np.zeros((L,), np.int32), zeros,
        np.zeros((L, D), dtype), zeros, np.zeros_like(A), np.zeros_like(A),
    )
    return ProjectionState(*(jnp.asarray(f) for f in fields))


def record_projection(state: ProjectionState) -> dict[str, Array]:
    """What the driver keeps per draw: A w (the classifier's weights on the features, eq. 23-24), w, b, alpha,
    sigma, the log joint, and the number of basis vectors (rows of A with a non-zero entry) and of
    components (columns) in use."""
    on = state.A != 0
    return {
        "coef": jnp.einsum("...dk,...k->...d", state.A, state.w),
        "w": state.w,
        "b": state.b,
        "alpha": state.alpha,
        "sigma": state.sigma,
        "log_joint": state.log_joint,
        "n_basis_used": jnp.sum(jnp.any(on, axis=-1), axis=-1),
        "n_components_used": jnp.sum(jnp.any(on, axis=-2), axis=-1),
    }
