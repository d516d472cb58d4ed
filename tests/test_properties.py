"""Property-based tests of the public entry points: every generated input ends in a valid result
(finite probabilities in [0, 1] summing to 1, the right shapes, labels from the training labels)
or in a ValueError / TypeError whose message names the problem. 1419 cases per run, and 104 of
input magnitudes up to 1e300 over every estimator and inference method (24 more with -m extended)."""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bayes_maxmargin import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection, load_dataset
from bayes_maxmargin.data.validation import check_X_y

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# a message names the problem: the argument, a column / row / label, or the offending value
NAMED = re.compile(r"\bX\b|\by\b|column|row|label|class|feature|sample|dtype|NaN|nan|inf|string|numeric|"
                   r"shape|dimension|value|n_components|n_basis|name|dataset", re.I)


def _assert_clear(err: Exception) -> None:
    assert isinstance(err, (ValueError, TypeError)), f"{type(err).__name__}: {err}"
    assert NAMED.search(str(err)), f"the message does not name the problem: {err}"


# ------------------------------------------------------------------------------------------ inputs
DTYPES = ["float64", "float32", "int64", "int8", "bool", "object-num", "object-str", "list"]
SPECIALS = ["none", "nan", "inf", "-inf", "huge", "tiny", "duplicate-rows", "constant-column", "string-cell"]


@st.composite
def feature_matrices(draw, n=None, d=None):
    n = draw(st.sampled_from([8, 12])) if n is None else n
    d = draw(st.sampled_from([2, 3])) if d is None else d
    seed = draw(st.integers(0, 2**16))
    scale = 10.0 ** draw(st.integers(-6, 6))
    X = np.random.default_rng(seed).normal(size=(n, d)) * scale
    special = draw(st.sampled_from(SPECIALS))
    i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))
    if special in ("nan", "inf", "-inf"):
        X[i, j] = float(special)
    elif special == "huge":
        X[:, j] *= 1e12
    elif special == "tiny":
        X[:, j] *= 1e-12
    elif special == "duplicate-rows":
        X[: n // 2] = X[n // 2 : 2 * (n // 2)]
    elif special == "constant-column":
        X[:, j] = 3.0
    kind = draw(st.sampled_from(DTYPES))
    if kind in ("int64", "int8"):
        X = np.clip(np.nan_to_num(X, posinf=100, neginf=-100), -100, 100).astype(kind)
    elif kind == "bool":
        X = np.nan_to_num(X) > 0
    elif kind.startswith("object") or kind == "list":
        X = X.astype(object)
        if kind == "object-str":
            X = X.astype(str).astype(object)
    else:
        X = X.astype(kind)
    if special == "string-cell":
        X = np.asarray(X, dtype=object)
        X[i, j] = "abc"
    return X.tolist() if kind == "list" else X


LABEL_SETS = [[-1, 1], [0, 1], ["no", "yes"], [False, True], [1, 2, 3], ["a"], [3.5, 7.25]]


@st.composite
def labels(draw, n):
    classes = draw(st.sampled_from(LABEL_SETS))
    idx = draw(st.lists(st.integers(0, len(classes) - 1), min_size=n, max_size=n))
    if len(classes) > 1 and len(set(idx)) < 2:  # mostly two classes present
        idx[0], idx[-1] = 0, len(classes) - 1
    y = np.asarray([classes[k] for k in idx], dtype=object if isinstance(classes[0], str) else None)
    if draw(st.booleans()) and y.dtype.kind == "f":
        y[0] = draw(st.sampled_from([np.nan, np.inf, y[0]]))
    return y


# ------------------------------------------------------------------------------------------ validation
@settings(max_examples=500, **FAST)
@given(data=st.data())
def test_check_X_y(data):
    X = data.draw(feature_matrices(n=data.draw(st.sampled_from([1, 3, 8])), d=data.draw(st.sampled_from([1, 2, 5]))))
    y = data.draw(labels(len(X) if data.draw(st.booleans()) else 4))
    try:
        Xc, yc = check_X_y(X, y)
    except Exception as err:  # noqa: BLE001
        _assert_clear(err)
        return
    assert Xc.dtype == np.float64 and np.isfinite(Xc).all() and Xc.shape == np.shape(X) and len(yc) == len(Xc)


# ------------------------------------------------------------------------------------------ estimators
def _check_fitted(est, X_new):
    if hasattr(est, "predict_proba"):
        proba = est.predict_proba(X_new)
        assert proba.shape == (len(X_new), len(est.classes_))
        assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    pred = est.predict(X_new)
    assert pred.shape == (len(X_new),) and set(pred.tolist()) <= set(est.classes_.tolist())
    if hasattr(est, "transform"):
        Z = est.transform(X_new)
        assert Z.ndim == 2 and len(Z) == len(X_new) and np.isfinite(Z).all()


#: examples per estimator: (fit, predict).
EXAMPLES = {"linear-em": (60, 80), "linear-vb": (50, 50), "gp-vi": (30, 50), "factor-vbem": (8, 30),
            "projection-kmmdp": (5, 30)}
#: Every model compiles its fit per training shape and class count: the estimators are fitted on one
#: shape, that of the magnitude tests below (which fit the same estimators), and predict at the rows
#: that the fit tests predict at, so that the tests of the file share their compiled programs.
FIT_SHAPE = (12, 2)
PREDICT_ROWS = 3
ESTIMATORS = {
    "linear-em": lambda: LinearBSVM(inference="em", gamma_prior=(2.0, 1.0), max_iter=50),
    "linear-vb": lambda: LinearBSVM(inference="vb", max_iter=30),
    "gp-vi": lambda: GPBSVM(inference="vi", max_iter=10, learn_kernel=False),
    "factor-vbem": lambda: FactorBSVM(n_factors=1, classifier="linear", inference="vbem", max_iter=5, random_state=0),
    "projection-kmmdp": lambda: MaxMarginProjection(n_components=2, kernel="rbf", n_basis=6, num_samples=5,
                                                    num_warmup=5, random_state=0),
}


@pytest.mark.parametrize("name", [n for n in ESTIMATORS if EXAMPLES[n][0]])
def test_fit_and_predict(name):
    settings(max_examples=EXAMPLES[name][0], **FAST)(given(data=st.data())(_fit_and_predict))(name=name)


def _fit_and_predict(name, data):
    """A fit on generated input: a valid fitted estimator, or a clear error, never on clean input
    (:func:`_clean`)."""
    X = data.draw(feature_matrices(*FIT_SHAPE))
    y = data.draw(labels(len(X)))
    est = ESTIMATORS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, y)
        except Exception as err:  # noqa: BLE001
            assert not _clean(X, y), f"{type(err).__name__} on clean input: {err}"
            _assert_clear(err)
            return
        rows = X[:PREDICT_ROWS]
        _check_fitted(est, rows if isinstance(X, list) else np.asarray(rows, dtype=float))


def _clean(X, y) -> bool:
    """Whether X and y are ordinary data that every estimator must fit: numeric cells (no strings), all
    finite, every column of standard deviation between 1e-7 and 1e7 (the strategy's 1e-6 to 1e6 scales;
    ``huge`` and ``tiny`` columns fall outside, and constant ones, which the factor models refuse by
    name), and discrete labels of at least two classes of at least two rows each."""
    cells = np.asarray(X, dtype=object).ravel()
    if any(isinstance(v, str) for v in cells):
        return False
    Xf = np.asarray(X, dtype=float)
    spread = Xf.std(axis=0) if np.isfinite(Xf).all() else np.array([np.nan])
    labels_ = np.asarray(y, dtype=object).ravel().tolist()
    # floats that are not whole numbers are a regression target, which scikit-learn's classifiers refuse
    finite_labels = all(not isinstance(v, float) or float(v).is_integer() for v in labels_)
    counts = np.unique(np.asarray(labels_, dtype=str), return_counts=True)[1]
    return bool(np.all((spread >= 1e-7) & (spread <= 1e7))) and finite_labels and len(counts) >= 2 and bool(
        counts.min() >= 2)


def _has_non_finite(X) -> bool:
    """Whether a numeric cell of X is NaN or infinite."""
    cells = np.asarray(X, dtype=object).ravel()
    return any(isinstance(v, (int, float, np.number)) and not np.isfinite(float(v)) for v in cells)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_predict_on_new_inputs(name):
    settings(max_examples=EXAMPLES[name][1], **FAST)(given(data=st.data())(_predict_on_new_inputs))(name=name)


def _predict_on_new_inputs(name, data):
    """Predict with the fit on ordinary data (2 columns) at 1 or PREDICT_ROWS rows of 1 to 3 columns:
    a valid result, or a clear error (always for a NaN or an infinity)."""
    est = _fitted_on_normal_data(name)
    X = data.draw(feature_matrices(n=data.draw(st.sampled_from([1, PREDICT_ROWS])),
                                   d=data.draw(st.sampled_from([1, 2, 3]))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _check_fitted(est, X)
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001
            _assert_clear(err)
        else:
            assert not _has_non_finite(X), "a NaN or infinite input was not refused"


# ------------------------------------------------------------------------------------------ magnitudes
#: every estimator x inference method, with the fewest iterations that run it (the estimators of
#: ESTIMATORS as there: one compiled program for both tests)
_MC = dict(num_samples=4, num_warmup=4, num_chains=1, random_state=0)
MAGNITUDE_ESTIMATORS = {
    "linear-gibbs": lambda: LinearBSVM(inference="gibbs", **_MC),
    "linear-em": ESTIMATORS["linear-em"],
    "linear-vb": ESTIMATORS["linear-vb"],
    "linear-nuts": lambda: LinearBSVM(inference="nuts", **_MC),
    "linear-svi": lambda: LinearBSVM(inference="svi", max_iter=20, batch_size=6, random_state=0),
    "gp-ecm": lambda: GPBSVM(inference="ecm", max_iter=5, mlii_every=2, mlii_steps=2),
    "gp-fitc": lambda: GPBSVM(inference="fitc", num_inducing=4, max_iter=5, learn_kernel=False, random_state=0),
    "gp-gibbs": lambda: GPBSVM(inference="gibbs", learn_kernel=False, **_MC),
    "gp-nuts": lambda: GPBSVM(inference="nuts", learn_kernel=False, **_MC),
    "gp-vi": ESTIMATORS["gp-vi"],
    "gp-svi": lambda: GPBSVM(inference="svi", num_inducing=4, batch_size=6, max_iter=20, learn_kernel=False,
                             random_state=0),
    "factor-gibbs": lambda: FactorBSVM(n_factors=1, num_samples=4, num_warmup=4, thin=1, random_state=0),
    "factor-vbem": ESTIMATORS["factor-vbem"],
    "factor-gp-vbem": lambda: FactorBSVM(n_factors=1, classifier="gp", inference="vbem", max_iter=3, random_state=0),
    "projection": lambda: MaxMarginProjection(n_components=1, num_samples=4, num_warmup=4, random_state=0),
    "projection-kmmdp": ESTIMATORS["projection-kmmdp"],
}
#: decimal exponents of the magnitudes: ordinary, large, around the float64 limit (about 1e148
#: for these shapes) and up to 1e300
EXPONENTS = [0, 30, 100, 140, 147, 150, 154, 160, 200, 250, 300]


def _magnitude_data(seed: int, exponent: int, column: int | None, n: int = FIT_SHAPE[0]):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, FIT_SHAPE[1]))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1, 0)
    y[:2] = [0, 1]
    scale = 10.0**exponent
    if column is None:
        X *= scale
    else:
        X[:, column] *= scale
    return X, y


@functools.cache
def _fitted_on_normal_data(name: str):
    X, y = _magnitude_data(0, 0, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MAGNITUDE_ESTIMATORS[name]().fit(X, y)


#: With -m extended, inference methods whose computations on the inputs run in the default ones: GPBSVM's
#: NUTS (its GP, kernel and prior covariance, is gp-gibbs's; NUTS at every magnitude: linear-nuts) and FITC
#: (the kernel at every magnitude: gp-ecm, gp-gibbs, gp-vi; inducing points among the inputs: gp-svi), and
#: FactorBSVM's GP classifier (the factor model at every magnitude: factor-vbem; the kernel: the GP fits)
_EXTENDED_MAGNITUDES = ("gp-nuts", "gp-fitc", "factor-gp-vbem")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.extended) if n in _EXTENDED_MAGNITUDES else n
                                  for n in MAGNITUDE_ESTIMATORS])
def test_input_magnitudes(name):
    """Fit on, or predict at, inputs scaled by up to 1e300 (all columns or one): a finite result or
    a ValueError naming the column (never NaN, an overflow deep inside, or a sampler's error)."""
    settings(max_examples=8, **FAST)(given(data=st.data())(_input_magnitudes))(name=name)


def _input_magnitudes(name, data):
    exponent = data.draw(st.sampled_from(EXPONENTS))
    column = data.draw(st.sampled_from([None, 0, 1]))
    in_fit = data.draw(st.booleans())
    X, y = _magnitude_data(data.draw(st.integers(0, 3)), exponent, column)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est = MAGNITUDE_ESTIMATORS[name]().fit(X, y) if in_fit else _fitted_on_normal_data(name)
            _check_fitted(est, X[:PREDICT_ROWS])
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001
            _assert_clear(err)


@settings(max_examples=100, **FAST)
@given(data=st.data())
def test_projection_rejects_bad_input_clearly(data):
    """Invalid inputs and parameters of MaxMarginProjection fail before any sampling."""
    X = data.draw(feature_matrices())
    y = data.draw(labels(len(X)))
    params = data.draw(st.fixed_dictionaries({"kernel": st.sampled_from(["rbf", "poly", "laplace", 3])}, optional={
        "n_components": st.sampled_from([0, -1, 2.5, "two"]),
        "n_basis": st.sampled_from([0, 10_000, -3, "all"]),
    }))
    cells = np.asarray(X, dtype=object).ravel()
    bad_x = not all(isinstance(v, (int, float, bool, np.number, np.bool_)) and np.isfinite(float(v)) for v in cells)
    assume(bad_x or len(params) > 1 or params["kernel"] not in ("rbf", "poly"))
    with pytest.raises((ValueError, TypeError)) as info:
        MaxMarginProjection(num_samples=2, num_warmup=2, **params).fit(X, y)
    _assert_clear(info.value)


# ------------------------------------------------------------------------------------------ load_dataset
NAMES = ["wdbc", "pima", "toenail", "susy_synthetic", "usps_3vs5", "not_a_dataset", "", "../etc/passwd", "WDBC"]


@settings(max_examples=300, **FAST)
@given(name=st.one_of(st.sampled_from(NAMES), st.text(max_size=12), st.integers(), st.none()),
       kwargs=st.fixed_dictionaries({}, optional={
           "n": st.one_of(st.integers(-5, 50), st.floats(allow_nan=True), st.text(max_size=3)),
           "random_state": st.one_of(st.integers(-3, 5), st.text(max_size=2)),
           "dtype": st.sampled_from(["float32", "float64", "int8", "complex64", None]),
       }))
def test_load_dataset(name, kwargs):
    try:
        ds = load_dataset(name, **kwargs)
    except FileNotFoundError as err:  # a named dataset missing from BMM_DATA_DIR: says what to do
        assert "BMM_DATA_DIR" in str(err)
        return
    except Exception as err:  # noqa: BLE001
        _assert_clear(err)
        return
    assert ds.X.ndim == 2 and len(ds.y) == len(ds.X)


# ------------------------------------------------------------------------------------------ bmm configuration
KEYS = ["seed", "precision", "plots", "model.gamma0", "model.sigma", "inference.num_samples", "data.test_size",
        "inference.tol", "nonsense", "model.nonsense", "data.n", "resume", "checkpoint"]
VALUES = ["1", "-1", "0.5", "abc", "true", "null", "[1,2]", "1e300", "float16", "''"]


@settings(max_examples=30, **FAST)  # each composes the configuration with Hydra: about 0.15 s
@given(overrides=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES)), max_size=3),
       groups=st.lists(st.sampled_from(["model=linear", "model=gp", "inference=em", "inference=gibbs",
                                        "inference=svi", "data=wdbc", "data=pima"]), max_size=2, unique=True))
def test_bmm_configuration(overrides, groups):
    """Composing any override set either works or yields a message naming the key (the `bmm`
    command prints it and exits with status 2); nothing else escapes."""
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import OmegaConfBaseException

    from bayes_maxmargin.cli import _precheck

    args = groups + [f"{k}={v}" for k, v in overrides]
    try:
        message = _precheck(args)
    except (ConfigCompositionException, OmegaConfBaseException) as err:  # Hydra's own message
        assert any(k in str(err) or k in str(err.__cause__) for k, _ in overrides) or "Could not" in str(err)
        return
    if message is not None:
        assert any(k in message for k, _ in overrides), message
