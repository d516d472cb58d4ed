"""Named benchmark datasets.

One dataset is built in and needs no download: ``"wdbc"`` (alias
``"breast_cancer_diagnostic"``), the Wisconsin diagnostic breast cancer data
that ships with scikit-learn. Every other name is read from a data folder,
given by the ``data_dir`` argument or else the environment variable
``BMM_DATA_DIR``. Each dataset is a sub-folder holding

- ``data.csv.gz``: a header row, the feature columns, optional ``group`` and
  ``split`` columns, then the ``label`` column; empty cells are missing values;
- ``meta.json``: shapes, column names, label counts and meanings, notes;

or, for sparse data (``dorothea``), ``X.npz`` (a scipy.sparse CSR matrix),
``labels.txt`` and ``meta.json``.

Loaders live in a small registry, so that generated datasets can be added
with :func:`register_dataset`.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from bayes_maxmargin.data.validation import check_array_2d

__all__ = [
    "DATA_DIR_ENV",
    "DataDirNotSetError",
    "Dataset",
    "list_datasets",
    "load_dataset",
    "register_dataset",
]

#: Environment variable naming the folder of file-based datasets.
DATA_DIR_ENV = "BMM_DATA_DIR"

_SPLIT_VALUES = ("train", "test")
_EXTRA_COLUMNS = ("group", "split")


class Dataset(NamedTuple):
    """A loaded dataset.

    Attributes
    ----------
    X : numpy.ndarray of shape (n_samples, n_features) or scipy.sparse.csr_matrix
        Features as float64; missing cells are NaN. Sparse datasets give a CSR
        matrix.
    y : numpy.ndarray of shape (n_samples,)
        Labels as stored: +1 / -1 integers for binary tasks, integers for
        multi-class tasks.
    groups : numpy.ndarray of shape (n_samples,) or None
        Cluster ids (e.g. the patient in ``toenail``), if the data have them.
    split : numpy.ndarray of shape (n_samples,) or None
        ``"train"`` / ``"test"`` for datasets with a standard split.
    feature_names : list of str
        One name per column of ``X``.
    meta : dict
        Contents of ``meta.json`` (shapes, label meanings, notes), plus
        ``"path"`` for file-based datasets.
    name : str
        Canonical name of the dataset.
    """

    X: Any
    y: np.ndarray
    groups: np.ndarray | None
    split: np.ndarray | None
    feature_names: list[str]
    meta: dict[str, Any]
    name: str


#: A loader is called as ``loader(data_dir=<Path or None>, **kwargs)``.
Loader = Callable[..., Dataset]


class DataDirNotSetError(FileNotFoundError, ValueError):
    """A dataset that is not built in was requested, but no data folder is set.

    Subclasses both :class:`FileNotFoundError` (the data are not available) and
    :class:`ValueError` (the name is not one of the built-in datasets).
    """


# ---------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------

_REGISTRY: dict[str, Loader] = {}
_ALIASES: dict[str, str] = {}


def _normalise(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"Dataset name must be a string, got {type(name).__name__}: {name!r}")
    return name.strip().lower().replace("-", "_")


def register_dataset(
    name: str,
    loader: Loader,
    *,
    aliases: tuple[str, ...] | list[str] = (),
    overwrite: bool = False,
) -> None:
    """Register a loader under a dataset name.

    Registered names take precedence over folders of the same name in the
    data folder; a loader may still read files from there (it receives the
    resolved folder).

    Parameters
    ----------
    name : str
        Dataset name (case-insensitive; ``-`` and ``_`` are equivalent).
    loader : callable
        Called as ``loader(data_dir=data_dir, **kwargs)`` by
        :func:`load_dataset`, where ``data_dir`` is the resolved data folder
        (a :class:`pathlib.Path`) or ``None`` if none is configured. It must
        return a :class:`Dataset`.
    aliases : sequence of str, default=()
        Other names for the same dataset.
    overwrite : bool, default=False
        Whether to replace a different loader already registered under
        ``name``. Registering the same function again (e.g. when its module
        is reloaded) is always allowed.

    Raises
    ------
    ValueError
        If ``name`` or an alias is taken and ``overwrite`` is False.
    TypeError
        If ``loader`` is not callable.
    """
    if not callable(loader):
        raise TypeError(f"loader must be callable, got {type(loader).__name__}")
    key = _normalise(name)
    old = _REGISTRY.get(key)
    if old is not None and not overwrite and not _same_function(old, loader):
        raise ValueError(
            f"A dataset named {key!r} is already registered ({old!r}); "
            "pass overwrite=True to replace it."
        )
    alias_keys = [_normalise(a) for a in aliases]
    for alias in alias_keys:
        target = _ALIASES.get(alias)
        if alias in _REGISTRY or (target is not None and target != key and not overwrite):
            raise ValueError(f"The alias {alias!r} is already used by another dataset.")
    _REGISTRY[key] = loader
    for alias in alias_keys:
        _ALIASES[alias] = key


def _same_function(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    if a is b:
        return True
    return (
        getattr(a, "__module__", None) == getattr(b, "__module__", None)
        and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
        and getattr(a, "__qualname__", None) is not None
    )


# ---------------------------------------------------------------------------
# data folder
# ---------------------------------------------------------------------------


def _resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> tuple[Path | None, str]:
    """Return the data folder (or None) and where it came from."""
    if data_dir is not None:
        return Path(data_dir).expanduser(), "data_dir"
    env = os.environ.get(DATA_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser(), f"${DATA_DIR_ENV}"
    return None, ""


def _is_dataset_folder(path: Path) -> bool:
    return path.is_dir() and any(
        (path / f).is_file() for f in ("meta.json", "data.csv.gz", "X.npz")
    )


def _folder_datasets(root: Path | None) -> list[str]:
    if root is None or not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if _is_dataset_folder(p))


def list_datasets(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """List the dataset names that :func:`load_dataset` accepts.

    Parameters
    ----------
    data_dir : str or path-like or None, default=None
        Data folder; defaults to ``$BMM_DATA_DIR``. Without one, only the
        built-in and registered datasets are listed.

    Returns
    -------
    list of str
        Sorted canonical names (aliases excluded): built-in and registered
        datasets plus the dataset folders found in the data folder.
    """
    root, _ = _resolve_data_dir(data_dir)
    return sorted(set(_REGISTRY) | set(_folder_datasets(root)))


def load_dataset(
    name: str, *, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any
) -> Dataset:
    """Load a named dataset.

    Parameters
    ----------
    name : str
        Dataset name, e.g. ``"wdbc"``, ``"ionosphere"``, ``"toenail"``
        (case-insensitive; ``-`` and ``_`` are equivalent).
    data_dir : str or path-like or None, default=None
        Folder holding one sub-folder per file-based dataset; defaults to the
        environment variable ``BMM_DATA_DIR``.
    **kwargs
        Passed on to a registered loader. File-based datasets take none.

    Returns
    -------
    Dataset

    Raises
    ------
    ValueError
        If the name is unknown (the message lists the available names).
    DataDirNotSetError
        (a FileNotFoundError and ValueError) if ``name`` is not built in and
        neither ``data_dir`` nor ``BMM_DATA_DIR`` is set.
    FileNotFoundError
        If the data folder does not exist or a dataset folder lacks its files.
    """
    key = _normalise(name)
    key = _ALIASES.get(key, key)
    root, source = _resolve_data_dir(data_dir)
    if key in _REGISTRY:
        return _REGISTRY[key](data_dir=root, **kwargs)

    if root is None:
        builtin = sorted(set(_REGISTRY) | set(_ALIASES))
        raise DataDirNotSetError(
            f"Dataset {name!r} is not built in (built-in datasets: {', '.join(builtin)}) "
            f"and no data folder is configured: set the environment variable "
            f"{DATA_DIR_ENV} to the folder holding the datasets, or pass "
            f"data_dir=... to load_dataset."
        )
    if not root.is_dir():
        raise FileNotFoundError(
            f"Cannot load dataset {name!r}: the data folder {str(root)!r} (from {source}) "
            "does not exist."
        )
    folder = root / key
    if not folder.is_dir():
        available = list_datasets(root)
        aliases = ", ".join(f"{a} -> {t}" for a, t in sorted(_ALIASES.items()))
        raise ValueError(
            f"Unknown dataset {name!r}. Available datasets: {', '.join(available)}"
            + (f" (aliases: {aliases})" if aliases else "")
            + f". File-based datasets are read from {str(root)!r} (from {source})."
        )
    if kwargs:
        raise TypeError(
            f"load_dataset({key!r}) got unexpected keyword argument(s): "
            f"{', '.join(sorted(kwargs))}; file-based datasets take no options."
        )
    is_sparse = (folder / "X.npz").is_file() or (
        (folder / "labels.txt").is_file() and not (folder / "data.csv.gz").is_file()
    )
    if is_sparse:
        return _load_sparse_folder(folder, key)
    return _load_csv_folder(folder, key)


# ---------------------------------------------------------------------------
# file-based loaders
# ---------------------------------------------------------------------------


def _require_files(folder: Path, name: str, files: tuple[str, ...]) -> None:
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"Dataset {name!r}: the folder {str(folder)!r} is missing "
            f"{', '.join(missing)} (expected data.csv.gz and meta.json, or X.npz, "
            "labels.txt and meta.json for sparse data)."
        )


def _read_meta(folder: Path, name: str) -> dict[str, Any]:
    path = folder / "meta.json"
    try:
        with path.open(encoding="utf-8") as fh:
            meta = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"Dataset {name!r}: {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValueError(f"Dataset {name!r}: {str(path)!r} must hold a JSON object.")
    meta = dict(meta)
    meta["path"] = str(folder)
    return meta


def _check_shape_against_meta(name: str, shape: tuple[int, int], meta: dict[str, Any]) -> None:
    expected = (meta.get("n_rows"), meta.get("n_features"))
    for what, got, want in zip(("rows", "features"), shape, expected, strict=True):
        if want is not None and int(want) != got:
            warnings.warn(
                f"Dataset {name!r}: meta.json says {want} {what}, the data have {got}.",
                UserWarning,
                stacklevel=3,
            )


def _labels_as_stored(values: np.ndarray, name: str) -> np.ndarray:
    """Return the labels, as integers when they are whole numbers."""
    if values.dtype.kind == "f":
        if np.isnan(values).any():
            rows = np.flatnonzero(np.isnan(values))[:10].tolist()
            raise ValueError(f"Dataset {name!r}: missing labels in rows {rows}.")
        if np.all(values == np.round(values)):
            return values.astype(np.int64)
    return values


def _load_csv_folder(folder: Path, name: str) -> Dataset:
    import pandas as pd

    _require_files(folder, name, ("data.csv.gz", "meta.json"))
    meta = _read_meta(folder, name)
    df = pd.read_csv(folder / "data.csv.gz", low_memory=False)
    label_col = meta.get("label_column", "label")
    if label_col not in df.columns:
        raise ValueError(
            f"Dataset {name!r}: data.csv.gz has no label column {label_col!r} "
            f"(columns: {', '.join(map(str, df.columns[-5:]))}, ...)."
        )
    extra = [c for c in _EXTRA_COLUMNS if c in df.columns]
    feature_cols = meta.get("feature_columns")
    if feature_cols is None:
        feature_cols = [c for c in df.columns if c != label_col and c not in extra]
    else:
        missing = [c for c in feature_cols if c not in df.columns]
        if missing:
            raise ValueError(
                f"Dataset {name!r}: feature column(s) {missing[:10]} listed in "
                "meta.json are not in data.csv.gz."
            )
    X = check_array_2d(df[feature_cols], name=f"{name} features", allow_nan=True)
    y = _labels_as_stored(df[label_col].to_numpy(), name)
    groups = df["group"].to_numpy() if "group" in extra else None
    split = None
    if "split" in extra:
        split = df["split"].astype(str).str.strip().str.lower().to_numpy().astype(str)
        bad = sorted(set(np.unique(split)) - set(_SPLIT_VALUES))
        if bad:
            raise ValueError(
                f"Dataset {name!r}: column 'split' must hold 'train' or 'test', "
                f"found {bad[:5]}."
            )
    _check_shape_against_meta(name, X.shape, meta)
    return Dataset(
        X=X,
        y=y,
        groups=groups,
        split=split,
        feature_names=[str(c) for c in feature_cols],
        meta=meta,
        name=name,
    )


def _load_sparse_folder(folder: Path, name: str) -> Dataset:
    _require_files(folder, name, ("X.npz", "labels.txt", "meta.json"))
    meta = _read_meta(folder, name)
    X = sp.load_npz(folder / "X.npz").tocsr().astype(np.float64)
    y = _labels_as_stored(np.loadtxt(folder / "labels.txt", dtype=np.float64, ndmin=1), name)
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"Dataset {name!r}: X.npz has {X.shape[0]} rows but labels.txt has "
            f"{y.shape[0]} labels."
        )
    feature_cols = meta.get("feature_columns")
    if feature_cols is None or len(feature_cols) != X.shape[1]:
        feature_cols = [f"x{j + 1}" for j in range(X.shape[1])]
    _check_shape_against_meta(name, X.shape, meta)
    return Dataset(
        X=X,
        y=y,
        groups=None,
        split=None,
        feature_names=[str(c) for c in feature_cols],
        meta=meta,
        name=name,
    )


# ---------------------------------------------------------------------------
# built-in datasets
# ---------------------------------------------------------------------------


def _load_wdbc(data_dir: Path | None = None) -> Dataset:
    """Wisconsin diagnostic breast cancer data (569 x 30) from scikit-learn.

    Labels are recoded to +1 (malignant) and -1 (benign); scikit-learn codes
    malignant as 0 and benign as 1.
    """
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    X = np.ascontiguousarray(bunch.data, dtype=np.float64)
    target_names = list(bunch.target_names)  # ['malignant', 'benign']
    malignant = target_names.index("malignant")
    y = np.where(bunch.target == malignant, 1, -1).astype(np.int64)
    feature_names = [str(f) for f in bunch.feature_names]
    meta: dict[str, Any] = {
        "name": "wdbc",
        "n_rows": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "task": "binary",
        "feature_columns": feature_names,
        "extra_columns": [],
        "label_column": "label",
        "label_counts": {"-1": int(np.sum(y == -1)), "1": int(np.sum(y == 1))},
        "label_names": {"1": "malignant", "-1": "benign"},
        "missing_values": 0,
        "source": "sklearn.datasets.load_breast_cancer (UCI Breast Cancer Wisconsin, Diagnostic)",
        "notes": "labels recoded from scikit-learn's 0 = malignant / 1 = benign "
        "to +1 = malignant / -1 = benign",
    }
    return Dataset(
        X=X, y=y, groups=None, split=None, feature_names=feature_names, meta=meta, name="wdbc"
    )


register_dataset("wdbc", _load_wdbc, aliases=("breast_cancer_diagnostic",))
