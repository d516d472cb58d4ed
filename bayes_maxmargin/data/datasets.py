"""Named benchmark datasets.

Built in, with no download:

- ``"wdbc"`` (alias ``"breast_cancer_diagnostic"``), the Wisconsin diagnostic
  breast cancer data that ships with scikit-learn;
- ``"susy_synthetic"``, a seeded synthetic stand-in for the SUSY data (any
  number of rows x 18 features, nonlinear Bayes boundary, Bayes error about
  0.20), generated in chunks, optionally into a memory-mapped ``.npy`` file.

``"susy"`` reads the UCI SUSY file (``SUSY.csv`` or ``SUSY.csv.gz``, 5,000,000
x 18) from ``path=...`` or from the ``susy`` sub-folder of the data folder.

Every other name is read from a data folder, given by the ``data_dir``
argument or else the environment variable ``BMM_DATA_DIR``. Each dataset is a
sub-folder holding

- ``data.csv.gz``: a header row, the feature columns, optional ``group`` and
  ``split`` columns, then the ``label`` column; empty cells are missing values;
- ``meta.json``: shapes, column names, label counts and meanings, notes;

or, for sparse data (``dorothea``), ``X.npz`` (a scipy.sparse CSR matrix),
``labels.txt`` and ``meta.json``.

Loaders live in a small registry, so that generated datasets can be added
with :func:`register_dataset`.
"""

from __future__ import annotations

import gzip
import inspect
import io
import itertools
import json
import math
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy import special

from bayes_maxmargin.core.checks import InvalidParameterError, check_scalar_param
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
        Features as float64 (float32 by default for ``susy`` and
        ``susy_synthetic``, possibly a read-only memory map); missing cells
        are NaN. Sparse datasets give a CSR matrix.
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

    Examples
    --------
    >>> from bayes_maxmargin import load_dataset
    >>> ds = load_dataset("wdbc")
    >>> ds.name, ds.X.shape, ds.feature_names[0]
    ('wdbc', (569, 30), 'mean radius')
    >>> sorted(set(ds.y.tolist()))
    [-1, 1]
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
    key = name.strip().lower().replace("-", "_")
    if not re.fullmatch(r"[a-z0-9_]+", key):  # never a path: no '', '.', '/', '..'
        raise ValueError(
            f"Invalid dataset name {name!r}: names are letters, digits, '_' and '-' (see list_datasets())"
        )
    return key


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

    Examples
    --------
    >>> from bayes_maxmargin import list_datasets
    >>> "wdbc" in list_datasets()
    True
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
        Passed on to a registered loader, e.g. ``n``, ``random_state``,
        ``dtype``, ``chunk_size``, ``path`` for ``"susy_synthetic"`` or
        ``path``, ``n``, ``dtype`` for ``"susy"``. File-based datasets take
        none.

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

    Examples
    --------
    >>> from bayes_maxmargin import load_dataset
    >>> load_dataset("wdbc").X.shape  # built in; the papers' datasets need BMM_DATA_DIR
    (569, 30)
    >>> load_dataset("susy_synthetic", n=1000, random_state=0).X.shape  # generated
    (1000, 18)
    """
    key = _normalise(name)
    key = _ALIASES.get(key, key)
    root, source = _resolve_data_dir(data_dir)
    if key in _REGISTRY:
        loader = _REGISTRY[key]
        accepted = [p for p in inspect.signature(loader).parameters if p != "data_dir"]
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(loader).parameters.values()):
            raise TypeError(
                f"load_dataset({key!r}) got unexpected keyword argument(s): {', '.join(unknown)}; "
                f"it takes {', '.join(accepted) if accepted else 'no options'}."
            )
        return loader(data_dir=root, **kwargs)

    if root is None:
        builtin = sorted(set(_REGISTRY) | set(_ALIASES))
        err = DataDirNotSetError(
            f"Dataset {name!r} is not built in (built-in datasets: {', '.join(builtin)}) "
            f"and no data folder is configured: set the environment variable "
            f"{DATA_DIR_ENV} to the folder holding the datasets, or pass "
            f"data_dir=... to load_dataset."
        )
        err.dataset = key
        raise err
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


def _folder_dataset(
    name: str,
    X: Any,
    y: np.ndarray,
    feature_cols: list[Any],
    meta: dict[str, Any],
    groups: np.ndarray | None = None,
    split: np.ndarray | None = None,
) -> Dataset:
    """The :class:`Dataset` read from a dataset folder.

    Parameters
    ----------
    name : str
        Canonical name of the dataset.
    X : numpy.ndarray or scipy.sparse.csr_matrix
        Features.
    y : numpy.ndarray
        Labels as stored.
    feature_cols : list
        Column names, one per column of ``X`` (converted to str).
    meta : dict
        Contents of ``meta.json``, with ``"path"``.
    groups, split : numpy.ndarray or None, default=None
        Cluster ids and the standard split, if the data have them.

    Returns
    -------
    Dataset
    """
    return Dataset(
        X=X,
        y=y,
        groups=groups,
        split=split,
        feature_names=[str(c) for c in feature_cols],
        meta=meta,
        name=name,
    )


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
    return _folder_dataset(name, X, y, feature_cols, meta, groups, split)


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
    return _folder_dataset(name, X, y, feature_cols, meta)


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


# ---------------------------------------------------------------------------
# SUSY: the real UCI file and a seeded synthetic stand-in
# ---------------------------------------------------------------------------

#: The 18 feature columns of the UCI SUSY data, in file order (8 low-level
#: kinematic features, then 10 high-level features derived from them).
SUSY_FEATURE_NAMES = [
    "lepton_1_pT", "lepton_1_eta", "lepton_1_phi",
    "lepton_2_pT", "lepton_2_eta", "lepton_2_phi",
    "missing_energy_magnitude", "missing_energy_phi",
    "MET_rel", "axial_MET", "M_R", "M_TR_2", "R", "MT2", "S_R", "M_Delta_R",
    "dPhi_r_b", "cos_theta_r1",
]  # fmt: skip

_SUSY_LABEL_NAMES = {"1": "signal", "-1": "background"}
_SUSY_BLOCK = 8192  # rows per seeded block of the synthetic data
_SUSY_DRAWS = 20  # standard normals drawn per synthetic row
#: logit g(x) = scale * h(x) + offset, calibrated for balanced classes and a
#: Bayes error of about 0.20 (see _load_susy_synthetic).
_SUSY_LOGIT = {
    "formula": "scale * (0.5 * (missing_energy_magnitude - 0.9) "
    "+ 1.5 * (1 - 4 * cos_theta_r1**2) + 1.5 * sin(2 * dPhi_r_b) "
    "+ lepton_1_eta * lepton_2_eta) + offset",
    "scale": 0.971,
    "offset": -0.062,
}
_SUSY_BAYES_ERROR = 0.20
_SUSY_CSV_NAMES = ("SUSY.csv", "SUSY.csv.gz")
_SUSY_READ_LINES = 100_000


def _susy_dataset(name: str, X: Any, y: np.ndarray, details: dict[str, Any]) -> Dataset:
    """SUSY-like data (the 18 SUSY columns, labels +1 / -1) as a :class:`Dataset`.

    Parameters
    ----------
    name : str
        Canonical name of the dataset.
    X : numpy.ndarray of shape (n_samples, 18)
        Features (possibly a memory map).
    y : numpy.ndarray of shape (n_samples,)
        Labels +1 / -1.
    details : dict
        Entries of ``meta`` after the shared ones (name, shape, task, label
        counts and names).

    Returns
    -------
    Dataset
    """
    meta: dict[str, Any] = {
        "name": name,
        "n_samples": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "task": "binary",
        "label_counts": {"-1": int(np.sum(y == -1)), "1": int(np.sum(y == 1))},
        "label_names": dict(_SUSY_LABEL_NAMES),
        **details,
    }
    return Dataset(
        X=X,
        y=y,
        groups=None,
        split=None,
        feature_names=list(SUSY_FEATURE_NAMES),
        meta=meta,
        name=name,
    )


def _float_dtype(dtype: Any) -> np.dtype:
    """Return ``dtype`` as float32 or float64, else raise a ValueError naming it."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = np.dtype(object)  # not understood: rejected below
    if dtype is None or dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise InvalidParameterError(
            f"Invalid value for dtype: {dtype!r} (must be 'float32' or 'float64')"
        )
    return dt


def _wrap_angle(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def _susy_features(z: np.ndarray, out: np.ndarray) -> None:
    """Write the 18 synthetic features of ``z`` (m x 20 standard normals) into ``out``.

    Low-level: lognormal lepton pT's (leading first), normal etas, uniform
    phis, Rayleigh missing energy. High-level: physics-like nonlinear
    functions of those (masses, transverse masses, angles), each with 10 %
    noise (multiplicative for positive features, additive for the others).
    """
    a, b = np.exp(0.5 * z[:, 0]), np.exp(0.5 * z[:, 1])
    pt1, pt2 = np.maximum(a, b), np.minimum(a, b)
    del a, b
    eta1, eta2 = z[:, 2], z[:, 3]
    met = 0.7 * np.hypot(z[:, 4], z[:, 5])
    phi1, phi2, phim = (np.pi * (2.0 * special.ndtr(z[:, k]) - 1.0) for k in (16, 17, 18))
    e = z[:, 6:16]
    e *= 0.1  # noise of the high-level features (in place: z is scratch)
    d1, d2, d12 = _wrap_angle(phim - phi1), _wrap_angle(phim - phi2), _wrap_angle(phi1 - phi2)
    for j, col in enumerate((pt1, eta1, phi1, pt2, eta2, phi2, met, phim)):
        out[:, j] = col
    dmin = np.minimum(np.abs(d1), np.abs(d2))
    out[:, 8] = met * np.where(dmin < np.pi / 2, np.sin(dmin), 1.0) * np.exp(e[:, 0])  # MET_rel
    out[:, 9] = -met * np.cos(d1) + e[:, 1]  # axial_MET
    m_r = np.sqrt(2 * pt1 * pt2 * (np.cosh(eta1 - eta2) - np.cos(d12))) * np.exp(e[:, 2])
    m_tr = np.sqrt(0.5 * met * (pt1 + pt2) * (1 - np.cos(d1))) * np.exp(e[:, 3])
    out[:, 10], out[:, 11] = m_r, m_tr  # M_R, M_TR_2
    out[:, 12] = m_tr / np.maximum(m_r, 1e-3) * np.exp(e[:, 4])  # R
    mt1, mt2 = (np.sqrt(2 * pt * met * (1 - np.cos(d))) for pt, d in ((pt1, d1), (pt2, d2)))
    out[:, 13] = np.minimum(mt1, mt2) * np.exp(e[:, 5])  # MT2
    out[:, 14] = (pt1 + pt2 + met) * np.exp(e[:, 6])  # S_R
    out[:, 15] = np.sqrt(m_r * m_tr) * np.exp(e[:, 7])  # M_Delta_R
    out[:, 16] = np.abs(d12) + e[:, 8]  # dPhi_r_b
    out[:, 17] = np.tanh(0.5 * (eta1 - eta2)) + e[:, 9]  # cos_theta_r1


def _susy_synthetic_logit(X: np.ndarray) -> np.ndarray:
    """Log-odds ``g(x)`` of ``P(y = +1 | x)`` for synthetic SUSY features ``X`` (m x 18).

    The labels of ``load_dataset("susy_synthetic")`` are drawn with
    ``P(y = +1 | x) = sigmoid(g(x))`` from the stored features, so ``g(x) > 0``
    is the Bayes rule.
    """
    X = np.asarray(X)
    met, eta1, eta2 = (X[:, j].astype(np.float64) for j in (6, 1, 4))
    dphi, cth = X[:, 16].astype(np.float64), X[:, 17].astype(np.float64)
    h = 0.5 * (met - 0.9) + 1.5 * (1 - 4 * cth**2) + 1.5 * np.sin(2 * dphi) + eta1 * eta2
    return _SUSY_LOGIT["scale"] * h + _SUSY_LOGIT["offset"]


def _fill_susy_synthetic(X: np.ndarray, y: np.ndarray, random_state: int, step: int) -> None:
    """Fill ``X`` and ``y`` in chunks of ``step`` rows (a multiple of ``_SUSY_BLOCK``)."""
    n = X.shape[0]
    for start in range(0, n, step):
        stop = min(start + step, n)
        z = np.empty((stop - start, _SUSY_DRAWS))
        for b0 in range(start, stop, _SUSY_BLOCK):
            # one generator per block; a partial last block draws a prefix of the
            # full block's stream, so row values depend on neither n nor step
            rng = np.random.default_rng([random_state, b0 // _SUSY_BLOCK])
            rng.standard_normal(out=z[b0 - start : min(b0 + _SUSY_BLOCK, stop) - start])
        chunk = X[start:stop]
        _susy_features(z, chunk)
        p = special.expit(_susy_synthetic_logit(chunk))
        y[start:stop] = np.where(special.ndtr(z[:, -1]) < p, 1, -1)


def _load_susy_synthetic(
    data_dir: Path | None = None,
    *,
    n: int = 100_000,
    random_state: int = 0,
    dtype: Any = "float32",
    chunk_size: int = 1_000_000,
    path: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> Dataset:
    """Seeded synthetic stand-in for the SUSY data: ``n`` x 18, labels +1 / -1.

    Eight low-level kinematic-like features (skewed positive momenta and
    missing energy, angles) and ten high-level nonlinear functions of them
    plus noise, named like the SUSY columns. Labels are drawn with
    ``P(y = +1 | x) = sigmoid(g(x))``, ``g`` a fixed smooth nonlinear function
    of five features (a quadratic form plus a sinusoid, see
    ``meta["generator"]["logit"]``), so classes are about balanced, the Bayes
    boundary ``g(x) = 0`` is nonlinear and the Bayes error is about 0.20
    (Monte Carlo; a linear classifier gets about 0.26).

    Parameters
    ----------
    data_dir : Path or None, default=None
        Unused (the data are generated).
    n : int, default=100_000
        Number of rows, >= 1.
    random_state : int, default=0
        Seed, >= 0. Rows come in blocks of 8,192, block ``b`` from
        ``numpy.random.default_rng([random_state, b])``, so the first ``m``
        rows are the same for every ``n >= m`` and every ``chunk_size``.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of ``X``.
    chunk_size : int, default=1_000_000
        Rows generated per step (rounded up to whole blocks); bounds the
        working memory (about 300 bytes per row) and does not change the data.
    path : str or path-like or None, default=None
        If given, ``X`` is written chunk by chunk to this ``.npy`` file and
        returned as a read-only memory map of it, so that it is never held in
        memory. Labels are returned in memory.
    overwrite : bool, default=False
        Whether to replace an existing file at ``path``.

    Returns
    -------
    Dataset
        ``y`` as int64 +1 / -1; ``meta`` with ``n_samples``, ``n_features``,
        ``bayes_error`` (approximate), ``description`` and ``generator``.

    Raises
    ------
    ValueError
        If ``n``, ``random_state`` or ``chunk_size`` is not an integer in
        range, or ``dtype`` is not float32 / float64.
    FileExistsError
        If ``path`` exists and ``overwrite`` is False.
    """
    n = int(check_scalar_param("n", n, kind="int", low=1))
    random_state = int(check_scalar_param("random_state", random_state, kind="int", low=0))
    chunk_size = int(check_scalar_param("chunk_size", chunk_size, kind="int", low=1))
    dt = _float_dtype(dtype)
    step = -(-chunk_size // _SUSY_BLOCK) * _SUSY_BLOCK
    shape = (n, len(SUSY_FEATURE_NAMES))
    y = np.empty(n, dtype=np.int64)
    if path is None:
        X = np.empty(shape, dtype=dt)
        _fill_susy_synthetic(X, y, random_state, step)
    else:
        path = Path(path).expanduser()
        if path.exists() and not overwrite:
            raise FileExistsError(
                f"{str(path)!r} already exists; pass overwrite=True to replace it, "
                "or choose another path."
            )
        # write to a temporary file and rename it, so that a failed run leaves
        # nothing behind and existing memory maps of an old file stay valid
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dt, shape=shape)
            _fill_susy_synthetic(out, y, random_state, step)
            out.flush()
            del out
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        X = np.load(path, mmap_mode="r")
    details: dict[str, Any] = {
        "bayes_error": _SUSY_BAYES_ERROR,
        "description": "Seeded synthetic stand-in for the UCI SUSY data: 8 low-level "
        "kinematic-like features, 10 nonlinear high-level features with noise; "
        "P(y=+1|x) = sigmoid(g(x)) with a nonlinear g; Bayes error about 0.20 "
        "(Monte Carlo estimate).",
        "generator": {
            "random_state": random_state,
            "dtype": dt.name,
            "block_size": _SUSY_BLOCK,
            "chunk_size": chunk_size,
            "logit": dict(_SUSY_LOGIT),
        },
    }
    if path is not None:
        details["path"] = str(path)
    return _susy_dataset("susy_synthetic", X, y, details)


def _find_susy_csv(data_dir: Path | None) -> Path:
    """Return ``data_dir/susy/SUSY.csv`` or ``.csv.gz``, else raise FileNotFoundError."""
    folder = None if data_dir is None else data_dir / "susy"
    for name in _SUSY_CSV_NAMES if folder is not None else ():
        if (folder / name).is_file():
            return folder / name
    where = (
        f"there is no {' or '.join(_SUSY_CSV_NAMES)} in {str(folder)!r}"
        if folder is not None
        else "no data folder is configured"
    )
    raise FileNotFoundError(
        f"Cannot load dataset 'susy': {where}. Pass path='.../SUSY.csv' (or .csv.gz) to "
        f"load_dataset, or put the UCI file in <data folder>/susy/ and set {DATA_DIR_ENV} "
        "or pass data_dir=..."
    )


def _parse_numbers(lines: list[str]) -> np.ndarray:
    """Parse comma-separated numeric lines into a float64 array (pandas if installed)."""
    try:
        import pandas as pd
    except ImportError:
        return np.loadtxt(lines, delimiter=",", dtype=np.float64, ndmin=2)
    text = io.StringIO("".join(lines))
    return pd.read_csv(text, header=None, dtype=np.float64).to_numpy()


def _bad_susy_line(lines: list[str], first_line: int) -> tuple[int, str] | None:
    """Return ``(line number, reason)`` of the first malformed SUSY line, or None."""
    n_fields = len(SUSY_FEATURE_NAMES) + 1
    for lineno, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue
        fields = line.split(",")
        try:
            values = [float(f) for f in fields]
        except ValueError:
            return lineno, "non-numeric value"
        if len(values) != n_fields:
            return lineno, f"{len(values)} values, expected {n_fields} (label then 18 features)"
        if not all(map(math.isfinite, values)):
            return lineno, "non-finite or missing value"
        if values[0] not in (0.0, 1.0):
            return lineno, f"label {fields[0].strip()!r} is not 1 or 0"
    return None


def _load_susy(
    data_dir: Path | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    n: int | None = None,
    dtype: Any = "float32",
) -> Dataset:
    """The UCI SUSY data (5,000,000 x 18), read from ``SUSY.csv`` or ``SUSY.csv.gz``.

    The file has no header; each line holds the label (1.0 = signal,
    0.0 = background) and the 18 features. It is read in chunks; blank lines
    are skipped.

    Parameters
    ----------
    data_dir : Path or None, default=None
        Data folder; the file is looked for in its ``susy`` sub-folder when
        ``path`` is not given.
    path : str or path-like or None, default=None
        The CSV file (``.gz`` is decompressed on the fly).
    n : int or None, default=None
        Read only the first ``n`` rows (all rows if the file has fewer).
    dtype : {"float32", "float64"}, default="float32"
        Dtype of ``X``.

    Returns
    -------
    Dataset
        ``y`` as int64, +1 = signal, -1 = background.

    Raises
    ------
    FileNotFoundError
        If no file is given or found.
    ValueError
        If ``n`` or ``dtype`` is invalid, or a line is malformed (the message
        names the line number), or the file holds no rows.
    """
    n = check_scalar_param("n", n, kind="int", low=1, allow_none=True)
    dt = _float_dtype(dtype)
    path = _find_susy_csv(data_dir) if path is None else Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"Cannot load dataset 'susy': no file {str(path)!r}.")
    opener = gzip.open if path.suffix == ".gz" else open
    X_parts, y_parts, rows, line = [], [], 0, 1
    with opener(path, "rt", encoding="ascii", errors="replace") as fh:
        while n is None or rows < n:
            lines = list(itertools.islice(fh, _SUSY_READ_LINES if n is None else n - rows))
            if not lines:
                break
            data_lines = [s for s in lines if s.strip()]
            try:
                block = _parse_numbers(data_lines) if data_lines else np.empty((0, 19))
                error = None
            except ValueError as exc:
                block, error = None, exc
            ok = (
                block is not None
                and block.shape == (len(data_lines), len(SUSY_FEATURE_NAMES) + 1)
                and np.isfinite(block).all()
                and np.isin(block[:, 0], (0.0, 1.0)).all()
            )
            if not ok:
                bad = _bad_susy_line(lines, line)
                if bad is None:  # the parser failed where the line check did not
                    raise ValueError(f"Cannot parse SUSY file {str(path)!r}: {error}") from error
                raise ValueError(
                    f"Malformed SUSY file {str(path)!r}, line {bad[0]}: {bad[1]}: "
                    f"{lines[bad[0] - line].strip()[:80]!r}"
                ) from error
            X_parts.append(block[:, 1:].astype(dt))
            y_parts.append(np.where(block[:, 0] == 1.0, 1, -1))
            rows += block.shape[0]
            line += len(lines)
    if rows == 0:
        raise ValueError(f"The SUSY file {str(path)!r} holds no data rows.")
    X = np.concatenate(X_parts) if len(X_parts) > 1 else X_parts[0]
    y = np.concatenate(y_parts).astype(np.int64)
    return _susy_dataset("susy", X, y, {
        "source": "UCI Machine Learning Repository, SUSY (Baldi, Sadowski & Whiteson 2014)",
        "notes": "labels recoded from 1 = signal / 0 = background to +1 / -1",
        "path": str(path),
    })


register_dataset("susy_synthetic", _load_susy_synthetic)
register_dataset("susy", _load_susy)
