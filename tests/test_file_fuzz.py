"""Damaged estimator files: every one is refused with InvalidModelFileError, within bounded memory.

Each fuzz case damages a saved file of a tiny fit (bit flips, overwritten bytes, truncations,
inflated or duplicated members, edited manifests, garbage ``idata.nc``, deeply nested JSON) and
loads it: every one is refused, the file's checksum covering every byte. Files of formats 1 and 2
(no file checksum) may load only where the damage leaves their meaning unchanged: the same member
bytes and comment (a flip in a zip field that holds no content, such as a timestamp). The default
suite runs 200 cases per estimator, ``-m extended`` 1000. Also: forged files (every checksum
renewed, or format-1 files, which have none) whose contents do not agree are refused, and the
no-overwrite publish of a saved file. The single cases of the red-team report
(bombs, edited manifests, concurrent saves) are in ``test_red_team.py``.
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import InvalidModelFileError

from ._saved_files import (
    ESTIMATORS,
    forge,
    meaning,
    patched_sizes,
    saved_bytes,
    set_state,
    unzip,
    with_inflated_member,
    zip_members,
)

pytestmark = pytest.mark.xdist_group("persistence")

#: Peak of the Python heap (numpy and zlib buffers included) while loading damaged files.
PEAK_LIMIT = 200 * 2**20


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
    members, comment = unzip(data)
    if kind == 6:  # the manifest edited (its checksum not renewed)
        manifest = json.loads(members["manifest.json"])
        _manifest_edit(manifest, r)
        return zip_members({**members, "manifest.json": json.dumps(manifest).encode()}, comment)
    if kind == 7:  # a member repeated, with other contents
        name = sorted(members)[r.integers(len(members))]
        return zip_members([*members.items(), (name, r.bytes(100) if r.integers(2) else members[name][::-1])], comment)
    if kind == 8:  # idata.nc replaced by garbage, the manifest's checksums renewed or not
        garbage = b"\x89HDF\r\n\x1a\n" + r.bytes(int(r.integers(10, 5000)))
        return forge(data, **{"idata.nc": garbage}) if r.integers(2) else zip_members({**members, "idata.nc": garbage},
                                                                                  comment)
    if kind == 9:  # deeply nested JSON as the manifest, its checksum renewed or not
        depth = int(r.choice([1000, 100_000]))
        deep = b"[" * depth + b"]" * depth if r.integers(2) else b'{"a":' * depth + b"1" + b"}" * depth
        return zip_members({**members, "manifest.json": deep}, comment, sealed=bool(r.integers(2)))
    if kind == 10:  # a member declaring far more bytes than it holds
        name = sorted(members)[r.integers(len(members))]
        return patched_sizes(data, name, int(r.choice([2**31, 2**32 - 1, 10**9])))
    # a member inflating to many times its compressed size (its checksum not renewed)
    name = "arrays.npz" if r.integers(2) else "idata.nc"
    return with_inflated_member(data, name, int(r.choice([8, 32])) << 20)


def _fuzz(data: bytes, n_cases: int, tmp_path, name: str, skip=()) -> tuple[dict[str, int], int]:
    """Load ``n_cases`` damaged variants of ``data`` (but those of the kinds ``skip``): how many were
    refused and how many loaded (allowed only to those that say what ``data`` says), and the peak of
    traced memory."""
    original = meaning(data)
    path = tmp_path / f"{name}.bmm"
    outcomes: dict[str, int] = {}
    failures = []
    tracemalloc.start()
    try:
        for case in range(n_cases):
            if case % 12 in skip:
                continue
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
            if meaning(damaged) != original:
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
    outcomes, peak = _fuzz(saved_bytes(name), n_cases, tmp_path, name)
    print(f"{name}: {n_cases} damaged files, {outcomes}, peak {peak / 2**20:.1f} MiB")
    assert outcomes == {"refused": n_cases}
    assert peak < PEAK_LIMIT


# ------------------------------------------------------------------------------------------ forged files
def _swap_subs(manifest):
    subs = manifest["state"]["estimators_"]["__list__"]
    subs[0], subs[1] = subs[1], subs[0]


FORGERIES = {
    "n_features_in_=3 (gp)": ("gp", set_state("n_features_in_", 3), "training inputs|feature"),
    "n_features_in_=3 (projection)": ("projection", set_state("n_features_in_", 3), "shape|feature"),
    "n_features_in_=3 (factor)": ("factor", set_state("n_features_in_", 3), "mean_|feature"),
    "an unknown state key": ("linear", set_state("anything", 1), "unknown attribute 'anything'"),
    "a special name": ("gp", set_state("__class__", 1), "invalid name"),
    "multi-class estimators swapped": ("linear-multiclass", _swap_subs,
                                       "coef_ is not that of the one-vs-rest|idata_ is not the posterior"),
    "deep JSON in the state": (
        "linear", lambda m: m["state"].update(deep=json.loads("[" * 500 + "]" * 500)), "deep|unknown attribute"),
}


@pytest.mark.parametrize("fmt", [3, 2, 1])
@pytest.mark.parametrize("case", list(FORGERIES))
def test_forged_files_whose_contents_disagree_are_refused(case, fmt, tmp_path):
    """Edits of the manifest that renew every checksum (formats 2 and 3) or of format-1 files (no
    checksum) are refused by the consistency checks."""
    name, edit, message = FORGERIES[case]
    path = tmp_path / "forged.bmm"
    path.write_bytes(forge(saved_bytes(name), edit, version=fmt))
    with pytest.raises(InvalidModelFileError, match=message):
        bmm.load(path)


@pytest.mark.parametrize("fmt", [2, 1])
def test_damaged_files_of_earlier_formats_are_refused(fmt, tmp_path):
    """Files of the earlier layouts (format 2: no file checksum; format 1: no sizes, no manifest
    checksum either), damaged, are refused unless the damage leaves what they say unchanged; for format
    1 without the manifest's edits, which are forgeries there."""
    skip = (6, 9, 10, 11) if fmt == 1 else ()
    outcomes, peak = _fuzz(forge(saved_bytes("gp"), version=fmt), 120, tmp_path, f"gp-format-{fmt}", skip)
    assert outcomes.get("refused", 0) >= 0.9 * (120 - 10 * len(skip))
    assert peak < PEAK_LIMIT


# ------------------------------------------------------------------------------------------ publishing
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
