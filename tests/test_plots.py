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

from bayes_maxmargin import plots

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
    return az.from_dict({"posterior": {"beta": rng.normal(size=(2, 50, 3))}})


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


# ------------------------------------------------------------------ plots of fitted estimators
@pytest.fixture(scope="module")
def moons() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_moons

    X, y = make_moons(n_samples=40, noise=0.2, random_state=0)
    return X, np.where(y == 1, 1, -1)


@pytest.fixture(scope="module")
def gp_ecm(moons: tuple[np.ndarray, np.ndarray]) -> Any:
    from bayes_maxmargin import GPBSVM

    X, y = moons
    # calibrate=False here and below: no plot reads the learnt link beyond predict_proba, and its
    # leave-one-out pass would compile for these fits alone (the link: test_calibration.py)
    return GPBSVM(inference="ecm", kernel_params={"lengthscale": 1.0}, learn_kernel=False, max_iter=30,
                  calibrate=False, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def gp_svi(moons: tuple[np.ndarray, np.ndarray]) -> Any:
    from bayes_maxmargin import GPBSVM

    X, y = moons
    # the kernel held: the plots read the fit's inducing points, variance and ELBO trace, not ML-II's steps
    return GPBSVM(inference="svi", num_inducing=5, batch_size=10, max_iter=40, mlii_every=10,
                  kernel_params={"lengthscale": 1.0}, learn_kernel=False, calibrate=False, random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def lin_gibbs(moons: tuple[np.ndarray, np.ndarray]) -> Any:
    from bayes_maxmargin import LinearBSVM

    X, y = moons
    return LinearBSVM(num_samples=40, num_warmup=20, num_chains=2, random_state=0).fit(X, y)


def _collection_by_label(ax: Any, prefix: str) -> Any:
    found = [c for c in ax.collections if str(c.get_label()).startswith(prefix)]
    assert len(found) == 1, [c.get_label() for c in ax.collections]
    return found[0]


def test_trace_and_rank_from_a_fitted_estimator(lin_gibbs: Any, tmp_path: Path) -> None:
    from bayes_maxmargin import LinearBSVM

    fig = plots.plot_trace(lin_gibbs, var_names=["intercept"], path=tmp_path / "t.png")
    assert len(fig.axes) == 2 and len(fig.axes[1].lines) == 2  # one trace line per chain
    assert_png(tmp_path / "t.png")
    fig = plots.plot_rank(lin_gibbs, var_names=["beta"])
    assert len(fig.axes) == 2  # one panel per coefficient
    with pytest.raises(ValueError, match="not fitted"):
        plots.plot_trace(LinearBSVM())
    with pytest.raises(ValueError, match="posterior"):
        plots.plot_rank(np.zeros(3))
    one_chain = az.from_dict({"posterior": {"b": np.zeros((1, 10))}})
    with pytest.raises(ValueError, match="two chains"):
        plots.plot_rank(one_chain)


def test_decision_boundary_gp_support_vectors(gp_ecm: Any, moons: Any, tmp_path: Path) -> None:
    X, y = moons
    path = tmp_path / "boundary.png"
    fig = plots.plot_decision_boundary(gp_ecm, X, y, resolution=30, path=path)
    ax = fig.axes[0]
    assert len(fig.axes) == 2  # the map and its colour bar
    # the shading and the boundary contour (one level at probability 1/2)
    contours = [c for c in ax.collections if hasattr(c, "levels")]
    assert any(np.allclose(c.levels, [0.5]) for c in contours)
    assert any(len(c.levels) == 11 for c in contours)
    assert fig.axes[1].get_ylabel() == "P(class 1)"
    # every class drawn, and exactly the estimator's support vectors ringed
    assert len(_collection_by_label(ax, "class -1").get_offsets()) == np.sum(y == -1)
    sv = _collection_by_label(ax, "support vectors").get_offsets()
    assert 0 < len(sv) == len(gp_ecm.support_) < len(X)
    np.testing.assert_allclose(sv, gp_ecm.support_vectors_)
    assert_png(path)


def test_decision_boundary_variance_and_inducing_points(gp_svi: Any, moons: Any) -> None:
    X, y = moons
    fig, ax = plt.subplots()
    out = plots.plot_decision_boundary(gp_svi, X, shade="variance", resolution=20, support_vectors=False, ax=ax)
    assert out is fig
    assert fig.axes[-1].get_ylabel() == "predictive variance of f"
    Z = _collection_by_label(ax, "inducing points").get_offsets()
    np.testing.assert_allclose(Z, gp_svi.inducing_points_)
    assert not [c for c in ax.collections if str(c.get_label()).startswith("support")]
    # the latent variance shown is predict_latent's on the grid: its colour range covers it
    var = gp_svi.predict_latent(X)[1]
    filled = [c for c in ax.collections if hasattr(c, "levels") and len(c.levels) > 1][0]
    assert filled.levels[0] <= var.min() + 1e-9 or filled.levels[-1] >= var.max() - 1e-9
    # boundary alone: no colour bar
    fig3 = plots.plot_decision_boundary(gp_svi, X, y, shade=None, resolution=10)
    assert len(fig3.axes) == 1


def test_decision_boundary_rejects_bad_input(gp_ecm: Any, moons: Any) -> None:
    from bayes_maxmargin import GPBSVM, LinearBSVM

    X, y = moons
    with pytest.raises(ValueError, match="not fitted"):
        plots.plot_decision_boundary(GPBSVM(), X)
    with pytest.raises(ValueError, match=r"shape \(n_samples, 2\)"):
        plots.plot_decision_boundary(gp_ecm, np.zeros((5, 2, 2)))
    with pytest.raises(ValueError, match=r"shape \(n_samples, 2\)"):
        plots.plot_decision_boundary(gp_ecm, np.zeros((5, 3)))
    with pytest.raises(ValueError, match="shade"):
        plots.plot_decision_boundary(gp_ecm, X, shade="entropy")
    with pytest.raises(ValueError, match="y must have shape"):
        plots.plot_decision_boundary(gp_ecm, X, y[:-1], resolution=5)
    with pytest.raises(ValueError, match="not fitted"):
        plots.plot_decision_boundary(LinearBSVM(), X)


def test_inducing_points(gp_svi: Any, gp_ecm: Any, moons: Any, tmp_path: Path) -> None:
    X, y = moons
    path = tmp_path / "inducing.png"
    fig = plots.plot_inducing_points(gp_svi, X, y, path=path)
    ax = fig.axes[0]
    np.testing.assert_allclose(_collection_by_label(ax, "inducing points").get_offsets(), gp_svi.inducing_points_)
    assert len(_collection_by_label(ax, "class 1").get_offsets()) == np.sum(y == 1)
    assert_png(path)
    with pytest.raises(ValueError, match="inducing_points_"):
        plots.plot_inducing_points(gp_ecm)  # full-GP ECM has none
    with pytest.raises(ValueError, match="features"):
        plots.plot_inducing_points(gp_svi, features=(0, 2))


def test_convergence_curves(gp_ecm: Any, gp_svi: Any, lin_gibbs: Any) -> None:
    from bayes_maxmargin import LinearBSVM

    fig = plots.plot_convergence(gp_ecm)  # ECM: the log posterior per iteration
    line = fig.axes[0].lines[0]
    assert fig.axes[0].get_ylabel() == "log posterior"
    np.testing.assert_allclose(line.get_ydata(), gp_ecm.objective_)
    assert np.all(np.diff(gp_ecm.objective_) >= -1e-8)  # the curve drawn never decreases (kernel fixed)
    svi = gp_svi
    fig = plots.plot_convergence(svi)  # minibatch ELBO estimates at their steps
    line = fig.axes[0].lines[0]
    assert fig.axes[0].get_ylabel() == "ELBO" and fig.axes[0].get_xlabel() == "step"
    np.testing.assert_allclose(line.get_xdata(), svi.elbo_steps_)
    np.testing.assert_allclose(line.get_ydata(), svi.elbo_)
    with pytest.raises(ValueError, match="no objective trace"):
        plots.plot_convergence(lin_gibbs)
    with pytest.raises(ValueError, match="not fitted"):
        plots.plot_convergence(LinearBSVM(inference="vb"))
    with pytest.raises(ValueError, match="steps"):
        plots.plot_objective(np.zeros(5), steps=np.arange(4))


def test_inclusion_probabilities(lin_gibbs: Any, tmp_path: Path) -> None:
    from bayes_maxmargin import LinearBSVM

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 6))
    y = np.where(X[:, 0] - 2.0 * X[:, 1] + 0.3 * rng.normal(size=60) > 0, 1, -1)
    vb = LinearBSVM(inference="vb", prior="laplace_zero", rho=0.1, random_state=0).fit(X, y)
    path = tmp_path / "incl.png"
    fig = plots.plot_inclusion_probabilities(vb, threshold=0.5, path=path)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, vb.inclusion_probabilities_)  # one bar per feature
    assert ax.get_title() == f"{np.sum(vb.inclusion_probabilities_ > 0.5)} above 0.5"
    assert vb.inclusion_probabilities_[0] > 0.5 and vb.inclusion_probabilities_[1] > 0.5
    assert_png(path)
    # plot_convergence shows the monotone VB lower bound
    line = plots.plot_convergence(vb).axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), vb.lower_bound_)
    # two sources side by side, with names
    names = [f"x{k}" for k in range(6)]
    fig = plots.plot_inclusion_probabilities({"VB": vb, "other": np.full(6, 0.2)}, feature_names=names)
    ax = fig.axes[0]
    assert len(ax.patches) == 12 and [t.get_text() for t in ax.get_xticklabels()] == names
    with pytest.raises(ValueError, match="inclusion_probabilities_"):
        plots.plot_inclusion_probabilities(lin_gibbs)  # Gaussian prior: no inclusion probabilities
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plots.plot_inclusion_probabilities(np.array([0.5, 1.2]))
    with pytest.raises(ValueError, match="different numbers"):
        plots.plot_inclusion_probabilities({"a": np.zeros(3), "b": np.zeros(4)})


def test_plot_trace_names_and_limits_the_coefficients(tmp_path: Path) -> None:
    """14 named coefficients: one row per drawn coefficient, titled with its name, only the 8 of
    the largest |posterior mean|, and the figure says which (14: every panel drawn costs time)."""
    rng = np.random.default_rng(3)
    names = [f"feat_{j}" for j in range(14)]
    large = (0, 2, 5, 7, 9, 10, 11, 13)
    means = np.zeros(14)
    means[list(large)] = 5.0 + np.arange(8)
    beta = means + rng.normal(size=(2, 40, 14))
    idata = az.from_dict({"posterior": {"beta": beta}}, coords={"feature": names}, dims={"beta": ["feature"]})
    fig = plots.plot_trace(idata, path=tmp_path / "trace.png")
    labels = [a.get_xlabel() for a in fig.axes if a.get_xlabel()]  # arviz-plots labels a row "beta\nfeat_2"
    shown = sorted({n for t in labels for n in names if t.endswith(n)})
    assert shown == sorted(names[j] for j in large)
    assert "8 of 14 features" in fig.get_suptitle()
    assert_png(tmp_path / "trace.png")
    fig = plots.plot_trace(idata, max_coords=None)  # all 14 (28 panels: within ArviZ's default limit of 40)
    assert len(fig.axes) == 2 * 14


def test_plot_trace_of_a_point_estimate_says_there_are_no_draws() -> None:
    point = az.from_dict({"posterior": {"beta": np.zeros((1, 1, 3))}})
    with pytest.raises(ValueError, match="no draws"):
        plots.plot_trace(point)


def test_reliability_title_is_the_metrics_ece() -> None:
    """One ECE: the diagram's title is metrics.expected_calibration_error (what bmm writes to
    metrics.json), for both confidence definitions."""
    from bayes_maxmargin.metrics import expected_calibration_error

    rng = np.random.default_rng(4)
    proba = rng.beta(2.0, 2.0, size=300)
    y = np.where(rng.uniform(size=300) < proba**0.7, 1, -1)  # miscalibrated
    for confidence in ("top_label", "positive"):
        title = plots.plot_reliability(y, proba, 1, confidence=confidence).axes[0].get_title()
        ece = expected_calibration_error(y, proba, 1, confidence=confidence)
        assert f"ECE = {ece:.3f}" in title
    assert expected_calibration_error(y, proba, 1) != pytest.approx(
        expected_calibration_error(y, proba, 1, confidence="positive"))
