"""Saving and loading fitted estimators without pickle.

A saved estimator is one zip file with three members:

``manifest.json``
    The format name and version, the library version, the estimator's class and constructor
    parameters, its fitted attributes as JSON (arrays and the DataTree by reference), and the
    SHA-256 and size of the other members.
``arrays.npz``
    Every array, read back with ``allow_pickle=False``.
``idata.nc``
    The fitted ``idata_`` (ArviZ's :class:`xarray.DataTree` as netCDF through h5netcdf), when there is
    one. Files written with ArviZ 0.x (an InferenceData) load as a DataTree.

The zip comment holds the SHA-256 of every byte of the file before it (format version 3), so that
any change to the file is detected, also one that leaves the members' contents as they were (a zip
timestamp); format-2 files hold the SHA-256 of ``manifest.json`` there, and the manifest those of the
other members.

Loading rebuilds objects only from an explicit list of the library's own classes (estimators,
kernel-parameter and state tuples, the label encoder); nothing in the file is executed, imported
or unpickled. Sizes are checked as the zip's end record and central directory and the ``.npy``
headers declare them, before anything is decompressed or allocated (at most 16 members, compression
ratios within 200 unless ``max_bytes`` is given); repeated members and attribute names that would
shadow a method are refused. A file whose checksums vouch for contents that do not hang together is
refused too: the fitted state is checked against the relations the fit computed it by (shapes
against ``n_features_in_``, ``classes_`` and each other, finite values, one-vs-rest estimators against
their positions and the stacked attributes, point estimates against the posterior and ``idata_``, the
estimators' ``_check_restored``; :mod:`bayes_maxmargin.core.consistency`). A damaged, foreign or
tampered file fails with :class:`InvalidModelFileError` (a ValueError) naming what disagrees. Sums and
products of kernels are saved flat (in postfix order), however many terms they have; ``save``
refuses a value nested deeper than ``load`` reads. Files are written atomically, through a temporary
file of a short unique name, and without ``overwrite`` never replace an existing file
(:func:`bayes_maxmargin.core.io.atomic_path`); the temporary files of saves killed while they wrote
are removed by the next save in the folder.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
import os
import re
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from bayes_maxmargin.core.io import NETCDF_ENGINE

__all__ = ["FORMAT_VERSION", "MAX_BYTES", "InvalidModelFileError", "load", "register", "save"]

FORMAT_NAME = "bayes_maxmargin.estimator"
#: Version of the file layout; files of a newer version are refused. Version 2 adds the manifest's
#: checksum (in the zip comment) and the members' sizes, version 3 the checksum of the whole file in
#: place of the manifest's; files of versions 1 and 2 still load.
FORMAT_VERSION = 3
_MEMBERS = ("manifest.json", "arrays.npz", "idata.nc")
_MANIFEST_KEYS = {
    1: {"format", "format_version", "library_version", "estimator", "params", "state", "sha256"},
    2: {"format", "format_version", "library_version", "estimator", "params", "state", "sha256", "sizes"},
}
_MANIFEST_KEYS[3] = _MANIFEST_KEYS[2]
#: The zip comment of a format-2 file: this prefix and the hex SHA-256 of manifest.json.
_CHECKSUM_PREFIX = b"bayes_maxmargin manifest sha256 "
#: The zip comment of a format-3 file: this prefix and the hex SHA-256 of the bytes before the comment.
_FILE_CHECKSUM_PREFIX = b"bayes_maxmargin file sha256 "
_HEX_DIGITS = 64
#: Default of :func:`load`'s ``max_bytes``: the most bytes a file's members may hold decompressed.
MAX_BYTES = 4 * 2**30
_MAX_MANIFEST_BYTES = 64 * 2**20
#: The largest compression ratio of a member (of the file, of arrays.npz, or of the data in idata.nc) that
#: holds more than _RATIO_FLOOR bytes decompressed, unless load's max_bytes is given (a trusted file): the
#: arrays of a fit (floating point) compress a few-fold, a decompression bomb a thousandfold.
_MAX_RATIO = 200
_RATIO_FLOOR = 16 * 2**20
#: The most members, and the longest central directory, that a file may declare before its directory
#: is read: an estimator file has three members; a few foreign ones are read, to be named.
_MAX_DIRECTORY_MEMBERS = 16
_MAX_DIRECTORY_BYTES = 16 * 1024
_END_RECORD = struct.Struct("<4s4H2LH")  # the zip's end of central directory record (no comment)
_END_RECORD_64 = struct.Struct("<4sQ2H2L4Q")  # its zip64 form, and the locator that precedes the record
_LOCATOR_64 = struct.Struct("<4sLQL")
#: The deepest nesting of values a manifest may have (estimators save a few levels).
_MAX_DEPTH = 64


class InvalidModelFileError(ValueError):
    """The file is not a readable, intact estimator file of a supported format version.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from bayes_maxmargin import InvalidModelFileError, load
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "model.bmm"
    ...     _ = path.write_bytes(b"not a model file")
    ...     try:
    ...         _ = load(path)
    ...     except InvalidModelFileError:
    ...         print("refused")
    refused
    """


_TYPES: dict[str, type] = {}


def register(*classes: type) -> None:
    """Allow ``classes`` (estimators, NamedTuples, plain state objects) to be rebuilt by :func:`load`."""
    for cls in classes:
        _TYPES[f"{cls.__module__}.{cls.__qualname__}"] = cls


#: Where the saved types lived in files written by earlier releases (before the package was laid out by model
#: family, and before the natural-gradient algebra left engine.svi); a file names its types by module path, so
#: these names keep loading.
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
    "bayes_maxmargin.inference.svi.NatParams": "bayes_maxmargin.engine.natural_gradient.NatParams",
    "bayes_maxmargin.engine.svi.NatParams": "bayes_maxmargin.engine.natural_gradient.NatParams",
    "bayes_maxmargin.inference.svi.SVIState": "bayes_maxmargin.engine.svi.SVIState",
    "bayes_maxmargin.inference.factor_vbem.VBState": "bayes_maxmargin.models.factor.vbem.VBState",
}


def _registry() -> dict[str, type]:
    if not _TYPES:
        from bayes_maxmargin.core import kernels
        from bayes_maxmargin.data.labels import BinaryLabelEncoder, OneVsRestLabelEncoder
        from bayes_maxmargin.engine import natural_gradient, svi
        from bayes_maxmargin.estimators import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection
        from bayes_maxmargin.models.factor import posterior as factor_posterior
        from bayes_maxmargin.models.factor import vbem
        from bayes_maxmargin.models.gp import posterior
        from bayes_maxmargin.models.linear import posterior as linear_posterior

        register(LinearBSVM, GPBSVM, MaxMarginProjection, FactorBSVM, BinaryLabelEncoder, OneVsRestLabelEncoder,
                 kernels.SEParams, kernels.ARDParams, kernels.PolyParams, kernels.LinearParams,
                 kernels.ConstantParams, kernels.SumParams, kernels.ProductParams, kernels.ScaledParams,
                 kernels.RBF, kernels.ARD, kernels.Polynomial, kernels.Linear, kernels.Constant, kernels.Sum,
                 kernels.Product, kernels.Scaled,
                 natural_gradient.NatParams, svi.SVIState, vbem.VBState, posterior.ModePosterior, posterior.VIPosterior,
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
    """JSON-able description of a value; arrays and the DataTree go to side members."""

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
        import jax
        import xarray as xr

        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, jax.Array) and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)  # a typed PRNG key as its raw uint32 data (draws the same)
        if isinstance(value, (np.ndarray, np.generic, jax.Array)):
            return self.array(value, where)
        if isinstance(value, xr.DataTree):
            if self.idata is not None:
                raise TypeError(f"cannot save {where}: only one DataTree per estimator")
            self.idata = value
            return {"__idata__": "idata.nc"}
        if isinstance(value, _binary_types()):
            return {"__postfix__": self.postfix(value, where)}
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


    def postfix(self, value: Any, where: str) -> list:
        """A sum or product of kernels, or of their parameters, as its operands and operations in postfix
        order: a flat list however deeply the expression nests (``k1 + k2 + ... + k40`` nests 39 sums)."""
        kinds, items, stack = _binary_types(), [], [(value, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                items.append({"__node__": _type_name(type(node))})
            elif type(node) in kinds:
                stack.extend([(node, True), (node.k2, False), (node.k1, False)])
            else:
                items.append(self(node, f"{where} (a term)"))
        return items


def _binary_types() -> tuple[type, ...]:
    """The kernels and parameter containers of two operands ``k1``, ``k2`` (sums and products), which
    are saved in postfix order (:meth:`_Encoder.postfix`)."""
    from bayes_maxmargin.core import kernels

    return kernels.Sum, kernels.Product, kernels.SumParams, kernels.ProductParams


def _nesting(node: Any) -> int:
    """How deep the encoded value ``node`` nests, counted as :class:`_Decoder` counts (JSON objects)."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((v, depth) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth) for v in node)
    return deepest


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], idata: Any) -> None:
        self.arrays, self.idata = arrays, idata

    def _type(self, name: Any) -> type:
        cls = _registry().get(name) if isinstance(name, str) else None
        if cls is None:
            raise InvalidModelFileError(f"the file names an unknown type {name!r}; it was not written by this library")
        return cls

    def __call__(self, node: Any, depth: int = 0) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if depth > _MAX_DEPTH:
            raise InvalidModelFileError(f"the manifest nests values more than {_MAX_DEPTH} deep")
        if not isinstance(node, dict) or len(node) == 0:
            raise InvalidModelFileError(f"malformed value in the manifest: {str(node)[:80]}")
        depth += 1
        if "__array__" in node:
            key = node["__array__"]
            if not isinstance(key, str) or key not in self.arrays:
                raise InvalidModelFileError(f"the manifest refers to a missing array {str(key)[:80]!r}")
            arr = self.arrays[key]
            arr = arr.astype(object) if node.get("object") else arr
            return arr[()] if node.get("scalar") else arr
        if "__idata__" in node:
            if self.idata is None:
                raise InvalidModelFileError("the manifest refers to idata.nc, which the file does not hold")
            return self.idata
        if "__namedtuple__" in node:
            cls = self._type(node["__namedtuple__"])
            fields = node.get("fields")
            if not isinstance(fields, list) or len(fields) != len(getattr(cls, "_fields", ())):
                raise InvalidModelFileError(f"malformed {cls.__name__} in the manifest: {str(node)[:80]}")
            return cls(*(self(v, depth) for v in fields))
        if "__postfix__" in node:
            return self._postfix(_sequence(node["__postfix__"]), depth)
        if "__list__" in node:
            return [self(v, depth) for v in _sequence(node["__list__"])]
        if "__tuple__" in node:
            return tuple(self(v, depth) for v in _sequence(node["__tuple__"]))
        if "__dict__" in node:
            items = _sequence(node["__dict__"])
            if not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
                raise InvalidModelFileError(f"malformed dictionary in the manifest: {str(node)[:80]}")
            return {self._key(k, depth): self(v, depth) for k, v in items}
        if "__object__" in node:
            cls = self._type(node["__object__"])
            state = self(node.get("state"), depth)
            if not isinstance(state, dict):
                raise InvalidModelFileError(f"malformed {cls.__name__} in the manifest: {str(node)[:80]}")
            _check_attribute_names(cls, state, f"the saved {cls.__name__}")
            obj = cls.__new__(cls)
            obj.__dict__.update(state)
            return obj
        raise InvalidModelFileError(f"malformed value in the manifest: {str(node)[:80]}")

    def _postfix(self, items: list, depth: int) -> Any:
        """The sum or product of :meth:`_Encoder.postfix`: operands pushed, each operation applied to the
        last two."""
        from bayes_maxmargin.core.kernels import Kernel

        stack: list = []
        for item in items:
            name = item.get("__node__") if isinstance(item, dict) and len(item) == 1 else None
            if name is None:
                stack.append(self(item, depth))
                continue
            cls = self._type(name)
            operands = stack[-2:]
            if cls not in _binary_types() or len(operands) != 2 or (
                    issubclass(cls, Kernel) and not all(isinstance(k, Kernel) for k in operands)):
                raise InvalidModelFileError(f"malformed sum or product in the manifest: {str(item)[:80]}")
            del stack[-2:]
            stack.append(cls(*operands))
        if len(stack) != 1:
            raise InvalidModelFileError(f"malformed sum or product in the manifest: {len(stack)} values left")
        return stack[0]

    def _key(self, node: Any, depth: int) -> Any:
        key = self(node, depth)
        try:
            hash(key)
        except TypeError:
            raise InvalidModelFileError(f"malformed dictionary key in the manifest: {str(node)[:80]}") from None
        return key


def _sequence(node: Any) -> list:
    if not isinstance(node, list):
        raise InvalidModelFileError(f"malformed value in the manifest: {str(node)[:80]}")
    return node


def _check_attribute_names(cls: type, names: Any, where: str, fitted: bool = False) -> None:
    """Refuse saved attribute names that are not plain identifiers, are special names, or would shadow
    a method, property or other descriptor of ``cls``; with ``fitted``, also names that are neither
    fitted attributes (``name_``) nor private state (``_name``), and constructor parameters."""
    params = set(cls._get_param_names()) if fitted and hasattr(cls, "_get_param_names") else set()
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise InvalidModelFileError(f"{where} has an attribute of invalid name {str(name)[:80]!r}")
        attr = inspect.getattr_static(cls, name, None)
        if callable(attr) or hasattr(attr, "__get__"):  # class data (a dataclass default) may be set
            raise InvalidModelFileError(f"{where} sets {name!r}, which is a method, property or other "
                                        f"descriptor of {cls.__name__}")
        if fitted and (name in params or not (name.startswith("_") or name.endswith("_"))):
            raise InvalidModelFileError(f"{where} has an unknown attribute {name!r}")


# ------------------------------------------------------------------------------------------ save / load
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _head_sha256(fh: Any, size: int) -> str:
    """SHA-256 of the first ``size`` bytes of the open binary file ``fh``, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    fh.seek(0)
    while size > 0:
        chunk = fh.read(min(size, 1 << 20))
        if not chunk:
            break
        digest.update(chunk)
        size -= len(chunk)
    return digest.hexdigest()


def _seal(fh: Any) -> None:
    """Write the file's checksum into the last :data:`_HEX_DIGITS` bytes of the zip ``fh`` (opened
    ``r+b``), whose comment is :data:`_FILE_CHECKSUM_PREFIX` and as many placeholder digits: the
    SHA-256 of every byte before the comment, the zip's end record (and the comment's length) included."""
    end = fh.seek(0, os.SEEK_END)
    digest = _head_sha256(fh, end - _HEX_DIGITS)
    fh.seek(end - _HEX_DIGITS)
    fh.write(digest.encode("ascii"))


def _check_sealed(path: Path, fh: Any, comment: bytes) -> bool:
    """Whether the file carries a file checksum (format 3), verified; False for earlier formats."""
    if not comment.startswith(_FILE_CHECKSUM_PREFIX):
        return False
    end = fh.seek(0, os.SEEK_END)
    start = end - len(comment)
    fh.seek(max(start, 0))
    if len(comment) != len(_FILE_CHECKSUM_PREFIX) + _HEX_DIGITS or fh.read() != comment:
        raise _damaged(path, "its file checksum is unreadable")
    if comment[-_HEX_DIGITS:] != _head_sha256(fh, start + len(_FILE_CHECKSUM_PREFIX)).encode("ascii"):
        raise _damaged(path, "file checksum mismatch")
    return True


def save(estimator: Any, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Save ``estimator`` (fitted or not) to the file ``path``.

    Parameters
    ----------
    estimator : LinearBSVM, GPBSVM, ...
        Any estimator of this library.
    path : str or path-like
        The file to write (conventionally ``*.bmm``). It is written atomically, through a temporary
        file of a unique, short name in the same folder; the temporary files that saves killed while
        they wrote (SIGKILL) left there are removed
        (:func:`~bayes_maxmargin.core.io.remove_stale_temporaries`).
    overwrite : bool, default False
        Replace an existing file. Without it an existing file is never touched, also when another
        thread or process creates ``path`` while this one writes: the check and the publish are one
        atomic step, so of two concurrent saves to a new ``path`` one succeeds and the other raises
        :class:`FileExistsError`.

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
    ValueError
        A value nests deeper than a file may hold (more than 64 levels; sums and products of kernels
        are saved flat, however many terms they have).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sklearn.datasets import make_classification
    >>> from bayes_maxmargin import LinearBSVM, load, save
    >>> X, y = make_classification(n_samples=100, n_features=4, random_state=0)
    >>> clf = LinearBSVM(inference="em").fit(X, y)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save(clf, Path(folder) / "model.bmm")
    ...     same = (load(path).predict_proba(X) == clf.predict_proba(X)).all()
    >>> bool(same)
    True
    """
    from bayes_maxmargin._version import __version__
    from bayes_maxmargin.core.io import atomic_path, remove_stale_temporaries

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
    for kind, values in (("parameter", params), ("attribute", state)):
        for k, v in values.items():
            if _nesting(v) > _MAX_DEPTH:
                raise ValueError(f"cannot save {kind} {k!r}: its value nests more than {_MAX_DEPTH} levels "
                                 "deep, more than a saved file may hold")
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **enc.arrays)
    members = {"arrays.npz": buf.getvalue()}
    if enc.idata is not None:
        with tempfile.TemporaryDirectory() as tmp:
            nc = Path(tmp) / "idata.nc"
            enc.idata.to_netcdf(str(nc), engine=NETCDF_ENGINE)
            members["idata.nc"] = nc.read_bytes()
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "estimator": cls_name,
        "params": params,
        "state": state,
        "sha256": {name: _sha256(data) for name, data in members.items()},
        "sizes": {name: len(data) for name, data in members.items()},
    }
    body = json.dumps(manifest).encode("utf-8")
    remove_stale_temporaries(path.parent)
    with atomic_path(path, overwrite=overwrite) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.comment = _FILE_CHECKSUM_PREFIX + b"0" * _HEX_DIGITS
            zf.writestr("manifest.json", body)
            for name, data in members.items():
                zf.writestr(name, data)
        with open(tmp, "r+b") as fh:
            _seal(fh)
    return path


def _damaged(path: Path, what: str) -> InvalidModelFileError:
    return InvalidModelFileError(f"{str(path)!r}: {what} (the file was modified or damaged)")


def _check_directory(path: Path, fh: Any) -> None:
    """Refuse a file whose zip end record declares more members, or a longer central directory, than an
    estimator file has: read from the end of the file before the directory itself (from which zipfile
    would build an object for every member it declares). A file without an end record is left to
    zipfile, which refuses it."""
    end = fh.seek(0, os.SEEK_END)
    fh.seek(max(end - _END_RECORD.size - 0xFFFF, 0))
    tail = fh.read()
    at = len(tail) - _END_RECORD.size
    if tail[at:at + 4] != b"PK\x05\x06":
        at = tail.rfind(b"PK\x05\x06", 0, max(at, 0))
    if at < 0 or at + _END_RECORD.size > len(tail):
        return
    _, _, _, _, count, size, _, _ = _END_RECORD.unpack_from(tail, at)
    locator = at - _LOCATOR_64.size
    if (count == 0xFFFF or size == 0xFFFFFFFF) and locator >= 0 and tail[locator:locator + 4] == b"PK\x06\x07":
        offset = _LOCATOR_64.unpack_from(tail, locator)[2]
        fh.seek(offset)
        record = fh.read(_END_RECORD_64.size)
        if len(record) != _END_RECORD_64.size or record[:4] != b"PK\x06\x06":
            raise _damaged(path, "its zip64 end record is unreadable")
        count, size = _END_RECORD_64.unpack(record)[7:9]
    if count > _MAX_DIRECTORY_MEMBERS or size > _MAX_DIRECTORY_BYTES:
        raise InvalidModelFileError(
            f"{str(path)!r} is not a bayes_maxmargin estimator file: its zip directory declares {count} members "
            f"in {size} bytes (an estimator file has {len(_MEMBERS)} at most)")


def _check_ratio(path: Path, name: str, size: int, stored: int, ratio_limit: int | None) -> None:
    """Refuse ``name``, ``size`` bytes decompressed from ``stored``, where that is beyond ``ratio_limit``
    (None: no limit) and more than :data:`_RATIO_FLOOR` bytes."""
    if ratio_limit and size > max(_RATIO_FLOOR, ratio_limit * stored):
        raise InvalidModelFileError(
            f"{str(path)!r}: {name} declares {size} bytes from {stored}, a compression ratio beyond {ratio_limit} "
            "(a damaged file, or a decompression bomb); pass max_bytes to load(...) if the file is trusted")


def _members(zf: zipfile.ZipFile, path: Path, max_bytes: int, ratio_limit: int | None) -> dict[str, zipfile.ZipInfo]:
    """The members of the file by name, from its central directory, checked before anything is read:
    only the known names, each once, declared sizes within ``max_bytes`` in all, and compression ratios
    within ``ratio_limit`` (:func:`_check_ratio`)."""
    infos = zf.infolist()
    names = [info.filename for info in infos]
    unknown = sorted(set(names) - set(_MEMBERS))
    if "manifest.json" not in names or unknown:
        raise InvalidModelFileError(
            f"{str(path)!r} is not a bayes_maxmargin estimator file "
            f"({'unexpected members ' + str(unknown) if unknown else 'no manifest.json'})")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise _damaged(path, f"it holds more than one member named {repeated}")
    by_name = {info.filename: info for info in infos}
    if by_name["manifest.json"].file_size > _MAX_MANIFEST_BYTES:
        raise _damaged(path, f"manifest.json declares {by_name['manifest.json'].file_size} bytes, more than the "
                             f"{_MAX_MANIFEST_BYTES} a manifest can have")
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        raise InvalidModelFileError(
            f"{str(path)!r}: its members declare {total} bytes in all, more than max_bytes={max_bytes}; pass a "
            "larger max_bytes to load(...) if the file is trusted and the model is that large")
    for info in infos:
        _check_ratio(path, info.filename, info.file_size, info.compress_size, ratio_limit)
    return by_name


def _hash_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """SHA-256 of a member, streamed in chunks (zipfile stops at the declared size and checks the CRC-32)."""
    digest = hashlib.sha256()
    with zf.open(info) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, read in chunks into one growing buffer: ``read()`` at once would let a damaged
    deflate stream inflate to 2 GiB in one step before zipfile cuts it to the declared size, and joining
    the chunks would hold the member twice."""
    out = io.BytesIO()
    with zf.open(info) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            out.write(chunk)
    return out.getvalue()


def _read_manifest(path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, sealed: bool) -> dict[str, Any]:
    """The parsed manifest. A file checksum (format 3, ``sealed``) was verified before; a manifest
    checksum (format 2, in the zip comment) is verified here, before the manifest is parsed."""
    raw = _read_member(zf, info)
    comment = zf.comment
    signed = comment.startswith(_CHECKSUM_PREFIX)
    if comment and not (sealed or signed):
        raise _damaged(path, "its checksum is unreadable")
    if signed and comment[len(_CHECKSUM_PREFIX):] != _sha256(raw).encode("ascii"):
        raise _damaged(path, "checksum mismatch in manifest.json")
    try:
        manifest = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, InvalidModelFileError) as err:
        raise InvalidModelFileError(f"{str(path)!r}: manifest.json is not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise InvalidModelFileError(f"{str(path)!r} is not a bayes_maxmargin estimator file (format "
                                    f"{str(manifest.get('format') if isinstance(manifest, dict) else None)[:80]!r})")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1 or version > FORMAT_VERSION:
        shown = version if isinstance(version, int) else str(version)[:20]
        raise InvalidModelFileError(
            f"{str(path)!r} has format version {shown!r}; this version of bayes_maxmargin reads format "
            f"versions 1 to {FORMAT_VERSION}. Load it with the version that wrote it "
            f"(bayes_maxmargin {str(manifest.get('library_version'))[:20]!r}) or a newer one.")
    keys = _MANIFEST_KEYS[version]
    lacks = {2: None if signed else "manifest", 3: None if sealed else "file"}.get(version)
    if lacks:
        raise _damaged(path, f"it lacks the {lacks} checksum that files of format version {version} carry")
    if set(manifest) != keys:
        missing, extra = sorted(keys - set(manifest)), sorted(set(manifest) - keys)
        raise InvalidModelFileError(f"{str(path)!r}: manifest.json "
                                    + (f"lacks {missing}" if missing else f"has unknown entries {extra}"))
    if not all(isinstance(manifest[k], dict) for k in keys - {"format", "format_version", "library_version",
                                                              "estimator"}):
        raise _damaged(path, "malformed manifest.json")
    return manifest


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise InvalidModelFileError("a JSON object repeats a key")
    return out


def _verified_members(path: Path, zf: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo],
                      manifest: dict[str, Any]) -> dict[str, bytes]:
    """The bytes of the members other than the manifest, each checked against the manifest's SHA-256;
    first, before anything is decompressed, its size from the central directory against the manifest's
    (format 2 on; format-1 members are hashed as a stream before they are held in memory)."""
    infos = {name: info for name, info in infos.items() if name != "manifest.json"}
    if set(manifest["sha256"]) != set(infos):
        raise InvalidModelFileError(f"{str(path)!r}: its members {sorted(infos)} do not match the manifest")
    sizes = manifest.get("sizes")
    members = {}
    for name, info in infos.items():
        if sizes is not None:
            if not isinstance(sizes.get(name), int) or info.file_size != sizes[name]:
                raise _damaged(path, f"{name} declares {info.file_size} bytes where the manifest records "
                                     f"{str(sizes.get(name))[:20]}")
            data = _read_member(zf, info)
            digest = _sha256(data)
        else:  # format 1: no recorded sizes; a member is hashed as a stream before it is held in memory
            digest = _hash_member(zf, info)
            data = None
        if digest != manifest["sha256"][name]:
            raise _damaged(path, f"checksum mismatch in {name}")
        members[name] = _read_member(zf, info) if data is None else data
    return members


def _read_arrays(path: Path, data: bytes, max_bytes: int) -> dict[str, np.ndarray]:
    """Every array of ``arrays.npz``, each ``.npy`` header checked (its shape and dtype must account for
    exactly the bytes the member holds) before the array is allocated."""
    from numpy.lib import format as npy

    arrays = {}
    with zipfile.ZipFile(io.BytesIO(data)) as npz:
        infos = npz.infolist()
        names = [info.filename for info in infos]
        if len(set(names)) != len(names) or not all(name.endswith(".npy") for name in names):
            raise _damaged(path, "arrays.npz holds repeated or foreign members")
        if len(infos) > 1 + len(data) // 64:  # each member takes 64 bytes of headers at least
            raise _damaged(path, f"arrays.npz declares {len(infos)} members in {len(data)} bytes")
        if any(info.compress_type != zipfile.ZIP_STORED for info in infos):  # numpy.savez stores them
            raise _damaged(path, "arrays.npz holds compressed arrays, which no saved file holds")
        if sum(info.file_size for info in infos) > max_bytes:
            raise _damaged(path, f"arrays.npz declares more than max_bytes={max_bytes} bytes of arrays")
        for info in infos:
            with npz.open(info) as fh:
                version = npy.read_magic(fh)
                if version not in ((1, 0), (2, 0)):
                    raise _damaged(path, f"arrays.npz: {info.filename} has .npy format version {version}")
                read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                shape, _, dtype = read_header(fh)
                size = math.prod(shape) * dtype.itemsize
                if dtype.hasobject or size != info.file_size - fh.tell():
                    raise _damaged(path, f"arrays.npz: {info.filename} declares shape {shape} of {dtype} "
                                         f"({size} bytes) but holds {info.file_size - fh.tell()} bytes")
            with npz.open(info) as fh:
                arrays[info.filename[: -len(".npy")]] = npy.read_array(fh, allow_pickle=False)
    return arrays


def _read_idata(path: Path, data: bytes, library_version: str, max_bytes: int, ratio_limit: int | None) -> Any:
    """``idata.nc`` as ArviZ's DataTree (files of every format, InferenceData written by ArviZ 0.x
    included). A member that HDF5 cannot open is damaged; one that it opens but the installed xarray
    cannot read is refused naming the versions, and a missing package is named. The sizes of its
    variables are checked before they are read: within ``max_bytes`` and within ``ratio_limit`` of the
    member's size (a saved file neither compresses its variables nor leaves them unwritten)."""
    try:
        import xarray as xr

        with tempfile.TemporaryDirectory() as tmp:
            nc = Path(tmp) / "idata.nc"
            nc.write_bytes(data)
            size = len(data)
            del data
            try:
                idata = xr.open_datatree(str(nc), engine=NETCDF_ENGINE)
                try:
                    held = sum(var.nbytes for node in idata.subtree for var in node.variables.values())
                    if held > max_bytes:
                        raise _damaged(path, f"idata.nc declares {held} bytes of data, more than "
                                             f"max_bytes={max_bytes}")
                    _check_ratio(path, "idata.nc's data", held, size, ratio_limit)
                    idata.load()
                finally:
                    idata.close()
            except (InvalidModelFileError, ImportError):
                raise
            except Exception as err:  # netCDF / HDF5 errors have no common base class
                if not _opens_as_hdf5(nc):
                    raise _damaged(path, f"idata.nc is unreadable ({type(err).__name__}: {err})") from None
                raise InvalidModelFileError(
                    f"{str(path)!r}: its idata.nc is an intact HDF5 file that the installed xarray "
                    f"{_version('xarray')} / h5netcdf {_version('h5netcdf')} cannot read as a DataTree "
                    f"({type(err).__name__}: {err}); it was written by bayes_maxmargin "
                    f"{library_version[:20]!r}") from None
    except ImportError as err:
        found = re.search(r"No module named '([\w.]+)'", str(err))
        package = (err.name or (found.group(1) if found else str(err))).split(".")[0]
        raise ImportError(
            f"{str(path)!r}: loading its idata.nc (the fit's ArviZ DataTree, netCDF) needs the package "
            f"{package!r}, which is not installed: pip install {package}") from None
    return idata


def _opens_as_hdf5(nc: Path) -> bool:
    """Whether HDF5 (h5py) opens ``nc`` and lists its groups."""
    import h5py

    try:
        with h5py.File(nc, "r") as fh:
            list(fh)
        return True
    except Exception:  # h5py raises OSError, KeyError or RuntimeError for a damaged file
        return False


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "(not installed)"


def load(path: str | os.PathLike, *, max_bytes: int | None = None) -> Any:
    """Load an estimator saved by :func:`save`; it predicts exactly as the one that was saved.

    Parameters
    ----------
    path : str or path-like
        The file.
    max_bytes : int, optional
        The most bytes the file's members may hold once decompressed (default :data:`MAX_BYTES`, 4 GiB).
        Sizes are checked as the file declares them, before anything is decompressed. By default no
        member (nor the data in ``idata.nc``) may inflate more than 200-fold beyond 16 MiB (the arrays of
        a fit compress a few-fold, a decompression bomb a thousandfold); passing ``max_bytes`` lifts that
        limit (for a trusted file).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    InvalidModelFileError (a ValueError)
        The file is truncated, damaged or tampered with (a checksum does not match, its contents do
        not agree with each other), not an estimator file, larger than ``max_bytes``, or of a newer
        format version. Files of format version 2 carry checksums of their members but not of the
        whole file: a change that leaves every member's content as it was (a zip timestamp) loads.
        Files of format version 1 carry no checksum of their manifest either: for them an edited
        manifest is found only where it makes the contents disagree.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from bayes_maxmargin import GPBSVM, load, save
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save(GPBSVM(kernel="ard"), Path(folder) / "unfitted.bmm")  # unfitted models save too
    ...     model = load(path)
    >>> model.kernel
    'ard'
    """
    path = Path(path).expanduser()
    trusted, max_bytes = max_bytes is not None, MAX_BYTES if max_bytes is None else int(max_bytes)
    if not path.is_file():
        raise FileNotFoundError(f"no estimator file at {str(path)!r}")
    with open(path, "rb") as fh:  # a missing or unreadable file is not a damaged one: its OSError propagates
        try:
            return _load(path, fh, max_bytes, trusted)
        except (InvalidModelFileError, MemoryError, ImportError):
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, NotImplementedError, OSError,
                RuntimeError, struct.error) as err:
            if isinstance(err, RecursionError):
                raise InvalidModelFileError(f"{str(path)!r}: the manifest nests values too deep") from None
            raise InvalidModelFileError(
                f"{str(path)!r} is not a readable bayes_maxmargin estimator file (truncated or not a zip file, or "
                f"damaged: {type(err).__name__}: {err})") from None
        except Exception as err:
            raise InvalidModelFileError(
                f"{str(path)!r}: the saved estimator cannot be rebuilt ({type(err).__name__}: {err})") from err


def _check_sub_states(path: Path, cls: type, state: dict[str, Any], where: str = "") -> None:
    """Refuse malformed sub-estimators in a saved ``state`` (the one-vs-rest ``estimators_`` of class
    ``cls``, a FactorBSVM's second stage ``_stage2``, a LinearBSVM or GPBSVM; each saved as its parameters
    and state), and attribute names of theirs that :func:`_check_attribute_names` refuses, at any depth."""
    from bayes_maxmargin.estimators import GPBSVM, LinearBSVM

    subs = [(f"one-vs-rest estimator {k}", f"{where}estimators_[{k}]", (cls,), sub)
            for k, sub in enumerate(state.get("estimators_") or ())]
    if isinstance(state.get("_stage2"), dict):
        subs.append(("second stage", f"{where}_stage2", (LinearBSVM, GPBSVM), state["_stage2"]))
    for what, name, classes, sub in subs:
        if not isinstance(sub, dict) or set(sub) != {"params", "state"} or not isinstance(sub["state"], dict):
            raise _damaged(path, f"malformed {what}" + (f" ({where[:-1]})" if where else ""))
        for sub_cls in classes:
            _check_attribute_names(sub_cls, sub["state"], f"{str(path)!r}: the saved {name}", fitted=True)
        _check_sub_states(path, classes[0], sub["state"], f"{name}.")


def _load(path: Path, fh: Any, max_bytes: int, trusted: bool) -> Any:
    ratio_limit = None if trusted else _MAX_RATIO
    _check_directory(path, fh)
    with zipfile.ZipFile(fh) as zf:
        infos = _members(zf, path, max_bytes, ratio_limit)
        sealed = _check_sealed(path, fh, zf.comment)
        manifest = _read_manifest(path, zf, infos["manifest.json"], sealed)
        members = _verified_members(path, zf, infos, manifest)
    arrays = _read_arrays(path, members.pop("arrays.npz"), max_bytes)
    idata = (_read_idata(path, members.pop("idata.nc"), str(manifest["library_version"]), max_bytes, ratio_limit)
             if "idata.nc" in members else None)
    decode = _Decoder(arrays, idata)
    cls = decode._type(manifest["estimator"])
    if not hasattr(cls, "get_params"):
        raise InvalidModelFileError(f"{str(path)!r}: {manifest['estimator']!r} is not an estimator")
    _check_attribute_names(cls, manifest["state"], f"{str(path)!r}: the saved {cls.__name__}", fitted=True)
    params = {k: decode(v) for k, v in manifest["params"].items()}
    state = {k: decode(v) for k, v in manifest["state"].items()}
    _check_sub_states(path, cls, state)
    estimator = cls(**params)
    restore = getattr(estimator, "_restore_saved", None)
    if restore is not None:
        restore(state)
    else:
        estimator.__dict__.update(state)
    try:
        _check_consistent(estimator)
    except (ValueError, TypeError, IndexError, AttributeError, KeyError) as err:
        raise _damaged(path, f"its contents do not agree with each other: {err}") from None
    return estimator


#: Fitted attributes that may hold NaN or infinities: traces of an objective, padded with NaN where runs
#: of one-vs-rest problems differ in length, and the DataTree.
_MAY_BE_NONFINITE = frozenset({"objective_", "log_z_", "elbo_", "elbo_steps_", "lower_bound_", "bound_", "idata_",
                               "_idata_parts"})


def _check_finite(est: Any) -> None:
    """Raise ValueError naming the first fitted value (an array, or a float, at any depth of the state,
    the posterior and the one-vs-rest estimators included) that is not finite, but in the traces of
    :data:`_MAY_BE_NONFINITE`."""
    params = set(est.get_params(deep=False)) if hasattr(est, "get_params") else set()
    stack = [(v, k) for k, v in vars(est).items() if k not in _MAY_BE_NONFINITE and k not in params]
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) or isinstance(value, np.ndarray) and value.dtype.kind in "fc":
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{where} holds non-finite values, where a fit holds finite ones")
        elif not isinstance(value, np.ndarray) and hasattr(value, "dtype") and hasattr(value, "shape"):
            stack.append((np.asarray(value), where))  # a NumPy scalar, a JAX array
        elif isinstance(value, tuple) and hasattr(value, "_fields"):
            stack.extend((v, f"{where}.{f}") for f, v in zip(value._fields, value))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, dict):
            stack.extend((v, f"{where}[{k!r}]") for k, v in value.items())
        elif hasattr(value, "get_params"):  # a one-vs-rest estimator: its fitted state
            sub = value.get_params(deep=False)
            stack.extend((v, f"{where}.{k}") for k, v in vars(value).items()
                         if k not in _MAY_BE_NONFINITE and k not in sub)


def _check_consistent(est: Any) -> None:
    """Raise ValueError where the fitted state of a loaded estimator does not hang together: the classes
    (distinct, in the sorted order of a fit) against the label encoder, the one-vs-rest estimators and
    ``idata_``, non-finite values (:func:`_check_finite`), the number of features against the feature
    names and ``idata_``, and the estimator's own checks (``_check_restored``: its fitted attributes
    against its posterior, :mod:`bayes_maxmargin.core.consistency`)."""
    if "classes_" not in vars(est):
        return
    classes, d = est.classes_, est.n_features_in_
    if not isinstance(classes, np.ndarray) or classes.ndim != 1 or len(classes) < 2 or len(np.unique(classes)) != len(
            classes):
        raise ValueError(f"classes_ {str(classes)[:80]} is not a list of two or more distinct labels")
    if not np.array_equal(np.unique(classes), classes):  # the label encoders sort the labels
        raise ValueError(f"classes_ {str(classes)[:80]} are not in sorted order, as a fit orders them")
    _check_finite(est)
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
        raise ValueError(f"n_features_in_ {str(d)[:20]} is not a positive integer")
    names = getattr(est, "feature_names_in_", None)
    if names is not None and len(names) != d:
        raise ValueError(f"{len(names)} feature_names_in_ for n_features_in_={d}")
    encoder = vars(est).get("_encoder")
    if encoder is not None and not np.array_equal(encoder.classes_, classes):
        raise ValueError(f"the label encoder's classes {str(encoder.classes_)[:80]} are not classes_")
    subs = vars(est).get("estimators_")
    if subs is not None and len(subs) != len(classes):
        raise ValueError(f"{len(subs)} one-vs-rest estimators for {len(classes)} classes")
    idata = vars(est).get("idata_")
    posterior = getattr(idata, "posterior", None)
    if posterior is not None:
        for coord, size in (("feature", d), ("class", len(classes))):
            if coord in posterior.coords and posterior.sizes[coord] != size:
                raise ValueError(f"idata_ has {posterior.sizes[coord]} {coord} coordinates for {size}")
        if "class" in posterior.coords and [str(c) for c in np.asarray(posterior["class"])] != [str(c) for c in classes]:
            raise ValueError("idata_'s classes are not classes_ (another fit's idata_)")
    check = getattr(est, "_check_restored", None)
    if check is not None:
        check()
