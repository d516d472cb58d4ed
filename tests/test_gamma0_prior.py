"""A Gamma prior on gamma0, the rate of lambda's exponential prior (Henao et al. 2014, eq. 5-6): its
conjugate conditional, the linear and GP Gibbs kernels with gamma0 sampled against the augmented
NumPyro program and against NUTS on the marginal program, and the estimators' ``gamma0_prior``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bayes_maxmargin as bmm
from bayes_maxmargin import GPBSVM, LinearBSVM
from bayes_maxmargin.core.augmentation import gamma0_conditional, log_gamma0_prior, log_lambda_prior
from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.models.gp.covariance import gp_data
from bayes_maxmargin.models.gp.gibbs import build_gp_kernel, init_gp, record_gp
from bayes_maxmargin.models.gp.model import GPHyper, gp_bsvm, prior_covariance
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear, record_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, linear_bsvm, prior_precision

from ._compiled import init_gp as compiled_init_gp
from ._compiled import log_density_program
from ._posterior import assert_posteriors_agree
from .reference import GAMMA0_PRIOR, GP_FIXED, LINEAR, gp_tiny, load_reference, synthetic_binary

SHAPE, RATE = GAMMA0_PRIOR


def _linear(X, y, gamma_prior=LINEAR["gamma_prior"]):
    """Data, hyperparameters (gamma0 starting at its prior mean) and the program's keyword arguments of
    the stored problem ``linear_gamma0_prior``."""
    design = jnp.asarray(np.hstack([X, np.ones((len(X), 1))]))
    a0, b0 = gamma_prior
    hyper = LinearHyper(jnp.asarray(prior_precision(X.shape[1], 1.0, 10.0, True)),
                        *(jnp.asarray(v, design.dtype) for v in (1.0, a0, b0, SHAPE / RATE, SHAPE, RATE)))
    kwargs = dict(sigma=1.0, intercept_scale=10.0, gamma=1.0, gamma_prior=gamma_prior, gamma0_prior=GAMMA0_PRIOR)
    return LinearData(design, jnp.asarray(y, design.dtype)), hyper, kwargs


def _gp(X, y):
    """The same for the stored problem ``gp_gamma0_prior`` (SE theta fixed, gamma fixed)."""
    params = SEParams(GP_FIXED["lengthscale"], GP_FIXED["amplitude"])
    data = gp_data(prior_covariance(jnp.asarray(X), "rbf", params, 1e-6), jnp.asarray(y))
    hyper = GPHyper(*(jnp.asarray(v, jnp.float64) for v in (1.0, 1.0, 1.0, SHAPE / RATE, SHAPE, RATE)))
    return data, hyper, dict(kernel="rbf", kernel_params=params, gamma=1.0, gamma0_prior=GAMMA0_PRIOR)


@pytest.mark.parametrize("masked", [False, True])
def test_gamma0_conditional_is_prior_times_the_lambda_priors(masked):
    """Over a grid of gamma0, log Ga(gamma0 | shape, rate) + sum_n log Exp(lambda_n | gamma0) differs from the
    Gamma log density of gamma0_conditional by one constant (eq. 1-3 of its docstring); padding rows
    (``mask``) count in neither the shape nor the rate."""
    rng = np.random.default_rng(0)
    grid = np.linspace(0.05, 5.0, 40)
    with jax.enable_x64(True):
        inv_lam = jnp.asarray(rng.gamma(2.0, 1.0, size=9))
        mask = jnp.asarray(np.arange(9) < 6) if masked else None
        # one compiled program for the whole grid (op by op, every operation compiles a program of its own)
        joint = np.asarray(jax.jit(jax.vmap(lambda g: log_gamma0_prior(g, SHAPE, RATE) + log_lambda_prior(
            inv_lam, g, mask)))(jnp.asarray(grid)))
        shape, rate = (float(v) for v in gamma0_conditional(inv_lam, SHAPE, RATE, mask))
    n = 6 if masked else 9
    assert shape == SHAPE + n and np.isclose(rate, RATE + np.sum(1.0 / np.asarray(inv_lam)[:n]), rtol=1e-14)
    gap = joint - stats.gamma.logpdf(grid, shape, scale=1.0 / rate)
    # float64 sums of at most ~12 terms of magnitude <= 50: rounding ~1e-13; 1e-9 leaves room, and a wrong
    # shape or rate moves the gap by at least |log(5 / 0.05)| or 4.95 * 1 across the grid
    np.testing.assert_allclose(gap, gap[0], atol=1e-9)


@pytest.mark.parametrize("model", ["linear", "gp"])
def test_log_joint_is_the_augmented_program(model):
    """The Gibbs state's log joint, with gamma0 sampled, equals NumPyro's log density of the augmented
    program with its ``"gamma0"`` site, at the initial state and after sweeps (gamma0 has moved)."""
    with jax.enable_x64(True):
        if model == "linear":
            X, y = synthetic_binary()
            X, y = X[:40], y[:40]
            data, hyper, kwargs = _linear(X, y)
            kernel = jax.jit(build_linear_kernel(True, sample_gamma0=True))
            # float64, not weakly typed: the state's types are then those the sweep returns (one program)
            state = jax.jit(init_linear, static_argnums=(3, 4))(jnp.full(4, 0.1, jnp.float64), data, hyper, True, True)
            program = linear_bsvm
        else:
            X, y = gp_tiny()
            data, hyper, kwargs = _gp(X, y)
            kernel = jax.jit(build_gp_kernel(False, True))
            state = compiled_init_gp(jnp.full(len(y), 0.1), data, hyper, False, True)
            program = gp_bsvm
        density = log_density_program(program, (jnp.asarray(X), jnp.asarray(y, jnp.float64)),
                                      {**kwargs, "augmented": True})
        for i in range(3):
            if i:
                state, _ = kernel(jax.random.PRNGKey(i), state, data, hyper)
            sites = {"lam": 1.0 / state.inv_lam, "gamma0": state.gamma0}
            if model == "linear":
                sites.update(beta=state.coef[:3], intercept=state.coef[3], gamma=state.gamma)
            else:
                sites["f"] = state.f
            # the same terms summed in another order in float64: as the other log-joint tests, 1e-10
            np.testing.assert_allclose(state.log_joint, density(sites), rtol=1e-10)
    assert float(state.gamma0) != SHAPE / RATE  # sampled, not kept


def _gibbs(kernel, record, init, data, hyper, num_samples):
    return run_chains(kernel, record, init, jax.random.PRNGKey(0), data, hyper, num_warmup=200,
                      num_samples=num_samples, progress_bar=False).samples


@pytest.mark.extended  # the heavier of the two (200 rows, gamma sampled too); the GP one runs by default
def test_linear_gibbs_agrees_with_nuts():
    """Gibbs with gamma and gamma0 sampled and NUTS on the marginal program (the stored reference
    ``linear_gamma0_prior``) give the same posterior of beta, the intercept, gamma and gamma0."""
    X, y = synthetic_binary()
    with jax.enable_x64(True):
        data, hyper, _ = _linear(X, y)
        init = jax.vmap(lambda c: init_linear(c, data, hyper, True, True))(jnp.zeros((4, 4)))
        draws = _gibbs(build_linear_kernel(True, -0.9, sample_gamma0=True), record_linear, init, data, hyper, 2000)
    gibbs = {"beta": draws["coef"][..., :3], "intercept": draws["coef"][..., 3], "gamma": draws["gamma"],
             "gamma0": draws["gamma0"]}
    ref = load_reference("linear_gamma0_prior")
    assert ref.diverging == 0
    assert_posteriors_agree(gibbs, ref.draws, ["beta", "intercept", "gamma", "gamma0"])


def test_gp_gibbs_agrees_with_nuts():
    """GP Gibbs at fixed theta with gamma0 sampled and NUTS on the marginal program (the stored
    reference ``gp_gamma0_prior``) give the same posterior of f and gamma0."""
    X, y = gp_tiny()
    with jax.enable_x64(True):
        data, hyper, _ = _gp(X, y)
        init = jax.jit(jax.vmap(lambda f: init_gp(f, data, hyper, False, True)))(jnp.zeros((4, len(y))))
        draws = _gibbs(build_gp_kernel(False, True), record_gp, init, data, hyper, 1500)
    ref = load_reference("gp_gamma0_prior")
    assert ref.diverging == 0
    assert_posteriors_agree({k: draws[k] for k in ("f", "gamma0")}, ref.draws, ["f", "gamma0"])


MCMC = dict(num_samples=30, num_warmup=20, num_chains=2, progress_bar=False, random_state=0)


ESTIMATORS = {
    "linear": lambda: LinearBSVM(gamma0_prior=(2.0, 4.0), **MCMC),
    "gp": lambda: GPBSVM(inference="gibbs", kernel="rbf", learn_kernel=False, gamma0_prior=(2.0, 4.0), **MCMC),
    "gp-theta": lambda: GPBSVM(inference="gibbs", kernel="rbf", gamma0_prior=(2.0, 4.0), **MCMC),
}


@pytest.mark.filterwarnings("ignore::bayes_maxmargin.MixingWarning")  # 60 draws: a plumbing check
@pytest.mark.parametrize("name", ["linear", pytest.param("gp", marks=pytest.mark.extended),
                                  pytest.param("gp-theta", marks=pytest.mark.extended)])
def test_estimator_records_gamma0_and_saves_it(name, tmp_path):
    """Gibbs with ``gamma0_prior`` (GP: theta fixed, and sampled): the draws of gamma0 are in
    ``idata_.posterior``, the pointwise log likelihood uses them, and a saved fit loads with them."""
    X, y = synthetic_binary()
    X, y = X[:40], y[:40]
    est = ESTIMATORS[name]().fit(X, y)
    gamma0 = est.idata_.posterior["gamma0"].values
    assert gamma0.shape == (2, 30) and (gamma0 > 0).all() and np.unique(gamma0).size > 1
    log_lik = est.idata_.log_likelihood["y"].values  # skewed Laplace at each draw's own gamma0
    assert log_lik.shape == (2, 30, 40) and np.isfinite(log_lik).all()
    loaded = bmm.load(bmm.save(est, tmp_path / f"{name}.bmm"))
    np.testing.assert_array_equal(loaded.idata_.posterior["gamma0"].values, gamma0)
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    assert "gamma0" not in est.set_params(gamma0_prior=None).fit(X, y).idata_.posterior


@pytest.mark.parametrize("cls,inference", [(LinearBSVM, "gibbs"), (GPBSVM, "gibbs")])
@pytest.mark.parametrize("bad", [(0.0, 1.0), (1.0, -2.0), (1.0,), (1.0, 2.0, 3.0), (np.inf, 1.0), (1.0, np.nan),
                                 "ab", 3.0, (True, 1.0)])
def test_bad_gamma0_prior_is_refused(cls, inference, bad):
    X, y = synthetic_binary()
    with pytest.raises(ValueError, match=r"Invalid value for gamma0_prior: " + repr_pattern(bad)):
        cls(inference=inference, gamma0_prior=bad, **MCMC).fit(X[:20], y[:20])


@pytest.mark.parametrize("cls,inference", [(LinearBSVM, "nuts"), (LinearBSVM, "em"), (LinearBSVM, "vb"),
                                           (GPBSVM, "nuts"), (GPBSVM, "ecm"), (GPBSVM, "svi")])
def test_gamma0_prior_needs_gibbs(cls, inference):
    X, y = synthetic_binary()
    with pytest.raises(ValueError, match=rf"gamma0_prior: \(2.0, 4.0\) with inference='{inference}'"):
        cls(inference=inference, gamma0_prior=(2.0, 4.0)).fit(X[:20], y[:20])


def repr_pattern(value) -> str:
    import re

    return re.escape(repr(value))
