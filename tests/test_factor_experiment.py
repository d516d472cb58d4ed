"""The Table 3 experiment (Henao et al. 2014): registered, its config matches its function (the smoke
run is in test_experiment_runner.py)."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import numpy as np
import pytest

from bayes_maxmargin.experiments import EXPERIMENTS
from bayes_maxmargin.experiments.henao2014_factor import VARIANTS, table3, table3_baselines, variant_params

needs_usps = pytest.mark.skipif(not (Path(os.environ.get("BMM_DATA_DIR", "")) / "usps_3vs5").is_dir(),
                                reason="needs BMM_DATA_DIR with usps_3vs5")


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


@needs_usps
def test_baselines_on_the_table3_splits():
    """The SVC references run on the same seeded USPS splits as Table 3, one error per split."""
    rows = table3_baselines(2, components=(None, 3), max_n=120)
    assert [r["features"] for r in rows] == ["pixels", "PCA 3"]
    for r in rows:
        assert len(r["errors"]) == 2 and 0 <= r["error"] < 0.3
        assert r["error"] == np.mean(r["errors"])


@needs_usps
def test_factor_overrides_reach_every_estimator(monkeypatch):
    """``factor`` overrides the variants' shared settings, the estimators' seed included (another chain
    on the same splits); without it the estimators take the splits' seed."""
    import bayes_maxmargin.estimators.factor as factor_module

    seen = []

    class Recorder:
        def __init__(self, **params):
            self.params = params

        def _theta(self):  # the option checks that run before any fit
            pass

        _learned = _theta

        def fit(self, X, y):
            seen.append(self.params)
            self.label_ = y[0]
            return self

        def predict(self, X):
            return np.full(len(X), self.label_)

    monkeypatch.setattr(factor_module, "FactorBSVM", Recorder)
    table3(["usps_3vs5"], ["NDFM", "FM+L"], quick=True, seed=3, factor={"random_state": 7}, verbose=False)
    assert len(seen) == 4 and {p["random_state"] for p in seen} == {7}
    seen.clear()
    table3(["usps_3vs5"], ["NDFM"], quick=True, seed=3, verbose=False)
    assert len(seen) == 2 and {p["random_state"] for p in seen} == {3}


def test_an_option_invalid_for_a_later_dataset_fails_before_any_fit(monkeypatch):
    """p53_proxy's GP variants use the ARD kernel, whose length-scale field is "lengthscales": a
    learn_kernel=["lengthscale"] meant for USPS's RBF fails at once, not after USPS's splits."""
    from bayes_maxmargin.estimators.factor import FactorBSVM
    from bayes_maxmargin.core.checks import InvalidParameterError

    def no_fit(self, *args, **kwargs):
        raise AssertionError("a fit started")

    monkeypatch.setattr(FactorBSVM, "fit", no_fit)
    with pytest.raises(InvalidParameterError, match="'lengthscale' is not a learnable field.*lengthscales"):
        table3(["usps_3vs5", "p53_proxy"], ["NDFM"], factor={"learn_kernel": ["lengthscale"]}, verbose=False)
