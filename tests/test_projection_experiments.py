"""Chen et al. (2015) Tables 3 and 4: paper numbers, configuration, dispatch (cheap methods only)."""

from __future__ import annotations

import json

import pytest

from bayes_maxmargin.experiments import EXPERIMENTS, run
from bayes_maxmargin.experiments.chen2015 import PAPER_TABLE3, PAPER_TABLE4, TABLE3_DATASETS, table3, table4

from .conftest import needs_data


def test_paper_numbers_copied():
    assert len(TABLE3_DATASETS) == 12 and set(PAPER_TABLE4) == set(PAPER_TABLE3)
    assert PAPER_TABLE3["usps"]["GKMMDP"] == (96.8, 0.8)
    assert PAPER_TABLE3["arcene"]["MMLDP"] is None
    assert PAPER_TABLE3["german"]["PKMMDP"] == (79.0, 1.1)
    assert PAPER_TABLE4["usps"]["KMMDP"] == 15.29 and PAPER_TABLE4["arcene"]["LiSVM"] is None


@pytest.mark.parametrize("name", ["chen_table3", "chen_table4"])
def test_experiment_registered_and_config_composes(name):
    from hydra import compose, initialize_config_module

    import bayes_maxmargin.cli  # noqa: F401  (registers the schemas)

    assert EXPERIMENTS[name] is (table3 if name == "chen_table3" else table4)
    with initialize_config_module(config_module="bayes_maxmargin.configs", version_base=None):
        cfg = compose("config", overrides=[f"+experiment={name}", "experiment.quick=true"])
    assert cfg.experiment.name == name and cfg.experiment.quick is True and cfg.experiment.seed == cfg.seed


@needs_data
def test_run_dispatches_and_writes_outputs(tmp_path):
    cfg = {"experiment": {"name": "chen_table3", "datasets": ["heart"], "methods": ["LiSVM", "GKSVM"],
                          "n_splits": 2, "verbose": False}}
    metrics = run(cfg, tmp_path)
    assert metrics["experiment"] == "chen_table3"
    saved = json.loads((tmp_path / "results.json").read_text())
    row = saved["rows"][0]
    assert row["key"] == "heart" and row["LiSVM"][2] == 2 and 70 < row["GKSVM"][0] <= 100
    assert "83.7 (3.7)" in (tmp_path / "table.md").read_text()
