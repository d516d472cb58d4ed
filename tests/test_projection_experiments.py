"""Chen et al. (2015) Tables 3 and 4: paper numbers, configuration (the smoke runs are in
test_experiment_runner.py)."""

from __future__ import annotations

import pytest

from bayes_maxmargin.experiments import EXPERIMENTS
from bayes_maxmargin.experiments.chen2015 import PAPER_TABLE3, PAPER_TABLE4, TABLE3_DATASETS, table3, table4


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
        cfg = compose("config", overrides=[f"+experiment={name}", "smoke=true"])
    assert cfg.experiment.name == name and cfg.smoke is True and cfg.experiment.seed == cfg.seed
    assert list(cfg.experiment.datasets) == ["heart"]
