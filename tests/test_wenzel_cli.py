"""The SUSY run and Figures 1-3 of Wenzel et al. (2017) as `bmm +experiment=...`: the configurations
(full and smoke settings), the argument checks, and one smoke run through the `bmm` command in a
fresh process (-m extended). Every smoke run's numbers are checked in test_experiment_runner.py
(`wenzel_susy` in the default suite, the figures with -m extended)."""

from __future__ import annotations

import json

import pytest

from bayes_maxmargin.experiments import EXPERIMENTS, FIGURES, FOLDS, wenzel2017, wenzel2017_figs

from .conftest import run_bmm as bmm
from .test_experiment_runner import compose

NEW = ("wenzel_susy", "wenzel_fig1", "wenzel_fig2", "wenzel_fig3")


def test_configs_hold_the_papers_settings_and_smoke_uses_built_in_data():
    from bayes_maxmargin.cli import BUILT_IN_DATASETS, SMOKE_WITHOUT_DATA

    assert EXPERIMENTS["wenzel_fig1"] is wenzel2017.fig1 and EXPERIMENTS["wenzel_susy"] is wenzel2017_figs.susy
    assert all(name in FOLDS and name in FIGURES and name in SMOKE_WITHOUT_DATA for name in NEW)
    full = {name: compose(f"+experiment={name}").experiment for name in NEW}
    assert (full["wenzel_susy"].n, full["wenzel_susy"].num_inducing, full["wenzel_susy"].batch_size,
            full["wenzel_susy"].lengthscale) == (None, 64, 100, 5.0)  # Sec. 5.2; n None: 5 million rows
    assert (full["wenzel_fig1"].dataset, full["wenzel_fig1"].n_train, full["wenzel_fig1"].lengthscale) == (
        "waveform", 4000, 5.0)  # Sec. 5.3
    assert (full["wenzel_fig2"].folds, full["wenzel_fig2"].mlii_every) == (10, 10)  # Sec. 5.4
    assert (full["wenzel_fig3"].dataset, full["wenzel_fig3"].folds, list(full["wenzel_fig3"].inducing)) == (
        "usps_3vs5", 10, ["kmeans", "random"])  # Sec. 5.5
    for name in NEW:
        smoke = compose(f"+experiment={name}", "smoke=true", "seed=3").experiment
        assert smoke.get("dataset", "susy_synthetic") in BUILT_IN_DATASETS and smoke.seed == 3
    assert compose("+experiment=wenzel_fig3", "smoke=true", "experiment.ms=[2]").experiment.ms == [2]


def test_invalid_arguments_name_the_argument():
    with pytest.raises(ValueError, match="dataset must be 'susy_synthetic' or 'susy', got dataset='wdbc'"):
        wenzel2017_figs.susy(dataset="wdbc", quick=True, verbose=False)
    with pytest.raises(ValueError, match=r"n_test must be in \[1, n - 2\]"):
        wenzel2017_figs.susy(n=100, n_test=100, verbose=False)
    with pytest.raises(ValueError, match=r"ms must be integers in \[1, 284\].*ms=\[4, 1000\]"):
        wenzel2017_figs.fig3(dataset="wdbc", ms=[4, 1000], quick=True, verbose=False)
    with pytest.raises(ValueError, match="Unknown methods"):
        wenzel2017_figs.fig3(dataset="wdbc", inducing=["gmm"], quick=True, verbose=False)
    with pytest.raises(ValueError, match="grid must be a positive count or positive length-scales"):
        wenzel2017_figs.fig2(dataset="wdbc", grid=[1.0, -2.0], quick=True, verbose=False)
    with pytest.raises(ValueError, match=r"folds must be an integer in \[2, 569\]"):
        wenzel2017_figs.fig2(dataset="wdbc", folds=1, quick=True, verbose=False)
    with pytest.raises(ValueError, match="Unknown methods"):
        wenzel2017.fig1(dataset="wdbc", methods=["knn"], quick=True, verbose=False)


@pytest.mark.extended  # a fresh process (about 7 s of CPU); the same run in-process is in the default suite
def test_susy_smoke_run_through_bmm(tmp_path):
    """`bmm +experiment=wenzel_susy smoke=true` as a user runs it: every output in Hydra's run folder."""
    out = tmp_path / "run"
    res = bmm("+experiment=wenzel_susy", "smoke=true", "experiment.verbose=false", f"hydra.run.dir={out}",
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    for name in ("table.md", "results.json", "folds.csv", "folds.json", "config.yaml", "susy.png"):
        assert (out / name).stat().st_size > 0, name
    results = json.loads((out / "results.json").read_text())
    (row,) = results["rows"]
    assert results["experiment"] == "wenzel_susy" and results["figures"] == ["susy.png"]
    # 0.7: far above chance (0.5) and below the smoke run's 0.81 (sd on 500 held-out rows about 0.02)
    assert row["n_train"] == 1500 and row["sbsvm_auc"] > 0.7
    assert "AUC (paper)" in (out / "table.md").read_text()
