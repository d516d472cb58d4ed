"""save / load: a loaded estimator predicts exactly as the saved one; bad files fail clearly."""

from __future__ import annotations

import functools
import io
import json
import zipfile

import numpy as np
import pytest

import bayes_maxmargin as bmm
from bayes_maxmargin import GPBSVM, FactorBSVM, InvalidModelFileError, LinearBSVM, MaxMarginProjection
from bayes_maxmargin.persistence import FORMAT_VERSION

from ._saved_files import forge, unzip, zip_members

pytestmark = pytest.mark.xdist_group("persistence")

rng = np.random.default_rng(0)
X = rng.normal(size=(40, 3))
Y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.5 * rng.normal(size=40) > 0, "yes", "no")
X_NEW = rng.normal(size=(7, 3))

MCMC = dict(num_samples=20, num_warmup=20, num_chains=2, progress_bar=False, random_state=0)
ESTIMATORS = {
    "linear-em": lambda: LinearBSVM(inference="em", gamma_prior=(2.0, 1.0)),
    "linear-vb-laplace_zero": lambda: LinearBSVM(inference="vb", prior="laplace_zero"),
    "gp-vi": lambda: GPBSVM(inference="vi", max_iter=10),
    "gp-svi": lambda: GPBSVM(inference="svi", num_inducing=5, batch_size=10, max_iter=20, random_state=0),
    "projection-sskmmdp": lambda: MaxMarginProjection(n_components=2, kernel="rbf", n_basis=8, spike_slab=True,
                                                      num_samples=10, num_warmup=10, random_state=0),
}
# the same for every other inference method (slower to fit: extended runs)
EXTENDED = {
    "linear-gibbs": lambda: LinearBSVM(**MCMC),
    "linear-svi": lambda: LinearBSVM(inference="svi", batch_size=10, max_iter=20, random_state=0),
    "gp-ecm": lambda: GPBSVM(inference="ecm", max_iter=20, kernel="ard", random_state=0),
    "gp-gibbs": lambda: GPBSVM(inference="gibbs", learn_kernel=False, **MCMC),
    "gp-fitc": lambda: GPBSVM(inference="fitc", num_inducing=5, max_iter=20, random_state=0),
    "factor-gibbs-gp": lambda: FactorBSVM(n_factors=2, classifier="gp", num_samples=10, num_warmup=10, random_state=0),
    "factor-gibbs-gp-theta": lambda: FactorBSVM(n_factors=2, classifier="gp", learn_kernel=("lengthscale",),
                                                num_samples=10, num_warmup=10, random_state=0),
    "factor-vbem": lambda: FactorBSVM(n_factors=2, classifier="gp", inference="vbem", random_state=0),
    "factor-gibbs-probit": lambda: FactorBSVM(n_factors=2, classifier="gp", link="probit", num_samples=10,
                                              num_warmup=10, random_state=0),
    "projection-no-latent": lambda: MaxMarginProjection(n_components=2, latent_representation=False, num_samples=10,
                                                        num_warmup=10, random_state=0),
}
ESTIMATORS.update(EXTENDED)


@functools.cache
def _fitted(name):
    return ESTIMATORS[name]().fit(X, Y)


@pytest.fixture(params=[pytest.param(k, marks=[pytest.mark.extended] if k in EXTENDED else []) for k in ESTIMATORS])
def saved(request, tmp_path):
    est = _fitted(request.param)
    return est, bmm.save(est, tmp_path / f"{request.param}.bmm")


def test_loaded_estimator_predicts_exactly_as_the_original(saved):
    est, path = saved
    back = bmm.load(path)
    assert type(back) is type(est) and back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.classes_, est.classes_)
    for method in ("predict", "predict_proba", "decision_function", "transform"):
        if hasattr(est, method):
            np.testing.assert_array_equal(getattr(back, method)(X_NEW), getattr(est, method)(X_NEW))
    assert back.idata_.posterior.equals(est.idata_.posterior)
    for name in ("coef_", "intercept_", "alpha_", "support_", "kernel_params_", "variational_cov_", "basis_usage_"):
        if hasattr(est, name):
            a, b = getattr(est, name), getattr(back, name)
            if isinstance(a, dict):
                assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
            else:
                np.testing.assert_array_equal(a, b)


def test_projection_option_saves_and_files_without_it_load(tmp_path):
    """``latent_representation`` is saved and loaded, and the loaded model predicts and projects exactly as
    the fit (the same code on the same arrays); a file written before the option existed (the stored
    MaxMarginProjection files of tests/data/saved) loads as the model with the latent representation, the
    only one there was."""
    from .data.make_golden import SAVED_DIR

    est = _fitted("projection-no-latent")
    loaded = bmm.load(bmm.save(est, tmp_path / "direct.bmm"))
    assert loaded.get_params()["latent_representation"] is False
    assert loaded._model_name() == "MMLDP without z_n (eq. 11)"
    for method in ("predict", "decision_function", "transform"):
        np.testing.assert_array_equal(getattr(loaded, method)(X_NEW), getattr(est, method)(X_NEW), err_msg=method)
    for name in ("MaxMarginProjection-linear", "MaxMarginProjection-rbf-spike-slab"):
        path = SAVED_DIR / f"{name}.bmm"
        assert "latent_representation" not in json.loads(unzip(path.read_bytes())[0]["manifest.json"])["params"]
        old = bmm.load(path)
        assert old.get_params()["latent_representation"] is True
        assert "without" not in old._model_name()


def test_factor_link_saves_and_files_without_it_load(tmp_path):
    """FactorBSVM's ``link`` is saved and loaded; a file written before the option existed (the stored
    FactorBSVM files of tests/data/saved) loads with the max-margin link, the only one there was, and
    predicts with it. (A fitted probit model round-trips in tests/test_factor_estimator.py::test_probit_link.)"""
    from .data.make_golden import SAVED_DIR

    back = bmm.load(bmm.save(FactorBSVM(classifier="gp", link="probit"), tmp_path / "probit.bmm"))
    assert back.get_params()["link"] == "probit"
    for name in ("FactorBSVM-gibbs-gp", "FactorBSVM-vbem-linear"):
        path = SAVED_DIR / f"{name}.bmm"
        assert "link" not in json.loads(unzip(path.read_bytes())[0]["manifest.json"])["params"]
        old = bmm.load(path)
        assert old.get_params()["link"] == "hinge"
        p = old.predict_proba(np.zeros((2, old.n_features_in_)))
        assert p.shape == (2, 2) and np.all(np.isfinite(p))


def test_theta_sampler_saves_and_files_without_it_load(tmp_path):
    """GPBSVM's ``theta_sampler`` is saved and loaded; a file written before the option existed (the
    stored GPBSVM Gibbs file with theta sampled, tests/data/saved) loads with the collapsed sampler, the
    only one there was, and predicts."""
    from .data.make_golden import SAVED_DIR

    back = bmm.load(bmm.save(GPBSVM(inference="gibbs", theta_sampler="surrogate"), tmp_path / "surrogate.bmm"))
    assert back.get_params()["theta_sampler"] == "surrogate"
    path = SAVED_DIR / "GPBSVM-gibbs-theta.bmm"
    assert "theta_sampler" not in json.loads(unzip(path.read_bytes())[0]["manifest.json"])["params"]
    old = bmm.load(path)
    assert old.get_params()["theta_sampler"] == "collapsed"
    p = old.predict_proba(np.zeros((2, old.n_features_in_)))
    assert p.shape == (2, 2) and np.all(np.isfinite(p))


def test_files_that_name_moved_types_load(tmp_path):
    """A file names its types by module path. An S-BSVM fit saved while ``NatParams`` lived in
    ``bayes_maxmargin.engine.svi`` (before the natural-gradient algebra had its own module) loads and
    predicts exactly as the same fit saved today; a type name the library never had is refused."""
    est = _fitted("gp-svi")
    new, old = "bayes_maxmargin.engine.natural_gradient.NatParams", "bayes_maxmargin.engine.svi.NatParams"
    data = bmm.save(est, tmp_path / "now.bmm").read_bytes()
    assert new.encode() in unzip(data)[0]["manifest.json"]

    def renamed(to):
        def edit(manifest):
            manifest.update(json.loads(json.dumps(manifest).replace(new, to)))
        return forge(data, edit)

    (tmp_path / "then.bmm").write_bytes(renamed(old))
    back = bmm.load(tmp_path / "then.bmm")
    np.testing.assert_array_equal(back.predict_proba(X_NEW), est.predict_proba(X_NEW))
    (tmp_path / "never.bmm").write_bytes(renamed("bayes_maxmargin.engine.svi.NotAType"))
    with pytest.raises(InvalidModelFileError, match="NotAType"):
        bmm.load(tmp_path / "never.bmm")


def test_unfitted_estimator_round_trips(tmp_path):
    est = GPBSVM(kernel="poly", kernel_params={"degree": 2}, inducing="random")
    back = bmm.load(bmm.save(est, tmp_path / "m.bmm"))
    assert back.get_params() == est.get_params()


def test_existing_file_is_not_replaced_without_overwrite(saved, tmp_path):
    est, path = saved
    (tmp_path / "user").mkdir()
    target = tmp_path / "user" / "keep.bmm"
    target.write_bytes(b"user data")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        bmm.save(est, target)
    assert target.read_bytes() == b"user data"
    # a save that fails midway leaves the old file in place and no temporary file behind
    est.unsupported_ = lambda x: x
    try:
        with pytest.raises(TypeError, match="attribute 'unsupported_'"):
            bmm.save(est, target, overwrite=True)
    finally:
        del est.unsupported_
    assert target.read_bytes() == b"user data"
    assert [p.name for p in target.parent.iterdir()] == ["keep.bmm"]
    bmm.save(est, target, overwrite=True)
    assert bmm.load(target).get_params() == est.get_params()


def _members(path):
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _rezip(path, members, comment=b"", sealed=True):
    """``path`` written as a zip of ``members``, with a valid file checksum or the zip comment ``comment``."""
    path.write_bytes(zip_members(members, comment, sealed=sealed))
    return path


def _with_manifest(path, out, **changes):
    """The file with entries of its manifest changed, and the file's checksum made to match (a
    well-formed file of another kind, not a damaged one)."""
    members = _members(path)
    manifest = json.loads(members["manifest.json"])
    manifest.update(changes)
    members["manifest.json"] = json.dumps(manifest).encode()
    return _rezip(out, members)


def test_bad_files_fail_with_a_clear_error(saved, tmp_path):
    _, path = saved
    data = path.read_bytes()
    cases = {
        "truncated": (data[: len(data) // 2], "truncated or not a zip"),
        "empty": (b"", "truncated or not a zip"),
        "foreign": (b"\x89HDF\r\n\x1a\n" + bytes(100), "truncated or not a zip"),
    }
    for name, (content, message) in cases.items():
        f = tmp_path / f"{name}.bmm"
        f.write_bytes(content)
        with pytest.raises(InvalidModelFileError, match=message):
            bmm.load(f)
    # a zip of something else
    buf = io.BytesIO()
    np.savez(buf, x=np.arange(3))
    (tmp_path / "npz.bmm").write_bytes(buf.getvalue())
    with pytest.raises(InvalidModelFileError, match="not a bayes_maxmargin estimator file"):
        bmm.load(tmp_path / "npz.bmm")
    # one byte of the arrays changed (the file's checksum renewed)
    members = _members(path)
    arr = bytearray(members["arrays.npz"])
    arr[len(arr) // 2] ^= 0xFF
    with pytest.raises(InvalidModelFileError, match="checksum mismatch in arrays.npz"):
        bmm.load(_rezip(tmp_path / "tampered.bmm", {**members, "arrays.npz": bytes(arr)}))
    # an edited manifest, the file's checksum (or a format-2 file's manifest checksum) not renewed, or
    # the checksum dropped
    manifest = json.loads(members["manifest.json"])
    manifest["state"]["n_features_in_"] = 2
    edited = {**members, "manifest.json": json.dumps(manifest).encode()}
    with pytest.raises(InvalidModelFileError, match="file checksum mismatch"):
        bmm.load(_rezip(tmp_path / "edited.bmm", edited, zipfile.ZipFile(path).comment, sealed=False))
    old = unzip(forge(data, version=2))
    with pytest.raises(InvalidModelFileError, match="checksum mismatch in manifest.json"):
        bmm.load(_rezip(tmp_path / "edited-2.bmm", {**old[0], "manifest.json": edited["manifest.json"]}, old[1],
                        sealed=False))
    with pytest.raises(InvalidModelFileError, match="lacks the file checksum"):
        bmm.load(_rezip(tmp_path / "unsigned.bmm", members, sealed=False))
    with pytest.raises(InvalidModelFileError, match="lacks the manifest checksum"):
        bmm.load(_rezip(tmp_path / "unsigned-2.bmm", old[0], sealed=False))
    # an extra member
    with pytest.raises(InvalidModelFileError, match="unexpected members"):
        bmm.load(_rezip(tmp_path / "extra.bmm", {**members, "payload.pkl": b"cos\nsystem\n"}))
    with pytest.raises(InvalidModelFileError, match=f"format version {FORMAT_VERSION + 1}.*reads format versions 1 to"):
        bmm.load(_with_manifest(path, tmp_path / "newer.bmm", format_version=FORMAT_VERSION + 1))
    with pytest.raises(InvalidModelFileError, match="not a bayes_maxmargin estimator file"):
        bmm.load(_with_manifest(path, tmp_path / "other.bmm", format="sklearn"))
    # nothing named in the file is imported: a foreign type is refused
    with pytest.raises(InvalidModelFileError, match="unknown type 'os.system'"):
        bmm.load(_with_manifest(path, tmp_path / "type.bmm", estimator="os.system"))
    with pytest.raises(FileNotFoundError, match="no estimator file"):
        bmm.load(tmp_path / "missing.bmm")


def test_non_estimators_are_refused(tmp_path):
    from sklearn.svm import SVC

    with pytest.raises(TypeError, match="cannot save an object of type sklearn.svm"):
        bmm.save(SVC(), tmp_path / "svc.bmm")
    assert not (tmp_path / "svc.bmm").exists()
