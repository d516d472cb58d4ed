"""Max-margin discriminant projection (Chen et al. 2015): the Gibbs kernels target the NumPyro
program, agree with NUTS, and the spike-and-slab step matches exact enumeration."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import stats

from bayes_maxmargin.engine import mcmc as driver
from bayes_maxmargin.models.projection.gibbs import (
    bias_shift,
    build_projection_kernel,
    ancillary_projection_step,
    init_projection,
    scale_moves,
    spike_slab_step,
)
from bayes_maxmargin.models.projection.model import ProjectionHyper, mmdp, projection_data

from ._posterior import assert_jit_equals_eager, assert_posteriors_agree
from .reference import PROJECTION_HP as HP
from .reference import (
    PROJECTION_N,
    PROJECTION_P,
    load_reference,
    projection_direct_statistics,
    projection_separable,
    projection_tiny,
)


def _hyper(num_warmup=0.0, e0=1.0, f0=1.0):
    return ProjectionHyper(*(jnp.asarray(v, jnp.float64) for v in (*HP.values(), e0, f0, num_warmup)))


_tiny = projection_tiny


def _check_log_joint(state, X, y, K, latent=True):
    s = jax.tree_util.tree_map(lambda a: a[0], state)
    params = dict(alpha=s.alpha, A=s.A, sigma=s.sigma, w=s.w, b=s.b, lam=1.0 / s.inv_lam)
    if latent:
        params["Z"] = s.Z
    expected = jax.jit(lambda params: log_density(  # one compiled program rather than one per operation
        mmdp, (jnp.asarray(X), jnp.asarray(y)),
        dict(n_components=K, augmented=True, latent_representation=latent, **HP), params,
    )[0])(params)
    np.testing.assert_allclose(s.log_joint, expected, rtol=1e-10)


@pytest.mark.extended
def test_log_joint_is_the_augmented_program():
    """The state's log joint is NumPyro's log density of the augmented program (here n < p, the
    null-space draw; the NUTS check tests n >= p, the default suite's check of the log joint)."""
    n, p = 5, 8
    X, y = _tiny(n, p)
    K = 2
    with jax.enable_x64(True):
        hyper = _hyper()
        data = projection_data(jnp.asarray(X), jnp.asarray(y)[None], False)
        state = init_projection(0, data, K, False)
        kernel = jax.jit(build_projection_kernel(False, False))
        for i in range(3):
            state, _ = kernel(jax.random.PRNGKey(i), state, data, hyper)
        _check_log_joint(state, X, y, K)


@pytest.mark.extended
def test_jit_equals_eager():
    X, y = _tiny(8, 3)
    with jax.enable_x64(True):
        hyper = _hyper()
        Y = jnp.asarray(np.stack([y, -y]))
        for ss in (False, True):
            data = projection_data(jnp.asarray(X), Y, ss)
            state = init_projection(0, data, 2, ss)
            assert_jit_equals_eager(build_projection_kernel(ss, True), jax.random.PRNGKey(3), state, data, hyper)


def test_null_space_draw_matches_the_conditional():
    """With p > n the projection draw has the exact conditional mean and covariance of eq. (7)."""
    from bayes_maxmargin.models.projection.gibbs import _dense_projection_step

    rng = np.random.default_rng(1)
    n, p = 3, 5
    F = rng.normal(size=(n, p))
    Z = rng.normal(size=(n, 1))
    alpha = 0.7
    prec = F.T @ F + alpha * np.eye(p)
    cov = np.linalg.inv(prec)
    mean = cov @ F.T @ Z[:, 0]
    with jax.enable_x64(True):
        data = projection_data(jnp.asarray(F), jnp.ones((1, n)), False)
        keys = jax.random.split(jax.random.PRNGKey(0), 40000)
        draws = jax.vmap(lambda k: _dense_projection_step(k, jnp.asarray(Z), jnp.asarray([alpha]), data, False))(keys)
    draws = np.asarray(draws)[:, :, 0]
    se = np.sqrt(np.diag(cov) / len(draws))
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se)
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.05 * np.abs(cov).max())


def _record_nuts_check(s):
    return {"A": s.A[0, :, 0], "Z": s.Z[0, :4, 0], "w": s.w[0, 0], "b": s.b[0], "alpha": s.alpha[0, 0],
            "sigma": s.sigma[0]}


def _sign_aligned(d):
    """Functions of the draws invariant to the posterior's symmetry (a, z, w) -> -(a, z, w)."""
    sgn = np.sign(d["w"])
    return {
        "abs_w": np.abs(d["w"]), "b": d["b"], "A": d["A"] * sgn[..., None], "Z": d["Z"] * sgn[..., None],
        "alpha": d["alpha"], "sigma": d["sigma"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("reference", ["projection_mmldp", "projection_separable"])
def test_gibbs_agrees_with_nuts(reference):
    """MMLDP Gibbs (with the shift of (b, z) that keeps f, :func:`bias_shift`, the moves of the scales of A and
    [w; b], :func:`scale_moves`, and the draw of (A, b) given the residuals, :func:`ancillary_projection_step`)
    and NUTS on the marginal program (the stored references ``projection_mmldp``
    and, with separable classes, ``projection_separable``): the marginals of w, a_k, z_n (sign-aligned, the
    posterior being symmetric under (a, z, w) -> -(a, z, w)), b, alpha and sigma agree within 4 combined MCSE,
    their sds within 25 % or within 4 MCSE of the sd (:func:`assert_posteriors_agree`: with separable classes a
    and z are heavy-tailed along the ridge that only the priors bound). Either scale move without its
    Jacobian (c^N_A, c^(K + 1)) moves a mean by 6-11 MCSE here. The final Gibbs state's log joint is the
    augmented program's. R-hat below 1.05: A w mixes slowest (bulk ESS per draw 0.006-0.06 on larger sets)."""
    g = _sign_aligned(_gibbs_on_the_nuts_problem(True, _record_nuts_check, reference == "projection_separable"))
    n = _sign_aligned(load_reference(reference).draws)
    assert_posteriors_agree(g, n, list(n), sd_rtol=0.25, max_rhat=1.05)


def test_bias_shift_keeps_f_and_draws_the_translation_conditional():
    """(b, Z) -> (b + delta, Z - delta w' / |w|^2) keeps every f_n = w' z_n + b (to rounding), and delta
    follows the density of the translated priors, log N(b + delta | 0, 1 / sigma) + sum_n log N(z_n - delta u |
    A' x_n, I), evaluated here directly: it is quadratic in delta, and its mean and variance (read off three
    evaluations) match those of 20 000 draws within 5 Monte Carlo standard errors."""
    rng = np.random.default_rng(0)
    n, K = 30, 3
    Z, FA = rng.normal(size=(n, K)), rng.normal(size=(n, K))
    w, b, sigma = rng.normal(size=K), 0.7, 2.0
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(0), 20_000)
        b_new, Z_new = jax.vmap(lambda k: bias_shift(k, Z, FA, w, b, sigma))(keys)
    f = np.asarray(Z_new) @ w + np.asarray(b_new)[:, None]
    np.testing.assert_allclose(f, np.broadcast_to(Z @ w + b, f.shape), rtol=1e-10, atol=1e-10)
    u = w / (w @ w)

    def log_density(d):
        return -0.5 * sigma * (b + d) ** 2 - 0.5 * np.sum((Z - d * u - FA) ** 2)

    lp = [log_density(d) for d in (-1.0, 0.0, 1.0)]
    curvature = lp[0] - 2 * lp[1] + lp[2]  # -precision
    var, mean = -1.0 / curvature, (lp[2] - lp[0]) / 2 / -curvature
    delta = np.asarray(b_new) - b
    assert abs(delta.mean() - mean) < 5 * np.sqrt(var / delta.size)
    assert abs(delta.var() / var - 1) < 5 * np.sqrt(2 / delta.size)


def test_scale_moves_keep_the_residuals_and_move_along_their_groups():
    """:func:`scale_moves` keeps the residuals Z - F A (to rounding) and Z itself but for the move of A, changes A
    and [w; b] only by positive factors (the groups of the moves), and moves both scales on most draws (a
    slice update that kept its point would leave a factor of exactly 1)."""
    rng = np.random.default_rng(3)
    n, D, K = 40, 5, 2
    F = rng.normal(size=(n, D))
    A, w, b = rng.normal(size=(D, K)), rng.normal(size=K), 0.3
    Z = F @ A + rng.normal(size=(n, K))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(0), 200)
        out, info = jax.vmap(lambda k: scale_moves(k, jnp.asarray(A), jnp.asarray(Z), jnp.asarray(F @ A),
                                                   jnp.asarray(w), jnp.asarray(b), jnp.ones(K), jnp.asarray(2.0),
                                                   jnp.asarray(y)))(keys)
    c_a = np.asarray(out.A)[:, 0, 0] / A[0, 0]
    c_w = np.asarray(out.w)[:, 0] / w[0]
    np.testing.assert_allclose(np.asarray(out.A), c_a[:, None, None] * A, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(out.FA), np.einsum("nd,sdk->snk", F, np.asarray(out.A)), atol=1e-10)
    np.testing.assert_allclose(np.asarray(out.Z) - np.asarray(out.FA), np.broadcast_to(Z - F @ A, out.Z.shape),
                               atol=1e-10)
    np.testing.assert_allclose(np.asarray(out.w), c_w[:, None] * w, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(out.b), c_w * b, rtol=1e-12)
    assert np.all(c_a > 0) and np.all(c_w > 0)
    assert np.mean(c_a != 1.0) > 0.9 and np.mean(c_w != 1.0) > 0.9
    assert np.all(np.asarray(info.move_stalled) == 0)


@pytest.mark.parametrize("K", [2, 1])
@pytest.mark.parametrize("n", [12, 4], ids=["n>=D", "n<D"])
def test_ancillary_step_leaves_the_conditional_of_a_and_b_invariant(n, K):
    """:func:`ancillary_projection_step` (K = 2 with one entry of A switched off as the spike and slab does, and
    K = 1, where A is u / w): started
    from draws of the exact conditional of (A's entries in use, b) given R = Z - F A, w, lambda, alpha and
    sigma (a Gaussian in 2 D - 1 + 1 coordinates, f_n = sum_k w_k x_n' a_k + r_n' w + b, written out here),
    one step leaves it: the means of 20 000 moved draws within 4.5 standard errors of the exact ones (a
    bound over up to 8 coordinates), their covariance within 6 % of its largest entry (the sd of a sample
    covariance entry is about sqrt(2 / 20000) = 1 % of the variances), the switched-off entry still 0. In
    the D x D form (n >= D) and the n x n form (n < D)."""
    rng = np.random.default_rng(7)
    D = 4
    F = rng.normal(size=(n, D))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    R = rng.normal(size=(n, K))
    w, alpha, sigma = np.array([0.8, -1.3])[:K], np.array([1.5, 0.6])[:K], 0.7
    lam = rng.gamma(2.0, 0.5, size=n)
    on = np.ones((D, K), bool)
    if K == 2:
        on[2, 1] = False
    # the exact conditional of theta = (A's entries in use, column by column, then b)
    cols = [(d, k) for k in range(K) for d in range(D) if on[d, k]]
    design = np.column_stack([w[k] * F[:, d] for d, k in cols] + [np.ones(n)])
    prior = np.array([alpha[k] for _, k in cols] + [sigma])
    target = y * (1.0 + lam) - R @ w
    cov = np.linalg.inv(np.diag(prior) + (design.T / lam) @ design)
    mean = cov @ (design.T @ (target / lam))
    draws = 20_000
    start = rng.multivariate_normal(mean, cov, size=draws)
    A0 = np.zeros((draws, D, K))
    for j, (d, k) in enumerate(cols):
        A0[:, d, k] = start[:, j]
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(0), draws)
        A, b = jax.jit(jax.vmap(lambda k, a, b: ancillary_projection_step(
            k, a, jnp.asarray(R), jnp.asarray(w), b, jnp.asarray(1.0 / lam), jnp.asarray(alpha), jnp.asarray(sigma),
            jnp.asarray(F), jnp.asarray(y), n >= D)))(keys, jnp.asarray(A0), jnp.asarray(start[:, -1]))
    A, b = np.asarray(A), np.asarray(b)
    assert np.all(A[:, ~on] == 0)
    moved = np.column_stack([A[:, d, k] for d, k in cols] + [b])
    se = np.sqrt(np.diag(cov) / draws)
    assert np.all(np.abs(moved.mean(0) - mean) < 4.5 * se), ((moved.mean(0) - mean) / se)
    np.testing.assert_allclose(np.cov(moved.T), cov, atol=0.06 * np.abs(cov).max())
    assert np.mean(np.abs(moved - start).max(1) > 1e-8) > 0.99  # it moved


def _gibbs_on_the_nuts_problem(latent, record, separable=False):
    """4 chains of 300 + 4000 sweeps on the reference problem (K = 1; ``separable``: its separable-class
    form); the final state's log joint checked against the augmented program."""
    X, y = (projection_separable if separable else _tiny)(PROJECTION_N, PROJECTION_P)
    with jax.enable_x64(True):
        data = projection_data(jnp.asarray(X), jnp.asarray(y)[None], False)
        init = init_projection(1, data, 1, False, num_chains=4)
        res = driver.run_chains(
            build_projection_kernel(False, True, latent), record, init, jax.random.PRNGKey(2), data, _hyper(),
            num_warmup=300, num_samples=4000,
        )
        _check_log_joint(jax.tree_util.tree_map(lambda a: a[0], res.final_state), X, y, 1, latent=latent)
    return {k: np.asarray(v) for k, v in res.samples.items()}



@pytest.mark.parametrize("n", [9, 3], ids=["n>=p", "n<p"])
def test_direct_projection_step_matches_eq_12(n):
    """Without the latent representation, the draw of a_k (here K = 2, the second column given the
    first) has eq. (12)'s mean and covariance, in the p x p form (n >= p) and the n x n form (n < p):
    the mean within 4 standard errors of 20000 draws, the covariance within 5 % of its largest entry
    (the sd of a sample covariance entry is about sqrt(2 / 20000) = 1 % of the variances)."""
    from bayes_maxmargin.models.projection.gibbs import direct_projection_step

    rng = np.random.default_rng(4)
    p = 4
    F = rng.normal(size=(n, p))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    A = rng.normal(size=(p, 2))
    w, b = np.array([0.0, 1.3]), 0.4  # w_1 = 0: the first column's draw is its prior, the second's is eq. (12)
    lam = rng.gamma(2.0, 0.5, size=n)
    alpha = np.array([1.0, 0.7])
    xi = 1.0 - y * (F @ A[:, 0] * w[0] + b)  # xi^-2
    cov = np.linalg.inv(w[1] ** 2 * (F.T / lam) @ F + alpha[1] * np.eye(p))
    mean = cov @ (w[1] * F.T @ ((xi + lam) / lam * y))
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(0), 20000)
        draws = jax.jit(jax.vmap(lambda k: direct_projection_step(
            k, jnp.asarray(A), jnp.asarray(w), b, jnp.asarray(1.0 / lam), jnp.asarray(alpha), jnp.asarray(F),
            jnp.asarray(y), n >= p)))(keys)
    draws = np.asarray(draws)
    np.testing.assert_allclose(draws[:, :, 0].var(0), 1.0 / alpha[0], rtol=0.05)  # 4 sd of a variance estimate
    second = draws[:, :, 1]
    se = np.sqrt(np.diag(cov) / len(second))
    assert np.all(np.abs(second.mean(0) - mean) < 4 * se), (second.mean(0), mean)
    np.testing.assert_allclose(np.cov(second.T), cov, atol=0.05 * np.abs(cov).max())


def _record_direct(s):
    return {"A": s.A[0], "w": s.w[0], "b": s.b[0], "alpha": s.alpha[0], "sigma": s.sigma[0]}


def test_log_joint_without_latent_representation_is_the_augmented_program():
    """Without z_n the state's log joint is NumPyro's log density of the augmented program
    ``mmdp(..., latent_representation=False)`` (no Z site), and Z holds F A; here n < p (the n x n
    form of eq. 12)."""
    n, p, K = 5, 7, 2
    X, y = _tiny(n, p)
    with jax.enable_x64(True):
        data = projection_data(jnp.asarray(X), jnp.asarray(y)[None], False)
        state = init_projection(0, data, K, False)
        kernel = jax.jit(build_projection_kernel(False, False, False))
        for i in range(3):
            state, _ = kernel(jax.random.PRNGKey(i), state, data, _hyper())
        _check_log_joint(state, X, y, K, latent=False)
    np.testing.assert_allclose(np.asarray(state.Z[0]), X @ np.asarray(state.A[0]), rtol=1e-12)


def test_spike_slab_needs_the_latent_representation():
    with pytest.raises(ValueError, match="latent"):
        build_projection_kernel(True, True, False)


@pytest.mark.extended
def test_gibbs_without_latent_representation_agrees_with_nuts():
    """The Gibbs kernel without z_n (eq. 12) and NUTS on the same program (``mmdp(...,
    latent_representation=False)``, the stored reference ``projection_direct``): f = x' A w + b at four
    inputs, b and the logs of |w|, ||a||, alpha, sigma (the scale of a and w is heavy tailed, so the
    logs, which have every moment, are compared): both converged, means within 4 combined MCSE
    (a 4-sigma band: about 1 in 16000 per quantity under agreement), sds within 10 % or 4 MCSE of
    the sd (the shared criterion of :func:`tests._posterior.assert_posteriors_agree`). The final
    state's log joint is the augmented program's.
    Sensitivity: the same kernel with eq. (13)'s denominators lambda_n + w_k^2 misses by 7-14 MCSE."""
    X, _ = _tiny(PROJECTION_N, PROJECTION_P)
    gibbs = projection_direct_statistics(X, _gibbs_on_the_nuts_problem(False, _record_direct))
    nuts = load_reference("projection_direct").draws
    assert_posteriors_agree(gibbs, nuts, list(nuts))


def test_spike_slab_step_matches_enumeration():
    """The spike-and-slab step alone (eq. 22), iterated with Z, alpha, pi fixed, samples the exact
    conditional of Theta: the usage-pattern frequencies match the 2^(M K) enumerated posterior
    probabilities (chi-square) and the means of theta their exact values."""
    rng = np.random.default_rng(2)
    n, M, K = 8, 3, 2
    F = rng.normal(size=(n, M))
    Z = F @ np.array([[1.0, 0.0], [0.0, 0.0], [0.5, -0.8]]) + rng.normal(size=(n, K))
    alpha = np.array([0.8, 1.5])
    pi = np.array([0.3, 0.5, 0.6])
    # exact posterior over the patterns S (M x K): p(S) prop. to prior(S) prod_k N(z_k | 0, I + F_S F_S' / alpha_k)
    patterns = np.array(list(itertools.product([0, 1], repeat=M * K))).reshape(-1, M, K)
    logp, means = [], []
    for S in patterns:
        lp = np.sum(S * np.log(pi)[:, None] + (1 - S) * np.log1p(-pi)[:, None])
        mean = np.zeros((M, K))
        for k in range(K):
            on = S[:, k].astype(bool)
            Fs = F[:, on]
            lp += stats.multivariate_normal(np.zeros(n), np.eye(n) + Fs @ Fs.T / alpha[k]).logpdf(Z[:, k])
            if on.any():
                mean[on, k] = np.linalg.solve(Fs.T @ Fs + alpha[k] * np.eye(on.sum()), Fs.T @ Z[:, k])
        logp.append(lp)
        means.append(mean)
    p = np.exp(np.array(logp) - np.logaddexp.reduce(logp))
    exact_mean = np.einsum("s,smk->mk", p, np.array(means))

    n_chains, n_iter = 4000, 25
    with jax.enable_x64(True):
        B, G = jnp.asarray(F.T @ Z), jnp.asarray(F.T @ F)

        def chain(key):
            def body(theta, k):
                return spike_slab_step(k, theta, B, G, jnp.asarray(alpha), jnp.asarray(pi)), None

            theta0 = jnp.ones((M, K))
            theta, _ = jax.lax.scan(body, theta0, jax.random.split(key, n_iter))
            return theta

        theta = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.PRNGKey(0), n_chains)))
    codes = (theta != 0).reshape(n_chains, -1) @ (2 ** np.arange(M * K)[::-1])
    counts = np.bincount(codes, minlength=len(p))
    expected = n_chains * p
    big = expected >= 5
    chi2 = np.sum((counts[big] - expected[big]) ** 2 / expected[big])
    rest = counts[~big].sum()
    assert stats.chi2.sf(chi2, big.sum() - 1) > 1e-3, (chi2, counts, expected)
    assert rest <= expected[~big].sum() + 5 * np.sqrt(expected[~big].sum() + 1)
    se = theta.std(0) / np.sqrt(n_chains)
    assert np.all(np.abs(theta.mean(0) - exact_mean) < 4 * se + 1e-12), (theta.mean(0), exact_mean)


def test_dense_warmup_starts_the_spike_and_slab_from_the_dense_draw():
    """ssKMMDP with ``dense_warmup`` = 3: the first sweeps draw Theta as KMMDP does (eq. 20, the same
    draw from the same state and key, every entry non-zero); from the fourth sweep the
    spike-and-slab step (eq. 22) switches entries off."""
    n, p, K = 40, 6, 2
    X, y = _tiny(n, p)
    with jax.enable_x64(True):
        dense_data = projection_data(jnp.asarray(X), jnp.asarray(y)[None], False)
        ss_data = projection_data(jnp.asarray(X), jnp.asarray(y)[None], True)
        hyper = _hyper()._replace(dense_warmup=jnp.asarray(3.0))
        dense_kernel, ss_kernel = (jax.jit(build_projection_kernel(ss)) for ss in (False, True))
        key = jax.random.PRNGKey(3)
        first_dense, _ = dense_kernel(key, init_projection(0, dense_data, K, False), dense_data, hyper)
        state = init_projection(0, ss_data, K, True)
        zeros = []
        for i in range(12):
            state, _ = ss_kernel(key if i == 0 else jax.random.PRNGKey(10 + i), state, ss_data, hyper)
            if i == 0:
                np.testing.assert_allclose(state.A, first_dense.A, rtol=1e-12)
            zeros.append(int(jnp.sum(state.A == 0)))
    assert zeros[:3] == [0, 0, 0]
    assert sum(zeros[3:]) > 0, zeros


def test_gamma_draws_are_gamma():
    """The fixed-proposal Marsaglia-Tsang sampler: Kolmogorov-Smirnov against scipy's Gamma for
    shapes below and above 1, independent keys per shape."""
    from bayes_maxmargin.models.projection.gibbs import gamma_draws

    shapes = (0.3, 1.0, 2.5, 60.0)
    with jax.enable_x64(True):
        draws = jax.jit(lambda k: gamma_draws(k, jnp.repeat(jnp.asarray(shapes), 50_000)))(jax.random.PRNGKey(5))
    draws = np.asarray(draws).reshape(len(shapes), -1)
    for a, x in zip(shapes, draws):
        assert np.all(x > 0)
        assert stats.kstest(x, stats.gamma(a).cdf).pvalue > 1e-3, a
