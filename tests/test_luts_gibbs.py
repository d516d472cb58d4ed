"""Gibbs samplers of Luts & Ormerod (2014), Appendices A-C: they target the augmented programs, agree
with NUTS on the marginal programs, and their posterior means are close to the VB means."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.engine.nuts import run_nuts
from bayes_maxmargin.models.luts.gibbs import (
    build_laplace_zero_kernel,
    build_missing_kernel,
    build_mixed_kernel,
    init_laplace_zero,
    init_missing,
    init_mixed,
    record_laplace_zero,
    record_missing,
    record_mixed,
)
from bayes_maxmargin.models.luts.model import (
    ImputationHyper,
    LutsHyper,
    MixedData,
    laplace_zero_bsvm,
    missing_bsvm,
    mixed_bsvm,
)
from bayes_maxmargin.models.luts.vb import vb_missing, vb_penalty

from ._posterior import assert_posteriors_agree
from .reference import LUTS_H, LUTS_IMP, load_reference, luts_intercept_problem, luts_missing_problem, luts_separable_problem

# the chains below are shared by several tests: keep the module on one xdist worker
pytestmark = pytest.mark.xdist_group("luts_gibbs")

H = LUTS_H


def _hyper(rho=0.5, adapt_steps=0):
    return LutsHyper(*(jnp.asarray(v, jnp.float64) for v in (H["sigma_beta2"], H["A_u"], H["B_u"], rho)),
                     adapt_steps=jnp.asarray(adapt_steps, jnp.int32))


def _penalty_problem(n=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X @ [1.0, -0.7] + 0.3 + 1.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y, MixedData(jnp.ones((n, 1)), jnp.asarray(X), jnp.asarray(y))


_intercept_problem = luts_intercept_problem


_missing_problem = luts_missing_problem
IMP = LUTS_IMP


def _imp(d=2):
    return ImputationHyper(jnp.asarray(IMP["sigma_mu2"]), jnp.eye(d), jnp.asarray(IMP["nu"]))


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


def _chains(kernel, record, state, data, hyper, *, num_samples, num_warmup=500, seed=0):
    return run_chains(kernel, record, state, jax.random.PRNGKey(seed), data, hyper,
                      num_warmup=num_warmup, num_samples=num_samples, progress_bar=False)


# Each problem's chains are run once and shared by the tests below (x64 is on while they run). With
# ``moves`` the kernels start each sweep with the directional and scale moves (a integrated out),
# their basis adapted over the warm-up.
WARMUP = 500


@functools.cache
def _mixed_run(example, moves=False):
    data = {"penalty": lambda: _penalty_problem()[2], "random_intercept": _intercept_problem,
            "separable": luts_separable_problem}[example]()
    p, m = data.X.shape[1], data.Z.shape[1]
    coef0 = 0.3 * jax.random.normal(jax.random.PRNGKey(5), (4, p + m))
    hyper = _hyper(adapt_steps=WARMUP if moves else 0)
    state = jax.vmap(functools.partial(init_mixed, directions=moves), (0, None, None, None))(coef0, 1.0, data, hyper)
    return data, _chains(build_mixed_kernel(), record_mixed, state, data, hyper, num_samples=2000)


@functools.cache
def _laplace_zero_run(num_samples=200, num_warmup=100, moves=False):
    data = _penalty_problem(n=40)[2]
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    v0 = 0.3 * jax.random.normal(keys[0], (4, 2))
    g0 = jnp.tile(jnp.array([1.0, 0.0]), (4, 1))
    hyper = _hyper(adapt_steps=num_warmup if moves else 0)
    init = functools.partial(init_laplace_zero, directions=moves)
    state = jax.vmap(init, (None, 0, 0, None, None, None))(jnp.zeros(1), v0, g0, 1.0, data, hyper)
    return data, _chains(build_laplace_zero_kernel(), record_laplace_zero, state, data, hyper,
                         num_samples=num_samples, num_warmup=num_warmup)


@functools.cache
def _missing_run(moves=False):
    mdata, obs = _missing_problem()
    coef0 = 0.3 * jax.random.normal(jax.random.PRNGKey(4), (4, 3))
    hyper = _hyper(adapt_steps=WARMUP if moves else 0)
    state = jax.vmap(functools.partial(init_missing, directions=moves), (0, None, None, None))(coef0, mdata, hyper, _imp())
    return mdata, obs, _chains(build_missing_kernel(), record_missing, state, mdata, (hyper, _imp()), num_samples=3000)


def _mixed_draws(data, run):
    p = data.X.shape[1]
    g = run.samples
    return {"beta": g["coef"][..., :p], "u": g["coef"][..., p:], "sigma_u2": g["sigma_u2"]}


def _missing_draws(obs, run):
    g = run.samples
    rows, cols = np.nonzero(obs == 0)
    return {"beta": g["coef"][..., 0], "u": g["coef"][..., 1:], "mu": g["mu"], "Sigma": g["Sigma"],
            "D_mis": g["D"][:, :, rows, cols]}


def _last(state):
    """Chain 0's final state."""
    return jax.tree_util.tree_map(lambda a: a[0], state)


# ---------------------------------------------------------------------------------------- targets
@pytest.mark.extended  # Appendix A against NUTS below; B and C through the estimator tests
def test_kernels_target_the_augmented_programs(x64):
    """Each kernel's log joint, at the final state of its chains, equals NumPyro's log density of
    the augmented program."""
    kw = dict(sigma_beta2=H["sigma_beta2"], A_u=H["A_u"], B_u=H["B_u"], augmented=True)
    data, run = _mixed_run("random_intercept")
    s, p = _last(run.final_state), data.X.shape[1]
    lp, _ = log_density(mixed_bsvm, (data.X, data.Z, data.y), kw,
                        {"beta": s.coef[:p], "u": s.coef[p:], "sigma_u2": s.sigma_u2, "lam": 1 / s.inv_lam})
    np.testing.assert_allclose(s.log_joint, lp, rtol=1e-10)
    data, run = _laplace_zero_run()
    s = _last(run.final_state)
    lp, _ = log_density(laplace_zero_bsvm, (data.X, data.Z, data.y), {**kw, "rho": 0.5},
                        {"beta": s.beta, "v": s.v, "gamma": s.gamma, "b": s.b, "sigma_u2": s.sigma_u2, "lam": 1 / s.inv_lam})
    np.testing.assert_allclose(s.log_joint, lp, rtol=1e-10)
    mdata, obs, run = _missing_run()
    s = _last(run.final_state)
    rows, cols = np.nonzero(obs == 0)
    np.testing.assert_array_equal(np.asarray(s.D)[obs > 0], np.asarray(mdata.D)[obs > 0])  # observed entries kept
    lp, _ = log_density(missing_bsvm, (mdata.D, obs > 0, mdata.y), {**kw, "sigma_mu2": IMP["sigma_mu2"], "nu": IMP["nu"], "Psi": jnp.eye(2)},
                        {"beta": s.coef[0], "u": s.coef[1:], "sigma_u2": s.sigma_u2, "lam": 1 / s.inv_lam,
                         "mu": s.mu, "Sigma": s.Sigma, "D_mis": s.D[rows, cols]})
    np.testing.assert_allclose(s.log_joint, lp, rtol=1e-10)


# ---------------------------------------------------------------------------------------- against NUTS
NUTS_WARMUP, NUTS_SAMPLES = 400, 800


def _nuts(model, args, kwargs, num_samples=1000, seed=1):
    samples, _ = run_nuts(model, jax.random.PRNGKey(seed), args, kwargs, num_warmup=NUTS_WARMUP,
                          num_samples=num_samples, num_chains=4, target_accept_prob=0.9)
    return samples



@pytest.mark.slow
@pytest.mark.parametrize("example", [pytest.param("penalty", marks=pytest.mark.extended), "random_intercept"])
def test_appendix_a_agrees_with_nuts(x64, example):
    gibbs = _mixed_draws(*_mixed_run(example))
    data = _mixed_run(example)[0]
    if example == "random_intercept":  # the stored reference (tests/reference)
        nuts = load_reference("luts_random_intercept").draws
    else:
        kw = dict(sigma_beta2=H["sigma_beta2"], A_u=H["A_u"], B_u=H["B_u"], noncentred=True)
        nuts = _nuts(mixed_bsvm, (data.X, data.Z, data.y), kw, num_samples=NUTS_SAMPLES)
    assert_posteriors_agree(gibbs, nuts, ["beta", "u", "sigma_u2"], sd_rtol=0.15)



@pytest.mark.slow
@pytest.mark.parametrize("problem", ["random_intercept", "separable", "missing"])
def test_the_moves_keep_the_posterior(x64, problem):
    """Appendices A and C with the directional and scale moves (a integrated out) against the stored
    NUTS draws of the same programs (:func:`assert_posteriors_agree`: means within Monte Carlo error,
    standard deviations within 15 %): a random intercept, the penalty prior on separable classes
    (where only the priors bound the scale of u and the intercept) and missing predictors."""
    if problem == "missing":
        _, obs, run = _missing_run(moves=True)
        gibbs, names = _missing_draws(obs, run), ["beta", "u", "mu", "Sigma", "D_mis"]
    else:
        gibbs, names = _mixed_draws(*_mixed_run(problem, moves=True)), ["beta", "u", "sigma_u2"]
    reference = {"random_intercept": "luts_random_intercept", "separable": "luts_penalty_separable",
                 "missing": "luts_missing"}[problem]
    assert_posteriors_agree(gibbs, load_reference(reference).draws, names, sd_rtol=0.15)


@pytest.mark.extended
@pytest.mark.parametrize("moves", [False, True])
def test_appendix_b_agrees_with_nuts_on_the_enumerated_program(x64, moves):
    """Laplace-zero: NUTS on the program with gamma summed out exactly (m = 2) and b integrated out;
    the inclusion probabilities are compared through NUTS's Rao-Blackwellised P(gamma_k = 1 | rest)."""
    data, run = _laplace_zero_run(num_samples=6000, num_warmup=1000, moves=moves)
    g = run.samples
    gibbs = {"beta": g["beta"], "u": g["u"], "sigma_u2": g["sigma_u2"], "inclusion": g["gamma"]}
    kw = dict(rho=0.5, sigma_beta2=H["sigma_beta2"], A_u=H["A_u"], B_u=H["B_u"])
    nuts = _nuts(laplace_zero_bsvm, (data.X, data.Z, data.y), kw, num_samples=1500)
    # u = gamma v under NUTS, drawn from P(gamma | beta, v, sigma_u2, y) per draw
    rng = np.random.default_rng(0)
    nuts["u"] = nuts["v"] * (rng.uniform(size=nuts["v"].shape) < nuts["inclusion"])
    assert_posteriors_agree(gibbs, nuts, ["beta", "u", "sigma_u2"], sd_rtol=0.2)
    # Gibbs records gamma itself, NUTS its conditional probability: equal means, different spreads
    assert_posteriors_agree(gibbs, nuts, ["inclusion"], sd_rtol=np.inf)


@pytest.mark.extended
def test_appendix_c_agrees_with_nuts(x64):
    _, obs, run = _missing_run()
    assert_posteriors_agree(_missing_draws(obs, run), load_reference("luts_missing").draws,
                            ["beta", "u", "mu", "Sigma", "D_mis"], sd_rtol=0.15)


# ---------------------------------------------------------------------------------------- VB vs Gibbs
TOL_SD = 0.75


@pytest.mark.extended  # a comparison of two methods (Sec. 4 style); each is checked on its own above
def test_vb_means_close_to_gibbs_means(x64):
    """Mean-field VB means of the coefficients and imputed values lie within 0.75 posterior standard
    deviations of the Gibbs means on small overlapping problems. Mean field is not exact here: q(a)
    independent of q(beta, u) shrinks the coefficients, by up to about 0.45 sd on these problems
    (Luts & Ormerod 2014, Sec. 4, report VB and MCMC classifiers of equal accuracy); an error in an
    update moves the fixed point by many standard deviations."""
    for example in ("penalty", "random_intercept"):
        data, run = _mixed_run(example)
        g = run.samples["coef"].reshape(-1, data.X.shape[1] + data.Z.shape[1])
        vb = vb_penalty(data, _hyper()).state.mean
        z = np.abs(np.asarray(vb) - g.mean(0)) / g.std(0)
        assert z.max() < TOL_SD, z
    mdata, obs, run = _missing_run()
    g = run.samples
    vb = vb_missing(mdata, _hyper(), _imp()).state
    coef = g["coef"].reshape(-1, 3)
    z = np.abs(np.asarray(vb.mean) - coef.mean(0)) / coef.std(0)
    assert z.max() < TOL_SD, z
    rows, cols = np.nonzero(obs == 0)
    D = g["D"][:, :, rows, cols].reshape(-1, rows.size)
    z = np.abs(np.asarray(vb.D_mean)[rows, cols] - D.mean(0)) / D.std(0)
    assert z.max() < TOL_SD, z
