"""VB of Luts & Ormerod (2014), Algorithms 1-4: monotone lower bounds, bounds equal to an independent
Monte Carlo estimate of E_q[log p(y, theta)] - E_q[log q(theta)], and the special cases that must agree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import log_density

from bayes_maxmargin.core.distributions import GeneralizedInverseGaussian, InverseGaussian
from bayes_maxmargin.core.linalg import sample_mvn_precision
from bayes_maxmargin.models.linear.model import LinearData, linear_bsvm
from bayes_maxmargin.models.luts.model import (
    ImputationHyper,
    LutsHyper,
    MissingData,
    MixedData,
    laplace_zero_bsvm,
    missing_bsvm,
    mixed_bsvm,
)
from bayes_maxmargin.models.luts.vb import vb_gaussian, vb_laplace_zero, vb_missing, vb_penalty

HYPER = dict(sigma_beta2=100.0, A_u=2.0, B_u=1.0, rho=0.3)


def _hyper(**kw):
    h = {**HYPER, **kw}
    return LutsHyper(*(jnp.asarray(h[k], jnp.float64) for k in ("sigma_beta2", "A_u", "B_u", "rho")))


def _data(n=30, d=3, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    coef = np.array([1.5, -1.0, 0.0, 0.5, 0.0])[:d]
    y = np.where(X @ coef + 0.3 + noise * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _groups(n, m, seed=1):
    g = np.random.default_rng(seed).integers(0, m, n)
    return np.eye(m)[g]


def _trace(res):
    return np.asarray(res.lower_bound[: int(res.n_iter)])


def _assert_monotone(lb):
    assert len(lb) > 3
    assert np.all(np.isfinite(lb))
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


def _mixed(X, y, Z=None):
    n = len(y)
    if Z is None:  # Example 1: penalty parameter inference
        return MixedData(jnp.ones((n, 1)), jnp.asarray(X), jnp.asarray(y))
    return MixedData(jnp.asarray(np.hstack([np.ones((n, 1)), X])), jnp.asarray(Z), jnp.asarray(y))


def _missing(X, y, frac=0.25, seed=2):
    obs = (np.random.default_rng(seed).uniform(size=X.shape) > frac).astype(float)
    obs[:, 0] = 1.0  # one complete column
    return MissingData(jnp.asarray(np.where(obs > 0, X, 0.0)), jnp.asarray(obs), jnp.asarray(y)), obs


#: The VB loops' max_iter (static: one compiled program per value) in every test that does not test
#: the limit or the defaults: the fits of one problem shape then share their compiled program across
#: the tests (passed the same way, as keywords with tol: jit compiles per signature too).
MAX_ITER = 3000
SHARED = dict(max_iter=MAX_ITER, accelerate=False)


def _alg4_problem():
    """Algorithm 4's problem: 12 rows, 2 columns, about 30 % of the second column missing."""
    X, y = _data(n=12, d=2)
    imp = ImputationHyper(jnp.asarray(10.0), 0.5 * jnp.eye(2), jnp.asarray(4.0))
    data, obs = _missing(X, y, frac=0.3)
    return data, obs, imp


# ---------------------------------------------------------------------------------------- monotone
def _fit(algorithm, tol=0.0, max_iter=200, accelerate=False):
    """The problems of the bound checks below (12 rows, 2 columns), so that the plain fits reuse
    their compiled programs."""
    X, y = _data(n=12, d=2)
    hyper = _hyper()
    kw = dict(tol=tol, max_iter=max_iter, accelerate=accelerate)
    if algorithm == "alg1":
        design = jnp.asarray(np.hstack([X, np.ones((12, 1))]))
        return vb_gaussian(LinearData(design, jnp.asarray(y)), jnp.array([4.0, 4.0, 0.01]), **kw)
    if algorithm == "alg2_penalty":
        return vb_penalty(_mixed(X, y), hyper, **kw)
    if algorithm == "alg2_random_intercept":
        return vb_penalty(_mixed(X, y, _groups(12, 3)), hyper, **kw)
    if algorithm == "alg3":
        return vb_laplace_zero(_mixed(X, y), _hyper(rho=0.2), **kw)
    data, _, imp = _alg4_problem()
    return vb_missing(data, hyper, imp, **kw)


ALGORITHMS = ["alg1", "alg2_penalty", "alg2_random_intercept", "alg3", "alg4"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_lower_bound_never_decreases_and_squarem_reaches_the_same_fixed_point(x64, algorithm):
    """Plain sweeps and SQUAREM cycles both increase the bound at every iteration. Against 3000
    plain sweeps (tol = 0), the accelerated fit stopped at tol = 1e-10 is at least as close as the
    plain fit stopped there, with a third of its sweeps or fewer."""
    ref = _fit(algorithm, tol=0.0, max_iter=MAX_ITER)
    plain = _fit(algorithm, tol=1e-10, max_iter=MAX_ITER)
    fast = _fit(algorithm, tol=1e-10, max_iter=MAX_ITER, accelerate=True)
    _assert_monotone(_trace(ref))
    _assert_monotone(_trace(fast))
    assert int(plain.n_iter) < MAX_ITER
    assert 3 * int(fast.n_iter) < int(plain.n_iter)  # three sweeps per cycle
    b_ref = _trace(ref)[-1]
    assert abs(_trace(fast)[-1] - b_ref) <= abs(_trace(plain)[-1] - b_ref) + 1e-12 * abs(b_ref)
    err_fast = np.abs(np.asarray(fast.state.mean - ref.state.mean)).max()
    err_plain = np.abs(np.asarray(plain.state.mean - ref.state.mean)).max()
    assert err_fast <= err_plain + 1e-7, (err_fast, err_plain)


def test_stops_at_the_papers_tolerance(x64):
    """The loop stops at the first sweep whose increase is below tol (1e-10 by default)."""
    X, y = _data(n=12, d=2)
    res = vb_penalty(_mixed(X, y), _hyper())
    lb = _trace(res)
    assert int(res.n_iter) < 1000
    assert lb[-1] - lb[-2] < 1e-10
    assert np.all(np.diff(lb)[:-1] >= 1e-10)
    assert np.all(np.isnan(np.asarray(res.lower_bound[int(res.n_iter):])))


# ---------------------------------------------------------------------------------------- bounds = MC
S = 10_000


def _mc_check(draws, state, bound, seed=0):
    """E_q[log p - log q] by Monte Carlo, within 4 standard errors of the closed form.

    ``draws(key, state) -> (log_p, log_q)`` runs as one compiled program."""
    log_p, log_q = jax.jit(draws)(jax.random.PRNGKey(seed), state)
    diff = np.asarray(log_p - log_q)
    assert np.all(np.isfinite(diff))
    est, se = diff.mean(), diff.std() / np.sqrt(diff.size)
    assert 4 * se < 0.2, se  # precise enough to see a wrong constant (log 2, 1/2, ...) in the bound
    assert abs(est - float(bound)) < 4 * se + 1e-9 * abs(float(bound)), (est, se, float(bound))


def _log_p(model, args, kwargs, params):
    return jax.vmap(lambda p: log_density(model, args, kwargs, p)[0])(params)


def _gig_draws(key, chi):
    q = GeneralizedInverseGaussian(0.5, 1.0, chi)
    a = q.sample(key, (S,))
    return a, jnp.sum(q.log_prob(a), axis=-1)


def _gaussian_draws(key, mean, prec_chol):
    x = sample_mvn_precision(key, prec_chol, mean, (S,))
    cov = jnp.linalg.inv(prec_chol @ prec_chol.T)  # reference computation only
    return x, dist.MultivariateNormal(mean, cov).log_prob(x)


def _sigma_draws(key, hyper, m, B_sigma):
    q = dist.InverseGamma(hyper.A_u + m / 2, B_sigma)
    s2 = q.sample(key, (S,))
    return s2, q.log_prob(s2)


def test_alg1_lower_bound_is_the_elbo(x64):
    X, y = _data(n=12, d=2)
    alpha = 0.3
    data = LinearData(jnp.asarray(X), jnp.asarray(y))
    res = vb_gaussian(data, jnp.full(2, 4 * alpha))
    kwargs = dict(sigma=(4 * alpha) ** -0.5, fit_intercept=False, gamma=1.0, augmented=True)

    def draws(key, s):
        k1, k2 = jax.random.split(key)
        beta, lq_b = _gaussian_draws(k1, s.mean, s.prec_chol)
        a, lq_a = _gig_draws(k2, s.chi)
        return _log_p(linear_bsvm, (data.design, data.y), kwargs, {"beta": beta, "lam": a}), lq_b + lq_a

    _mc_check(draws, res.state, _trace(res)[-1])


@pytest.mark.parametrize("random_intercept", [pytest.param(False, marks=pytest.mark.extended), True])
def test_alg2_lower_bound_is_the_elbo(x64, random_intercept):
    X, y = _data(n=12, d=2)
    data = _mixed(X, y, _groups(12, 3) if random_intercept else None)
    hyper = _hyper()
    res = vb_penalty(data, hyper)
    p, m = data.X.shape[1], data.Z.shape[1]
    kwargs = dict(sigma_beta2=HYPER["sigma_beta2"], A_u=HYPER["A_u"], B_u=HYPER["B_u"], augmented=True)

    def draws(key, s):
        k1, k2, k3 = jax.random.split(key, 3)
        coef, lq_c = _gaussian_draws(k1, s.mean, s.prec_chol)
        a, lq_a = _gig_draws(k2, s.chi)
        s2, lq_s2 = _sigma_draws(k3, hyper, m, s.B_sigma)
        lp = _log_p(mixed_bsvm, (data.X, data.Z, data.y), kwargs,
                    {"beta": coef[:, :p], "u": coef[:, p:], "sigma_u2": s2, "lam": a})
        return lp, lq_c + lq_a + lq_s2

    _mc_check(draws, res.state, _trace(res)[-1], seed=1)


def test_alg3_lower_bound_is_the_elbo(x64):
    X, y = _data(n=12, d=3)
    data = _mixed(X, y)
    hyper = _hyper(rho=0.4)
    res = vb_laplace_zero(data, hyper, tol=1e-10, **SHARED)
    p, m = 1, 3
    kwargs = dict(rho=0.4, sigma_beta2=HYPER["sigma_beta2"], A_u=HYPER["A_u"], B_u=HYPER["B_u"], augmented=True)

    def draws(key, s):
        keys = jax.random.split(key, 5)
        coef = jax.random.multivariate_normal(keys[0], s.mean, s.cov, (S,))
        lq = dist.MultivariateNormal(s.mean, s.cov).log_prob(coef)
        a, lq_a = _gig_draws(keys[1], s.chi)
        s2, lq_s2 = _sigma_draws(keys[2], hyper, m, s.B_sigma)
        q_b = InverseGaussian(s.mu_b, 1.0)
        b = q_b.sample(keys[3], (S,))
        q_g = dist.Bernoulli(probs=jnp.clip(s.mu_gamma, 1e-300, 1.0))
        g = q_g.sample(keys[4], (S,)).astype(jnp.float64)
        lq = lq + lq_a + lq_s2 + jnp.sum(q_b.log_prob(b), -1) + jnp.sum(q_g.log_prob(g), -1)
        lp = _log_p(laplace_zero_bsvm, (data.X, data.Z, data.y), kwargs,
                    {"beta": coef[:, :p], "v": coef[:, p:], "b": b, "gamma": g, "sigma_u2": s2, "lam": a})
        return lp, lq

    _mc_check(draws, res.state, _trace(res)[-1], seed=2)


def test_alg4_lower_bound_is_the_elbo(x64):
    data, obs, imp = _alg4_problem()
    hyper = _hyper()
    Psi = imp.Psi
    res = vb_missing(data, hyper, imp, tol=1e-10, **SHARED)
    n, d = 12, 2
    rows, cols = np.nonzero(obs == 0)
    kwargs = dict(sigma_beta2=HYPER["sigma_beta2"], A_u=HYPER["A_u"], B_u=HYPER["B_u"], sigma_mu2=10.0,
                  Psi=Psi, nu=4.0, augmented=True)

    def draws(key, s):
        keys = jax.random.split(key, 6)
        coef = jax.random.multivariate_normal(keys[0], s.mean, s.cov, (S,))
        lq = dist.MultivariateNormal(s.mean, s.cov).log_prob(coef)
        a, lq_a = _gig_draws(keys[1], s.chi)
        s2, lq_s2 = _sigma_draws(keys[2], hyper, d, s.B_sigma)
        q_mu = dist.MultivariateNormal(s.mu_mean, s.mu_cov)
        mu = q_mu.sample(keys[3], (S,))
        q_sig = dist.InverseWishart(imp.nu + n, scale_matrix=s.Psi_q)
        Sig = q_sig.sample(keys[4], (S,))
        # q(D_mis): independent Gaussians per row over its missing entries
        cov_full = s.D_cov + jnp.asarray(np.eye(d)[None] * obs[:, :, None])  # identity on observed entries
        q_d = dist.MultivariateNormal(s.D_mean, cov_full)
        D = jnp.where(jnp.asarray(obs) > 0, s.D_mean, q_d.sample(keys[5], (S,)))
        lq_d = jnp.sum(q_d.log_prob(D), -1) + 0.5 * np.log(2 * np.pi) * obs.sum()
        lq = lq + lq_a + lq_s2 + q_mu.log_prob(mu) + q_sig.log_prob(Sig) + lq_d
        lp = _log_p(missing_bsvm, (data.D, obs > 0, data.y), kwargs,
                    {"beta": coef[:, 0], "u": coef[:, 1:], "sigma_u2": s2, "lam": a, "mu": mu, "Sigma": Sig,
                     "D_mis": D[:, rows, cols]})
        return lp, lq

    _mc_check(draws, res.state, _trace(res)[-1], seed=3)


# ---------------------------------------------------------------------------------------- special cases
def test_missing_data_vb_without_missing_values_is_alg2(x64):
    """With every entry observed, Algorithm 4's q(beta, u), q(sigma_u^2) and q(a) are Algorithm 2's
    (Example 1): the imputation model separates from the classifier."""
    X, y = _data(n=12, d=2)
    imp = ImputationHyper(jnp.asarray(1e8), 0.01 * jnp.eye(2), jnp.asarray(3.0))
    full = vb_missing(MissingData(jnp.asarray(X), jnp.ones_like(jnp.asarray(X)), jnp.asarray(y)), _hyper(), imp,
                      tol=1e-10, **SHARED)
    ref = vb_penalty(_mixed(X, y), _hyper(), tol=1e-10, **SHARED)
    np.testing.assert_allclose(full.state.mean, ref.state.mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(full.state.chi, ref.state.chi, rtol=1e-7)
    np.testing.assert_allclose(full.state.B_sigma, ref.state.B_sigma, rtol=1e-7)
    np.testing.assert_array_equal(full.state.D_mean, X)


def test_laplace_zero_with_everything_included_is_alg2_with_laplace_scales(x64):
    """rho -> 1 forces mu_q(gamma) = 1; the q(beta, v) update is then Algorithm 2's with prior
    precisions mu_q(sigma_u^-2) mu_q(b)."""
    X, y = _data(n=12, d=3)  # the problem of test_alg3_lower_bound_is_the_elbo
    data = _mixed(X, y)
    res = vb_laplace_zero(data, _hyper(rho=1 - 1e-12), tol=0.0, **SHARED)
    s = res.state
    np.testing.assert_allclose(s.mu_gamma, 1.0, atol=1e-9)
    from bayes_maxmargin.core.augmentation import gaussian_conditional, vb_inv_lambda

    prec0 = jnp.concatenate([jnp.array([1 / 100.0]), (2.0 + 1.5) / s.B_sigma * s.mu_b])
    C = jnp.concatenate([data.X, data.Z], 1)
    cond = gaussian_conditional(C, data.y, vb_inv_lambda(s.chi), 1.0, prec0)
    np.testing.assert_allclose(cond.mean, s.mean, rtol=1e-6, atol=1e-8)  # a fixed point of both updates


def test_vb_is_jitted_once(x64):
    X, y = _data(n=12, d=2)
    vb_penalty(_mixed(X, y), _hyper())  # the program of test_stops_at_the_papers_tolerance
    size = vb_penalty._cache_size()
    vb_penalty(_mixed(X + 1.0, y), _hyper(A_u=3.0))
    assert vb_penalty._cache_size() == size
