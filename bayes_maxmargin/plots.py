"""Diagnostic plots: MCMC traces and ranks, reliability diagrams, objective curves,
decision boundaries with predictive uncertainty, inclusion probabilities and inducing points.

Every function returns a :class:`matplotlib.figure.Figure` and never calls
``plt.show``, so it is safe on headless machines; pass ``path`` to also save
the figure (format from the suffix, PNG by default), written atomically.
Figures drawn by this module itself (not by ArviZ) are created with
:class:`matplotlib.figure.Figure` directly, outside pyplot's global figure
registry, unless an existing ``ax`` is given. Functions that take a fitted
estimator raise :class:`ValueError` for an unfitted one or one that lacks the
quantity plotted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

__all__ = [
    "plot_convergence",
    "plot_decision_boundary",
    "plot_inclusion_probabilities",
    "plot_inducing_points",
    "plot_objective",
    "plot_rank",
    "plot_reliability",
    "plot_trace",
]

PathLike = str | os.PathLike[str]


def _arviz() -> Any:
    """Import ArviZ lazily (with xarray, pandas and arviz-plots)."""
    import arviz

    return arviz


def _save(fig: Figure, path: PathLike | None) -> Figure:
    """Save ``fig`` to ``path`` (format from its suffix) atomically, if a path is given."""
    if path is not None:
        from bayes_maxmargin.core.io import atomic_path

        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix[1:] or "png", dpi=100, bbox_inches="tight")
    return fig


def _root_figure(ax: Axes) -> Figure:
    """The top-level figure holding ``ax`` (also when ``ax`` sits in a subfigure)."""
    fig = ax.figure
    while not isinstance(fig, Figure):  # a SubFigure: walk up to the root figure
        fig = fig.figure
    return fig


def _figure_of(collection: Any) -> Figure:
    """The Matplotlib figure of an arviz-plots :class:`~arviz_plots.PlotCollection`."""
    plot = collection.viz["plot"]
    first = next(iter(plot.data_vars.values())).values
    return _root_figure(np.ravel(first)[0])


def _fitted(estimator: Any, attribute: str = "classes_") -> None:
    """Raise a ValueError unless ``estimator`` is fitted (has ``attribute``)."""
    if not hasattr(estimator, "get_params"):
        raise ValueError(f"expected a fitted bayes_maxmargin estimator, got {type(estimator).__name__}")
    if not hasattr(estimator, "classes_") and not hasattr(estimator, "idata_"):
        raise ValueError(f"this {type(estimator).__name__} is not fitted yet; call fit first")
    if not hasattr(estimator, attribute):
        raise ValueError(f"the fitted {type(estimator).__name__} has no {attribute!r} to plot")


def _posterior_of(source: Any) -> Any:
    """The DataTree of ``source``: ArviZ's DataTree, or a fitted estimator's ``idata_``."""
    if hasattr(source, "get_params"):
        _fitted(source, "idata_")
        source = source.idata_
    if not hasattr(source, "children") or "posterior" not in source.children:
        raise ValueError(
            f"expected ArviZ's DataTree (an xarray.DataTree) with a posterior group or a fitted estimator, "
            f"got {type(source).__name__}"
        )
    return source


def _arviz_figure(
    plot: Callable[..., Any], idata: Any, var_names: Sequence[str] | str | None, path: PathLike | None, /,
    **kwargs: Any,
) -> Figure:
    """Draw an arviz-plots plot with Matplotlib and save its figure.

    Parameters
    ----------
    plot : callable
        The arviz-plots function (``arviz.plot_trace_dist``, ...).
    idata : xarray.DataTree
        Posterior draws.
    var_names, path
        As in :func:`plot_trace`.
    **kwargs
        Passed on to ``plot``.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the plot.
    """
    collection = plot(idata, var_names=var_names, backend="matplotlib", **kwargs)
    return _save(_figure_of(collection), path)


def _largest_coords(post: Any, var_names: Sequence[str] | str | None, max_coords: int) -> dict[str, list[Any]]:
    """For every dimension (besides chain and draw) of the plotted variables that is longer than
    ``max_coords``: the ``max_coords`` coordinates of the largest absolute posterior means (over
    the variables that have the dimension and their other dimensions), in their original order."""
    names = [var_names] if isinstance(var_names, str) else list(var_names or post.data_vars)
    scores: dict[str, Any] = {}
    for name in names:
        da = post[name]
        for dim in da.dims:
            if dim in ("chain", "draw") or da.sizes[dim] <= max_coords:
                continue
            others = [d for d in da.dims if d != dim]
            score = np.abs(da.mean(("chain", "draw"))).max([d for d in others if d not in ("chain", "draw")])
            scores[dim] = score if dim not in scores else np.maximum(scores[dim], score)
    out = {}
    for dim, score in scores.items():
        values = score.values
        keep = np.sort(np.argsort(-np.nan_to_num(values, nan=-np.inf), kind="stable")[:max_coords])
        coord = post[dim].values if dim in post.coords else np.arange(post.sizes[dim])
        out[dim] = [coord[i] for i in keep]
    return out


def plot_trace(
    idata: Any,
    var_names: Sequence[str] | str | None = None,
    path: PathLike | None = None,
    max_coords: int | None = 8,
    **kwargs: Any,
) -> Figure:
    """Trace plot (marginal densities and sampled values per chain) via arviz-plots'
    :func:`arviz.plot_trace_dist`.

    Every element of a vector variable gets its own row, titled with its coordinate (the feature
    names when the estimator was fitted on a DataFrame or the names were given as coordinates).
    Of a dimension longer than ``max_coords`` (e.g. 30 coefficients) only the ``max_coords``
    elements of the largest absolute posterior means are drawn, and the figure's title says so.

    Parameters
    ----------
    idata : xarray.DataTree or fitted estimator
        Posterior draws (a ``posterior`` group with ``chain`` and ``draw``
        dimensions), or an estimator whose ``idata_`` holds them.
    var_names : str or sequence of str, optional
        Variables to plot; all by default.
    path : str or os.PathLike, optional
        If given, save the figure there.
    max_coords : int or None, default 8
        Most elements drawn per dimension; None draws all.
    **kwargs
        Passed on to :func:`arviz.plot_trace_dist` (``coords`` replaces the
        selection by ``max_coords``; ``compact=True`` overlays the elements
        of a variable in one panel).

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the trace plot.

    Raises
    ------
    ValueError
        If ``idata`` has no posterior group, holds a single draw (a point
        estimate: there is no trace), or the estimator is not fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin import plots, to_inference_data
    >>> idata = to_inference_data({"beta": np.random.default_rng(0).normal(size=(2, 100, 3))})
    >>> fig = plots.plot_trace(idata)
    >>> len(fig.axes)  # a density and a trace for each of the three coefficients
    6
    """
    az = _arviz()
    idata = _posterior_of(idata)
    post = idata.posterior
    if int(post.sizes.get("draw", 1)) < 2:
        raise ValueError("the posterior holds a single draw (a point estimate): there are no draws to trace")
    selected = {} if max_coords is None or "coords" in kwargs else _largest_coords(post, var_names, max_coords)
    if selected:
        kwargs["coords"] = selected
    kwargs.setdefault("compact", False)
    fig = _arviz_figure(az.plot_trace_dist, idata, var_names, None, **kwargs)
    if selected:
        fig.suptitle("; ".join(f"{len(v)} of {post.sizes[d]} {d}s (largest |posterior mean|)"
                               for d, v in selected.items()), fontsize="medium")
    return _save(fig, path)


def plot_rank(
    idata: Any,
    var_names: Sequence[str] | str | None = None,
    path: PathLike | None = None,
    **kwargs: Any,
) -> Figure:
    """Rank plot (the fractional ranks of each chain's draws as ECDF differences, with a
    simultaneous envelope) via arviz-plots' :func:`arviz.plot_rank`.

    Curves inside the envelope indicate well-mixed chains.

    Parameters
    ----------
    idata : xarray.DataTree or fitted estimator
        Posterior draws with at least two chains, or an estimator whose
        ``idata_`` holds them.
    var_names : str or sequence of str, optional
        Variables to plot; all by default.
    path : str or os.PathLike, optional
        If given, save the figure there.
    **kwargs
        Passed on to :func:`arviz.plot_rank`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the rank plot.

    Raises
    ------
    ValueError
        If ``idata`` has no posterior group, fewer than two chains, or the
        estimator is not fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_maxmargin import plots, to_inference_data
    >>> idata = to_inference_data({"beta": np.random.default_rng(0).normal(size=(4, 100, 2))})
    >>> fig = plots.plot_rank(idata)
    """
    az = _arviz()
    idata = _posterior_of(idata)
    if idata.posterior.sizes.get("chain", 0) < 2:
        raise ValueError(
            f"a rank plot needs at least two chains, got {idata.posterior.sizes.get('chain', 0)}"
        )
    return _arviz_figure(az.plot_rank, idata, var_names, path, **kwargs)


def _label_text(label: Any) -> str:
    """A class label as text (NumPy scalars as their Python value)."""
    return str(label.item() if hasattr(label, "item") else label)


def plot_reliability(
    y_true: ArrayLike,
    proba_pos: ArrayLike,
    pos_label: Any,
    n_bins: int = 10,
    path: PathLike | None = None,
    ax: Axes | None = None,
    confidence: str = "top_label",
) -> Figure:
    """Reliability diagram with a histogram of the predicted probabilities below it.

    The calibration curve (fraction of positives against mean predicted
    probability in ``n_bins`` equal-width bins, those of
    :func:`bayes_maxmargin.metrics.calibration_bins`) is drawn against the
    diagonal of perfect calibration. The title reports
    :func:`bayes_maxmargin.metrics.expected_calibration_error` over the same
    bins, by default the top-label ECE that the command line writes to
    ``metrics.json``.

    Parameters
    ----------
    y_true : ArrayLike
        True labels, shape ``(N,)`` (any two label values, e.g. ``{-1, +1}``).
    proba_pos : ArrayLike
        Predicted probability of ``pos_label``, shape ``(N,)``, in ``[0, 1]``.
    pos_label : Any
        The label counted as positive.
    n_bins : int, default 10
        Number of equal-width bins on ``[0, 1]``.
    path : str or os.PathLike, optional
        If given, save the figure there as a PNG.
    ax : matplotlib.axes.Axes, optional
        Axes to draw the curve on; the histogram is appended below it, taking
        part of its area. A new figure is created when omitted.
    confidence : {"top_label", "positive"}, default "top_label"
        The ECE of the title, as in
        :func:`~bayes_maxmargin.metrics.expected_calibration_error`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the diagram.

    Raises
    ------
    ValueError
        If the inputs differ in length, are empty, or the probabilities are
        outside ``[0, 1]`` or non-finite.
    """
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    from bayes_maxmargin.metrics import calibration_bins, expected_calibration_error

    y = np.asarray(y_true).ravel()
    proba = np.asarray(proba_pos, dtype=float).ravel()
    if y.shape != proba.shape or y.size == 0:
        raise ValueError(
            f"y_true and proba_pos must be non-empty and of equal length, "
            f"got {y.size} and {proba.size}"
        )
    if not np.all(np.isfinite(proba)) or proba.min() < 0.0 or proba.max() > 1.0:
        raise ValueError("proba_pos must hold finite probabilities in [0, 1]")
    if n_bins < 1:
        raise ValueError(f"n_bins must be positive, got {n_bins}")

    mean_pred, frac_pos, _, _ = calibration_bins(proba, (y == pos_label).astype(float), n_bins)
    ece = expected_calibration_error(y, proba, pos_label, n_bins, confidence=confidence)

    if ax is None:
        fig = Figure(figsize=(5.0, 6.0))
        ax = fig.add_subplot()
    else:
        fig = _root_figure(ax)
    hist_ax = make_axes_locatable(ax).append_axes("bottom", size="30%", pad=0.15, sharex=ax)

    ax.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="0.5", label="perfectly calibrated")
    ax.plot(mean_pred, frac_pos, marker="o", label="model")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel(f"fraction of class {_label_text(pos_label)}")
    kind = "top-label" if confidence == "top_label" else "positive-class"
    ax.set_title(f"Reliability diagram ({kind} ECE = {ece:.3f})")
    ax.legend(loc="upper left")
    ax.tick_params(labelbottom=False)

    hist_ax.hist(proba, bins=np.linspace(0.0, 1.0, n_bins + 1), color="C0", alpha=0.7)
    hist_ax.set_xlabel(f"predicted probability of class {_label_text(pos_label)}")
    hist_ax.set_ylabel("count")
    return _save(fig, path)


def plot_objective(
    trace: ArrayLike,
    path: PathLike | None = None,
    ax: Axes | None = None,
    label: str = "objective",
    steps: ArrayLike | None = None,
    xlabel: str = "iteration",
) -> Figure:
    """Objective (e.g. ELBO or negative log posterior) against iteration.

    Parameters
    ----------
    trace : ArrayLike
        Values per iteration, shape ``(T,)``; a ``(T, R)`` array draws one
        line per column (e.g. per restart or chain). Non-finite values show
        as gaps.
    path : str or os.PathLike, optional
        If given, save the figure there.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure is created when omitted.
    label : str, default "objective"
        Name of the quantity, used for the y axis and the legend.
    steps : ArrayLike, optional
        The x value of each row of ``trace``, shape ``(T,)`` (e.g. the SVI
        step of each ELBO estimate); ``0, ..., T - 1`` by default.
    xlabel : str, default "iteration"
        Label of the x axis.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the curve.

    Raises
    ------
    ValueError
        If ``trace`` is empty or has more than two dimensions, or ``steps``
        does not have one entry per row of ``trace``.
    """
    values = np.asarray(trace, dtype=float)
    if values.ndim == 0 or values.ndim > 2 or values.shape[0] == 0:
        raise ValueError(f"trace must have shape (T,) or (T, R) with T > 0, got {values.shape}")
    iterations = np.arange(values.shape[0]) if steps is None else np.asarray(steps, dtype=float)
    if iterations.shape != values.shape[:1]:
        raise ValueError(
            f"steps must have shape ({values.shape[0]},) like the rows of trace, got {iterations.shape}"
        )
    fig, ax = _figure_and_axes(ax, (6.0, 4.0))
    if values.ndim == 1:
        ax.plot(iterations, values, label=label)
    else:
        for r in range(values.shape[1]):
            ax.plot(iterations, values[:, r], label=f"{label} [{r}]")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(label)
    ax.legend(loc="best")
    return _save(fig, path)


def _figure_and_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """``ax`` and its root figure, or a new pyplot-free figure with one axes."""
    if ax is None:
        fig = Figure(figsize=figsize)
        return fig, fig.add_subplot()
    return _root_figure(ax), ax


# (attribute, y label, x label) of the objective traces the estimators keep, in order of preference
_OBJECTIVE_TRACES = (
    ("elbo_", "ELBO", "step"),
    ("lower_bound_", "VB lower bound", "iteration"),
    ("objective_", "log posterior", "iteration"),
    ("bound_", "VB-EM bound", "iteration"),
)


def plot_convergence(
    estimator: Any,
    path: PathLike | None = None,
    ax: Axes | None = None,
) -> Figure:
    """The objective trace of a fitted optimisation or variational estimator.

    Draws whichever trace the fit kept: the ELBO of SVI (minibatch
    estimates at ``elbo_steps_``) or of batch VI (per sweep), the VB lower
    bound of Luts & Ormerod's coordinate ascent (``lower_bound_``), the log
    posterior after every EM / ECM / FITC iteration (``objective_``; the
    jumps are the ML-II steps), or the VB-EM bound of :class:`FactorBSVM`
    (``bound_``).

    Parameters
    ----------
    estimator : fitted estimator
        A :class:`~bayes_maxmargin.LinearBSVM`, :class:`~bayes_maxmargin.GPBSVM`
        or :class:`~bayes_maxmargin.FactorBSVM` fitted by EM, ECM, FITC, VB,
        VI, SVI or VB-EM.
    path, ax : optional
        Where to save the figure and the Axes to draw on, as in :func:`plot_objective`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure of :func:`plot_objective` holding the curve.

    Raises
    ------
    ValueError
        If the estimator is not fitted or its fit kept no objective trace
        (MCMC fits: use :func:`plot_trace`).
    """
    _fitted(estimator, "idata_")
    for attribute, label, xlabel in _OBJECTIVE_TRACES:
        trace = getattr(estimator, attribute, None)
        if trace is not None and np.size(trace) > 0:
            steps = getattr(estimator, "elbo_steps_", None) if attribute == "elbo_" else None
            if steps is None or np.shape(steps) != np.shape(trace):
                steps, xlabel = None, "sweep" if attribute == "elbo_" else xlabel
            return plot_objective(trace, path=path, ax=ax, label=label, steps=steps, xlabel=xlabel)
    names = ", ".join(a for a, _, _ in _OBJECTIVE_TRACES)
    raise ValueError(
        f"the fitted {type(estimator).__name__} kept no objective trace ({names}); "
        f"MCMC fits have none, use plot_trace"
    )


def _two_columns(X: ArrayLike, features: tuple[int, int], name: str) -> np.ndarray:
    """Columns ``features`` of a 2-D array ``X``, as float."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_samples, n_features), got shape {X.shape}")
    if len(features) != 2 or not all(0 <= int(j) < X.shape[1] for j in features):
        raise ValueError(f"features must be two column indices of {name} (0 to {X.shape[1] - 1}), got {features}")
    return X[:, list(features)]


def _scatter_classes(ax: Axes, X2: np.ndarray, y: ArrayLike | None, classes: Any) -> None:
    """The points of ``X2`` coloured by class (grey without labels)."""
    if y is None:
        ax.scatter(X2[:, 0], X2[:, 1], s=12, c="0.4", label="data")
        return
    y = np.asarray(y)
    if y.shape != (X2.shape[0],):
        raise ValueError(f"y must have shape ({X2.shape[0]},) like X, got {y.shape}")
    for k, label in enumerate(classes if classes is not None else np.unique(y)):
        mask = y == label
        ax.scatter(X2[mask, 0], X2[mask, 1], s=14, color=f"C{k}", edgecolors="w", linewidths=0.3,
                   label=f"class {_label_text(label)}")


def plot_decision_boundary(
    estimator: Any,
    X: ArrayLike,
    y: ArrayLike | None = None,
    shade: str | None = "proba",
    resolution: int = 100,
    support_vectors: bool = True,
    inducing_points: bool = True,
    path: PathLike | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Decision boundary of a classifier on two features, shaded by predictive uncertainty.

    The estimator is evaluated on a ``resolution x resolution`` grid
    spanning ``X`` (5 % padding). The boundary (predictive probability
    1/2, i.e. posterior mean of f equal to zero, the SVM decision rule) is
    a black contour line; the background is the predictive probability of
    ``classes_[1]``, Phi(m / sqrt(1 + v)) (``shade="proba"``), or the
    predictive variance v of the latent f from ``predict_latent``
    (``shade="variance"``). With more than two classes the shading is the
    largest class probability and the contours separate the predicted
    classes. The points of ``X`` are drawn coloured by ``y``; the support
    vectors (``support_vectors_``, e.g. of :class:`~bayes_maxmargin.GPBSVM`)
    as black rings and the inducing points (``inducing_points_``, FITC and
    SVI) as red crosses.

    Parameters
    ----------
    estimator : fitted estimator
        A classifier fitted on two features, with ``predict_proba`` and
        ``predict_latent``.
    X : ArrayLike of shape (n_samples, 2)
        Points to draw; they set the extent of the grid.
    y : ArrayLike of shape (n_samples,), optional
        Their labels (colours); grey points when omitted.
    shade : {"proba", "variance", None}, default "proba"
        What the background shows; None for the boundary alone.
    resolution : int, default 100
        Grid points per axis, at least 2.
    support_vectors : bool, default True
        Ring the estimator's ``support_vectors_``, if it has them.
    inducing_points : bool, default True
        Mark the estimator's ``inducing_points_``, if it has them.
    path, ax : optional
        Where to save the figure and the Axes to draw on, as in :func:`plot_objective`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the map (with a colour bar when shaded).

    Raises
    ------
    ValueError
        If the estimator is not fitted or was not fitted on two features,
        ``X`` is not of shape ``(n_samples, 2)``, ``y`` does not match it,
        or ``shade`` or ``resolution`` is invalid.
    """
    _fitted(estimator)
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2 or X.shape[0] == 0:
        raise ValueError(f"X must have shape (n_samples, 2) for a decision boundary, got {X.shape}")
    n_in = getattr(estimator, "n_features_in_", 2)
    if n_in != 2:
        raise ValueError(f"the estimator was fitted on {n_in} features; a decision boundary needs 2")
    if shade not in ("proba", "variance", None):
        raise ValueError(f"shade must be 'proba', 'variance' or None, got {shade!r}")
    if int(resolution) < 2:
        raise ValueError(f"resolution must be at least 2, got {resolution}")
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = 0.05 * np.where(hi > lo, hi - lo, 1.0)
    g0, g1 = (np.linspace(lo[j] - pad[j], hi[j] + pad[j], int(resolution)) for j in (0, 1))
    xx, yy = np.meshgrid(g0, g1)
    grid = np.column_stack([xx.ravel(), yy.ravel()])
    proba = np.asarray(estimator.predict_proba(grid), dtype=float)
    binary = proba.shape[1] == 2

    fig, ax = _figure_and_axes(ax, (6.0, 5.0))
    if shade is not None:
        if shade == "proba":
            values = proba[:, 1] if binary else proba.max(axis=1)
            levels = np.linspace(0.0, 1.0, 11)
            cmap = "RdBu_r" if binary else "viridis"
            what = f"P(class {_label_text(estimator.classes_[1])})" if binary else "largest class probability"
        else:
            var = np.asarray(estimator.predict_latent(grid)[1], dtype=float)
            values = var if var.ndim == 1 else var.max(axis=1)
            levels, cmap, what = 12, "viridis", "predictive variance of f"
        filled = ax.contourf(xx, yy, values.reshape(xx.shape), levels=levels, cmap=cmap, alpha=0.75)
        fig.colorbar(filled, ax=ax, label=what)
    if binary:
        ax.contour(xx, yy, proba[:, 1].reshape(xx.shape), levels=[0.5], colors="k", linewidths=1.5)
    else:
        winner = proba.argmax(axis=1).reshape(xx.shape)
        ax.contour(xx, yy, winner, levels=np.arange(proba.shape[1] - 1) + 0.5, colors="k", linewidths=1.5)
    _scatter_classes(ax, X, y, getattr(estimator, "classes_", None))
    sv = getattr(estimator, "support_vectors_", None) if support_vectors else None
    if sv is not None:
        sv = np.asarray(sv, dtype=float)
        ax.scatter(sv[:, 0], sv[:, 1], s=70, facecolors="none", edgecolors="k", linewidths=1.0,
                   label=f"support vectors ({len(sv)})")
    Z = getattr(estimator, "inducing_points_", None) if inducing_points else None
    if Z is not None:
        Z = np.asarray(Z, dtype=float)
        ax.scatter(Z[:, 0], Z[:, 1], marker="x", s=50, color="red", label=f"inducing points ({len(Z)})")
    ax.set_xlim(g0[0], g0[-1])
    ax.set_ylim(g1[0], g1[-1])
    ax.set_xlabel("x1")
    ax.set_ylabel("x2")
    ax.legend(loc="best", fontsize="small")
    return _save(fig, path)


def plot_inducing_points(
    estimator: Any,
    X: ArrayLike | None = None,
    y: ArrayLike | None = None,
    features: tuple[int, int] = (0, 1),
    path: PathLike | None = None,
    ax: Axes | None = None,
) -> Figure:
    """The inducing points (pseudo-inputs) of a sparse GP fit over the data, on two features.

    Parameters
    ----------
    estimator : fitted estimator
        A :class:`~bayes_maxmargin.GPBSVM` fitted with ``inference="fitc"``
        or ``"svi"`` (anything with ``inducing_points_``).
    X : ArrayLike of shape (n_samples, n_features), optional
        Training (or other) points drawn beneath, coloured by ``y``.
    y : ArrayLike of shape (n_samples,), optional
        Labels of ``X``.
    features : (int, int), default (0, 1)
        The two columns shown.
    path, ax : optional
        Where to save the figure and the Axes to draw on, as in :func:`plot_objective`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the scatter plot.

    Raises
    ------
    ValueError
        If the estimator is not fitted or has no inducing points, ``features``
        does not name two columns, or ``X`` does not match the inducing points'
        dimension.
    """
    _fitted(estimator, "inducing_points_")
    Z = _two_columns(estimator.inducing_points_, features, "inducing_points_")
    fig, ax = _figure_and_axes(ax, (6.0, 5.0))
    if X is not None:
        X2 = _two_columns(X, features, "X")
        if np.shape(X)[1] != np.shape(estimator.inducing_points_)[1]:
            raise ValueError(
                f"X has {np.shape(X)[1]} features, the inducing points "
                f"{np.shape(estimator.inducing_points_)[1]}"
            )
        _scatter_classes(ax, X2, y, getattr(estimator, "classes_", None))
    ax.scatter(Z[:, 0], Z[:, 1], marker="x", s=50, color="red", label=f"inducing points ({len(Z)})")
    ax.set_xlabel(f"x{features[0] + 1}")
    ax.set_ylabel(f"x{features[1] + 1}")
    ax.legend(loc="best", fontsize="small")
    return _save(fig, path)


def plot_inclusion_probabilities(
    source: Any,
    feature_names: Sequence[str] | None = None,
    threshold: float = 0.5,
    path: PathLike | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Posterior inclusion probabilities P(gamma_k = 1 | y) per feature, as bars.

    For the spike-and-slab (Laplace-zero) prior of Luts & Ormerod (2014,
    Sec. 3.2). Bars above ``threshold`` are highlighted and the threshold is
    drawn as a dashed line. Several sources (e.g. VB and MCMC, the paper's
    Figure 3) are drawn as grouped bars.

    Parameters
    ----------
    source : fitted estimator, ArrayLike or dict
        A :class:`~bayes_maxmargin.LinearBSVM` fitted with
        ``prior="laplace_zero"`` (its ``inclusion_probabilities_``), an array
        of probabilities of shape ``(n_features,)``, or a dict mapping a
        name to either, all of the same length.
    feature_names : sequence of str, optional
        Tick labels; the estimator's ``feature_names_in_`` when available,
        else the column indices.
    threshold : float, default 0.5
        The inclusion threshold drawn, in ``[0, 1]``.
    path, ax : optional
        Where to save the figure and the Axes to draw on, as in :func:`plot_objective`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the bar chart.

    Raises
    ------
    ValueError
        If an estimator is unfitted or has no inclusion probabilities, the
        probabilities are not a non-empty 1-D array in ``[0, 1]``, the
        sources differ in length, or ``feature_names`` or ``threshold`` do
        not fit.
    """
    sources = source if isinstance(source, dict) else {"": source}
    if not sources:
        raise ValueError("source must not be an empty dict")
    probs: dict[str, np.ndarray] = {}
    for name, src in sources.items():
        if hasattr(src, "get_params"):
            _fitted(src, "inclusion_probabilities_")
            if feature_names is None and hasattr(src, "feature_names_in_"):
                feature_names = list(src.feature_names_in_)
            src = src.inclusion_probabilities_
        p = np.asarray(src, dtype=float)
        if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or p.min() < 0.0 or p.max() > 1.0:
            raise ValueError(
                f"inclusion probabilities{f' of {name!r}' if name else ''} must be a non-empty 1-D "
                f"array in [0, 1], got shape {p.shape}"
            )
        probs[str(name)] = p
    sizes = {p.size for p in probs.values()}
    if len(sizes) != 1:
        raise ValueError(f"the sources have different numbers of features: {sorted(sizes)}")
    d = sizes.pop()
    if feature_names is not None and len(feature_names) != d:
        raise ValueError(f"feature_names has {len(feature_names)} entries for {d} features")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")

    fig, ax = _figure_and_axes(ax, (max(6.0, 0.15 * d + 2.0), 4.0))
    width = 0.8 / len(probs)
    positions = np.arange(d)
    for k, (name, p) in enumerate(probs.items()):
        colors = np.where(p > threshold, f"C{2 * k}", f"C{2 * k + 1}") if len(probs) == 1 else f"C{k}"
        ax.bar(positions + (k - (len(probs) - 1) / 2) * width, p, width=width, color=colors,
               label=name or None)
    ax.axhline(threshold, linestyle="--", color="0.4", linewidth=1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlim(-0.6, d - 0.4)
    ax.set_ylabel("inclusion probability")
    ax.set_title(f"{sum(int(np.sum(p > threshold)) for p in probs.values())} above {threshold:g}"
                 if len(probs) == 1 else "inclusion probabilities")
    if feature_names is not None:
        ax.set_xticks(positions, [str(f) for f in feature_names], rotation=90, fontsize="small")
    else:
        ax.set_xlabel("feature")
    if len(probs) > 1:
        ax.legend(loc="best")
    return _save(fig, path)
