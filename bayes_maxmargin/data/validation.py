"""Input validation shared by every entry point of the package.

The functions here turn user input into clean NumPy arrays and raise errors
that say precisely what is wrong (which argument, which column, which value).
The messages also contain the phrases that scikit-learn's estimator checks
(``parametrize_with_checks``) look for, because the estimators of this package
validate their input with these functions.

This module is pure NumPy (plus scikit-learn helpers); it never imports JAX.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils import column_or_1d
from sklearn.utils.multiclass import check_classification_targets

__all__ = [
    "InvalidParameterError",
    "check_array_2d",
    "check_X_y",
    "check_n_features",
    "BinaryLabelEncoder",
    "OneVsRestLabelEncoder",
    "class_labels",
    "n_classes_of",
    "check_scalar_param",
    "check_option",
    "check_kernel_params",
]

#: How many column indices / class labels an error message lists at most.
_MAX_LISTED = 10


class InvalidParameterError(ValueError, TypeError):
    """A hyperparameter has an invalid type or value.

    Subclasses both :class:`ValueError` and :class:`TypeError`, so callers may
    catch either (as with scikit-learn's own parameter validation).
    """


# ---------------------------------------------------------------------------
# small formatting helpers
# ---------------------------------------------------------------------------


def _fmt_value(value: Any, max_len: int = 60) -> str:
    """Return a short ``repr`` of a value, unwrapping NumPy scalars."""
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value)
    if len(text) > max_len:
        text = text[: max_len - 3] + "..."
    return text


def _fmt_list(values: Sequence[Any], *, as_repr: bool = False) -> str:
    """Format a list for an error message, truncated to ``_MAX_LISTED`` items."""
    items = [(_fmt_value(v) if as_repr else str(v)) for v in values[:_MAX_LISTED]]
    if len(values) > _MAX_LISTED:
        items.append(f"... ({len(values)} in all)")
    return ", ".join(items)


def _column_label(j: int, columns: Sequence[Any] | None) -> str:
    """Return ``"3"`` or ``"3 ('name')"`` for column ``j``."""
    if columns is None:
        return str(j)
    return f"{j} ({_fmt_value(columns[j])})"


def _by(estimator_name: str | None) -> str:
    return f" by {estimator_name}" if estimator_name else ""


def _is_dataframe(X: Any) -> bool:
    """Duck-typed test for a pandas DataFrame (pandas is imported lazily)."""
    return (
        hasattr(X, "columns")
        and hasattr(X, "iloc")
        and hasattr(X, "dtypes")
        and getattr(X, "ndim", None) == 2
    )


def _is_missing_scalar(value: Any) -> bool:
    """Whether an object-array cell encodes a missing value."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    # pandas.NA and pandas.NaT, detected without importing pandas
    return type(value).__name__ in ("NAType", "NaTType")


# ---------------------------------------------------------------------------
# conversion of non-float data, with precise messages
# ---------------------------------------------------------------------------


def _non_numeric_error(
    name: str, j: int, columns: Sequence[Any] | None, i: int, value: Any
) -> ValueError:
    return ValueError(
        f"{name} column {_column_label(j, columns)} has a non-numeric value "
        f"{_fmt_value(value)} (row {i}); convert it to numbers"
    )


def _complex_error(name: str, detail: str) -> ValueError:
    return ValueError(f"Complex data not supported: {detail}. Pass real numbers for {name}.")


def _object_column_to_float(
    col: np.ndarray, j: int, columns: Sequence[Any] | None, name: str
) -> np.ndarray:
    """Convert one object column to float, or raise naming the first bad cell."""
    types = {type(v) for v in col}
    numeric_types = all(
        (issubclass(t, numbers.Real) or issubclass(t, (Decimal, np.bool_)))
        for t in types
    )
    if not numeric_types:
        out = np.empty(col.shape[0], dtype=np.float64)
        for i, v in enumerate(col):
            if _is_missing_scalar(v):
                out[i] = np.nan
            elif isinstance(v, (bool, np.bool_, numbers.Real, Decimal)):
                out[i] = float(v)
            elif isinstance(v, (str, bytes)):
                raise _non_numeric_error(name, j, columns, i, v)
            elif isinstance(v, (numbers.Complex, np.complexfloating)):
                raise _complex_error(
                    name,
                    f"{name} column {_column_label(j, columns)} has the complex "
                    f"value {_fmt_value(v)} (row {i})",
                )
            else:
                raise TypeError(
                    f"{name} column {_column_label(j, columns)} has a value of type "
                    f"{type(v).__name__} (row {i}): {_fmt_value(v)}; float() argument "
                    f"must be a string or a real number, not '{type(v).__name__}'"
                )
        return out
    try:
        return col.astype(np.float64)
    except OverflowError as exc:  # e.g. a Python int larger than 1e308
        raise ValueError(
            f"{name} column {_column_label(j, columns)} holds a number too large "
            f"for float64: {exc}"
        ) from exc


def _ndarray_to_float(arr: np.ndarray, name: str, dtype: np.dtype) -> np.ndarray:
    """Convert a 2-D array of any dtype to a fresh C-contiguous float array."""
    kind = arr.dtype.kind
    if kind in "biuf":
        return np.array(arr, dtype=dtype, order="C", copy=True)
    if kind == "c":
        raise _complex_error(name, f"{name} has the complex dtype {arr.dtype}")
    if kind in "US":
        # every cell is a string: report the first one
        raise _non_numeric_error(name, 0, None, 0, arr[0, 0])
    if kind == "O":
        out = np.empty(arr.shape, dtype=dtype, order="C")
        for j in range(arr.shape[1]):
            out[:, j] = _object_column_to_float(arr[:, j], j, None, name)
        return out
    raise TypeError(
        f"{name} has dtype {arr.dtype}, which is not numeric; float() argument must "
        f"be a string or a real number. Convert {name} to numbers first"
    )


def _dataframe_to_float(df: Any, name: str, dtype: np.dtype) -> np.ndarray:
    """Convert a pandas DataFrame column by column, naming bad columns."""
    import pandas as pd

    columns = list(df.columns)
    dtypes = list(df.dtypes)
    if all(isinstance(dt, np.dtype) and dt.kind in "biuf" for dt in dtypes):
        return np.ascontiguousarray(df.to_numpy(dtype=dtype, copy=True))
    out = np.empty(df.shape, dtype=dtype, order="C")
    for j, dt in enumerate(dtypes):
        series = df.iloc[:, j]
        if isinstance(dt, np.dtype) and dt.kind in "biuf":
            out[:, j] = series.to_numpy(dtype=np.float64)
        elif isinstance(dt, np.dtype) and dt.kind == "c":
            raise _complex_error(
                name, f"{name} column {_column_label(j, columns)} has dtype {dt}"
            )
        elif not isinstance(dt, pd.CategoricalDtype) and (
            pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt)
        ):
            # nullable extension dtypes (Int64, Float64, boolean): NA -> NaN
            out[:, j] = series.to_numpy(dtype=np.float64, na_value=np.nan)
        elif isinstance(dt, np.dtype) and dt.kind in "mM":
            raise TypeError(
                f"{name} column {_column_label(j, columns)} has dtype {dt}, which is "
                "not numeric; float() argument must be a string or a real number. "
                "Convert it to numbers first"
            )
        else:
            col = np.asarray(series.to_numpy(dtype=object), dtype=object)
            out[:, j] = _object_column_to_float(col, j, columns, name)
    return out


# ---------------------------------------------------------------------------
# public validators
# ---------------------------------------------------------------------------


def check_array_2d(
    X: Any,
    *,
    name: str = "X",
    allow_nan: bool = False,
    dtype: Any = np.float64,
    ensure_min_samples: int = 1,
    estimator_name: str | None = None,
    nan_hint: str | None = None,
) -> np.ndarray:
    """Validate a feature matrix and return it as a fresh float array.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        A nested list, a NumPy array of any numeric or boolean dtype, an object
        array holding numbers, a pandas DataFrame or a (read-only) memmap.
        ``None`` and ``pandas.NA`` cells in object data count as missing (NaN).
    name : str, default="X"
        Name of the argument, used in error messages.
    allow_nan : bool, default=False
        Whether NaN (missing) cells are accepted. Infinite values are always
        rejected.
    dtype : numpy dtype, default=np.float64
        Floating dtype of the result.
    ensure_min_samples : int, default=1
        Minimum number of rows.
    estimator_name : str or None, default=None
        Name of the calling estimator, added to some messages.
    nan_hint : str or None, default=None
        Sentence appended to the NaN error message (for example, how to let the
        estimator model missing values).

    Returns
    -------
    numpy.ndarray of shape (n_samples, n_features)
        A C-contiguous copy of ``X`` with dtype ``dtype``. The input is never
        modified.

    Raises
    ------
    TypeError
        If ``X`` is sparse, or holds objects that are neither numbers nor
        strings (the message contains "argument must be a string or a real
        number").
    ValueError
        If ``X`` is not 2-D, has too few samples or no features, holds strings
        or complex numbers, or holds NaN (unless ``allow_nan``) or infinity.
    """
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    if X is None:
        raise ValueError(
            f"Expected 2D array, got None instead for {name}: pass an array-like of "
            "shape (n_samples, n_features)."
        )
    if sp.issparse(X):
        raise TypeError(
            f"Sparse input is not supported: {name} is a scipy.sparse "
            f"{type(X).__name__} of shape {X.shape}; dense data is required. "
            f"Convert it with {name}.toarray() if it fits in memory."
        )

    columns: list[Any] | None = None
    if _is_dataframe(X):
        columns = list(X.columns)
        shape = tuple(X.shape)
        arr = None
    else:
        was_ndarray = isinstance(X, np.ndarray)
        try:
            arr = np.asarray(X)
            if not was_ndarray and arr.dtype.kind in "USO":
                # keep the original Python objects so that the offending cell,
                # not a number turned into a string, is reported
                arr = np.asarray(X, dtype=object)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{name} could not be converted to an array (are all rows the same "
                f"length?): {exc}"
            ) from exc
        shape = arr.shape

    ndim = len(shape)
    if ndim != 2:
        what = "scalar array" if ndim == 0 else f"{ndim}D array"
        raise ValueError(
            f"Expected 2D array, got {what} instead ({name} has shape {shape}). "
            f"Reshape your data either using {name}.reshape(-1, 1) if your data "
            f"has a single feature or {name}.reshape(1, -1) if it contains a "
            "single sample."
        )
    n_samples, n_features = shape
    if n_samples < ensure_min_samples:
        raise ValueError(
            f"Found array with {n_samples} sample(s) (shape={shape}) while a "
            f"minimum of {ensure_min_samples} is required{_by(estimator_name)}."
        )
    if n_features < 1:
        raise ValueError(
            f"Found array with {n_features} feature(s) (shape={shape}) while a "
            f"minimum of 1 is required{_by(estimator_name)}."
        )

    if arr is None:
        out = _dataframe_to_float(X, name, dtype)
    else:
        out = _ndarray_to_float(arr, name, dtype)

    finite = np.isfinite(out)
    if not finite.all():
        bad = ~finite
        if not allow_nan:
            nan_cols = np.flatnonzero(np.isnan(out).any(axis=0))
            if nan_cols.size:
                msg = f"Input {name} contains NaN in column(s) [{_fmt_list(list(nan_cols))}]"
                if columns is not None:
                    names = [columns[j] for j in nan_cols]
                    msg += f" ({_fmt_list(names, as_repr=True)})"
                if estimator_name:
                    msg += f"; {estimator_name} does not accept missing values encoded as NaN"
                msg += "."
                if nan_hint:
                    msg += f" {nan_hint}"
                raise ValueError(msg)
        inf_cols = np.flatnonzero((bad & ~np.isnan(out)).any(axis=0))
        if inf_cols.size:
            msg = f"Input {name} contains infinity in column(s) [{_fmt_list(list(inf_cols))}]"
            if columns is not None:
                names = [columns[j] for j in inf_cols]
                msg += f" ({_fmt_list(names, as_repr=True)})"
            msg += f" (or a value too large for dtype {dtype})."
            raise ValueError(msg)
    return out


def check_X_y(
    X: Any,
    y: Any,
    *,
    allow_nan: bool = False,
    estimator_name: str | None = None,
    nan_hint: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a feature matrix and a vector of class labels.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Features; see :func:`check_array_2d`.
    y : array-like of shape (n_samples,)
        Class labels. A column vector of shape ``(n_samples, 1)`` is accepted
        with a :class:`~sklearn.exceptions.DataConversionWarning`.
    allow_nan : bool, default=False
        Whether NaN cells are accepted in ``X`` (never in ``y``).
    estimator_name : str or None, default=None
        Name of the calling estimator, used in messages.
    nan_hint : str or None, default=None
        Sentence appended to the NaN error message for ``X``.

    Returns
    -------
    X : numpy.ndarray of shape (n_samples, n_features)
        C-contiguous float64 copy of ``X``.
    y : numpy.ndarray of shape (n_samples,)
        Copy of the labels, with their original dtype.

    Raises
    ------
    ValueError
        If ``y`` is missing, not 1-D, contains NaN/None, has a length that
        differs from ``X``, or is not a classification target (continuous
        values give scikit-learn's "Unknown label type" message).
    """
    if y is None:
        who = estimator_name or "This estimator"
        raise ValueError(
            f"{who} requires y to be passed, but the target y is None."
        )
    if sp.issparse(y):
        raise TypeError(
            "Sparse input is not supported for y: pass the labels as a dense 1-D array."
        )
    X_out = check_array_2d(
        X, allow_nan=allow_nan, estimator_name=estimator_name, nan_hint=nan_hint
    )

    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        y_arr = column_or_1d(y_arr, warn=True)
    y_arr = np.array(y_arr, copy=True)

    kind = y_arr.dtype.kind
    if kind == "c":
        raise ValueError("Complex data not supported: y has a complex dtype.")
    if kind == "f":
        missing = np.isnan(y_arr)
    elif kind == "O":
        missing = np.fromiter(
            (_is_missing_scalar(v) for v in y_arr), dtype=bool, count=y_arr.shape[0]
        )
    else:
        missing = None
    if missing is not None and missing.any():
        rows = np.flatnonzero(missing)
        raise ValueError(
            f"Input y contains NaN (missing labels) at row(s) [{_fmt_list(list(rows))}]; "
            "remove those samples or fill in their labels."
        )
    if kind == "f" and np.isinf(y_arr).any():
        rows = np.flatnonzero(np.isinf(y_arr))
        raise ValueError(f"Input y contains infinity at row(s) [{_fmt_list(list(rows))}].")

    n_x, n_y = X_out.shape[0], y_arr.shape[0]
    if n_x != n_y:
        raise ValueError(
            f"X and y have different lengths: X has {n_x} rows, y has {n_y} entries "
            f"(found input variables with inconsistent numbers of samples: [{n_x}, {n_y}])."
        )
    check_classification_targets(y_arr)
    return X_out, y_arr


def check_n_features(X: Any, n_features_in_: int, estimator_name: str) -> None:
    """Check that ``X`` has as many columns as the data seen in ``fit``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Validated 2-D input.
    n_features_in_ : int
        Number of features seen during ``fit``.
    estimator_name : str
        Name of the estimator, used in the message.

    Raises
    ------
    ValueError
        ``"X has 3 features, but Foo is expecting 4 features as input."``
    """
    shape = getattr(X, "shape", None)
    if shape is None:
        shape = np.shape(X)
    if len(shape) != 2:
        raise ValueError(
            f"Expected 2D array, got {len(shape)}D array instead (shape={tuple(shape)}). "
            "Reshape your data."
        )
    if shape[1] != n_features_in_:
        raise ValueError(
            f"X has {shape[1]} features, but {estimator_name} is expecting "
            f"{n_features_in_} features as input."
        )


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
        Name of the estimator using the encoder, used in messages.

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


def _describe_constraint(
    kind: str,
    low: float | None,
    high: float | None,
    low_inclusive: bool,
    high_inclusive: bool,
    allow_none: bool,
) -> str:
    noun = "an integer" if kind == "int" else "a real number"
    if low is not None and high is not None:
        left = "[" if low_inclusive else "("
        right = "]" if high_inclusive else ")"
        text = f"{noun} in {left}{low}, {high}{right}"
    elif low is not None:
        text = f"{noun} {'>=' if low_inclusive else '>'} {low}"
    elif high is not None:
        text = f"{noun} {'<=' if high_inclusive else '<'} {high}"
    else:
        text = noun
    if kind == "float" and low is None and high is None:
        text = "a finite real number"
    if allow_none:
        text += ", or None"
    return text


def check_scalar_param(
    name: str,
    value: Any,
    *,
    kind: Literal["float", "int"] = "float",
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_none: bool = False,
) -> float | int | None:
    """Validate a numeric hyperparameter.

    Parameters
    ----------
    name : str
        Name of the hyperparameter, used in the message.
    value : object
        The value to check.
    kind : {"float", "int"}, default="float"
        ``"int"`` accepts integers only (Python or NumPy); ``"float"`` accepts
        any finite real number. Booleans are rejected in both cases.
    low, high : float or None, default=None
        Bounds; ``None`` means unbounded.
    low_inclusive, high_inclusive : bool, default=True
        Whether the bounds themselves are allowed.
    allow_none : bool, default=False
        Whether ``None`` is a valid value (returned unchanged).

    Returns
    -------
    int, float or None
        ``value`` as a Python ``int`` (kind ``"int"``) or ``float``.

    Raises
    ------
    InvalidParameterError
        (a subclass of both ValueError and TypeError) if the value has the
        wrong type, is NaN or infinite, or is out of range; for example
        ``"Invalid value for num_samples: -3 (must be an integer >= 1)"``.
    """
    if kind not in ("float", "int"):
        raise ValueError(f"kind must be 'float' or 'int', got {kind!r}")
    constraint = _describe_constraint(
        kind, low, high, low_inclusive, high_inclusive, allow_none
    )

    def fail(reason: str = "") -> InvalidParameterError:
        return InvalidParameterError(
            f"Invalid value for {name}: {_fmt_value(value)} (must be {constraint}){reason}"
        )

    if value is None:
        if allow_none:
            return None
        raise fail()
    if isinstance(value, (bool, np.bool_)):
        raise fail("; booleans are not accepted")
    if kind == "int":
        if not isinstance(value, numbers.Integral):
            raise fail()
        result: int | float = int(value)
    else:
        if not isinstance(value, numbers.Real):
            raise fail()
        result = float(value)
        if not math.isfinite(result):
            raise fail()
    if low is not None and (result < low if low_inclusive else result <= low):
        raise fail()
    if high is not None and (result > high if high_inclusive else result >= high):
        raise fail()
    return result


def check_option(name: str, value: Any, options: Iterable[Any]) -> Any:
    """Check that a hyperparameter is one of a fixed set of options.

    Parameters
    ----------
    name : str
        Name of the hyperparameter, used in the message.
    value : object
        The value to check.
    options : iterable
        The valid values. Sets are listed in sorted order in the message,
        other iterables in their own order.

    Returns
    -------
    object
        ``value`` unchanged.

    Raises
    ------
    InvalidParameterError
        (a subclass of ValueError) e.g. ``"Invalid value for inference: 'foo';
        valid options are 'em', 'gibbs', 'nuts'"``.
    """
    if isinstance(options, (set, frozenset)):
        opts = sorted(options, key=repr)
    else:
        opts = list(options)
    valid = False
    for opt in opts:
        if isinstance(opt, (bool, np.bool_)) != isinstance(value, (bool, np.bool_)):
            continue  # do not let True stand for 1 (or the reverse)
        try:
            same = bool(opt == value)
        except (TypeError, ValueError):
            same = False
        if same:
            valid = True
            break
    if not valid:
        listed = ", ".join(_fmt_value(o) for o in opts)
        raise InvalidParameterError(
            f"Invalid value for {name}: {_fmt_value(value)}; valid options are {listed}"
        )
    return value


def check_kernel_params(kernel: str, user: Any, defaults: Any) -> Any:
    """The kernel parameters of an estimator: ``defaults`` overridden by the user's ``kernel_params``.

    Parameters
    ----------
    kernel : str
        The kernel's name, used in the messages.
    user : dict, NamedTuple or None
        The estimator's ``kernel_params``: a subset of the fields of ``defaults``.
    defaults : NamedTuple
        The kernel's parameter container with the estimator's defaults
        (:mod:`bayes_maxmargin.kernels`: ``SEParams``, ``ARDParams``, ``PolyParams``, ``LinearParams``).

    Returns
    -------
    NamedTuple
        ``defaults`` with the user's fields, validated: ``degree`` an integer >= 1, ``offset`` >= 0,
        ``lengthscales`` a positive number or one positive entry per input dimension, every other
        field a positive number.

    Raises
    ------
    InvalidParameterError
        For example ``"Invalid key 'gamma' in kernel_params for kernel='rbf'; valid keys are
        lengthscale, amplitude"``.
    """
    if user is None:
        return defaults
    fields = ", ".join(defaults._fields)
    if hasattr(user, "_asdict"):
        user = user._asdict()
    if not isinstance(user, Mapping):
        raise InvalidParameterError(
            f"Invalid value for kernel_params: {_fmt_value(user)} (must be None or a dict of the fields "
            f"{fields} of the {kernel!r} kernel)"
        )
    values = {}
    for name, value in user.items():
        if name not in defaults._fields:
            raise InvalidParameterError(
                f"Invalid key {name!r} in kernel_params for kernel={kernel!r}; valid keys are {fields}"
            )
        values[name] = _check_kernel_value(name, value, np.shape(getattr(defaults, name)))
    return defaults._replace(**values)


def _check_kernel_value(name: str, value: Any, shape: tuple[int, ...]) -> Any:
    label = f"kernel_params[{name!r}]"
    if name == "degree":
        return check_scalar_param(label, value, kind="int", low=1)
    try:
        arr = None if isinstance(value, (str, bytes)) else np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        arr = None  # reported by check_scalar_param below
    if shape and arr is not None and arr.ndim == 1:
        if arr.shape != shape:
            raise InvalidParameterError(
                f"Invalid value for {label}: {arr.shape[0]} length-scales for {shape[0]} input dimensions"
            )
        bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))
        if bad.size:
            raise InvalidParameterError(
                f"Invalid value for {label}: entry {bad[0]} is {arr[bad[0]]} (must be positive and finite)"
            )
        return arr
    value = check_scalar_param(label, value, low=0.0, low_inclusive=name == "offset")  # offset 0: homogeneous
    return np.full(shape, value) if shape else value
