"""The Henao et al. (2014) Table 1 / Table 2 reproductions: the paper's numbers, the rows of Table 1
(scikit-learn methods; every method's smoke run is in test_experiment_runner.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from bayes_maxmargin.experiments.henao2014 import PAPER_TABLE1, PAPER_TABLE2, table1

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


def test_paper_numbers_are_fractions_of_the_published_tables():
    assert PAPER_TABLE1["ionosphere"]["bsvm"] == 5.98
    assert PAPER_TABLE1["usps_3vs5"]["gpc"] == 1.69
    assert PAPER_TABLE2["4vsnon4"]["bsvm"] == (2.44, 0.17)


@needs_data
def test_table1_quick_rows_and_markdown():
    rows, table = table1(["crabs"], methods=["svm", "gpc"], quick=True, verbose=False)
    assert len(rows) == 1
    row = rows[0]
    assert TABLE1_COLUMNS <= set(row)
    assert row["n"] == 200 and row["d"] == 7 and row["n_folds"] == 2
    assert row["preprocessing"] == "standardised per fold"
    for m in ("svm", "gpc"):
        assert 0.0 <= row[f"{m}_error"] <= 0.2  # crabs is nearly separable after standardising
        assert len(row[f"{m}_fold_errors"]) == 2 == len(row[f"{m}_fold_times"])
        assert row[f"{m}_time_s"] == pytest.approx(sum(row[f"{m}_fold_times"]))
        assert row[f"{m}_error"] == pytest.approx(np.mean(row[f"{m}_fold_errors"]))
    assert row["bsvm_error"] is None and row["bsvm_fold_errors"] is None  # not run: n/a
    assert row["paper_bsvm_error"] == pytest.approx(0.015)
    assert "| Crabs | 200 | 7 |" in table and "Laplace" in table and "QUICK MODE" in table and "n/a" in table
    with pytest.raises(ValueError, match="Unknown methods"):
        table1(["crabs"], methods=["knn"], quick=True)
