"""Metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.exceptions import UndefinedMetricWarning

from bayes_maxmargin.metrics import (
    auc,
    balanced_error_rate,
    brier_score,
    classification_report_dict,
    error_rate,
    expected_calibration_error,
    log_loss,
)

# Five samples: positives at 0, 2, 3; predictions threshold p at 0.5.
Y = np.array([1, -1, 1, 1, -1])
P = np.array([0.9, 0.2, 0.6, 0.4, 0.7])
Y_PRED = np.array([1, -1, 1, -1, 1])  # wrong at 3 and 4

Y_STR = np.where(Y == 1, "yes", "no")
Y_PRED_STR = np.where(Y_PRED == 1, "yes", "no")


def test_error_rate():
    assert error_rate(Y, Y_PRED) == pytest.approx(2 / 5)
    assert error_rate(Y_STR, Y_PRED_STR) == pytest.approx(2 / 5)
    assert error_rate(Y, Y) == 0.0


def test_balanced_error_rate():
    # recall of +1: 2/3, recall of -1: 1/2 -> balanced accuracy 7/12
    assert balanced_error_rate(Y, Y_PRED) == pytest.approx(5 / 12)
    assert balanced_error_rate(Y_STR, Y_PRED_STR) == pytest.approx(5 / 12)


def test_brier_score():
    # (0.1^2 + 0.2^2 + 0.4^2 + 0.6^2 + 0.7^2) / 5
    assert brier_score(Y, P, 1) == pytest.approx(1.06 / 5)
    assert brier_score(Y_STR, P, "yes") == pytest.approx(1.06 / 5)
    # the other class as positive: probabilities are 1 - P
    assert brier_score(Y, 1 - P, -1) == pytest.approx(1.06 / 5)


def test_brier_score_single_class():
    assert brier_score([-1, -1], [0.2, 0.4], 1) == pytest.approx((0.04 + 0.16) / 2)


def test_log_loss():
    expected = -(math.log(0.9) + math.log(0.8) + math.log(0.6) + math.log(0.4) + math.log(0.3)) / 5
    assert log_loss(Y, P, 1) == pytest.approx(expected)
    assert log_loss(Y_STR, P, "yes") == pytest.approx(expected)


def test_log_loss_clips_certain_mistakes():
    value = log_loss([1, -1], [0.0, 0.0], 1)
    assert math.isfinite(value)
    assert value == pytest.approx(-math.log(1e-15) / 2, rel=1e-6)
    # p is clipped to 1e-3: -(log(1e-3) + log(1 - 1e-3)) / 2
    expected = -(math.log(1e-3) + math.log(1 - 1e-3)) / 2
    assert log_loss([1, -1], [0.0, 0.0], 1, eps=1e-3) == pytest.approx(expected)


def test_ece_top_label():
    # confidences 0.9, 0.8, 0.6, 0.6, 0.7; correct: T, T, T, F, F
    # bins (0.8,0.9]: |1-0.9|; (0.7,0.8]: |1-0.8|; (0.5,0.6]: 2*|0.5-0.6|; (0.6,0.7]: |0-0.7|
    assert expected_calibration_error(Y, P, 1) == pytest.approx((0.1 + 0.2 + 0.2 + 0.7) / 5)
    assert expected_calibration_error(Y_STR, P, "yes") == pytest.approx(0.24)


def test_ece_positive_confidence():
    # one sample per bin: |y - p| = 0.1, 0.2, 0.4, 0.6, 0.7
    value = expected_calibration_error(Y, P, 1, confidence="positive")
    assert value == pytest.approx(2.0 / 5)


def test_ece_single_bin_and_perfect_calibration():
    # one bin: |accuracy - mean confidence| = |3/5 - 0.72|
    assert expected_calibration_error(Y, P, 1, n_bins=1) == pytest.approx(0.12)
    y = np.array([1, -1, -1, -1])
    p = np.full(4, 0.25)
    assert expected_calibration_error(y, p, 1) == pytest.approx(0.0)
    assert expected_calibration_error(y, p, 1, confidence="positive") == pytest.approx(0.0)


def test_ece_bad_arguments():
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error(Y, P, 1, n_bins=0)
    with pytest.raises(ValueError, match="confidence"):
        expected_calibration_error(Y, P, 1, confidence="nope")


def test_auc():
    # positive scores {0.9, 0.6, 0.4} vs negative {0.2, 0.7}: 4 of 6 pairs ordered
    assert auc(Y, P, 1) == pytest.approx(4 / 6)
    assert auc(Y_STR, P, "yes") == pytest.approx(4 / 6)
    assert auc(Y, -P, -1) == pytest.approx(4 / 6)


def test_auc_single_class_is_nan():
    with pytest.warns(UndefinedMetricWarning):
        assert math.isnan(auc([1, 1, 1], [0.1, 0.5, 0.9], 1))


def test_classification_report_dict():
    report = classification_report_dict(Y, Y_PRED, P, 1)
    assert set(report) == {"error", "balanced_error", "brier", "log_loss", "ece", "auc"}
    assert all(isinstance(v, float) for v in report.values())
    assert report["error"] == pytest.approx(0.4)
    assert report["balanced_error"] == pytest.approx(5 / 12)
    assert report["brier"] == pytest.approx(0.212)
    assert report["ece"] == pytest.approx(0.24)
    assert report["auc"] == pytest.approx(2 / 3)
    assert report["log_loss"] == pytest.approx(log_loss(Y, P, 1))


def test_input_errors():
    with pytest.raises(ValueError, match="pos_label=2"):
        brier_score(Y, P, 2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        log_loss(Y, P + 0.5, 1)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        auc(Y, P[:4], 1)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        error_rate(Y, Y_PRED[:3])
    with pytest.raises(ValueError, match="binary"):
        brier_score([0, 1, 2], [0.1, 0.2, 0.3], 1)
