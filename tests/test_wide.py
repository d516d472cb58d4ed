"""Wide data (more coefficients than points): the n-dimensional form of the linear models' Gaussian
conditional (Woodbury identity; Bhattacharya, Chakraborty & Mallick 2016 for the Gibbs draw) gives
the same conditional, the same EM / VB fixed points and the same Gibbs posterior as the
p-dimensional form, and the estimator picks it by shape."""

from __future__ import annotations

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.core.augmentation import (
    gaussian_conditional,
    prior_gram,
    sample_wide_gaussian,
    use_wide_form,
    wide_gaussian_conditional,
    wide_latent_variances,
)
from bayes_maxmargin.core.linalg import float_precision
from bayes_maxmargin.estimators import linear as linear_estimator
from bayes_maxmargin.models.linear.em import linear_em
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, prior_precision
from bayes_maxmargin.models.linear.posterior import LowRankPosterior, PrecisionPosterior
from bayes_maxmargin.models.luts.gibbs import draw_inclusions, laplace_zero_conditional
from bayes_maxmargin.models.luts.model import LutsHyper, MixedData
from bayes_maxmargin.models.luts.posterior import laplace_zero_posterior, q_posterior
from bayes_maxmargin.models.luts.vb import vb_gaussian, vb_laplace_zero, vb_penalty

from ._posterior import assert_posteriors_agree


def _problem(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def _data(X, y):
    return LinearData(jnp.asarray(np.hstack([X, np.ones((X.shape[0], 1))])), jnp.asarray(y))


def _hyper(d, gamma0=0.0, intercept_scale=10.0):
    prec = prior_precision(d, 0.8, intercept_scale, True)
    return LinearHyper(prec, *(jnp.asarray(v, jnp.float64) for v in (1.3, 2.0, 1.0, gamma0)))


@pytest.fixture
def x64():
    with float_precision(True):
        yield


def test_use_wide_form_by_shape_and_prior():
    assert use_wide_form(10, 11, np.ones(11))
    assert not use_wide_form(10, 10, np.ones(10))
    assert not use_wide_form(10, 30, np.r_[np.ones(29), 0.0])  # a flat intercept keeps the p-form


def test_wide_conditional_equals_full(x64):
    X, y = _problem(8, 25)
    data, hyper = _data(X, y), _hyper(25)
    inv_lam = jnp.asarray(np.random.default_rng(1).gamma(1.0, 2.0, size=8))
    full = gaussian_conditional(data.design, data.y, inv_lam, hyper.gamma, hyper.prior_prec)
    gram = prior_gram(data.design, hyper.prior_prec)
    wide = wide_gaussian_conditional(data.design, data.y, inv_lam, hyper.gamma, hyper.prior_prec, gram)
    np.testing.assert_allclose(wide.mean, full.mean, rtol=1e-10, atol=1e-12)
    L = np.asarray(full.prec_chol)
    cov = np.linalg.inv(L @ L.T)
    post = LowRankPosterior.from_conditional(wide)
    np.testing.assert_allclose(post.cov, cov, rtol=1e-9, atol=1e-12)
    D = np.asarray(data.design)
    np.testing.assert_allclose(wide_latent_variances(wide, gram), np.sum((D @ cov) * D, axis=1), rtol=1e-9)
    Xt = np.random.default_rng(2).normal(size=(5, 26))
    m, v = post.latent_moments(Xt)
    m_full, v_full = PrecisionPosterior(np.asarray(full.mean), L).latent_moments(Xt)
    np.testing.assert_allclose(m, m_full, rtol=1e-10)
    np.testing.assert_allclose(v, v_full, rtol=1e-9)
    np.testing.assert_allclose(post.weight_moment(25), cov[:25, :25] + np.outer(full.mean[:25], full.mean[:25]),
                               rtol=1e-9, atol=1e-12)


def test_wide_draws_have_the_conditional_moments(x64):
    """Bhattacharya et al.'s draw (and its overrelaxed move) leaves N(mean, Sigma) as it is:
    moments of 20000 draws within a few Monte Carlo standard errors."""
    X, y = _problem(6, 12)
    data, hyper = _data(X, y), _hyper(12)
    inv_lam = jnp.asarray(np.random.default_rng(3).gamma(2.0, 1.0, size=6))
    cond = wide_gaussian_conditional(data.design, data.y, inv_lam, hyper.gamma, hyper.prior_prec)
    cov = LowRankPosterior.from_conditional(cond).cov
    keys = jax.random.split(jax.random.PRNGKey(0), 20000)
    for previous in (None, cond.mean + 0.3):
        draws = np.asarray(jax.vmap(lambda k: sample_wide_gaussian(k, cond, previous, -0.5))(keys))
        sd = np.sqrt(np.diag(cov))
        if previous is None:
            z = (draws.mean(axis=0) - cond.mean) / (sd / np.sqrt(len(keys)))
            assert np.abs(z).max() < 4.5
            np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.04 * sd.max() ** 2)
        else:  # overrelaxed from a fixed point: mean moves by alpha (previous - mean), sd by sqrt(1 - alpha^2)
            expect = cond.mean - 0.5 * 0.3
            z = (draws.mean(axis=0) - expect) / (np.sqrt(0.75) * sd / np.sqrt(len(keys)))
            assert np.abs(z).max() < 4.5
            np.testing.assert_allclose(np.cov(draws.T), 0.75 * cov, atol=0.04 * sd.max() ** 2)


# (0, False): extended; (0.5, True) runs the same n-dimensional M-step (the skewed hinge's gamma0 and the
# CM-step of gamma act outside it)
@pytest.mark.parametrize("gamma0, estimate_gamma", [pytest.param(0.0, False, marks=pytest.mark.extended),
                                                    (0.5, True)])
def test_em_fixed_points_agree(x64, gamma0, estimate_gamma):
    """The two forms run the same ECM map: iterates agree to ~1e-10 for tens of iterations and the
    converged MAPs and objectives agree. Near the fixed point support vectors sit at the margin
    floor, E[1/lambda] ~ 1e8, and the p x p precision has a condition number of ~1e9-1e10, so the
    p-dimensional M-step itself is accurate to ~1e-7 there (the n x n system of the wide form, to
    ~1e-10, checked against an extended-precision solve while writing this test)."""
    X, y = _problem(15, 30)
    data, hyper = _data(X, y), _hyper(30, gamma0)
    coef0 = jnp.zeros(31)
    a, b = (linear_em(coef0, data, hyper, jnp.asarray(-1.0), max_iter=20, estimate_gamma=estimate_gamma, wide=w)
            for w in (False, True))
    np.testing.assert_allclose(b.coef, a.coef, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(b.objective, a.objective, rtol=1e-13)
    np.testing.assert_allclose(b.gamma, a.gamma, rtol=1e-10)
    a, b = (linear_em(coef0, data, hyper, jnp.asarray(1e-13), max_iter=3000, estimate_gamma=estimate_gamma, wide=w)
            for w in (False, True))
    np.testing.assert_allclose(b.coef, a.coef, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(b.objective[int(b.n_iter)], a.objective[int(a.n_iter)], rtol=1e-11)
    np.testing.assert_allclose(b.gamma, a.gamma, rtol=1e-6)


# accelerate=True: extended; SQUAREM extrapolates chi, the same in either form (vb_gaussian), and the plain
# sweeps of both forms agree after every sweep
@pytest.mark.parametrize("accelerate", [False, pytest.param(True, marks=pytest.mark.extended)])
def test_vb_fixed_points_agree(x64, accelerate):
    X, y = _problem(15, 30)
    data, prec = _data(X, y), prior_precision(30, 0.8, 10.0, True)
    a, b = (vb_gaussian(data, prec, 1e-13, max_iter=3000, accelerate=accelerate, wide=w) for w in (False, True))
    assert int(a.n_iter) < 3000 and int(b.n_iter) < 3000
    np.testing.assert_allclose(b.state.mean, a.state.mean, rtol=1e-6 if accelerate else 1e-9, atol=1e-8)
    np.testing.assert_allclose(b.state.chi, a.state.chi, rtol=1e-6 if accelerate else 1e-9)
    np.testing.assert_allclose(b.lower_bound[int(b.n_iter) - 1], a.lower_bound[int(a.n_iter) - 1], rtol=1e-12)
    if not accelerate:  # the same sweeps: the same bound after every one of them
        np.testing.assert_allclose(b.lower_bound[: int(b.n_iter)], a.lower_bound[: int(a.n_iter)], rtol=1e-12)


def _fit_in_form(monkeypatch, wide: bool, X, y, **kwargs):
    monkeypatch.setattr(linear_estimator, "use_wide_form", lambda n, p, prec: wide)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LinearBSVM(progress_bar=False, random_state=0, **kwargs).fit(X, y)


def test_gibbs_posteriors_agree(monkeypatch):
    """Gibbs with the p-dimensional and the n-dimensional coefficient draws: the same posterior of
    beta (means within 4 Monte Carlo standard errors, standard deviations within 4 MCSE of sd; both
    measured in MCSE, which the chains' own autocorrelation sets, so a bound for any chain length)."""
    X, y = _problem(15, 30)
    kw = dict(inference="gibbs", num_samples=1000, num_warmup=300, num_chains=4, sigma=0.8)
    fits = [_fit_in_form(monkeypatch, w, X, y, **kw) for w in (False, True)]
    assert not np.array_equal(fits[0].coef_, fits[1].coef_)  # two samplers, different random numbers
    assert_posteriors_agree(fits[0].idata_, fits[1].idata_, ["beta", "intercept"], sd_rtol=0.15)
    sa, sb = (az.summary(f.idata_, var_names=["beta", "intercept"], round_to="none") for f in fits)
    z_sd = np.abs(sa["sd"] - sb["sd"]) / np.sqrt(sa["mcse_sd"] ** 2 + sb["mcse_sd"] ** 2)
    assert (z_sd < 4).all(), z_sd.max()


def test_penalty_gibbs_posteriors_agree(monkeypatch):
    """The Appendix A sampler (prior="penalty") in both forms: the same posterior of (beta, sigma_u^2),
    means within 4 Monte Carlo standard errors, standard deviations of the coefficients within 4 MCSE
    of sd (sigma_u^2 mixes slowly in either form, an ESS of about 100 in 12000 draws here)."""
    X, y = _problem(15, 30, seed=1)
    kw = dict(inference="gibbs", prior="penalty", A_u=2.0, B_u=2.0, num_samples=3000, num_warmup=500, num_chains=4)
    fits = [_fit_in_form(monkeypatch, w, X, y, **kw) for w in (False, True)]
    assert not np.array_equal(fits[0].coef_, fits[1].coef_)
    sa, sb = (az.summary(f.idata_, var_names=["beta", "intercept", "sigma_u2"], round_to="none") for f in fits)
    z_mean = np.abs(sa["mean"] - sb["mean"]) / np.sqrt(sa["mcse_mean"] ** 2 + sb["mcse_mean"] ** 2)
    assert (z_mean < 4).all(), z_mean.max()
    coefs = sa.index != "sigma_u2"
    z_sd = np.abs(sa["sd"] - sb["sd"]) / np.sqrt(sa["mcse_sd"] ** 2 + sb["mcse_sd"] ** 2)
    assert (z_sd[coefs] < 4).all(), z_sd.max()


@pytest.mark.parametrize("inference", ["em", "vb"])
def test_estimator_forms_agree_and_save(monkeypatch, tmp_path, inference):
    X, y = _problem(12, 20)
    Xt = np.random.default_rng(5).normal(size=(6, 20))
    kw = dict(inference=inference, max_iter=30 if inference == "em" else 200, accelerate=False)
    full, wide = (_fit_in_form(monkeypatch, w, X, y, **kw) for w in (False, True))
    assert isinstance(wide._posterior, LowRankPosterior) and not hasattr(wide, "coef_cov_")
    np.testing.assert_allclose(wide.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    for a, b in zip(wide.predict_latent(Xt), full.predict_latent(Xt)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)
    bmm.save(wide, tmp_path / "wide.bmm")
    loaded = bmm.load(tmp_path / "wide.bmm")
    np.testing.assert_array_equal(loaded.predict_proba(Xt), wide.predict_proba(Xt))


def test_estimator_picks_the_form_by_shape(monkeypatch):
    X, y = _problem(12, 20)
    # the settings and data of test_estimator_forms_agree_and_save: its compiled programs serve these fits
    em = dict(inference="em", max_iter=30, accelerate=False, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert isinstance(LinearBSVM(**em).fit(X, y)._posterior, LowRankPosterior)
        assert isinstance(LinearBSVM(intercept_scale=None, **em).fit(X, y)._posterior, PrecisionPosterior)
        vb = LinearBSVM("vb", max_iter=200, accelerate=False, progress_bar=False).fit(X, y)
        # fewer coefficients than points: the rule's answer, the fit stopped there (a fit of its own shape
        # would compile alone; an answer of False gives the p-dimensional fit, as the flat intercept's above)
        answers, real = [], linear_estimator.use_wide_form

        def answer_and_stop(n, p, prec):
            answers.append((n, p, real(n, p, prec)))
            raise _Answered

        with monkeypatch.context() as patched, pytest.raises(_Answered):
            patched.setattr(linear_estimator, "use_wide_form", answer_and_stop)
            LinearBSVM(**em).fit(X[:, :5], y)
    assert isinstance(vb._posterior, LowRankPosterior)
    assert answers == [(12, 6, False)]


def test_svi_forms_agree_and_save(monkeypatch, tmp_path):
    """SVI in the r-dimensional row space of the whitened design (models.linear.row_space) takes the
    steps of SVI on all p coefficients: the same q(beta), ELBO trace and predictions to rounding."""
    X, y = _problem(12, 20)
    Xt = np.random.default_rng(5).normal(size=(6, 20))
    kw = dict(inference="svi", batch_size=6, max_iter=300, sigma=0.8)
    full, wide = (_fit_in_form(monkeypatch, w, X, y, **kw) for w in (False, True))
    assert isinstance(wide._posterior, LowRankPosterior) and isinstance(full._posterior, PrecisionPosterior)
    np.testing.assert_allclose(wide.elbo_, full.elbo_, rtol=1e-8)
    np.testing.assert_allclose(wide.coef_, full.coef_, rtol=1e-7, atol=1e-9)
    for a, b in zip(wide.predict_latent(Xt), full.predict_latent(Xt)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(wide._posterior.cov, np.linalg.inv(full._posterior.prec_chol @ full._posterior.prec_chol.T),
                               atol=1e-8)
    bmm.save(wide, tmp_path / "wide.bmm")
    np.testing.assert_array_equal(bmm.load(tmp_path / "wide.bmm").predict_proba(Xt), wide.predict_proba(Xt))


@pytest.mark.extended
@pytest.mark.parametrize("margins", [True, False], ids=["margin-coordinates", "row-space"])
def test_nuts_posteriors_agree(monkeypatch, margins):
    """NUTS on the r <= n informed dimensions (in margin coordinates: gamma fixed, steep walls; on z
    itself: gamma sampled) with the rest drawn from the prior: the posterior of NUTS on all p
    coefficients (means and standard deviations within 4 Monte Carlo standard errors)."""
    X, y = _problem(6, 40 if margins else 10, seed=2)
    kw = dict(inference="nuts", num_samples=600, num_warmup=300, num_chains=4, sigma=1.5 if margins else 0.8,
              gamma_prior=None if margins else (2.0, 1.0))
    chosen = _record_margin_bases(monkeypatch)
    full, wide = (_fit_in_form(monkeypatch, w, X, y, **kw) for w in (False, True))
    assert any(b is not None for b in chosen) == margins
    names = ["beta", "intercept"] + ([] if margins else ["gamma"])
    assert_posteriors_agree(full.idata_, wide.idata_, names, sd_rtol=0.5)
    sa, sb = (az.summary(f.idata_, var_names=names, round_to="none") for f in (full, wide))
    z_sd = np.abs(sa["sd"] - sb["sd"]) / np.sqrt(sa["mcse_sd"] ** 2 + sb["mcse_sd"] ** 2)
    assert (z_sd < 4).all(), z_sd.max()


def _record_margin_bases(monkeypatch) -> list:
    """What each wide NUTS fit's ``margin_basis`` gives (None: NUTS samples z), in order."""
    chosen, real = [], linear_estimator.margin_basis
    monkeypatch.setattr(linear_estimator, "margin_basis", lambda *a: chosen.append(real(*a)) or chosen[-1])
    return chosen


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("gamma0", [0.0, 0.7])
def test_margin_coordinates_change_variables_exactly(x64, fit_intercept, gamma0):
    """theta = B (f, w) inverts f = [Z, 1] theta, and the program in margin coordinates
    (y f = 1 + c sinh v) has the log density of the r-dimensional model at theta plus its
    log-Jacobian, sum log(c cosh v), and nothing else."""
    from numpyro.infer.util import log_density

    from bayes_maxmargin.models.linear.model import linear_bsvm
    from bayes_maxmargin.models.linear.row_space import margin_basis, margin_bsvm, row_space

    X, y = _problem(6, 40, seed=3)
    Z = row_space(X, np.full(40, 1.5)).scores  # 2 gamma |Z_n| ~ 19: steep walls
    A = np.hstack([Z, np.ones((6, 1))]) if fit_intercept else Z
    B = margin_basis(Z, fit_intercept, 1.0)
    np.testing.assert_allclose(A @ B[:, :6], np.eye(6), atol=1e-12)
    np.testing.assert_allclose(A @ B[:, 6:], 0.0, atol=1e-12)
    assert abs(np.linalg.det(B)) > 1e-8
    rng = np.random.default_rng(4)
    kwargs = dict(fit_intercept=fit_intercept, gamma_prior=(2.0, 1.0), gamma0=gamma0, intercept_scale=3.0)
    for _ in range(3):
        params = {"v": jnp.asarray(rng.normal(size=6) * 2), "gamma": jnp.asarray(1.7)}
        if B.shape[0] > 6:
            params["w"] = jnp.asarray(rng.normal(size=B.shape[0] - 6))
        args = (jnp.asarray(B), jnp.asarray(y))
        lp_margin = log_density(margin_bsvm, args, dict(kwargs, margin_scale=0.6), params)[0]
        v = np.asarray(params["v"])
        f = y * (1 + 0.6 * np.sinh(v))
        theta = B @ np.concatenate([f, np.asarray(params.get("w", np.zeros(0)))])
        model_params = {"beta": jnp.asarray(theta[:Z.shape[1]]), "gamma": params["gamma"]}
        if fit_intercept:
            model_params["intercept"] = jnp.asarray(theta[-1])
        np.testing.assert_allclose(Z @ theta[:Z.shape[1]] + (theta[-1] if fit_intercept else 0.0), f, atol=1e-10)
        lp_model = log_density(linear_bsvm, (jnp.asarray(Z), jnp.asarray(y)), dict(kwargs, sigma=1.0), model_params)[0]
        np.testing.assert_allclose(lp_margin, lp_model + np.sum(np.log(0.6 * np.cosh(v))), rtol=1e-12)


def test_margin_coordinates_need_full_row_rank_and_steep_walls():
    """Repeated rows (or no intercept on centred data) leave [Z, 1] short of rank n, and a hinge
    gentle on the prior's scale gains nothing: NUTS then samples z."""
    from bayes_maxmargin.models.linear.row_space import margin_basis, row_space

    X, _ = _problem(6, 40, seed=3)
    Xc = X - X.mean(axis=0)
    assert margin_basis(row_space(Xc, np.ones(40)).scores, False, 1.0) is None  # rank 5 < 6
    assert margin_basis(row_space(Xc, np.ones(40)).scores, True, 1.0).shape == (6, 6)
    assert margin_basis(row_space(np.vstack([X, X[:1]]), np.ones(40)).scores, True, 1.0) is None
    assert margin_basis(row_space(X, np.ones(40)).scores, True, 0.3) is None  # 2 gamma |Z_n| ~ 4


@pytest.mark.parametrize("centred", [False, True], ids=["margin-coordinates", "row-space"])
def test_wide_nuts_log_joint_and_null_space(x64, monkeypatch, centred):
    """A wide NUTS fit (picked by shape; on z itself for centred data without an intercept)
    records the log joint of the model in beta at every draw, its draws orthogonal to the data's
    row space are the prior's (mean 0, sd sigma), and its mixing check reads what the chains move:
    beta's coordinates in the row space (z) and the intercept."""
    from numpyro.infer.util import log_density

    from bayes_maxmargin.models.linear.model import linear_bsvm
    from bayes_maxmargin.models.linear.row_space import row_space

    X, y = _problem(6, 40, seed=2)
    if centred:
        X = X - X.mean(axis=0)
    kw = dict(sigma=1.5, fit_intercept=not centred)
    checked, chosen = _record_mixing_checks(monkeypatch), _record_margin_bases(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearBSVM("nuts", num_samples=150, num_warmup=100, num_chains=2, random_state=0,
                         progress_bar=False, **kw).fit(X, y)
    post = est.idata_.posterior
    for c, d in [(0, 0), (1, 17), (1, 149)]:
        draw = {k: jnp.asarray(post[k].values[c, d]) for k in ("beta", "intercept") if k in post}
        expected = log_density(linear_bsvm, (jnp.asarray(X), jnp.asarray(y)), kw, draw)[0]
        np.testing.assert_allclose(est.idata_.sample_stats["log_joint"].values[c, d], expected, rtol=1e-9)
    basis = row_space(X, np.ones(40)).basis
    r = basis.shape[0]
    beta = post["beta"].values.reshape(-1, 40)
    null = beta - (beta @ basis.T) @ basis  # 40 - r null-space directions, each N(0, 1.5^2) a priori
    coords = null @ np.linalg.svd(np.eye(40) - basis.T @ basis)[0][:, :40 - r]
    se = 1.5 / np.sqrt(coords.shape[0])
    assert np.abs(coords.mean(axis=0)).max() < 4.5 * se
    # independent prior draws: the ratio sd / 1.5 of N = 300 of them has a standard error of
    # 1 / sqrt(2 N) = 0.041; 4.1 of them (as 0.12 for the 600 draws of longer chains) for each of the
    # 40 - r directions
    assert np.abs(coords.std(axis=0) / 1.5 - 1).max() < 4.1 / np.sqrt(2 * coords.shape[0])
    assert (chosen[-1] is None) == centred
    mixing = checked[-1].posterior
    assert sorted(mixing.data_vars) == (["beta_row_space"] if centred else ["beta_row_space", "intercept"])
    z = row_space(X, np.full(40, 1.5)).coordinates(post["beta"].values)
    np.testing.assert_allclose(mixing["beta_row_space"].values, z, atol=1e-10)


def test_wide_gibbs_mixing_check_reads_the_chains_coordinates(monkeypatch):
    """The mixing check of a wide Gibbs fit reads what its chains move: the whitened coefficients in
    the row space of the whitened design (r <= n of them) and gamma, not the p coefficients, whose
    other directions are exact prior draws given the chain (NUTS: ``test_wide_nuts_log_joint_and_null_space``);
    short chains still warn."""
    X, y = _problem(8, 300, seed=1)
    checked = _record_mixing_checks(monkeypatch)
    with pytest.warns(bmm.MixingWarning, match="coef_row_space"):
        LinearBSVM("gibbs", num_samples=6, num_warmup=50, num_chains=2, gamma_prior=(2.0, 1.0), random_state=0,
                   progress_bar=False).fit(X, y)
    post = checked[-1].posterior
    assert sorted(post.data_vars) == ["coef_row_space", "gamma"]
    assert post["coef_row_space"].shape == (2, 6, 8)


def test_wide_one_vs_rest_mixing_check_reads_every_class_chains_coordinates(monkeypatch):
    """A wide one-vs-rest Gibbs fit checks the row-space coordinates of every class once, as one
    InferenceData with a class dimension, and the sub-fits keep nothing of it."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(12, 200))
    y = np.argmax(X[:, :3], axis=1)
    checked = _record_mixing_checks(monkeypatch)
    with pytest.warns(bmm.MixingWarning, match="coef_row_space"):
        est = LinearBSVM("gibbs", num_samples=6, num_warmup=20, num_chains=2, random_state=0,
                         progress_bar=False).fit(X, y)
    assert len(checked) == 1
    post = checked[0].posterior
    assert list(post.data_vars) == ["coef_row_space"]
    assert post["coef_row_space"].sizes["class"] == 3 and post["coef_row_space"].shape[-1] == 12
    assert not any("_mixing_draws" in sub.__dict__ for sub in est.estimators_)


def _record_mixing_checks(monkeypatch) -> list:
    """The InferenceData each mixing check of an estimator reads, in order."""
    from bayes_maxmargin.estimators import base

    checked, real = [], base.warn_if_not_mixed
    monkeypatch.setattr(base, "warn_if_not_mixed",
                        lambda idata, owner, **kw: checked.append(idata) or real(idata, owner, **kw))
    return checked


# ------------------------------------------------------------------ Luts & Ormerod models (Alg. 2-3, App. A-B)
def _mixed(X, y, groups: int = 0):
    """MixedData of Example 1 (X = 1, Z = the features) or, with ``groups``, Example 2 (X = [features, 1],
    Z = indicators of ``groups`` groups)."""
    n = X.shape[0]
    if not groups:
        return MixedData(jnp.ones((n, 1)), jnp.asarray(X), jnp.asarray(y))
    Z = np.eye(groups)[np.arange(n) % groups]
    return MixedData(jnp.asarray(np.hstack([X, np.ones((n, 1))])), jnp.asarray(Z), jnp.asarray(y))


def _luts_hyper(sigma_beta2=100.0, rho=0.1):
    return LutsHyper(*(jnp.asarray(v, jnp.float64) for v in (sigma_beta2, 0.01, 0.01, rho)))


def _rounding_tolerance(cond: float) -> float:
    """The two forms run the same sweeps and differ by rounding: each sweep's solves carry a relative
    error of about cond(P) eps (P the p x p precision), and the sweeps contract towards their fixed
    point, so the gap stays within a small multiple of it; 1e3 cond(P) eps is that with room."""
    return 1e3 * cond * np.finfo(np.float64).eps


# random-intercept: extended; test_luts_vb_estimator_forms_agree_and_save[random-intercept] runs the same
# solver (vb_penalty with groups) in both forms and compares every sweep's bound, the coefficients and the
# predictive moments (which the covariance sets); the penalty model's sweeps here
@pytest.mark.parametrize("groups", [0, pytest.param(3, marks=pytest.mark.extended)],
                         ids=["penalty", "random-intercept"])
def test_penalty_vb_sweeps_agree(x64, groups):
    """Algorithm 2 in both forms (n = 15, p + m = 61 or 64): the same bound after every sweep, the same
    q(beta, u) and chi at the end, and the same covariance."""
    X, y = _problem(15, 60)
    data = _mixed(X, y, groups)
    hyper = _luts_hyper(np.r_[np.ones(60), 100.0] if groups else 100.0)
    a, b = (vb_penalty(data, hyper, -1.0, max_iter=150, wide=w) for w in (False, True))
    L = np.asarray(a.state.prec_chol)
    cond = np.linalg.cond(L @ L.T)
    assert cond < 1e3
    tol = _rounding_tolerance(cond)
    np.testing.assert_allclose(b.lower_bound, a.lower_bound, rtol=tol)
    np.testing.assert_allclose(b.state.mean, a.state.mean, rtol=tol, atol=tol * np.abs(a.state.mean).max())
    np.testing.assert_allclose(b.state.chi, a.state.chi, rtol=tol)
    np.testing.assert_allclose(b.state.B_sigma, a.state.B_sigma, rtol=tol)
    dense, wide = q_posterior(a.state), q_posterior(b.state)
    assert isinstance(wide, LowRankPosterior)
    np.testing.assert_allclose(wide.cov, dense.cov, rtol=tol, atol=tol * np.abs(dense.cov).max())


def test_laplace_zero_vb_sweeps_agree(x64):
    """Algorithm 3 in both forms (n = 15, p + m = 61): the same bound after every sweep (the m x m
    matrix (Z'WZ) o Omega_q(v) of steps 6-7 replaced by running n x n sums), the same q at the end,
    and the same effective posterior of mu_q(gamma~) * (beta, v) (diagonal minus low rank)."""
    X, y = _problem(15, 60)
    data, hyper = _mixed(X, y), _luts_hyper(rho=0.1)
    a, b = (vb_laplace_zero(data, hyper, None, -1.0, max_iter=150, wide=w) for w in (False, True))
    cond = np.linalg.cond(np.asarray(a.state.cov))
    assert cond < 1e3
    tol = _rounding_tolerance(cond)
    np.testing.assert_allclose(b.lower_bound, a.lower_bound, rtol=tol)
    g = np.asarray(a.state.mu_gamma)
    assert g.min() < 1e-3 and g.max() > 0.5  # features in and out of the model
    np.testing.assert_allclose(b.state.mu_gamma, g, rtol=tol, atol=tol * 1e-3)
    for name in ("mean", "chi", "mu_b", "B_sigma"):
        np.testing.assert_allclose(getattr(b.state, name), getattr(a.state, name), rtol=tol,
                                   atol=tol * np.abs(getattr(a.state, name)).max())
    dense, wide = laplace_zero_posterior(a.state), laplace_zero_posterior(b.state)
    assert isinstance(wide, LowRankPosterior)
    np.testing.assert_allclose(wide.mean, dense.mean, rtol=tol, atol=tol * np.abs(dense.mean).max())
    np.testing.assert_allclose(wide.cov, dense.cov, rtol=tol, atol=tol * np.abs(dense.cov).max())


def test_laplace_zero_gibbs_conditional_agrees(x64):
    """Appendix B's (beta, v) | rest in both forms, for indicators with excluded features (whose v_k keep
    their prior): the same mean and covariance (the n-dimensional form drawn by Bhattacharya et al.'s
    exact algorithm, whose moments test_wide_draws_have_the_conditional_moments checks)."""
    X, y = _problem(15, 60)
    rng = np.random.default_rng(4)
    C = jnp.asarray(np.hstack([np.ones((15, 1)), X]))
    gamma = jnp.asarray((rng.random(60) < 0.4).astype(float))
    inv_lam = jnp.asarray(rng.gamma(1.0, 2.0, size=15))
    prec = jnp.asarray(np.r_[0.01, rng.gamma(2.0, 1.0, size=60)])
    full, wide = (laplace_zero_conditional(C, jnp.asarray(y), gamma, inv_lam, prec, w) for w in (False, True))
    L = np.asarray(full.prec_chol)
    cov = np.linalg.inv(L @ L.T)
    tol = _rounding_tolerance(np.linalg.cond(L @ L.T))
    np.testing.assert_allclose(wide.mean, full.mean, rtol=tol, atol=tol * np.abs(full.mean).max())
    np.testing.assert_allclose(LowRankPosterior.from_conditional(wide).cov, cov, rtol=tol, atol=tol * np.abs(cov).max())
    out = np.flatnonzero(np.asarray(gamma) == 0)
    np.testing.assert_allclose(np.diag(cov)[1 + out], 1.0 / np.asarray(prec)[1 + out], rtol=tol)


def test_laplace_zero_inclusion_sweep_is_the_sequential_gibbs_update(x64):
    """draw_inclusions (O(n m), a running n-vector) makes the draws of the sequential update written with
    the m x m matrix Z' diag(a^-1) Z, with the uniforms of jax.random.bernoulli(fold_in(key, k), .)."""
    X, y = _problem(12, 40, seed=2)
    data = _mixed(X, y)
    rng = np.random.default_rng(5)
    gamma, v = jnp.asarray((rng.random(40) < 0.5).astype(float)), jnp.asarray(rng.normal(size=40))
    inv_lam, fixed, rho = jnp.asarray(rng.gamma(1.0, 1.0, size=12)), jnp.asarray(rng.normal(size=12)), 0.3
    key = jax.random.PRNGKey(7)
    got = np.asarray(draw_inclusions(key, gamma, v, fixed, data, inv_lam, jnp.asarray(rho)))
    Z, W = X, np.asarray(inv_lam)
    G = Z.T @ (Z * W[:, None])
    u = [float(jax.random.uniform(jax.random.fold_in(key, k), (), jnp.float64)) for k in range(40)]
    g = np.asarray(gamma).copy()
    for k in range(40):
        others = G[k] @ (g * np.asarray(v)) - G[k, k] * g[k] * v[k]
        eta = (np.log(rho / (1 - rho)) - 0.5 * G[k, k] * v[k] ** 2 + v[k] * Z[:, k] @ (y * (1 + W))
               - v[k] * (Z[:, k] @ (W * np.asarray(fixed)) + others))
        g[k] = float(u[k] < 1.0 / (1.0 + np.exp(-eta)))
    np.testing.assert_array_equal(got, g)
    assert 0 < got.sum() < 40


LUTS_PRIORS = {"penalty": dict(prior="penalty"), "laplace_zero": dict(prior="laplace_zero", rho=0.3),
               "random-intercept": dict()}


def _luts_fit(monkeypatch, wide: bool | None, X, y, name: str, **kwargs):
    groups = np.arange(X.shape[0]) % 3 if name == "random-intercept" else None
    if wide is not None:
        monkeypatch.setattr(linear_estimator, "use_wide_form", lambda n, p, prec: wide)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearBSVM(progress_bar=False, random_state=0, **LUTS_PRIORS[name], **kwargs).fit(X, y, groups=groups)
    return est, groups


# penalty: extended; random-intercept runs the same solver (vb_penalty) and posterior (q_posterior) with
# groups, and test_penalty_vb_sweeps_agree[penalty] the penalty model's sweeps in both forms
@pytest.mark.parametrize("name", [pytest.param("penalty", marks=pytest.mark.extended), "laplace_zero",
                                  "random-intercept"])
def test_luts_vb_estimator_forms_agree_and_save(monkeypatch, tmp_path, name):
    """The estimator's wide VB fit of every Luts & Ormerod prior: a LowRankPosterior (no coef_cov_), the
    coefficients and predictions of the p-dimensional fit, and a saved file that predicts the same."""
    X, y = _problem(12, 30)
    Xt = np.random.default_rng(5).normal(size=(6, 30))
    kw = dict(inference="vb", max_iter=60, accelerate=False, tol=0.0)
    (full, groups), (wide, _) = (_luts_fit(monkeypatch, w, X, y, name, **kw) for w in (False, True))
    assert isinstance(wide._posterior, LowRankPosterior) and not hasattr(wide, "coef_cov_")
    assert hasattr(full, "coef_cov_")
    gt = None if groups is None else groups[:6]
    # the same 60 sweeps up to rounding (test_penalty_vb_sweeps_agree: cond(P) < 1e3, gap <= 1e3 cond eps)
    np.testing.assert_allclose(wide.coef_, full.coef_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(wide.lower_bound_, full.lower_bound_, rtol=1e-9)
    for a, b in zip(wide.predict_latent(Xt, gt), full.predict_latent(Xt, gt)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    bmm.save(wide, tmp_path / "wide.bmm")
    loaded = bmm.load(tmp_path / "wide.bmm")
    np.testing.assert_array_equal(loaded.predict_proba(Xt, gt), wide.predict_proba(Xt, gt))


class _Answered(Exception):
    """Raised to stop a fit once it has asked use_wide_form."""


def _record_wide_form_answers(monkeypatch) -> list:
    """(n, p, answer) of every use_wide_form call of the estimator, in order."""
    answers, real = [], linear_estimator.use_wide_form
    monkeypatch.setattr(linear_estimator, "use_wide_form",
                        lambda n, p, prec: answers.append((n, p, real(n, p, prec))) or answers[-1][2])
    return answers


# penalty: extended; random-intercept counts the coefficients in the same branch of the fit (fixed columns
# plus random effects), the chains' coordinates of both others include the penalty model's, and
# test_penalty_gibbs_posteriors_agree runs the penalty model's wide sampler
@pytest.mark.parametrize("name", [pytest.param("penalty", marks=pytest.mark.extended), "laplace_zero",
                                  "random-intercept"])
def test_luts_gibbs_wide_fit_predicts_and_saves(monkeypatch, tmp_path, name):
    """A short Gibbs fit of every Luts & Ormerod prior with one coefficient more than points (13 for 12,
    features, intercept and random intercepts counted; use_wide_form, the rule of every linear fit,
    picks the n-dimensional form) predicts, checks the mixing of what its chains move (row-space
    coordinates, intercept, sigma_u^2, the model size), and its saved file predicts the same."""
    groups = name == "random-intercept"
    X, y = _problem(12, 9 if groups else 12, seed=1)
    Xt = np.random.default_rng(6).normal(size=(5, X.shape[1]))
    checked, answers = _record_mixing_checks(monkeypatch), _record_wide_form_answers(monkeypatch)
    est, groups = _luts_fit(monkeypatch, None, X, y, name, inference="gibbs", num_warmup=20, num_samples=10,
                            num_chains=2)
    assert answers == [(12, 13, True)]
    expected = {"coef_row_space", "intercept", "sigma_u2"} | (
        {"model_size"} if name == "laplace_zero" else {"random_effects"} if groups is not None else set())
    assert set(checked[-1].posterior.data_vars) == expected
    assert checked[-1].posterior["coef_row_space"].shape == (2, 10, X.shape[1])  # rank min(n, d) = d
    gt = None if groups is None else groups[:5]
    m, v = est.predict_latent(Xt, gt)
    assert np.all(np.isfinite(m)) and np.all(v > 0)
    bmm.save(est, tmp_path / "wide.bmm")
    np.testing.assert_array_equal(bmm.load(tmp_path / "wide.bmm").predict_proba(Xt, gt), est.predict_proba(Xt, gt))


@pytest.mark.parametrize("name", list(LUTS_PRIORS))
def test_luts_vb_at_as_many_coefficients_as_points_is_p_dimensional(monkeypatch, name):
    """The other side of the rule: 12 coefficients for 12 points keep the p-dimensional form (VB). The fit
    stops once the rule has answered (each would compile a solver for its shape alone): an answer of False
    gives the p-dimensional fit with its coef_cov_ (test_luts_vb_estimator_forms_agree_and_save)."""
    X, y = _problem(12, 8 if name == "random-intercept" else 11, seed=1)
    answers = _record_wide_form_answers(monkeypatch)
    recorded = linear_estimator.use_wide_form

    def answer_and_stop(n, p, prec):
        recorded(n, p, prec)
        raise _Answered

    monkeypatch.setattr(linear_estimator, "use_wide_form", answer_and_stop)
    with pytest.raises(_Answered):
        _luts_fit(monkeypatch, None, X, y, name, inference="vb", max_iter=3)
    assert answers == [(12, 12, False)]


@pytest.mark.extended
def test_laplace_zero_gibbs_posteriors_agree(monkeypatch):
    """The Appendix B sampler in both forms (n = 15, p = 60): the same posterior of the effective
    coefficients, the intercept and sigma_u^2 (means within 4 Monte Carlo standard errors) and of the
    inclusion indicators."""
    X, y = _problem(15, 60, seed=1)
    kw = dict(inference="gibbs", prior="laplace_zero", rho=0.3, A_u=2.0, B_u=2.0, num_samples=3000,
              num_warmup=500, num_chains=4)
    fits = [_fit_in_form(monkeypatch, w, X, y, **kw) for w in (False, True)]
    assert not np.array_equal(fits[0].coef_, fits[1].coef_)
    sa, sb = (az.summary(f.idata_, var_names=["beta", "intercept", "sigma_u2", "inclusion"], round_to="none")
              for f in fits)
    z_mean = np.abs(sa["mean"] - sb["mean"]) / np.sqrt(sa["mcse_mean"] ** 2 + sb["mcse_mean"] ** 2)
    assert (z_mean < 4).all(), z_mean.max()


def test_low_rank_posterior_draws_with_a_zero_variance():
    """A Laplace-zero feature with mu_q(gamma) = 0 has an effective coefficient fixed at 0 (diagonal and
    low-rank column 0): its draws are exactly its mean, the others keep their covariance."""
    rng = np.random.default_rng(8)
    half = rng.normal(size=(3, 6)) * 0.3
    half[:, 2] = 0.0
    post = LowRankPosterior(rng.normal(size=6), np.r_[1.0, 2.0, 0.0, 1.5, 1.0, 3.0], half)
    draws = post.sample(0, (20000,))
    assert np.all(draws[:, 2] == post.mean[2])
    # a sample covariance of 20000 draws has a standard error of at most sqrt(2 * 3^2 / 20000) = 0.03
    # (3 the largest variance): 4 of them
    np.testing.assert_allclose(np.cov(draws.T), post.cov, atol=0.12)
