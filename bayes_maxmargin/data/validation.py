"""Input validation shared by every entry point of the package.

The functions here turn user input into clean NumPy arrays and raise errors
that say precisely what is wrong (which argument, which column, which value).
The messages also contain the phrases that scikit-learn's estimator checks
(``parametrize_with_checks``) look for, because the estimators of this package
validate their input with these functions.

This module is pure NumPy (plus scikit-learn helpers); it never imports JAX.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import column_or_1d
from sklearn.utils.multiclass import check_classification_targets

from bayes_maxmargin.core.checks import _fmt_value

__all__ = ["check_X_y", "check_array_2d", "check_finite_output", "check_magnitude", "check_n_features", "check_scale",
           "magnitude_limit", "smallest_scale"]

#: How many column indices / class labels an error message lists at most.
_MAX_LISTED = 10

#: Headroom factor of :func:`magnitude_limit` on the squared data: the fits multiply squared inputs
#: by hyperparameters, inverse variances and covariances, so the largest sum of squares may only
#: reach ``finfo.max / MAGNITUDE_HEADROOM`` (2**32, a factor 2**16 on the inputs themselves).
MAGNITUDE_HEADROOM = 2.0**32


# ---------------------------------------------------------------------------
# small formatting helpers
# ---------------------------------------------------------------------------


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


def _of(estimator_name: str | None) -> str:
    return f" of {estimator_name}" if estimator_name else ""


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


def magnitude_limit(dtype: Any, n_terms: int) -> float:
    """Largest absolute input value whose squares cannot overflow in ``dtype``.

    The models square their inputs and sum the products: the linear predictor's variance
    ``x' S x`` sums ``d`` terms, a kernel's squared distance ``|x - x'|^2`` sums ``d`` squares of
    differences of up to ``2 |x|``, and the Gram matrix ``X' X`` of a fit sums ``n`` products.
    With every ``|x| <= M`` and ``n_terms`` such terms, the largest of these sums is at most
    ``4 n_terms M^2``; requiring it to stay below ``finfo(dtype).max / MAGNITUDE_HEADROOM`` gives

    ``M = sqrt(finfo(dtype).max / (4 n_terms MAGNITUDE_HEADROOM))``,

    about ``1e149 / sqrt(n_terms)`` for float64 and ``1.4e14 / sqrt(n_terms)`` for float32.

    Parameters
    ----------
    dtype : numpy dtype
        Floating dtype of the computation.
    n_terms : int
        Number of squared inputs summed in the largest sum (``n_samples * n_features`` for a fit,
        ``n_features`` for a prediction).

    Returns
    -------
    float
    """
    big = float(np.finfo(np.dtype(dtype)).max)
    return float(np.sqrt(big / (4.0 * max(int(n_terms), 1) * MAGNITUDE_HEADROOM)))


def check_magnitude(
    X: np.ndarray,
    *,
    dtype: Any,
    n_terms: int,
    name: str = "X",
    columns: Sequence[Any] | None = None,
    estimator_name: str | None = None,
) -> None:
    """Refuse inputs so large that the model's squared quantities would overflow.

    Parameters
    ----------
    X : numpy.ndarray of shape (n_samples, n_features)
        Validated float input (NaN cells, where allowed, are ignored).
    dtype : numpy dtype
        Floating dtype of the computation.
    n_terms : int
        See :func:`magnitude_limit`.
    name : str, default="X"
        Name of the argument, used in the message.
    columns : sequence or None, default=None
        Column names (of a DataFrame input), added to the message.
    estimator_name : str or None, default=None
        Name of the calling estimator, added to the message.

    Raises
    ------
    ValueError
        Naming the first column whose largest absolute value exceeds the limit, that value and
        the limit, and suggesting standardisation.
    """
    if X.size == 0:
        return
    limit = magnitude_limit(dtype, n_terms)
    col_max = np.abs(np.where(np.isnan(X), 0.0, X)).max(axis=0)
    too_big = np.flatnonzero(col_max > limit)
    if not too_big.size:
        return
    j = int(too_big[0])
    more = f" (and {too_big.size - 1} other column(s))" if too_big.size > 1 else ""
    raise ValueError(
        f"Input {name} column {_column_label(j, columns)}{more} has a value of magnitude "
        f"{col_max[j]:.3g}, above {limit:.3g}, the largest whose squares stay finite in "
        f"{np.dtype(dtype)} computations{_of(estimator_name)}; standardise {name} (e.g. "
        "sklearn.preprocessing.StandardScaler) or rescale the column."
    )


#: Headroom factor of :func:`smallest_scale`: ML-II may shrink a length-scale below the data's median
#: distance, at which it starts, and its square must stay a normal number.
SCALE_HEADROOM = 2.0**8


def smallest_scale(dtype: Any) -> float:
    """Smallest median distance between training rows that a kernel fit in ``dtype`` can carry.

    The kernels divide the inputs by length-scales that start at that distance (the gradient of
    ``x / theta`` in theta holds ``theta^2``), and the distances of nearby rows are squared: both must stay
    normal numbers, above ``finfo(dtype).tiny``, and a length-scale may shrink by :data:`SCALE_HEADROOM`.
    The limit is ``SCALE_HEADROOM * sqrt(finfo(dtype).tiny)``: 3.8e-152 for float64, 2.8e-17 for float32
    (measured: half moons scaled by 1e-150 fit as unscaled ones in float64, by 1e-18 in float32; by 1e-155
    and 1e-19 the gradients are not finite).

    Examples
    --------
    >>> f"{smallest_scale('float64'):.2g}", f"{smallest_scale('float32'):.2g}"
    ('3.8e-152', '2.8e-17')
    """
    return float(SCALE_HEADROOM * np.sqrt(np.finfo(np.dtype(dtype)).tiny))


def check_scale(scale: float, *, dtype: Any, name: str = "X", estimator_name: str | None = None) -> None:
    """Refuse training inputs whose rows are so close together that ``dtype`` cannot carry their
    squared distances (:func:`smallest_scale`).

    Parameters
    ----------
    scale : float
        The median distance between distinct training rows
        (:func:`~bayes_maxmargin.core.kernels.median_distance`).
    dtype : numpy dtype
        Floating dtype of the computation.
    name : str, default="X"
        Name of the argument, used in the message.
    estimator_name : str or None, default=None
        Name of the calling estimator, added to the message.

    Raises
    ------
    ValueError
        Naming the median distance, the limit and the dtype, and suggesting standardisation.
    """
    limit = smallest_scale(dtype)
    if scale < limit:
        wider = ", or use precision='float64'" if np.dtype(dtype) == np.float32 else " or rescale it"
        raise ValueError(
            f"Input {name} has a median distance between rows of {scale:.3g}, below {limit:.3g}, the smallest "
            f"whose squares {np.dtype(dtype)} computations{_of(estimator_name)} carry; standardise {name} (e.g. "
            f"sklearn.preprocessing.StandardScaler){wider}."
        )


def check_finite_output(values: Any, what: str, name: str = "X") -> None:
    """Refuse to return a non-finite prediction: raise naming the rows of ``name`` that gave one.

    Parameters
    ----------
    values : array or tuple of arrays, each with one row per sample
        The outputs of a prediction method.
    what : str
        What the outputs are, used in the message.
    name : str, default="X"
        Name of the input argument, used in the message.

    Raises
    ------
    ValueError
        If any output is NaN or infinite.
    """
    arrays = [np.asarray(a) for a in (values if isinstance(values, tuple) else (values,))]
    bad = np.zeros(arrays[0].shape[0], dtype=bool)
    for a in arrays:
        bad |= ~np.isfinite(a).reshape(a.shape[0], -1).all(axis=1)
    if bad.any():
        raise ValueError(
            f"The {what} of {name} row(s) [{_fmt_list(list(np.flatnonzero(bad)))}] is not finite: the inputs "
            "are too large (or too far from the training data) for the fitted model; standardise "
            f"{name} (e.g. sklearn.preprocessing.StandardScaler) before fitting and predicting."
        )


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
