"""The linear Gibbs sampler's directional moves with lambda integrated out (``marginal_moves``):
the adapted basis, the moves' invariance, agreement with NUTS, and the mixing they buy."""

from __future__ import annotations

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.preprocessing import StandardScaler

from bayes_maxmargin import LinearBSVM, SeparableClassesWarning
from bayes_maxmargin.diagnostics import MixingWarning
from bayes_maxmargin.core.augmentation import marginal_log_density
from bayes_maxmargin.core.slice import adapt_directions, direction_sweep, init_directions
from bayes_maxmargin.models.linear.model import LinearHyper, log_prior

from ._posterior import assert_posteriors_agree


def test_basis_is_the_cholesky_factor_of_the_last_window_and_fixed_after_warm_up():
    """With W = 400 adaptation sweeps the basis becomes L' (L L' the shrunk covariance of the draws of
    sweeps [200, 400)), and later draws leave it unchanged."""
    rng = np.random.default_rng(0)
    draws = rng.normal(size=(600, 3)) @ np.array([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [0.1, -0.3, 0.4]])
    with jax.enable_x64(True):
        adapt = jax.jit(adapt_directions)
        state = init_directions(3, jnp.float64)
        for x in draws[:400]:
            state = adapt(state, jnp.asarray(x), jnp.asarray(400))
        window = draws[200:400]
        shrink = 5.0 / (len(window) + 5.0)
        expected = (1 - shrink) * np.cov(window.T) + shrink * 1e-3 * np.eye(3)
        # Welford's sums against numpy's two-pass covariance: rounding only (float64)
        np.testing.assert_allclose(np.asarray(state.basis).T @ np.asarray(state.basis), expected, rtol=1e-10)
        frozen = state.basis
        for x in draws[400:]:
            state = adapt(state, jnp.asarray(x), jnp.asarray(400))
        np.testing.assert_array_equal(state.basis, frozen)


def test_direction_sweep_leaves_a_correlated_gaussian_invariant():
    """Exact draws of N(0, S) (S with correlation 0.9) stay N(0, S) after 3 sweeps along a fixed,
    non-orthogonal basis, the density evaluated through a linear image as the linear model does.

    40 000 chains: the sample variance's relative standard error is sqrt(2 / 40 000) = 0.7 %, and a
    covariance entry's standard error is at most 0.7 % of sqrt(S_ii S_jj); 5 standard errors (3.5 %)."""
    S = np.array([[1.0, 0.9], [0.9, 1.0]])
    P = jnp.asarray(np.linalg.inv(S))
    A = jnp.asarray([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])  # an arbitrary image A x
    basis = jnp.asarray([[1.0, 0.0], [1.0, 1.0]])

    def logdensity(x, image):  # the quadratic form, read partly from the image to check its update
        direct = -0.5 * x @ P @ x
        return direct + 0.0 * jnp.sum(image) + jnp.where(jnp.allclose(image, A @ x, atol=1e-8), 0.0, -jnp.inf)

    def sweeps(key, x):
        for k in jax.random.split(key, 3):
            x, _, _ = direction_sweep(k, logdensity, x, A @ x, basis, A @ basis.T, width=1.5, max_steps=4)
        return x

    n = 40_000
    x0 = jax.random.normal(jax.random.PRNGKey(0), (n, 2)) @ jnp.linalg.cholesky(jnp.asarray(S)).T
    x = jax.jit(jax.vmap(sweeps))(jax.random.split(jax.random.PRNGKey(1), n), x0)
    assert np.all(np.isfinite(np.asarray(x)))
    np.testing.assert_allclose(np.cov(np.asarray(x).T), S, atol=0.035)
    np.testing.assert_allclose(np.asarray(x).mean(0), 0.0, atol=5 * np.sqrt(1 / n))
    # the chains moved: a sweep is not the identity
    assert np.mean(np.abs(np.asarray(x - x0)) > 1e-6) > 0.9


def test_marginal_log_density_is_the_augmented_program_with_lambda_integrated_out():
    """log p(w) + sum_n log sLa(1 - y_n f_n) at gamma0 = 0 (the hinge) and 0.3 (eq. 4-5) against a
    quadrature over each lambda_n of the augmented factor N(u_n | -lambda_n, lambda_n / gamma) times the
    prior of lambda_n (flat, or Exp(gamma0)). quad's error on these smooth integrands is about 1e-10."""
    from scipy.integrate import quad
    from scipy.stats import norm

    X = np.array([[0.3, -1.0], [1.2, 0.4], [-0.5, 0.8]])
    y = np.array([1.0, -1.0, 1.0])
    coef = np.array([0.7, -0.2, 0.1])
    design = np.hstack([X, np.ones((3, 1))])
    u = 1.0 - y * (design @ coef)
    gamma = 1.5
    with jax.enable_x64(True):
        for gamma0 in (0.0, 0.3):
            hyper = LinearHyper(jnp.asarray([1.0, 1.0, 0.01]), *map(jnp.asarray, (gamma, 1.0, 1.0, gamma0)))
            got = marginal_log_density(jnp.asarray(coef), jnp.asarray(design @ coef), jnp.asarray(y),
                                       lambda c: log_prior(c, gamma, hyper, False), gamma, gamma0)

            def integrand(lam, ui):
                prior = 1.0 if gamma0 == 0 else gamma0 * np.exp(-gamma0 * lam)
                return norm.pdf(ui, -lam, np.sqrt(lam / gamma)) * prior

            # split at lambda = |u|, where the integrand peaks
            lik = [np.log(quad(integrand, 0, abs(ui), (ui,))[0] + quad(integrand, abs(ui), np.inf, (ui,))[0])
                   for ui in u]
            expected = float(log_prior(jnp.asarray(coef), gamma, hyper, False)) + sum(lik)
            np.testing.assert_allclose(float(got), expected, rtol=1e-8)


def _iris_setosa():
    """Iris, setosa against the rest, standardised: linearly separable classes."""
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), np.where(y == 0, 1, -1)


@pytest.mark.slow
def test_gibbs_with_marginal_moves_agrees_with_nuts_on_separable_classes():
    """On separable classes the posterior is wide in the intercept and the scale of beta (only the
    priors bound them): Gibbs with the moves and NUTS on the same program agree within Monte Carlo
    error (:func:`assert_posteriors_agree`). The overlapping synthetic problem with gamma sampled is
    test_linear_inference's stored-reference test, run at the default (moves on)."""
    X, y = _iris_setosa()
    common = dict(num_chains=4, random_state=0, progress_bar=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gibbs = LinearBSVM("gibbs", num_samples=1500, num_warmup=500, **common).fit(X, y)
        nuts = LinearBSVM("nuts", num_samples=1000, num_warmup=500, **common).fit(X, y)
    # each fit says the classes are separable, and neither reports a mixing failure
    assert [w.category for w in caught if issubclass(w.category, (MixingWarning, SeparableClassesWarning))] == [
        SeparableClassesWarning, SeparableClassesWarning]
    assert np.isfinite(gibbs.idata_.posterior["intercept"].values).all()
    names = ["beta", "intercept"]
    assert_posteriors_agree({k: gibbs.idata_.posterior[k].values for k in names},
                            {k: nuts.idata_.posterior[k].values for k in names}, names)


@pytest.mark.slow
def test_the_moves_raise_the_effective_draws_of_the_intercept():
    """Breast cancer (569 x 30, standardised), 2 chains x 600 draws: the intercept's bulk ESS per draw
    is about 0.09 without the moves and 0.5 with them (4 x 1000 draws). The bound 0.25 sits between
    them, far from each at this size (the ESS estimate's relative error at 1200 draws is about 20 %)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    ess = {}
    for moves in (False, True):
        clf = LinearBSVM(num_chains=2, num_samples=600, num_warmup=400, marginal_moves=moves, random_state=0,
                         progress_bar=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MixingWarning)  # the chains without the moves have not mixed
            clf.fit(X, y)
        ess[moves] = float(az.ess(clf.idata_, var_names=["intercept"])["intercept"]) / 1200
    assert ess[False] < 0.25 < ess[True], ess


@pytest.mark.slow
def test_the_moves_raise_the_effective_draws_of_the_penalty_prior_variance():
    """The penalty prior (Luts & Ormerod 2014, Sec. 3.1) on breast cancer, 2 chains x 600 draws:
    sigma_u^2, coupled to the coefficients' norm, had about 0.005 effective draws per draw without the
    moves and 0.17 with the directional and scale moves (4 x 1000 draws). The bound 0.05 lies between
    them, far from each at this size (the ESS estimate's relative error at 1200 draws is about 20 %)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    ess = {}
    for moves in (False, True):
        clf = LinearBSVM(prior="penalty", num_chains=2, num_samples=600, num_warmup=400, marginal_moves=moves,
                         random_state=0, progress_bar=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MixingWarning)  # the chains without the moves have not mixed
            clf.fit(X, y)
        ess[moves] = float(az.ess(clf.idata_, var_names=["sigma_u2"])["sigma_u2"]) / 1200
    assert ess[False] < 0.05 < ess[True], ess


def test_separable_classes_are_named_in_a_one_vs_rest_fit():
    """Iris, 3 classes: setosa is linearly separable from the rest, the other two classes are not; one
    warning names class 0 (short chains: the check reads the posterior-mean hyperplane), and the
    mixing check, which these short chains fail, judges the other classes only."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LinearBSVM(num_chains=2, num_samples=100, num_warmup=100, random_state=0, progress_bar=False).fit(X, y)
    separable = [str(w.message) for w in caught if issubclass(w.category, SeparableClassesWarning)]
    assert len(separable) == 1 and "(class 0 against the rest)" in separable[0], separable
    mixing = [str(w.message) for w in caught if issubclass(w.category, MixingWarning)]
    assert len(mixing) == 1 and "class=0" not in mixing[0] and "class=" in mixing[0], mixing


def test_marginal_moves_must_be_a_bool():
    X, y = _iris_setosa()
    with pytest.raises(TypeError, match="marginal_moves"):
        LinearBSVM(marginal_moves="yes").fit(X, y)


def test_an_overflow_under_the_vague_penalty_prior_names_a_proper_one(monkeypatch):
    """Where the classes are (nearly) separable, sigma_u^2 under the paper's IG(0.01, 0.01) prior has a
    posterior tail up to 1e20 and beyond (breast cancer with 5 % of entries missing: two of four chains
    reached 1e28 by sweep 650), where the updates overflow. The error then names A_u and B_u; with a
    proper prior it is passed on unchanged."""
    from bayes_maxmargin.engine.mcmc import NonFiniteStateError

    def overflow(*args, **kwargs):
        raise NonFiniteStateError("chain 2 produced a non-finite value of 'D' at iteration 649")

    monkeypatch.setattr(LinearBSVM, "_fit_luts", overflow)
    X, y = _iris_setosa()
    with pytest.raises(NonFiniteStateError, match=r"IG\(A_u=0.01, B_u=0.01\).*Pass A_u and B_u of 1 or more"):
        LinearBSVM(prior="penalty").fit(X, y)
    with pytest.raises(NonFiniteStateError, match=r"iteration 649$"):
        LinearBSVM(prior="penalty", A_u=2.0, B_u=2.0).fit(X, y)


def _move_fits():
    from bayes_maxmargin import FactorBSVM, GPBSVM, MaxMarginProjection

    short = dict(num_warmup=20, num_samples=10, num_chains=2, progress_bar=False, random_state=0)
    return {
        "linear": lambda moves: LinearBSVM(marginal_moves=moves, **short),
        "linear-penalty": lambda moves: LinearBSVM(prior="penalty", marginal_moves=moves, **short),
        "gp": lambda moves: GPBSVM(inference="gibbs", learn_kernel=False, marginal_moves=moves, **short),
        "gp-theta": lambda moves: GPBSVM(inference="gibbs", marginal_moves=moves, **short),
        "projection": lambda moves: MaxMarginProjection(n_components=2, **short) if moves else None,
        "factor": lambda moves: FactorBSVM(n_factors=2, classifier="linear", **short) if moves else None,
    }


@pytest.mark.parametrize("name", list(_move_fits()))
def test_the_moves_report_their_evaluations_per_draw(name):
    """Every Gibbs sampler's Info (MoveInfo: the moves' density evaluations and stalled updates) reaches
    sample_stats per draw: each draw of a sweep with moves evaluated the marginal density at least once per
    direction (slice moves: the initial bracket's point) or per elliptical update, a sweep without them
    none, and the moves' Info changes no draw it is recorded beside."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X[:60, :4])
    y = y[:60]
    make = _move_fits()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (MixingWarning, SeparableClassesWarning))
        stats = make(True).fit(X, y).idata_.sample_stats
        off = make(False)
        off_stats = None if off is None else off.fit(X, y).idata_.sample_stats
    evaluations = np.asarray(stats["move_evaluations"])
    assert evaluations.shape[:2] == (2, 10)
    assert evaluations.min() >= {"gp": 10, "gp-theta": 10}.get(name, 3)  # 10 elliptical updates; >= 3 axes
    assert np.all(np.asarray(stats["move_stalled"]) >= 0)
    if off_stats is not None:
        assert np.all(np.asarray(off_stats["move_evaluations"]) == 0)
    if name == "factor":  # the scale move of each of the 2 factors: at least one evaluation each
        assert np.asarray(stats["scale_evaluations"]).min() >= 2
