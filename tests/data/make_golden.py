"""Golden fixtures: saved estimators and their exact outputs, written by the code of one commit so
that a later layout of the library can be checked against it (``tests/test_golden.py``).

Run from the repository root::

    python tests/data/make_golden.py            # every case (replaces the files)
    python tests/data/make_golden.py NAME ...   # some of them (the others are kept)
    python tests/data/make_golden.py --check REPORT.json load:NAME refit:NAME ...   # what the tests run
    python tests/data/make_golden.py --refit-reference   # re-record refit.npz (REFIT_REFERENCE)

It writes, under ``tests/data/saved/``:

``<name>.bmm``
    The fitted estimator of every case of :data:`CASES` (but those marked ``saved=False``, which
    :func:`bayes_maxmargin.save` refuses), by :func:`bayes_maxmargin.save`.
``golden.npz``
    For every case, ``<name>/<output>`` for each output of :func:`outputs` (``predict_proba``,
    ``decision_function``, ``predict``, ``predict_latent_mean`` / ``_var``, ``transform``, as the
    estimator offers them) on the fixed test rows, and ``<name>/posterior/<var>`` for every variable of
    ``est.idata_.posterior`` (the draws, or the point estimate, of the fit).
``golden.json``
    For every case, its estimator class, exact constructor keyword arguments and data set (see
    :func:`case_record`), so that a test can refit it; and the environment it was generated in.

Only the public API (``from bayes_maxmargin import ...``) is used, so this file runs unchanged on any
package layout. The fits run under the test suite's numerical setup (``tests/conftest.py``): one BLAS
and one XLA:CPU thread, and XLA's expensive optimisation passes off (``jax_disable_most_optimizations``);
:func:`configure_like_tests` sets it up before jax is imported. The bits of a fit depend on these
settings, so the fixtures must be written under the same ones as the tests that compare against them.

``--check`` runs the comparisons of ``tests/test_golden.py`` (:func:`check_saved`, :func:`check_refit`)
in this fresh process and writes their results to a JSON report: the tests run them so, because the
bits also depend on the XLA options the package settles at its first compiled call in a process
(``bayes_maxmargin.core.compilation``), which an earlier test of the same pytest worker may have settled
under another setting (the ``xla_optimized`` tests of ``tests/test_distributions.py``).
"""

from __future__ import annotations

import os

# The environment of tests/conftest.py, set before numpy / scipy / jax load (kept if already set, as
# there): one BLAS thread and XLA:CPU's Eigen thread pool off.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "--xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

SAVED_DIR = Path(__file__).resolve().parent / "saved"
GOLDEN_NPZ = SAVED_DIR / "golden.npz"
GOLDEN_JSON = SAVED_DIR / "golden.json"


def configure_like_tests() -> None:
    """XLA's expensive optimisation passes off, as in every test process (``tests/conftest.py``)."""
    import jax

    jax.config.update("jax_disable_most_optimizations", True)


# ------------------------------------------------------------------------------------------------ data
def datasets() -> dict[str, Any]:
    """The fixed data of every case: 48 training rows, 4 features, 10 test rows.

    ``X``, ``y`` (labels "no" / "yes"), ``y3`` (three classes 0, 1, 2, one-vs-rest), ``groups`` /
    ``groups_test`` (random-intercept labels "g0".."g3"; the test rows also hold an unseen group "g9"),
    ``X_nan`` / ``X_test_nan`` (X / X_test with about 10 % of the entries missing, never a whole row
    or column) and ``X_test``.
    """
    rng = np.random.default_rng(0)
    n, d, n_test = 48, 4, 10
    X = rng.normal(size=(n, d))
    score = X[:, 0] - 0.7 * X[:, 1] + 0.4 * X[:, 2] * X[:, 3] + 0.5 * rng.normal(size=n)
    y = np.where(score > 0, "yes", "no")
    y3 = np.argmax(X[:, :3] + 0.5 * rng.normal(size=(n, 3)), axis=1)
    X_test = rng.normal(size=(n_test, d))
    groups = np.array([f"g{k}" for k in rng.integers(0, 4, size=n)])
    groups_test = np.array([f"g{k}" for k in rng.integers(0, 4, size=n_test)])
    groups_test[-2:] = "g9"
    X_nan = X.copy()
    mask = rng.random((n, d)) < 0.1
    mask[:, 0] = False  # column 0 always observed: no empty row
    X_nan[mask] = np.nan
    X_test_nan = X_test.copy()
    mask_test = rng.random((n_test, d)) < 0.15
    mask_test[:, 0] = False
    X_test_nan[mask_test] = np.nan
    return dict(X=X, y=y, y3=y3, X_test=X_test, groups=groups, groups_test=groups_test, X_nan=X_nan,
                X_test_nan=X_test_nan)


# ----------------------------------------------------------------------------------------------- cases
MC = dict(num_samples=20, num_warmup=20, num_chains=2, progress_bar=False, random_state=0)
FACTOR_MC = dict(n_factors=2, num_samples=10, num_warmup=20, thin=2, progress_bar=False, random_state=0)
PROJ_MC = dict(n_components=2, num_samples=15, num_warmup=15, progress_bar=False, random_state=0)
GP_ECM = dict(max_iter=20, mlii_every=10, mlii_steps=5, random_state=0)


def _case(name: str, estimator: str, data: str = "binary", *, groups: bool = False, nan: bool = False,
          saved: bool = True, **kwargs: Any) -> dict[str, Any]:
    return dict(name=name, estimator=estimator, data=data, groups=groups, missing=nan, saved=saved, kwargs=kwargs)


#: Every golden case: name, estimator class (public name), data set ("binary": ``X``, ``y``;
#: "multiclass": ``X``, ``y3``), whether ``groups`` are passed to fit and predict, whether the training
#: and test X have missing entries (``nan=True``: ``X_nan``, ``X_test_nan``; recorded as ``missing``),
#: whether the fit can be saved (``saved=False``: golden outputs and draws for the refit only, no
#: ``.bmm``), and the constructor keyword arguments.
CASES: list[dict[str, Any]] = [
    # --- LinearBSVM: Gibbs, EM, NUTS, SVI on the Gaussian-prior model
    _case("LinearBSVM-gibbs", "LinearBSVM", **MC),
    _case("LinearBSVM-gibbs-gamma-prior", "LinearBSVM", gamma_prior=(2.0, 2.0), gamma0=0.5, overrelaxation=0.0, **MC),
    _case("LinearBSVM-em", "LinearBSVM", inference="em", max_iter=100),
    _case("LinearBSVM-em-gamma-prior", "LinearBSVM", inference="em", gamma_prior=(2.0, 1.0), intercept_scale=None,
          max_iter=100, tol=1e-5),
    _case("LinearBSVM-em-float32", "LinearBSVM", inference="em", precision="float32", max_iter=100),
    _case("LinearBSVM-nuts", "LinearBSVM", inference="nuts", gamma_prior=(2.0, 2.0), num_samples=20, num_warmup=20,
          num_chains=1, progress_bar=False, random_state=0),
    _case("LinearBSVM-svi", "LinearBSVM", inference="svi", batch_size=16, max_iter=30, random_state=0),
    # --- LinearBSVM: Luts & Ormerod's models, VB and Gibbs
    _case("LinearBSVM-vb", "LinearBSVM", inference="vb", max_iter=200),
    _case("LinearBSVM-vb-sweeps", "LinearBSVM", inference="vb", accelerate=False, max_iter=200),
    _case("LinearBSVM-vb-penalty", "LinearBSVM", inference="vb", prior="penalty", max_iter=200),
    _case("LinearBSVM-vb-laplace_zero", "LinearBSVM", inference="vb", prior="laplace_zero", rho=0.3, max_iter=200),
    _case("LinearBSVM-vb-mixed", "LinearBSVM", groups=True, inference="vb", max_iter=200),
    _case("LinearBSVM-vb-missing", "LinearBSVM", nan=True, inference="vb", prior="penalty", missing="model",
          max_iter=200),
    _case("LinearBSVM-gibbs-penalty", "LinearBSVM", prior="penalty", **MC),
    _case("LinearBSVM-gibbs-laplace_zero", "LinearBSVM", prior="laplace_zero", rho=0.3, **MC),
    _case("LinearBSVM-gibbs-mixed", "LinearBSVM", groups=True, **MC),
    _case("LinearBSVM-gibbs-missing", "LinearBSVM", nan=True, prior="penalty", missing="model", **MC),
    # --- GPBSVM
    _case("GPBSVM-ecm", "GPBSVM", **GP_ECM),
    _case("GPBSVM-ecm-ard", "GPBSVM", kernel="ard", gamma_prior=(2.0, 1.0), **GP_ECM),
    _case("GPBSVM-ecm-adam", "GPBSVM", optimizer="adam", learn_kernel=("lengthscale",), gamma0=0.1, **GP_ECM),
    _case("GPBSVM-fitc", "GPBSVM", inference="fitc", num_inducing=6, **GP_ECM),
    _case("GPBSVM-gibbs", "GPBSVM", inference="gibbs", learn_kernel=False, **MC),
    _case("GPBSVM-gibbs-theta", "GPBSVM", inference="gibbs", learn_kernel=True, **MC),
    _case("GPBSVM-gibbs-theta-ard", "GPBSVM", inference="gibbs", kernel="ard", learn_kernel=True,
          gamma_prior=(2.0, 2.0), **MC),
    _case("GPBSVM-nuts", "GPBSVM", inference="nuts", learn_kernel=False, num_samples=20, num_warmup=20, num_chains=1,
          progress_bar=False, random_state=0),
    _case("GPBSVM-nuts-theta", "GPBSVM", inference="nuts", learn_kernel=True, num_samples=10, num_warmup=10,
          num_chains=1, progress_bar=False, random_state=0),
    _case("GPBSVM-vi", "GPBSVM", inference="vi", max_iter=10),
    _case("GPBSVM-vi-poly", "GPBSVM", kernel="poly", inference="vi", max_iter=10),
    _case("GPBSVM-svi", "GPBSVM", inference="svi", num_inducing=6, batch_size=12, max_iter=30, mlii_every=10,
          random_state=0),
    _case("GPBSVM-svi-random-fixed", "GPBSVM", inference="svi", num_inducing=6, inducing="random",
          optimize_inducing=False, learn_kernel=False, step_size=0.5, batch_size=12, max_iter=30, mlii_every=10,
          random_state=0),
    # --- FactorBSVM
    _case("FactorBSVM-gibbs-linear", "FactorBSVM", classifier="linear", **FACTOR_MC),
    _case("FactorBSVM-gibbs-linear-rho", "FactorBSVM", classifier="linear", rho=1.0, **FACTOR_MC),
    _case("FactorBSVM-gibbs-gp", "FactorBSVM", classifier="gp", n_blocks=4, **FACTOR_MC),
    # joint=False (FM+L): the second stage is a LinearBSVM with its own idata_, which save() refuses
    # ("only one InferenceData per estimator"), so this case is golden for the refit only
    _case("FactorBSVM-gibbs-linear-two-stage", "FactorBSVM", classifier="linear", joint=False, saved=False,
          **FACTOR_MC),
    _case("FactorBSVM-vbem-linear", "FactorBSVM", classifier="linear", inference="vbem", n_factors=2, max_iter=5,
          m_steps=3, random_state=0),
    _case("FactorBSVM-vbem-gp", "FactorBSVM", classifier="gp", inference="vbem", n_factors=2, max_iter=5, m_steps=3,
          random_state=0),
    _case("FactorBSVM-vbem-gp-ard", "FactorBSVM", classifier="gp", kernel="ard", inference="vbem", n_factors=2,
          max_iter=5, m_steps=3, random_state=0),
    # --- MaxMarginProjection
    _case("MaxMarginProjection-linear", "MaxMarginProjection", **PROJ_MC),
    _case("MaxMarginProjection-rbf", "MaxMarginProjection", kernel="rbf", n_basis=8, **PROJ_MC),
    _case("MaxMarginProjection-rbf-spike-slab", "MaxMarginProjection", kernel="rbf", n_basis=8, spike_slab=True,
          **PROJ_MC),
    _case("MaxMarginProjection-poly-random-basis", "MaxMarginProjection", kernel="poly", n_basis=8, basis="random",
          **PROJ_MC),
    # --- three classes, one-vs-rest
    _case("LinearBSVM-em-multiclass", "LinearBSVM", "multiclass", inference="em", max_iter=100, tol=1e-5),
    _case("LinearBSVM-gibbs-multiclass", "LinearBSVM", "multiclass", **MC),
    _case("LinearBSVM-vb-multiclass", "LinearBSVM", "multiclass", inference="vb", max_iter=200),
    _case("GPBSVM-ecm-multiclass", "GPBSVM", "multiclass", **GP_ECM),
    _case("GPBSVM-svi-multiclass", "GPBSVM", "multiclass", inference="svi", num_inducing=6, batch_size=12,
          max_iter=30, mlii_every=10, random_state=0),
    _case("FactorBSVM-vbem-linear-multiclass", "FactorBSVM", "multiclass", classifier="linear", inference="vbem",
          n_factors=2, max_iter=5, m_steps=3, random_state=0),
    _case("MaxMarginProjection-linear-multiclass", "MaxMarginProjection", "multiclass", **PROJ_MC),
]
CASES_BY_NAME = {c["name"]: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "duplicate case names"


# -------------------------------------------------------------------------------------- fit / predict
def to_json(value: Any) -> Any:
    """Constructor arguments as JSON: tuples become ``{"__tuple__": [...]}`` so that they come back as
    tuples (:func:`from_json`), the exact values the estimator was built with."""
    if isinstance(value, tuple):
        return {"__tuple__": [to_json(v) for v in value]}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot write {value!r} to golden.json")


def from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(from_json(v) for v in value["__tuple__"])
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def case_record(case: dict[str, Any]) -> dict[str, Any]:
    """The golden.json entry of ``case``: everything needed to refit it."""
    return dict(estimator=case["estimator"], kwargs=to_json(case["kwargs"]), data=case["data"],
                groups=case["groups"], missing=case["missing"], saved=case["saved"],
                fit_X="X_nan" if case["missing"] else "X", fit_y="y3" if case["data"] == "multiclass" else "y",
                predict_X="X_test_nan" if case["missing"] else "X_test")


#: Constructor arguments added, or whose default changed, after the fixtures were written, with the
#: value that reproduces how those fits were made (LinearBSVM's EM fits iterated the fixed point,
#: GPBSVM's default inference was ECM, its kernel "rbf", its ML-II step every 20 iterations, each of
#: mlii_steps iterations, its ECM iterations plain to the end, its predictive Phi(f), its precision float64,
#: its svi inducing points moved by ML-II at every size).
ADDED_DEFAULTS = {"LinearBSVM": {"solver": "fixed_point"},
                  "GPBSVM": {"inference": "ecm", "kernel": "rbf", "mlii_every": 20, "mlii_tol": None,
                             "accelerate": False, "calibrate": False, "solver": "fixed_point",
                             "precision": "float64", "optimize_inducing": True}}


def make_estimator(record: dict[str, Any]) -> Any:
    import bayes_maxmargin

    cls = getattr(bayes_maxmargin, record["estimator"])
    return cls(**{**ADDED_DEFAULTS.get(record["estimator"], {}), **from_json(record["kwargs"])})


def fit(record: dict[str, Any], data: dict[str, Any]) -> Any:
    """Build and fit the estimator of a golden.json entry (or :func:`case_record`) on ``data``."""
    est = make_estimator(record)
    kw = {"groups": data["groups"]} if record["groups"] else {}
    return est.fit(data[record["fit_X"]], data[record["fit_y"]], **kw)


def outputs(est: Any, record: dict[str, Any], data: dict[str, Any]) -> dict[str, np.ndarray]:
    """The predictions of ``est`` on the test rows (with the test groups where the case has groups)."""
    X = data[record["predict_X"]]
    kw = {"groups": data["groups_test"]} if record["groups"] else {}
    out: dict[str, np.ndarray] = {}
    if hasattr(est, "predict_latent"):
        mean, var = est.predict_latent(X, **kw)
        out["predict_latent_mean"], out["predict_latent_var"] = np.asarray(mean), np.asarray(var)
    for method in ("predict_proba", "decision_function", "predict"):
        if hasattr(est, method):
            out[method] = np.asarray(getattr(est, method)(X, **kw))
    if hasattr(est, "transform"):
        out["transform"] = np.asarray(est.transform(X))
    return out


def posterior(est: Any) -> dict[str, np.ndarray]:
    """Every variable of ``est.idata_.posterior`` (none for an estimator without ``idata_``)."""
    idata = getattr(est, "idata_", None)
    if idata is None:
        return {}
    return {str(k): np.asarray(v.values) for k, v in idata.posterior.data_vars.items()}


def case_arrays(name: str, est: Any, record: dict[str, Any], data: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays stored for case ``name``: ``<name>/<output>`` and ``<name>/posterior/<var>``."""
    return {**{f"{name}/{k}": v for k, v in outputs(est, record, data).items()},
            **{f"{name}/posterior/{k}": v for k, v in posterior(est).items()}}


def load_golden() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """golden.json and the arrays of golden.npz (read with ``allow_pickle=False``)."""
    meta = json.loads(GOLDEN_JSON.read_text(encoding="utf-8"))
    with np.load(GOLDEN_NPZ, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    return meta, arrays


def golden_arrays(arrays: dict[str, np.ndarray], name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The stored outputs and posterior draws of case ``name``."""
    out, post = {}, {}
    for key, value in arrays.items():
        case, _, rest = key.partition("/")
        if case != name:
            continue
        if rest.startswith("posterior/"):
            post[rest[len("posterior/"):]] = value
        else:
            out[rest] = value
    return out, post


def _environment() -> dict[str, Any]:
    import jax

    import bayes_maxmargin

    return dict(bayes_maxmargin=bayes_maxmargin.__version__, jax=jax.__version__, numpy=np.__version__,
                jax_disable_most_optimizations=bool(jax.config.read("jax_disable_most_optimizations")),
                XLA_FLAGS=os.environ.get("XLA_FLAGS", ""), OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS"))


# ----------------------------------------------------------------------------------------------- checks
#: Refits compared to a relative tolerance instead of bit for bit (their stored files still load bit
#: for bit):
#: - samplers that report kernel Info (slice evaluations, elliptical slice sub-iterations) in
#:   ``sample_stats``: carrying the Info through the compiled chunk changes how XLA fuses the loop body,
#:   and with it the last bits of the floating-point results (1e-13 relative after these short runs);
#: - the linear fits whose Cholesky factors and triangular solves act on stacks of matrices (the Gibbs
#:   chains, VB with missing values): they are lowered one LAPACK call per matrix
#:   (``core.compilation.unbatched_lapack``), which, with XLA's optimisations off as here, moves them by
#:   up to 5e-12;
#: - the ECM fits with ML-II on the dense prior: the gradient of log Z is written out
#:   (``models.gp.covariance.dense_log_marginal``), not differentiated through the Cholesky factor, and
#:   L-BFGS's line search carries its last bits into the kernel parameters (up to 1e-8 relative).
#: - the refits of the extended suite on a machine other than the fixtures': XLA:CPU compiles for the
#:   machine's instruction set, which orders some sums differently, and samplers carry the last bits
#:   through their chains. The fixtures' own commit, refitted on a 2-core AMD EPYC, misses them by the
#:   same amounts as today's code: up to 2e-8 relative in float64 (FactorBSVM's two-stage Gibbs), 4e-6
#:   in float32 (LinearBSVM's EM; 1.4e-5 in one of its probabilities, of 1e-4).
MACHINE_RTOL = {"LinearBSVM-em-float32": 1e-4,
                **{case: 1e-7 for case in (
                    "LinearBSVM-nuts", "LinearBSVM-vb-laplace_zero", "LinearBSVM-gibbs-mixed", "GPBSVM-fitc",
                    "GPBSVM-gibbs", "GPBSVM-nuts", "FactorBSVM-gibbs-linear", "FactorBSVM-gibbs-linear-rho",
                    "FactorBSVM-gibbs-linear-two-stage", "FactorBSVM-vbem-linear", "FactorBSVM-vbem-gp",
                    "FactorBSVM-vbem-gp-ard", "MaxMarginProjection-linear", "MaxMarginProjection-rbf",
                    "MaxMarginProjection-rbf-spike-slab", "MaxMarginProjection-poly-random-basis",
                    "LinearBSVM-em-multiclass", "LinearBSVM-vb-multiclass", "GPBSVM-svi-multiclass",
                    "FactorBSVM-vbem-linear-multiclass", "MaxMarginProjection-linear-multiclass")}}
INFO_RTOL = {"GPBSVM-gibbs-theta": 1e-9, "GPBSVM-gibbs-theta-ard": 1e-9, "FactorBSVM-gibbs-gp": 1e-9,
             **{f"GPBSVM-{case}": 1e-7 for case in ("ecm", "ecm-ard", "ecm-adam", "ecm-multiclass")},
             **{f"LinearBSVM-{case}": 1e-9 for case in ("gibbs", "gibbs-gamma-prior", "gibbs-missing",
                                                        "gibbs-multiclass", "gibbs-penalty", "gibbs-laplace_zero",
                                                        "vb-missing")},
             **MACHINE_RTOL}
#: Refits compared bit for bit with outputs and draws re-recorded by today's code (``--refit-reference``,
#: in ``refit.npz``) instead of those of the fixtures (their files still load as golden): NUTS turns the
#: last bits moved by lowering LAPACK calls one matrix at a time (``core.compilation.unbatched_lapack``)
#: into other accept decisions, so its draws of 10 iterations differ entirely.
REFIT_REFERENCE = ("GPBSVM-nuts-theta",)
REFIT_NPZ = SAVED_DIR / "refit.npz"


def assert_same(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], what: str, rtol: float = 0.0) -> None:
    """The same arrays: same keys, and per key the same shape, dtype and values (exactly, unless ``rtol``)."""
    assert sorted(got) == sorted(expected), f"{what}: outputs {sorted(got)}, golden {sorted(expected)}"
    for key in expected:
        if rtol and np.issubdtype(expected[key].dtype, np.floating):
            np.testing.assert_allclose(got[key], expected[key], rtol=rtol, atol=0, err_msg=f"{what}: {key}", strict=True)
        else:
            np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{what}: {key}", strict=True)


#: Predictions of a loaded file compared to this relative tolerance, its draws bit for bit: XLA:CPU compiles
#: the prediction programs for the instruction set of the machine (AVX-512 or not changes the order of
#: some sums: up to 1e-14 relative in these outputs).
LOAD_RTOL = 1e-12


def compare(est: Any, name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray], data: dict[str, Any],
            rtol: float = 0.0, outputs_rtol: float | None = None) -> None:
    """The outputs and posterior draws of ``est`` are the golden ones of case ``name`` (to ``rtol``; the
    outputs to ``outputs_rtol`` where given)."""
    expected_outputs, expected_posterior = golden_arrays(arrays, name)
    assert_same(outputs(est, meta["cases"][name], data), expected_outputs, f"{name} outputs",
                rtol if outputs_rtol is None else outputs_rtol)
    assert_same(posterior(est), expected_posterior, f"{name} posterior", rtol)


def check_saved(name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray], data: dict[str, Any]) -> None:
    """The stored ``<name>.bmm`` loads as the estimator of the case, with its constructor arguments,
    holds the draws exactly as golden and predicts as golden (to :data:`LOAD_RTOL`)."""
    import bayes_maxmargin

    record = meta["cases"][name]
    est = bayes_maxmargin.load(SAVED_DIR / f"{name}.bmm")
    assert type(est) is getattr(bayes_maxmargin, record["estimator"]), type(est)
    params = est.get_params()
    for key, value in from_json(record["kwargs"]).items():
        assert params[key] == value and type(params[key]) is type(value), f"{key}: {params[key]!r} != {value!r}"
    compare(est, name, meta, arrays, data, outputs_rtol=LOAD_RTOL)


def check_refit(name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray], data: dict[str, Any]) -> None:
    """The case refitted from its golden.json entry gives exactly the golden draws and outputs (to
    :data:`INFO_RTOL` for the refits listed there), or those of ``refit.npz`` for :data:`REFIT_REFERENCE`."""
    if name in REFIT_REFERENCE:
        with np.load(REFIT_NPZ, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    compare(fit(meta["cases"][name], data), name, meta, arrays, data, INFO_RTOL.get(name, 0.0))


def write_refit_reference() -> None:
    """Refit the cases of :data:`REFIT_REFERENCE` and write their outputs and draws to ``refit.npz``."""
    configure_like_tests()
    meta, _ = load_golden()
    data = datasets()
    arrays = {}
    for name in REFIT_REFERENCE:
        record = meta["cases"][name]
        arrays.update(case_arrays(name, fit(record, data), record, data))
    np.savez_compressed(REFIT_NPZ, **arrays)
    print(f"{len(REFIT_REFERENCE)} refit references in {REFIT_NPZ}")


CHECKS = {"load": check_saved, "refit": check_refit}


def run_checks(keys: list[str], report: Path) -> None:
    """Run the checks ``kind:NAME`` (kind ``load`` or ``refit``) in this process, writing after each
    one to ``report`` (JSON) ``{key: {"ok": bool, "message": str, "seconds": float}}``."""
    import traceback

    configure_like_tests()
    meta, arrays = load_golden()
    data = datasets()
    results: dict[str, Any] = {}
    for key in keys:
        kind, _, name = key.partition(":")
        start = time.perf_counter()
        try:
            CHECKS[kind](name, meta, arrays, data)
            ok, message = True, ""
        except AssertionError as err:
            ok, message = False, f"{key}: {err}"
        except Exception:  # noqa: BLE001 - reported to the test of this key
            ok, message = False, f"{key}:\n{traceback.format_exc()}"
        results[key] = dict(ok=ok, message=message, seconds=round(time.perf_counter() - start, 2))
        report.write_text(json.dumps(results, indent=1), encoding="utf-8")
        print(f"{key}: {'ok' if ok else 'FAILED'} ({results[key]['seconds']} s)", flush=True)


def generate(names: list[str]) -> None:
    """Fit the cases ``names`` and write their files (the other cases' entries are kept)."""
    configure_like_tests()
    from bayes_maxmargin import save

    SAVED_DIR.mkdir(parents=True, exist_ok=True)
    partial = len(names) < len(CASES)
    if partial and GOLDEN_JSON.exists():
        meta, arrays = load_golden()
    else:
        meta, arrays = {"cases": {}}, {}
    data = datasets()
    for name in names:
        start = time.perf_counter()
        record = case_record(CASES_BY_NAME[name])
        est = fit(record, data)
        path = SAVED_DIR / f"{name}.bmm"
        if record["saved"]:
            save(est, path, overwrite=True)
        elif path.exists():
            path.unlink()
        arrays = {k: v for k, v in arrays.items() if not k.startswith(f"{name}/")}
        arrays.update(case_arrays(name, est, record, data))
        meta["cases"][name] = record
        size = f"{path.stat().st_size / 1024:.0f} KiB" if record["saved"] else "not saved"
        print(f"{name}: {time.perf_counter() - start:.1f} s, {size}", flush=True)
    meta["cases"] = {c["name"]: meta["cases"][c["name"]] for c in CASES if c["name"] in meta["cases"]}
    meta["environment"] = _environment()
    for stale in sorted({p.stem for p in SAVED_DIR.glob("*.bmm")} - set(CASES_BY_NAME)):  # removed cases
        (SAVED_DIR / f"{stale}.bmm").unlink()
    np.savez_compressed(GOLDEN_NPZ, **arrays)
    GOLDEN_JSON.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    total = sum(p.stat().st_size for p in SAVED_DIR.iterdir())
    print(f"{len(meta['cases'])} cases, {total / 1024:.0f} KiB in {SAVED_DIR}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="cases to regenerate (default: all); with --check, checks load:NAME / refit:NAME")
    parser.add_argument("--check", metavar="REPORT", type=Path,
                        help="check against the stored files instead of writing them; results to REPORT (JSON)")
    parser.add_argument("--expect-package", metavar="FILE",
                        help="fail unless bayes_maxmargin is imported from FILE (its __init__.py)")
    parser.add_argument("--refit-reference", action="store_true",
                        help="re-record refit.npz (the refits of REFIT_REFERENCE) with today's code")
    args = parser.parse_args(argv)
    if args.expect_package:
        import bayes_maxmargin

        if Path(bayes_maxmargin.__file__).resolve() != Path(args.expect_package).resolve():
            parser.error(f"bayes_maxmargin is imported from {bayes_maxmargin.__file__}, not {args.expect_package}")
    if args.check:
        bad = [k for k in args.names if k.partition(":")[0] not in CHECKS]
        if bad:
            parser.error(f"checks are load:NAME or refit:NAME, got {bad}")
        run_checks(args.names, args.check)
        return
    if args.refit_reference:
        write_refit_reference()
        return
    names = args.names or [c["name"] for c in CASES]
    unknown = sorted(set(names) - set(CASES_BY_NAME))
    if unknown:
        parser.error(f"unknown case(s) {unknown}")
    generate(names)


if __name__ == "__main__":
    sys.exit(main())
