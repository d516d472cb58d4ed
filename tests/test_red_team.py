"""The red-team report on hardening (round two), case by case: one fast reproducer per reported
failure, in the report's sections, each quoting the case in its docstring and checking the
behaviour that replaced it. Unless a case says otherwise the data are the report's,
``rng = np.random.default_rng(1); X = rng.normal(size=(40, 4)); y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0)``.

Heavier versions live with their subjects: the magnitude property suite (``test_properties.py``),
the fuzz of 200 / 1000 damaged files per estimator (``test_file_fuzz.py``), the equal posteriors of
the two forms of wide fits (``test_wide.py``), the signal timings of real fits in subprocesses
(``test_signals.py``) and the hanging fits run 20 times (``test_lapack_deadlock.py``, ``-m extended``).
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import warnings
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import (
    GPBSVM,
    DivergenceWarning,
    DivergentSamplerError,
    FactorBSVM,
    InvalidModelFileError,
    LinearBSVM,
    MaxMarginProjection,
)
from bayes_maxmargin.core.memory import MEMORY_ENV, InsufficientMemoryError, available_memory, largest_n
from bayes_maxmargin.data.validation import check_magnitude, magnitude_limit
from bayes_maxmargin.engine import checkpoint, driver, mcmc, svi
from bayes_maxmargin.engine.checkpoint import CheckpointError, Terminated, read_checkpoint
from bayes_maxmargin.engine.mcmc import NonFiniteStateError, _check_finite, float64_hint, run_chains
from bayes_maxmargin.engine.nuts import check_divergences
from bayes_maxmargin.estimators.gp import GP_METHODS
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear, record_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper
from bayes_maxmargin.models.linear.posterior import LowRankPosterior

from . import _hangs, _saved_files
from ._hangs import run_until_done_or_hung
from ._saved_files import (
    edit_array,
    fitted_reference,
    forge,
    saved_bytes,
    seal,
    set_state,
    unzip,
    with_inflated_member,
    zip_members,
)


def _data(n: int = 40, d: int = 4):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _chains(**kw):
    """A short checkpointable run of the linear Gibbs sampler on the report's data: 3 chains, 10
    warm-up and 25 kept iterations by 2, in chunks of 4 blocks (8 iterations)."""
    X, y = _data()
    design = jnp.column_stack([jnp.ones(len(X)), jnp.asarray(X, jnp.float32)])
    data = LinearData(design, jnp.asarray(np.where(y > 0, 1.0, -1.0), jnp.float32))
    hyper = LinearHyper(jnp.ones(5), *(jnp.float32(v) for v in (1.0, 2.0, 1.0, 0.0)))
    state = jax.vmap(init_linear, (0, None, None, None))(jnp.zeros((3, 5)), data, hyper, True)
    args = {"num_warmup": 10, "num_samples": 25, "thin": 2, "chunk_size": 4, "progress_bar": False}
    return run_chains(build_linear_kernel(True), record_linear, state, jax.random.PRNGKey(0), data, hyper,
                      **{**args, **kw})


# ================================================================================================
# Numerics and silent answers
# ================================================================================================
MAGNITUDE_ERROR = r"column \d+.*magnitude .*StandardScaler"


@pytest.fixture(scope="module")
def vb_fit():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LinearBSVM(inference="vb", max_iter=50, random_state=0).fit(X, y)


@pytest.mark.parametrize("method", ["predict_proba", "predict", "decision_function", "predict_latent"])
def test_linear_vb_predict_on_huge_row_is_refused(vb_fit, method):
    """"``LinearBSVM(inference="vb", max_iter=50, random_state=0).fit(X, y).predict_proba(X[6:7] * 1e300)``
    gives ``[[nan, nan]]`` and ``predict`` gives class 0." """
    X, _ = _data()
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        getattr(vb_fit, method)(X[6:7] * 1e300)


def test_linear_vb_predict_below_the_limit_is_finite(vb_fit):
    """The same row scaled to half the magnitude limit: a finite probability."""
    X, _ = _data()
    scale = 0.5 * magnitude_limit(np.float64, X.shape[1]) / np.abs(X[6]).max()
    proba = vb_fit.predict_proba(X[6:7] * scale)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("classifier", ["linear", "gp"])
def test_factor_vbem_fit_on_huge_inputs_is_refused(classifier):
    """"``FactorBSVM(n_factors=2, inference="vbem", max_iter=5).fit(X * 1e200, y)`` fits without
    error, then ``predict_proba`` and ``transform`` are NaN everywhere (also with ``classifier="gp"``)." """
    X, y = _data()
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        FactorBSVM(n_factors=2, classifier=classifier, inference="vbem", max_iter=5).fit(X * 1e200, y)


def _stored_path(name: str):
    """The saved file ``tests/data/saved/<name>.bmm`` of a small fit (tests/data/make_golden.py): a fitted
    estimator of a kind whose fit no other test of this module compiles."""
    from .data.make_golden import SAVED_DIR

    return SAVED_DIR / f"{name}.bmm"


def _stored_fit(name: str):
    """The fitted estimator of :func:`_stored_path`."""
    return bmm.load(_stored_path(name))


def _stored_file(name: str) -> bytes:
    """The bytes of :func:`_stored_path`."""
    return _stored_path(name).read_bytes()


def test_factor_transform_on_huge_inputs_is_refused():
    """"... then ``predict_proba`` and ``transform`` are NaN everywhere": ``transform`` of a fit on
    the plain data refuses the huge inputs and stays finite on the plain ones."""
    X, _ = _data()
    # the report's FactorBSVM(n_factors=2, inference="vbem", max_iter=5), fitted on 4 features and stored
    # (tests/data/make_golden.py): the check of transform's inputs is the same for every fit, and loading
    # it spares this test compiling a fit of its own
    est = _stored_fit("FactorBSVM-vbem-linear")
    assert (est.n_factors, est.inference, est.max_iter, est.n_features_in_) == (2, "vbem", 5, X.shape[1])
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        est.transform(X * 1e300)
    assert np.isfinite(est.transform(X)).all()


def test_factor_gp_gibbs_predict_proba_on_huge_inputs_is_refused():
    """"Gibbs with the GP classifier gives NaN on ``predict_proba(X * 1e300)``." (20 rows)"""
    X, _ = _data(20)
    # a Gibbs fit with the GP classifier on 4 features, stored (tests/data/make_golden.py; loading it spares
    # compiling the factor model's GP sampler, tens of seconds): the refusal comes before any computation
    est = _stored_fit("FactorBSVM-gibbs-gp")
    assert (est.classifier, est.inference, est.n_features_in_) == ("gp", "gibbs", X.shape[1])
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        est.predict_proba(X * 1e300)


def test_nuts_fit_where_every_transition_diverges_is_an_error():
    """"``LinearBSVM(inference="nuts", num_samples=20, num_warmup=20, num_chains=1).fit(X * 1e300, y)``:
    every transition diverges, training accuracy 0.45 (0.95 on X), no error or warning. ... a fit
    where all transitions diverge is an error." (20 rows; at 1e100, below the magnitude limit)"""
    X, y = _data(20)
    with pytest.raises(DivergentSamplerError, match=r"all 10 NUTS transitions .*diverged.*[Ss]tandardise"):
        LinearBSVM(inference="nuts", num_samples=10, num_warmup=10, num_chains=1, random_state=0).fit(X * 1e100, y)


def test_nuts_fit_reports_its_divergences():
    """"NUTS fits report divergences (count and fraction) and warn, as NumPyro users expect"."""
    X, y = _data(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        est = LinearBSVM(inference="nuts", num_samples=10, num_warmup=10, num_chains=1, random_state=0).fit(X, y)
    diverging = est.idata_.sample_stats["diverging"].values
    assert est.num_divergences_ == int(diverging.sum())
    assert est.divergence_fraction_ == pytest.approx(diverging.mean())


def test_check_divergences_counts_warns_and_refuses():
    """"NUTS fits report divergences (count and fraction) and warn ...; a fit where all transitions
    diverge is an error" (also one problem of a one-vs-rest fit)."""
    none = np.zeros((2, 5), dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_divergences(none) == (0, 0.0)
    some = none.copy()
    some[0, :3] = True
    with pytest.warns(DivergenceWarning, match=r"3 of 10 .*fraction 0\.300"):
        assert check_divergences(some) == (3, 0.3)
    per_class = np.stack([none, np.ones((2, 5), dtype=bool)])
    with pytest.raises(DivergentSamplerError, match="all 10"):
        check_divergences(per_class)
    assert issubclass(DivergenceWarning, UserWarning) and issubclass(DivergentSamplerError, RuntimeError)


@pytest.mark.parametrize("dtype, hinted", [(np.float64, False), (np.float32, True)])
def test_chain_error_hint_depends_on_the_dtype(dtype, hinted):
    """"At x 1e300, nine configurations raise ``NonFiniteStateError`` (a ``FloatingPointError``) whose
    hint says "or use float64" while the fit is float64"."""
    assert ("float64" in float64_hint(dtype)) if hinted else float64_hint(dtype) == ""
    bad = (np.array([-1, 3]), np.array([0, 1]))
    with pytest.raises(NonFiniteStateError, match="chain 1 .* 'b' at iteration 3") as info:
        _check_finite(bad, ("a", "b"), dtype)
    assert ("or use float64" in str(info.value)) == hinted


def test_projection_rbf_fit_on_huge_inputs_is_refused():
    """"``MaxMarginProjection(kernel="rbf")`` raises a bare ``LinAlgError: SVD did not converge``."
    (at x 1e300)"""
    X, y = _data()
    with pytest.raises(ValueError, match=MAGNITUDE_ERROR):
        MaxMarginProjection(kernel="rbf", num_samples=2, num_warmup=2).fit(X * 1e300, y)


def test_magnitude_error_names_the_dataframe_column():
    """"Inputs whose scale would overflow are refused up front with a ``ValueError`` naming the column
    and suggesting standardisation"."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    X[:, 2] *= 1e300
    df = pd.DataFrame(X, columns=["a", "b", "income", "d"])
    with pytest.raises(ValueError, match=r"column 2 \('income'\) has a value of magnitude [0-9.]+e\+300"):
        LinearBSVM(inference="em", max_iter=5).fit(df, y)


def test_magnitude_limit_keeps_the_sums_of_squares_finite():
    """"Onset between 1e150 and 1e200": the limit M of n_terms squared inputs: 4 n_terms M^2 times
    the headroom stays below finfo.max."""
    for dtype in (np.float32, np.float64):
        for n_terms in (1, 4, 160, 10**6):
            M = magnitude_limit(dtype, n_terms)
            x = np.full(n_terms, 2 * M, dtype=dtype)  # differences of two inputs of magnitude M
            with np.errstate(over="raise"):
                total = np.dot(x, x)
            assert total == pytest.approx(np.finfo(dtype).max / 2.0**32, rel=1e-2)
    assert magnitude_limit(np.float32, 1) < 1e15 < 1e148 < magnitude_limit(np.float64, 1)


def test_check_magnitude_uses_the_dtype_and_skips_nan():
    """"Inputs whose scale would overflow are refused up front": by the dtype of the fit, ignoring
    missing values."""
    X = np.array([[1.0, np.nan], [2.0, 1e20]])
    check_magnitude(X, dtype=np.float64, n_terms=4)
    with pytest.raises(ValueError, match=r"column 1 .*float32"):
        check_magnitude(X, dtype=np.float32, n_terms=4)


# ================================================================================================
# Saved files (the README promises InvalidModelFileError for every damaged or foreign file)
# ================================================================================================
def _load_refused(path, content: bytes, message: str = "") -> InvalidModelFileError:
    path.write_bytes(content)
    with pytest.raises(InvalidModelFileError, match=message) as info:
        bmm.load(path)
    return info.value


def _deflated_spans(data: bytes) -> list[tuple[int, int]]:
    """Where the compressed data of each member of a zip lie in its bytes."""
    spans = []
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
            start = info.header_offset + 30 + name_len + extra_len
            spans.append((start, start + info.compress_size))
    return spans


def test_single_bit_flips_are_refused(tmp_path):
    """"10 of 60 single bit flips raise ``zlib.error``": 60 flips anywhere in a saved file, one in
    the compressed data of every member and one in each byte of the zip's end record and comment
    each end in InvalidModelFileError."""
    data, path = saved_bytes("linear"), tmp_path / "flipped.bmm"
    r = np.random.default_rng(0)
    in_members = [(start + end) // 2 for start, end in _deflated_spans(data)]
    end_record = range(data.rindex(b"PK\x05\x06"), len(data))
    assert len(in_members) == 3
    for pos in [*(int(p) for p in r.integers(len(data), size=60)), *in_members, *end_record]:
        damaged = bytearray(data)
        damaged[pos] ^= 1 << int(r.integers(8))
        _load_refused(path, bytes(damaged))


@pytest.mark.parametrize("renewed", [False, True], ids=["checksum-kept", "checksum-renewed"])
def test_garbage_idata_is_refused(tmp_path, renewed):
    """"a garbage ``idata.nc`` raises ``OSError``" (HDF5's signature, then random bytes; the
    manifest's checksums renewed for it or not)."""
    data = saved_bytes("linear")
    garbage = b"\x89HDF\r\n\x1a\n" + np.random.default_rng(0).bytes(2000)
    members, comment = unzip(data)
    content = zip_members({**members, "idata.nc": garbage}, comment)
    _load_refused(tmp_path / "garbage.bmm", forge(data, **{"idata.nc": garbage}) if renewed else content,
                  "idata.nc is unreadable" if renewed else "file checksum mismatch")


@pytest.mark.parametrize("renewed", [False, True], ids=["checksum-kept", "checksum-renewed"])
@pytest.mark.parametrize("nested", ["list", "object"])
def test_json_nested_100000_deep_is_refused(tmp_path, nested, renewed):
    """"JSON nested 100 000 deep raises ``RecursionError``" (as the manifest)."""
    depth = 100_000
    deep = b"[" * depth + b"]" * depth if nested == "list" else b'{"a":' * depth + b"1" + b"}" * depth
    members, comment = unzip(saved_bytes("linear"))
    _load_refused(tmp_path / "deep.bmm", zip_members({**members, "manifest.json": deep}, comment, sealed=renewed))


def _drop_sub_params(manifest):
    for sub in manifest["state"]["estimators_"]["__list__"]:
        sub["__dict__"] = [kv for kv in sub["__dict__"] if kv[0] != "params"]


@pytest.mark.parametrize("fmt", [3, 2, 1])
def test_multi_class_file_without_params_is_refused(tmp_path, fmt):
    """"multi-class files without ``params`` raise ``KeyError`` / ``TypeError`` (``_restore_saved``
    runs outside the guarded block)" (the checksums renewed, in every format version)."""
    # a three-class LinearBSVM EM fit of 4 features (its files hold one-vs-rest estimators)
    content = forge(_stored_file("LinearBSVM-em-multiclass"), _drop_sub_params, version=fmt)
    _load_refused(tmp_path / "multi.bmm", content, "malformed one-vs-rest estimator 0")


def _refused_fast(path, content: bytes, message: str, max_bytes: int | None = None) -> None:
    """Loading ``content`` ends in InvalidModelFileError matching ``message`` within 2 s and 20 MiB."""
    path.write_bytes(content)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(InvalidModelFileError, match=message):
            bmm.load(path, max_bytes=max_bytes)
        seconds, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20
    assert seconds < 2


def test_a_member_inflating_to_1_gib_is_refused_before_it_is_inflated(tmp_path):
    """"A 1 MB file whose ``arrays.npz`` inflates to 1 GiB peaks at 2.3 GB and takes 50 s before
    "checksum mismatch"": refused fast, in little memory, by its compression ratio in every format; trusted
    (``max_bytes`` given: no ratio limit), by the file's checksum, the sizes in the manifest (format 2 on) or
    the checksum streamed (format 1); a file over ``max_bytes`` likewise."""
    data = saved_bytes("linear")
    bomb = with_inflated_member(data, "arrays.npz", 2**30)
    assert len(bomb) < 2 * 2**20
    _refused_fast(tmp_path / "bomb.bmm", bomb, "compression ratio beyond 200")
    _refused_fast(tmp_path / "trusted.bmm", bomb, "file checksum mismatch", max_bytes=2**31)
    _refused_fast(tmp_path / "sealed.bmm", seal(bomb), "declares 1073741824 bytes where the manifest records",
                  max_bytes=2**31)
    old_bomb = with_inflated_member(forge(data, version=1), "arrays.npz", 2**30)
    _refused_fast(tmp_path / "old.bmm", old_bomb, "compression ratio beyond 200")
    _refused_fast(tmp_path / "big.bmm", data, "more than max_bytes=1000", max_bytes=1000)


def test_a_npy_header_of_shape_1e12_is_refused(tmp_path):
    """"a ``.npy`` header declaring shape (10^12,) asks for 7.28 TiB" (the manifest's checksums
    renewed for it): refused fast, in little memory."""
    data = saved_bytes("linear")
    members, _ = unzip(data)
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
    _refused_fast(tmp_path / "npy.bmm", forge(data, **{"arrays.npz": npz_buf.getvalue()}),
                  r"declares shape \(1000000000000,\)")


MANIFEST_EDITS = {
    "classes_ of three labels on a binary model": (
        lambda m: m["state"].update(classes_={"__list__": [0, 1, 2]}), "classes_|classes"),
    "n_features_in_=3": (set_state("n_features_in_", 3), "coefficients|feature"),
    "a state key named predict_proba": (set_state("predict_proba", 1), "method, property"),
}


@pytest.mark.parametrize("form", ["edited", "edited-format-2", "checksum-renewed", "format-1"])
@pytest.mark.parametrize("case", list(MANIFEST_EDITS))
def test_manifest_edits_are_refused(tmp_path, case, form):
    """"``manifest.json`` has no checksum: edits load silently (``classes_`` of three labels on a
    binary model, ``n_features_in_=3``, a state key named ``predict_proba`` that shadows the method,
    ...)": an edit is refused by the file's checksum (the manifest's in format 2), and an edit whose
    checksum was renewed (or of a format-1 file, which has none) by the consistency checks of the
    loaded state."""
    edit, message = MANIFEST_EDITS[case]
    data = saved_bytes("linear")
    if form.startswith("edited"):
        members, comment = unzip(forge(data, version=2) if form == "edited-format-2" else data)
        manifest = json.loads(members["manifest.json"])
        edit(manifest)
        content = zip_members({**members, "manifest.json": json.dumps(manifest).encode()}, comment)
        message = "checksum mismatch in manifest.json" if form == "edited-format-2" else "file checksum mismatch"
    else:
        content = forge(data, edit, version=1 if form == "format-1" else 3)
    _load_refused(tmp_path / "edited.bmm", content, message)


@pytest.mark.parametrize("renewed", [False, True], ids=["checksum-kept", "checksum-renewed"])
def test_a_duplicated_manifest_member_is_refused(tmp_path, renewed):
    """"a duplicated manifest member where the last wins": a second ``manifest.json`` that says
    ``n_features_in_=3`` (the zip comment holding the checksum of the first or of the second)."""
    members, comment = unzip(saved_bytes("linear"))
    manifest = json.loads(members["manifest.json"])
    manifest["state"]["n_features_in_"] = 3
    second = json.dumps(manifest).encode()
    content = zip_members([*members.items(), ("manifest.json", second)], comment, sealed=renewed)
    _load_refused(tmp_path / "twice.bmm", content, r"more than one member named \['manifest.json'\]")


@pytest.mark.parametrize("fmt", [3, 2, 1])
def test_another_models_idata_is_refused(tmp_path, fmt):
    """"another model's ``idata.nc``" (the checksums renewed, or a format-1 file): of a three-class
    fit, and of a binary fit of the same shapes; the file itself loads and predicts as the fit."""
    data = saved_bytes("linear")
    other, _ = unzip(_stored_file("LinearBSVM-em-multiclass"))
    _load_refused(tmp_path / "idata.bmm", forge(data, version=fmt, **{"idata.nc": other["idata.nc"]}), "idata_ has")
    other, _ = unzip(saved_bytes("linear-flipped"))
    _load_refused(tmp_path / "idata.bmm", forge(data, version=fmt, **{"idata.nc": other["idata.nc"]}),
                  "idata_ is not the posterior of this fit")
    path = tmp_path / "genuine.bmm"
    path.write_bytes(forge(data, version=fmt))
    saved_X = _saved_files.X
    np.testing.assert_array_equal(bmm.load(path).predict_proba(saved_X), fitted_reference().predict_proba(saved_X))


@pytest.mark.parametrize("fmt", [3, 2, 1])
def test_a_negated_coef_is_refused(tmp_path, fmt):
    """"A negated ``coef_`` loads and predictions ignore it because they use ``_coef_mean``: keep one
    source of truth for each fitted quantity." (the checksums renewed, in every format version)"""
    forged = edit_array(saved_bytes("linear"), "coef_", lambda a: -a)[fmt]
    _load_refused(tmp_path / "coef.bmm", forged, "coef_ / intercept_ are not the posterior mean")


# ================================================================================================
# Resources, signals, concurrency
# ================================================================================================
@pytest.mark.parametrize("inference", ["ecm", "gibbs", "vi"])
def test_dense_gp_fit_on_30000_points_is_refused_for_memory(inference, monkeypatch):
    """"``GPBSVM(inference="ecm" | "gibbs" | "vi").fit`` on 30 000 x 5 sat for 600 s in the jittered
    Cholesky of ``_check_kernel_matrix`` ... Before allocating an N x N matrix, estimate the memory and
    refuse with advice (``inference="fitc"`` or ``"svi"``, the size that fits)" (with 4 GB available)."""
    monkeypatch.setenv(MEMORY_ENV, "4e9")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30_000, 5))
    y = (X[:, 0] + 0.3 * rng.normal(size=30_000) > 0).astype(int)
    start = time.perf_counter()
    with pytest.raises(InsufficientMemoryError, match=r"N = 30000 .*only 4 GB") as info:
        GPBSVM(inference=inference).fit(X, y)
    assert time.perf_counter() - start < 30
    message = str(info.value)
    largest = largest_n(4 * 10**9, 8, int(message.split("for its ")[1].split()[0]))
    assert f"at most N = {largest} points" in message and 0 < largest < 30_000
    assert "inference='fitc'" in message and "inference='svi'" in message


@pytest.mark.parametrize("est", [
    GPBSVM(inference="ecm"), GPBSVM(inference="gibbs"), GPBSVM(inference="vi"), GPBSVM(inference="nuts"),
    FactorBSVM(n_factors=2, classifier="gp", inference="vbem"), FactorBSVM(n_factors=2, classifier="gp"),
], ids=lambda e: f"{type(e).__name__}-{e.inference}")
def test_dense_fit_that_does_not_fit_in_memory_is_refused(est, monkeypatch):
    """"Before allocating an N x N matrix, estimate the memory and refuse with advice": every dense
    GP fit (and the GP classifier of the factor model), the 40 points of the report with 10 kB."""
    monkeypatch.setenv(MEMORY_ENV, "1e4")
    X, y = _data(40)
    with pytest.raises(InsufficientMemoryError, match=r"N = 40 .*only 1e-05 GB") as info:
        est.fit(X, y)
    message = str(info.value)
    largest = largest_n(10**4, 8, int(message.split("for its ")[1].split()[0]))
    assert f"at most N = {largest} points" in message and 0 < largest < 40
    assert isinstance(info.value, (MemoryError, ValueError))
    if isinstance(est, GPBSVM):
        assert "inference='fitc'" in message and "inference='svi'" in message


class _FitReached(Exception):
    """Raised in place of a fit's computations once its checks (the memory estimate among them) passed."""


def test_sparse_gp_fit_is_not_refused_for_memory(monkeypatch):
    """The advice holds: ``inference="fitc"`` fits where the dense fits are refused (100 kB: the 5 x 40
    FITC matrices take 33 kB, the 40 x 40 ones of ECM 166 kB): the FITC fit passes the memory estimate
    and reaches its computations (stopped there: the memory limit is the override's number, and the
    FITC fits themselves are tested in tests/test_fitc.py)."""
    monkeypatch.setenv(MEMORY_ENV, "1e5")
    X, y = _data(40)
    with pytest.raises(InsufficientMemoryError):
        GPBSVM(inference="ecm").fit(X, y)

    def reached(*args, **kwargs):
        raise _FitReached

    fitc = dataclasses.replace(GP_METHODS["fitc"], fit=reached)
    monkeypatch.setitem(GP_METHODS._methods, "fitc", fitc)
    with pytest.raises(_FitReached):
        GPBSVM(inference="fitc", num_inducing=5, max_iter=3, learn_kernel=False).fit(X, y)


def test_available_memory_reads_the_override(monkeypatch):
    """The memory estimate's source: ``$BMM_AVAILABLE_MEMORY`` when set (checked), else the system's."""
    monkeypatch.setenv(MEMORY_ENV, "12345")
    assert available_memory() == 12345
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ValueError, match=MEMORY_ENV):
        available_memory()
    monkeypatch.delenv(MEMORY_ENV)
    assert available_memory() > 0


WIDE_FITS = {
    "em": dict(inference="em", max_iter=50),
    "vb": dict(inference="vb", max_iter=50),
    "gibbs": dict(inference="gibbs", num_samples=200, num_warmup=100, num_chains=1),
    "svi": dict(inference="svi", max_iter=200, batch_size=10),
    "nuts": dict(inference="nuts", num_samples=50, num_warmup=50, num_chains=1),
}


@pytest.mark.parametrize("inference", list(WIDE_FITS))
def test_wide_linear_fits_take_seconds(inference):
    """"Wide data: n = 20, d = 5000: ``LinearBSVM`` EM (``max_iter=50``) took 369 s, Gibbs and VB did
    not finish in 400 s, SVI ran for 23 minutes." Each fit, compilation included, takes well under a
    minute (the equal posteriors of the two forms: ``test_wide.py``; the times at default settings,
    under 10 s after compilation for every method: ``benchmarks/wide.py``)."""
    X, y = _data(20, 5000)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LinearBSVM(random_state=0, progress_bar=False, **WIDE_FITS[inference]).fit(X, y)
    seconds = time.perf_counter() - start
    assert seconds < 60, seconds
    assert est.coef_.shape[-1] == 5000 and np.isfinite(est.decision_function(X)).all()
    if inference in ("em", "vb", "svi"):
        assert isinstance(est._posterior, LowRankPosterior)  # the n-dimensional form
    if inference == "nuts":  # margin coordinates: tens of leapfrog steps per draw, not ~600 (tree depth 10)
        assert est.idata_.sample_stats["n_steps"].values.mean() < 64


def test_fits_without_checkpoint_leave_the_signal_handlers_alone(tmp_path, monkeypatch):
    """"Every Gibbs / SVI fit replaces the SIGTERM handler even without ``checkpoint=``, so SIGTERM waits
    for the end of a compiled chunk ... Without a checkpoint, leave signals alone": the handler seen
    while a Gibbs or an SVI fit runs is the program's own; with a checkpoint it is the run's until the
    fit returns."""
    seen = []
    real_chunk, real_shorter = mcmc._run_chunk, driver.shorter_length

    def chunk(*args, **kwargs):
        seen.append(signal.getsignal(signal.SIGTERM))
        return real_chunk(*args, **kwargs)

    def shorter(*args):
        seen.append(signal.getsignal(signal.SIGTERM))
        return real_shorter(*args)

    monkeypatch.setattr(mcmc, "_run_chunk", chunk)
    monkeypatch.setattr(driver, "shorter_length", shorter)  # after every chunk, of sampling and of SVI

    def own(signum, frame):
        raise AssertionError("no signal was sent")

    previous = signal.signal(signal.SIGTERM, own)
    try:
        X, y = _data()
        LinearBSVM(num_samples=10, num_warmup=10, num_chains=1, progress_bar=False).fit(X, y)
        LinearBSVM(inference="svi", batch_size=10, max_iter=20, progress_bar=False).fit(X, y)
        assert len(seen) >= 2 and all(h is own for h in seen)
        seen.clear()
        LinearBSVM(num_samples=10, num_warmup=10, num_chains=1, progress_bar=False).fit(X, y, checkpoint=tmp_path)
        assert seen and all(h is not own for h in seen)
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Pending:
    """An output of a compiled chunk that is not ready until ``ready`` is set, or 20 s after the run
    first asked (so that a run the signal did not stop fails the test instead of hanging it)."""

    def __init__(self) -> None:
        self.ready = False
        self.asked: float | None = None

    def is_ready(self) -> bool:
        self.asked = self.asked or time.monotonic()
        return self.ready or time.monotonic() - self.asked > 20.0


@pytest.mark.parametrize("signum, after", [(signal.SIGTERM, 2), (signal.SIGINT, 0)], ids=["sigterm", "sigint"])
@pytest.mark.usefixtures("python_signal_defaults")
def test_a_signal_during_a_long_chunk_stops_the_run_at_once(tmp_path, monkeypatch, signum, after):
    """"with one [a checkpoint], stop within a bounded time ... and exit with the conventional status
    (143 for SIGTERM, not 130)": a signal while a chunk computes (here one that never finishes, after
    ``after`` finished chunks) stops the run once the grace time passed, with ``Terminated`` (status
    143) or ``KeyboardInterrupt``, the checkpoint of the last finished chunk in place and the message
    saying where a resume continues; the resumed run equals an uninterrupted one. (The same with a
    real fit in a subprocess, the process ended within 5 s: ``test_signals.py``.)"""
    monkeypatch.setattr(checkpoint, "STOP_GRACE_S", 0.3)
    monkeypatch.setitem(checkpoint._ABANDONED, "leaves", [])
    real, calls, sent, pending = mcmc._run_chunk, [], [], _Pending()

    def chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) <= after:
            return real(*args, **kwargs)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signum)
        return pending, pending, pending

    monkeypatch.setattr(mcmc, "_run_chunk", chunk)
    folder = tmp_path / "ckpt"
    try:
        with pytest.raises(Terminated if signum == signal.SIGTERM else KeyboardInterrupt) as stopped:
            _chains(checkpoint=folder)
        waited = time.monotonic() - sent[0]
        assert checkpoint._ABANDONED["leaves"] == [pending] * 3
    finally:
        pending.ready = True
    assert 0.3 <= waited < 2.0
    if signum == signal.SIGTERM:
        assert stopped.value.code == 143
        assert str(stopped.value).endswith(f"holds the run up to iteration 16: resume={str(folder)!r} continues "
                                           "from there")
        assert read_checkpoint(folder).done == 8
        monkeypatch.setattr(mcmc, "_run_chunk", real)
        np.testing.assert_array_equal(_chains(resume=folder).samples["coef"], _chains().samples["coef"])
    else:
        assert "no checkpoint of this run exists yet" in str(stopped.value)
        assert not (folder / "checkpoint.npz").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.usefixtures("python_signal_defaults")
def test_svi_stops_at_once_on_sigterm_during_a_long_chunk(tmp_path, monkeypatch):
    """The same for SVI: SIGTERM while its third chunk of 4 rounds computes (and never finishes)
    stops it with ``Terminated`` naming the step the checkpoint holds, which a resume continues."""
    monkeypatch.setattr(checkpoint, "STOP_GRACE_S", 0.3)
    monkeypatch.setitem(checkpoint._ABANDONED, "leaves", [])
    monkeypatch.setitem(svi.run_svi.__kwdefaults__, "rounds_per_chunk", 4)
    real_compiled, calls, pending = svi._compiled, [], _Pending()

    def compiled(*args, **kwargs):
        run = real_compiled(*args, **kwargs)

        def chunk(*a):
            calls.append(1)
            if len(calls) <= 2:
                return run(*a)
            os.kill(os.getpid(), signal.SIGTERM)
            return (pending, pending), pending
        return chunk

    X, y = _data()

    def make():
        return LinearBSVM(inference="svi", batch_size=10, max_iter=200, random_state=2, progress_bar=False)

    full = make().fit(X, y)
    monkeypatch.setattr(svi, "_compiled", compiled)
    try:
        with pytest.raises(Terminated, match=r"holds the run up to step 80: resume=") as stopped:
            make().fit(X, y, checkpoint=tmp_path)
    finally:
        pending.ready = True
    assert stopped.value.code == 143 and (stopped.value.resume_at, stopped.value.unit) == (80, "step")
    assert read_checkpoint(tmp_path).done == 8  # rounds of 10 steps
    monkeypatch.setattr(svi, "_compiled", real_compiled)
    np.testing.assert_array_equal(make().fit(X, y, resume=tmp_path).elbo_, full.elbo_)


def test_stale_temporary_files_are_removed(tmp_path):
    """"A SIGKILL during a write leaves ``.checkpoint.npz.<pid>.tmp`` files that are never cleaned up":
    the next run in the folder removes them. (A real SIGKILL in the middle of a write, in a
    subprocess: ``test_signals.py``.)"""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    stale = [folder / ".checkpoint.npz.4242.tmp", folder / ".idata.nc.4242.tmp"]
    for path in stale:
        path.write_bytes(b"PK\x03\x04 partial")
    _chains(checkpoint=folder)
    assert not any(path.exists() for path in stale)
    assert read_checkpoint(folder).done == 30


_SAVE_CHILD = """
import sys, time
from pathlib import Path
import bayes_maxmargin as bmm
est = bmm.load(sys.argv[1]).set_params(sigma=float(sys.argv[3]))
go = Path(sys.argv[4])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
try:
    bmm.save(est, sys.argv[2])
except FileExistsError as err:
    print("exists", err)
else:
    print("saved")
"""


def _save_or_exists(est, path) -> str:
    """What ``_SAVE_CHILD`` prints for its save of ``est`` to ``path``."""
    try:
        bmm.save(est, path)
    except FileExistsError as err:
        return f"exists {err}"
    return "saved"


@pytest.mark.slow  # a fresh interpreter imports the package (JAX, ArviZ): seconds on busy cores
@pytest.mark.xdist_group("persistence")
def test_two_processes_saving_to_one_new_path(tmp_path):
    """"``save(est, p, overwrite=False)`` from two processes: both report success in 6 of 6 trials and
    one model is lost (check and rename are not atomic)": the test process and a child (one interpreter
    to start, not two) save at once, once the child waits for the signal to go."""
    src = tmp_path / "src.bmm"
    src.write_bytes(saved_bytes("linear"))
    target, go = tmp_path / "out" / "m.bmm", tmp_path / "go"
    target.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen([sys.executable, "-c", _SAVE_CHILD, str(src), str(target), "3.0", str(go)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    own = bmm.load(src).set_params(sigma=2.0)
    ready = mine = ""
    try:
        ready = child.stdout.readline().strip()
        if ready == "ready":
            go.touch()
            mine = _save_or_exists(own, target)
    finally:
        if not ready:  # the child ended before waiting
            go.touch()
        out, err = child.communicate(timeout=120)
    assert ready == "ready" and child.returncode == 0, err[-2000:]
    outputs = [mine, out.strip()]
    assert sorted(o.split()[0] for o in outputs) == ["exists", "saved"], outputs
    assert "overwrite=True" in next(o for o in outputs if o.startswith("exists"))
    winner = 2.0 if outputs[0] == "saved" else 3.0
    assert bmm.load(target).sigma == winner
    assert [p.name for p in target.parent.iterdir()] == ["m.bmm"]  # no temporary file left


def test_two_threads_saving_to_one_new_path(tmp_path):
    """"from two threads, ``FileNotFoundError`` on a temp name that depends only on the PID": one
    save wins, the other gets FileExistsError, in each of 5 trials."""
    est = fitted_reference()
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


def test_a_second_fit_on_a_folder_in_use_is_refused(tmp_path):
    """"Two fits sharing a ``checkpoint=`` folder overwrite each other (threads: 8 of 8 trials
    raised)": the second one, in another thread, stops at once with an error naming the process; the
    folder is free again afterwards (two processes: ``test_signals.py``)."""
    folder = tmp_path / "ckpt"
    started, release, errors = threading.Event(), threading.Event(), []

    def hold(done):
        started.set()
        release.wait(60)

    def first():
        try:
            _chains(checkpoint=folder, callback=hold)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(120)
    try:
        with pytest.raises(CheckpointError, match=rf"is in use by another fit \(process {os.getpid()}\)"):
            _chains(checkpoint=folder)
        with pytest.raises(CheckpointError, match="in use by another fit"):
            _chains(resume=folder)
    finally:
        release.set()
        thread.join()
    assert not errors
    assert read_checkpoint(folder).done == 30
    _chains(checkpoint=folder)  # free again


# ================================================================================================
# Fits that hang for good
# ================================================================================================
#: The watched fits compile without XLA's expensive optimisation passes, as the test processes do
#: (tests/conftest.py): the same fits and LAPACK calls, in less compilation time.
_UNOPTIMISED = ("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")


#: The three runs of ``benchmarks/lapack_deadlock.py`` below, in one interpreter (the package and JAX
#: imported once): each fit twice, then the plain-JAX reproducer, last as it turns on float64.
_HANG_RUNS = """
import runpy, sys
main = runpy.run_path(sys.argv[1])["main"]
main(["--fit", "gp-digits", "--repeats", "2", "--rows", "60", "--max-iter", "2"])
main(["--fit", "linear-missing", "--repeats", "2", "--rows", "80", "--max-iter", "2"])
main(["--iterations", "500"])
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="hang detection reads /proc")
def test_the_fits_that_hung_and_the_plain_jax_reproducer_finish(monkeypatch):
    """"10-class digits ``GPBSVM(inference="ecm")`` hung in 2 of 2 runs ...; ``LinearBSVM(prior="penalty",
    missing="model", inference="gibbs")`` finished once, then hung on an identical rerun": each fit
    twice in one process. "A plain-JAX reproducer: one jitted function with two independent batched
    Cholesky + ``solve_triangular`` calls on 8 x 64 x 64 arrays hung 3 of 3 times within 20 s on the
    2-core machine" (jax 0.10): with ``jax.jit`` under the jax the package requires (500 iterations).
    All in one subprocess watched for a stall (20 processes of each with ``-m extended`` in
    ``test_lapack_deadlock.py``)."""
    monkeypatch.setenv(*_UNOPTIMISED)
    script = str(_hangs.SCRIPT)
    monkeypatch.setattr(_hangs, "SCRIPT", "-c")  # the runner's `python SCRIPT ARGS` as `python -c CODE SCRIPT`
    finished, out = run_until_done_or_hung([_HANG_RUNS, script], limit_s=1200.0)
    assert finished, out[-2000:]
    assert out.count("fit ") == 4 and out.count("done ") == 3, out[-2000:]
