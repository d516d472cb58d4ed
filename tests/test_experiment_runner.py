"""Every paper reproduction's smoke version (`bmm +experiment=NAME smoke=true`) through the real entry:
the configuration composed from the yaml files with Hydra's compose API, then
:func:`bayes_maxmargin.experiments.run`; its outputs exist and are well-formed. Also `bmm --multirun`
for an experiment sweep and a model-job sweep.

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
    "chen_table4": "/ 0.18",
}
NEEDS_NO_DATA = {"luts_simulation"}
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


@pytest.mark.parametrize("name", list(PAPER_HEADER))
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


def test_multirun_sweeps_an_experiment_and_a_model_job(tmp_path):
    """`bmm --multirun`: one folder per job, for an experiment sweep and for the plain model job."""
    code = "from bayes_maxmargin.cli import main; main()"
    env = dict(os.environ)

    def bmm(*args: str, sweep: Path) -> None:
        res = subprocess.run([sys.executable, "-c", code, "--multirun", *args, f"hydra.sweep.dir={sweep}"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
        assert res.returncode == 0, res.stderr[-3000:]

    bmm("+experiment=luts_simulation", "smoke=true", "seed=0,1", "experiment.methods=[svm,vb]",
        "experiment.verbose=false", sweep=tmp_path / "exp")
    for job, seed in (("0", 0), ("1", 1)):
        folder = tmp_path / "exp" / job
        assert OmegaConf.load(folder / "config.yaml").seed == seed
        assert (folder / "bers.png").exists() and (folder / "folds.csv").exists()
        assert json.loads((folder / "results.json").read_text())["settings"]["seed"] == seed
    bmm("inference=gibbs,em", "smoke=true", "plots=false", sweep=tmp_path / "model")
    for job, inference in (("0", "gibbs"), ("1", "em")):
        metrics = json.loads((tmp_path / "model" / job / "metrics.json").read_text())
        assert metrics["inference"] == inference and metrics["error"] < 0.15
