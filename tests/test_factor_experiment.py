"""The Table 3 experiment (Henao et al. 2014): registered, its config matches its function (the smoke
run is in test_experiment_runner.py)."""

from __future__ import annotations

import inspect

from bayes_maxmargin.experiments import EXPERIMENTS
from bayes_maxmargin.experiments.henao2014_factor import VARIANTS, table3, variant_params


def test_registered_and_config_matches_signature():
    from hydra import compose, initialize_config_module

    import bayes_maxmargin.cli  # noqa: F401  (registers the schemas and the smoke resolver)

    assert EXPERIMENTS["henao_table3"] is table3
    with initialize_config_module(config_module="bayes_maxmargin.configs", version_base=None):
        node = compose("config", overrides=["+experiment=henao_table3"]).experiment
    assert node.name == "henao_table3"
    params = inspect.signature(table3).parameters
    assert set(node) - {"name"} <= set(params)
    assert tuple(node.variants) == VARIANTS
    for name in VARIANTS:
        assert {"classifier", "inference"} <= set(variant_params(name)) or "joint" in variant_params(name)
