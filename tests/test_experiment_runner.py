"""Every paper reproduction's smoke version (`bmm +experiment=NAME smoke=true`) through the real entry:
the configuration composed from the yaml files with Hydra's compose API, then
:func:`bayes_maxmargin.experiments.run`; its outputs exist and are well-formed, and its rows hold the
expected sizes, the paper's numbers and errors better than chance where the tiny settings allow
(``_check_<name>``). Also `bmm --multirun` for an experiment sweep and a model-job sweep.

Experiments on datasets of BMM_DATA_DIR are skipped without it; ``luts_simulation`` (simulated data)
always runs. The smoke runs share one process, so JAX's compilation caches carry over between them.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from bayes_maxmargin.experiments import EXPERIMENTS, FIGURES, FOLD_COLUMNS, SMOKE_BANNER, run

#: Experiments whose records carry no error (spam: inclusion probabilities; chen_table4: times).
NO_ERROR = {"luts_spam", "chen_table4"}
#: The paper-column header of each table.md.
PAPER_HEADER = {
    "henao_table1": "BSVM (paper)", "henao_table2": "FITC-BSVM (paper)", "henao_table3": "paper %",
    "luts_simulation": "SVM s (paper)", "luts_toenail": "SVM s (paper)", "luts_spam": "| ours | paper |",
    "luts_acath": "SVM s (paper)", "wenzel_table1": "S-BSVM (paper)", "chen_table3": "/ 83.7 (3.7)",
    "chen_table4": "/ 0.18", "wenzel_susy": "AUC (paper)", "wenzel_fig1": "time / S-BSVM (paper)",
    "wenzel_fig2": "fit s (paper)", "wenzel_fig3": "Paper (Sec. 5.5",
}
NEEDS_NO_DATA = {"luts_simulation", "wenzel_susy", "wenzel_fig1", "wenzel_fig2", "wenzel_fig3"}
#: Smoke runs of more than a few seconds (the shared path of the Wenzel experiments runs in the
#: default suite with wenzel_susy), run with -m extended.
EXTENDED_SMOKE = {"wenzel_fig1", "wenzel_fig2", "wenzel_fig3"}


# --------------------------------------------------------------------------- numbers of each smoke run
def _check_henao_table1(rows, table):
    (r,) = rows
    assert r["key"] == "crabs" and r["n"] == 200 and r["d"] == 7 and r["n_folds"] == 2
    for m in ("bsvm", "svm", "gpc"):
        assert r[f"{m}_error"] == pytest.approx(np.mean(r[f"{m}_fold_errors"]))
    assert r["svm_error"] <= 0.2 and r["gpc_error"] <= 0.2  # crabs is nearly separable once standardised
    assert r["paper_bsvm_error"] == pytest.approx(0.015) and r["preprocessing"] == "standardised per fold"
    assert "| Crabs | 200 | 7 |" in table and "Laplace" in table


def _check_henao_table2(rows, table):
    (r,) = rows
    assert (r["key"], r["n_train"], r["n_test"], r["num_inducing"], r["repetitions"]) == ("3vs5", 100, 100, 10, 2)
    assert len(r["errors"]) == 2 and r["fitc_bsvm_error_sd"] >= 0.0 and r["fitc_bsvm_error"] < 0.3
    assert r["paper_fitc_bsvm_error"] == pytest.approx(0.0349) and "| 3 vs 5 |" in table


def _check_henao_table3(rows, table):
    (r,) = rows
    assert (r["dataset"], r["variant"], len(r["errors"])) == ("p53_proxy", "VLDFM", 2)
    assert r["paper_error"] == pytest.approx(0.2231) and "(PROXY)" in table


def _check_luts_simulation(rows, table):
    (r,) = rows
    assert (r["key"], r["repetitions"], r["n_test"]) == ("n40_d3", 2, 100)
    for m in ("svm", "vb", "mcmc"):  # a 3-dimensional logistic problem: all better than chance
        assert len(r[f"{m}_bers"]) == 2 and r[f"{m}_ber"] < 0.45, (m, r[f"{m}_bers"])
        assert r[f"{m}_ber"] == pytest.approx(np.mean(r[f"{m}_bers"]))
    from bayes_maxmargin.experiments.luts2014 import QUICK_SVM

    grid = [c1 * f for c1 in QUICK_SVM["C_grid"] for f in QUICK_SVM["refine_factors"]]
    assert all(np.isclose(grid, c).any() for c in r["svm_C"]) and r["vb_converged"] == [True, True]
    assert "| 40 | 3 | 2 |" in table


def _check_luts_toenail(rows, table):
    (r,) = rows
    assert r["n_patients"] == 20 and r["fixed_effects"] == ["time", "treat", "time_x_treat"]
    assert r["vb_ber"] < 0.45  # the patients' random intercepts carry most of the signal
    assert r["mcmc_ber"] is None and r["paper_vb_time_s"] == pytest.approx(171.85) and "3668.70" in table


def _check_luts_spam(rows, table):
    (r,) = rows
    assert r["n"] == 100 and r["variables"] == ["make", "address", "all", "3d", "our"]
    for m in ("vb", "mcmc"):
        p = np.asarray(r[f"{m}_inclusion"])
        assert p.shape == (5,) and np.all((p >= 0.0) & (p <= 1.0))
    assert r["vb_selected"] == [v for v, q in zip(r["variables"], r["vb_inclusion"]) if q > 0.5]
    assert r["n_vb_agree"] == len(set(r["vb_selected"]) & set(r["mcmc_selected"]))
    assert r["paper_n_mcmc_selected"] == 24 and "| of those VB-selected" in table
    chains = np.asarray(r["mcmc_chain_inclusion"])  # smoke: 2 chains, pooled into mcmc_inclusion
    assert r["mcmc_chains"] == 2 and chains.shape == (2, 5)
    np.testing.assert_allclose(chains.mean(axis=0), r["mcmc_inclusion"], rtol=1e-12)
    assert len(r["vb_starts"]) == 2 and "VB from 2 random initial inclusion probabilities" in table
    for start in r["vb_starts"]:
        p = np.asarray(start["inclusion"])
        assert np.isfinite(start["lower_bound"]) and p.shape == (5,) and np.all((p >= 0.0) & (p <= 1.0))


def _check_luts_acath(rows, table):
    (r,) = rows
    assert r["n"] == 100 and r["n_test"] == 25 and r["n_train"] == 75 and r["n_splits"] == 2
    assert 0 < r["n_missing"] and r["n_train_complete"] == r["n_train"] - r["n_missing"]
    assert r["predictors"] == ["age", "sex", "log1p_cad_dur", "log_choleste"] and r["vb_ber"] < 0.5
    assert r["paper_mcmc_time_s"] == pytest.approx(1718.98) and "| acath |" in table


def _check_wenzel_table1(rows, table):
    (r,) = rows
    assert r["key"] == "heart" and r["n"] == 200 and r["folds"] == 2
    for m in ("sbsvm", "ecm", "gpc", "svm"):
        assert r[f"{m}_n_folds"] == 2 and 0.0 <= r[f"{m}_error"] < 0.35 and 0.0 <= r[f"{m}_brier"] < 0.25, m
        assert r[f"{m}_error"] == pytest.approx(np.mean(r[f"{m}_fold_errors"]))
    assert set(r["sbsvm_within_paper_sd"]) == {"error", "brier"}
    assert "| Heart | 200 | 13 | Error |" in table and ".160±.060" in table and "GPC / S-BSVM time" in table


def _check_wenzel_susy(rows, table):
    (r,) = rows
    assert (r["key"], r["n_train"], r["n_test"], r["num_inducing"], r["steps"]) == ("susy_synthetic", 1500, 500, 16, 30)
    # the data's Bayes error is 0.20 and a linear rule gets 0.26: 0.35 / AUC 0.7 are far from both chance
    # (error 0.5, AUC 0.5) and from the smoke run's 0.26 / 0.81 (sd of either on 500 test rows about 0.02)
    assert r["sbsvm_error"] < 0.35 and r["sbsvm_auc"] > 0.7 and r["sbsvm_brier"] < 0.25  # 0.25: P = 1/2 always
    fpr, tpr = np.asarray(r["roc"]["fpr"]), np.asarray(r["roc"]["tpr"])
    assert fpr[0] == tpr[0] == 0.0 and fpr[-1] == tpr[-1] == 1.0 and np.all(np.diff(fpr) >= 0)
    assert sum(r["calibration"]["counts"]) == 500
    assert (r["paper_auc"], r["paper_brier"]) == (0.84, 0.22) and "| susy_synthetic | 1500 | 500 | 16 |" in table


def _check_wenzel_fig1(rows, table):
    assert [(r["method"], r["budget"]) for r in rows] == [
        ("sbsvm", 20), ("sbsvm", 100), ("bbsvm", 1), ("bbsvm", 3), ("ecm", 1), ("ecm", 5), ("gpc", 0), ("gpc", 1),
        ("svm", 50), ("svm", -1)]
    assert all(r["dataset"] == "wdbc" and (r["n_train"], r["n_test"]) == (200, 200) for r in rows)
    # wdbc standardised is nearly separable (errors 0.03-0.07 in the smoke run; chance 0.37): 0.15 is
    # more than 3 sd of an error on 200 test rows above them
    assert all(r["error"] < 0.15 and 0.0 <= r["brier"] < 0.15 for r in rows)
    assert "| S-BSVM | 20 |" in table and "| GPC |" in table and "~5000" in table


def _check_wenzel_fig2(rows, table):
    (r,) = rows
    assert (r["key"], r["n"], r["folds"], len(r["grid_lengthscales"])) == ("wdbc", 569, 2, 3)
    np.testing.assert_allclose(r["grid_lengthscales"], r["theta_init"] * np.array([0.1, 1.0, 10.0]), rtol=1e-12)
    assert r["grid_best_error"] == min(r["grid_errors"]) and r["grid_time_s"] > 0 and r["auto_time_s"] > 0
    # ML-II moves theta from the median distance, and stays within the grid's span; the tuned fit on
    # nearly separable data: error below 0.15 (smoke run 0.05; sd on 285 rows about 0.015)
    assert len(r["auto_lengthscales"]) == 2 and all(th != r["theta_init"] for th in r["auto_lengthscales"])
    assert 0.1 * r["theta_init"] < r["auto_lengthscale"] < 10 * r["theta_init"] and r["auto_error"] < 0.15
    assert r["paper_grid_time_s"] == 188.0 and "| ML-II auto-tuned |" in table


def _check_wenzel_fig3(rows, table):
    assert [(r["M"], r["inducing"]) for r in rows] == [(4, "kmeans"), (4, "random"), (8, "kmeans"), (8, "random")]
    for r in rows:  # nearly separable wdbc, as in _check_wenzel_fig2
        assert r["cv_error"] == pytest.approx(np.mean(r["fold_errors"])) and r["cv_error"] < 0.15
        assert len(r["fold_times"]) == 2 and r["time_s"] > 0
    assert "| 4 | kmeans |" in table


def _check_chen_table3(rows, table):
    (r,) = rows
    assert r["GKMMDP"][2] == 2 and len(r["GKMMDP_accuracies"]) == 2 and 60 < r["GKMMDP"][0] <= 100
    assert 70 < r["LiSVM"][0] <= 100 and "MMLDP" not in r


def _check_chen_table4(rows, table):
    (r,) = rows
    assert all(r[m] > 0 for m in ("LDA", "LiSVM", "MMLDP")) and r["KMMDP"] is None and r["ssKMMDP"] is None
    assert r["MMLDP_first_wall"] > 0 and "| heart |" in table


CHECKS = {name[len("_check_"):]: f for name, f in dict(globals()).items() if name.startswith("_check_")}
TIMINGS: dict[str, float] = {}


def compose(*overrides: str):
    """The ``bmm`` configuration for ``overrides`` (Hydra's compose API, the package's yaml files)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    import bayes_maxmargin.cli  # noqa: F401  (registers the schemas and the smoke resolver)

    with initialize_config_module(config_module="bayes_maxmargin.configs", version_base=None):
        return hydra_compose("config", overrides=list(overrides))


def test_every_experiment_has_a_config_folds_and_figures():
    configs = Path(__file__).resolve().parents[1] / "bayes_maxmargin" / "configs" / "experiment"
    assert {p.stem for p in configs.glob("*.yaml")} == set(EXPERIMENTS) == set(FIGURES) == set(PAPER_HEADER)
    assert set(CHECKS) == set(EXPERIMENTS)
    # smoke=true swaps in the smoke values, an explicit override still wins, quick is gone
    cfg = compose("+experiment=henao_table1", "smoke=true")
    assert cfg.experiment.datasets == ["crabs"] and cfg.experiment.n_folds == 2
    assert compose("+experiment=henao_table1").experiment.datasets is None
    assert compose("+experiment=henao_table1", "smoke=true", "experiment.n_folds=3").experiment.n_folds == 3
    with pytest.raises(Exception, match="quick"):
        compose("+experiment=henao_table1", "experiment.quick=true")


@pytest.fixture(scope="module", autouse=True)
def _report_timings():
    yield
    if TIMINGS:
        print("\nsmoke run wall times: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items())
              + f"; total {sum(TIMINGS.values()):.1f} s")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.extended) if n in EXTENDED_SMOKE else n
                                  for n in PAPER_HEADER])
def test_smoke_run_writes_well_formed_outputs(name, tmp_path):
    data_dir = os.environ.get("BMM_DATA_DIR")
    if name not in NEEDS_NO_DATA and not (data_dir and Path(data_dir).is_dir()):
        pytest.skip("BMM_DATA_DIR is not set to the benchmark datasets folder")
    cfg = compose(f"+experiment={name}", "smoke=true", "experiment.verbose=false")
    t0 = time.perf_counter()
    metrics = run(cfg, tmp_path)
    TIMINGS[name] = time.perf_counter() - t0
    assert metrics["experiment"] == name and metrics["smoke"] is True

    table = (tmp_path / "table.md").read_text()
    assert table.startswith(SMOKE_BANNER) and PAPER_HEADER[name] in table

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["experiment"] == name and results["smoke"] is True and results["rows"]
    CHECKS[name](results["rows"], table)

    with open(tmp_path / "folds.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames[: len(FOLD_COLUMNS)]) == FOLD_COLUMNS
        records = list(reader)
    assert records and records == [
        {k: "" if v is None else str(v) for k, v in rec.items()}
        for rec in _csv_view(json.loads((tmp_path / "folds.json").read_text()))
    ]
    assert len(records) == metrics["n_folds"]
    assert all(r["experiment"] == name and r["dataset"] and r["method"] for r in records)
    assert all(math.isfinite(float(r["time_s"])) and float(r["time_s"]) >= 0 for r in records)
    if name in NO_ERROR:
        assert all(r["error"] == "" for r in records)
    else:
        errors = [float(r["error"]) for r in records]
        assert all(math.isfinite(e) and 0.0 <= e <= 1.0 for e in errors)
        assert {r["metric"] for r in records} <= {"error", "ber"}
        keys = {(r["dataset"], r["method"], r["fold"]) for r in records}
        assert len(keys) == len(records)  # one record per dataset x method x fold

    assert metrics["figures"] and set(metrics["figures"]) == set(results["figures"])
    for png in metrics["figures"]:
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
        import matplotlib.image

        assert matplotlib.image.imread(tmp_path / png).ndim == 3

    saved = OmegaConf.load(tmp_path / "config.yaml")
    assert saved.experiment.name == name and saved.smoke is True
    assert OmegaConf.to_container(saved) == OmegaConf.to_container(cfg, resolve=True)


def _csv_view(records: list[dict]) -> list[dict]:
    """folds.json records as the CSV writer renders them (lists as JSON, floats by str)."""
    out = []
    for rec in records:
        row = {}
        for k, v in rec.items():
            if isinstance(v, (list, dict)):
                v = json.dumps(v)
            elif isinstance(v, float) and math.isnan(v):
                v = None
            row[k] = v
        out.append(row)
    return out


def test_run_rejects_quick_and_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="Unknown experiment"):
        run({"experiment": {"name": "nope"}}, tmp_path)
    with pytest.raises(ValueError, match="smoke=true"):
        run({"experiment": {"name": "luts_simulation", "quick": True}}, tmp_path)


#: ``bmm``'s entry called once per command line, in one interpreter (as Hydra's multirun runs the jobs
#: of a sweep one after another in one process): the package and JAX are imported once for both sweeps.
_BMM_COMMANDS = """
import json, sys
from bayes_maxmargin.cli import main
for args in json.loads(sys.argv[1]):
    sys.argv = ["bmm", *args]
    main()
"""


def test_multirun_sweeps_an_experiment_and_a_model_job(tmp_path):
    """`bmm --multirun`: one folder per job, for an experiment sweep and for the plain model job."""
    commands = [
        ["--multirun", "+experiment=luts_simulation", "smoke=true", "seed=0,1", "experiment.methods=[svm]",
         "experiment.verbose=false", f"hydra.sweep.dir={tmp_path / 'exp'}"],
        # two fixed-point jobs: what is swept is the jobs' folders (the Gibbs job through `bmm`:
        # test_cli.py::test_default_job_writes_everything)
        ["--multirun", "inference=em,vb", "smoke=true", "plots=false", f"hydra.sweep.dir={tmp_path / 'model'}"],
    ]
    res = subprocess.run([sys.executable, "-c", _BMM_COMMANDS, json.dumps(commands)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, JAX_DISABLE_MOST_OPTIMIZATIONS="1"))  # as run_bmm
    assert res.returncode == 0, res.stderr[-3000:]
    for job, seed in (("0", 0), ("1", 1)):
        folder = tmp_path / "exp" / job
        assert OmegaConf.load(folder / "config.yaml").seed == seed
        assert (folder / "bers.png").exists() and (folder / "folds.csv").exists()
        assert json.loads((folder / "results.json").read_text())["settings"]["seed"] == seed
    for job, inference in (("0", "em"), ("1", "vb")):
        metrics = json.loads((tmp_path / "model" / job / "metrics.json").read_text())
        assert metrics["inference"] == inference and metrics["error"] < 0.15
