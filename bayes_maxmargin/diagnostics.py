"""Traces to ArviZ's :class:`xarray.DataTree`, and the convergence summaries the library reports."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:  # ArviZ (with xarray, pandas and matplotlib) is imported by the functions that use it
    import xarray as xr

__all__ = ["APPROXIMATION_DRAWS", "MAX_RHAT", "MIN_ESS_PER_CHAIN", "MixingWarning", "SeparableClassesWarning",
           "convergence_summary",
           "gaussian_draws", "has_draws", "inside_model_selection", "mixing_problem", "rank_diagnostics",
           "to_inference_data", "warn_if_not_mixed"]

#: Largest rank-normalised split R-hat of mixed chains (Vehtari, Gelman, Simpson, Carpenter & Buerkner
#: 2021, "Rank-normalization, folding, and localization: an improved R-hat", Sec. 4.3: use the
#: sample only if R-hat < 1.01); checked only with at least two chains.
MAX_RHAT = 1.01
#: Smallest bulk effective sample size per chain (Vehtari et al. 2021, Sec. 4.3: at least 100 per
#: chain, so that R-hat and the ESS themselves are reliable; PyMC warns below the same number).
MIN_ESS_PER_CHAIN = 100
#: (chains, draws) of the independent draws from the approximate posterior q (VB, VI, SVI, and the
#: Gaussian conditional at the mode of EM and ECM) that a deterministic fit puts in its posterior group:
#: 400 draws give every summary column (Monte Carlo error of a mean: 5 % of its sd) and split R-hat.
APPROXIMATION_DRAWS = (4, 100)


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


class SeparableClassesWarning(UserWarning):
    """The training classes of an MCMC fit of a linear model are linearly separable: the likelihood is
    flat along the separating direction, so only the priors bound the scale of the coefficients and
    the intercept there. Wide intervals and slow mixing along that direction are what the posterior
    is, not a sampler failure: this warning replaces the :class:`MixingWarning` for those classes.

    Examples
    --------
    >>> from bayes_maxmargin import MixingWarning, SeparableClassesWarning
    >>> issubclass(SeparableClassesWarning, MixingWarning)
    False
    """


class MixingProblem(NamedTuple):
    """The worst-mixing element of a posterior: its name (``var[coords]``), R-hat (NaN with one
    chain) and bulk ESS, and the run's numbers of chains and draws."""

    name: str
    rhat: float
    ess_bulk: float
    chains: int
    draws: int


def gaussian_draws(seed: int | np.random.Generator, mean: np.ndarray, *, sd: np.ndarray | None = None,
                   cov: np.ndarray | None = None, size: tuple[int, int] = APPROXIMATION_DRAWS) -> np.ndarray:
    """Independent draws (chain, draw, ...) of N(mean, diag(sd^2)) or N(mean, cov) (through the symmetric
    square root of ``cov``, which may be singular): the posterior group of a deterministic fit.

    Examples
    --------
    >>> import numpy as np
    >>> draws = gaussian_draws(0, np.array([1.0, -1.0]), sd=np.array([0.1, 2.0]))
    >>> draws.shape
    (4, 100, 2)
    >>> bool(np.all(np.abs(draws.mean(axis=(0, 1)) - [1.0, -1.0]) < 4 * np.array([0.1, 2.0]) / 20))
    True
    """
    from bayes_maxmargin.core.linalg import psd_sqrt

    rng = np.random.default_rng(seed)
    mean = np.asarray(mean, dtype=np.float64)
    if cov is not None:
        factor = psd_sqrt(cov)
        return mean + rng.standard_normal((*size, factor.shape[1])) @ factor.T
    return mean + np.asarray(sd, dtype=np.float64) * rng.standard_normal((*size, *mean.shape))


def to_inference_data(
    posterior: Mapping[str, np.ndarray],
    *,
    sample_stats: Mapping[str, np.ndarray] | None = None,
    observed_data: Mapping[str, np.ndarray] | None = None,
    log_likelihood: Mapping[str, np.ndarray] | None = None,
    constant_data: Mapping[str, np.ndarray] | None = None,
    coords: Mapping[str, object] | None = None,
    dims: Mapping[str, list[str]] | None = None,
    attrs: Mapping[str, object] | None = None,
    approximation: str | None = None,
) -> xr.DataTree:
    """Build ArviZ's DataTree (an :class:`xarray.DataTree` with one child per group) from arrays laid
    out (chain, draw, ...).

    Parameters
    ----------
    posterior : mapping
        Posterior draws (chain, draw, ...): MCMC draws, or independent draws of a deterministic fit's
        approximation (``approximation``).
    sample_stats : mapping, optional
        Per-draw statistics (``log_joint``, NUTS diagnostics, an objective trace).
    observed_data : mapping, optional
        The training labels.
    log_likelihood : mapping, optional
        Pointwise log likelihood (chain, draw, obs), only where it is normalised.
    constant_data : mapping, optional
        Values the fit holds fixed rather than integrates over: kernel parameters learnt by ML-II,
        EM's estimate of gamma (no chain or draw dimension).
    coords, dims : mapping, optional
        Named coordinates and dimensions for the variables.
    attrs : mapping, optional
        Attributes stored on every group (model, inference, library version).
    approximation : str, optional
        For a deterministic fit, what the posterior's draws are drawn from (e.g. "q(beta) of
        mean-field VB"); stored as the posterior's ``approximation`` attribute. These are independent
        draws: :func:`has_draws` is False and no mixing check reads them.

    Returns
    -------
    xarray.DataTree
        Groups ``posterior`` and those given; ``attrs`` on the root and on every group.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin import to_inference_data
    >>> idata = to_inference_data({"beta": np.zeros((2, 10, 3))},
    ...                           sample_stats={"log_joint": np.zeros((2, 10))})
    >>> dict(idata.posterior.sizes)
    {'chain': 2, 'draw': 10, 'beta_dim_0': 3}
    """
    import arviz as az

    groups = {"posterior": posterior, "sample_stats": sample_stats, "observed_data": observed_data,
              "log_likelihood": log_likelihood, "constant_data": constant_data}
    groups = {name: dict(values) for name, values in groups.items() if values}
    names = {name for values in groups.values() for name in values}
    dims = {k: v for k, v in (dims or {}).items() if k in names}  # from_dict refuses dims of absent variables
    idata = az.from_dict(groups, coords=dict(coords) if coords else None, dims=dims or None)
    if attrs:
        text = {k: str(v) for k, v in attrs.items()}
        for node in idata.subtree:
            node.attrs.update(text)
    if approximation:
        idata.posterior.attrs["approximation"] = approximation
    return idata


def convergence_summary(idata: xr.DataTree, var_names: list[str] | None = None) -> dict[str, float]:
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
    import arviz as az

    summ = az.summary(idata, var_names=var_names, kind="diagnostics")
    return {
        "max_rhat": float(summ["r_hat"].max()),
        "min_ess_bulk": float(summ["ess_bulk"].min()),
        "min_ess_tail": float(summ["ess_tail"].min()),
    }


def has_draws(idata: xr.DataTree) -> bool:
    """Whether the posterior holds MCMC draws (more than one draw), not a point estimate or independent
    draws from the approximation q of a deterministic fit (EM, ECM, VB, VI, SVI: the posterior's
    ``approximation`` attribute)."""
    post = idata.posterior
    return int(post.sizes.get("draw", 1)) > 1 and "approximation" not in post.attrs


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


def _split_chains(draws: np.ndarray) -> np.ndarray:
    """(k, chain, draw) -> (k, 2 chain, draw // 2): each chain's first and last halves (the middle
    draw of an odd count dropped)."""
    half = draws.shape[2] // 2
    return np.concatenate([draws[:, :, :half], draws[:, :, draws.shape[2] - half:]], axis=1)


def _rank_to_normal(ranks: np.ndarray, size: int) -> np.ndarray:
    """Phi^-1((rank - 3/8) / (S + 1/4)) (Blom's normal scores, Vehtari et al. 2021, eq. 14)."""
    from scipy.special import ndtri

    return ndtri((ranks - 0.375) / (size + 0.25))


def _normal_scores(order: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """Rank normalisation (Vehtari et al. 2021, eq. 14) of each row of a (k, S) array given its sorting
    permutation ``order`` and the sorted rows ``ordered``: Phi^-1((rank - 3/8) / (S + 1/4)) at each
    value's position, average ranks for ties."""
    k, size = order.shape
    starts = np.ones((k, size), dtype=bool)  # where a run of equal values begins
    np.not_equal(ordered[:, 1:], ordered[:, :-1], out=starts[:, 1:])
    z = np.empty((k, size))
    rows = np.arange(k)[:, None]
    z[rows, order] = _rank_to_normal(np.arange(1.0, size + 1.0), size)
    ends = np.ones((k, size), dtype=bool)  # where a run of equal values ends
    ends[:, :-1] = starts[:, 1:]
    tied = np.flatnonzero(~(starts & ends))  # (flat) sorted positions inside a run of ties: few
    if tied.size:  # each tied value gets the average of the run's ranks
        run = np.cumsum(starts.ravel()[tied]) - 1
        first, last = tied[starts.ravel()[tied]][run], tied[ends.ravel()[tied]][run]
        row = tied // size
        ranks = (first + last) / 2.0 - row * size + 1.0
        z[row, order.ravel()[tied]] = _rank_to_normal(ranks, size)
    return z


def _rhat(draws: np.ndarray) -> np.ndarray:
    """Potential scale reduction sqrt(((N - 1) / N W + B / N) / W) of each element of (k, chain, draw)."""
    n = draws.shape[2]
    within = np.var(draws, axis=2, ddof=1).mean(axis=1)
    between = n * np.var(draws.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _ess(draws: np.ndarray) -> np.ndarray:
    """Effective sample size of every element of (k, chain, draw) by Geyer's initial monotone
    sequence estimator of the autocorrelation time (Vehtari et al. 2021, Sec. 3.2), vectorised over
    the elements; equals ArviZ's estimator (the sum of the pairs of autocorrelations up to the first
    non-positive pair, made non-increasing)."""
    from scipy import fft

    k, chains, n = draws.shape
    centred = draws - draws.mean(axis=2, keepdims=True)
    m = fft.next_fast_len(2 * n, real=True)
    spec = fft.rfft(centred, n=m, axis=2)
    acov = fft.irfft(spec.real**2 + spec.imag**2, n=m, axis=2)[..., :n] / n  # (k, chain, lag)
    mean_var = acov[:, :, 0].mean(axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if chains > 1:
        var_plus = var_plus + np.var(draws.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = (1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]).T  # (lag, k)
    rho[0] = 1.0
    n_pairs = max((n - 1) // 2, 1)  # pairs (rho_2t, rho_2t+1), t < n_pairs, that ArviZ reads
    pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2, k).sum(axis=1)
    later = np.arange(n_pairs)[:, None] >= 1
    ended = later & (pairs <= 0.0)  # the first non-positive pair after the first ends the sum
    last = np.where(ended.any(axis=0), np.argmax(ended, axis=0), n_pairs - 1)  # index of the last pair read
    last = np.where(pairs[0] > 0.0, last, 0)
    taken = np.arange(n_pairs)[:, None] < last  # pairs summed in full
    monotone = np.minimum.accumulate(np.where(taken, pairs, np.inf), axis=0)
    even = np.take_along_axis(rho[: 2 * n_pairs: 2], last[None], axis=0)[0]
    last_pair = np.take_along_axis(pairs, last[None], axis=0)[0]
    even = np.where((even > 0.0) | ((last_pair >= 0.0) & (last > 0)), even, 0.0)
    even = np.where(last == 0, 1.0, even)
    tau = -1.0 + 2.0 * np.sum(np.where(taken, monotone, 0.0), axis=0) + even
    size = chains * n
    ess = size / np.maximum(tau, 1.0 / np.log10(size))
    constant = np.ptp(draws, axis=(1, 2)) < np.finfo(float).resolution
    return np.where(constant, float(size), np.where(np.isnan(rho).any(axis=0), np.nan, ess))


def rank_diagnostics(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalised split R-hat and bulk effective sample size (Vehtari, Gelman, Simpson, Carpenter
    & Buerkner 2021, Sec. 4) of every element of ``draws`` at once.

    R-hat is the larger of the bulk and the folded (tail) split R-hat of the rank-normalised draws; the
    bulk ESS is Geyer's initial monotone sequence estimate on the rank-normalised split chains. Both
    equal ArviZ's ``rhat(method="rank")`` and ``ess(method="bulk")``, computed for all elements in one
    pass instead of one at a time (seconds, not minutes, for thousands of coefficients): one sort of
    each element's draws gives its ranks, its median and (a merge of two sorted runs) the ranks of the
    folded draws.

    Parameters
    ----------
    draws : ndarray, shape (chain, draw, k)

    Returns
    -------
    rhat, ess_bulk : ndarray, shape (k,)
        NaN where an element has a NaN draw, with fewer than four draws, and (R-hat) with one chain.

    Examples
    --------
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(size=(4, 500, 3))
    >>> rhat, ess = rank_diagnostics(draws)
    >>> bool(np.all(rhat < 1.01)), bool(np.all(ess > 1000))
    (True, True)
    """
    draws = np.asarray(draws, dtype=float)
    chains, n, k = draws.shape
    if n < 4:
        return np.full(k, np.nan), np.full(k, np.nan)
    split = _split_chains(np.ascontiguousarray(np.moveaxis(draws, 2, 0)))  # (k, 2 chain, n // 2)
    flat = split.reshape(k, -1)
    order = np.argsort(flat, axis=1)
    rows = np.arange(k)[:, None]
    ordered = flat[rows, order]
    z = _normal_scores(order, ordered).reshape(split.shape)
    ess = _ess(z)  # constant draws give constant z: _ess counts every draw
    if chains >= 2:
        size = flat.shape[1]
        median = (ordered[:, (size - 1) // 2] + ordered[:, size // 2]) / 2.0
        folded = np.abs(ordered - median[:, None])  # in sorted order: falling, then rising
        refold = np.argsort(folded, axis=1, kind="stable")  # a merge of the two runs
        z_folded = np.empty_like(flat)
        z_folded[rows, order] = _normal_scores(refold, folded[rows, refold])
        rhat = np.maximum(_rhat(z), _rhat(z_folded.reshape(split.shape)))
    else:
        rhat = np.full(k, np.nan)
    missing = np.isnan(draws).any(axis=(0, 1))
    return np.where(missing, np.nan, rhat), np.where(missing, np.nan, ess)


def mixing_problem(idata: xr.DataTree, skip_classes: Any = ()) -> MixingProblem | None:
    """The worst-mixing posterior element if the chains have not mixed, else None.

    Not mixed: with at least two chains, a rank-normalised split R-hat above :data:`MAX_RHAT`;
    with any number of chains, a bulk ESS below :data:`MIN_ESS_PER_CHAIN` times the number of
    chains. The worst element is the one of the largest R-hat when one is too large, else the one
    of the smallest bulk ESS. Posteriors of fewer than four draws (point estimates) and independent
    draws from a deterministic fit's approximation (:func:`has_draws`) give None;
    elements whose draws are all equal (fixed values) are skipped, and so are the one-vs-rest
    problems labelled ``skip_classes`` (on the ``class`` dimension).
    """
    post = idata.posterior
    chains, draws = int(post.sizes.get("chain", 1)), int(post.sizes.get("draw", 1))
    if draws < 4 or not has_draws(idata):
        return None
    if len(skip_classes) and "class" in post.dims:
        post = post.to_dataset().drop_sel({"class": [str(c) for c in skip_classes]})
        if post.sizes["class"] == 0:
            return None
    worst_r, worst_e = None, None
    for var in post.data_vars:
        values = np.asarray(post[var].transpose("chain", "draw", ...).values, dtype=float)
        flat = values.reshape(chains, draws, -1)
        r, e = (a.reshape(values.shape[2:]) for a in rank_diagnostics(flat))
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


def _stacklevel_outside_package() -> int:
    """The ``warnings.warn`` stacklevel, called from the function that calls this one, of the first frame
    outside this package: the user's line, however deep in the package the warning is issued."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _shown_above(value: float, limit: float) -> str:
    """``value`` with the fewest decimals (at least two) that show it above ``limit``: an R-hat of 1.0149
    reads 1.015, never 1.01 beside a limit of 1.01."""
    for decimals in range(2, 10):
        shown = f"{value:.{decimals}f}"
        if float(shown) > limit:
            return shown
    return repr(value)


def inside_model_selection() -> bool:
    """Whether this call runs inside one of scikit-learn's inner model-selection fits
    (``sklearn.model_selection._validation._fit_and_score``: the fits of ``cross_validate``, ``GridSearchCV``,
    ``RandomizedSearchCV``, ``validation_curve``, ...), on a clone the user never sees; in a joblib worker
    too, whose stack holds the same frame. A search's refit (``refit=True``) is not one of them."""
    frame = sys._getframe(1)
    while frame is not None:
        if (frame.f_code.co_name == "_fit_and_score"
                and frame.f_globals.get("__name__") == "sklearn.model_selection._validation"):
            return True
        frame = frame.f_back
    return False


def warn_if_not_mixed(
    idata: xr.DataTree, owner: str = "the fit", stacklevel: int | None = None, separable: Any = None
) -> MixingProblem | None:
    """Issue a :class:`MixingWarning` naming the worst variable when :func:`mixing_problem` finds
    one (MCMC fits only: a point estimate or the draws of an approximation are never checked); return it.

    The warning states which limit the variable misses and its value to the digits that show it
    (:func:`_shown_above`), and points at ``stacklevel`` (default: the first caller outside this package).
    Inside scikit-learn's inner model-selection fits (:func:`inside_model_selection`), where the fitted
    clone is thrown away and the user cannot act on it, nothing is issued (the problem is still returned);
    the search's refit on all the data warns as any fit does.

    ``separable`` (True, or the labels of the one-vs-rest problems) says that the training classes
    are linearly separable: a :class:`SeparableClassesWarning` names them, and the mixing of their
    draws, which only the priors bound along the separating direction, is not judged.
    """
    if inside_model_selection():
        return mixing_problem(idata)
    stacklevel = stacklevel or _stacklevel_outside_package()
    if separable:
        which = "" if separable is True else f" (class {', '.join(map(str, separable))} against the rest)"
        warnings.warn(
            f"The training classes of {owner} are linearly separable{which}: the posterior-mean hyperplane "
            "classifies every training point correctly. The likelihood is flat along the separating direction, "
            "so only the priors bound the scale of the coefficients and the intercept there (sigma, A_u and B_u, "
            "intercept_scale): wide intervals and slow mixing along it are the posterior's, not a sampler "
            "failure.",
            SeparableClassesWarning, stacklevel=stacklevel,
        )
        if separable is True:
            return None
    problem = mixing_problem(idata, skip_classes=separable or ())
    if problem is None:
        return None
    warnings.warn(
        f"The chains of {owner} have not mixed: {_described(problem)} (Vehtari et al. 2021: R-hat <= {MAX_RHAT}, "
        f"bulk ESS >= {MIN_ESS_PER_CHAIN} per chain). Its draws may not represent the posterior: run longer "
        "chains (num_warmup, num_samples) or more of them, and check bayes_maxmargin.convergence_summary / "
        "plots.plot_trace.",
        MixingWarning, stacklevel=stacklevel,
    )
    return problem


def _described(problem: MixingProblem) -> str:
    """The problem as text: '<name> has R-hat ... and bulk ESS ..., over C chain(s) of D draws', each
    limit it misses named."""
    least_ess = MIN_ESS_PER_CHAIN * problem.chains
    found = [f"bulk ESS {np.floor(problem.ess_bulk):.0f}"
             + (f" (below {least_ess} = {MIN_ESS_PER_CHAIN} per chain)" if problem.ess_bulk < least_ess else "")]
    if np.isfinite(problem.rhat):
        found.insert(0, f"R-hat {_shown_above(problem.rhat, MAX_RHAT)} (above {MAX_RHAT})"
                     if problem.rhat > MAX_RHAT else f"R-hat {problem.rhat:.3f}")
    return f"{problem.name} has {' and '.join(found)}, over {problem.chains} chain(s) of {problem.draws} draws"
