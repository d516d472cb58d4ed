"""A small version of benchmarks/stress.py: no NaN or inf from the models on data built to break
naive code (separable, points on the margin, duplicates, scales 1e-6..1e6, n << d, float32)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import stress  # noqa: E402

CASES = [("linear vb", case) for case in stress.CASES] + [
    ("gp vi", case) for case in ("duplicates",)]


@pytest.mark.parametrize("model,case", CASES)
def test_no_nonfinite_outputs(model, case):
    row = stress.stress(model, case)
    assert row["nonfinite"] == 0, row
    assert row["outcome"].startswith("fit"), row  # these cases are all valid input
