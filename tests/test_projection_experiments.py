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


def test_polynomial_models_see_the_inputs_scaled_by_sqrt_p():
    """PKMMDP's kernel is (x'v / P + 1)^d: the fitted pipeline equals the estimator on X / sqrt(P)."""
    import numpy as np

    from bayes_maxmargin import MaxMarginProjection
    from bayes_maxmargin.experiments.chen2015 import TABLE3_SETTINGS, _bayes_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 16))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, 0)
    settings = {**TABLE3_SETTINGS, "num_warmup": 5, "num_samples": 5, "n_basis": 10}
    model = _bayes_model("PKMMDP", 60, 16, 2, settings, seed=0).fit(X, y)
    plain = model.steps[-1][1]
    assert plain.kernel == "poly" and plain.kernel_params == {"degree": 2}
    reference = MaxMarginProjection(**plain.get_params()).fit(X / 4.0, y)
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(X / 4.0), rtol=1e-6)
    assert isinstance(_bayes_model("GKMMDP", 60, 16, 2, settings, seed=0), MaxMarginProjection)


def test_lengthscale_is_chosen_by_cross_validation_on_the_training_split():
    """With a length-scale grid, the Gaussian-kernel model's length-scale is the grid value whose
    inner cross-validated accuracy is highest (computed here again with scikit-learn), and the inner
    fits use at most as many basis vectors as an inner fold has rows."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from bayes_maxmargin.experiments.chen2015 import TABLE3_SETTINGS, _bayes_model, _select_lengthscale

    rng = np.random.default_rng(1)
    X = rng.normal(size=(45, 4))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, 1, 0)
    settings = {**TABLE3_SETTINGS, "num_warmup": 50, "num_samples": 50, "n_basis": 45,
                "lengthscale_grid": (0.5, 8.0), "select_folds": 3}
    model = _bayes_model("GKMMDP", 45, 4, 2, settings, seed=0)
    chosen = _select_lengthscale(model, X, y, settings, seed=0)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    scores = [cross_val_score(model.set_params(n_basis=30, kernel_params={"lengthscale": f * 2.0}), X, y, cv=folds).mean()
              for f in (0.5, 8.0)]
    assert scores[0] != scores[1]
    assert chosen == (0.5, 8.0)[int(np.argmax(scores))] * 2.0
