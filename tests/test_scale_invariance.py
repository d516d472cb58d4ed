"""GPBSVM does not depend on the units of X: the default kernel starts at the median distance between
training rows, ML-II moves log theta and the pseudo-inputs in units of the data's spread, so inputs
multiplied by c give the same probabilities (at inputs multiplied by c); where float64 or float32
cannot carry the squared distances, the fit refuses the data naming their scale."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_moons

from bayes_maxmargin import GPBSVM
from bayes_maxmargin.data.validation import smallest_scale

#: Largest change of a predicted probability allowed between a fit on X * c and one on X. The scaled
#: fits see X * c rounded once, and their ML-II paths respond to that rounding: measured over the grid
#: below (100 rows), at most 1e-8 (ECM), 1.1e-4 (FITC, whose L-BFGS moves 100 pseudo-inputs with the
#: kernel) and 1.2e-4 (svi, float32); this is 16 times the largest. ML-II in coordinates of the units
#: of X changed them by 0.15 (ECM, c = 1e5), 0.77 (FITC, c = 1e-5) and 0.21 (svi, c = 1e5).
TOL = 2e-3


@pytest.fixture(scope="module")
def moons() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_moons(n_samples=100, noise=0.2, random_state=0)
    X_test, _ = make_moons(n_samples=200, noise=0.2, random_state=1)
    return X, y, X_test


_REFERENCES: dict[str, np.ndarray] = {}


def _proba(inference: str, X: np.ndarray, y: np.ndarray, X_test: np.ndarray) -> np.ndarray:
    clf = GPBSVM(inference=inference, progress_bar=False, random_state=0).fit(X, y)
    return clf.predict_proba(X_test)[:, 1]


def _reference(inference: str, moons) -> np.ndarray:
    """The unscaled fit's probabilities, once per inference method in this module."""
    if inference not in _REFERENCES:
        _REFERENCES[inference] = _proba(inference, *moons)
    return _REFERENCES[inference]


_EXT = pytest.mark.extended
# one fast case per inference method by default (ECM: both directions), the rest of the grid under -m extended;
# ECM and FITC in float64 also at 1e-100 and 1e50, whose squared distances float64 still carries
GRID = [
    ("ecm", 1e-10), ("ecm", 1e10),
    pytest.param("ecm", 1e-5, marks=_EXT), pytest.param("ecm", 1e5, marks=_EXT),
    pytest.param("ecm", 1e-100, marks=_EXT), pytest.param("ecm", 1e50, marks=_EXT),
    pytest.param("fitc", 1e5, marks=_EXT), pytest.param("fitc", 1e-10, marks=_EXT),
    pytest.param("fitc", 1e-5, marks=_EXT), pytest.param("fitc", 1e10, marks=_EXT),
    pytest.param("fitc", 1e-100, marks=_EXT), pytest.param("fitc", 1e50, marks=_EXT),
    pytest.param("svi", 1e-10, marks=_EXT), pytest.param("svi", 1e-5, marks=_EXT),
    pytest.param("svi", 1e5, marks=_EXT), pytest.param("svi", 1e10, marks=_EXT),
]


@pytest.mark.parametrize(("inference", "scale"), GRID)
def test_probabilities_do_not_depend_on_the_units_of_x(moons, inference, scale):
    X, y, X_test = moons
    expected = _reference(inference, moons)
    got = _proba(inference, X * scale, y, X_test * scale)
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)


@pytest.mark.parametrize(("precision", "scale"), [("float32", 1e-100), ("float64", 1e-160)])
def test_rows_too_close_for_the_precision_are_refused_naming_their_scale(moons, precision, scale):
    """Below :func:`smallest_scale` (3.8e-152 in float64, 2.8e-17 in float32) the squared distances and the
    gradients in the length-scale are not normal numbers: a ValueError names the median distance, the limit
    and the precision, before anything is compiled."""
    X, y, _ = moons
    limit = smallest_scale(precision)
    with pytest.raises(ValueError, match=rf"median distance between rows of 1\.2\de-\d+, below {limit:.3g}.*"
                                         rf"{precision} computations of GPBSVM"):
        GPBSVM(inference="svi", precision=precision, progress_bar=False).fit(X * scale, y)


def test_smallest_scale_is_where_squares_stop_being_normal():
    """The limit is SCALE_HEADROOM (2^8) above the square root of the smallest normal number."""
    for dtype in (np.float32, np.float64):
        tiny = np.finfo(dtype).tiny
        assert smallest_scale(dtype) ** 2 == pytest.approx(2.0**16 * tiny, rel=1e-12)
