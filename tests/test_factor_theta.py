"""The GP discriminative factor model (NDFM) with its kernel parameters sampled (Henao et al. 2014, Sec. 3
and 5), and ``FactorBSVM(learn_kernel=...)`` for Gibbs, VB-EM and persistence.

As in ``test_factor_gibbs.py`` the samplers are compared on quantities invariant to the sign of the
factor: psi, |a_11|, y_n f_n and the log length-scale (K(W) = K(-W) for the SE kernel).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import FactorBSVM
from bayes_maxmargin.core.kernels import SEParams
from bayes_maxmargin.core.parameters import flatten
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.models.factor.gibbs import build_factor_kernel, build_factor_record, init_factor
from bayes_maxmargin.models.factor.model import FactorData, FactorHyper
from bayes_maxmargin.models.gp.model import kernel_prior

from ._posterior import assert_posteriors_agree
from .reference import FACTOR_GAMMA0, FACTOR_THETA, factor_tiny, load_reference

NAMES = ["psi", "absA", "yf0", "yf1", "log_lengthscale"]


def _hyper(gamma0=FACTOR_GAMMA0):
    values = dict(nu=1.0, a_psi=2.0, b_psi=1.0, gamma=1.0, a0=2.0, b0=1.0, gamma0=gamma0, rho=1.0,
                  intercept_prec=1.0)
    return FactorHyper(**{k: jnp.asarray(v) for k, v in values.items()})


def _gibbs(X, y, learn, *, n_iter, n_blocks=2, sample_gamma=False, prior_scale=FACTOR_THETA["prior_scale"], seed=0):
    theta = SEParams(jnp.asarray(FACTOR_THETA["lengthscale"]), jnp.asarray(1.0))
    hyper = _hyper()
    data = FactorData(jnp.asarray(X), jnp.asarray(y), theta, jnp.asarray(1e-6), kernel_prior(theta, prior_scale, learn))
    unflatten = flatten(theta)[1]
    kern = build_factor_kernel("gp", sample_gamma, False, True, "rbf", n_blocks, unflatten)
    s0 = init_factor(data, hyper, 1, "gp")
    init = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (4,) + a.shape), s0)
    return run_chains(kern, build_factor_record(unflatten, learn), init, jax.random.PRNGKey(seed), data, hyper,
                      num_warmup=300, num_samples=n_iter, progress_bar=False)


def _invariants(s, y):
    return {"psi": s["psi"], "absA": np.abs(s["A"][..., 0, 0]), "yf0": s["f"][..., 0] * y[0],
            "yf1": s["f"][..., 1] * y[1], "log_lengthscale": np.log(s["lengthscale"])}


@pytest.fixture(scope="module")
def tiny():
    return factor_tiny()


@pytest.fixture(scope="module")
def gibbs_run(tiny):
    X, y = tiny
    with jax.enable_x64(True):
        return _gibbs(X, y, ("lengthscale",), n_iter=1500)


def test_gp_theta_gibbs_agrees_with_nuts(tiny, gibbs_run):
    """NDFM with the length-scale sampled (ESS on W, slice sampling on log theta given the current
    scores, f exact): the Gibbs posterior against NUTS on the program with phi and lambda integrated
    out (the stored reference ``factor_gp_theta``), means within 4 combined MCSE (a false alarm about
    once in 16 000 comparisons for Gaussian errors) and sds within 15 % or 4 MCSE of the sd, as the
    other factor tests. The data move log theta's posterior only moderately (prior N(0.41, 0.5^2),
    posterior mean 0.32, sd 0.41), yet a slice step that ignored the scores and labels (theta from its
    prior) fails here: its mean is 5.8 combined MCSE off and its sd 22 % too wide."""
    X, y = tiny
    ref = load_reference("factor_gp_theta").draws
    assert_posteriors_agree(_invariants(gibbs_run.samples, y), _invariants(ref, y), NAMES, sd_rtol=0.15)


def test_theta_moves_only_where_sampled(gibbs_run):
    """The amplitude, not in ``learn``, keeps its value in every chain; the length-scale moves, and the
    sweep reports its slice evaluations (at least two per coordinate: the stepping out, one draw)."""
    log_theta = np.asarray(gibbs_run.final_state.log_theta)
    start = np.asarray(flatten(SEParams(FACTOR_THETA["lengthscale"], 1.0))[0])
    np.testing.assert_array_equal(log_theta[:, 1], start[1])
    assert np.all(log_theta[:, 0] != start[0])
    assert np.unique(gibbs_run.samples["lengthscale"]).size > 100
    assert np.min(gibbs_run.info["slice_evaluations"]) >= 2


@pytest.mark.extended
def test_gp_theta_and_gamma_gibbs_agree_with_nuts(tiny):
    """Both SE fields and gamma sampled, one score at a time, against NUTS (the stored reference
    ``factor_gp_theta_gamma``: NUTS mixes slowly here, 0.007 bulk effective draws per iteration at
    the least, so a run of 500 + 2000 did not converge, R-hat 1.17 on |a_11|; the reference keeps every
    10th of 40 000 iterations per chain, R-hat at most 1.003), with the tolerances of the test above."""
    X, y = tiny
    with jax.enable_x64(True):
        gibbs = _gibbs(X, y, ("lengthscale", "amplitude"), n_iter=3000, n_blocks=None, sample_gamma=True).samples
    ref = load_reference("factor_gp_theta_gamma").draws
    a, b = _invariants(gibbs, y), _invariants(ref, y)
    for d, s in ((a, gibbs), (b, ref)):
        d["gamma"], d["log_amplitude"] = s["gamma"], np.log(s["amplitude"])
    assert_posteriors_agree(a, b, NAMES + ["gamma", "log_amplitude"], sd_rtol=0.15)


# ------------------------------------------------------------------------------------------ the estimator
@pytest.mark.parametrize("params", [
    dict(classifier="linear"), dict(classifier="linear", inference="vbem"),
    dict(classifier="linear", joint=False), dict(classifier="linear", second_stage="linear"),
], ids=["LDFM", "VLDFM", "FM+L", "LDFM+L"])
def test_learn_kernel_without_a_kernel_is_refused(tiny, params):
    X, y = tiny
    with pytest.raises(ValueError, match="learn_kernel"):
        FactorBSVM(n_factors=1, learn_kernel=True, **params).fit(X, y)


@pytest.mark.parametrize("bad", [("scale",), "lengthscale", 3])
def test_learn_kernel_names_a_kernel_field(tiny, bad):
    X, y = tiny
    with pytest.raises(ValueError, match="learn_kernel"):
        FactorBSVM(n_factors=1, classifier="gp", learn_kernel=bad).fit(X, y)


def test_learn_kernel_saves_and_loads(tmp_path):
    """The new parameters round-trip through a file (fitted files: the extended test below; files of
    earlier releases, without them, load as ``learn_kernel=None``: tests/test_golden.py)."""
    est = FactorBSVM(classifier="gp", learn_kernel=("lengthscale",), kernel_prior_scale=0.5)
    back = bmm.load(bmm.save(est, tmp_path / "unfitted.bmm"))
    assert back.get_params() == est.get_params()


@pytest.mark.extended
def test_gibbs_fit_records_theta_and_saves(tiny, tmp_path):
    """NDFM with ``learn_kernel``: the draws of the length-scale in ``idata_`` and its posterior mean in
    ``kernel_params_`` (the amplitude at its value); the parameter and the fit survive save / load."""
    X, y = tiny
    clf = FactorBSVM(n_factors=1, classifier="gp", learn_kernel=["lengthscale"], kernel_prior_scale=0.5,
                     n_blocks=2, num_warmup=20, num_samples=15, thin=1, num_chains=2, random_state=0)
    with pytest.warns(bmm.MixingWarning):  # 15 draws
        clf.fit(X, y)
    draws = clf.idata_.posterior["lengthscale"]
    assert draws.shape == (2, 15) and np.unique(draws).size > 1
    assert clf.kernel_params_ == {"lengthscale": pytest.approx(float(draws.mean()), rel=1e-12), "amplitude": 1.0}
    assert "slice_evaluations" in clf.idata_.sample_stats
    back = bmm.load(bmm.save(clf, tmp_path / "ndfm.bmm"))
    assert back.get_params() == clf.get_params()
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


@pytest.mark.extended
def test_vbem_learn_kernel_selects_the_ml2_fields(tiny):
    """VNDFM: ``learn_kernel=False`` keeps theta at ``kernel_params`` through the M-steps, the default
    moves the length-scale only (the paper's SE has no amplitude), True both fields."""
    X, y = tiny
    start = {"lengthscale": 1.5, "amplitude": 1.0}
    fits = {learn: FactorBSVM(n_factors=1, classifier="gp", inference="vbem", kernel_params=start, learn_kernel=learn,
                              max_iter=3, m_steps=3, random_state=0).fit(X, y).kernel_params_
            for learn in (False, None, True)}
    assert fits[False] == start
    assert fits[None]["amplitude"] == 1.0 and fits[None]["lengthscale"] != 1.5
    assert fits[True]["amplitude"] != 1.0 and fits[True]["lengthscale"] != 1.5
