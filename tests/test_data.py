"""Tests of the data layer: validation, label coding, named datasets, splits."""

from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.utils import estimator_checks as ec
from sklearn.utils.validation import check_is_fitted

from bayes_maxmargin.data import (
    BinaryLabelEncoder,
    DataDirNotSetError,
    Dataset,
    InvalidParameterError,
    check_array_2d,
    check_n_features,
    check_option,
    check_scalar_param,
    check_X_y,
    list_datasets,
    load_dataset,
    register_dataset,
    train_test_split_stratified,
)
from bayes_maxmargin.data import datasets as datasets_module

_DATA_DIR = os.environ.get("BMM_DATA_DIR")
needs_shared_data = pytest.mark.skipif(
    not _DATA_DIR or not Path(_DATA_DIR).is_dir(),
    reason="BMM_DATA_DIR is not set to the shared benchmark datasets folder",
)


# ---------------------------------------------------------------------------
# check_array_2d: accepted inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "X",
    [
        [[1, 2], [3, 4]],
        np.array([[1, 2], [3, 4]], dtype=np.int32),
        np.array([[1, 2], [3, 4]], dtype=np.uint8),
        np.array([[1, 2], [3, 4]], dtype=np.float32),
        np.asfortranarray(np.array([[1.0, 2.0], [3.0, 4.0]])),
        np.array([[1, 2], [3, 4]], dtype=object),
        np.array([[1, 2.0], [np.int64(3), np.float32(4)]], dtype=object),
        pd.DataFrame({"a": [1, 3], "b": [2.0, 4.0]}),
    ],
    ids=["list", "int32", "uint8", "float32", "fortran", "object-int", "object-mixed", "frame"],
)
def test_check_array_2d_converts_numeric_input(X):
    out = check_array_2d(X)
    assert out.dtype == np.float64
    assert out.flags.c_contiguous and out.flags.writeable
    np.testing.assert_array_equal(out, [[1.0, 2.0], [3.0, 4.0]])


def test_check_array_2d_bool_input():
    out = check_array_2d(np.array([[True, False], [False, True]]))
    np.testing.assert_array_equal(out, [[1.0, 0.0], [0.0, 1.0]])


def test_check_array_2d_returns_copy_and_leaves_input_alone():
    X = np.array([[1.0, np.nan], [3.0, 4.0]])
    before = X.copy()
    out = check_array_2d(X, allow_nan=True)
    assert not np.shares_memory(out, X)
    out[0, 0] = 99.0
    np.testing.assert_array_equal(X, before)


def test_check_array_2d_read_only_array():
    X = np.arange(6.0).reshape(3, 2)
    X.setflags(write=False)
    out = check_array_2d(X)
    assert out.flags.writeable
    np.testing.assert_array_equal(out, X)


def test_check_array_2d_read_only_memmap(tmp_path):
    path = tmp_path / "X.dat"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=(4, 3))
    mm[:] = np.arange(12.0).reshape(4, 3)
    mm.flush()
    del mm
    ro = np.memmap(path, dtype=np.float64, mode="r", shape=(4, 3))
    out = check_array_2d(ro)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, np.arange(12.0).reshape(4, 3))


def test_check_array_2d_float32_dtype():
    out = check_array_2d([[1, 2]], dtype=np.float32)
    assert out.dtype == np.float32


def test_check_array_2d_dataframe_nullable_and_none_as_missing():
    df = pd.DataFrame(
        {"a": pd.array([1, None, 3], dtype="Int64"), "b": [1.5, 2.5, np.nan]}
    )
    out = check_array_2d(df, allow_nan=True)
    np.testing.assert_array_equal(np.isnan(out), [[False, False], [True, False], [False, True]])
    obj = np.array([[1.0, None], [2.0, 3.0]], dtype=object)
    out = check_array_2d(obj, allow_nan=True)
    assert np.isnan(out[0, 1]) and out[1, 1] == 3.0


# ---------------------------------------------------------------------------
# check_array_2d: errors
# ---------------------------------------------------------------------------


def test_sparse_input_is_rejected():
    with pytest.raises(TypeError, match="dense data is required") as info:
        check_array_2d(sp.csr_matrix(np.eye(3)))
    assert "sparse" in str(info.value).lower()


@pytest.mark.parametrize(
    ("X", "what"),
    [
        (np.arange(4.0), "1D array"),
        (np.float64(2.0), "scalar array"),
        (np.ones((2, 2, 2)), "3D array"),
    ],
)
def test_not_2d_is_rejected(X, what):
    with pytest.raises(ValueError, match=f"Expected 2D array, got {what} instead") as info:
        check_array_2d(X)
    assert "Reshape your data" in str(info.value)


def test_zero_samples():
    with pytest.raises(
        ValueError,
        match=r"Found array with 0 sample\(s\) \(shape=\(0, 3\)\) while a minimum of 1 is required\.",
    ):
        check_array_2d(np.empty((0, 3)))


def test_min_samples_and_estimator_name():
    with pytest.raises(ValueError, match=r"1 sample\(s\) .* minimum of 2 is required by BayesSVC"):
        check_array_2d([[1.0, 2.0]], ensure_min_samples=2, estimator_name="BayesSVC")


def test_zero_features():
    with pytest.raises(
        ValueError,
        match=r"Found array with 0 feature\(s\) \(shape=\(5, 0\)\) while a minimum of 1 is required\.",
    ):
        check_array_2d(np.empty((5, 0)))


def test_ragged_rows():
    with pytest.raises(ValueError, match="could not be converted"):
        check_array_2d([[1.0, 2.0], [3.0]])


def test_string_value_names_column_row_and_value_in_dataframe():
    df = pd.DataFrame(
        {
            "a": np.arange(10.0),
            "b": np.arange(10.0),
            "c": np.arange(10.0),
            "colname": [float(i) for i in range(7)] + ["abc", 8.0, 9.0],
        }
    )
    with pytest.raises(
        ValueError,
        match=r"X column 3 \('colname'\) has a non-numeric value 'abc' \(row 7\); convert it to numbers",
    ):
        check_array_2d(df)


def test_string_value_in_list_reports_the_string_not_a_number():
    with pytest.raises(ValueError, match=r"X column 1 has a non-numeric value 'a' \(row 0\)"):
        check_array_2d([[1.0, "a"], [2.0, 3.0]])


def test_string_array():
    with pytest.raises(ValueError, match="non-numeric value 'u'"):
        check_array_2d(np.array([["u", "v"]]))


def test_first_offending_column_is_reported():
    X = np.array([[1.0, 2.0, "zz"], [3.0, "yy", 4.0]], dtype=object)
    with pytest.raises(ValueError, match=r"column 1 has a non-numeric value 'yy' \(row 1\)"):
        check_array_2d(X)


def test_complex_dtype():
    with pytest.raises(ValueError, match="Complex data not supported"):
        check_array_2d(np.ones((3, 2)) + 1j)


def test_complex_object():
    X = np.array([[1.0, 2.0], [1 + 2j, 3.0]], dtype=object)
    with pytest.raises(ValueError, match=r"Complex data not supported.*column 0.*row 1"):
        check_array_2d(X)


def test_dict_value_is_a_type_error_matching_sklearn():
    X = np.arange(6.0).reshape(3, 2).astype(object)
    X[2, 1] = {"foo": "bar"}
    with pytest.raises(TypeError, match="argument must be a string.* number") as info:
        check_array_2d(X)
    assert "column 1" in str(info.value) and "row 2" in str(info.value)


def test_dict_value_in_dataframe_names_the_column():
    df = pd.DataFrame({"x": [1.0, 2.0], "weird": [1.0, {"a": 1}]})
    with pytest.raises(TypeError, match=r"column 1 \('weird'\).*argument must be a string.* number"):
        check_array_2d(df)


def test_nan_columns_listed():
    X = np.ones((4, 5))
    X[1, 0] = np.nan
    X[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"Input X contains NaN in column\(s\) \[0, 4\]"):
        check_array_2d(X)


def test_nan_message_uses_dataframe_names_estimator_and_hint():
    df = pd.DataFrame({"age": [1.0, 2.0], "chol": [np.nan, 3.0]})
    with pytest.raises(ValueError, match=r"NaN in column\(s\) \[1\] \('chol'\)") as info:
        check_array_2d(df, estimator_name="BayesSVC", nan_hint="Pass missing='model'.")
    msg = str(info.value)
    assert "BayesSVC" in msg and msg.endswith("Pass missing='model'.")


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_infinity_columns_listed(value):
    X = np.ones((3, 4))
    X[0, 2] = value
    with pytest.raises(ValueError, match=r"Input X contains infinity in column\(s\) \[2\]"):
        check_array_2d(X)


def test_allow_nan_accepts_nan_but_not_inf():
    X = np.array([[np.nan, 1.0], [2.0, 3.0]])
    out = check_array_2d(X, allow_nan=True)
    assert np.isnan(out[0, 0])
    X[1, 1] = np.inf
    with pytest.raises(ValueError, match=r"infinity in column\(s\) \[1\]"):
        check_array_2d(X, allow_nan=True)


def test_name_is_used_in_messages():
    with pytest.raises(ValueError, match="Input X_test contains NaN"):
        check_array_2d([[np.nan]], name="X_test")


# ---------------------------------------------------------------------------
# check_X_y and check_n_features
# ---------------------------------------------------------------------------


def test_check_X_y_returns_arrays_and_keeps_labels():
    X, y = check_X_y([[1, 2], [3, 4], [5, 6]], ["a", "b", "a"])
    assert X.dtype == np.float64 and X.shape == (3, 2)
    np.testing.assert_array_equal(y, ["a", "b", "a"])


def test_check_X_y_length_mismatch():
    with pytest.raises(
        ValueError, match="X and y have different lengths: X has 10 rows, y has 9 entries"
    ) as info:
        check_X_y(np.ones((10, 2)), np.arange(9) % 2)
    assert "inconsistent numbers of samples" in str(info.value)


def test_check_X_y_column_vector_warns():
    y = np.array([[0], [1], [1], [0]])
    with pytest.warns(DataConversionWarning):
        _, y1 = check_X_y(np.ones((4, 2)), y)
    assert y1.shape == (4,)


def test_check_X_y_rejects_2d_y():
    with pytest.raises(ValueError, match="y should be a 1d array"):
        check_X_y(np.ones((4, 2)), np.ones((4, 2)))


@pytest.mark.parametrize(
    "y", [[0.0, 1.0, np.nan, 0.0], np.array([0, 1, None, 0], dtype=object)], ids=["nan", "none"]
)
def test_check_X_y_missing_labels(y):
    with pytest.raises(ValueError, match=r"Input y contains NaN.*row\(s\) \[2\]"):
        check_X_y(np.ones((4, 2)), y)


def test_check_X_y_continuous_target():
    with pytest.raises(ValueError, match="Unknown label type"):
        check_X_y(np.ones((4, 2)), [0.1, 0.5, 0.3, 0.2])


def test_check_X_y_y_none():
    with pytest.raises(ValueError, match="requires y to be passed, but the target y is None"):
        check_X_y(np.ones((4, 2)), None, estimator_name="BayesSVC")


def test_check_X_y_passes_allow_nan():
    X, _ = check_X_y([[np.nan, 1.0], [2.0, 3.0]], [0, 1], allow_nan=True)
    assert np.isnan(X[0, 0])
    with pytest.raises(ValueError, match="NaN"):
        check_X_y([[np.nan, 1.0], [2.0, 3.0]], [0, 1])


def test_check_n_features_message():
    check_n_features(np.ones((2, 4)), 4, "BayesSVC")
    with pytest.raises(
        ValueError, match=r"^X has 3 features, but BayesSVC is expecting 4 features as input\.$"
    ):
        check_n_features(np.ones((2, 3)), 4, "BayesSVC")


# ---------------------------------------------------------------------------
# BinaryLabelEncoder
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "classes"),
    [
        (np.array([3, 7, 7, 3, 7]), [3, 7]),
        (np.array([-1, 1, 1, -1, 1]), [-1, 1]),
        (np.array(["no", "yes", "yes", "no", "yes"]), ["no", "yes"]),
        (np.array([False, True, True, False, True]), [False, True]),
        (np.array([0.5, 2.5, 2.5, 0.5, 2.5]), [0.5, 2.5]),
        (np.array([1, 2.5, 2.5, 1, 2.5], dtype=object), [1, 2.5]),
    ],
    ids=["int", "pm1", "str", "bool", "float", "object"],
)
def test_label_round_trip(y, classes):
    enc = BinaryLabelEncoder().fit(y)
    np.testing.assert_array_equal(enc.classes_, classes)
    signs = enc.transform(y)
    assert signs.dtype == np.float64
    np.testing.assert_array_equal(signs, [-1.0, 1.0, 1.0, -1.0, 1.0])
    back = enc.inverse_transform(signs)
    np.testing.assert_array_equal(back, y)
    np.testing.assert_array_equal(enc.fit_transform(list(y)), signs)


def test_inverse_transform_thresholds_real_values():
    enc = BinaryLabelEncoder().fit(["a", "b"])
    np.testing.assert_array_equal(enc.inverse_transform([0.3, -2.0, 0.0]), ["b", "a", "a"])
    with pytest.raises(ValueError, match="NaN"):
        enc.inverse_transform([np.nan])


def test_one_class():
    with pytest.raises(ValueError, match=r"y contains only one class \(label 'a'\); a classifier needs two"):
        BinaryLabelEncoder().fit(["a", "a", "a"])


def test_three_classes():
    with pytest.raises(ValueError, match=r"3 classes \(0, 1, 2\).*multi-class.*not supported") as info:
        BinaryLabelEncoder(estimator_name="BayesSVC").fit([0, 1, 2, 1])
    assert "BayesSVC" in str(info.value)
    assert "Only binary classification is supported" in str(info.value)


def test_unseen_label():
    enc = BinaryLabelEncoder().fit(["no", "yes"])
    with pytest.raises(ValueError, match="not seen during fit: 'maybe'"):
        enc.transform(["yes", "maybe"])
    enc = BinaryLabelEncoder().fit([-1, 1])
    with pytest.raises(ValueError, match="not seen during fit: 2"):
        enc.transform([1, 2])


def test_unsortable_labels():
    with pytest.raises(TypeError, match="cannot be sorted"):
        BinaryLabelEncoder().fit(np.array([1, "a", 1], dtype=object))


def test_encoder_rejects_nan_and_empty():
    with pytest.raises(ValueError, match="NaN"):
        BinaryLabelEncoder().fit([0.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="empty"):
        BinaryLabelEncoder().fit([])


def test_encoder_not_fitted():
    with pytest.raises(NotFittedError):
        BinaryLabelEncoder().transform([1])


# ---------------------------------------------------------------------------
# hyperparameter checks
# ---------------------------------------------------------------------------


def test_check_scalar_param_message():
    with pytest.raises(
        ValueError, match=r"^Invalid value for num_samples: -3 \(must be an integer >= 1\)$"
    ):
        check_scalar_param("num_samples", -3, kind="int", low=1)


@pytest.mark.parametrize(
    ("value", "kwargs", "match"),
    [
        (True, {"kind": "int", "low": 1}, "num_samples: True"),
        (2.0, {"kind": "int"}, r"num_samples: 2\.0 \(must be an integer\)"),
        (np.nan, {}, "num_samples: nan"),
        (np.inf, {"low": 0}, "num_samples: inf"),
        ("3", {}, "num_samples: '3'"),
        (None, {}, "num_samples: None"),
        (0.0, {"low": 0, "low_inclusive": False}, r"must be a real number > 0"),
        (1.0, {"low": 0, "high": 1, "high_inclusive": False}, r"must be a real number in \[0, 1\)"),
        (5, {"kind": "int", "high": 4}, r"must be an integer <= 4"),
    ],
)
def test_check_scalar_param_rejects(value, kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_scalar_param("num_samples", value, **kwargs)
    with pytest.raises(TypeError):
        check_scalar_param("num_samples", value, **kwargs)


def test_check_scalar_param_returns_python_numbers():
    out = check_scalar_param("n", np.int64(3), kind="int", low=1)
    assert out == 3 and type(out) is int
    out = check_scalar_param("c", 2, low=0, low_inclusive=False)
    assert out == 2.0 and type(out) is float
    assert check_scalar_param("c", 1.0, low=0, high=1) == 1.0
    assert check_scalar_param("c", None, allow_none=True) is None


def test_check_option():
    assert check_option("inference", "gibbs", ("em", "gibbs", "nuts")) == "gibbs"
    with pytest.raises(
        ValueError,
        match=r"^Invalid value for inference: 'foo'; valid options are 'em', 'gibbs', 'nuts'$",
    ):
        check_option("inference", "foo", ("em", "gibbs", "nuts"))
    with pytest.raises(InvalidParameterError, match="'em', 'gibbs', 'nuts'"):
        check_option("inference", ["em"], {"nuts", "gibbs", "em"})
    with pytest.raises(ValueError, match="Invalid value for flag: True"):
        check_option("flag", True, (0, 1))


# ---------------------------------------------------------------------------
# scikit-learn's estimator checks see the messages they look for
# ---------------------------------------------------------------------------


class _LeastSquaresClassifier(ClassifierMixin, BaseEstimator):
    """A minimal binary classifier validating its input with the data layer."""

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def fit(self, X, y):
        name = type(self).__name__
        check_scalar_param("alpha", self.alpha, low=0)
        X, y = check_X_y(X, y, estimator_name=name)
        self.encoder_ = BinaryLabelEncoder(name).fit(y)
        self.classes_ = self.encoder_.classes_
        self.n_features_in_ = X.shape[1]
        design = np.c_[X, np.ones(X.shape[0])]
        self.coef_ = np.linalg.lstsq(design, self.encoder_.transform(y), rcond=None)[0]
        return self

    def decision_function(self, X):
        check_is_fitted(self)
        X = check_array_2d(X, estimator_name=type(self).__name__)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        return np.c_[X, np.ones(X.shape[0])] @ self.coef_

    def predict(self, X):
        return self.encoder_.inverse_transform(self.decision_function(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


@pytest.mark.parametrize(
    "check",
    [
        ec.check_dtype_object,
        ec.check_complex_data,
        ec.check_estimators_empty_data_messages,
        ec.check_estimators_nan_inf,
        ec.check_fit1d,
        ec.check_fit2d_predict1d,
        ec.check_fit2d_1sample,
        ec.check_n_features_in_after_fitting,
        ec.check_classifiers_one_label,
        ec.check_classifiers_regression_target,
        ec.check_classifier_not_supporting_multiclass,
        ec.check_supervised_y_2d,
        ec.check_requires_y_none,
        ec.check_estimator_sparse_array,
        ec.check_estimators_dtypes,
        ec.check_estimators_pickle,
    ],
    ids=lambda f: f.__name__,
)
def test_sklearn_message_patterns(check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check("_LeastSquaresClassifier", _LeastSquaresClassifier())


# ---------------------------------------------------------------------------
# datasets
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wdbc", "breast_cancer_diagnostic", "WDBC"])
def test_wdbc_builtin(name, monkeypatch):
    monkeypatch.delenv("BMM_DATA_DIR", raising=False)
    ds = load_dataset(name)
    assert isinstance(ds, Dataset)
    assert ds.name == "wdbc"
    assert ds.X.shape == (569, 30) and ds.X.dtype == np.float64
    assert ds.y.shape == (569,)
    assert set(np.unique(ds.y)) == {-1, 1}
    assert int(np.sum(ds.y == 1)) == 212  # malignant
    assert int(np.sum(ds.y == -1)) == 357  # benign
    assert ds.meta["label_names"] == {"1": "malignant", "-1": "benign"}
    assert ds.groups is None and ds.split is None
    assert len(ds.feature_names) == 30 and ds.feature_names[0] == "mean radius"


def test_wdbc_positive_class_is_malignant():
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    ds = load_dataset("wdbc")
    malignant = bunch.target == list(bunch.target_names).index("malignant")
    np.testing.assert_array_equal(ds.y == 1, malignant)
    np.testing.assert_array_equal(ds.X, bunch.data)


def test_no_data_dir(monkeypatch):
    monkeypatch.delenv("BMM_DATA_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="BMM_DATA_DIR") as info:
        load_dataset("ionosphere")
    msg = str(info.value)
    assert "'ionosphere'" in msg and "data_dir" in msg
    assert isinstance(info.value, DataDirNotSetError) and isinstance(info.value, ValueError)
    names = list_datasets()
    assert "wdbc" in names and "ionosphere" not in names


def test_missing_data_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset("ionosphere", data_dir=tmp_path / "nowhere")


def _write_tiny_dataset(root: Path, name: str = "tiny") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    csv = "a,b,group,split,label\n1,2.5,1,train,1\n3,,1,test,-1\n5,6,2,train,1\n7,8,2,test,-1\n"
    with gzip.open(folder / "data.csv.gz", "wt") as fh:
        fh.write(csv)
    meta = {
        "name": name,
        "n_rows": 4,
        "n_features": 2,
        "task": "binary",
        "feature_columns": ["a", "b"],
        "extra_columns": ["group", "split"],
        "label_column": "label",
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def test_load_csv_folder(tmp_path):
    _write_tiny_dataset(tmp_path)
    ds = load_dataset("tiny", data_dir=tmp_path)
    assert ds.X.shape == (4, 2)
    assert np.isnan(ds.X[1, 1]) and np.isnan(ds.X).sum() == 1
    np.testing.assert_array_equal(ds.y, [1, -1, 1, -1])
    assert ds.y.dtype.kind == "i"
    np.testing.assert_array_equal(ds.groups, [1, 1, 2, 2])
    np.testing.assert_array_equal(ds.split, ["train", "test", "train", "test"])
    assert ds.feature_names == ["a", "b"]
    assert ds.meta["task"] == "binary" and ds.name == "tiny"
    names = list_datasets(tmp_path)
    assert "tiny" in names and "wdbc" in names and names == sorted(names)


def test_unknown_name_lists_available(tmp_path):
    _write_tiny_dataset(tmp_path)
    with pytest.raises(ValueError, match="Unknown dataset 'nope'") as info:
        load_dataset("nope", data_dir=tmp_path)
    assert "tiny" in str(info.value) and "wdbc" in str(info.value)


def test_folder_missing_files(tmp_path):
    folder = _write_tiny_dataset(tmp_path)
    (folder / "data.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing data\.csv\.gz"):
        load_dataset("tiny", data_dir=tmp_path)


def test_file_datasets_take_no_options(tmp_path):
    _write_tiny_dataset(tmp_path)
    with pytest.raises(TypeError, match="unexpected keyword"):
        load_dataset("tiny", data_dir=tmp_path, bogus=1)


def test_register_dataset(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets_module, "_REGISTRY", dict(datasets_module._REGISTRY))
    monkeypatch.setattr(datasets_module, "_ALIASES", dict(datasets_module._ALIASES))
    seen = {}

    def make_toy(data_dir=None, n=5):
        seen["data_dir"] = data_dir
        X = np.zeros((n, 2))
        return Dataset(X, np.ones(n, dtype=int), None, None, ["u", "v"], {}, "toy")

    register_dataset("toy", make_toy, aliases=("toy_alias",))
    ds = load_dataset("toy_alias", data_dir=tmp_path, n=7)
    assert ds.X.shape == (7, 2) and seen["data_dir"] == tmp_path
    assert "toy" in list_datasets()
    register_dataset("toy", make_toy)  # the same loader again is fine
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("toy", lambda data_dir=None: None)
    register_dataset("toy", lambda data_dir=None: "replaced", overwrite=True)
    assert load_dataset("toy") == "replaced"


# Shared datasets: shapes and labels must match meta.json.

_SHARED = ["ionosphere", "pima", "toenail", "usps", "acath", "dorothea"]


@pytest.fixture(scope="module")
def shared_datasets():
    return {name: load_dataset(name, data_dir=_DATA_DIR) for name in _SHARED}


@needs_shared_data
@pytest.mark.parametrize("name", _SHARED)
def test_shared_dataset_matches_meta(name, shared_datasets):
    ds = shared_datasets[name]
    meta = json.loads((Path(_DATA_DIR) / name / "meta.json").read_text())
    assert ds.name == name
    assert ds.X.shape == (meta["n_rows"], meta["n_features"])
    assert ds.y.shape == (meta["n_rows"],)
    assert len(ds.feature_names) == meta["n_features"]
    labels, counts = np.unique(ds.y, return_counts=True)
    assert {str(int(k)): int(c) for k, c in zip(labels, counts, strict=True)} == {
        k: int(v) for k, v in meta["label_counts"].items()
    }
    if "feature_columns" in meta:
        assert ds.feature_names == meta["feature_columns"]
    if not sp.issparse(ds.X):
        assert ds.X.dtype == np.float64
        assert int(np.isnan(ds.X).sum()) == meta.get("missing_values", 0)


@needs_shared_data
def test_shared_toenail_groups(shared_datasets):
    ds = shared_datasets["toenail"]
    assert ds.groups is not None and ds.groups.shape == (1908,)
    assert np.unique(ds.groups).size == 294
    assert ds.split is None


@needs_shared_data
def test_shared_usps_split(shared_datasets):
    ds = shared_datasets["usps"]
    assert ds.split is not None
    assert int(np.sum(ds.split == "train")) == 7291
    assert int(np.sum(ds.split == "test")) == 2007
    assert set(np.unique(ds.y)) == set(range(10))


@needs_shared_data
def test_shared_acath_missing_column(shared_datasets):
    ds = shared_datasets["acath"]
    missing_by_column = np.isnan(ds.X).sum(axis=0)
    assert missing_by_column[ds.feature_names.index("choleste")] == 1246
    assert missing_by_column.sum() == 1246


@needs_shared_data
def test_shared_dorothea_sparse(shared_datasets):
    ds = shared_datasets["dorothea"]
    assert sp.issparse(ds.X) and ds.X.format == "csr"
    assert ds.X.shape == (800, 88119)
    assert ds.X.dtype == np.float64
    assert ds.X.nnz == 727760
    assert set(np.unique(ds.y)) == {-1, 1}


@needs_shared_data
def test_list_datasets_with_shared_folder():
    names = list_datasets(_DATA_DIR)
    assert {"wdbc", "ionosphere", "dorothea", "usps"} <= set(names)


# ---------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------


def test_train_test_split_stratified():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = np.r_[np.ones(30, dtype=int), -np.ones(70, dtype=int)]
    X_tr, X_te, y_tr, y_te = train_test_split_stratified(X, y, test_size=0.3)
    assert X_tr.shape == (70, 3) and X_te.shape == (30, 3)
    assert int(np.sum(y_te == 1)) == 9 and int(np.sum(y_tr == 1)) == 21
    again = train_test_split_stratified(X, y, test_size=0.3)
    np.testing.assert_array_equal(again[1], X_te)
    other = train_test_split_stratified(X, y, test_size=0.3, random_state=1)
    assert not np.array_equal(other[1], X_te)


def test_train_test_split_stratified_groups_and_sparse():
    X = sp.csr_matrix(np.arange(40.0).reshape(20, 2))
    y = np.arange(20) % 2
    groups = np.arange(20) // 2
    X_tr, X_te, y_tr, y_te, g_tr, g_te = train_test_split_stratified(
        X, y, test_size=0.25, groups=groups
    )
    assert sp.issparse(X_tr) and X_te.shape == (5, 2)
    np.testing.assert_array_equal(g_te, X_te.toarray()[:, 0] // 4)
    np.testing.assert_array_equal(y_te, (X_te.toarray()[:, 0] // 2) % 2)
