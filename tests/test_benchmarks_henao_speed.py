"""Smoke test of benchmarks/henao_speed.py: the quick Gibbs timing part runs and writes its JSON."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_gibbs_time_quick_writes_results(tmp_path):
    proc = subprocess.run(
        [sys.executable, "henao_speed.py", "--part", "gibbs_time", "--quick", "--out", str(tmp_path)],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "henao_gibbs_time_quick.json").read_text())
    assert {"machine", "settings", "rows", "breakdown", "load_before", "blas", "quick"} <= set(result)
    assert result["quick"] is True and result["machine"]["backend"]
    assert [r["n"] for r in result["rows"]] == [50, 100]
    for row in result["rows"]:
        for key in ("float64_ms", "float64_1blas_ms"):
            assert math.isfinite(row[key]) and row[key] > 0
    for row in result["breakdown"]:
        assert all(math.isfinite(v) for v in row.values())
        # stage differences (form_and_cholesky_ms, ...) may dip below 0 on a busy machine; totals may not
        assert all(row[k] > 0 for k in ("rng_ms", "sweep_ms", "sweep_wall_ms", "cholesky_call_ms"))
    assert "| n |" in proc.stdout
