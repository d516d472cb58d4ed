"""Checks of constructor parameters: scalar ranges, options and kernel parameters, each failing with an
:class:`InvalidParameterError` that names the parameter and the value."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from bayes_maxmargin.core.kernels import kernel_name
from bayes_maxmargin.core.parameters import SEP, field_values, params_dict, replace_fields
from bayes_maxmargin.data.validation import _fmt_value

__all__ = ["InvalidParameterError", "check_kernel_params", "check_option", "check_scalar_param"]


class InvalidParameterError(ValueError, TypeError):
    """A hyperparameter has an invalid type or value.

    Subclasses both :class:`ValueError` and :class:`TypeError`, so callers may
    catch either (as with scikit-learn's own parameter validation).
    """


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
    name, value
        As in :func:`check_scalar_param`.
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


def check_kernel_params(kernel: Any, kernel_params: Any, defaults: Any) -> Any:
    """The kernel parameters of an estimator: ``defaults`` overridden by the user's ``kernel_params``,
    every field validated.

    Parameters
    ----------
    kernel : str or Kernel
        The kernel's name or object (:mod:`bayes_maxmargin.core.kernels`), used in the messages.
    kernel_params : dict, NamedTuple or None
        The estimator's parameter: a subset of the fields of ``defaults``, by path for a composed
        kernel (``{"k1__lengthscale": 2.0}``, :mod:`bayes_maxmargin.core.parameters`).
    defaults : NamedTuple
        The kernel's parameter container at its initial values (:mod:`bayes_maxmargin.core.kernels`).

    Returns
    -------
    NamedTuple
        ``defaults`` with the user's fields, validated: ``degree`` an integer >= 1, ``offset`` >= 0,
        ``lengthscales`` a positive number or one positive entry per input dimension, every other
        field a positive number.

    Raises
    ------
    InvalidParameterError
        Naming the field (and for a composed kernel its component), for example ``"Invalid key 'gamma'
        in kernel_params for kernel='rbf'; valid keys are lengthscale, amplitude"`` or ``"Invalid value
        for k2__variance (Linear) of kernel RBF() + Linear(variance=-1.0): -1.0 (must be a real number
        > 0.0)"``.
    """
    kernel_obj, kernel = kernel, kernel_name(kernel)
    current = field_values(defaults)
    fields = ", ".join(current)
    if hasattr(kernel_params, "_asdict"):
        # a kernel's parameter container (its fields by path), or another NamedTuple (its fields by name)
        kernel_params = params_dict(kernel_params) if hasattr(kernel_params, "properties") else kernel_params._asdict()
    if kernel_params is not None and not isinstance(kernel_params, Mapping):
        raise InvalidParameterError(
            f"Invalid value for kernel_params: {_fmt_value(kernel_params)} (must be None or a dict of the fields "
            f"{fields} of the {kernel!r} kernel)"
        )
    kernel_params = dict(kernel_params or {})
    for name in kernel_params:
        if name not in current:
            raise InvalidParameterError(
                f"Invalid key {name!r} in kernel_params for kernel={kernel!r}; valid keys are {fields}"
            )
    values = {}
    for path, value in current.items():
        if path in kernel_params:
            label = f"kernel_params[{path!r}]"
        elif SEP in path:
            label = f"{path} ({_component(kernel_obj, path)}) of kernel {kernel}"
        else:
            label = f"{path} of kernel {kernel}"
        values[path] = _check_kernel_value(path.rpartition(SEP)[2], kernel_params.get(path, value), np.shape(value), label)
    return replace_fields(defaults, values)


def _component(kernel: Any, path: str) -> str:
    """The class name of the component of a composed kernel object that ``path`` leads into."""
    for part in path.split(SEP)[:-1]:
        kernel = getattr(kernel, part, None)
    return type(kernel).__name__


def _check_kernel_value(name: str, value: Any, shape: tuple[int, ...], label: str) -> Any:
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
