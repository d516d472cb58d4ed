"""Checks that the parts of a restored fit agree with each other (:func:`bayes_maxmargin.load`).

A fit stores quantities that it computed from each other: a point estimate and the posterior it
summarises, representer weights and the latent function they solve for, the E-step's expectations
and the latent function they were taken at. Each check here tests one such relation, which a genuine
fit satisfies up to the rounding errors of computing it; the bound on those errors is derived where
the relation is checked and passed in, so that no genuine fit is refused while a value that was
edited (negated, taken from another fit, cut short) is. Every check raises ValueError naming the
value and the relation it breaks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CHECK_ROWS", "MC_SIGMAS", "check_equal", "check_mean_of_draws", "check_rows", "check_shape",
           "check_within", "unit_roundoff"]

#: The most rows of a training set a relation is checked at (evenly spaced): a relation that an edit
#: breaks breaks at (nearly) every row, and the check stays O(rows * n) for fits of any size.
CHECK_ROWS = 256
#: Standard errors within which the mean of independent draws of a distribution lies around the
#: distribution's mean, for the check of a deterministic fit's draws: a genuine fit is refused with
#: probability 2e-9 per coordinate (the two-sided normal tail beyond 6).
MC_SIGMAS = 6.0


def unit_roundoff(dtype: Any) -> float:
    """The unit roundoff u of a floating dtype (half its machine epsilon): every rounding of an exact
    result to ``dtype`` changes it by a factor 1 + delta, ``|delta| <= u``."""
    return float(np.finfo(np.dtype(dtype)).eps) / 2.0


def check_rows(n: int, most: int = CHECK_ROWS) -> np.ndarray:
    """At most ``most`` evenly spaced indices of ``n`` rows, the first and last included."""
    return np.unique(np.linspace(0, n - 1, min(n, most)).round().astype(int)) if n else np.zeros(0, int)


def check_shape(name: str, value: Any, shape: tuple[int | None, ...]) -> None:
    """Raise ValueError unless ``value`` has ``shape`` (None: any length on that axis)."""
    actual = np.shape(value)
    if len(actual) != len(shape) or any(s is not None and a != s for a, s in zip(actual, shape)):
        wanted = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"{name} has shape {actual}, not {wanted}")


def check_equal(name: str, value: Any, expected: Any, what: str) -> None:
    """Raise ValueError unless ``value`` equals ``expected`` exactly (shape and every entry): two copies
    of the same numbers, which a fit stores in two places."""
    a, b = np.asarray(value), np.asarray(expected)
    if a.shape != b.shape or not np.array_equal(a, b):
        raise ValueError(f"{name} is not {what}")


def check_within(name: str, residual: Any, bound: Any, relation: str) -> None:
    """Raise ValueError where ``|residual|`` exceeds ``bound`` (entry by entry, broadcast) or is not
    finite: ``name`` does not satisfy ``relation`` within the rounding error that ``bound`` allows."""
    residual, bound = np.abs(np.asarray(residual, np.float64)), np.asarray(bound, np.float64)
    excess = residual - bound
    if excess.size and not np.all(excess <= 0.0):
        at = np.unravel_index(int(np.argmax(np.where(np.isfinite(excess), excess, np.inf))), excess.shape)
        raise ValueError(f"{name} does not satisfy {relation}: off by {float(residual[at]):.3g} at {at}, where "
                         f"rounding allows {float(np.broadcast_to(bound, excess.shape)[at]):.3g}")


def check_mean_of_draws(name: str, draws: Any, mean: Any, independent: bool, allowance: Any = 0.0) -> None:
    """Raise ValueError unless the draws (leading axes (chain, draw)) average to ``mean``, give or take
    ``allowance`` (where ``mean`` is known to that precision only).

    For the draws of an MCMC fit, whose point estimate is their average, the two agree to the rounding
    of a sum of S terms (S u times the mean absolute draw, doubled). For ``independent`` draws of a
    deterministic fit's Gaussian, their average lies within :data:`MC_SIGMAS` standard errors of the
    Gaussian's mean (plus that rounding).
    """
    draws = np.asarray(draws, np.float64)
    mean = np.asarray(mean, np.float64)
    flat = draws.reshape((-1, *draws.shape[2:]))
    check_shape(f"{name}'s draws", flat[0], mean.shape)
    S = flat.shape[0]
    bound = 2.0 * S * unit_roundoff(np.float64) * np.abs(flat).mean(axis=0) + allowance
    if independent:
        bound = bound + MC_SIGMAS * flat.std(axis=0) / np.sqrt(S)
    check_within(name, flat.mean(axis=0) - mean, bound,
                 "the mean of its draws in idata_" + (" (a sample of the fit's distribution)" if independent else ""))
