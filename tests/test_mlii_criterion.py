"""ML-II's leave-one-out criterion (``mlii_criterion="loo"``, :func:`gp_loo_log_predictive`): each point's
predictive from a refit without it, uphill steps, and the option's checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_ndtr

from bayes_maxmargin import GPBSVM
from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.core.parameters import flatten
from bayes_maxmargin.core.checks import InvalidParameterError
from bayes_maxmargin.models.gp.covariance import fitc_factors
from bayes_maxmargin.core.kernels import ARDParams
from bayes_maxmargin.models.gp.ecm import gp_ecm_mlii, gp_loo_log_predictive, mlii_update
from bayes_maxmargin.models.gp.model import GPHyper, kernel_log_prior, kernel_prior, prior_covariance

from .conftest import needs_data

rng = np.random.default_rng(4)
X = rng.normal(size=(14, 2))
Y = np.where(X[:, 0] - X[:, 1] + 0.4 * rng.normal(size=14) > 0, 1.0, -1.0)
INV_LAM = rng.uniform(0.3, 20.0, 14)  # omega = 1 / lambda of some E-step
GAMMA = 0.7
THETA = SEParams(lengthscale=1.3, amplitude=1.5)
V = X[::3] + 0.1  # FITC pseudo-inputs


def _float64(theta: SEParams) -> SEParams:
    """theta as float64 arrays (not weakly typed Python floats)."""
    return SEParams(*(jnp.asarray(v, jnp.float64) for v in theta))


def _refit_without_each_point(K: np.ndarray) -> float:
    """sum_n log Phi(y_n m_n / sqrt(1 + s2_n)) with (m_n, s2_n) the GP regression of the pseudo-observations
    t = y (1 + lambda) with noise variances lambda / gamma (eq. 7, 12) fitted to the other points, predicting
    the latent f_n: one explicit solve per point."""
    lam = 1.0 / INV_LAM
    t, noise = Y * (1.0 + lam), lam / GAMMA
    total = 0.0
    for n in range(len(Y)):
        rest = np.arange(len(Y)) != n
        B = K[np.ix_(rest, rest)] + np.diag(noise[rest])
        k = K[rest, n]
        mean = k @ np.linalg.solve(B, t[rest])
        var = K[n, n] - k @ np.linalg.solve(B, k)
        total += log_ndtr(Y[n] * mean / np.sqrt(1.0 + var))
    return float(total)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "fitc"])
def test_loo_criterion_is_the_refit_without_each_point(sparse):
    """The criterion from one factorisation equals the N refits without each point, for the dense prior and for
    FITC (whose covariance of the other points does not involve the point left out: Q_nn + diag(K_nn - Q_nn)
    restricted to them). Both are the same linear algebra in float64 on a 14-point problem of condition
    number below 1e4, so 1e-9 is rounding."""
    with jax.enable_x64(True):
        if sparse:
            fac = jax.jit(fitc_factors)(THETA, jnp.asarray(X), jnp.asarray(V), jnp.asarray(Y))
            K = np.asarray(fac.U) @ np.asarray(fac.U).T + np.diag(np.asarray(fac.dq))
        else:
            K = np.asarray(jax.jit(prior_covariance, static_argnums=1)(jnp.asarray(X), "rbf", THETA, 1e-6))
        got = float(jax.jit(gp_loo_log_predictive)(THETA, X, Y, INV_LAM, GAMMA, V=V if sparse else None))
    np.testing.assert_allclose(got, _refit_without_each_point(K), rtol=1e-9)


def test_mlii_step_raises_the_loo_criterion():
    """An ML-II step on the leave-one-out criterion moves theta uphill on it, and reports it before and after."""
    with jax.enable_x64(True):
        ml = mlii_update(THETA, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(INV_LAM), jnp.asarray(GAMMA),
                         kernel="rbf", criterion="loo")
        criterion = jax.jit(gp_loo_log_predictive)
        # THETA as the float64 arrays ML-II returns: one compiled criterion serves both
        before, after = (float(criterion(theta, X, Y, INV_LAM, GAMMA)) for theta in (_float64(THETA), ml.theta))
    assert after > before + 1e-3
    np.testing.assert_allclose([float(ml.log_z_before), float(ml.log_z_after)], [before, after], rtol=1e-12)


def test_kernel_log_prior_is_the_log_normal_density_of_log_theta():
    """kernel_log_prior sums N(log theta_j | loc_j, scale_j^2) over every entry of the fields it covers (ARD:
    one per feature), against scipy's normal density; a field left out of the prior adds nothing."""
    from scipy.stats import norm

    centre = ARDParams(lengthscales=jnp.array([1.0, 2.0, 4.0]), amplitude=jnp.asarray(1.5))
    log_theta, unflatten = flatten(ARDParams(lengthscales=jnp.array([0.5, 2.0, 9.0]), amplitude=jnp.exp(2.0)))
    prior = kernel_prior(centre, scale=0.7)
    expected = (norm.logpdf(np.log([0.5, 2.0, 9.0]), np.log([1.0, 2.0, 4.0]), 0.7).sum()
                + norm.logpdf(2.0, np.log(1.5), 0.7))
    np.testing.assert_allclose(float(kernel_log_prior(log_theta, prior, unflatten)), expected, rtol=1e-6)
    only_amplitude = kernel_prior(centre, scale=0.7, fields=("amplitude",))
    np.testing.assert_allclose(float(kernel_log_prior(log_theta, only_amplitude, unflatten)),
                               norm.logpdf(2.0, np.log(1.5), 0.7), rtol=1e-6)


def test_a_prior_step_raises_the_criterion_plus_the_log_prior():
    """With ``theta_prior`` an ML-II step maximises the criterion plus the log prior of log theta (MAP-II) and
    reports that sum before and after."""
    prior = kernel_prior(SEParams(lengthscale=1.0, amplitude=1.0), scale=0.5)
    with jax.enable_x64(True):
        ml = mlii_update(THETA, jnp.asarray(X), jnp.asarray(Y), jnp.asarray(INV_LAM), jnp.asarray(GAMMA),
                         kernel="rbf", criterion="loo", theta_prior=prior)
        criterion = jax.jit(gp_loo_log_predictive)

        def total(theta):
            log_theta, unflatten = flatten(theta)
            return float(criterion(theta, X, Y, INV_LAM, GAMMA)) + float(kernel_log_prior(log_theta, prior, unflatten))

        before, after = total(THETA), total(ml.theta)
    assert after > before + 1e-3
    np.testing.assert_allclose([float(ml.log_z_before), float(ml.log_z_after)], [before, after], rtol=1e-10)


def _separable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels y = sign(sum_j x_j) of five standard normal features: separable by a plane through the data."""
    X_sep = np.random.default_rng(seed).normal(size=(n, 5))
    return X_sep, np.where(X_sep.sum(axis=1) > 0, 1.0, -1.0)


def test_loo_criterion_keeps_the_kernel_finite_on_separable_data():
    """On separable labels every leave-one-out prediction can be made certain by a large amplitude (and a long
    length-scale, where the SE kernel is a large constant plus a linear kernel), so the criterion alone has no
    maximum: from the estimator's start (length-scale sqrt(5), unit amplitude) the amplitude reaches 3e8-9e9
    on these 60 rows (seeds 0, 1). The estimator adds its log-normal prior (``kernel_prior_scale`` = 1 around
    the start), which keeps it at 2.5-4.1 (measured); the bound 100 is 4.6 prior standard deviations, the
    bound 1e4 below the runaway a hundredth of the smallest value seen. On crabs the runaway reached 2e14 and
    every test prediction 0.5."""
    X_sep, y_sep = _separable(60, 0)
    with float_precision(True):  # the estimator's precision setting (part of what a program is looked up by)
        f64 = lambda v: jnp.asarray(v, jnp.float64)  # noqa: E731
        start = SEParams(lengthscale=f64(np.sqrt(5.0)), amplitude=f64(1.0))
        hyper = GPHyper(*map(f64, (1.0, 2.0, 1.0, 0.0, 1.0, 1.0)))
        # the criterion alone: the estimator's fit below (the same arrays and static arguments, so that one
        # compiled program serves both) with its log-normal prior 1e4 times wider, whose pull on log theta
        # (1e-8 of the estimator's) is nothing against the criterion's
        alone = gp_ecm_mlii(jnp.asarray(X_sep), jnp.asarray(y_sep), start, hyper, f64(1e-10), kernel="rbf",
                            max_iter=200, mlii_every=20, mlii_steps=10, optimizer="lbfgs", learning_rate=0.05,
                            estimate_gamma=False, jitter=1e-6, trainable=("lengthscale", "amplitude"), mlii_tol=1e-4,
                            accelerate=True, exact=True, criterion="loo", theta_prior=kernel_prior(start, f64(1e4)))
    assert float(alone.theta.amplitude) > 1e4
    est = GPBSVM(inference="ecm", mlii_criterion="loo", kernel_params={"lengthscale": np.sqrt(5.0), "amplitude": 1.0},
                 random_state=0, progress_bar=False).fit(X_sep, y_sep)
    assert est.kernel_params_["amplitude"] < 100.0
    X_new, y_new = _separable(400, 1)
    assert np.mean(est.predict(X_new) != y_new) < 0.1  # measured 0.04; a collapsed fit predicts at chance


def test_the_default_criterion_is_loo_for_ecm_and_the_evidence_for_fitc():
    """mlii_criterion=None resolves per inference method (GPMethod.criteria): the leave-one-out criterion
    for ECM, eq. (10) for FITC, and the evidence for the methods whose kernel is not learnt by ECM's ML-II; an
    explicit value is kept."""
    from bayes_maxmargin.estimators.gp import GP_METHODS, _check_mlii_criterion

    assert GPBSVM().mlii_criterion is None
    resolved = [_check_mlii_criterion(None, GP_METHODS[m]) for m in ("ecm", "fitc", "svi", "vi")]
    assert resolved == ["loo", "evidence", "evidence", "evidence"]
    assert _check_mlii_criterion("evidence", GP_METHODS["ecm"]) == "evidence"
    assert _check_mlii_criterion("loo", GP_METHODS["fitc"]) == "loo"


def test_the_criterion_is_checked():
    with pytest.raises(InvalidParameterError, match="mlii_criterion='loo' applies to inference='ecm', 'fitc'"):
        GPBSVM(inference="svi", mlii_criterion="loo").fit(X, Y)
    with pytest.raises(InvalidParameterError, match="mlii_criterion"):
        GPBSVM(inference="ecm", mlii_criterion="cv").fit(X, Y)


@pytest.mark.extended
@needs_data
def test_loo_criterion_does_not_overfit_diabetis():
    """On diabetis (the first 70 / 30 split of ``benchmarks/vs_peers.py``), eq. (9) at the E-step's lambda
    shrinks the length-scale to 1.4 and fits the training rows (training error 0.6 %, test error 0.32);
    the leave-one-out criterion keeps it near GPC's ML-II value (4.1) and the test error near GPC's 0.24
    (measured 3.7 and 0.242). The bounds sit halfway between the two fits."""
    from sklearn.preprocessing import StandardScaler

    from bayes_maxmargin import load_dataset
    from bayes_maxmargin.data.splits import train_test_split_stratified

    data = load_dataset("diabetis")
    Xtr, Xte, ytr, yte = train_test_split_stratified(np.asarray(data.X, np.float64), np.asarray(data.y),
                                                     test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    fits = {c: GPBSVM(inference="ecm", mlii_criterion=c, random_state=0, progress_bar=False).fit(Xtr, ytr)
            for c in ("evidence", "loo")}
    scale = {c: m.kernel_params_["lengthscale"] for c, m in fits.items()}
    error = {c: np.mean(m.predict(Xte) != yte) for c, m in fits.items()}
    assert scale["evidence"] < 2.5 < scale["loo"]
    assert error["loo"] < 0.28 < error["evidence"]
