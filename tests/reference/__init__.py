"""Stored NUTS reference posteriors of the sampler tests (in the manner of posteriordb's reference draws).

Every Gibbs sampler is checked against NUTS on the model's marginal NumPyro program. Running NUTS in
the test costs an XLA compilation and a long run per problem; the default suite instead compares
the live Gibbs draws with NUTS draws stored here, one compressed ``<name>.npz`` per problem.

This module is the single definition of each reference problem: its data, model program, keyword
arguments, PRNG key and NUTS settings, and the reduction of the NUTS draws to the arrays the test
compares. ``python -m tests.reference.make_references [NAME ...]`` regenerates the files from it, the
tests take their data and constants from it, and :func:`load_reference` guards against a stored file
that no longer matches the program: each file keeps a few NUTS draws of the latent sites with the
log joint density the program gave them, and loading recomputes that density with the current program
(``numpyro.infer.util.log_density``, no sampling) and fails if it moved.

File layout: ``draws/<key>`` (chain, draw, ...) arrays compared by the test, ``guard/<site>`` the
``GUARD_DRAWS`` guard draws of every latent site, ``guard_log_joint`` their log joint density,
``diverging`` the number of divergent NUTS transitions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["PROBLEMS", "Reference", "load_reference", "reference_path", "run_reference", "check_guard"]

REFERENCE_DIR = Path(__file__).resolve().parent
GUARD_DRAWS = 8
GUARD_RTOL = 1e-8
# draws are stored in float32 when float64 would make the file larger than this (the guard stays float64)
MAX_FLOAT64_BYTES = 300_000


# ---------------------------------------------------------------------------------------- problem data
def synthetic_binary() -> tuple[np.ndarray, np.ndarray]:
    """A seeded, overlapping two-class problem: 200 x 3, labels +-1 (the ``synthetic_binary`` fixture)."""
    rng = np.random.default_rng(0)
    n, d = 200, 3
    X = rng.normal(size=(n, d))
    beta = np.array([1.5, -1.0, 0.5])
    y = np.where(X @ beta + 0.3 + rng.normal(scale=1.0, size=n) > 0, 1, -1)
    return X, y


def projection_tiny(n: int = 12, p: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A small projection (MMLDP) problem: n x p Gaussian inputs, labels from the first one."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def projection_separable(n: int = 20, p: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The inputs of :func:`projection_tiny` with labels the sign of the first input: separable classes."""
    X, _ = projection_tiny(n, p, seed)
    return X, np.where(X[:, 0] > 0, 1.0, -1.0)


def gp_wave(n: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """n = 30 sorted 1-D inputs, labels from a noisy sine (overlapping classes): the GP-theta problem."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-3.0, 3.0, n))
    y = np.where(np.sin(1.5 * x) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return x[:, None], y


def gp_tiny(n: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """n = 12 evenly spaced 1-D inputs, labels from a noisy sine: the fixed-theta GP problem."""
    rng = np.random.default_rng(0)
    x = np.linspace(-3.0, 3.0, n)
    y = np.where(np.sin(1.5 * x) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return x[:, None], y


def factor_tiny() -> tuple[np.ndarray, np.ndarray]:
    """12 x 4 inputs from one latent factor, labels from the factor: the factor-model problem."""
    rng = np.random.default_rng(1)
    n, d = 12, 4
    w = rng.normal(size=(n, 1))
    A = rng.normal(size=(d, 1))
    X = w @ A.T + 0.5 * rng.normal(size=(n, d))
    X -= X.mean(0)
    y = np.where(w[:, 0] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def factor_separable() -> tuple[np.ndarray, np.ndarray]:
    """The inputs of :func:`factor_tiny` with labels the sign of their first column (separable classes)."""
    X, _ = factor_tiny()
    return X, np.where(X[:, 0] > 0, 1.0, -1.0)


def luts_intercept_problem(n: int = 60, m: int = 4, seed: int = 0):
    """Luts & Ormerod Example 2: a random intercept over m groups (MixedData, float64 under x64)."""
    from bayes_maxmargin.models.luts.model import MixedData

    rng = np.random.default_rng(seed)
    g = np.arange(n) % m
    x = rng.normal(size=n)
    y = np.where(0.8 * x + np.array([-1.0, 0.0, 0.5, 1.0])[g] + rng.normal(size=n) > 0, 1.0, -1.0)
    X = np.column_stack([np.ones(n), x])
    return MixedData(jnp.asarray(X), jnp.asarray(np.eye(m)[g]), jnp.asarray(y))


def luts_separable_problem(n: int = 40, seed: int = 0):
    """Luts & Ormerod Example 1 (X = 1, Z = two features) on linearly separable classes: a gap of 0.5
    around the line x1 = 0.5 x2 (MixedData, float64 under x64)."""
    from bayes_maxmargin.models.luts.model import MixedData

    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(3 * n, 2))
    score = Z[:, 0] - 0.5 * Z[:, 1]
    Z = Z[np.abs(score) > 0.5][:n]
    y = np.where(Z[:, 0] - 0.5 * Z[:, 1] > 0, 1.0, -1.0)
    return MixedData(jnp.ones((n, 1)), jnp.asarray(Z), jnp.asarray(y))


def luts_missing_problem(n: int = 40, seed: int = 0):
    """Luts & Ormerod Sec. 3.3: two correlated predictors, 8 entries of the second missing
    ((MissingData, observed mask), float64 under x64)."""
    from bayes_maxmargin.models.luts.model import MissingData

    rng = np.random.default_rng(seed)
    X = rng.multivariate_normal([0.0, 0.0], [[1.0, 0.6], [0.6, 1.0]], size=n)
    y = np.where(X @ [1.0, -0.7] + 0.2 + 1.0 * rng.normal(size=n) > 0, 1.0, -1.0)
    obs = np.ones_like(X)
    obs[rng.choice(n, 8, replace=False), 1] = 0.0
    return MissingData(jnp.asarray(np.where(obs > 0, X, 0.0)), jnp.asarray(obs), jnp.asarray(y)), obs


# ---------------------------------------------------------------------------------------- constants
PROJECTION_HP = dict(a0=2.0, b0=2.0, c0=3.0, d0=3.0)
PROJECTION_N, PROJECTION_P = 20, 2
GP_THETA = dict(prior_scale=0.5, jitter=1e-2, gamma0=0.1)
GP_THETA_POINTS = np.linspace(0, 29, 5).astype(int)
GP_FIXED = dict(lengthscale=0.8, amplitude=1.0, gamma0=0.1)
FACTOR_GAMMA0 = 0.5
FACTOR_THETA = dict(lengthscale=1.5, prior_scale=0.5)  # the GP factor model with the length-scale sampled
FACTOR_PROBIT_THETA = (1.5, 1.0)  # SE length-scale and amplitude of the probit factor problem
LUTS_H = dict(sigma_beta2=25.0, A_u=3.0, B_u=2.0)
LUTS_IMP = dict(sigma_mu2=25.0, nu=4.0)  # the imputation model's prior of the missing-data problem (Psi = I)
LINEAR = dict(gamma0=0.5, gamma_prior=(2.0, 2.0), random_state=1, num_chains=4, num_warmup=300, num_samples=700)
GAMMA0_PRIOR = (2.0, 4.0)  # Ga(shape, rate) on gamma0 of the gamma0-prior problems (prior mean 0.5)


def gp_theta_log_prior_f(X: np.ndarray, jitter: float, draws: dict[str, np.ndarray]) -> np.ndarray:
    """log N(f | 0, K_theta + jitter I) at every (chain, draw) of an SE-kernel posterior."""
    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.core.linalg import mvn_logpdf_chol
    from bayes_maxmargin.models.gp.model import prior_covariance

    def one(ls, amp, f):
        cov = prior_covariance(X, "rbf", SEParams(ls, amp), jitter)
        return mvn_logpdf_chol(f, jnp.linalg.cholesky(cov))

    shape = draws["f"].shape[:2]
    with jax.enable_x64(True):
        flat = [jnp.asarray(draws[k]).reshape((-1,) + draws[k].shape[2:]) for k in ("lengthscale", "amplitude", "f")]
        return np.asarray(jax.jit(jax.vmap(one))(*flat)).reshape(shape)


# ---------------------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Problem:
    """One reference posterior: ``model(*args, **kwargs)`` sampled by :func:`run_nuts` (float64).

    ``build`` returns ``(args, kwargs)``; ``key`` the PRNG key of the run; ``nuts`` the keyword
    arguments of :func:`run_nuts`; ``reduce(samples, args, kwargs)`` the arrays the test compares;
    ``sign_symmetric`` the reduced arrays whose posterior is symmetric under a joint sign flip, so that
    each chain settles in either mode (the live check compares their absolute values).
    """

    name: str
    model: Callable[[], Callable[..., Any]]
    build: Callable[[], tuple[tuple, dict]]
    key: Callable[[], jax.Array]
    nuts: dict[str, Any]
    reduce: Callable[[dict, tuple, dict], dict[str, np.ndarray]]
    doc: str = ""
    sign_symmetric: tuple[str, ...] = ()


def _projection_build():
    X, y = projection_tiny(PROJECTION_N, PROJECTION_P)
    return (jnp.asarray(X), jnp.asarray(y)), dict(n_components=1, **PROJECTION_HP)


def _projection_reduce(s, args, kwargs):
    return {"w": s["w"][..., 0], "alpha": s["alpha"][..., 0], "Z": s["Z"][..., :4, 0], "A": s["A"][..., 0],
            "b": s["b"], "sigma": s["sigma"]}


def _projection_separable_build():
    X, y = projection_separable(PROJECTION_N, PROJECTION_P)
    return (jnp.asarray(X), jnp.asarray(y)), dict(n_components=1, **PROJECTION_HP)


def _projection_direct_build():
    args, kwargs = _projection_build()
    return args, dict(kwargs, latent_representation=False)


def projection_direct_statistics(X: np.ndarray, draws: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The compared functions of the posterior without the latent representation: f = x' A w + b at
    the first four inputs, b, and the logs of |w|, ||a||, alpha, sigma (the scale of a and w is heavy
    tailed along the ridge w a = const; the logs have every moment, the MCSE comparison needs two)."""
    A, w = draws["A"][..., 0], draws["w"][..., 0]  # K = 1
    f = (np.asarray(X)[:4] @ np.moveaxis(A, -1, 0).reshape(A.shape[-1], -1)).reshape(4, *w.shape)
    return {"f": np.moveaxis(f * w + draws["b"], 0, -1), "b": draws["b"], "log_abs_w": np.log(np.abs(w)),
            "log_norm_a": np.log(np.linalg.norm(A, axis=-1)), "log_alpha": np.log(draws["alpha"][..., 0]),
            "log_sigma": np.log(draws["sigma"])}


def _gp_theta_build():
    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.models.gp.model import kernel_prior

    X, y = gp_wave()
    se = SEParams(lengthscale=1.0, amplitude=1.0)
    kwargs = dict(kernel="rbf", kernel_params=se, gamma=1.0, gamma0=GP_THETA["gamma0"], jitter=GP_THETA["jitter"],
                  kernel_prior=kernel_prior(se, GP_THETA["prior_scale"]), noncentered=True)
    return (jnp.asarray(X), jnp.asarray(y)), kwargs


def gp_theta_statistics(X: np.ndarray, draws: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The compared functions of a GP-theta posterior: log theta, f at five inputs, log N(f | 0, K_theta)."""
    return {"log_theta": np.stack([np.log(draws["lengthscale"]), np.log(draws["amplitude"])], -1),
            "f": draws["f"][..., GP_THETA_POINTS],
            "log_prior_f": gp_theta_log_prior_f(np.asarray(X), GP_THETA["jitter"], draws)}


def _gp_fixed_build():
    from bayes_maxmargin.core.kernels import SEParams

    X, y = gp_tiny()
    kwargs = dict(kernel="rbf", kernel_params=SEParams(GP_FIXED["lengthscale"], GP_FIXED["amplitude"]), gamma=1.0,
                  gamma_prior=None, gamma0=GP_FIXED["gamma0"])
    return (jnp.asarray(X), jnp.asarray(y)), kwargs


def _factor_build(separable: bool = False):
    from bayes_maxmargin.core.kernels import SEParams

    X, y = factor_separable() if separable else factor_tiny()
    kwargs = dict(n_factors=1, classifier="linear", nu=1.0, psi_prior=(2.0, 1.0), gamma_prior=None,
                  gamma0=FACTOR_GAMMA0, intercept_scale=1.0, kernel_params=SEParams(), marginal_phi=True)
    return (jnp.asarray(X), jnp.asarray(y)), kwargs


def _factor_probit_build():
    from bayes_maxmargin.core.kernels import SEParams

    X, y = factor_tiny()
    kwargs = dict(n_factors=1, classifier="gp", nu=1.0, psi_prior=(2.0, 1.0), link="probit",
                  kernel_params=SEParams(*FACTOR_PROBIT_THETA), marginal_phi=True)
    return (jnp.asarray(X), jnp.asarray(y)), kwargs


def _factor_gp_theta_build():
    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.models.gp.model import kernel_prior

    X, y = factor_tiny()
    se = SEParams(FACTOR_THETA["lengthscale"], 1.0)
    kwargs = dict(n_factors=1, classifier="gp", nu=1.0, psi_prior=(2.0, 1.0), gamma_prior=None, gamma0=FACTOR_GAMMA0,
                  kernel_params=se, marginal_phi=True,
                  kernel_prior=kernel_prior(se, FACTOR_THETA["prior_scale"], ("lengthscale",)))
    return (jnp.asarray(X), jnp.asarray(y)), kwargs


def _factor_gp_theta_reduce(s, args, kwargs):
    return {"psi": s["psi"], "A": s["A"][..., :1, :1], "f": s["f"][..., :2], "lengthscale": s["lengthscale"]}


def _factor_gp_theta_gamma_build():
    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.models.gp.model import kernel_prior

    X, y = factor_tiny()
    se = SEParams(FACTOR_THETA["lengthscale"], 1.0)
    learn = ("lengthscale", "amplitude")
    kwargs = dict(n_factors=1, classifier="gp", nu=1.0, psi_prior=(2.0, 1.0), gamma_prior=(2.0, 1.0),
                  gamma0=FACTOR_GAMMA0, kernel_params=se, marginal_phi=True,
                  kernel_prior=kernel_prior(se, FACTOR_THETA["prior_scale"], learn))
    return (jnp.asarray(X), jnp.asarray(y)), kwargs


def _factor_gp_theta_gamma_reduce(s, args, kwargs):
    return dict(_factor_gp_theta_reduce(s, args, kwargs), amplitude=s["amplitude"], gamma=s["gamma"])


def _factor_reduce(s, args, kwargs):
    return {"psi": s["psi"], "A": s["A"][..., :1, :1], "f": s["f"][..., :2], "beta": s["beta"],
            "intercept": s["intercept"]}


def _luts_build():
    data = luts_intercept_problem()
    return (data.X, data.Z, data.y), dict(**LUTS_H, noncentred=True)


def _luts_separable_build():
    data = luts_separable_problem()
    return (data.X, data.Z, data.y), dict(**LUTS_H, noncentred=True)


def _luts_missing_model():
    from bayes_maxmargin.models.luts.model import missing_bsvm

    # the missing pattern fixes the number of latent entries: closed over, not traced with the data
    return functools.partial(missing_bsvm, observed=luts_missing_problem()[1] > 0)


def _luts_missing_build():
    data, _ = luts_missing_problem()
    return (data.D,), dict(**LUTS_H, **LUTS_IMP, Psi=jnp.eye(2), y=data.y)


def _linear_build():
    X, y = synthetic_binary()
    kwargs = dict(sigma=1.0, intercept_scale=10.0, fit_intercept=True, gamma=1.0, gamma_prior=LINEAR["gamma_prior"],
                  gamma0=LINEAR["gamma0"])
    return (jnp.asarray(X, jnp.float64), jnp.asarray(y, jnp.float64)), kwargs


def _gp_gamma0_build():
    args, kwargs = _gp_fixed_build()
    return args, dict(kwargs, gamma0_prior=GAMMA0_PRIOR)


def _linear_gamma0_build():
    args, kwargs = _linear_build()
    return args, dict(kwargs, gamma0_prior=GAMMA0_PRIOR)


def _linear_key():
    # the key LinearBSVM(random_state=1) draws its NUTS run with
    from bayes_maxmargin.estimators.base import _random_key

    return _random_key(LINEAR["random_state"])


def _select(*names):
    return lambda s, args, kwargs: {k: s[k] for k in names}


def _model(module, name):
    def get():
        import importlib

        return getattr(importlib.import_module(f"bayes_maxmargin.models.{module}.model"), name)

    return get


PROBLEMS: dict[str, Problem] = {
    p.name: p
    for p in [
        Problem(
            "projection_mmldp", _model("projection", "mmdp"), _projection_build, lambda: jax.random.PRNGKey(3),
            dict(num_warmup=300, num_samples=600, num_chains=2), _projection_reduce,
            "MMLDP (Chen et al. 2015), K = 1, n = 20, p = 2: tests/test_projection_gibbs.py",
            sign_symmetric=("w", "Z", "A"),
        ),
        Problem(
            "projection_separable", _model("projection", "mmdp"), _projection_separable_build,
            lambda: jax.random.PRNGKey(3), dict(num_warmup=500, num_samples=1000, num_chains=2), _projection_reduce,
            "MMLDP (Chen et al. 2015), K = 1, n = 20, p = 2, separable classes: tests/test_projection_gibbs.py",
            sign_symmetric=("w", "Z", "A"),
        ),
        Problem(
            "projection_direct", _model("projection", "mmdp"), _projection_direct_build, lambda: jax.random.PRNGKey(3),
            dict(num_warmup=500, num_samples=1000, num_chains=4),
            lambda s, args, kwargs: projection_direct_statistics(args[0], s),
            "MMLDP without the latent representation (Chen et al. 2015, eq. 11), K = 1, n = 20, p = 2: "
            "tests/test_projection_gibbs.py",
        ),
        Problem(
            "gp_theta_se", _model("gp", "gp_bsvm"), _gp_theta_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=200, num_samples=400, num_chains=4, target_accept_prob=0.6),
            lambda s, args, kwargs: gp_theta_statistics(args[0], s),
            "GP SVM with SE theta sampled (non-centred), n = 30: tests/test_gp_theta.py",
        ),
        Problem(
            "gp_fixed_theta", _model("gp", "gp_bsvm"), _gp_fixed_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=300, num_samples=800, num_chains=4), _select("f"),
            "GP SVM at fixed SE theta, gamma0 = 0.1, n = 12: tests/test_gp_gibbs.py",
        ),
        Problem(
            "factor_linear", _model("factor", "factor_bsvm"), _factor_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=300, num_samples=600, num_chains=4), _factor_reduce,
            "linear discriminative factor model, phi marginalised, 12 x 4: tests/test_factor_gibbs.py",
            sign_symmetric=("A", "beta"),
        ),
        Problem(
            "factor_linear_separable", _model("factor", "factor_bsvm"), functools.partial(_factor_build, True),
            lambda: jax.random.PRNGKey(1), dict(num_warmup=300, num_samples=600, num_chains=4), _factor_reduce,
            "linear discriminative factor model, phi marginalised, 12 x 4, separable classes: "
            "tests/test_factor_gibbs.py",
            sign_symmetric=("A", "beta"),
        ),
        Problem(
            "factor_probit", _model("factor", "factor_bsvm"), _factor_probit_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=300, num_samples=600, num_chains=4), _select("psi", "A", "f"),
            "nonlinear factor model with the probit link (GP on the scores, SE theta fixed), 12 x 4: "
            "tests/test_factor_gibbs.py",
            sign_symmetric=("A",),
        ),
        Problem(
            "factor_gp_theta", _model("factor", "factor_bsvm"), _factor_gp_theta_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=500, num_samples=2000, num_chains=4, target_accept_prob=0.9),
            _factor_gp_theta_reduce,
            "GP discriminative factor model, SE length-scale sampled, phi marginalised, 12 x 4: "
            "tests/test_factor_theta.py",
            sign_symmetric=("A",),
        ),
        Problem(
            "factor_gp_theta_gamma", _model("factor", "factor_bsvm"), _factor_gp_theta_gamma_build,
            lambda: jax.random.PRNGKey(1),
            dict(num_warmup=2000, num_samples=4000, thin=10, num_chains=4, target_accept_prob=0.95),
            _factor_gp_theta_gamma_reduce,
            "GP discriminative factor model, both SE fields and gamma sampled, phi marginalised, 12 x 4: "
            "tests/test_factor_theta.py (extended)",
            sign_symmetric=("A",),
        ),
        Problem(
            "luts_random_intercept", _model("luts", "mixed_bsvm"), _luts_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=400, num_samples=800, num_chains=4, target_accept_prob=0.9),
            _select("beta", "u", "sigma_u2"),
            "Luts & Ormerod Appendix A, random intercept (non-centred), n = 60: tests/test_luts_gibbs.py",
        ),
        Problem(
            "luts_penalty_separable", _model("luts", "mixed_bsvm"), _luts_separable_build,
            lambda: jax.random.PRNGKey(1), dict(num_warmup=400, num_samples=800, num_chains=4, target_accept_prob=0.9),
            _select("beta", "u", "sigma_u2"),
            "Luts & Ormerod Appendix A, penalty prior (non-centred), separable classes, n = 40: "
            "tests/test_luts_gibbs.py",
        ),
        Problem(
            "luts_missing", _luts_missing_model, _luts_missing_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=400, num_samples=800, num_chains=4, target_accept_prob=0.9),
            _select("beta", "u", "mu", "Sigma", "D_mis"),
            "Luts & Ormerod Appendix C, missing predictors, n = 40: tests/test_luts_gibbs.py",
        ),
        Problem(
            "linear_synthetic_gamma", _model("linear", "linear_bsvm"), _linear_build, _linear_key,
            dict(num_warmup=LINEAR["num_warmup"], num_samples=LINEAR["num_samples"], num_chains=LINEAR["num_chains"]),
            _select("beta", "intercept", "gamma"),
            "linear SVM, gamma0 = 0.5, gamma ~ Ga(2, 2), synthetic 200 x 3: tests/test_linear_inference.py",
        ),
        Problem(
            "linear_gamma0_prior", _model("linear", "linear_bsvm"), _linear_gamma0_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=300, num_samples=700, num_chains=4), _select("beta", "intercept", "gamma", "gamma0"),
            "linear SVM, gamma ~ Ga(2, 2), gamma0 ~ Ga(2, 4), synthetic 200 x 3: tests/test_gamma0_prior.py",
        ),
        Problem(
            "gp_gamma0_prior", _model("gp", "gp_bsvm"), _gp_gamma0_build, lambda: jax.random.PRNGKey(1),
            dict(num_warmup=300, num_samples=800, num_chains=4), _select("f", "gamma0"),
            "GP SVM at fixed SE theta, gamma0 ~ Ga(2, 4), n = 12: tests/test_gamma0_prior.py",
        ),
    ]
}


# ---------------------------------------------------------------------------------------- run / store / load
class Reference(NamedTuple):
    """A stored reference: the compared NUTS ``draws`` (chain, draw, ...) and the divergence count."""

    draws: dict[str, np.ndarray]
    diverging: int


def reference_path(name: str) -> Path:
    return REFERENCE_DIR / f"{name}.npz"


def _problem(name: str) -> Problem:
    if name not in PROBLEMS:
        raise ValueError(f"Unknown reference problem {name!r}; known: {sorted(PROBLEMS)}")
    return PROBLEMS[name]


def run_reference(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run the problem's NUTS exactly as its file was made: (reduced draws, all latent draws, stats)."""
    from bayes_maxmargin.engine.nuts import run_nuts

    prob = _problem(name)
    with jax.enable_x64(True):
        args, kwargs = prob.build()
        samples, stats = run_nuts(prob.model(), prob.key(), args, kwargs, **prob.nuts)
        draws = {k: np.asarray(v) for k, v in prob.reduce(samples, args, kwargs).items()}
    return draws, samples, stats


def guard_indices(n_chains: int, n_draws: int) -> tuple[np.ndarray, np.ndarray]:
    """``GUARD_DRAWS`` (chain, draw) positions spread over all chains and draws."""
    flat = np.linspace(0, n_chains * n_draws - 1, GUARD_DRAWS).astype(int)
    return flat // n_draws, flat % n_draws


def save_reference(name: str, draws: dict, samples: dict, stats: dict) -> Path:
    """Write ``<name>.npz``: the compared draws, the guard draws and their log joint density."""
    n_chains, n_draws = stats["log_joint"].shape
    c, d = guard_indices(n_chains, n_draws)
    nbytes = sum(np.asarray(v).nbytes for v in draws.values())
    dtype = np.float64 if nbytes <= MAX_FLOAT64_BYTES else np.float32
    out = {f"draws/{k}": np.asarray(v, dtype) for k, v in draws.items()}
    out.update({f"guard/{k}": np.asarray(v)[c, d] for k, v in samples.items()})
    out["guard_log_joint"] = np.asarray(stats["log_joint"], np.float64)[c, d]
    out["diverging"] = np.asarray(int(np.sum(stats["diverging"])))
    path = reference_path(name)
    np.savez_compressed(path, **out)
    return path


def _stale(name: str, why: str) -> AssertionError:
    return AssertionError(
        f"stale reference {name!r}: {why}; rerun python -m tests.reference.make_references {name}"
    )


def check_guard(name: str, stored: dict[str, np.ndarray]) -> None:
    """Recompute the current program's log density at the stored guard draws; raise if it moved."""
    from numpyro.infer.util import log_density

    prob = _problem(name)
    sites = {k[len("guard/"):]: v for k, v in stored.items() if k.startswith("guard/")}
    expected = stored["guard_log_joint"]
    with jax.enable_x64(True):
        args, kwargs = prob.build()
        model = prob.model()
        def one(params):
            return log_density(model, args, kwargs, params)[0]

        try:  # one compiled, batched evaluation: cheaper than evaluating the program op by op per draw
            actual = np.asarray(jax.jit(jax.vmap(one))({k: jnp.asarray(v) for k, v in sites.items()}))
        except Exception as err:  # a renamed site, a changed shape: the program no longer fits the file
            raise _stale(name, f"the model program cannot evaluate the stored draws ({err!r})") from err
    if not np.allclose(actual, expected, rtol=GUARD_RTOL, atol=0.0):
        raise _stale(name, f"the model's log density at the stored draws is {actual}, the file says {expected}")


def load_reference(name: str) -> Reference:
    """The stored NUTS reference ``name``, after checking it still belongs to the current program."""
    path = reference_path(name)
    if not path.is_file():
        raise AssertionError(f"missing reference {path}; run python -m tests.reference.make_references {name}")
    with np.load(path) as f:
        stored = {k: f[k] for k in f.files}
    check_guard(name, stored)
    draws = {k[len("draws/"):]: np.asarray(v, np.float64) for k, v in stored.items() if k.startswith("draws/")}
    return Reference(draws, int(stored["diverging"]))
