"""Tests for bayes_maxmargin.plots (rendered headless with the Agg backend)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bayes_maxmargin import plots  # noqa: E402

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="ArviZ is undergoing", category=FutureWarning)
    import arviz as az  # noqa: E402

MIN_BYTES = 5_000


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def idata() -> Any:
    rng = np.random.default_rng(0)
    return az.from_dict(posterior={"beta": rng.normal(size=(2, 50, 3))})


def assert_png(path: Path) -> None:
    assert path.is_file()
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > MIN_BYTES


def test_plot_trace(idata: Any, tmp_path: Path) -> None:
    path = tmp_path / "trace.png"
    fig = plots.plot_trace(idata, var_names=["beta"], path=path)
    assert isinstance(fig, Figure)
    assert len(fig.axes) >= 2  # density and trace panels
    assert_png(path)


def test_plot_rank(idata: Any, tmp_path: Path) -> None:
    path = tmp_path / "rank.png"
    fig = plots.plot_rank(idata, path=path)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # one panel per coefficient
    assert_png(path)


def test_plot_reliability(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    proba = rng.uniform(size=400)
    y = np.where(rng.uniform(size=400) < proba, 1, -1)  # calibrated by construction
    path = tmp_path / "reliability.png"
    fig = plots.plot_reliability(y, proba, pos_label=1, n_bins=10, path=path)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # curve and histogram
    title = fig.axes[0].get_title()
    assert "ECE" in title
    ece = float(title.split("ECE = ")[1].rstrip(")"))
    assert 0.0 <= ece < 0.1
    assert_png(path)


def test_plot_reliability_ece_value_and_string_labels() -> None:
    # all predictions 0.8 but only half positive: one bin, ECE = |0.5 - 0.8| = 0.3
    y = np.array(["yes", "no"] * 50)
    fig = plots.plot_reliability(y, np.full(100, 0.8), pos_label="yes", n_bins=5)
    assert "ECE = 0.300" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="probabilities"):
        plots.plot_reliability(y, np.full(100, 1.5), pos_label="yes")


def test_plot_reliability_on_given_axes(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    rng = np.random.default_rng(2)
    proba = rng.uniform(size=200)
    y = (rng.uniform(size=200) < proba).astype(int)
    path = tmp_path / "reliability_ax.png"
    out = plots.plot_reliability(y, proba, pos_label=1, ax=ax, path=path)
    assert out is fig
    assert_png(path)


def test_plot_objective(tmp_path: Path) -> None:
    elbo = -100.0 * np.exp(-np.arange(200) / 30.0) - 5.0
    path = tmp_path / "objective.png"
    fig = plots.plot_objective(elbo, path=path, label="ELBO")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "ELBO"
    np.testing.assert_allclose(ax.lines[0].get_ydata(), elbo)
    assert_png(path)
    # several runs as columns, drawn on a given axes
    fig2, ax2 = plt.subplots()
    out = plots.plot_objective(np.stack([elbo, elbo + 1.0], axis=1), ax=ax2)
    assert out is fig2 and len(ax2.lines) == 2
    with pytest.raises(ValueError, match="trace"):
        plots.plot_objective(np.zeros((0,)))
