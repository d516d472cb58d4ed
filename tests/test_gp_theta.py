"""The GP Bayesian SVM with the kernel parameters sampled: the sweep (IG lambda, slice theta | lambda,
exact f, gamma) targets the augmented program and agrees with NUTS on the marginal program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core.kernels import ARDParams, PolyParams, SEParams
from bayes_maxmargin.core.parameters import flatten
from bayes_maxmargin.core.slice import slice_1d, slice_sweep
from bayes_maxmargin.engine.mcmc import init_chains, run_chains
from bayes_maxmargin.models.gp.gibbs_theta import (
    GPThetaState,
    build_gp_theta_kernel,
    build_gp_theta_record,
    gp_theta_data,
    gp_theta_log_joint,
    init_gp_theta,
)
from bayes_maxmargin.models.gp.model import GPHyper, default_kernel_prior, gp_bsvm, kernel_prior

from ._compiled import init_gp_theta as compiled_init_gp_theta
from ._compiled import log_density_program
from ._posterior import assert_jit_equals_eager, assert_posteriors_agree
from .reference import GP_THETA, gp_theta_statistics, gp_wave, load_reference

N = 30
SE = SEParams(lengthscale=1.0, amplitude=1.0)


@pytest.fixture(scope="module")
def wave() -> tuple[np.ndarray, np.ndarray]:
    """n = 30 1-D inputs, labels from a noisy sine (overlapping classes)."""
    return gp_wave(N)


def _hyper(gamma0: float, dtype=jnp.float64) -> GPHyper:
    return GPHyper(*(jnp.asarray(v, dtype) for v in (1.0, 2.0, 1.0, gamma0)))


def _augmented_log_density(X, y, sites, **kwargs):
    return _augmented_program(X, y, **kwargs)(sites)


def _augmented_program(X, y, **kwargs):
    """sites -> NumPyro's log density of gp_bsvm(augmented=True, **kwargs) at them, one compiled program."""
    return log_density_program(gp_bsvm, (jnp.asarray(X), jnp.asarray(y)), {**kwargs, "augmented": True})


@pytest.mark.parametrize(
    "kernel,params,gamma0,gamma_prior,jitter",
    [
        ("rbf", SEParams(0.8, 1.3), 0.1, None, 1e-6),
        ("rbf", SEParams(0.8, 1.3), 0.0, (2.0, 1.0), 1e-6),
        ("ard", ARDParams(jnp.array([0.9, 1.4]), 1.3), 0.5, None, 1e-6),
        ("poly", PolyParams(2, 0.7), 0.1, None, 1e-3),  # K has rank 3: a jitter that keeps it conditioned
    ],
)
def test_log_joint_is_the_augmented_program(wave, kernel, params, gamma0, gamma_prior, jitter):
    """gp_theta_log_joint equals NumPyro's log density of gp_bsvm(augmented=True, kernel_prior=...)
    at the sites theta (constrained, as NumPyro evaluates them), f, lambda [, gamma]."""
    X, y = wave
    X = np.c_[X, np.cos(X)] if kernel == "ard" else X
    rng = np.random.default_rng(2)
    with jax.enable_x64(True):
        prior = kernel_prior(params, 0.7)
        data = gp_theta_data(X, y, prior, jitter=jitter)
        log_params, unflatten = flatten(params)
        theta = unflatten(log_params + 0.3 * rng.normal(size=log_params.shape))
        f = jnp.asarray(rng.normal(size=N))
        inv_lam = jnp.asarray(np.exp(rng.uniform(-3.0, 3.0, N)))
        gamma = jnp.asarray(1.7)
        sample_gamma = gamma_prior is not None
        actual = gp_theta_log_joint(f, inv_lam, gamma, flatten(theta)[0], data, _hyper(gamma0), kernel=kernel,
                                    unflatten=unflatten, sample_gamma=sample_gamma)
        sites = {"f": f, "lam": 1.0 / inv_lam, **{k: getattr(theta, k) for k in prior.loc}}
        if sample_gamma:
            sites["gamma"] = gamma
        expected = _augmented_log_density(X, y, sites, kernel=kernel, kernel_params=params, gamma=1.7,
                                          gamma_prior=gamma_prior, gamma0=gamma0, jitter=jitter, kernel_prior=prior)
    np.testing.assert_allclose(actual, expected, rtol=1e-9)


def test_kernel_state_is_the_augmented_program(wave):
    """After every sweep the state's log joint is the program's log density at the state, and the
    slice step has moved both coordinates of log theta."""
    X, y = wave
    with jax.enable_x64(True):
        prior = kernel_prior(SE, 0.5)
        data, hyper = gp_theta_data(X, y, prior), _hyper(0.1)
        kernel_fn = jax.jit(build_gp_theta_kernel("rbf", SE, True))
        record = build_gp_theta_record(SE)
        state = compiled_init_gp_theta(jnp.zeros(N), SE, data, hyper, kernel="rbf", sample_gamma=True)
        moved = [np.asarray(state.log_theta)]
        density = _augmented_program(X, y, kernel="rbf", kernel_params=SE, gamma_prior=(2.0, 1.0), gamma0=0.1,
                                     kernel_prior=prior)
        for i in range(3):
            state, _ = kernel_fn(jax.random.PRNGKey(i), state, data, hyper)
            draw = record(state)
            sites = {"f": state.f, "lam": 1.0 / state.inv_lam, "gamma": state.gamma,
                     "lengthscale": draw["lengthscale"], "amplitude": draw["amplitude"]}
            np.testing.assert_allclose(state.log_joint, density(sites), rtol=1e-9)
            moved.append(np.asarray(state.log_theta))
    assert set(draw) == {"f", "gamma", "gamma0", "log_joint", "lengthscale", "amplitude"}
    assert np.all(np.diff(np.stack(moved), axis=0) != 0)


def test_flatten_round_trip():
    params = ARDParams(jnp.array([0.5, 2.0]), 1.5)
    log_theta, unflatten = flatten(params)
    np.testing.assert_allclose(log_theta, np.log([0.5, 2.0, 1.5]))
    back = unflatten(log_theta)
    np.testing.assert_allclose(back.lengthscales, [0.5, 2.0])
    np.testing.assert_allclose(back.amplitude, 1.5)
    assert set(default_kernel_prior("ard", 2).loc) == {"lengthscales", "amplitude"}


def test_slice_sweep_leaves_a_gaussian_invariant():
    """Coordinate-wise slice sampling of a correlated 2-D Gaussian: means and sds within 4 MCSE."""
    with jax.enable_x64(True):
        mean = jnp.array([1.0, -2.0])
        cov = jnp.array([[1.0, 0.8], [0.8, 2.0]])
        prec = jnp.linalg.inv(cov)

        def logdensity(x):
            d = x - mean
            return -0.5 * d @ prec @ d

        def chain(key):
            def step(x, k):
                x, _, _ = slice_sweep(k, logdensity, x, 1.0)
                return x, x

            return jax.lax.scan(step, jnp.zeros(2), jax.random.split(key, 3000))[1]

        draws = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.PRNGKey(0), 4)))
    ref = np.random.default_rng(0).multivariate_normal(np.asarray(mean), np.asarray(cov), size=(4, 3000))
    assert_posteriors_agree({"x": draws[:, 200:]}, {"x": ref[:, 200:]}, ["x"], z=4.0, sd_rtol=0.08)


@pytest.mark.extended  # compiled and op-by-op agree: a compiler check, slow op by op
def test_jit_equals_eager(wave):
    X, y = wave
    with jax.enable_x64(True):
        data, hyper = gp_theta_data(X, y, kernel_prior(SE, 0.5)), _hyper(0.1)
        state = init_gp_theta(jnp.zeros(N), SE, data, hyper, kernel="rbf", sample_gamma=True)
        assert_jit_equals_eager(build_gp_theta_kernel("rbf", SE, True), jax.random.PRNGKey(3), state, data, hyper)


@pytest.mark.parametrize("kernel,params", [("rbf", SE), ("ard", ARDParams(jnp.array([0.8]), 1.2))])
def test_init_chains_is_init_of_each_chain(wave, kernel, params):
    """init_chains (one compiled program) gives each chain the state init_gp_theta gives its f."""
    X, y = wave
    with jax.enable_x64(True):
        data, hyper = gp_theta_data(X, y, kernel_prior(params, 0.5)), _hyper(0.1)
        F = 0.1 * jax.random.normal(jax.random.PRNGKey(5), (3, N))
        chains = init_chains(init_gp_theta, (0, None, None, None), F, params, data, hyper, kernel=kernel,
                             sample_gamma=True)
        for c in range(F.shape[0]):
            one = compiled_init_gp_theta(F[c], params, data, hyper, kernel=kernel, sample_gamma=True)
            for a, b in zip(chains, one):
                np.testing.assert_allclose(a[c], b, rtol=1e-8)  # a batched sum of ~1e4 terms: rounding differs
        assert chains.log_theta.shape == (3, len(flatten(params)[0]))


def test_builders_are_cached():
    assert build_gp_theta_kernel("rbf", SE, False) is build_gp_theta_kernel("rbf", SEParams(2.0, 3.0), False)
    assert build_gp_theta_kernel("rbf", SE, True) is not build_gp_theta_kernel("rbf", SE, False)
    ard = ARDParams(jnp.ones(3))
    assert build_gp_theta_kernel("ard", ard, False) is build_gp_theta_kernel("ard", ARDParams(jnp.ones(3)), False)
    assert build_gp_theta_record(ard) is build_gp_theta_record(ARDParams(np.ones(3), 2.0))


def test_float32_sweeps_stay_finite(wave):
    """Without x64 the sampler runs in float32 and stays finite."""
    X, y = wave
    data = gp_theta_data(np.asarray(X, np.float32), y, kernel_prior(SE, 0.5), jitter=1e-3)
    hyper = _hyper(0.0, jnp.float32)
    kernel = jax.jit(build_gp_theta_kernel("rbf", SE, True))
    state = compiled_init_gp_theta(jnp.zeros(N, jnp.float32), SE, data, hyper, kernel="rbf", sample_gamma=True)
    for i in range(30):
        state, _ = kernel(jax.random.PRNGKey(i), state, data, hyper)
        # on the host: a JAX isfinite per field and sweep would dispatch (and first compile) small programs
        assert all(np.isfinite(np.asarray(v)).all() for v in state), f"non-finite state at sweep {i}"
    assert isinstance(state, GPThetaState) and state.f.dtype == jnp.float32 and state.log_theta.dtype == jnp.float32


@pytest.mark.slow
@pytest.mark.parametrize("theta_sampler,adapt_steps,elliptical_steps", [
    pytest.param("collapsed", 0, 0, marks=pytest.mark.extended),  # the warm-up's sampler throughout
    ("collapsed", 200, 0),
    ("collapsed", 200, 10),  # GPBSVM's default: with the elliptical moves of f
    ("surrogate", 200, 0),
])
def test_gibbs_with_theta_agrees_with_nuts(wave, theta_sampler, adapt_steps, elliptical_steps):
    """Gibbs with theta sampled (slice on theta | lambda, gamma, collapsed or given surrogate data, then
    f exactly, and with ``elliptical_steps`` elliptical moves of f, lambda integrated out; the bracket
    widths adapted over the warm-up, then fixed) and NUTS on the marginal program
    (non-centred, the same posterior; the stored reference ``gp_theta_se``) agree on log theta, on f at
    five inputs and on log N(f | 0, K_theta), a statistic of the joint of f and theta (it is what fails,
    by 20 MCSE, when f is not redrawn after theta moves)."""
    X, y = wave
    ref = load_reference("gp_theta_se")
    prior_scale, jitter, gamma0 = GP_THETA["prior_scale"], GP_THETA["jitter"], GP_THETA["gamma0"]
    with jax.enable_x64(True):
        prior = kernel_prior(SE, prior_scale)
        data = gp_theta_data(X, y, prior, jitter=jitter, adapt_steps=adapt_steps)
        hyper = _hyper(gamma0)
        init = jax.jit(jax.vmap(lambda f: init_gp_theta(f, SE, data, hyper, kernel="rbf")))(jnp.zeros((4, N)))
        gibbs = run_chains(
            build_gp_theta_kernel("rbf", SE, False, theta_sampler=theta_sampler, elliptical_steps=elliptical_steps),
            build_gp_theta_record(SE), init,
            jax.random.PRNGKey(0),
            data, hyper, num_warmup=200, num_samples=1000, chunk_size=1200, progress_bar=False,  # one compiled chunk
        ).samples
    assert ref.diverging == 0
    assert_posteriors_agree(gp_theta_statistics(X, gibbs), ref.draws, ["log_theta", "f", "log_prior_f"],
                            z=4.0, sd_rtol=0.15)


def test_surrogate_map_is_the_conditional_of_f_given_g(wave):
    """The surrogate-data factors give log N(g | 0, K + S), and f = L_K L_P^-T (v + nu) is m + L_R nu with
    L_R L_R' = R = (K^-1 + S^-1)^-1 and m = R S^-1 g (Murray & Adams 2010), both checked against dense
    inverses; surrogate_whiten inverts the map."""
    from scipy.stats import multivariate_normal

    from bayes_maxmargin.models.gp.gibbs_theta import _surrogate_f, _surrogate_factors, surrogate_whiten

    X, y = wave
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        data = gp_theta_data(X, y, kernel_prior(SE, 0.5), jitter=1e-2)  # K well conditioned: dense inverses are exact
        log_theta, unflatten = flatten(SE)
        log_theta = log_theta + 0.2
        inv_lam, gamma = jnp.asarray(np.exp(rng.uniform(-2.0, 2.0, N))), jnp.asarray(1.7)
        g, nu, f = (jnp.asarray(rng.normal(size=N)) for _ in range(3))
        chol_k, chol_p, v, log_n_g = _surrogate_factors(log_theta, g, inv_lam, gamma, data, "rbf", unflatten)
        K = np.asarray(chol_k @ chol_k.T)
        S = np.diag(1.0 / np.asarray(gamma * inv_lam))
        R = np.linalg.inv(np.linalg.inv(K) + np.linalg.inv(S))
        L_R = np.asarray(chol_k @ jnp.linalg.inv(chol_p).T)
        back = _surrogate_f(chol_k, chol_p, v, surrogate_whiten(f, g, log_theta, inv_lam, gamma, data, "rbf", unflatten))
        # float64 products and inverses of 30 x 30 matrices of condition < 1e4: agreement to 1e-8 relative
        np.testing.assert_allclose(log_n_g, multivariate_normal(np.zeros(N), K + S).logpdf(np.asarray(g)), rtol=1e-8)
        np.testing.assert_allclose(L_R @ L_R.T, R, atol=1e-8)
        np.testing.assert_allclose(_surrogate_f(chol_k, chol_p, v, nu), R @ np.linalg.solve(S, g) + L_R @ nu,
                                   atol=1e-8)
        np.testing.assert_allclose(back, f, atol=1e-8)


def test_slice_widths_adapt_over_the_warmup_then_stay(wave):
    """Over the second half of ``adapt_steps`` sweeps the state sums each coordinate's step size; before
    the end of the warm-up the sweep uses ``slice_width`` and m = MAX_STEPS, from then on ADAPTED_WIDTH
    times the mean step with m = ADAPTED_MAX_STEPS, unchanged by later sweeps; adapt_steps = 0 never adapts."""
    from bayes_maxmargin.models.gp import gibbs_theta as gt

    X, y = wave
    adapt = 4
    with jax.enable_x64(True):
        data, hyper = gp_theta_data(X, y, kernel_prior(SE, 0.5), slice_width=0.7, adapt_steps=adapt), _hyper(0.1)
        # gamma sampled as in test_kernel_state_is_the_augmented_program (the slice steps on theta are the
        # same; one compiled program serves both)
        kernel_fn = jax.jit(build_gp_theta_kernel("rbf", SE, True))
        state = compiled_init_gp_theta(jnp.zeros(N), SE, data, hyper, kernel="rbf", sample_gamma=True)
        path, settings = [np.asarray(state.log_theta)], []
        for i in range(adapt + 2):
            settings.append(gt.slice_settings(state, data))
            state, _ = kernel_fn(jax.random.PRNGKey(i), state, data, hyper)
            path.append(np.asarray(state.log_theta))
        steps = np.abs(np.diff(np.stack(path), axis=0))
        mean_step = steps[adapt // 2:adapt].mean(axis=0)
        for i, (width, max_steps) in enumerate(settings):
            expected = ((np.full(2, 0.7), gt.MAX_STEPS) if i < adapt
                        else (gt.ADAPTED_WIDTH * mean_step, gt.ADAPTED_MAX_STEPS))
            np.testing.assert_allclose(width, expected[0], rtol=1e-12)  # sums of a few float64 numbers
            assert int(max_steps) == expected[1]
        assert int(state.iteration) == adapt + 2
        width, max_steps = gt.slice_settings(state, data._replace(adapt_steps=jnp.asarray(0, jnp.int32)))
        np.testing.assert_array_equal(width, 0.7)
        assert int(max_steps) == gt.MAX_STEPS


def test_slice_info_counts_every_density_evaluation():
    """slice_1d reports each evaluation of the log density (stepping out and shrinkage)."""
    calls = []

    def logdensity(x):
        jax.debug.callback(lambda: calls.append(1))
        return -0.5 * x**2

    x0 = jnp.asarray(0.3)
    _, _, info = slice_1d(jax.random.PRNGKey(4), logdensity, x0, logdensity(x0), jnp.asarray(1.0))
    jax.effects_barrier()
    assert int(info.num_evaluations) == len(calls) - 1 >= 1  # the first call was lp0's
    assert int(info.num_stalled) == 0


def test_slice_statistics_reach_sample_stats():
    """A GPBSVM Gibbs fit that samples theta keeps each draw's slice evaluations and stalled updates."""
    from bayes_maxmargin import GPBSVM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    clf = GPBSVM(inference="gibbs", num_chains=2, num_warmup=5, num_samples=6, progress_bar=False,
                 random_state=0).fit(X, y)
    stats = clf.idata_.sample_stats
    n_theta = sum(name in clf.idata_.posterior for name in ("lengthscale", "amplitude"))
    assert n_theta >= 1
    assert stats["slice_evaluations"].shape == (2, 6)
    assert np.all(stats["slice_evaluations"].values >= 2 * n_theta)  # stepping out ends and one draw each
    assert np.all((stats["slice_stalled"].values >= 0) & (stats["slice_stalled"].values <= n_theta))
