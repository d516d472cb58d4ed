"""Saved files whose checksums vouch for contents that make no sense are refused; whatever ``save``
writes loads; zip bombs are refused before they inflate; killed saves leave nothing behind.

* Forged files: every checksum renewed (formats 2 and 3) or none (format 1), their contents edited so
  that they no longer agree (a negated representer weight, latent function or variational mean, a NaN
  or a negative slope in the link, a posterior array one row short, another fit's ``idata_``, one-vs-rest
  estimators swapped or without their posterior, a non-finite parameter): each is refused with
  :class:`InvalidModelFileError` naming what disagrees, by the relations the fit computed its values by
  (:mod:`bayes_maxmargin.core.consistency`, :mod:`bayes_maxmargin.models.gp.consistency`).
* A sum of 40 kernels saves and loads (sums and products are saved flat), and predicts identically.
* Zip limits: a directory of many members, a member that inflates a thousandfold under renewed
  checksums, a member declaring 5 GiB, compressed arrays: refused from the sizes the file declares.
* Temporary files of dead writers are removed by the next save or checkpointed run; a file name as
  long as the file system allows saves.
"""

from __future__ import annotations

import functools
import io
import json
import operator
import os
import signal
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import GPBSVM, InvalidModelFileError
from bayes_maxmargin.core import io as bio
from bayes_maxmargin.kernels import RBF

from ._saved_files import (
    forge,
    forge_arrays,
    saved_bytes,
    set_state,
    state_node,
    unzip,
    with_inflated_member,
    zip_members,
)

pytestmark = pytest.mark.xdist_group("persistence")


def _negated(a):
    return -a


def _one_row_short(a):
    return a[:-1]


def _swap_subs(manifest):
    subs = manifest["state"]["estimators_"]["__list__"]
    subs[0], subs[1] = subs[1], subs[0]


def _without_posterior(k):
    def edit(manifest):
        node = state_node(manifest, "estimators_", k, "state")
        node["__dict__"] = [kv for kv in node["__dict__"] if kv[0] != "_posterior"]
    return edit


def _set_dict_entry(key, entry, value):
    def edit(manifest):
        node = state_node(manifest, key)
        node["__dict__"] = [[k, value if k == entry else v] for k, v in node["__dict__"]]
    return edit


def _idata_of(name):
    return {"idata.nc": unzip(saved_bytes(name))[0]["idata.nc"]}


# fit of _saved_files, then (array path in the state: change), a manifest edit or members replaced, and the
# message that names what disagrees
FORGERIES = {
    "a NaN link": ("gp", {("link_",): lambda a: np.array([np.nan, a[1]])}, None, r"link_"),
    "a link of negative slope": ("gp", {("link_",): lambda a: np.array([-a[0], a[1]])}, None, r"positive slope"),
    "a link of three values": ("gp", {("link_",): lambda a: np.append(a, 0.0)}, None, r"link_ has shape \(3,\)"),
    "ECM's alpha_ negated": ("gp-ecm", {("alpha_",): _negated}, None, r"alpha_ does not satisfy \(K \+ Lambda"),
    "ECM's f_ negated": ("gp-ecm", {("f_",): _negated}, None, r"f_ does not satisfy omega"),
    "ECM's E[1/lambda] one row short": ("gp-ecm", {("_posterior", "inv_lam"): _one_row_short}, None,
                                        r"E\[1/lambda\] has shape \(29,\), not \(30,\)"),
    "ECM's X with a row dropped": ("gp-ecm", {("_posterior", "X"): _one_row_short}, None,
                                   r"f_ has shape \(30,\), not \(29,\)"),
    "ECM with another fit's idata_": ("gp-ecm", {}, _idata_of("gp-ecm-flipped"), r"observed labels"),
    "ECM's gamma_ infinite": ("gp-ecm", {}, set_state("gamma_", float("inf")), r"gamma_ holds non-finite"),
    "ECM saved as svi's choice": ("gp-ecm", {}, set_state("inference_", "svi"),
                                  r"inference_ is 'svi', not an inference method the fit's inference='ecm'"),
    "ECM's kernel_params_ NaN": ("gp-ecm", {}, _set_dict_entry("kernel_params_", "lengthscale", float("nan")),
                                 r"kernel_params_\['lengthscale'\] holds non-finite"),
    "SVI's variational mean negated": ("gp-svi", {("variational_mean_",): _negated}, None,
                                       r"variational_mean_ does not satisfy the mean of q\(u\)"),
    "SVI's natural parameter NaN": ("gp-svi", {("_svi", 0, "nat", "eta1"): lambda a: a * np.nan}, None,
                                    r"_posterior\..* holds non-finite"),
    "VI with another fit's idata_": ("gp", {}, _idata_of("gp-flipped"), r"f_ does not satisfy the mean of its draws"),
    "VI's alpha_ negated": ("gp", {("alpha_",): _negated}, None, r"alpha_ is not the posterior's alpha"),
    "VI's Cholesky factor one row short": ("gp", {("_posterior", "LB"): _one_row_short}, None,
                                           r"Cholesky factor has shape \(29, 30\)"),
    "EM's precision factor one row short": ("linear", {("_posterior", "prec_chol"): _one_row_short}, None,
                                            r"prec_chol has shape \(4, 5\), not \(5, 5\)"),
    "EM's coef_ NaN": ("linear", {("coef_",): lambda a: a * np.nan}, None, r"coef_ holds non-finite"),
    "one-vs-rest estimators swapped": ("gp-multiclass", {}, _swap_subs, r"estimators_\[0\]: "),
    "a one-vs-rest estimator without its posterior": (
        "gp-multiclass", {}, _without_posterior(1), r"estimators_\[1\]: the fit lacks its fitted attribute \['_posterior'\]"),
    "classes_ reversed with the encoder's": (
        "linear", {("classes_",): lambda a: a[::-1], ("_encoder", "classes_"): lambda a: a[::-1]}, None,
        r"not in sorted order"),
    "the projection's coef_ infinite": ("projection", {("coef_",): lambda a: a + np.inf}, None,
                                        r"coef_ holds non-finite"),
}


@pytest.mark.parametrize("fmt", [3, 2, 1])
@pytest.mark.parametrize("case", list(FORGERIES))
def test_forged_files_that_make_no_sense_are_refused(case, fmt, tmp_path):
    name, changes, edit, message = FORGERIES[case]
    members = edit if isinstance(edit, dict) else {}
    data = forge(saved_bytes(name), version=fmt, **members) if members else saved_bytes(name)
    path = tmp_path / "forged.bmm"
    path.write_bytes(forge_arrays(data, changes, fmt, None if members else edit))
    with pytest.raises(InvalidModelFileError, match=message):
        bmm.load(path)


@pytest.mark.parametrize("fmt", [3, 2, 1])
@pytest.mark.parametrize("name", ["gp", "gp-ecm", "gp-svi", "gp-multiclass", "linear", "factor", "projection"])
def test_genuine_files_of_every_format_load(name, fmt, tmp_path):
    """The same fits, their files rewritten in each format without other change: every check passes."""
    path = tmp_path / "genuine.bmm"
    path.write_bytes(forge(saved_bytes(name), version=fmt))
    est = bmm.load(path)
    X = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    with open(tmp_path / "same.bmm", "wb") as fh:
        fh.write(saved_bytes(name))
    np.testing.assert_array_equal(est.decision_function(X), bmm.load(tmp_path / "same.bmm").decision_function(X))


# ------------------------------------------------------------------------------------------ nesting
def test_a_sum_of_40_kernels_round_trips(tmp_path):
    """k1 + k2 + ... + k40 nests 39 sums (deeper than a file may nest values): saved flat, in postfix
    order, it loads as the same kernel and predicts identically."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = (X[:, 0] > 0).astype(int)
    kernel = functools.reduce(operator.add, [RBF(lengthscale=1.0 + 0.1 * i) for i in range(40)])
    est = GPBSVM(kernel=kernel, inference="vi", max_iter=3, learn_kernel=False, calibrate=False).fit(X, y)
    back = bmm.load(bmm.save(est, tmp_path / "sum.bmm"))
    assert back.kernel == kernel and back.kernel_ == est.kernel_
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    # a product chain too, unfitted
    product = functools.reduce(operator.mul, [RBF(lengthscale=1.0 + i) for i in range(70)])
    assert bmm.load(bmm.save(GPBSVM(kernel=product), tmp_path / "product.bmm")).kernel == product


def test_save_refuses_what_load_would_refuse(tmp_path):
    """A value nested deeper than a file may hold is refused by save, not written for load to refuse."""
    from bayes_maxmargin import LinearBSVM

    deep: dict = {}
    for _ in range(70):
        deep = {"k": deep}
    est = LinearBSVM()
    est.deep_ = deep
    with pytest.raises(ValueError, match="cannot save attribute 'deep_': its value nests more than 64"):
        bmm.save(est, tmp_path / "deep.bmm")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ zip limits
#: Peak of the Python heap (numpy and zlib buffers included) while a bomb is refused.
PEAK_LIMIT = 100 * 2**20


def _peak_of_refusal(path, match):
    tracemalloc.start()
    try:
        with pytest.raises(InvalidModelFileError, match=match):
            bmm.load(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_bomb_under_renewed_checksums_is_refused_before_it_inflates(tmp_path):
    """arrays.npz replaced by 256 MiB of zeros (about 260 kB deflated) with its SHA-256, size, CRC and the
    file's checksum all renewed: refused by its compression ratio, from the zip directory."""
    path = tmp_path / "bomb.bmm"
    path.write_bytes(with_inflated_member(saved_bytes("linear"), "arrays.npz", 256 << 20, renewed=True))
    peak = _peak_of_refusal(path, r"arrays.npz declares 268435456 bytes from \d+, a compression ratio beyond 200")
    assert peak < PEAK_LIMIT, f"peak {peak / 2**20:.1f} MiB"


def test_a_member_declaring_5_gib_is_refused(tmp_path):
    path = tmp_path / "huge.bmm"
    path.write_bytes(with_inflated_member(saved_bytes("linear"), "idata.nc", 5 << 30))
    peak = _peak_of_refusal(path, "more than max_bytes")
    assert peak < PEAK_LIMIT


def test_a_directory_of_many_members_is_refused_before_it_is_read(tmp_path, monkeypatch):
    members = [("manifest.json", b"{}"), *((f"m{i}", b"") for i in range(2000))]
    path = tmp_path / "many.bmm"
    path.write_bytes(zip_members(members))

    def unread(*args, **kwargs):
        raise AssertionError("the zip directory was read")

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", unread)
    with pytest.raises(InvalidModelFileError, match="its zip directory declares 2001 members"):
        bmm.load(path)


def test_compressed_arrays_and_unwritten_idata_are_refused(tmp_path):
    """Inside the members: arrays.npz with compressed arrays (np.savez_compressed: each could inflate
    beyond what arrays.npz declares), and an idata.nc declaring 2 GiB of never-written data (HDF5 reads
    them as the fill value): refused before anything is inflated or allocated."""
    import h5netcdf

    data = saved_bytes("linear")
    members, _ = unzip(data)
    with np.load(io.BytesIO(members["arrays.npz"])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    (tmp_path / "compressed.bmm").write_bytes(forge(data, **{"arrays.npz": buf.getvalue()}))
    with pytest.raises(InvalidModelFileError, match="holds compressed arrays"):
        bmm.load(tmp_path / "compressed.bmm")
    nc = tmp_path / "idata.nc"
    with h5netcdf.File(nc, "w") as fh:  # 6 kB
        fh.dimensions = {"x": 2**28}
        fh.create_variable("v", ("x",), "f8", chunks=(2**20,))
    (tmp_path / "unwritten.bmm").write_bytes(forge(data, **{"idata.nc": nc.read_bytes()}))
    peak = _peak_of_refusal(tmp_path / "unwritten.bmm", r"idata.nc's data declares 2147483648 bytes")
    assert peak < PEAK_LIMIT


# ------------------------------------------------------------------------------------------ temporary files
def _dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temporaries(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_save_removes_the_temporary_files_of_dead_writers_only(tmp_path):
    dead, host = _dead_pid(), bio._HOST
    stale = [f".bmm-{host}-{dead}-0123abcd.tmp", f".model.bmm.{dead}.0123456789abcdef.tmp"]
    live = [f".bmm-{host}-{os.getpid()}-0123abcd.tmp", f".bmm-{'0000' if host != '0000' else '0001'}-{dead}-0123abcd.tmp",
            f".other.{dead}.tmp.txt"]
    for name in stale + live:
        (tmp_path / name).write_bytes(b"partial")
    old = tmp_path / f".bmm-ffff-{os.getpid()}-00000000.tmp"  # a day old: stale whatever its writer
    old.write_bytes(b"partial")
    os.utime(old, (0, 0))
    with open(tmp_path / "linear.bmm", "wb") as fh:
        fh.write(saved_bytes("linear"))
    bmm.save(bmm.load(tmp_path / "linear.bmm"), tmp_path / "again.bmm")
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"linear.bmm", "again.bmm", *live}


def test_a_checkpointed_run_removes_the_temporary_files_of_dead_writers(tmp_path):
    from bayes_maxmargin.engine.checkpoint import checkpoint_session

    dead = _dead_pid()
    stale = tmp_path / f".bmm-{bio._HOST}-{dead}-0123abcd.tmp"
    stale.write_bytes(b"PK\x03\x04 partial")
    with checkpoint_session(tmp_path):
        pass
    assert not stale.exists()


_KILLED_SAVE = """
import os, signal, sys
import bayes_maxmargin as bmm
from bayes_maxmargin import persistence
est = bmm.load(sys.argv[1])
def killed(fh):
    os.kill(os.getpid(), signal.SIGKILL)
persistence._seal = killed
bmm.save(est, sys.argv[2])
"""


@pytest.mark.slow
def test_a_save_killed_while_it_writes_leaves_nothing_after_the_next(tmp_path):
    source = tmp_path / "source.bmm"
    source.write_bytes(saved_bytes("linear"))
    folder = tmp_path / "out"
    folder.mkdir()
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(source), str(folder / "model.bmm")], env=env,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert len(_temporaries(folder)) == 1 and not (folder / "model.bmm").exists()
    bmm.save(bmm.load(source), folder / "model.bmm")
    assert _temporaries(folder) == [] and bmm.load(folder / "model.bmm")


def test_a_file_name_as_long_as_the_file_system_allows_saves(tmp_path):
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    name = ("m" * 250)[: min(250, longest) - len(".bmm")] + ".bmm"
    with open(tmp_path / "linear.bmm", "wb") as fh:
        fh.write(saved_bytes("linear"))
    est = bmm.load(tmp_path / "linear.bmm")
    path = bmm.save(est, tmp_path / name)
    assert len(path.name) == min(250, longest) and _temporaries(tmp_path) == []
    X = np.ones((2, 4))
    np.testing.assert_array_equal(bmm.load(path).predict_proba(X), est.predict_proba(X))
    with open(path, "rb") as fh:
        assert json.loads(zipfile.ZipFile(fh).read("manifest.json"))["format_version"] == 3
