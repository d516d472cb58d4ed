"""Smoke tests of the Wenzel et al. (2017) benchmark scripts: each ``--quick`` run on tiny sizes
in a subprocess, writing its JSON to a temporary folder, and the fields the report relies on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(script: str, out_dir: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--out-dir", str(out_dir), *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "|" in proc.stdout  # a markdown table


def _data_dir_or_skip() -> None:
    root = Path(os.environ.get("BMM_DATA_DIR", ""))
    if not os.environ.get("BMM_DATA_DIR") or not (root / "heart").is_dir() or not (root / "usps_3vs5").is_dir():
        pytest.skip("needs BMM_DATA_DIR with heart and usps_3vs5")


def test_svi_scaling_quick(tmp_path):
    _run("svi_scaling.py", tmp_path, "--ns", "1000", "--batch-sizes", "100", "--test-n", "500")
    out = json.loads((tmp_path / "svi_scaling_quick.json").read_text())
    assert {"machine", "rows", "memory", "targets", "device"} <= set(out)
    (row,) = out["rows"]
    assert row["n"] == 1000 and row["batch_size"] == 100 and row["steps"] >= 10
    assert row["epoch_s"] > 0 and row["compile_s"] >= 0 and row["s_per_point"] > 0
    assert 0.5 < row["auc"] <= 1 and 0 <= row["error"] <= 0.5 and 0 <= row["brier"] <= 0.3
    assert 0 < out["memory"][0]["peak_rss_mb"] < 2048
    assert {"epoch_5e6_under_30s", "rss_under_2gb"} <= set(out["targets"])
    assert (tmp_path / "svi_scaling_quick.png").exists()


def test_svi_vs_svc_quick(tmp_path):
    _data_dir_or_skip()
    _run("svi_vs_svc.py", tmp_path, "--parts", "small", "gpc", "--n-small", "300", "--n-test", "300",
         "--gpc-n", "100", "--epochs", "1")
    out = json.loads((tmp_path / "svi_vs_svc_quick.json").read_text())
    methods = {(r["dataset"], r["method"]) for r in out["rows"]}
    assert methods == {("susy_synthetic", "S-BSVM"), ("susy_synthetic", "SVC"), ("susy_synthetic", "SVC+Platt"),
                       ("waveform", "S-BSVM"), ("waveform", "GPC")}
    for r in out["rows"]:
        assert r["fit_s"] > 0 and 0 <= r["error"] <= 0.6
        assert (r["brier"] is None) == (r["method"] == "SVC")
    assert {r["baseline"] for r in out["ratios"]} == {"SVC", "SVC+Platt", "GPC"}
    assert all(r["speedup"] > 0 for r in out["ratios"])
    assert any(k.startswith("waveform") for k in out["targets"])


def test_wenzel_figs_quick(tmp_path):
    _data_dir_or_skip()
    _run("wenzel_figs.py", tmp_path, "--grid", "2", "--ms", "4", "--fig2-steps", "10", "--fig3-steps", "10")
    out = json.loads((tmp_path / "wenzel_figs_quick.json").read_text())
    f2 = out["fig2"]
    assert len(f2["curve"]) == 2 and f2["dataset"] == "heart"
    assert f2["auto_lengthscale_mean"] > 0 and 0 <= f2["auto_cv_error"] <= 1
    assert f2["grid_time_s"] > 0 and f2["auto_time_s"] > 0
    assert {(r["M"], r["inducing"]) for r in out["fig3"]} == {(4, "kmeans"), (4, "random")}
    assert all(0 <= r["cv_error"] <= 1 and r["fit_s_mean"] > 0 for r in out["fig3"])
    assert (tmp_path / "wenzel_fig2_quick.png").exists() and (tmp_path / "wenzel_fig3_quick.png").exists()


def test_svi_vs_svc_ard_quick(tmp_path):
    _data_dir_or_skip()
    _run("svi_vs_svc.py", tmp_path, "--parts", "small", "large", "--platt-large", "--kernel", "ard",
         "--n-small", "300", "--n-large", "400", "--n-test", "300", "--steps", "20", "--seeds", "3")
    out = json.loads((tmp_path / "svi_vs_svc_ard_quick.json").read_text())
    assert out["config"]["kernel"] == "ard" and out["config"]["steps"] == 20
    assert {(r["n_train"], r["method"]) for r in out["rows"]} == {
        (n, m) for n in (300, 400) for m in ("S-BSVM", "SVC", "SVC+Platt")}
    assert all(r["fit_s"] > 0 and 0 <= r["error"] <= 0.6 for r in out["rows"])
    for r in (r for r in out["rows"] if r["method"] == "S-BSVM"):
        seeds = r["per_seed"]
        assert [f["seed"] for f in seeds] == [0, 1, 2] and r["steps"] == 20 and r["fit_s"] == seeds[0]["fit_s"]
        assert r["brier"] == pytest.approx(sum(f["brier"] for f in seeds) / 3)
        assert r["error_sd"] >= 0 and r["brier_sd"] > 0
    assert set(out["targets"]) == {"susy_synthetic_300_SVC+Platt", "susy_synthetic_400_SVC",
                                   "susy_synthetic_400_SVC+Platt"}
    assert all(isinstance(t["met"], bool) for t in out["targets"].values())
