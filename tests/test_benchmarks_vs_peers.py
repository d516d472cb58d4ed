"""Smoke tests of benchmarks/vs_peers.py: ``--quick`` runs in a subprocess (without GPJax) writing
every metric of every model, the SUSY-like run's error records, and the script's small helpers."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
#: every model of the script but GPJax (an optional peer)
MODELS = ["gpbsvm", "ecm", "fitc", "svi", "vi", "gibbs", "linear", "gpc", "svc_platt", "logreg"]
METRICS = ["error", "brier", "log_loss", "ece", "first_fit_s", "second_fit_s"]


def _script():
    spec = importlib.util.spec_from_file_location("vs_peers", BENCH / "vs_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(out_dir: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(BENCH / "vs_peers.py"), "--quick", "--out-dir", str(out_dir), *args],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.benchmark
def test_vs_peers_quick_has_every_metric_of_every_model(tmp_path):
    root = Path(os.environ.get("BMM_DATA_DIR", ""))
    if not os.environ.get("BMM_DATA_DIR") or not (root / "flare_solar").is_dir():
        pytest.skip("needs BMM_DATA_DIR with flare_solar")
    proc = _run(tmp_path, "--datasets", "flare_solar", "--splits", "1", "--models", *MODELS)
    out = json.loads((tmp_path / "vs_peers_quick.json").read_text())
    assert {"machine", "config", "versions", "rows", "summary", "skipped"} <= set(out)
    assert out["skipped"] == [] and out["config"]["quick"] is True
    assert [r["model"] for r in out["rows"]] == MODELS
    assert [s["model"] for s in out["summary"]] == MODELS
    for r in out["rows"]:
        assert r["dataset"] == "flare_solar" and r["split"] == 0 and r["n_train"] + r["n_test"] == 144
        assert all(math.isfinite(r[k]) for k in METRICS), r
        assert 0 <= r["error"] <= 1 and 0 <= r["brier"] <= 1 and 0 <= r["ece"] <= 1 and r["log_loss"] > 0, r
        assert r["first_fit_s"] > 0 and r["second_fit_s"] > 0
        assert isinstance(r["warnings"], list) and len(r["warnings"]) <= 5
    # GPBSVM() at its defaults and GPBSVM(inference="svi") are one configuration: the same fit
    rows = {r["model"]: r for r in out["rows"]}
    assert rows["gpbsvm"]["error"] == rows["svi"]["error"] and rows["gpbsvm"]["brier"] == rows["svi"]["brier"]
    assert "## flare_solar" in proc.stdout and "| svc_platt |" in proc.stdout
    # one split: a ratio, no interval
    ratios = {r["metric"]: r for r in out["ratios"]}
    best = min(("gpc", "svc_platt"), key=lambda m: rows[m]["error"])
    assert ratios["error"]["ratio"] == pytest.approx(rows["gpbsvm"]["error"] / rows[best]["error"])
    assert ratios["error"]["low"] is None and ratios["error"]["high"] is None
    assert "## gpbsvm / the best of" in proc.stdout


@pytest.mark.benchmark
def test_vs_peers_susy_quick_records_the_error_along_the_steps(tmp_path):
    proc = _run(tmp_path, "--susy", "1000", "--susy-records", "4", "--models", "svi")
    (row,) = json.loads((tmp_path / "vs_peers_susy_quick.json").read_text())["susy_rows"]
    assert row["model"] == "svi" and row["n_train"] == 1000 and row["steps"] == 200
    steps = [c["steps"] for c in row["curve"]]
    assert len(steps) >= 4 and steps == sorted(steps) and steps[-1] == 200
    assert row["final_error"] == row["curve"][-1]["error"]
    # the records classify by the sign of the latent mean, the fitted estimator through its learnt link
    assert abs(row["final_scores"]["error"] - row["final_error"]) < 0.02
    assert 0 < row["time_to_final_s"] <= row["train_s"] <= row["fit_s"]
    assert "SUSY-like" in proc.stdout


@pytest.mark.benchmark
def test_vs_peers_skips_gpjax_with_a_note_when_it_is_missing(tmp_path):
    if importlib.util.find_spec("gpjax") is not None:
        pytest.skip("gpjax is installed")
    proc = _run(tmp_path, "--datasets", "moons", "--splits", "1", "--models", "gpjax", "logreg")
    assert "gpjax is not installed" in proc.stdout
    out = json.loads((tmp_path / "vs_peers_quick.json").read_text())
    assert out["skipped"] == ["gpjax"] and [r["model"] for r in out["rows"]] == ["logreg"]
    assert out["rows"][0]["n_train"] == 140


def _rows(table):
    """vs_peers rows from {model: [error of split 0, 1, ...]} of one data set."""
    return [{"dataset": "d", "split": s, "model": m, "error": e} for m, errs in table.items()
            for s, e in enumerate(errs)]


def test_ratio_to_best_peer_is_against_the_best_peer_mean_with_a_paired_interval():
    script = _script()
    # gpc is the best peer on average (0.25 against 0.26); logreg is not a peer
    table = {"gpbsvm": [0.20, 0.32, 0.26], "gpc": [0.30, 0.20, 0.25], "svc_platt": [0.20, 0.32, 0.26],
             "logreg": [0.0, 0.0, 0.0]}
    (r,) = script.ratios_to_best_peer(_rows(table), ("error",))
    assert r["best_peer"] == "gpc" and r["ratio"] == pytest.approx(0.26 / 0.25) and r["splits"] == 3
    # the per-split differences against gpc are -0.10, 0.12, 0.01: mean 0.01, sd 0.11; t(2) at 95 % is 2.920
    half = 2.919986 * 0.11 / 3**0.5
    assert r["low"] == pytest.approx(1 + (0.01 - half) / 0.25, abs=1e-5)
    assert r["high"] == pytest.approx(1 + (0.01 + half) / 0.25, abs=1e-5)
    # paired: ours equal to a peer on every split is exactly 1, however much the splits differ
    (same,) = script.ratios_to_best_peer(_rows({"gpbsvm": [0.1, 0.3, 0.2], "gpjax": [0.1, 0.3, 0.2]}), ("error",))
    assert same["ratio"] == same["low"] == same["high"] == 1.0
    # a wider level gives a wider interval around the same ratio
    (wide,) = script.ratios_to_best_peer(_rows(table), ("error",), level=0.99)
    assert wide["low"] < r["low"] < r["ratio"] < r["high"] < wide["high"]


def test_ratio_to_best_peer_counts_only_the_splits_every_model_has():
    script = _script()
    rows = _rows({"gpbsvm": [0.2, 0.3, 0.4], "gpc": [0.2, 0.3]}) + _rows({"other": [0.5]})
    (r,) = script.ratios_to_best_peer(rows, ("error",))
    assert r["splits"] == 2 and r["ratio"] == pytest.approx(1.0)
    assert script.ratios_to_best_peer(_rows({"gpbsvm": [0.2], "logreg": [0.1]}), ("error",)) == []
    assert script.ratios_to_best_peer(_rows({"gpc": [0.2]}), ("error",)) == []


def test_chunk_length_divides_the_steps():
    script = _script()
    assert script._chunk_length(4000, 40) == 100
    assert script._chunk_length(1001, 40) == 77  # 1001 = 7 * 11 * 13: the smallest divisor >= 26
    assert script._chunk_length(7, 40) == 1 and script._chunk_length(13, 1) == 13


def test_reached_is_the_first_record_within_half_a_point():
    script = _script()
    curve = [{"steps": 10, "seconds": 1.0, "error": 0.30}, {"steps": 20, "seconds": 2.0, "error": 0.204},
             {"steps": 30, "seconds": 3.0, "error": 0.19}, {"steps": 40, "seconds": 4.0, "error": 0.20}]
    assert script._reached(curve) == {"final_error": 0.20, "time_to_final_s": 2.0, "steps_to_final": 20,
                                      "train_s": 4.0}


def test_svi_default_steps_are_twenty_epochs_within_bounds():
    """GPJax runs GPBSVM()'s number of steps: 20 epochs, at least 250 with the RBF kernel below 2000 rows
    and 1000 with ARD + Constant from 2000 rows, at most 100 000; the same as the estimator's fit."""
    script = _script()
    assert [script.svi_default_steps(n, 5) for n in (100, 1999, 2000, 7000, 200_000, 10**7)] == [
        250, 399, 1000, 1400, 40_000, 100_000]
