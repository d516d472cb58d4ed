"""Saving and loading fitted estimators without pickle.

A saved estimator is one zip file with three members:

``manifest.json``
    The format name and version, the library version, the estimator's class and constructor
    parameters, its fitted attributes as JSON (arrays and the InferenceData by reference), and the
    SHA-256 of the other members.
``arrays.npz``
    Every array, read back with ``allow_pickle=False``.
``idata.nc``
    The fitted ``idata_`` (ArviZ InferenceData as netCDF), when there is one.

Loading rebuilds objects only from an explicit list of the library's own classes (estimators,
kernel-parameter and state tuples, the label encoder); nothing in the file is executed, imported
or unpickled, so a tampered file can at worst fail with a :class:`ValueError`. Files are written
atomically (:func:`bayes_maxmargin.core.io.atomic_path`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT_VERSION", "InvalidModelFileError", "load", "register", "save"]

FORMAT_NAME = "bayes_maxmargin.estimator"
#: Version of the file layout; files of a newer version are refused.
FORMAT_VERSION = 1
_MEMBERS = ("manifest.json", "arrays.npz", "idata.nc")


class InvalidModelFileError(ValueError):
    """The file is not a readable, intact estimator file of a supported format version."""


_TYPES: dict[str, type] = {}


def register(*classes: type) -> None:
    """Allow ``classes`` (estimators, NamedTuples, plain state objects) to be rebuilt by :func:`load`."""
    for cls in classes:
        _TYPES[f"{cls.__module__}.{cls.__qualname__}"] = cls


#: Where the saved types lived in format-1 files written before the package was laid out by model
#: family; a file names its types by module path, so these names keep loading.
_MOVED = {
    "bayes_maxmargin.estimators.LinearBSVM": "bayes_maxmargin.estimators.linear.LinearBSVM",
    "bayes_maxmargin.estimators.GPBSVM": "bayes_maxmargin.estimators.gp.GPBSVM",
    "bayes_maxmargin.factor.FactorBSVM": "bayes_maxmargin.estimators.factor.FactorBSVM",
    "bayes_maxmargin.projection.MaxMarginProjection": "bayes_maxmargin.estimators.projection.MaxMarginProjection",
    "bayes_maxmargin.data.validation.BinaryLabelEncoder": "bayes_maxmargin.data.labels.BinaryLabelEncoder",
    "bayes_maxmargin.data.validation.OneVsRestLabelEncoder": "bayes_maxmargin.data.labels.OneVsRestLabelEncoder",
    "bayes_maxmargin.kernels.SEParams": "bayes_maxmargin.core.kernels.SEParams",
    "bayes_maxmargin.kernels.ARDParams": "bayes_maxmargin.core.kernels.ARDParams",
    "bayes_maxmargin.kernels.PolyParams": "bayes_maxmargin.core.kernels.PolyParams",
    "bayes_maxmargin.kernels.LinearParams": "bayes_maxmargin.core.kernels.LinearParams",
    "bayes_maxmargin.inference.svi.NatParams": "bayes_maxmargin.engine.svi.NatParams",
    "bayes_maxmargin.inference.svi.SVIState": "bayes_maxmargin.engine.svi.SVIState",
    "bayes_maxmargin.inference.factor_vbem.VBState": "bayes_maxmargin.models.factor.vbem.VBState",
}


def _registry() -> dict[str, type]:
    if not _TYPES:
        from bayes_maxmargin.core import kernels
        from bayes_maxmargin.data.labels import BinaryLabelEncoder, OneVsRestLabelEncoder
        from bayes_maxmargin.engine import svi
        from bayes_maxmargin.estimators import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection
        from bayes_maxmargin.models.factor import posterior as factor_posterior
        from bayes_maxmargin.models.factor import vbem
        from bayes_maxmargin.models.gp import posterior
        from bayes_maxmargin.models.linear import posterior as linear_posterior

        register(LinearBSVM, GPBSVM, MaxMarginProjection, FactorBSVM, BinaryLabelEncoder, OneVsRestLabelEncoder,
                 kernels.SEParams, kernels.ARDParams, kernels.PolyParams, kernels.LinearParams,
                 kernels.SumParams, kernels.ProductParams, kernels.ScaledParams, kernels.RBF, kernels.ARD,
                 kernels.Polynomial, kernels.Linear, kernels.Sum, kernels.Product, kernels.Scaled,
                 svi.NatParams, svi.SVIState, vbem.VBState, posterior.ModePosterior, posterior.VIPosterior,
                 posterior.DrawsPosterior, linear_posterior.PrecisionPosterior,
                 linear_posterior.CovariancePosterior, linear_posterior.DrawsPosterior,
                 linear_posterior.LowRankPosterior,
                 factor_posterior.VBPosterior, factor_posterior.DrawsPosterior, factor_posterior.InterceptLinearKernel)
        _TYPES.update({old: _TYPES[new] for old, new in _MOVED.items()})
    return _TYPES


def _type_name(cls: type) -> str:
    name = f"{cls.__module__}.{cls.__qualname__}"
    if _registry().get(name) is not cls:
        raise TypeError(f"cannot save an object of type {name}: not a type the library knows how to save")
    return name


# ------------------------------------------------------------------------------------------ encoding
class _Encoder:
    """JSON-able description of a value; arrays and InferenceData go to side members."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.idata: Any = None

    def array(self, value: Any, where: str) -> dict[str, Any]:
        arr = np.asarray(value)
        obj = arr.dtype == object
        if obj:
            flat = arr.ravel().tolist()
            if all(isinstance(v, str) for v in flat):
                arr = arr.astype(str)
            elif all(isinstance(v, (bool, int, float, np.generic)) for v in flat) and flat:
                arr = np.asarray(flat).reshape(arr.shape)
            else:
                raise TypeError(f"cannot save {where}: an object array holding {type(flat[0]).__name__} values")
        elif arr.dtype.kind not in "biufcUS":
            raise TypeError(f"cannot save {where}: arrays of dtype {arr.dtype} are not supported")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return {"__array__": key, "object": bool(obj), "scalar": isinstance(value, np.generic)}

    def __call__(self, value: Any, where: str) -> Any:
        import arviz as az
        import jax

        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, jax.Array) and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)  # a typed PRNG key as its raw uint32 data (draws the same)
        if isinstance(value, (np.ndarray, np.generic, jax.Array)):
            return self.array(value, where)
        if isinstance(value, az.InferenceData):
            if self.idata is not None:
                raise TypeError(f"cannot save {where}: only one InferenceData per estimator")
            self.idata = value
            return {"__idata__": "idata.nc"}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return {"__namedtuple__": _type_name(type(value)),
                    "fields": [self(v, f"{where}.{f}") for f, v in zip(value._fields, value)]}
        if isinstance(value, (list, tuple)):
            kind = "__list__" if isinstance(value, list) else "__tuple__"
            return {kind: [self(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"__dict__": [[self(k, f"{where} key"), self(v, f"{where}[{k!r}]")] for k, v in value.items()]}
        if type(value).__module__.startswith("bayes_maxmargin") and hasattr(value, "__dict__"):
            return {"__object__": _type_name(type(value)), "state": self(dict(vars(value)), where)}
        raise TypeError(f"cannot save {where}: values of type {type(value).__name__} are not supported")


class _Decoder:
    def __init__(self, arrays: Any, idata: Any) -> None:
        self.arrays, self.idata = arrays, idata

    def _type(self, name: Any) -> type:
        cls = _registry().get(name) if isinstance(name, str) else None
        if cls is None:
            raise InvalidModelFileError(f"the file names an unknown type {name!r}; it was not written by this library")
        return cls

    def __call__(self, node: Any) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if not isinstance(node, dict) or len(node) == 0:
            raise InvalidModelFileError(f"malformed value in the manifest: {str(node)[:80]}")
        if "__array__" in node:
            key = node["__array__"]
            if key not in self.arrays.files:
                raise InvalidModelFileError(f"the manifest refers to a missing array {key!r}")
            arr = self.arrays[key]
            arr = arr.astype(object) if node.get("object") else arr
            return arr[()] if node.get("scalar") else arr
        if "__idata__" in node:
            if self.idata is None:
                raise InvalidModelFileError("the manifest refers to idata.nc, which the file does not hold")
            return self.idata
        if "__namedtuple__" in node:
            cls = self._type(node["__namedtuple__"])
            return cls(*(self(v) for v in node["fields"]))
        if "__list__" in node:
            return [self(v) for v in node["__list__"]]
        if "__tuple__" in node:
            return tuple(self(v) for v in node["__tuple__"])
        if "__dict__" in node:
            return {self._key(k): self(v) for k, v in node["__dict__"]}
        if "__object__" in node:
            obj = self._type(node["__object__"]).__new__(self._type(node["__object__"]))
            obj.__dict__.update(self(node["state"]))
            return obj
        raise InvalidModelFileError(f"malformed value in the manifest: {str(node)[:80]}")

    def _key(self, node: Any) -> Any:
        key = self(node)
        try:
            hash(key)
        except TypeError:
            raise InvalidModelFileError(f"malformed dictionary key in the manifest: {str(node)[:80]}") from None
        return key


# ------------------------------------------------------------------------------------------ save / load
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save(estimator: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Save ``estimator`` (fitted or not) to the file ``path``.

    Parameters
    ----------
    estimator : LinearBSVM, GPBSVM, ...
        Any estimator of this library.
    path : str or path-like
        The file to write (conventionally ``*.bmm``). It is written atomically.
    overwrite : bool, default False
        Replace an existing file. Without it an existing file is never touched.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False.
    TypeError
        ``estimator`` is not one of the library's estimators.
    """
    from bayes_maxmargin._version import __version__
    from bayes_maxmargin.core.io import atomic_path

    cls_name = _type_name(type(estimator))
    path = Path(path).expanduser()
    if path.exists() and not overwrite:
        raise FileExistsError(f"{str(path)!r} already exists; pass overwrite=True to replace it, or choose another path.")
    enc = _Encoder()
    params = {k: enc(v, f"parameter {k!r}") for k, v in estimator.get_params(deep=False).items()}
    state_of = getattr(estimator, "_saved_state", None)
    state = state_of() if state_of is not None else {
        k: v for k, v in vars(estimator).items() if k not in estimator.get_params(deep=False)}
    state = {k: enc(v, f"attribute {k!r}") for k, v in state.items()}
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **enc.arrays)
    members = {"arrays.npz": buf.getvalue()}
    if enc.idata is not None:
        with tempfile.TemporaryDirectory() as tmp:
            nc = Path(tmp) / "idata.nc"
            enc.idata.to_netcdf(str(nc))
            members["idata.nc"] = nc.read_bytes()
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "estimator": cls_name,
        "params": params,
        "state": state,
        "sha256": {name: _sha256(data) for name, data in members.items()},
    }
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("manifest.json", json.dumps(manifest))
            for name, data in members.items():
                zf.writestr(name, data)
    return path


def _read_members(path: Path) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            unknown = sorted(set(names) - set(_MEMBERS))
            if "manifest.json" not in names or unknown:
                raise InvalidModelFileError(
                    f"{str(path)!r} is not a bayes_maxmargin estimator file "
                    f"({'unexpected members ' + str(unknown) if unknown else 'no manifest.json'})")
            return {name: zf.read(name) for name in names}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as err:
        if isinstance(err, (InvalidModelFileError, FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise InvalidModelFileError(
            f"{str(path)!r} is not a readable bayes_maxmargin estimator file (truncated or not a zip file: {err})"
        ) from None


def _read_manifest(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidModelFileError(f"{str(path)!r}: manifest.json is not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise InvalidModelFileError(f"{str(path)!r} is not a bayes_maxmargin estimator file (format "
                                    f"{manifest.get('format') if isinstance(manifest, dict) else None!r})")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1 or version > FORMAT_VERSION:
        raise InvalidModelFileError(
            f"{str(path)!r} has format version {version!r}; this version of bayes_maxmargin reads format "
            f"versions 1 to {FORMAT_VERSION}. Load it with the version that wrote it "
            f"(bayes_maxmargin {manifest.get('library_version')!r}) or a newer one.")
    for key in ("estimator", "params", "state", "sha256"):
        if key not in manifest:
            raise InvalidModelFileError(f"{str(path)!r}: manifest.json lacks {key!r}")
    return manifest


def load(path: str | os.PathLike) -> Any:
    """Load an estimator saved by :func:`save`; it predicts exactly as the one that was saved.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    InvalidModelFileError (a ValueError)
        The file is truncated, tampered with (a checksum does not match), not an estimator file,
        or of a newer format version.
    """
    import arviz as az

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no estimator file at {str(path)!r}")
    members = _read_members(path)
    manifest = _read_manifest(path, members.pop("manifest.json"))
    if not isinstance(manifest["sha256"], dict) or set(manifest["sha256"]) != set(members):
        raise InvalidModelFileError(f"{str(path)!r}: its members {sorted(members)} do not match the manifest")
    for name, data in members.items():
        if _sha256(data) != manifest["sha256"][name]:
            raise InvalidModelFileError(f"{str(path)!r}: checksum mismatch in {name} (the file was modified or damaged)")
    try:
        arrays = np.load(io.BytesIO(members["arrays.npz"]), allow_pickle=False)
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as err:
        raise InvalidModelFileError(f"{str(path)!r}: arrays.npz is unreadable ({err})") from None
    idata = None
    if "idata.nc" in members:
        with tempfile.TemporaryDirectory() as tmp:
            nc = Path(tmp) / "idata.nc"
            nc.write_bytes(members["idata.nc"])
            idata = az.from_netcdf(str(nc))
            for group in idata.groups():
                getattr(idata, group).load()
    decode = _Decoder(arrays, idata)
    cls = decode._type(manifest["estimator"])
    if not hasattr(cls, "get_params"):
        raise InvalidModelFileError(f"{str(path)!r}: {manifest['estimator']!r} is not an estimator")
    try:
        params = {k: decode(v) for k, v in manifest["params"].items()}
        state = {k: decode(v) for k, v in manifest["state"].items()}
        estimator = cls(**params)
    except InvalidModelFileError:
        raise
    except (TypeError, ValueError, AttributeError) as err:
        raise InvalidModelFileError(f"{str(path)!r}: the saved estimator cannot be rebuilt ({err})") from None
    restore = getattr(estimator, "_restore_saved", None)
    if restore is not None:
        restore(state)
    else:
        estimator.__dict__.update(state)
    return estimator
