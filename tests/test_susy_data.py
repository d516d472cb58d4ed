"""Tests of the SUSY loaders: the seeded synthetic stand-in and the real-CSV reader."""

from __future__ import annotations

import gzip
import sys

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bayes_maxmargin.data import datasets as datasets_module
from bayes_maxmargin.data import load_dataset

NAMES = datasets_module.SUSY_FEATURE_NAMES


def _synthetic(**kwargs):
    return load_dataset("susy_synthetic", **kwargs)


# ---------------------------------------------------------------------------
# synthetic
# ---------------------------------------------------------------------------


def test_synthetic_shape_dtype_labels():
    ds = _synthetic(n=3000)
    assert ds.X.shape == (3000, 18) and ds.X.dtype == np.float32
    assert ds.y.shape == (3000,) and ds.y.dtype.kind == "i"
    assert set(np.unique(ds.y)) == {-1, 1}
    assert np.isfinite(ds.X).all()
    assert ds.feature_names == NAMES and len(NAMES) == 18 and NAMES[0] == "lepton_1_pT"
    assert ds.name == "susy_synthetic" and ds.groups is None and ds.split is None
    # momenta and missing energy are positive and right-skewed; leading lepton first
    for j in (0, 3, 6):
        col = ds.X[:, j]
        assert (col > 0).all() and np.mean(col) > np.median(col)
    assert (ds.X[:, 0] >= ds.X[:, 3]).all()
    meta = ds.meta
    assert meta["n_samples"] == 3000 and meta["n_features"] == 18
    assert 0.19 <= meta["bayes_error"] <= 0.21
    assert meta["generator"]["random_state"] == 0 and "description" in meta
    assert sum(meta["label_counts"].values()) == 3000

    ds64 = _synthetic(n=3000, dtype="float64")
    assert ds64.X.dtype == np.float64
    np.testing.assert_array_equal(ds64.X.astype(np.float32), ds.X)


def test_synthetic_deterministic_and_chunk_independent():
    small = _synthetic(n=1000, random_state=3)
    again = _synthetic(n=1000, random_state=3)
    np.testing.assert_array_equal(small.X, again.X)
    np.testing.assert_array_equal(small.y, again.y)
    assert not np.array_equal(small.X, _synthetic(n=1000, random_state=4).X)

    # 20,000 rows span three 8,192-row seeded blocks; chunk_size=1 gives one
    # block per chunk, 10,000 two blocks per chunk, the default one chunk
    big = _synthetic(n=20_000, random_state=3, chunk_size=1)
    np.testing.assert_array_equal(big.X[:1000], small.X)
    np.testing.assert_array_equal(big.y[:1000], small.y)
    mid = _synthetic(n=5000, random_state=3, chunk_size=10_000)
    np.testing.assert_array_equal(big.X[:5000], mid.X)
    for chunk_size in (10_000, 1_000_000):
        other = _synthetic(n=20_000, random_state=3, chunk_size=chunk_size)
        np.testing.assert_array_equal(big.X, other.X)
        np.testing.assert_array_equal(big.y, other.y)


def test_synthetic_bayes_error_and_balance():
    ds = _synthetic(n=200_000, random_state=11)
    p = expit(datasets_module._susy_synthetic_logit(ds.X))
    bayes_error = np.minimum(p, 1 - p).mean()
    assert 0.19 <= bayes_error <= 0.21
    assert abs(bayes_error - ds.meta["bayes_error"]) < 0.005
    # labels follow p: the Bayes rule's empirical error matches, classes balance
    assert abs(np.mean(np.where(p > 0.5, 1, -1) != ds.y) - bayes_error) < 0.005
    assert abs(np.mean(ds.y == 1) - 0.5) < 0.01
    assert abs(np.mean(ds.y == 1) - p.mean()) < 0.005


def test_synthetic_boundary_is_nonlinear():
    ds = _synthetic(n=20_000, random_state=0)
    X, y = ds.X, ds.y
    train, test = slice(0, 10_000), slice(10_000, None)
    linear = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    linear.fit(X[train], y[train])
    linear_error = np.mean(linear.predict(X[test]) != y[test])
    bayes = np.where(datasets_module._susy_synthetic_logit(X[test]) > 0, 1, -1)
    bayes_error = np.mean(bayes != y[test])
    assert 0.18 < bayes_error < 0.22
    assert linear_error - bayes_error >= 0.03, (linear_error, bayes_error)


def test_synthetic_memmap_round_trip(tmp_path):
    path = tmp_path / "susy_X.npy"
    ds = _synthetic(n=20_000, random_state=5, chunk_size=8192, path=path)
    assert isinstance(ds.X, np.memmap) and not ds.X.flags.writeable
    assert ds.X.shape == (20_000, 18) and ds.X.dtype == np.float32
    assert ds.meta["path"] == str(path)
    ref = _synthetic(n=20_000, random_state=5)
    np.testing.assert_array_equal(ds.X, ref.X)
    np.testing.assert_array_equal(ds.y, ref.y)
    np.testing.assert_array_equal(np.load(path), ref.X)

    with pytest.raises(FileExistsError, match="susy_X.npy"):
        _synthetic(n=10, path=path)
    np.testing.assert_array_equal(np.load(path), ref.X)  # untouched

    ds2 = _synthetic(n=100, random_state=5, dtype="float64", path=str(path), overwrite=True)
    assert ds2.X.shape == (100, 18) and ds2.X.dtype == np.float64
    np.testing.assert_array_equal(ds2.X.astype(np.float32), ref.X[:100])
    np.testing.assert_array_equal(ds.X, ref.X)  # the old memory map still reads the old file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["susy_X.npy"]  # no temp files


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"n": 0}, "n: 0"),
        ({"n": 1.5}, "n: 1.5"),
        ({"n": "10"}, "n: '10'"),
        ({"chunk_size": 0}, "chunk_size: 0"),
        ({"random_state": -1}, "random_state: -1"),
        ({"dtype": "int32"}, "dtype: 'int32'"),
        ({"dtype": "nonsense"}, "dtype: 'nonsense'"),
        ({"dtype": None}, "dtype: None"),
    ],
)
def test_synthetic_bad_input(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        _synthetic(**kwargs)


# ---------------------------------------------------------------------------
# real CSV
# ---------------------------------------------------------------------------


def _csv_rows(n: int = 10) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(0)
    labels = np.array([1.0, 0.0] * (n // 2))
    X = rng.normal(size=(n, 18)).round(6)
    lines = [",".join(f"{v:.18e}" for v in (lab, *row)) + "\n" for lab, row in zip(labels, X)]
    return X, np.where(labels == 1, 1, -1), lines


def _write(path, lines):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as fh:
        fh.writelines(lines)
    return path


@pytest.mark.parametrize("name", ["SUSY.csv", "SUSY.csv.gz"])
def test_susy_csv(tmp_path, name, monkeypatch):
    X, y, lines = _csv_rows()
    path = _write(tmp_path / name, lines)
    ds = load_dataset("susy", path=path)
    assert ds.X.shape == (10, 18) and ds.X.dtype == np.float32 and ds.name == "susy"
    np.testing.assert_allclose(ds.X, X, rtol=1e-6)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.feature_names == NAMES and ds.meta["label_counts"] == {"-1": 5, "1": 5}

    # several read chunks, first n rows, float64, and a trailing blank line
    monkeypatch.setattr(datasets_module, "_SUSY_READ_LINES", 3)
    _write(path, [*lines, "\n"])
    ds64 = load_dataset("susy", path=str(path), dtype="float64")
    np.testing.assert_allclose(ds64.X, X, rtol=np.finfo(np.float64).eps, atol=0)  # pandas' fast parser: to 1 ulp
    np.testing.assert_array_equal(ds64.y, y)
    first = load_dataset("susy", path=path, n=4)
    np.testing.assert_array_equal(first.y, y[:4]) and first.X.shape == (4, 18)

    # found in <data_dir>/susy/ without a path
    (tmp_path / "susy").mkdir()
    _write(tmp_path / "susy" / name, lines)
    np.testing.assert_array_equal(load_dataset("susy", data_dir=tmp_path).y, y)


@pytest.mark.parametrize("pandas", [True, False])
@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("1.0,abc" + ",0.5" * 17 + "\n", "non-numeric"),
        ("1.0,2.0,3.0\n", "3 values, expected 19"),
        ("2.0" + ",0.5" * 18 + "\n", "label '2.0'"),
        ("1.0,nan" + ",0.5" * 17 + "\n", "non-finite"),
    ],
)
def test_susy_csv_malformed_line(tmp_path, monkeypatch, bad, reason, pandas):
    if not pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)  # numpy fallback
    monkeypatch.setattr(datasets_module, "_SUSY_READ_LINES", 4)
    _, _, lines = _csv_rows()
    lines[5] = bad
    path = _write(tmp_path / "SUSY.csv.gz", lines)
    with pytest.raises(ValueError, match=rf"line 6: {reason}"):
        load_dataset("susy", path=path)
    assert load_dataset("susy", path=path, n=5).X.shape == (5, 18)  # bad line not read


def test_susy_csv_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("BMM_DATA_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="path="):
        load_dataset("susy")
    with pytest.raises(FileNotFoundError, match="SUSY.csv"):
        load_dataset("susy", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="nowhere.csv"):
        load_dataset("susy", path=tmp_path / "nowhere.csv")
    path = _write(tmp_path / "empty.csv", [])
    with pytest.raises(ValueError, match="no data rows"):
        load_dataset("susy", path=path)
    _, _, lines = _csv_rows()
    _write(path, lines)
    with pytest.raises(ValueError, match="n: 0"):
        load_dataset("susy", path=path, n=0)
    with pytest.raises(ValueError, match="dtype: 'int8'"):
        load_dataset("susy", path=path, dtype="int8")
