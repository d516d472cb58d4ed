"""Evaluation metrics for binary classifiers.

Thin wrappers over :mod:`sklearn.metrics` that take the original class labels
and the predicted probability of the positive class. Pure NumPy.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
from sklearn import metrics as skm
from sklearn.exceptions import UndefinedMetricWarning

__all__ = [
    "auc",
    "balanced_error_rate",
    "brier_score",
    "calibration_bins",
    "classification_report_dict",
    "error_rate",
    "expected_calibration_error",
    "log_loss",
]


def _as_1d(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def _check_lengths(**arrays: np.ndarray) -> None:
    lengths = {k: v.shape[0] for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k} has {n}" for k, n in lengths.items())
        raise ValueError(
            f"Inputs have inconsistent numbers of samples: {detail}."
        )
    if next(iter(lengths.values())) == 0:
        raise ValueError("Metrics need at least one sample; got empty inputs.")


def _labels(y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    """``y_true`` and ``y_pred`` as 1-D arrays of the same, non-zero length."""
    yt, yp = _as_1d(y_true, "y_true"), _as_1d(y_pred, "y_pred")
    _check_lengths(y_true=yt, y_pred=yp)
    return yt, yp


def _positive_indicator(y_true: Any, pos_label: Any) -> np.ndarray:
    """Return ``y_true == pos_label`` as 0/1 floats, checking the labels."""
    y = _as_1d(y_true, "y_true")
    labels = np.unique(y)
    if labels.shape[0] > 2:
        raise ValueError(
            f"y_true has {labels.shape[0]} classes ({list(labels[:10])}); these "
            "metrics are for binary problems."
        )
    is_pos = y == pos_label
    if labels.shape[0] == 2 and not is_pos.any():
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the labels in y_true "
            f"({labels[0]!r}, {labels[1]!r})."
        )
    return np.asarray(is_pos, dtype=np.float64)


def _check_proba(proba_pos: Any) -> np.ndarray:
    p = _as_1d(proba_pos, "proba_pos").astype(np.float64)
    if not np.all(np.isfinite(p)):
        raise ValueError("proba_pos contains NaN or infinity.")
    if p.size and (p.min() < 0.0 or p.max() > 1.0):
        raise ValueError(
            f"proba_pos must lie in [0, 1]; got values in [{p.min():g}, {p.max():g}]."
        )
    return p


def _outcomes_and_proba(y_true: Any, proba_pos: Any, pos_label: Any) -> tuple[np.ndarray, np.ndarray]:
    """Checked 0/1 outcomes and positive-class probabilities of the same length.

    Parameters
    ----------
    y_true, proba_pos, pos_label
        As in :func:`brier_score`.

    Returns
    -------
    y01 : numpy.ndarray of shape (n_samples,)
        ``1.0`` where ``y_true == pos_label``, else ``0.0``.
    p : numpy.ndarray of shape (n_samples,)
        ``proba_pos`` as float64.
    """
    y01 = _positive_indicator(y_true, pos_label)
    p = _check_proba(proba_pos)
    _check_lengths(y_true=y01, proba_pos=p)
    return y01, p


def error_rate(y_true: Any, y_pred: Any) -> float:
    """Fraction of misclassified samples, ``1 - accuracy``.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels.

    Returns
    -------
    float
    """
    yt, yp = _labels(y_true, y_pred)
    return float(1.0 - skm.accuracy_score(yt, yp))


def balanced_error_rate(y_true: Any, y_pred: Any) -> float:
    """One minus the balanced accuracy (the mean of per-class recalls).

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels; every class of ``y_true`` weighs the same.

    Returns
    -------
    float
    """
    yt, yp = _labels(y_true, y_pred)
    with warnings.catch_warnings():
        # predicted labels absent from y_true are harmless here
        warnings.simplefilter("ignore", UserWarning)
        return float(1.0 - skm.balanced_accuracy_score(yt, yp))


def brier_score(y_true: Any, proba_pos: Any, pos_label: Any) -> float:
    """Mean squared difference between ``proba_pos`` and the 0/1 outcome.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    proba_pos : array-like of shape (n_samples,)
        Predicted probability of ``pos_label``.
    pos_label : object
        The positive class.

    Returns
    -------
    float
        ``mean((1[y == pos_label] - proba_pos) ** 2)``.
    """
    y01, p = _outcomes_and_proba(y_true, proba_pos, pos_label)
    return float(skm.brier_score_loss(y01, p, pos_label=1.0))


def log_loss(y_true: Any, proba_pos: Any, pos_label: Any, *, eps: float = 1e-15) -> float:
    """Mean negative log-likelihood of the true labels (cross-entropy).

    Parameters
    ----------
    y_true, pos_label
        As in :func:`brier_score`.
    proba_pos : array-like of shape (n_samples,)
        Predicted probability of ``pos_label``; clipped to ``[eps, 1 - eps]``
        so that confident mistakes give a large but finite loss.
    eps : float, default=1e-15
        Clipping threshold.

    Returns
    -------
    float
    """
    y01, p = _outcomes_and_proba(y_true, proba_pos, pos_label)
    p = np.clip(p, eps, 1.0 - eps)
    proba = np.column_stack([1.0 - p, p])
    return float(skm.log_loss(y01.astype(np.int64), proba, labels=[0, 1]))


def expected_calibration_error(
    y_true: Any,
    proba_pos: Any,
    pos_label: Any,
    n_bins: int = 10,
    *,
    confidence: Literal["top_label", "positive"] = "top_label",
) -> float:
    """Expected calibration error with equal-width bins.

    ``ECE = sum_b (n_b / n) * |acc_b - conf_b|`` over the bins ``b`` of
    ``[0, 1]`` split into ``n_bins`` intervals of equal width (right-closed,
    with 0 in the first bin).

    Parameters
    ----------
    y_true, proba_pos, pos_label
        As in :func:`brier_score`.
    n_bins : int, default=10
        Number of bins.
    confidence : {"top_label", "positive"}, default="top_label"
        ``"top_label"`` (Guo et al., 2017): the confidence is
        ``max(p, 1 - p)`` of the predicted class (positive when ``p > 0.5``)
        and ``acc_b`` is the accuracy of those predictions in the bin.
        ``"positive"``: the confidence is ``p`` itself and ``acc_b`` is the
        fraction of positives in the bin (the reliability-diagram version).

    Returns
    -------
    float
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"Invalid value for n_bins: {n_bins!r} (must be an integer >= 1)")
    y01, p = _outcomes_and_proba(y_true, proba_pos, pos_label)
    if confidence == "top_label":
        pred_pos = p > 0.5
        conf = np.where(pred_pos, p, 1.0 - p)
        hit = (pred_pos == (y01 == 1.0)).astype(np.float64)
    elif confidence == "positive":
        conf = p
        hit = y01
    else:
        raise ValueError(
            f"Invalid value for confidence: {confidence!r}; valid options are "
            "'positive', 'top_label'"
        )
    _, _, counts, gaps = calibration_bins(conf, hit, n_bins)
    return float(np.sum(counts * gaps) / conf.shape[0])


def calibration_bins(
    confidence: np.ndarray, outcome: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Equal-width bins of ``[0, 1]`` (right-closed, 0 in the first bin; the assignment of
    :func:`sklearn.calibration.calibration_curve` with ``strategy="uniform"``), empty bins dropped.

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        Probabilities in ``[0, 1]``.
    outcome : ndarray of shape (n,)
        1.0 where the event the probability is for happened, else 0.0.
    n_bins : int
        Number of bins.

    Returns
    -------
    mean_confidence, mean_outcome, counts, gaps : ndarray
        Per non-empty bin: the mean confidence, the mean outcome (fraction of events), the number
        of points and ``|mean_outcome - mean_confidence|``.
    """
    edges = np.linspace(0.0, 1.0, int(n_bins) + 1)
    idx = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, int(n_bins) - 1)
    counts = np.bincount(idx, minlength=n_bins)
    sum_conf = np.bincount(idx, weights=confidence, minlength=n_bins)
    sum_hit = np.bincount(idx, weights=outcome, minlength=n_bins)
    nonempty = counts > 0
    n_b = counts[nonempty]
    mean_conf, mean_hit = sum_conf[nonempty] / n_b, sum_hit[nonempty] / n_b
    return mean_conf, mean_hit, n_b, np.abs(mean_hit - mean_conf)


def auc(y_true: Any, score: Any, pos_label: Any) -> float:
    """Area under the ROC curve.

    Parameters
    ----------
    y_true, pos_label
        As in :func:`brier_score`.
    score : array-like of shape (n_samples,)
        Any score that increases with the evidence for ``pos_label``
        (a probability or a decision value).

    Returns
    -------
    float
        NaN (with an :class:`~sklearn.exceptions.UndefinedMetricWarning`)
        when ``y_true`` holds a single class.
    """
    y01 = _positive_indicator(y_true, pos_label)
    s = _as_1d(score, "score").astype(np.float64)
    _check_lengths(y_true=y01, score=s)
    if not np.all(np.isfinite(s)):
        raise ValueError("score contains NaN or infinity.")
    if np.unique(y01).shape[0] < 2:
        warnings.warn(
            "Only one class is present in y_true; ROC AUC is not defined and NaN "
            "is returned.",
            UndefinedMetricWarning,
            stacklevel=2,
        )
        return float("nan")
    return float(skm.roc_auc_score(y01, s))


def classification_report_dict(
    y_true: Any, y_pred: Any, proba_pos: Any, pos_label: Any
) -> dict[str, float]:
    """All the metrics of this module in one dictionary.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels.
    proba_pos : array-like of shape (n_samples,)
        Predicted probability of ``pos_label`` (also used as the AUC score).
    pos_label : object
        The positive class.

    Returns
    -------
    dict of str to float
        Keys ``"error"``, ``"balanced_error"``, ``"brier"``, ``"log_loss"``,
        ``"ece"`` and ``"auc"``.
    """
    return {
        "error": error_rate(y_true, y_pred),
        "balanced_error": balanced_error_rate(y_true, y_pred),
        "brier": brier_score(y_true, proba_pos, pos_label),
        "log_loss": log_loss(y_true, proba_pos, pos_label),
        "ece": expected_calibration_error(y_true, proba_pos, pos_label),
        "auc": auc(y_true, proba_pos, pos_label),
    }
