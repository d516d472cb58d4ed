"""Saved estimator files of small fits and ways to damage or forge them, for the tests of damaged
and forged files (``test_file_fuzz.py``, ``test_file_sense.py``, ``test_red_team.py``)."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import struct
import tempfile
import warnings
import zipfile
import zlib

import numpy as np

import bayes_maxmargin as bmm
from bayes_maxmargin import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection
from bayes_maxmargin.persistence import _CHECKSUM_PREFIX, _FILE_CHECKSUM_PREFIX, _HEX_DIGITS, FORMAT_VERSION, _seal

rng = np.random.default_rng(1)
X = rng.normal(size=(40, 4))
Y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(int)
X, Y = X[:30], Y[:30]
Y3 = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.4, 0.4])  # three classes

ESTIMATORS = {
    "linear": lambda: LinearBSVM(inference="em", max_iter=10).fit(X, Y),
    "gp": lambda: GPBSVM(inference="vi", max_iter=5).fit(X, Y),
    "factor": lambda: FactorBSVM(n_factors=2, inference="vbem", max_iter=3, m_steps=2, random_state=0).fit(X, Y),
    "projection": lambda: MaxMarginProjection(n_components=2, num_samples=5, num_warmup=5, random_state=0).fit(X, Y),
    "linear-multiclass": lambda: LinearBSVM(inference="em", max_iter=10).fit(X, Y3),
}
OTHER = {
    "linear-flipped": lambda: LinearBSVM(inference="em", max_iter=10).fit(X, 1 - Y),
    "gp-flipped": lambda: GPBSVM(inference="vi", max_iter=5).fit(X, 1 - Y),
    "gp-ecm": lambda: GPBSVM(inference="ecm", max_iter=10, learn_kernel=False).fit(X, Y),
    "gp-ecm-flipped": lambda: GPBSVM(inference="ecm", max_iter=10, learn_kernel=False).fit(X, 1 - Y),
    "gp-svi": lambda: GPBSVM(inference="svi", num_inducing=5, batch_size=10, max_iter=20, random_state=0).fit(X, Y),
    "gp-multiclass": lambda: GPBSVM(inference="ecm", max_iter=10, learn_kernel=False, random_state=0).fit(X, Y3),
}


@functools.cache
def saved_bytes(name: str) -> bytes:
    """The saved file of the fit ``name`` of :data:`ESTIMATORS` or :data:`OTHER`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = {**ESTIMATORS, **OTHER}[name]()
    with tempfile.TemporaryDirectory() as tmp:
        return bmm.save(est, os.path.join(tmp, "m.bmm")).read_bytes()


def unzip(data: bytes) -> tuple[dict[str, bytes], bytes]:
    """The members of a zip by name, and its comment."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}, zf.comment


def zip_members(members, comment: bytes = b"", *, sealed: bool = False) -> bytes:
    """A zip of ``members`` (a dict, or a list of pairs to repeat a name) with the zip comment
    ``comment``, or with a valid file checksum (format 3) when ``sealed``."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name"
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.comment = _FILE_CHECKSUM_PREFIX + b"0" * _HEX_DIGITS if sealed else comment
            for name, data in (members.items() if isinstance(members, dict) else members):
                zf.writestr(name, data)
    return seal(buf.getvalue()) if sealed else buf.getvalue()


def seal(data: bytes) -> bytes:
    """The file ``data`` (which ends in a format-3 zip comment) with its file checksum renewed."""
    assert data[-_HEX_DIGITS - len(_FILE_CHECKSUM_PREFIX):-_HEX_DIGITS] == _FILE_CHECKSUM_PREFIX
    buf = io.BytesIO(data)
    _seal(buf)
    return buf.getvalue()


def sign(manifest: bytes) -> bytes:
    """The zip comment of a format-2 file that holds the checksum of ``manifest``."""
    return _CHECKSUM_PREFIX + hashlib.sha256(manifest).hexdigest().encode()


def forge(data: bytes, edit=None, *, version: int = FORMAT_VERSION, **replace: bytes) -> bytes:
    """The file in format ``version`` with members replaced and its manifest edited by ``edit``, every
    checksum renewed (the members' in the manifest, and the file's (format 3) or the manifest's
    (format 2) in the zip comment; format 1 has no sizes and no comment): a well-formed file of other
    contents, or without ``edit`` and ``replace`` the same fit as an earlier format wrote it."""
    members, _ = unzip(data)
    members.update(replace)
    manifest = json.loads(members["manifest.json"])
    manifest["format_version"] = version
    manifest["sha256"] = {n: hashlib.sha256(b).hexdigest() for n, b in members.items() if n != "manifest.json"}
    manifest["sizes"] = {n: len(b) for n, b in members.items() if n != "manifest.json"}
    if version == 1:
        del manifest["sizes"]
    if edit is not None:
        edit(manifest)
    body = json.dumps(manifest).encode()
    members = {**members, "manifest.json": body}
    return zip_members(members, sealed=True) if version >= 3 else zip_members(members, sign(body) if version == 2 else b"")


@functools.cache
def inflating_member(size: int) -> bytes:
    """Raw deflate data of ``size`` zero bytes (a multiple of 1 MiB; about size / 1000 bytes): one
    self-contained block of 1 MiB of zeros, repeated."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(bytes(1 << 20)) + comp.flush(zlib.Z_FULL_FLUSH)
    return block * (size >> 20) + comp.flush()


def with_inflated_member(data: bytes, name: str, size: int, *, renewed: bool = False) -> bytes:
    """The file with member ``name`` replaced by ``size`` bytes of zeros, deflated, its size in the
    zip headers true (zip64 headers from 4 GiB). Without ``renewed`` its CRC-32 is not, and the manifest
    is untouched (its checksum still matches); ``renewed``, the CRC-32, the manifest's SHA-256 and size
    of the member and the file's checksum are all those of the zeros (a decompression bomb that every
    checksum vouches for)."""
    members, comment = unzip(data)
    raw = inflating_member(size)
    crc = 0
    if renewed:
        digest, block = hashlib.sha256(), bytes(1 << 20)
        for _ in range(size >> 20):
            digest.update(block)
            crc = zlib.crc32(block, crc)
        manifest = json.loads(members["manifest.json"])
        manifest["sha256"][name], manifest["sizes"][name] = digest.hexdigest(), size
        members["manifest.json"] = json.dumps(manifest).encode()
        comment = _FILE_CHECKSUM_PREFIX + b"0" * _HEX_DIGITS
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.comment = comment
        for n, b in members.items():
            if n != name:
                zf.writestr(n, b)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.file_size, info.compress_size, info.CRC = size, len(raw), crc
        info.header_offset = buf.tell()
        buf.write(info.FileHeader(zip64=size >= zipfile.ZIP64_LIMIT))
        buf.write(raw)
        zf.start_dir = buf.tell()
        zf.filelist.append(info)
        zf.NameToInfo[name] = info
    return seal(buf.getvalue()) if renewed else buf.getvalue()


def patched_sizes(data: bytes, name: str, size: int) -> bytes:
    """The file with the declared uncompressed size of ``name`` set to ``size`` in both headers."""
    out = bytearray(data)
    fname = name.encode()
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := out.find(sig, start)) >= 0:
            name_at = start + (30 if sig == b"PK\x03\x04" else 46)
            if out[name_at:name_at + len(fname)] == fname:
                out[start + offset:start + offset + 4] = struct.pack("<I", size)
            start += 4
    return bytes(out)


def set_state(key, value):
    """A manifest edit that sets state entry ``key`` to ``value``."""
    def edit(manifest):
        manifest["state"][key] = value
    return edit


def edit_array(data: bytes, key: str, change) -> dict[int, bytes]:
    """Forged files of every format version, by version, with array ``key`` of the state changed by ``change``."""
    members, _ = unzip(data)
    manifest = json.loads(members["manifest.json"])
    ref = manifest["state"][key]["__array__"]
    with np.load(io.BytesIO(members["arrays.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays[ref] = change(arrays[ref])
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return {version: forge(data, version=version, **{"arrays.npz": buf.getvalue()})
            for version in range(1, FORMAT_VERSION + 1)}


def state_node(manifest: dict, *path):
    """The encoded value at ``path`` of the manifest's state: a state entry, then fields of saved
    NamedTuples and attributes of objects by name, dictionary entries by key, list entries by index
    (``"estimators_", 0, "state", "_posterior", "X"``)."""
    from bayes_maxmargin.persistence import _registry

    node = manifest["state"][path[0]]
    for step in path[1:]:
        if "__object__" in node:  # a plain object: its attributes
            node = node["state"]
        if "__namedtuple__" in node:
            node = node["fields"][_registry()[node["__namedtuple__"]]._fields.index(step)]
        elif "__dict__" in node:
            node = next(v for k, v in node["__dict__"] if k == step)
        elif "__list__" in node or "__tuple__" in node:
            node = node.get("__list__", node.get("__tuple__"))[step]
        else:
            raise KeyError(f"no {step!r} in {str(node)[:80]}")
    return node


def forge_arrays(data: bytes, changes: dict, version: int = FORMAT_VERSION, edit=None) -> bytes:
    """The file in format ``version`` (every checksum renewed) with the arrays at the state paths of
    ``changes`` (:func:`state_node`) replaced by ``change(array)``, and its manifest edited by ``edit``."""
    members, _ = unzip(data)
    manifest = json.loads(members["manifest.json"])
    with np.load(io.BytesIO(members["arrays.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for path, change in changes.items():
        node = state_node(manifest, *path)
        arrays[node["__array__"]] = change(arrays[node["__array__"]])
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return forge(data, edit, version=version, **{"arrays.npz": buf.getvalue()})


def meaning(data: bytes):
    """What a file says: its members' bytes and its comment (None if zipfile cannot read it)."""
    try:
        return unzip(data)
    except Exception:
        return None


@functools.cache
def fitted_reference():
    """The linear fit as loaded from its saved file."""
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "m.bmm")
        with open(p, "wb") as fh:
            fh.write(saved_bytes("linear"))
        return bmm.load(p)
