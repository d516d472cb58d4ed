"""Label coding: class labels, the binary and one-vs-rest label encoders of the classifiers."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError

from bayes_maxmargin.data.validation import _fmt_list, _fmt_value, _is_missing_scalar

__all__ = ["BinaryLabelEncoder", "OneVsRestLabelEncoder", "class_labels", "n_classes_of"]


def class_labels(y: Any) -> np.ndarray:
    """The sorted distinct labels of a 1-d label vector (as :func:`numpy.unique` sorts them).

    Raises
    ------
    ValueError
        If ``y`` is not 1-d, is empty or contains NaN / None.
    TypeError
        If the labels cannot be sorted (e.g. a mix of strings and numbers).
    """
    arr = BinaryLabelEncoder._as_1d(y)
    if arr.shape[0] == 0:
        raise ValueError("y is empty: a classifier needs labels of two classes.")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError("Input y contains NaN; every sample needs a class label.")
    if arr.dtype.kind == "O" and any(_is_missing_scalar(v) for v in arr):
        raise ValueError("Input y contains NaN or None; every sample needs a class label.")
    try:
        return np.unique(arr)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in arr})
        raise TypeError(
            f"The labels in y cannot be sorted (they mix the types {', '.join(kinds)}): "
            f"{exc}. Use labels of a single type."
        ) from exc


def n_classes_of(y: Any) -> int:
    """Number of distinct labels of ``y``; 0 when ``y`` is not a valid label vector (the caller's
    own validation then reports why)."""
    try:
        return int(class_labels(y).shape[0])
    except (TypeError, ValueError):
        return 0


def _two_or_more_classes(y: Any) -> np.ndarray:
    """The sorted class labels of ``y`` (:func:`class_labels`); ValueError for a single class."""
    classes = class_labels(y)
    if classes.shape[0] == 1:
        raise ValueError(f"y contains only one class (label {_fmt_value(classes[0])}); a classifier needs two.")
    return classes


class OneVsRestLabelEncoder:
    """Code the K > 2 labels of a multi-class problem as K one-vs-rest problems.

    ``classes_`` holds the sorted labels; :meth:`transform` returns the (K, n) matrix whose row
    k is +1 where ``y == classes_[k]`` and -1 elsewhere (class k against the rest).

    Parameters
    ----------
    estimator_name : str or None, default=None
        As in :class:`BinaryLabelEncoder`.

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (n_classes,)

    Examples
    --------
    >>> enc = OneVsRestLabelEncoder().fit(["a", "b", "c", "a"])
    >>> enc.transform(["a", "c"])
    array([[ 1., -1.],
           [-1., -1.],
           [-1.,  1.]])
    """

    def __init__(self, estimator_name: str | None = None) -> None:
        self.estimator_name = estimator_name

    def fit(self, y: Any) -> OneVsRestLabelEncoder:
        """Learn the class labels (at least two)."""
        self.classes_ = _two_or_more_classes(y)
        return self

    def transform(self, y: Any) -> np.ndarray:
        """The (n_classes, n_samples) matrix of +-1 one-vs-rest codes.

        Raises
        ------
        ValueError
            If ``y`` contains a label not seen in ``fit``.
        """
        if not hasattr(self, "classes_"):
            raise NotFittedError("This OneVsRestLabelEncoder instance is not fitted yet. Call 'fit' first.")
        arr = BinaryLabelEncoder._as_1d(y).astype(object)
        known = [c.item() if isinstance(c, np.generic) else c for c in self.classes_]
        index = {c: k for k, c in enumerate(known)}
        codes = np.array([index.get(v.item() if isinstance(v, np.generic) else v, -1) for v in arr])
        if (codes < 0).any():
            bad = list(dict.fromkeys(_fmt_value(v) for v in arr[codes < 0]))
            raise ValueError(f"y contains label(s) not seen during fit: {_fmt_list(bad)}.")
        return np.where(codes[None, :] == np.arange(len(known))[:, None], 1.0, -1.0)

    def fit_transform(self, y: Any) -> np.ndarray:
        """Fit the encoder and return the one-vs-rest codes of ``y``."""
        return self.fit(y).transform(y)

    def inverse_transform(self, index: Any) -> np.ndarray:
        """Labels of the class indices ``index`` (e.g. an argmax over the class axis)."""
        return self.classes_[np.asarray(index, dtype=int)]


class BinaryLabelEncoder:
    """Map the two class labels of a binary problem to -1 / +1.

    ``classes_`` holds the sorted labels; ``classes_[1]`` is coded +1 and
    ``classes_[0]`` is coded -1.

    Parameters
    ----------
    estimator_name : str or None, default=None
        Name of the estimator using the encoder, used in messages.

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (2,)
        The two labels, sorted as by :func:`numpy.unique`.

    Examples
    --------
    >>> enc = BinaryLabelEncoder().fit(["no", "yes", "no"])
    >>> enc.transform(["yes", "no"])
    array([ 1., -1.])
    >>> enc.inverse_transform([1.0, -1.0])
    array(['yes', 'no'], dtype='<U3')
    """

    def __init__(self, estimator_name: str | None = None) -> None:
        self.estimator_name = estimator_name

    @staticmethod
    def _as_1d(y: Any) -> np.ndarray:
        arr = np.asarray(y)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr.ravel()
        if arr.ndim != 1:
            raise ValueError(
                f"y should be a 1d array, got an array of shape {arr.shape} instead."
            )
        return arr

    def fit(self, y: Any) -> BinaryLabelEncoder:
        """Learn the two class labels.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Labels of any type that :func:`numpy.unique` can sort (ints,
            floats, strings, bools, or an object array of mutually comparable
            values).

        Returns
        -------
        self : BinaryLabelEncoder

        Raises
        ------
        ValueError
            If ``y`` is empty, contains NaN, or does not have exactly two
            distinct labels.
        TypeError
            If the labels cannot be sorted (e.g. a mix of strings and numbers).
        """
        classes = _two_or_more_classes(y)
        who = self.estimator_name or "this estimator"
        if classes.shape[0] > 2:
            raise ValueError(
                f"y contains {classes.shape[0]} classes "
                f"({_fmt_list(list(classes), as_repr=True)}); multi-class "
                f"classification is not supported by {who}. Only binary "
                "classification is supported (exactly two classes)."
            )
        self.classes_ = classes
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "classes_"):
            raise NotFittedError(
                "This BinaryLabelEncoder instance is not fitted yet. Call 'fit' first."
            )

    def transform(self, y: Any) -> np.ndarray:
        """Code labels as -1.0 / +1.0.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Labels, each one of ``classes_``.

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
            +1.0 where ``y == classes_[1]`` and -1.0 where ``y == classes_[0]``.

        Raises
        ------
        ValueError
            If ``y`` contains a label not seen in ``fit``.
        """
        self._check_fitted()
        arr = self._as_1d(y)
        c0, c1 = self.classes_
        same_kind = (
            arr.dtype.kind in "biuf" and self.classes_.dtype.kind in "biuf"
        ) or (arr.dtype.kind in "US" and arr.dtype.kind == self.classes_.dtype.kind)
        if same_kind:
            is_pos = arr == c1
            is_neg = arr == c0
        else:
            obj = arr.astype(object)
            c0o, c1o = (c.item() if isinstance(c, np.generic) else c for c in (c0, c1))
            is_pos = np.fromiter((v == c1o for v in obj), dtype=bool, count=obj.shape[0])
            is_neg = np.fromiter((v == c0o for v in obj), dtype=bool, count=obj.shape[0])
        unseen = ~(is_pos | is_neg)
        if unseen.any():
            bad = list(dict.fromkeys(_fmt_value(v) for v in arr[unseen]))
            raise ValueError(
                f"y contains label(s) not seen during fit: {_fmt_list(bad)} "
                f"(known classes: {_fmt_value(c0)}, {_fmt_value(c1)})."
            )
        return np.where(is_pos, 1.0, -1.0)

    def fit_transform(self, y: Any) -> np.ndarray:
        """Fit the encoder and code ``y`` as -1.0 / +1.0.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Labels.

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
            Coded labels.
        """
        return self.fit(y).transform(y)

    def inverse_transform(self, signs: Any) -> np.ndarray:
        """Map signs (or real-valued decisions) back to labels.

        Parameters
        ----------
        signs : array-like of shape (n_samples,)
            Values > 0 map to ``classes_[1]``, values <= 0 to ``classes_[0]``.

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
            Labels with the dtype of ``classes_``.

        Raises
        ------
        ValueError
            If ``signs`` holds NaN.
        """
        self._check_fitted()
        s = self._as_1d(signs)
        if s.dtype.kind not in "biuf":
            try:
                s = s.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"signs must be real numbers (+1 / -1), got dtype {s.dtype}"
                ) from exc
        if s.dtype.kind == "f" and np.isnan(s).any():
            raise ValueError("signs contains NaN; cannot map it to a class label.")
        return self.classes_[(s > 0).astype(np.intp)]
