"""The Table 3 experiment (Henao et al. 2014): registered, its config matches its function, a smoke run."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from bayes_maxmargin.experiments import EXPERIMENTS, run
from bayes_maxmargin.experiments.henao2014_factor import VARIANTS, table3, variant_params

from .conftest import needs_data

CONFIG = Path(__file__).resolve().parents[1] / "bayes_maxmargin" / "configs" / "experiment" / "henao_table3.yaml"


def test_registered_and_config_matches_signature():
    assert EXPERIMENTS["henao_table3"] is table3
    node = yaml.safe_load(CONFIG.read_text())["experiment"]
    assert node["name"] == "henao_table3"
    params = inspect.signature(table3).parameters
    assert set(node) - {"name"} <= set(params)
    assert tuple(node["variants"]) == VARIANTS
    for name in VARIANTS:
        assert {"classifier", "inference"} <= set(variant_params(name)) or "joint" in variant_params(name)


@needs_data
@pytest.mark.benchmark
def test_quick_run(tmp_path):
    cfg = {"experiment": {"name": "henao_table3", "datasets": ["usps_3vs5"], "variants": ["VLDFM", "FM+L"],
                          "quick": True, "verbose": False}}
    metrics = run(cfg, tmp_path)
    assert (tmp_path / "table.md").exists() and metrics["n_rows"] == 2
    assert "QUICK MODE" in metrics["table"]
