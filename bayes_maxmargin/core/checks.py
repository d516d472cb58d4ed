"""Checks of constructor parameters: scalar ranges and options, each failing with an
:class:`InvalidParameterError` that names the parameter and the value. Pure NumPy.

Examples
--------
>>> from bayes_maxmargin.core.checks import check_option, check_scalar_param
>>> check_scalar_param("num_samples", 200, kind="int", low=1)
200
>>> check_option("inference", "em", ("em", "gibbs"))
'em'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

__all__ = ["InvalidParameterError", "check_option", "check_scalar_param"]


class InvalidParameterError(ValueError, TypeError):
    """A hyperparameter has an invalid type or value.

    Subclasses both :class:`ValueError` and :class:`TypeError`, so callers may
    catch either (as with scikit-learn's own parameter validation).
    """


def _fmt_value(value: Any, max_len: int = 60) -> str:
    """Return a short ``repr`` of a value, unwrapping NumPy scalars."""
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value)
    if len(text) > max_len:
        text = text[: max_len - 3] + "..."
    return text


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
