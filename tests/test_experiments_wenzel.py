"""The Wenzel et al. (2017) Table 1 / Figure 1 reproduction: the paper's numbers, the checkpoint,
method subsets and fold caps, Figure 1 (every method's smoke run on heart, checked for its errors and
Brier scores, is in test_experiment_runner.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bayes_maxmargin.experiments import EXPERIMENTS, wenzel2017
from bayes_maxmargin.experiments.wenzel2017 import METHODS, PAPER_TABLE1, table1, table1_markdown

DATA_DIR = os.environ.get("BMM_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(),
    reason="BMM_DATA_DIR is not set to the benchmark datasets folder (heart, breast_cancer, waveform needed)",
)


def test_paper_numbers_copied_from_table1():
    assert set(PAPER_TABLE1) == {"breast_cancer", "diabetis", "flare_solar", "german", "heart", "splice",
                                 "waveform"}
    assert PAPER_TABLE1["waveform"]["gpc"]["time"] == 8691
    assert PAPER_TABLE1["splice"]["ecm"]["error"] == (.11, .03)
    assert PAPER_TABLE1["heart"]["sbsvm"]["brier"] == (.13, .04)
    assert wenzel2017._num_inducing("heart", 243) == 49 and wenzel2017._num_inducing("german", 900) == 100


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("wenzel") / "ckpt.json"
    rows, table = table1(["heart"], methods=["svm", "gpc"], quick=True, checkpoint=str(ckpt), verbose=False)
    return rows, table, ckpt


@needs_data
def test_checkpoint_resume_skips_finished_fits(quick, monkeypatch):
    rows, table, ckpt = quick
    saved = json.loads(ckpt.read_text())
    assert len(saved) == 2 * len(rows)  # the methods run

    def fail(*a, **k):
        raise AssertionError("a finished (dataset, method) was refitted")

    monkeypatch.setattr(wenzel2017, "_fit_score", fail)
    again, table2 = table1(["heart"], methods=["svm", "gpc"], quick=True, checkpoint=str(ckpt), verbose=False)
    assert table2 == table
    assert again[0]["svm_fold_errors"] == rows[0]["svm_fold_errors"] and again[0]["sbsvm_error"] is None


@needs_data
def test_method_subset_and_fold_cap(tmp_path):
    rows, table = table1(["heart"], methods=["svm"], quick=True, max_folds={"svm": {"heart": 1}}, verbose=False)
    r = rows[0]
    assert r["svm_n_folds"] == 1 and r["sbsvm_error"] is None and r["sbsvm_within_paper_sd"] is None
    assert "n/a" in table and "SVM+Platt on Heart (1 folds)" in table
    with pytest.raises(ValueError, match="Unknown methods"):
        table1(["heart"], methods=["knn"], quick=True)
    assert table1_markdown(rows).startswith("| Data set |")


@needs_data
def test_fig1_quick_writes_png(tmp_path):
    png = tmp_path / "fig1.png"
    rows, table = wenzel2017.fig1(methods=("svm", "gpc"), quick=True, output=str(png), verbose=False)
    assert png.stat().st_size > 1000
    assert {r["method"] for r in rows} == {"svm", "gpc"} and all(0 <= r["error"] < 0.35 for r in rows)
    assert "| SVM+Platt |" in table


def test_experiment_registered_and_config_composes():
    from hydra import compose, initialize_config_module

    import bayes_maxmargin.cli  # noqa: F401  (registers the schemas)

    assert EXPERIMENTS["wenzel_table1"] is table1
    with initialize_config_module(config_module="bayes_maxmargin.configs", version_base=None):
        cfg = compose("config", overrides=["+experiment=wenzel_table1", "smoke=true"])
    exp = cfg.experiment
    assert exp.name == "wenzel_table1" and cfg.smoke is True and exp.seed == cfg.seed
    assert list(exp.datasets) == ["heart"]
    assert list(exp.methods) == list(METHODS)
    assert exp.max_folds.gpc.waveform == 2
