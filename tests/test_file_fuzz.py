"""Damaged estimator files: every one is refused with InvalidModelFileError, within bounded memory.

Each fuzz case damages a saved file of a tiny fit (bit flips, overwritten bytes, truncations,
inflated or duplicated members, edited manifests, garbage ``idata.nc``, deeply nested JSON) and
loads it. A damaged file may load only where its meaning is unchanged: the same member bytes and
the same manifest checksum (a flip in a zip field that holds no content, such as a timestamp).
The default suite runs 200 cases per estimator, ``-m extended`` 1000. Also: forged files (the
manifest's checksum renewed, or format-1 files, which have none) whose contents do not agree are
refused, and concurrent saves to one new path publish exactly one file.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import warnings
import zipfile
import zlib

import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import GPBSVM, FactorBSVM, InvalidModelFileError, LinearBSVM, MaxMarginProjection
from bayes_maxmargin.persistence import _CHECKSUM_PREFIX

pytestmark = pytest.mark.xdist_group("persistence")

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
#: Peak of the Python heap (numpy and zlib buffers included) while loading damaged files.
PEAK_LIMIT = 200 * 2**20


@functools.cache
def _saved_bytes(name: str) -> bytes:
    import tempfile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = {**ESTIMATORS, **OTHER}[name]()
    with tempfile.TemporaryDirectory() as tmp:
        return bmm.save(est, os.path.join(tmp, "m.bmm")).read_bytes()


# ------------------------------------------------------------------------------------------ zip helpers
def _unzip(data: bytes) -> tuple[dict[str, bytes], bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}, zf.comment


def _zip(members, comment: bytes = b"") -> bytes:
    """A zip of ``members`` (a dict, or a list of pairs to repeat a name)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name"
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.comment = comment
            for name, data in (members.items() if isinstance(members, dict) else members):
                zf.writestr(name, data)
    return buf.getvalue()


def _sign(manifest: bytes) -> bytes:
    return _CHECKSUM_PREFIX + hashlib.sha256(manifest).hexdigest().encode()


def _forge(data: bytes, edit=None, **replace: bytes) -> bytes:
    """The file with members replaced and its manifest edited by ``edit``, the manifest's member
    checksums, sizes and its own checksum all renewed: a well-formed file of other contents."""
    members, _ = _unzip(data)
    members.update(replace)
    manifest = json.loads(members["manifest.json"])
    if edit is not None:
        edit(manifest)
    manifest["sha256"] = {n: hashlib.sha256(b).hexdigest() for n, b in members.items() if n != "manifest.json"}
    manifest["sizes"] = {n: len(b) for n, b in members.items() if n != "manifest.json"}
    body = json.dumps(manifest).encode()
    return _zip({**members, "manifest.json": body}, _sign(body))


def _as_format_1(data: bytes, edit=None) -> bytes:
    """The file as format 1 wrote it (no sizes, no manifest checksum), its manifest edited by ``edit``."""
    members, _ = _unzip(data)
    manifest = json.loads(members["manifest.json"])
    manifest["format_version"] = 1
    del manifest["sizes"]
    if edit is not None:
        edit(manifest)
    return _zip({**members, "manifest.json": json.dumps(manifest).encode()})


@functools.cache
def _inflating_member(size: int) -> bytes:
    """Raw deflate data of ``size`` zero bytes (a multiple of 1 MiB; about size / 1000 bytes): one
    self-contained block of 1 MiB of zeros, repeated."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(bytes(1 << 20)) + comp.flush(zlib.Z_FULL_FLUSH)
    return block * (size >> 20) + comp.flush()


def _with_inflated_member(data: bytes, name: str, size: int) -> bytes:
    """The file with member ``name`` replaced by ``size`` bytes of zeros, deflated, its size in the
    zip headers true (its CRC-32 not); the manifest untouched (so its checksum still matches)."""
    members, comment = _unzip(data)
    raw = _inflating_member(size)
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


def _patched_sizes(data: bytes, name: str, size: int) -> bytes:
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


# ------------------------------------------------------------------------------------------ the fuzz
def _manifest_edit(manifest: dict, r: np.random.Generator) -> None:
    """One random edit of a decoded manifest (a value changed, an entry added or removed)."""
    nodes = []

    def walk(node, parent, key):
        nodes.append((parent, key))
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, node, k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, node, i)

    walk(manifest, None, None)
    parent, key = nodes[1 + r.integers(len(nodes) - 1)]
    choice = r.integers(5)
    if choice == 0 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
        parent[key] = -parent[key] if parent[key] else 1
    elif choice == 1 and isinstance(parent, dict):
        del parent[key]
    elif choice == 2:
        parent[key] = {"__array__": "a0"}
    elif choice == 3:
        manifest["state"]["predict_proba"] = None
    else:
        parent[key] = [parent[key], "x"]


def _damage(data: bytes, case: int) -> bytes:
    """Damaged variant ``case`` of the saved file ``data`` (a deterministic choice of damage)."""
    r = np.random.default_rng(case)
    kind = case % 12
    out = bytearray(data)
    if kind in (0, 1, 2, 3):  # one bit flipped anywhere
        pos = r.integers(len(out))
        out[pos] ^= 1 << r.integers(8)
        return bytes(out)
    if kind == 4:  # a run of bytes overwritten
        pos = r.integers(len(out))
        out[pos:pos + 1 + r.integers(64)] = r.bytes(1 + r.integers(64))
        return bytes(out)
    if kind == 5:  # truncated
        return bytes(out[: r.integers(len(out))])
    members, comment = _unzip(data)
    if kind == 6:  # the manifest edited (its checksum not renewed)
        manifest = json.loads(members["manifest.json"])
        _manifest_edit(manifest, r)
        return _zip({**members, "manifest.json": json.dumps(manifest).encode()}, comment)
    if kind == 7:  # a member repeated, with other contents
        name = sorted(members)[r.integers(len(members))]
        return _zip([*members.items(), (name, r.bytes(100) if r.integers(2) else members[name][::-1])], comment)
    if kind == 8:  # idata.nc replaced by garbage, the manifest's checksums renewed or not
        garbage = b"\x89HDF\r\n\x1a\n" + r.bytes(int(r.integers(10, 5000)))
        return _forge(data, **{"idata.nc": garbage}) if r.integers(2) else _zip({**members, "idata.nc": garbage},
                                                                                  comment)
    if kind == 9:  # deeply nested JSON as the manifest, its checksum renewed or not
        depth = int(r.choice([1000, 100_000]))
        deep = b"[" * depth + b"]" * depth if r.integers(2) else b'{"a":' * depth + b"1" + b"}" * depth
        return _zip({**members, "manifest.json": deep}, _sign(deep) if r.integers(2) else comment)
    if kind == 10:  # a member declaring far more bytes than it holds
        name = sorted(members)[r.integers(len(members))]
        return _patched_sizes(data, name, int(r.choice([2**31, 2**32 - 1, 10**9])))
    # a member inflating to many times its compressed size (its checksum not renewed)
    name = "arrays.npz" if r.integers(2) else "idata.nc"
    return _with_inflated_member(data, name, int(r.choice([8, 32])) << 20)


def _meaning(data: bytes):
    """What a file says: its members' bytes and its comment (None if zipfile cannot read it)."""
    try:
        return _unzip(data)
    except Exception:
        return None


def _fuzz(name: str, n_cases: int, tmp_path) -> tuple[dict[str, int], int]:
    data = _saved_bytes(name)
    original = _meaning(data)
    path = tmp_path / f"{name}.bmm"
    outcomes: dict[str, int] = {}
    failures = []
    tracemalloc.start()
    try:
        for case in range(n_cases):
            damaged = _damage(data, case)
            path.write_bytes(damaged)
            try:
                bmm.load(path)
            except InvalidModelFileError:
                outcomes["refused"] = outcomes.get("refused", 0) + 1
                continue
            except BaseException as err:  # noqa: BLE001 - anything else is a failure of the promise
                failures.append((case, f"{type(err).__name__}: {str(err)[:200]}"))
                continue
            if _meaning(damaged) != original:
                failures.append((case, "a damaged file of other contents loaded"))
            outcomes["same meaning, loaded"] = outcomes.get("same meaning, loaded", 0) + 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not failures, f"{len(failures)} of {n_cases} damaged {name} files: {failures[:5]}"
    return outcomes, peak


@pytest.mark.parametrize("n_cases", [pytest.param(200, id="200"),
                                     pytest.param(1000, id="1000", marks=pytest.mark.extended)])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_every_damaged_file_is_refused(name, n_cases, tmp_path):
    outcomes, peak = _fuzz(name, n_cases, tmp_path)
    print(f"{name}: {n_cases} damaged files, {outcomes}, peak {peak / 2**20:.1f} MiB")
    assert outcomes.get("refused", 0) >= 0.95 * n_cases
    assert peak < PEAK_LIMIT


def test_bombs_are_refused_before_they_are_decompressed(tmp_path):
    """A 1 MB file whose arrays.npz inflates to 1 GiB, in format 2 (sizes in the manifest) and format 1
    (streamed through the checksum), and a .npy header declaring 7.28 TiB: refused fast, in little memory."""
    data = _saved_bytes("linear")
    bomb = _with_inflated_member(data, "arrays.npz", 2**30)
    assert len(bomb) < 2 * 2**20
    old_bomb = _with_inflated_member(_as_format_1(data), "arrays.npz", 2**30)
    members, _ = _unzip(data)
    with zipfile.ZipFile(io.BytesIO(members["arrays.npz"])) as npz:
        first = npz.namelist()[0]
        inner = {n: npz.read(n) for n in npz.namelist()}
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += b" " * (63 - len(header) % 64) + b"\n"
    inner[first] = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(64)
    npz_buf = io.BytesIO()
    with zipfile.ZipFile(npz_buf, "w") as npz:
        for n, b in inner.items():
            npz.writestr(n, b)
    huge_npy = _forge(data, **{"arrays.npz": npz_buf.getvalue()})
    cases = {"bomb": (bomb, "declares 1073741824 bytes where the manifest records"),
             "format-1 bomb": (old_bomb, "compression ratio beyond 200"),
             "huge .npy": (huge_npy, r"declares shape \(1000000000000,\)"),
             "over max_bytes": (data, "more than max_bytes=1000")}
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}.bmm"
        path.write_bytes(content)
        tracemalloc.start()
        start = time.perf_counter()
        try:
            with pytest.raises(InvalidModelFileError, match=message):
                bmm.load(path, max_bytes=1000 if name == "over max_bytes" else None)
            seconds, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 20 * 2**20, name
        assert seconds < 2, name


# ------------------------------------------------------------------------------------------ forged files
def _set_state(key, value):
    def edit(manifest):
        manifest["state"][key] = value
    return edit


def _edit_array(data: bytes, key: str, change) -> tuple[bytes, bytes]:
    """A forged format-2 file and its format-1 twin with array ``key`` of the state changed by ``change``."""
    members, _ = _unzip(data)
    manifest = json.loads(members["manifest.json"])
    ref = manifest["state"][key]["__array__"]
    with np.load(io.BytesIO(members["arrays.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays[ref] = change(arrays[ref])
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    forged = _forge(data, **{"arrays.npz": buf.getvalue()})
    old = _format_1_forge(data, **{"arrays.npz": buf.getvalue()})
    return forged, old


def _format_1_forge(data: bytes, edit=None, **replace: bytes) -> bytes:
    members, _ = _unzip(_as_format_1(data, edit))
    members.update(replace)
    manifest = json.loads(members["manifest.json"])
    manifest["sha256"] = {n: hashlib.sha256(b).hexdigest() for n, b in members.items() if n != "manifest.json"}
    return _zip({**members, "manifest.json": json.dumps(manifest).encode()})


def _drop_sub_params(manifest):
    for sub in manifest["state"]["estimators_"]["__list__"]:
        sub["__dict__"] = [kv for kv in sub["__dict__"] if kv[0] != "params"]


def _swap_subs(manifest):
    subs = manifest["state"]["estimators_"]["__list__"]
    subs[0], subs[1] = subs[1], subs[0]


FORGERIES = {
    "three classes on a binary model": (
        "linear", lambda m: m["state"].update(classes_={"__list__": [0, 1, 2]}), "classes_|classes"),
    "n_features_in_=3": ("linear", _set_state("n_features_in_", 3), "coefficients|feature"),
    "n_features_in_=3 (gp)": ("gp", _set_state("n_features_in_", 3), "training inputs|feature"),
    "n_features_in_=3 (projection)": ("projection", _set_state("n_features_in_", 3), "shape"),
    "n_features_in_=3 (factor)": ("factor", _set_state("n_features_in_", 3), "mean_|feature"),
    "a method as a state key": ("linear", _set_state("predict_proba", 1), "method, property"),
    "an unknown state key": ("linear", _set_state("anything", 1), "unknown attribute 'anything'"),
    "a special name": ("gp", _set_state("__class__", 1), "invalid name"),
    "multi-class without params": ("linear-multiclass", _drop_sub_params, "malformed one-vs-rest estimator 0"),
    "multi-class estimators swapped": ("linear-multiclass", _swap_subs,
                                       "coef_ is not that of the one-vs-rest|idata_ is not the posterior"),
    "deep JSON in the state": (
        "linear", lambda m: m["state"].update(deep=json.loads("[" * 500 + "]" * 500)), "deep|unknown attribute"),
}


@pytest.mark.parametrize("fmt", [2, 1])
@pytest.mark.parametrize("case", list(FORGERIES))
def test_forged_files_whose_contents_disagree_are_refused(case, fmt, tmp_path):
    """Edits of the manifest that renew its checksum (format 2) or of format-1 files (no checksum)
    are refused by the consistency checks."""
    name, edit, message = FORGERIES[case]
    data = _saved_bytes(name)
    path = tmp_path / "forged.bmm"
    path.write_bytes(_forge(data, edit) if fmt == 2 else _format_1_forge(data, edit))
    with pytest.raises(InvalidModelFileError, match=message):
        bmm.load(path)


@pytest.mark.parametrize("fmt", [2, 1])
def test_forged_arrays_and_idata_are_refused(fmt, tmp_path):
    """A negated coef_ (predictions use the posterior, so the two must agree), another model's
    idata.nc, and the same edits made to a format-1 file."""
    data = _saved_bytes("linear")
    forged, old = _edit_array(data, "coef_", lambda a: -a)
    path = tmp_path / "coef.bmm"
    path.write_bytes(forged if fmt == 2 else old)
    with pytest.raises(InvalidModelFileError, match="coef_ / intercept_ are not the posterior mean"):
        bmm.load(path)
    other, _ = _unzip(_saved_bytes("linear-multiclass"))
    forge = _forge if fmt == 2 else _format_1_forge
    path.write_bytes(forge(data, **{"idata.nc": other["idata.nc"]}))
    with pytest.raises(InvalidModelFileError, match="idata_ has"):
        bmm.load(path)
    other, _ = _unzip(_saved_bytes("linear-flipped"))  # a binary fit of the same shapes
    path.write_bytes(forge(data, **{"idata.nc": other["idata.nc"]}))
    with pytest.raises(InvalidModelFileError, match="idata_ is not the posterior of this fit"):
        bmm.load(path)
    # the unforged file and its format-1 twin load and predict alike
    path.write_bytes(data if fmt == 2 else _as_format_1(data))
    back = bmm.load(path)
    ref = _fitted_reference()
    np.testing.assert_array_equal(back.predict_proba(X), ref.predict_proba(X))


@functools.cache
def _fitted_reference():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "m.bmm")
        with open(p, "wb") as fh:
            fh.write(_saved_bytes("linear"))
        return bmm.load(p)


def test_damaged_format_1_files_are_refused_as_format_2_ones(tmp_path):
    """A file of the old layout (format 1: no sizes, no manifest checksum), damaged, is refused with
    the same errors as the new layout."""
    data = _as_format_1(_saved_bytes("gp"))
    original = _meaning(data)
    path = tmp_path / "old.bmm"
    for case in range(120):
        if case % 12 in (6, 9, 10, 11):  # edits of the manifest are forgeries without a checksum
            continue
        damaged = _damage(data, case)
        path.write_bytes(damaged)
        try:
            bmm.load(path)
        except InvalidModelFileError:
            continue
        assert _meaning(damaged) == original, case


# ------------------------------------------------------------------------------------------ concurrent saves
_CHILD = """
import sys, time
from pathlib import Path
import bayes_maxmargin as bmm
est = bmm.load(sys.argv[1]).set_params(sigma=float(sys.argv[3]))
go = Path(sys.argv[4])
while not go.exists():
    time.sleep(0.001)
try:
    bmm.save(est, sys.argv[2])
except FileExistsError as err:
    print("exists", err)
else:
    print("saved")
"""


@pytest.mark.slow  # two fresh interpreters import the package (JAX, ArviZ): tens of seconds on busy cores
def test_two_processes_saving_to_one_new_path(tmp_path):
    src = tmp_path / "src.bmm"
    src.write_bytes(_saved_bytes("linear"))
    target, go = tmp_path / "out" / "m.bmm", tmp_path / "go"
    target.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, str(src), str(target), str(sigma), str(go)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for sigma in (2.0, 3.0)]
    time.sleep(0.5)
    go.touch()
    results = [c.communicate(timeout=120) for c in children]
    assert all(c.returncode == 0 for c in children), [err[-2000:] for _, err in results]
    outputs = [out.strip() for out, _ in results]
    assert sorted(o.split()[0] for o in outputs) == ["exists", "saved"], outputs
    assert "overwrite=True" in next(o for o in outputs if o.startswith("exists"))
    winner = 2.0 if outputs[0] == "saved" else 3.0
    assert bmm.load(target).sigma == winner
    assert [p.name for p in target.parent.iterdir()] == ["m.bmm"]  # no temporary file left


def test_two_threads_saving_to_one_new_path(tmp_path):
    est = _fitted_reference()
    for attempt in range(5):
        target = tmp_path / f"m{attempt}.bmm"
        barrier, results = threading.Barrier(2), {}

        def save(sigma):
            clone = copy.copy(est)
            clone.sigma = sigma
            barrier.wait()
            try:
                bmm.save(clone, target)
                results[sigma] = "saved"
            except FileExistsError:
                results[sigma] = "exists"
            except BaseException as err:  # noqa: BLE001
                results[sigma] = repr(err)

        threads = [threading.Thread(target=save, args=(s,)) for s in (2.0, 3.0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results.values()) == ["exists", "saved"], results
        winner = next(s for s, r in results.items() if r == "saved")
        assert bmm.load(target).sigma == winner
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"m{a}.bmm" for a in range(5)]


def test_no_overwrite_publish_without_hard_links(tmp_path, monkeypatch):
    """Where the file system refuses hard links, the publish still never replaces an existing file."""
    import errno

    from bayes_maxmargin.core import io as bio

    def no_link(src, dst):
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(bio.os, "link", no_link)
    target = tmp_path / "f.txt"
    with bio.atomic_path(target, overwrite=False) as tmp:
        tmp.write_text("first")
    assert target.read_text() == "first"
    with pytest.raises(FileExistsError, match="already exists"):
        with bio.atomic_path(target, overwrite=False) as tmp:
            tmp.write_text("second")
    assert target.read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_atomic_path_uses_a_fresh_temporary_file_per_writer(tmp_path):
    from bayes_maxmargin.core.io import atomic_path

    target = tmp_path / "x.txt"
    with atomic_path(target) as a, atomic_path(target) as b:
        assert a != b and a.parent == b.parent == tmp_path
        a.write_text("a")
        b.write_text("b")
    assert target.read_text() == "a"  # the outer writer published last
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]
