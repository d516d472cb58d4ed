"""Traces to :class:`arviz.InferenceData`, and the convergence summaries the library reports."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import arviz as az
import numpy as np

__all__ = ["MAX_RHAT", "MIN_ESS_PER_CHAIN", "MixingWarning", "convergence_summary", "has_draws", "mixing_problem",
           "to_inference_data", "warn_if_not_mixed"]

#: Largest rank-normalised split R-hat of mixed chains (Vehtari, Gelman, Simpson, Carpenter & Buerkner
#: 2021, "Rank-normalization, folding, and localization: an improved R-hat", Sec. 4.3: use the
#: sample only if R-hat < 1.01); checked only with at least two chains.
MAX_RHAT = 1.01
#: Smallest bulk effective sample size per chain (Vehtari et al. 2021, Sec. 4.3: at least 100 per
#: chain, so that R-hat and the ESS themselves are reliable; PyMC warns below the same number).
MIN_ESS_PER_CHAIN = 100


class MixingWarning(UserWarning):
    """The chains of an MCMC fit have not mixed (R-hat above :data:`MAX_RHAT` or bulk ESS below
    :data:`MIN_ESS_PER_CHAIN` per chain): its draws do not represent the posterior yet.

    Examples
    --------
    >>> import warnings
    >>> from bayes_maxmargin import MixingWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", MixingWarning)  # chains that have not mixed stop the script
    >>> issubclass(MixingWarning, UserWarning)
    True
    """


class MixingProblem(NamedTuple):
    """The worst-mixing element of a posterior: its name (``var[coords]``), R-hat (NaN with one
    chain) and bulk ESS, and the run's numbers of chains and draws."""

    name: str
    rhat: float
    ess_bulk: float
    chains: int
    draws: int


def to_inference_data(
    posterior: Mapping[str, np.ndarray],
    *,
    sample_stats: Mapping[str, np.ndarray] | None = None,
    observed_data: Mapping[str, np.ndarray] | None = None,
    log_likelihood: Mapping[str, np.ndarray] | None = None,
    coords: Mapping[str, object] | None = None,
    dims: Mapping[str, list[str]] | None = None,
    attrs: Mapping[str, object] | None = None,
) -> az.InferenceData:
    """Build an InferenceData from arrays laid out (chain, draw, ...).

    Parameters
    ----------
    posterior : mapping
        Posterior draws (or point estimates with chain = draw = 1 for EM / VB).
    sample_stats : mapping, optional
        Per-draw statistics (``log_joint``, NUTS diagnostics, an objective trace).
    observed_data : mapping, optional
        The training labels.
    log_likelihood : mapping, optional
        Pointwise log likelihood (chain, draw, obs), only where it is normalised.
    coords, dims : mapping, optional
        Named coordinates and dimensions for the variables.
    attrs : mapping, optional
        Attributes stored on every group (model, inference, library version).

    Returns
    -------
    arviz.InferenceData

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin import to_inference_data
    >>> idata = to_inference_data({"beta": np.zeros((2, 10, 3))},
    ...                           sample_stats={"log_joint": np.zeros((2, 10))})
    >>> dict(idata.posterior.sizes)
    {'chain': 2, 'draw': 10, 'beta_dim_0': 3}
    """
    idata = az.from_dict(
        posterior=dict(posterior),
        sample_stats=dict(sample_stats) if sample_stats else None,
        observed_data=dict(observed_data) if observed_data else None,
        log_likelihood=dict(log_likelihood) if log_likelihood else None,
        coords=dict(coords) if coords else None,
        dims=dict(dims) if dims else None,
    )
    if attrs:
        for group in idata.groups():
            idata[group].attrs.update({k: str(v) for k, v in attrs.items()})
    return idata


def convergence_summary(idata: az.InferenceData, var_names: list[str] | None = None) -> dict[str, float]:
    """Worst-case convergence numbers over the posterior: max R-hat, min bulk and tail ESS.

    R-hat needs at least two chains of two draws; with fewer (EM / VB point estimates) the values
    are NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin import convergence_summary, to_inference_data
    >>> draws = np.random.default_rng(0).normal(size=(4, 500, 3))  # (chain, draw, coefficient)
    >>> summary = convergence_summary(to_inference_data({"beta": draws}))
    >>> sorted(summary)
    ['max_rhat', 'min_ess_bulk', 'min_ess_tail']
    >>> bool(summary["max_rhat"] < 1.01)
    True

    On a fitted estimator, ``convergence_summary(clf.idata_, var_names=["beta"])``: an R-hat above
    1.01 or an ESS below a few hundred asks for longer chains.
    """
    post = idata.posterior
    if post.sizes.get("chain", 1) < 2 or post.sizes.get("draw", 1) < 4:
        return {"max_rhat": float("nan"), "min_ess_bulk": float("nan"), "min_ess_tail": float("nan")}
    summ = az.summary(idata, var_names=var_names, kind="diagnostics")
    return {
        "max_rhat": float(summ["r_hat"].max()),
        "min_ess_bulk": float(summ["ess_bulk"].min()),
        "min_ess_tail": float(summ["ess_tail"].min()),
    }


def has_draws(idata: az.InferenceData) -> bool:
    """Whether the posterior holds MCMC draws (more than one draw), not a point estimate or the
    parameters of a variational distribution (EM, ECM, VB, VI: one chain of one draw)."""
    return int(idata.posterior.sizes.get("draw", 1)) > 1


def _element_name(var: str, da: Any, index: tuple[int, ...]) -> str:
    """``var[label, ...]``: the coordinate values of the element at ``index`` of ``da``'s non-sample dims."""
    dims = [d for d in da.dims if d not in ("chain", "draw")]
    if not dims:
        return var
    labels = []
    for dim, i in zip(dims, index):
        values = da.coords[dim].values if dim in da.coords else np.arange(da.sizes[dim])
        labels.append(f"{dim}={values[i]}")
    return f"{var}[{', '.join(labels)}]"


def mixing_problem(idata: az.InferenceData) -> MixingProblem | None:
    """The worst-mixing posterior element if the chains have not mixed, else None.

    Not mixed: with at least two chains, a rank-normalised split R-hat above :data:`MAX_RHAT`;
    with any number of chains, a bulk ESS below :data:`MIN_ESS_PER_CHAIN` times the number of
    chains. The worst element is the one of the largest R-hat when one is too large, else the one
    of the smallest bulk ESS. Posteriors of fewer than four draws (point estimates) give None;
    elements whose draws are all equal (fixed values) are skipped.
    """
    post = idata.posterior
    chains, draws = int(post.sizes.get("chain", 1)), int(post.sizes.get("draw", 1))
    if draws < 4:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant draws: ArviZ's division by zero
        ess = az.ess(post, method="bulk")
        rhat = az.rhat(post) if chains >= 2 else None
    worst_r, worst_e = None, None
    for var in post.data_vars:
        e = np.asarray(ess[var].values, dtype=float)
        r = np.asarray(rhat[var].values, dtype=float) if rhat is not None else np.full(e.shape, np.nan)
        if np.any(np.isfinite(r)):
            i = np.unravel_index(np.nanargmax(r), r.shape)
            if worst_r is None or r[i] > worst_r[0]:
                worst_r = (float(r[i]), float(e[i]), var, i)
        if np.any(np.isfinite(e)):
            i = np.unravel_index(np.nanargmin(e), e.shape)
            if worst_e is None or e[i] < worst_e[1]:
                worst_e = (float(r[i]), float(e[i]), var, i)
    if worst_r is not None and worst_r[0] > MAX_RHAT:
        r, e, var, i = worst_r
    elif worst_e is not None and worst_e[1] < MIN_ESS_PER_CHAIN * chains:
        r, e, var, i = worst_e
    else:
        return None
    return MixingProblem(_element_name(var, post[var], i), r, e, chains, draws)


def warn_if_not_mixed(idata: az.InferenceData, owner: str = "the fit", stacklevel: int = 3) -> MixingProblem | None:
    """Issue a :class:`MixingWarning` naming the worst variable when :func:`mixing_problem` finds
    one (MCMC fits only: a posterior of one draw is never checked); return it."""
    problem = mixing_problem(idata)
    if problem is not None:
        rhat = f"R-hat {problem.rhat:.3g}, " if np.isfinite(problem.rhat) else ""
        warnings.warn(
            f"The chains of {owner} have not mixed: {problem.name} has {rhat}bulk ESS {problem.ess_bulk:.0f} "
            f"({problem.chains} chain(s) of {problem.draws} draws; mixed chains have R-hat <= {MAX_RHAT} and "
            f"bulk ESS >= {MIN_ESS_PER_CHAIN} per chain, Vehtari et al. 2021). Its draws may not represent the "
            "posterior: run longer chains (num_warmup, num_samples) or more of them, and check "
            "bayes_maxmargin.convergence_summary / plots.plot_trace.",
            MixingWarning, stacklevel=stacklevel,
        )
    return problem
