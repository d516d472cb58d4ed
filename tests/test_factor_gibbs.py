"""Gibbs kernels of the discriminative factor models (Henao et al. 2014, Sec. 5).

The factor model is identified only up to signed permutations of the factors ((a_k, w_k, beta_k)
-> (-a_k, -w_k, -beta_k) leaves the joint unchanged), so the samplers are compared on quantities
invariant to them: psi, |beta|, the intercept, gamma, |a_11| and y_n f_n.
"""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core.kernels import LinearParams, SEParams, get_kernel
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.engine.nuts import run_nuts
from bayes_maxmargin.models.factor.gibbs import (
    build_factor_kernel,
    ess_step,
    init_factor,
    log_marginal_z,
    q_solve,
    record_factor,
    replace_score_inverse,
    score_loglik,
)
from bayes_maxmargin.models.factor.model import FactorData, FactorHyper, factor_bsvm
from bayes_maxmargin.models.gp.covariance import pseudo_obs_scaled

from ._posterior import assert_posteriors_agree
from .reference import FACTOR_GAMMA0 as GAMMA0
from .reference import FACTOR_PROBIT_THETA
from .reference import factor_separable, factor_tiny, load_reference


@pytest.fixture(scope="module")
def tiny():
    return factor_tiny()


def _hyper():
    return FactorHyper(*(jnp.asarray(v) for v in (1.0, 2.0, 1.0, 1.0, 2.0, 1.0, GAMMA0, 1.0, 1.0)))


def _gibbs(X, y, classifier, theta, kernel="rbf", fit_intercept=True, n_iter=1500, seed=0, sample_gamma=False,
           n_blocks=2, link="hinge"):
    hyper = _hyper()
    data = FactorData(jnp.asarray(X), jnp.asarray(y), theta, jnp.asarray(1e-6))
    kern = build_factor_kernel(classifier, sample_gamma, False, fit_intercept, kernel, n_blocks, link=link)
    s0 = init_factor(data, hyper, 1, classifier, link=link)
    init = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (4,) + a.shape), s0)
    res = run_chains(kern, record_factor, init, jax.random.PRNGKey(seed), data, hyper,
                     num_warmup=300, num_samples=n_iter, progress_bar=False)
    return res.samples


def _invariants(s, y, linear: bool):
    out = {"psi": s["psi"], "absA": np.abs(s["A"][..., 0, 0]),
           "yf0": s["f"][..., 0] * y[0], "yf1": s["f"][..., 1] * y[1]}
    if linear:
        beta = s["coef"][..., 0] if "coef" in s else s["beta"][..., 0]
        out["absbeta"] = np.abs(beta)
    return out


def _nuts(X, y, classifier, theta, gamma_prior=None, **kw):
    kwargs = dict(n_factors=1, classifier=classifier, nu=1.0, psi_prior=(2.0, 1.0), gamma_prior=gamma_prior,
                  gamma0=GAMMA0, intercept_scale=1.0, kernel_params=theta, marginal_phi=True)
    samples, stats = run_nuts(factor_bsvm, jax.random.PRNGKey(1), (jnp.asarray(X), jnp.asarray(y)), kwargs,
                              num_chains=4, **kw)
    return samples


@pytest.mark.parametrize("reference", ["factor_linear", "factor_linear_separable"])
def test_linear_gibbs_agrees_with_nuts(tiny, reference):
    """Linear discriminative factor model: Gibbs (phi, A, psi, lambda, [beta, b] with its moves, W, gamma)
    against NUTS on the program with phi and lambda integrated out (the stored references ``factor_linear``
    and, with separable classes, ``factor_linear_separable``), within 4 MCSE."""
    X, y = factor_separable() if reference == "factor_linear_separable" else tiny
    nuts = load_reference(reference).draws
    with jax.enable_x64(True):
        gibbs = _gibbs(X, y, "linear", SEParams())
    nuts["coef"] = np.stack([nuts["beta"][..., 0], nuts["intercept"]], -1)
    assert_posteriors_agree(_invariants(gibbs, y, True), _invariants(nuts, y, True),
                            ["psi", "absbeta", "absA", "yf0", "yf1"], sd_rtol=0.15)


def test_the_scale_move_keeps_the_fit_and_the_classifier():
    """rescale_factors moves (a_k, w_k, beta_k) to (c_k a_k, w_k / c_k, c_k beta_k): W A' and W beta stay
    (to float64 rounding: a few ulps of the products' entries), every c_k moves. Its target is checked with
    the sampler's against NUTS (test_linear_gibbs_agrees_with_nuts; without the Jacobian c^(d + 1 - n)
    the references differ by 26 MCSE, with its exponent one short by 5)."""
    from bayes_maxmargin.models.factor.gibbs import rescale_factors

    rng = np.random.default_rng(0)
    A, W, beta = rng.normal(size=(6, 3)), rng.normal(size=(40, 3)), rng.normal(size=3)
    with jax.enable_x64(True):
        A2, W2, beta2, evaluations = rescale_factors(jax.random.PRNGKey(0), jnp.asarray(A), jnp.asarray(W),
                                                     jnp.asarray(beta), jnp.ones((6, 3)), jnp.ones(3))
    np.testing.assert_allclose(np.asarray(W2) @ np.asarray(A2).T, W @ A.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(W2) @ np.asarray(beta2), W @ beta, rtol=1e-12, atol=1e-12)
    scale = np.asarray(A2)[0] / A[0]
    assert np.all(np.abs(np.log(scale)) > 0) and int(evaluations) >= 3


def test_the_gp_classifiers_scale_move_keeps_the_fit_and_follows_its_likelihood():
    """Without beta (the GP classifier) rescale_factors keeps W A' and evaluates its likelihood at the moved
    scores W / c: given one sharp about ||w_k / c_k|| = 2 ||w_k|| (weight 5e4 on the squared log, sd 0.003),
    30 updates bring every c_k to within 2 % of 1/2 (the priors shift its mode by about 0.3 %). Its target
    with log Z of eq. (9) is checked with the sampler's against NUTS (test_probit_gp_gibbs_agrees_with_nuts,
    test_gp_gibbs_agrees_with_nuts) and against the linear sampler through the linear kernel
    (test_gp_ess_sampler_with_linear_kernel_is_the_linear_sampler); a Jacobian exponent three too large
    fails them by 5-10 MCSE."""
    from bayes_maxmargin.models.factor.gibbs import rescale_factors

    rng = np.random.default_rng(1)
    n, d, K = 30, 5, 2
    A0, W0 = rng.normal(size=(d, K)), rng.normal(size=(n, K))
    target = 2.0 * np.linalg.norm(W0, axis=0)

    def loglik(V):
        return -5e4 * jnp.sum((jnp.log(jnp.linalg.norm(V, axis=0)) - jnp.log(target)) ** 2)

    with jax.enable_x64(True):
        A, W = jnp.asarray(A0), jnp.asarray(W0)
        for i in range(30):
            A, W, beta, _ = rescale_factors(jax.random.PRNGKey(i), A, W, None, jnp.ones((d, K)), jnp.ones(K), loglik)
    assert beta is None
    np.testing.assert_allclose(np.asarray(W) @ np.asarray(A).T, W0 @ A0.T, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(A)[0] / A0[0], 0.5, rtol=0.02)


@pytest.mark.parametrize("n_blocks", [2, None], ids=["blocks", "one_score_at_a_time"])
def test_gp_ess_sampler_with_linear_kernel_is_the_linear_sampler(tiny, n_blocks):
    """With the linear kernel k(w, w') = w'w the GP classifier is the linear one without intercept:
    the collapsed elliptical slice sampler of W (eq. 14), blocked or one score at a time, and the
    conjugate linear sampler, different kernels, must give the same posterior."""
    X, y = tiny
    with jax.enable_x64(True):
        gp = _gibbs(X, y, "gp", LinearParams(1.0), kernel="linear", n_blocks=n_blocks)
        lin = _gibbs(X, y, "linear", LinearParams(1.0), fit_intercept=False, seed=1)
    names = ["psi", "absA", "yf0", "yf1"]
    assert_posteriors_agree(_invariants(gp, y, False), _invariants(lin, y, False), names, sd_rtol=0.15)


@pytest.mark.extended
def test_gp_gibbs_agrees_with_nuts(tiny):
    """GP discriminative factor model (SE kernel) against NUTS (slow: several minutes)."""
    X, y = tiny
    theta = SEParams(1.5, 1.0)
    with jax.enable_x64(True):
        gibbs = _gibbs(X, y, "gp", theta, n_iter=4000, sample_gamma=True)
        nuts = _nuts(X, y, "gp", theta, gamma_prior=(2.0, 1.0), num_warmup=1000, num_samples=2000)
    inv_g, inv_n = _invariants(gibbs, y, False), _invariants(nuts, y, False)
    inv_g["gamma"], inv_n["gamma"] = gibbs["gamma"], nuts["gamma"]
    assert_posteriors_agree(inv_g, inv_n, ["psi", "gamma", "absA", "yf0", "yf1"], sd_rtol=0.15)


def _yf_invariants(s, y):
    """psi, |a_11| and y_n f_n at every training point (f is invariant to the signs of the factors)."""
    return {"psi": s["psi"], "absA": np.abs(s["A"][..., 0, 0]), **{f"yf{i}": s["f"][..., i] * y[i] for i in range(len(y))}}


def test_probit_gp_gibbs_agrees_with_nuts(tiny):
    """The joint nonlinear factor model with the probit link: the Albert & Chib Gibbs sweep (z | f, y;
    W | z with f integrated out, by elliptical slice; f | W, z) against NUTS on the program with the
    Bernoulli(Phi(f)) likelihood and phi integrated out (the stored reference ``factor_probit``). Means
    within 4 MCSE (a false alarm about 1 in 16 000 per quantity), sds within 15 % or 4 MCSE of the sd."""
    X, y = tiny
    nuts = load_reference("factor_probit").draws
    with jax.enable_x64(True):
        gibbs = _gibbs(X, y, "gp", SEParams(*FACTOR_PROBIT_THETA), n_iter=600, link="probit")
    assert set(gibbs) >= {"z"} and np.all(gibbs["z"] * y > 0)  # the augmentation keeps the sign of y
    names = ["psi", "absA", *(f"yf{i}" for i in range(len(y)))]
    assert_posteriors_agree(_yf_invariants(gibbs, y), _yf_invariants(nuts, y), names, sd_rtol=0.15)


@pytest.mark.extended
def test_probit_linear_sampler_is_the_gp_sampler_with_linear_kernel(tiny):
    """The probit link on the linear classifier without intercept (conjugate [beta] | W, z and w_n | z) and
    on the GP classifier with the linear kernel (W | z by elliptical slice, f | W, z) are one model: the two
    samplers must give the same posterior (as the max-margin pair above; about a minute on two cores)."""
    X, y = tiny
    with jax.enable_x64(True):
        gp = _gibbs(X, y, "gp", LinearParams(1.0), kernel="linear", link="probit")
        lin = _gibbs(X, y, "linear", LinearParams(1.0), fit_intercept=False, seed=1, link="probit")
    names = ["psi", "absA", *(f"yf{i}" for i in range(len(y)))]
    assert_posteriors_agree(_yf_invariants(gp, y), _yf_invariants(lin, y), names, sd_rtol=0.15)


def test_score_loglik_is_the_change_in_log_z():
    """The one-score update's O(n^2) term (a Schur complement) changes exactly as log Z of eq. (9)
    when w_j moves, and the updated B^-1 is the inverse at the new scores."""
    rng = np.random.default_rng(0)
    n, K = 40, 3
    with jax.enable_x64(True):
        W = jnp.asarray(rng.normal(size=(n, K)))
        y = jnp.asarray(np.sign(rng.normal(size=n)))
        inv_lam, gamma = jnp.asarray(rng.gamma(1.0, 1.0, size=n)), jnp.asarray(1.7)
        data = FactorData(jnp.zeros((n, 5)), y, SEParams(1.3, 2.0), jnp.asarray(1e-6))
        kf = get_kernel("rbf")
        s, st = jnp.sqrt(gamma * inv_lam), pseudo_obs_scaled(y, inv_lam, gamma)

        def inverse(W):
            return np.linalg.inv(np.eye(n) + s[:, None] * (kf(data.theta, W, W) + 1e-6 * np.eye(n)) * s[None, :])

        P = jnp.asarray(inverse(W))

        @jax.jit
        def move(j, w):
            v = q_solve(P, j, st)
            new, var, qc = score_loglik(w, j, W, P, v, s, st, data, kf)
            old = score_loglik(W[j], j, W, P, v, s, st, data, kf)[0]
            W2 = W.at[j].set(w)
            change = log_marginal_z(W2, data, kf, inv_lam, gamma) - log_marginal_z(W, data, kf, inv_lam, gamma)
            return new - old, change, replace_score_inverse(P, j, var, qc), W2

        for j in (0, 7, n - 1):
            got, expected, P2, W2 = move(j, jnp.asarray(rng.normal(size=K)))
            np.testing.assert_allclose(float(got), float(expected), rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(P2, inverse(W2), atol=1e-12)


def test_elliptical_slice_step_alone():
    """The masked elliptical slice step leaves a conjugate Gaussian posterior invariant: prior
    N(0, I), likelihood N(obs | z, 0.5^2) on every coordinate, the analytic posterior N(obs / 1.25,
    0.2 I); half the rows moved per step (alternating blocks), the rest held."""
    obs = jnp.array([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.0]])

    def loglik(z):
        return -0.5 * jnp.sum((z - obs) ** 2) / 0.25

    masks = jnp.array([[True, False, True], [False, True, False]])

    def step(z, k):
        z, _, _ = ess_step(k, z, masks[jax.random.bernoulli(k).astype(int)], loglik)
        return z, z

    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(0), 40_000)
        _, zs = jax.lax.scan(step, jnp.zeros((3, 2)), keys)
        zs = np.asarray(zs[2000:])
    post = az.summary(az.from_dict({"posterior": {"z": zs[None]}}), round_to="none")
    mean = np.asarray(obs / 1.25).ravel()
    err = np.abs(post["mean"].to_numpy() - mean) / post["mcse_mean"].to_numpy()
    assert (err < 4).all(), err
    np.testing.assert_allclose(post["sd"].to_numpy(), np.sqrt(0.2), rtol=0.05)


def test_held_rows_do_not_move():
    z0 = jnp.arange(6.0).reshape(3, 2)
    z1, _, n_eval = ess_step(jax.random.PRNGKey(3), z0, jnp.array([False, True, False]), lambda z: -jnp.sum(z**2))
    np.testing.assert_array_equal(np.asarray(z1)[[0, 2]], np.asarray(z0)[[0, 2]])
    assert not np.allclose(z1[1], z0[1]) and int(n_eval) >= 1
