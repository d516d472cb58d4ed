"""Saved estimator files of small fits and ways to damage or forge them, for the tests of damaged
files (``test_file_fuzz.py``, ``test_red_team.py``)."""

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
OTHER = {"linear-flipped": lambda: LinearBSVM(inference="em", max_iter=10).fit(X, 1 - Y)}


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


def with_inflated_member(data: bytes, name: str, size: int) -> bytes:
    """The file with member ``name`` replaced by ``size`` bytes of zeros, deflated, its size in the
    zip headers true (its CRC-32 not); the manifest untouched (so its checksum still matches)."""
    members, comment = unzip(data)
    raw = inflating_member(size)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.comment = comment
        for n, b in members.items():
            if n != name:
                zf.writestr(n, b)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.file_size, info.compress_size, info.CRC = size, len(raw), 0
        info.header_offset = buf.tell()
        buf.write(info.FileHeader(zip64=False))
        buf.write(raw)
        zf.start_dir = buf.tell()
        zf.filelist.append(info)
        zf.NameToInfo[name] = info
    return buf.getvalue()


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
