"""``idata_`` is ArviZ 1.x's :class:`xarray.DataTree` for every estimator, inference method and class count,
and ArviZ's summary, diagnostics and plots read it.

Deterministic fits (EM, ECM, FITC, VB, VI, SVI, VB-EM) hold independent draws from their approximation
q in the posterior group (``posterior.attrs["approximation"]``) and their point estimates (kernel
parameters learnt by ML-II, EM's gamma) in ``constant_data``: their summary has no NaN column and
raises no RuntimeWarning.
"""

from __future__ import annotations

import functools
import warnings

import arviz as az
import matplotlib
import numpy as np
import pytest
import xarray as xr

from bayes_maxmargin import GPBSVM, LinearBSVM, MaxMarginProjection, load, save
from bayes_maxmargin.diagnostics import APPROXIMATION_DRAWS, gaussian_draws, has_draws
from bayes_maxmargin.estimators.factor import FactorBSVM
from bayes_maxmargin.models.linear.posterior import CovariancePosterior, LowRankPosterior, PrecisionPosterior

matplotlib.use("Agg")

MCMC = dict(num_samples=20, num_warmup=10, progress_bar=False)
#: GPBSVM's settings that ``idata_`` does not read, off where the fit's programs would compile for them alone:
#: the learnt link (``calibrate``, its leave-one-out pass: test_calibration.py) and ML-II (of the kernel, whose
#: values constant_data holds learnt or held alike; of FITC's inducing points, which ``idata_`` does not hold).
GP_FIXED = dict(calibrate=False, learn_kernel=False)
#: (estimator, deterministic) per inference method, at small settings.
FITS = {
    "linear-gibbs": (lambda: LinearBSVM(num_chains=2, **MCMC), False),
    "linear-nuts": (lambda: LinearBSVM("nuts", num_chains=2, **MCMC), False),
    "linear-em": (lambda: LinearBSVM("em", max_iter=50), True),
    "linear-em-gamma": (lambda: LinearBSVM("em", gamma_prior=(2.0, 1.0), max_iter=50), True),
    "linear-svi": (lambda: LinearBSVM("svi", max_iter=100, batch_size=12), True),
    "linear-vb": (lambda: LinearBSVM("vb", max_iter=50), True),
    "linear-laplace-vb": (lambda: LinearBSVM(prior="laplace_zero", inference="vb", max_iter=50), True),
    "linear-penalty-gibbs": (lambda: LinearBSVM(prior="penalty", inference="gibbs", num_chains=2, **MCMC), False),
    "gp-svi": (lambda: GPBSVM(num_inducing=8, batch_size=12, max_iter=100, **GP_FIXED), True),
    "gp-ecm": (lambda: GPBSVM(inference="ecm", max_iter=20, **GP_FIXED), True),
    "gp-fitc": (lambda: GPBSVM(inference="fitc", num_inducing=8, max_iter=20, optimize_inducing=False, **GP_FIXED),
                True),
    "gp-vi": (lambda: GPBSVM(inference="vi", max_iter=20, **GP_FIXED), True),
    "gp-gibbs": (lambda: GPBSVM(inference="gibbs", learn_kernel=False, num_chains=2, **MCMC), False),
    "gp-nuts": (lambda: GPBSVM(inference="nuts", learn_kernel=False, num_chains=2, **MCMC), False),
    "factor-gibbs": (lambda: FactorBSVM(n_factors=2, inference="gibbs", num_chains=2, **MCMC), False),
    "factor-vbem": (lambda: FactorBSVM(n_factors=2, inference="vbem", max_iter=3, m_steps=1), True),
    "projection-gibbs": (lambda: MaxMarginProjection(num_chains=2, **MCMC), False),
}
#: Each fit compiles its own programs, per class count. A one-vs-rest ``idata_`` is one code path for
#: every estimator but MaxMarginProjection: ``multiclass.combine_draws`` of the binary sub-fits' ``idata_``,
#: each built by the code the 2-class fit runs. Three classes run by default for the group structures
#: that combine differently: an approximation's draws with per-class iteration traces and constant data
#: (linear-em-gamma), MCMC draws of two chains (linear-gibbs), log_likelihood and observed_data over
#: ``obs`` (gp-gibbs); the other fits' 3-class runs with -m extended, and so are these three fits' 2-class
#: runs (their 3-class runs build each class's ``idata_`` with that code, and check the result as the 2-class
#: runs do). MaxMarginProjection builds one ``idata_`` with a ``problem`` dimension for 2 and 3 classes
#: alike (projection-gibbs-2); its one-vs-all fit runs in
#: test_multiclass.test_multiclass_fit_inside_pipeline[projection-gibbs].
THREE_CLASSES = ("linear-em-gamma", "linear-gibbs", "gp-gibbs")
#: gp-nuts's ``idata_`` is gp-gibbs's (one builder of the GP draws) with linear-nuts's NUTS statistics;
#: gp-fitc's is gp-ecm's (one builder of the mode's point estimates and statistics, GPBSVM._point_estimate,
#: and of the draws of f from the posterior's moments, GPBSVM._store)
EXTENDED_FITS = ("gp-nuts", "gp-fitc")


def _data(classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Blobs of 12 points per class in 3-d (the third feature is noise)."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 3.0, 0.0], [3.0, -1.5, 0.0], [-3.0, -1.5, 0.0]])[:classes]
    X = np.concatenate([c + 0.8 * rng.normal(size=(12, 3)) for c in centres])
    return X, np.repeat(np.arange(classes), 12)


@functools.cache
def _fitted(name: str, classes: int):
    """``FITS[name]`` fitted with random_state=0 on ``_data(classes)``, once per process (the tests
    only read it)."""
    X, y = _data(classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains may warn that they have not mixed
        return FITS[name][0]().set_params(random_state=0).fit(X, y)


def _case(name: str, classes: int):
    extended = name in EXTENDED_FITS or ((classes == 3) != (name in THREE_CLASSES))
    return pytest.param(name, classes, id=f"{name}-{classes}", marks=[pytest.mark.extended] if extended else [])


@pytest.mark.parametrize("name, classes", [_case(name, classes) for name in sorted(FITS) for classes in (2, 3)])
def test_idata_is_a_datatree_that_arviz_summarises_and_plots(name: str, classes: int) -> None:
    deterministic = FITS[name][1]
    est = _fitted(name, classes)
    idata = est.idata_
    assert type(idata) is xr.DataTree
    assert "posterior" in idata.children and set(idata.children) <= {
        "posterior", "sample_stats", "observed_data", "log_likelihood", "constant_data"}
    post = idata.posterior
    assert post.sizes["chain"] >= 1 and post.sizes["draw"] >= 2
    if classes == 3 and hasattr(est, "estimators_"):  # one-vs-rest: a class dimension
        assert post.sizes["class"] == 3
    assert has_draws(idata) is not deterministic
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        summary = az.summary(idata)
    assert len(summary) > 0
    if deterministic:
        assert post.attrs["approximation"]
        assert (post.sizes["chain"], post.sizes["draw"]) == APPROXIMATION_DRAWS
        nan_columns = summary.columns[summary.isna().any()].tolist()
        assert not nan_columns, f"{name}: NaN in {nan_columns}\n{summary}"
    var = next(iter(post.data_vars))
    assert np.all(np.isfinite(az.ess(idata, var_names=[var])[var].values))
    az.rhat(idata, var_names=[var])
    coords = {d: post[d].values[:2] for d in post[var].dims if d not in ("chain", "draw")}
    az.plot_trace(idata, var_names=[var], coords=coords, backend="matplotlib")
    if post.sizes["chain"] > 1:
        az.plot_rank(idata, var_names=[var], coords=coords, backend="matplotlib")
    matplotlib.pyplot.close("all")


def test_a_saved_datatree_loads_as_one_and_opens_with_xarray(tmp_path) -> None:
    """save / load keep idata_ as a DataTree (groups, draws, attributes); bmm's idata.nc opens with
    xarray.open_datatree and arviz.from_netcdf."""
    est = _fitted("linear-em", 2)
    back = load(save(est, tmp_path / "m.bmm"))
    assert type(back.idata_) is xr.DataTree
    assert set(back.idata_.children) == set(est.idata_.children)
    xr.testing.assert_identical(back.idata_.posterior.to_dataset(), est.idata_.posterior.to_dataset())
    est.idata_.to_netcdf(tmp_path / "idata.nc", engine="h5netcdf")
    for opened in (xr.open_datatree(tmp_path / "idata.nc"), az.from_netcdf(tmp_path / "idata.nc")):
        assert opened.posterior.attrs["approximation"] == est.idata_.posterior.attrs["approximation"]
        np.testing.assert_array_equal(opened.posterior["beta"].values, est.idata_.posterior["beta"].values)


def _low_rank(rng: np.random.Generator, p: int, n: int) -> LowRankPosterior:
    """The Woodbury posterior of w ~ N(0, D) given n Gaussian observations G w + e, e ~ N(0, Lambda)."""
    D, G, lam = rng.uniform(0.5, 2.0, p), rng.normal(size=(n, p)), rng.uniform(0.5, 1.0, n)
    L = np.linalg.cholesky(G @ np.diag(D) @ G.T + np.diag(lam))
    return LowRankPosterior(rng.normal(size=p), D, np.linalg.solve(L, G * D))


def test_draws_of_the_gaussian_posteriors_have_their_mean_and_covariance() -> None:
    """Each Gaussian form's ``sample`` (and ``gaussian_draws``) draws its N(mean, cov): 200,000 draws,
    so the Monte Carlo standard error of a covariance entry is at most sqrt((s_ii s_jj + s_ij^2) / S)
    <= sqrt(2 / S) max s_ii; the check allows 5 of them (and 5 standard errors for the means)."""
    rng = np.random.default_rng(0)
    low = _low_rank(rng, p=6, n=3)
    cov = low.cov
    prec_chol = np.linalg.cholesky(np.linalg.inv(cov))
    size = (4, 50_000)
    forms = {
        "low rank": low,
        "precision": PrecisionPosterior(low.mean, prec_chol),
        "covariance": CovariancePosterior(low.mean, cov),
    }
    draws = {k: v.sample(1, size) for k, v in forms.items()}
    draws["gaussian_draws"] = gaussian_draws(1, low.mean, cov=cov, size=size)
    S = np.prod(size)
    scale = np.max(np.diag(cov))
    for name, d in draws.items():
        flat = d.reshape(-1, 6)
        assert d.shape == (*size, 6)
        assert np.all(np.abs(flat.mean(axis=0) - low.mean) < 5 * np.sqrt(np.diag(cov) / S)), name
        assert np.abs(np.cov(flat.T) - cov).max() < 5 * np.sqrt(2.0 / S) * scale, name


def test_a_file_needing_a_missing_package_names_it(tmp_path) -> None:
    """Loading idata.nc needs h5py (through h5netcdf): without it, load names the package instead of
    calling the file damaged."""
    import subprocess
    import sys

    path = save(_fitted("linear-em", 2), tmp_path / "m.bmm")
    code = ("import sys; sys.modules['h5py'] = None\n"  # as if h5py were not installed
            "import bayes_maxmargin\n"
            "try:\n"
            f"    bayes_maxmargin.load({str(path)!r})\n"
            "except ImportError as err:\n"
            "    print(type(err).__name__, err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "ImportError" in out.stdout and "'h5py'" in out.stdout and "pip install h5py" in out.stdout, out
    assert "damaged" not in out.stdout


def test_an_idata_member_the_installed_xarray_cannot_read_is_not_called_damaged(tmp_path, monkeypatch) -> None:
    """An idata.nc that HDF5 opens but the installed xarray cannot read is refused naming the versions,
    not as a damaged file (a member HDF5 cannot open is: ``test_red_team.test_garbage_idata_is_refused``)."""
    from bayes_maxmargin import InvalidModelFileError

    path = save(_fitted("linear-em", 2), tmp_path / "m.bmm")

    def unreadable(*args, **kwargs):
        raise ValueError("unrecognized engine layout")

    monkeypatch.setattr(xr, "open_datatree", unreadable)
    with pytest.raises(InvalidModelFileError, match="intact HDF5 file that the installed xarray") as err:
        load(path)
    assert "damaged" not in str(err.value) and "h5netcdf" in str(err.value)
