"""Smoke tests of the Henao et al. (2014) Table 1 / Table 2 reproductions (tiny settings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bayes_maxmargin.experiments import run
from bayes_maxmargin.experiments.henao2014 import PAPER_TABLE1, PAPER_TABLE2, table1, table2

DATA_DIR = os.environ.get("BMM_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(),
    reason="BMM_DATA_DIR is not set to the benchmark datasets folder (crabs, sonar, usps needed)",
)

TABLE1_COLUMNS = {
    "key", "dataset", "n", "d", "preprocessing", "n_folds",
    "bsvm_error", "svm_error", "gpc_error", "paper_bsvm_error", "paper_svm_error", "paper_gpc_error",
    "bsvm_time_s", "svm_time_s", "gpc_time_s", "bsvm_fold_errors", "svm_fold_errors", "gpc_fold_errors",
    "bsvm_kernel_params", "svm_best_params", "gpc_kernel_params",
}
TABLE2_COLUMNS = {
    "key", "task", "n_train", "n_test", "num_inducing", "repetitions", "fitc_bsvm_error",
    "fitc_bsvm_error_sd", "errors", "fit_times_s", "time_per_fit_s", "first_fit_s",
    "paper_fitc_bsvm_error", "paper_fitc_bsvm_error_sd", "paper_fitc_gpc_error", "paper_time_s",
}


def test_paper_numbers_are_fractions_of_the_published_tables():
    assert PAPER_TABLE1["ionosphere"]["bsvm"] == 5.98
    assert PAPER_TABLE1["usps_3vs5"]["gpc"] == 1.69
    assert PAPER_TABLE2["4vsnon4"]["bsvm"] == (2.44, 0.17)


@needs_data
def test_table1_quick_rows_and_markdown():
    rows, table = table1(["crabs"], quick=True, verbose=False)
    assert len(rows) == 1
    row = rows[0]
    assert TABLE1_COLUMNS <= set(row)
    assert row["n"] == 200 and row["d"] == 7 and row["n_folds"] == 2
    assert row["preprocessing"] == "standardised per fold"
    for m in ("bsvm", "svm", "gpc"):
        assert 0.0 <= row[f"{m}_error"] <= 1.0
        assert len(row[f"{m}_fold_errors"]) == 2
        assert all(0.0 <= e <= 1.0 for e in row[f"{m}_fold_errors"])
        assert row[f"{m}_time_s"] > 0.0
        assert row[f"{m}_error"] == pytest.approx(np.mean(row[f"{m}_fold_errors"]))
    assert row["paper_bsvm_error"] == pytest.approx(0.015)
    assert "| Crabs | 200 | 7 |" in table and "Laplace" in table and "QUICK MODE" in table


@needs_data
def test_table1_method_subset_leaves_others_empty():
    rows, table = table1(["crabs"], methods=["svm"], quick=True, verbose=False)
    assert rows[0]["bsvm_error"] is None and rows[0]["gpc_error"] is None
    assert 0.0 <= rows[0]["svm_error"] <= 1.0
    assert "n/a" in table
    with pytest.raises(ValueError, match="Unknown methods"):
        table1(["crabs"], methods=["knn"], quick=True)


@needs_data
def test_table2_quick_rows_and_markdown():
    rows, table = table2(["3vs5"], quick=True, verbose=False)
    assert len(rows) == 1
    row = rows[0]
    assert TABLE2_COLUMNS <= set(row)
    assert row["n_train"] == 300 and row["n_test"] == 300 and row["num_inducing"] == 10
    assert row["repetitions"] == 2 and len(row["errors"]) == 2
    assert 0.0 <= row["fitc_bsvm_error"] <= 1.0 and row["fitc_bsvm_error_sd"] >= 0.0
    assert all(0.0 <= e <= 1.0 for e in row["errors"])
    assert row["paper_fitc_bsvm_error"] == pytest.approx(0.0349)
    assert "| 3 vs 5 |" in table and "QUICK MODE" in table


@needs_data
def test_run_dispatches_and_writes_outputs(tmp_path):
    cfg = {"experiment": {"name": "henao_table1", "datasets": ["crabs"], "methods": ["svm"], "quick": True,
                          "verbose": False}}
    metrics = run(cfg, tmp_path)
    assert metrics["experiment"] == "henao_table1"
    assert 0.0 <= metrics["crabs/svm_error"] <= 1.0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["rows"][0]["key"] == "crabs" and "machine" in saved
    assert (tmp_path / "table.md").read_text().startswith("| Data set |")


def test_run_rejects_unknown_experiment(tmp_path):
    with pytest.raises(ValueError, match="Unknown experiment"):
        run({"experiment": {"name": "nope"}}, tmp_path)
