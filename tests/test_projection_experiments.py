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


def test_baseline_paper_numbers_copied():
    assert PAPER_TABLE3["heart"]["GKLDA"] == (87.0, 3.5) and PAPER_TABLE3["dna"]["PKSVM"] == (92.7, 1.0)
    assert PAPER_TABLE3["arcene"]["LDE"] is None and PAPER_TABLE3["usps"]["PKLDE"] == (90.4, 1.0)
    assert PAPER_TABLE4["waveform"]["KLDE"] == 1820.0 and PAPER_TABLE4["isolet"]["KLDE"] is None
    assert PAPER_TABLE4["leukemia"]["LDE"] == 45.19


def _two_classes(n=80, p=3, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * np.array([1.0, 2.0, 0.5])
    y = np.where(X @ np.array([1.0, -0.3, 2.0]) + 0.5 * rng.normal(size=n) > 0, 1, 0)
    return X, y


def test_kernel_fisher_discriminant_with_a_linear_kernel_is_lda():
    """KLDA with the kernel (x'v / P + 1)^1 (linear plus a constant) projects the training data as
    Fisher's LDA does (scikit-learn), up to sign and scale: the dual solution spans the same
    direction, so the correlation is 1 but for the regularisation (1e-8 of the within-class scatter
    here, which moves it by about that much; 1e-6 leaves a margin)."""
    import numpy as np
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    from bayes_maxmargin.experiments.discriminant import KernelFisherDiscriminant

    X, y = _two_classes()
    klda = KernelFisherDiscriminant("poly", degree=1, reg=1e-8).fit(X, y).transform(X)[:, 0]
    lda = LinearDiscriminantAnalysis(n_components=1).fit(X, y).transform(X)[:, 0]
    assert abs(np.corrcoef(klda, lda)[0, 1]) > 1 - 1e-6


def test_local_discriminant_embedding_maximises_its_quotient_and_its_kernel_form_agrees():
    """LDE's leading direction has the largest quotient v'X'L_b X v / v'X'L_w X v (within 1e-9, the
    regularisation's effect) of 2000 random directions, and KLDE with a linear kernel projects the
    training data along the same direction (correlation 1 but for the regularisation)."""
    import numpy as np

    from bayes_maxmargin.experiments.discriminant import LocalDiscriminantEmbedding

    X, y = _two_classes()
    lde = LocalDiscriminantEmbedding(1, reg=1e-10).fit(X, y)
    v = lde.directions_[:, 0]
    # the graphs again, from the documented definition: the same pairs as fit draws
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(sq, np.inf)
    same = y[:, None] == y[None, :]
    laps = []
    for mask in (same, ~same):
        d = np.where(mask, sq, np.inf)
        adj = np.zeros_like(sq, dtype=bool)
        adj[np.repeat(np.arange(len(X)), 5), np.argsort(d, 1)[:, :5].ravel()] = True
        adj |= adj.T
        W = np.where(adj, np.exp(-np.where(adj, sq, 0.0) / sq[adj].mean()), 0.0)
        laps.append(np.diag(W.sum(1)) - W)
    within, between = (X.T @ lap @ X for lap in laps)

    def quotient(u):
        return np.einsum("...i,ij,...j->...", u, between, u) / np.einsum("...i,ij,...j->...", u, within, u)

    rand = np.random.default_rng(1).normal(size=(2000, 3))
    assert quotient(v) >= quotient(rand).max() * (1 - 1e-9)
    klde = LocalDiscriminantEmbedding(1, "poly", degree=1, reg=1e-10).fit(X, y).transform(X)[:, 0]
    assert abs(np.corrcoef(klde, X @ v)[0, 1]) > 1 - 1e-6


def test_discriminant_kernel_is_checked():
    import numpy as np

    from bayes_maxmargin.experiments.discriminant import KernelFisherDiscriminant

    X, y = _two_classes(20)
    with pytest.raises(ValueError, match="kernel: 'sigmoid'"):
        KernelFisherDiscriminant("sigmoid").fit(X, y)
    with pytest.raises(ValueError, match="2 classes"):
        KernelFisherDiscriminant().fit(X, np.zeros(20))


@pytest.mark.extended
def test_figure1_draws_both_models(tmp_path):
    """Fig. 1's traces: one per model and prior, of n_iter positive norms, and the PNG written."""
    import numpy as np

    from bayes_maxmargin.experiments.chen2015 import figure1

    _, traces = figure1(tmp_path / "fig1.png", dataset="heart", n_iter=30, priors=(1.0, 1e-6))
    assert set(traces) == {"without z_n", "with z_n"}
    for series in traces.values():
        assert len(series) == 2 and all(v.shape == (30,) and np.all(v > 0) for v in series.values())
    assert (tmp_path / "fig1.png").stat().st_size > 10_000
