"""Diagnostic plots: MCMC traces and ranks, reliability diagrams, objective curves.

Every function returns a :class:`matplotlib.figure.Figure` and never calls
``plt.show``, so it is safe on headless machines; pass ``path`` to also save
the figure as a PNG. Figures drawn by this module itself (not by ArviZ) are
created with :class:`matplotlib.figure.Figure` directly, outside pyplot's
global figure registry, unless an existing ``ax`` is given.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

__all__ = ["plot_trace", "plot_rank", "plot_reliability", "plot_objective"]

PathLike = str | os.PathLike[str]


def _arviz() -> Any:
    """Import ArviZ lazily, without its import-time notice about version 1.0."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="ArviZ is undergoing", category=FutureWarning)
        import arviz

    return arviz


@contextmanager
def _quiet_arviz() -> Iterator[None]:
    """Silence deprecation notices that ArviZ's plotting code triggers in Matplotlib."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Passing a dict or None as alias_mapping", category=DeprecationWarning
        )
        yield


def _save(fig: Figure, path: PathLike | None) -> Figure:
    """Save ``fig`` to ``path`` (format from its suffix) atomically, if a path is given."""
    if path is not None:
        from .io import atomic_path

        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix[1:] or "png", dpi=100, bbox_inches="tight")
    return fig


def _root_figure(ax: Axes) -> Figure:
    """The top-level figure holding ``ax`` (also when ``ax`` sits in a subfigure)."""
    fig = ax.figure
    while not isinstance(fig, Figure):  # a SubFigure: walk up to the root figure
        fig = fig.figure
    return fig


def _figure_of(axes: Any) -> Figure:
    """The figure holding an Axes or an array of Axes returned by ArviZ."""
    return _root_figure(np.ravel(np.asarray(axes, dtype=object))[0])


def plot_trace(
    idata: Any,
    var_names: Sequence[str] | str | None = None,
    path: PathLike | None = None,
    **kwargs: Any,
) -> Figure:
    """Trace plot (marginal densities and sampled values per chain) via :func:`arviz.plot_trace`.

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior draws (a ``posterior`` group with ``chain`` and ``draw``
        dimensions).
    var_names : str or sequence of str, optional
        Variables to plot; all by default.
    path : str or os.PathLike, optional
        If given, save the figure there as a PNG.
    **kwargs
        Passed on to :func:`arviz.plot_trace`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the trace plot.
    """
    az = _arviz()
    with _quiet_arviz():
        kwargs.setdefault("backend_kwargs", {"layout": "constrained"})
        axes = az.plot_trace(
            idata, var_names=var_names, backend="matplotlib", show=False, **kwargs
        )
    return _save(_figure_of(axes), path)


def plot_rank(
    idata: Any,
    var_names: Sequence[str] | str | None = None,
    path: PathLike | None = None,
    **kwargs: Any,
) -> Figure:
    """Rank plot (histograms of the ranks of each chain's draws) via :func:`arviz.plot_rank`.

    Uniform rank histograms indicate well-mixed chains.

    Parameters
    ----------
    idata : arviz.InferenceData
        Posterior draws with at least two chains.
    var_names : str or sequence of str, optional
        Variables to plot; all by default.
    path : str or os.PathLike, optional
        If given, save the figure there as a PNG.
    **kwargs
        Passed on to :func:`arviz.plot_rank`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the rank plot.
    """
    az = _arviz()
    with _quiet_arviz():
        axes = az.plot_rank(
            idata, var_names=var_names, backend="matplotlib", show=False, **kwargs
        )
    return _save(_figure_of(axes), path)


def _calibration_bins(
    y_pos: np.ndarray, proba: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin mean predicted probability, fraction of positives and count.

    Equal-width bins on ``[0, 1]`` with the same assignment as
    :func:`sklearn.calibration.calibration_curve` (``strategy="uniform"``);
    empty bins are dropped.
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    ids = np.searchsorted(edges[1:-1], proba)
    count = np.bincount(ids, minlength=n_bins)
    sum_p = np.bincount(ids, weights=proba, minlength=n_bins)
    sum_y = np.bincount(ids, weights=y_pos.astype(float), minlength=n_bins)
    keep = count > 0
    return sum_p[keep] / count[keep], sum_y[keep] / count[keep], count[keep]


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
) -> Figure:
    """Reliability diagram with a histogram of the predicted probabilities below it.

    The calibration curve (fraction of positives against mean predicted
    probability in ``n_bins`` equal-width bins, from
    :func:`sklearn.calibration.calibration_curve`) is drawn against the
    diagonal of perfect calibration. The title reports the expected
    calibration error over the same bins,

    ``ECE = sum_b (n_b / N) |frac_pos_b - mean_proba_b|``.

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
    from sklearn.calibration import calibration_curve

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

    y_pos = y == pos_label
    frac_pos, mean_pred = calibration_curve(
        y_pos.astype(int), proba, n_bins=n_bins, strategy="uniform", pos_label=1
    )
    _, _, counts = _calibration_bins(y_pos, proba, n_bins)
    ece = float(np.sum(counts / y.size * np.abs(frac_pos - mean_pred)))

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
    ax.set_title(f"Reliability diagram (ECE = {ece:.3f})")
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
) -> Figure:
    """Objective (e.g. ELBO or negative log posterior) against iteration.

    Parameters
    ----------
    trace : ArrayLike
        Values per iteration, shape ``(T,)``; a ``(T, R)`` array draws one
        line per column (e.g. per restart or chain). Non-finite values show
        as gaps.
    path : str or os.PathLike, optional
        If given, save the figure there as a PNG.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure is created when omitted.
    label : str, default "objective"
        Name of the quantity, used for the y axis and the legend.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the curve.

    Raises
    ------
    ValueError
        If ``trace`` is empty or has more than two dimensions.
    """
    values = np.asarray(trace, dtype=float)
    if values.ndim == 0 or values.ndim > 2 or values.shape[0] == 0:
        raise ValueError(f"trace must have shape (T,) or (T, R) with T > 0, got {values.shape}")
    if ax is None:
        fig = Figure(figsize=(6.0, 4.0))
        ax = fig.add_subplot()
    else:
        fig = _root_figure(ax)
    iterations = np.arange(values.shape[0])
    if values.ndim == 1:
        ax.plot(iterations, values, label=label)
    else:
        for r in range(values.shape[1]):
            ax.plot(iterations, values[:, r], label=f"{label} [{r}]")
    ax.set_xlabel("iteration")
    ax.set_ylabel(label)
    ax.legend(loc="best")
    return _save(fig, path)
