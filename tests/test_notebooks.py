"""The notebooks run from top to bottom with small settings (``BMM_NOTEBOOK_QUICK=1``), and what they
show holds.

Every code cell is executed in order in one namespace (no Jupyter needed), with the Agg backend, in a
temporary working directory; a per-notebook check then looks at the namespace. A notebook added to
``notebooks/`` needs an entry in ``CHECKS`` (and a line in ``notebooks/README.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _load(name: str) -> dict[str, Any]:
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    assert nb.get("nbformat") == 4, f"{name} is not an nbformat 4 notebook"
    return nb


def _source(cell: dict[str, Any]) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def execute_notebook(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """Run the code cells of ``notebooks/<name>`` in order in one namespace and return it."""
    import matplotlib.pyplot as plt

    nb = _load(name)
    monkeypatch.setenv("BMM_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    matplotlib.use("Agg")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "code":
                exec(compile(_source(cell), f"{name}, cell {i}", "exec"), namespace)
    finally:
        plt.close("all")
    return namespace


# ---------------------------------------------------------------------------- per-notebook checks
def check_henao2014_gp_bsvm(ns: dict[str, Any]) -> None:
    assert ns["QUICK"] and ns["N_TRAIN"] <= 100
    # ECM with ML-II: monotone within rounds, learns a sensible kernel, separates the moons
    assert ns["objective_monotone_in_rounds"]
    assert len(ns["ecm"].log_z_) == ns["ECM_ITER"] // ns["MLII_EVERY"]
    assert 0.1 < ns["ecm"].kernel_params_["lengthscale"] < 10.0
    assert ns["ecm_accuracy"] > 0.8
    # eq. (13): 2 gamma y_n inside the margin, 0 beyond; eq. (12) from the support vectors alone
    assert ns["eq13_holds"]
    assert ns["inside"].sum() >= 3 and ns["outside"].sum() >= 3
    assert ns["eq12_error"] < 1e-6 and ns["sv_only_error"] < 1e-3
    svm = ns["svm"]
    assert 0 < svm.support_.size < ns["N_TRAIN"]
    np.testing.assert_array_equal(svm.support_vectors_, ns["X_train"][svm.support_])
    # Gibbs: the expected draws, a summary with R-hat and ESS, probabilities close to ECM's
    idata = ns["idata"]
    assert idata.posterior.sizes["chain"] == ns["NUM_CHAINS"] >= 2
    assert idata.posterior.sizes["draw"] == ns["NUM_SAMPLES"]
    assert set(idata.posterior.data_vars) == {"f", "gamma"}
    summary = ns["summary"]
    assert len(summary) == 4 and {"r_hat", "ess_bulk", "ess_tail"} <= set(summary.columns)
    assert np.all(np.isfinite(summary["r_hat"]))
    assert ns["gibbs_accuracy"] > 0.8
    assert np.mean(np.abs(ns["p_gibbs"] - ns["p_ecm"])) < 0.2
    # the gamma0 effect: gamma mixes far better with a proper prior on lambda than with the hinge
    table = ns["gamma0_table"]
    assert tuple(table.index) == tuple(ns["GAMMA0_GRID"])
    assert np.all(np.isfinite(table["ESS bulk"]))
    assert table.loc[0.0, "ESS bulk"] < table.loc[1.0, "ESS bulk"]
    # calibration: probabilities and scores on the held-out set
    for name, s in ns["scores"].items():
        assert s["error"] < 0.2, name
        assert 0.0 < s["Brier"] < 0.2, name


def check_luts2014_vb(ns: dict[str, Any]) -> None:
    assert ns["QUICK"] and ns["SIM_REPS"] <= 2
    # simulation: BER per method, better than chance on logistic data, every method timed
    table = ns["sim_table"]
    assert list(table.index) == ["SVM", "VB", "MCMC"]
    assert np.all((table["BER"] > 0) & (table["BER"] < 0.4))
    assert np.all(table["time_s"] > 0)
    # VB against MCMC: means within a posterior sd, VB narrower (mean field) but not degenerate
    assert ns["z_means"].max() < 1.0
    assert 0.3 < ns["sd_ratio"].min() and ns["sd_ratio"].max() < 1.3
    # spam (the built-in breast-cancer data without BMM_DATA_DIR): one inclusion probability per
    # predictor from each method, both selective
    p_vb, p_mc, p = ns["p_vb"], ns["p_mc"], ns["X_spam"].shape[1]
    assert p == (57 if ns["spam"].name == "spambase" else 30)
    assert p_vb.shape == p_mc.shape == (p,)
    assert np.all((p_vb >= 0) & (p_vb <= 1)) and np.all((p_mc >= 0) & (p_mc <= 1))
    assert 0 < np.sum(p_vb > 0.5) < p and 0 < np.sum(p_mc > 0.5) < p
    assert 0 <= ns["agreement"] <= ns["strong"].sum()
    # the bound: monotone for both iterations, the same value reached
    assert all(ns["monotone"].values())
    b = [lb[-1] for lb in ns["bounds"].values()]
    assert abs(b[0] - b[1]) < 1e-6 * abs(b[1])


def check_wenzel2017_svi(ns: dict[str, Any]) -> None:
    assert ns["QUICK"] and ns["N_TRAIN"] <= 200 and ns["STEPS"] <= 300
    # S-BSVM: one ELBO estimate per MLII_EVERY steps, finite, a fit that separates the moons
    sbsvm = ns["sbsvm"]
    assert sbsvm.n_iter_ == ns["STEPS"] and len(sbsvm.elbo_) == ns["STEPS"] // ns["MLII_EVERY"]
    assert np.all(np.isfinite(sbsvm.elbo_)) and np.all(np.diff(sbsvm.elbo_steps_) > 0)
    assert np.mean(sbsvm.elbo_[-5:]) > np.mean(sbsvm.elbo_[:5])
    assert ns["svi_error"] < 0.2
    assert sbsvm.inducing_points_.shape == (ns["M"], 2)
    # B-BSVM: coordinate ascent never lowers the ELBO
    assert ns["vi_monotone"] and len(ns["bbsvm"].elbo_) >= 2
    # uncertainty: probabilities in (0, 1), positive variances, larger far from the inducing points
    assert np.all((ns["proba_grid"] > 0) & (ns["proba_grid"] < 1)) and np.all(ns["var_grid"] > 0)
    assert ns["var_grid"][ns["far"]].mean() > ns["var_grid"][ns["near"]].mean()
    # ML-II moves the length-scale away from its poor start, to an error close to the grid's best
    assert ns["tuned_lengthscale"] < ns["LENGTHSCALE0"]
    assert ns["tuned_error"] <= min(ns["grid_errors"]) + 0.05
    assert len(ns["grid_errors"]) == len(ns["LENGTHSCALE_GRID"])
    # inducing points: a table of errors for both placements and every M
    table = ns["inducing_table"]
    assert tuple(table.index) == tuple(ns["M_GRID"]) and set(table.columns) == {"kmeans", "random"}
    assert np.all((table.to_numpy() >= 0) & (table.to_numpy() < 0.5))


def check_chen2015_projection(ns: dict[str, Any]) -> None:
    assert ns["QUICK"] and ns["N_PER_CLUSTER"] <= 50 and ns["ITERS"]["num_samples"] <= 100
    # example 1: MMLDP separates the overlapping pairs of Gaussians about as well as LDA
    assert ns["acc_mmldp"] > 0.8 and ns["acc_mmldp"] >= ns["acc_lda"] - 0.05
    # example 2: ssKMMDP beats LDA on the non-separable nine clusters
    acc = ns["acc2"]
    assert acc["ssKMMDP"] > acc["LDA"] + 0.1
    # usage matrix and the posterior of the number of basis vectors
    usage, n_used = ns["usage"], ns["n_used"]
    assert usage.shape == (ns["N_CANDIDATES"], ns["N_COMPONENTS"]) and np.all((usage >= 0) & (usage <= 1))
    assert np.all((n_used >= 0) & (n_used <= ns["N_CANDIDATES"])) and n_used.mean() < ns["N_CANDIDATES"]
    assert ns["Z"].shape == (len(ns["X2_te"]), ns["N_COMPONENTS"])


def check_henao2014_factor_models(ns: dict[str, Any]) -> None:
    assert ns["QUICK"] and ns["N_TRAIN"] <= 150
    assert ns["ndfm"].loadings_.shape == (ns["X"].shape[1], ns["K"])
    assert ns["scores"].shape == (len(ns["yte"]), ns["K"])
    assert ns["bound_monotone"]
    assert all(e < 0.25 for e in ns["errors"].values()), ns["errors"]
    assert ns["ndfm"].idata_.posterior.sizes["draw"] == ns["SAMPLES"]
    assert list(ns["lists"].columns) == ["factor", "feature", "loading"]


def check_quickstart(ns: dict[str, Any]) -> None:
    assert ns["QUICK"] and ns["NUM_SAMPLES"] <= 200 and ns["N_MOONS"] <= 60
    # the linear model: accurate, probabilities in (0, 1) summing to one, a summary with R-hat and ESS
    assert ns["accuracy"] > 0.9
    proba = ns["proba"]
    assert proba.shape == (len(ns["y_te"]), 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.all((proba > 0) & (proba < 1))
    summary = ns["summary"]
    assert len(summary) == 1 + ns["X_tr"].shape[1] and {"r_hat", "ess_bulk"} <= set(summary.columns)
    assert np.all(np.isfinite(summary["r_hat"])) and summary["r_hat"].max() < 1.1
    # the GP model: separates the moons, both maps drawn with the boundary and its support vectors
    gp = ns["gp"]
    assert ns["gp_accuracy"] > 0.8 and 0 < gp.support_.size < ns["N_MOONS"]
    for ax in ns["axes"]:
        rings = [c for c in ax.collections if str(c.get_label()).startswith("support vectors")]
        assert len(rings) == 1 and len(rings[0].get_offsets()) == gp.support_.size
        assert any(getattr(c, "levels", None) is not None and np.allclose(c.levels, [0.5]) for c in ax.collections)
    # save / load without pickle: the same predictions
    assert ns["same_predictions"]


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "chen2015_projection.ipynb": check_chen2015_projection,
    "henao2014_factor_models.ipynb": check_henao2014_factor_models,
    "henao2014_gp_bsvm.ipynb": check_henao2014_gp_bsvm,
    "luts2014_vb.ipynb": check_luts2014_vb,
    "quickstart.ipynb": check_quickstart,
    "wenzel2017_svi.ipynb": check_wenzel2017_svi,
}


def test_every_notebook_is_checked_and_listed():
    found = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    assert found == set(CHECKS), "every notebook in notebooks/ needs an entry in CHECKS"
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    for name in CHECKS:
        assert name in readme, f"{name} is not listed in notebooks/README.md"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_notebook_is_clean(name):
    """Valid nbformat 4 structure, with one settings cell reading the quick-mode switch, stored either
    without outputs or as one complete run from top to bottom (the documentation site shows the stored
    outputs): every code cell executed once in order, no error, no progress-bar stream, no execution
    timings or widget state."""
    nb = _load(name)
    assert nb["cells"] and all(c["cell_type"] in ("markdown", "code", "raw") for c in nb["cells"])
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert sum("BMM_NOTEBOOK_QUICK" in _source(c) for c in code) == 1
    assert "widgets" not in nb["metadata"], f"{name} stores widget state"
    counts = [c.get("execution_count") for c in code]
    if all(n is None for n in counts):
        assert all(c.get("outputs") == [] for c in code), f"{name} has outputs without execution counts"
        return
    assert counts == list(range(1, len(code) + 1)), f"{name} was not run once from top to bottom: {counts}"
    for i, cell in enumerate(code):
        assert "execution" not in cell.get("metadata", {}), f"{name}, code cell {i}: execution timings stored"
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"{name}, code cell {i} stores an error"
            text = out.get("text", "")
            text = text if isinstance(text, str) else "".join(text)
            assert not (out["output_type"] == "stream" and "\r" in text), f"{name}, code cell {i}: progress bar"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_notebook_runs(name, monkeypatch, tmp_path):
    CHECKS[name](execute_notebook(name, monkeypatch, tmp_path))
