"""Traces to :class:`arviz.InferenceData`, and the convergence summaries the library reports."""

from __future__ import annotations

from collections.abc import Mapping

import arviz as az
import numpy as np

__all__ = ["convergence_summary", "to_inference_data"]


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
