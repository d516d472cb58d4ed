"""The figures of the paper reproductions, drawn from their per-fold records.

Every experiment turns its rows into per-fold records (one dict per dataset x method x fold,
split or replicate; :func:`bayes_maxmargin.experiments.fold_records`) and draws its figures from
them with the helpers here: :func:`error_bars` (ours, mean ± sd over folds, beside the paper's
mean ± sd), :func:`box_plots` (the distribution over folds, as the box plots of Luts & Ormerod
2014, Figures 1, 2 and 4), :func:`paired_bars` (one value per item for two methods, e.g.
inclusion probabilities) and :func:`trace_panels` (traces over iterations, one panel per setting).
Figures are :class:`matplotlib.figure.Figure` objects made without
pyplot (headless, no global figure registry); :func:`save_figure` writes one atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["box_plots", "error_bars", "paired_bars", "save_figure", "trace_panels"]


def _figure(n_panels: int, width: float = 4.2, height: float = 3.4):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(width * n_panels, 4.5), height), layout="constrained")
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    return fig, list(axes)


def _finite(values: Sequence[Any]) -> np.ndarray:
    out = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return out[np.isfinite(out)]


def _wrap(text: str, width: int = 55) -> str:
    import textwrap

    return textwrap.fill(text, width)


def _unique(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def error_bars(
    records: Sequence[Mapping[str, Any]],
    *,
    value: str = "error",
    paper: str | None = "paper_error",
    paper_sd: str | None = None,
    ylabel: str = "error",
    title: str = "",
    log: bool = False,
):
    """Per dataset (x) and method (series): ours as mean ± sd over the folds (filled circles), the
    paper's number beside it (open diamonds, ± its sd when ``paper_sd`` names a field).

    Parameters
    ----------
    records : sequence of mapping
        Per-fold records with ``dataset``, ``method`` and the fields ``value``, ``paper``,
        ``paper_sd`` (None / NaN where not measured or not reported).
    value, paper, paper_sd : str
        Field names of our value and the paper's mean and sd (the paper's fields are read from the
        first record of each (dataset, method)).
    ylabel, title : str
        Axis label and title.
    log : bool
        Logarithmic y axis (times).

    Returns
    -------
    matplotlib.figure.Figure
    """
    datasets = _unique(r["dataset"] for r in records)
    methods = _unique(r["method"] for r in records)
    fig, (ax,) = _figure(1, width=max(4.5, 1.1 * len(datasets) * max(1, len(methods)) ** 0.5 + 2.0))
    width = 0.8 / max(1, len(methods))
    colours = [f"C{i % 10}" for i in range(len(methods))]
    for j, method in enumerate(methods):
        offset = (j - (len(methods) - 1) / 2) * width
        for i, dataset in enumerate(datasets):
            mine = [r for r in records if r["dataset"] == dataset and r["method"] == method]
            if not mine:
                continue
            ours = _finite([r.get(value) for r in mine])
            x = i + offset
            if ours.size:
                ax.errorbar(x - width * 0.15, ours.mean(), yerr=ours.std() if ours.size > 1 else None, fmt="o",
                            color=colours[j], capsize=3, label=str(method) if i == 0 else None)
            p = mine[0].get(paper) if paper else None
            if p is not None and np.isfinite(float(p)):
                s = mine[0].get(paper_sd) if paper_sd else None
                ax.errorbar(x + width * 0.15, float(p), yerr=None if s is None else float(s), fmt="D",
                            mfc="none", color=colours[j], capsize=3)
    ax.set_xticks(range(len(datasets)))
    ax.set_xticklabels([str(d) for d in datasets], rotation=30 if len(datasets) > 3 else 0, ha="right"
                       if len(datasets) > 3 else "center")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.set_title(_wrap(title) + ("\n" if title else "") + "ours: mean ± sd over folds (●), paper (◇)", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    if methods:
        ax.legend(fontsize=7, ncol=min(4, len(methods)))
    return fig


def box_plots(
    records: Sequence[Mapping[str, Any]],
    *,
    value: str = "error",
    ylabel: str = "balanced error rate",
    title: str = "",
):
    """One panel per dataset (or setting): a box plot of ``value`` over the folds per method.

    Returns
    -------
    matplotlib.figure.Figure
    """
    datasets = _unique(r["dataset"] for r in records)
    fig, axes = _figure(max(1, len(datasets)), width=3.2)
    for ax, dataset in zip(axes, datasets):
        mine = [r for r in records if r["dataset"] == dataset]
        methods = _unique(r["method"] for r in mine)
        data = [_finite([r.get(value) for r in mine if r["method"] == m]) for m in methods]
        keep = [(m, d) for m, d in zip(methods, data) if d.size]
        if keep:
            ax.boxplot([d for _, d in keep], tick_labels=[str(m) for m, _ in keep])
        ax.set_title(str(dataset), fontsize=9)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(_wrap(title, 30 * len(datasets) + 20), fontsize=10)
    return fig


def paired_bars(
    labels: Sequence[str],
    series: Mapping[str, Sequence[float] | None],
    *,
    thresholds: Mapping[str, float] | None = None,
    ylabel: str = "",
    title: str = "",
):
    """Side-by-side bars of each series per label (series that are None are skipped), with
    horizontal lines at ``thresholds`` (label -> y).

    Returns
    -------
    matplotlib.figure.Figure
    """
    present = {k: np.asarray(v, dtype=float) for k, v in series.items() if v is not None}
    fig, (ax,) = _figure(1, width=max(5.0, 0.28 * len(labels) * max(1, len(present)) + 1.5))
    width = 0.8 / max(1, len(present))
    x = np.arange(len(labels))
    for j, (name, values) in enumerate(present.items()):
        ax.bar(x + (j - (len(present) - 1) / 2) * width, values, width, label=name)
    for j, (name, y) in enumerate((thresholds or {}).items()):
        ax.axhline(y, ls="--", lw=0.8, color=f"C{(j + len(present)) % 10}", label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(list(labels), rotation=90, fontsize=max(5, min(8, int(400 / max(1, len(labels))))))
    ax.set_ylabel(ylabel)
    ax.set_title(_wrap(title, 90), fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    return fig


def trace_panels(
    panels: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    xlabel: str = "iteration",
    ylabel: str = "",
    title: str = "",
    log: bool = False,
):
    """One panel per key of ``panels`` (its title), one line per series (label -> values over
    iterations 1, 2, ...), the panels on a shared y-axis (log scale with ``log``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = _figure(len(panels))
    for ax, (name, series) in zip(axes, panels.items()):
        for j, (label, values) in enumerate(series.items()):
            values = np.asarray(values, dtype=float)
            ax.plot(np.arange(1, values.size + 1), values, lw=0.8, color=f"C{j % 10}", label=label)
        ax.set_title(_wrap(name, 50), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_yscale("log" if log else "linear")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel(ylabel)
    lows, highs = zip(*(ax.get_ylim() for ax in axes))
    for ax in axes:
        ax.set_ylim(min(lows), max(highs))
    if title:
        fig.suptitle(_wrap(title, 90), fontsize=10)
    return fig


def save_figure(fig, path: str | os.PathLike[str], dpi: int = 100) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically (:func:`bayes_maxmargin.core.io.atomic_path`)."""
    from bayes_maxmargin.core.io import atomic_path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return path
