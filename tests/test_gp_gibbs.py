"""The GP Bayesian SVM at fixed theta: the Gibbs kernel of eq. (7) targets the NumPyro program and
agrees with NUTS on the marginal program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core.kernels import ARDParams, SEParams
from bayes_maxmargin.engine.mcmc import init_chains, run_chains
from bayes_maxmargin.engine.nuts import run_nuts
from bayes_maxmargin.models.gp.covariance import GPData, gp_alpha, gp_data
from bayes_maxmargin.models.gp.gibbs import build_gp_kernel, init_gp, record_gp, sample_f
from bayes_maxmargin.models.gp.model import GPHyper, gp_bsvm, prior_covariance

from ._compiled import init_gp as compiled_init_gp
from ._compiled import log_density_program
from ._posterior import assert_jit_equals_eager, assert_posteriors_agree
from .reference import GP_FIXED, gp_tiny, load_reference

N = 12
KERNEL_PARAMS = SEParams(lengthscale=GP_FIXED["lengthscale"], amplitude=GP_FIXED["amplitude"])


@pytest.fixture(scope="module")
def tiny() -> tuple[np.ndarray, np.ndarray]:
    """n = 12 evenly spaced 1-D inputs, labels from a noisy sine (overlapping classes)."""
    return gp_tiny(N)


#: prior_covariance as one compiled program (op by op, every operation compiles a program of its own)
_covariance = jax.jit(prior_covariance, static_argnums=(1, 3))


def _problem(X, y, gamma0, gamma_prior, kernel="rbf", kernel_params=KERNEL_PARAMS):
    K = _covariance(jnp.asarray(X), kernel, kernel_params, 1e-6)
    data = gp_data(K, jnp.asarray(y))
    a0, b0 = gamma_prior or (1.0, 1.0)
    hyper = GPHyper(*(jnp.asarray(v, K.dtype) for v in (1.0, a0, b0, gamma0)))
    kwargs = dict(kernel=kernel, kernel_params=kernel_params, gamma=1.0, gamma_prior=gamma_prior, gamma0=gamma0)
    return data, hyper, kwargs


@pytest.mark.parametrize(
    "gamma0,gamma_prior,kernel",
    [(0.1, None, "rbf"), (0.0, None, "rbf"), (0.5, (2.0, 1.0), "rbf"), (0.0, (2.0, 1.0), "ard")],
)
def test_log_joint_is_the_augmented_program(tiny, gamma0, gamma_prior, kernel):
    """The Gibbs state's log joint equals NumPyro's log density of the augmented program."""
    X, y = tiny
    with jax.enable_x64(True):
        params = KERNEL_PARAMS if kernel == "rbf" else ARDParams(jnp.array([0.9]), 1.3)
        data, hyper, kwargs = _problem(X, y, gamma0, gamma_prior, kernel, params)
        sample_gamma = gamma_prior is not None
        kernel_fn = jax.jit(build_gp_kernel(sample_gamma))
        state = compiled_init_gp(jnp.full(N, 0.1), data, hyper, sample_gamma)
        density = log_density_program(gp_bsvm, (jnp.asarray(X), jnp.asarray(y)), {**kwargs, "augmented": True})
        for i in range(3):
            state, _ = kernel_fn(jax.random.PRNGKey(i), state, data, hyper)
            sites = {"f": state.f, "lam": 1.0 / state.inv_lam}
            if sample_gamma:
                sites["gamma"] = state.gamma
            np.testing.assert_allclose(state.log_joint, density(sites), rtol=1e-10)


def test_f_draw_is_the_conditional_of_eq7(tiny):
    """sample_f draws N(m, S), m = K B^-1 Y (1 + lambda), S = gamma^-1 K B^-1 Lambda, B = K + Lambda / gamma."""
    X, y = tiny
    with jax.enable_x64(True):
        data, _, _ = _problem(X, y, 0.1, None)
        rng = np.random.default_rng(1)
        # lambda over several orders of magnitude, including points pinned to the margin
        inv_lam = jnp.asarray(np.exp(rng.uniform(-3.0, 6.0, N)))
        gamma = jnp.asarray(1.7)
        n = 100_000
        keys = jax.random.split(jax.random.PRNGKey(0), n)
        draws = np.asarray(jax.jit(jax.vmap(lambda k: sample_f(k, data, inv_lam, gamma)))(keys))  # one program
        alpha = np.asarray(gp_alpha(data, inv_lam, gamma))
    K = np.asarray(data.K)
    lam = 1.0 / np.asarray(inv_lam)
    B = K + np.diag(lam / float(gamma))
    m = K @ np.linalg.solve(B, y * (1.0 + lam))
    S = K @ np.linalg.solve(B, np.diag(lam)) / float(gamma)  # eq. (7) as written
    np.testing.assert_allclose(K @ alpha, m, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(S, S.T, atol=1e-10)
    se = np.sqrt(np.diag(S) / n)
    assert np.all(np.abs(draws.mean(0) - m) < 4 * se)
    scale = np.sqrt(np.outer(np.diag(S), np.diag(S)))
    np.testing.assert_allclose(np.cov(draws.T), S, atol=5 * np.sqrt(2.0 / n) * scale.max())


@pytest.mark.extended  # compiled and op-by-op agree: a compiler check, slow op by op
def test_jit_equals_eager(tiny):
    X, y = tiny
    with jax.enable_x64(True):
        data, hyper, _ = _problem(X, y, 0.1, (2.0, 1.0))
        state = init_gp(jnp.zeros(N), data, hyper, True)
        assert_jit_equals_eager(build_gp_kernel(True), jax.random.PRNGKey(3), state, data, hyper)


@pytest.mark.parametrize("sample_gamma", [False, True])
def test_init_chains_is_init_of_each_chain(tiny, sample_gamma):
    """init_chains (one compiled program) gives each chain the state init_gp gives its f."""
    X, y = tiny
    with jax.enable_x64(True):
        data, hyper, _ = _problem(X, y, 0.1, (2.0, 1.0) if sample_gamma else None)
        F = 0.1 * jax.random.normal(jax.random.PRNGKey(5), (3, N))
        chains = init_chains(init_gp, (0, None, None), F, data, hyper, sample_gamma=sample_gamma)
        for c in range(F.shape[0]):
            for a, b in zip(chains, compiled_init_gp(F[c], data, hyper, sample_gamma)):
                np.testing.assert_allclose(a[c], b, rtol=1e-10)
        assert chains.f.shape == (3, N) and chains.log_joint.shape == (3,)


def test_kernel_builder_is_cached():
    assert build_gp_kernel(True) is build_gp_kernel(True)
    assert build_gp_kernel(False) is not build_gp_kernel(True)


def test_float32_sweeps_stay_finite(tiny):
    """Without x64 the sampler runs in float32 and stays finite (the floor on |1 - y f|)."""
    X, y = tiny
    K = prior_covariance(jnp.asarray(X, jnp.float32), "rbf", KERNEL_PARAMS, 1e-4)
    data = gp_data(K, jnp.asarray(y, jnp.float32))
    assert data.K.dtype == jnp.float32
    hyper = GPHyper(*(jnp.asarray(v, jnp.float32) for v in (1.0, 2.0, 1.0, 0.0)))
    kernel = jax.jit(build_gp_kernel(True))
    state = compiled_init_gp(jnp.zeros(N, jnp.float32), data, hyper, True)
    keys = jax.random.split(jax.random.PRNGKey(0), 200)
    for i in range(200):
        state, _ = kernel(keys[i], state, data, hyper)
        # on the host: a JAX isfinite per field and sweep would dispatch (and first compile) small programs
        assert all(np.isfinite(np.asarray(v)).all() for v in state), f"non-finite state at sweep {i}"
    assert state.f.dtype == jnp.float32


@pytest.mark.slow
@pytest.mark.parametrize("gamma0,gamma_prior,elliptical_steps", [
    (GP_FIXED["gamma0"], None, 0),  # the stored reference gp_fixed_theta
    (GP_FIXED["gamma0"], None, 10),  # with the elliptical moves of GPBSVM(marginal_moves=True)
    pytest.param(0.0, None, 0, marks=pytest.mark.extended),
    pytest.param(0.0, None, 10, marks=pytest.mark.extended),
    pytest.param(0.5, (2.0, 2.0), 0, marks=pytest.mark.extended),
])
def test_gibbs_agrees_with_nuts(tiny, gamma0, gamma_prior, elliptical_steps):
    """Gibbs on the augmented joint and NUTS on the marginal program give the same posterior of f
    (and of gamma when it has a prior), with and without the elliptical moves of f (lambda integrated
    out). The default cases use the stored NUTS reference ``gp_fixed_theta``, the others run NUTS here."""
    X, y = tiny
    stored = (gamma0, gamma_prior) == (GP_FIXED["gamma0"], None)
    with jax.enable_x64(True):
        data, hyper, kwargs = _problem(X, y, gamma0, gamma_prior)
        sample_gamma = gamma_prior is not None
        init = jax.jit(jax.vmap(lambda f: init_gp(f, data, hyper, sample_gamma)))(jnp.zeros((4, N)))
        gibbs = run_chains(
            build_gp_kernel(sample_gamma, elliptical_steps=elliptical_steps), record_gp, init, jax.random.PRNGKey(0),
            data, hyper,
            num_warmup=250, num_samples=5000, progress_bar=False,
        ).samples
        if not stored:
            nuts, stats = run_nuts(
                gp_bsvm, jax.random.PRNGKey(1), (jnp.asarray(X), jnp.asarray(y)), kwargs,
                num_warmup=300, num_samples=800, num_chains=4,
            )
    if stored:
        ref = load_reference("gp_fixed_theta")
        nuts, diverging = ref.draws, ref.diverging
    else:
        diverging = stats["diverging"].sum()
    assert diverging == 0
    assert_posteriors_agree(gibbs, nuts, ["f"] + (["gamma"] if sample_gamma else []))


def test_data_is_a_pytree_of_arrays(tiny):
    X, y = tiny
    with jax.enable_x64(True):
        data, _, _ = _problem(X, y, 0.1, None)
    assert isinstance(data, GPData) and len(jax.tree_util.tree_leaves(data)) == 3
    chol = np.asarray(data.chol)
    np.testing.assert_allclose(chol @ chol.T, np.asarray(data.K), atol=1e-12)
