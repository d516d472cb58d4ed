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
#: its svi inducing points moved by ML-II at every size, its ML-II criterion eq. (9) / (10) for ECM).
ADDED_DEFAULTS = {"LinearBSVM": {"solver": "fixed_point"},
                  "GPBSVM": {"inference": "ecm", "kernel": "rbf", "mlii_every": 20, "mlii_tol": None,
                             "accelerate": False, "calibrate": False, "solver": "fixed_point",
                             "precision": "float64", "optimize_inducing": True, "mlii_criterion": "evidence"}}


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
    """Every variable of ``est.idata_.posterior`` (none for an estimator without ``idata_``); for a
    deterministic fit, whose posterior holds independent draws around its point estimates
    (``posterior.attrs["approximation"]``), those point estimates as the files of formats 1-3 store
    them (:func:`point_estimates`)."""
    idata = getattr(est, "idata_", None)
    if idata is None:
        return {}
    if "approximation" in idata.posterior.attrs:
        subs = getattr(est, "estimators_", None)
        if subs is None:
            return point_estimates(est)
        per_class = [point_estimates(sub) for sub in subs]
        return {k: np.stack([p[k] for p in per_class]) for k in per_class[0]}
    return {str(k): np.asarray(v.values) for k, v in idata.posterior.data_vars.items()}


def point_estimates(est: Any) -> dict[str, np.ndarray]:
    """The point estimates of a binary deterministic fit, each as one draw of one chain (the layout of
    the posterior of EM, ECM, FITC, VB, VI, SVI and VB-EM fits in files of formats 1-3): the mean of
    its Gaussian (coefficients, f, u), VB's inclusion probabilities and random effects, and
    ``idata_.constant_data`` (kernel parameters, gamma, sigma_u2); VB-EM's means of q(A), q(psi) and
    q(gamma)."""
    one = lambda value: np.asarray(value, dtype=np.float64)[None, None]  # noqa: E731
    name = type(est).__name__
    if name == "LinearBSVM":
        mean, d = np.asarray(est._posterior.mean, dtype=np.float64), est.n_features_in_
        out = {"beta": one(mean[:d])}
        if est.fit_intercept:
            out["intercept"] = one(mean[d])
        if hasattr(est, "random_effects_"):
            out["random_effects"] = one(est.random_effects_)
        if hasattr(est, "inclusion_probabilities_"):
            out["inclusion"] = one(est.inclusion_probabilities_)
    elif name == "GPBSVM":
        out = {"u": one(est.variational_mean_)} if est.inference == "svi" else {"f": one(est.f_)}
    else:  # FactorBSVM, VB-EM (its kernel parameters were not in its posterior)
        state = est._posterior.state
        return {"A": one(state.mA), "psi": one(state.psi_a / state.psi_b), "gamma": one(state.gam_a / state.gam_b)}
    constant = est.idata_.get("constant_data")
    if constant is not None:
        out.update({str(k): one(v.values) for k, v in constant.data_vars.items()})
    return out


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


def platform_fingerprint() -> dict[str, str]:
    """What the last bits of a fit depend on beyond the code and the settings above: the CPU (XLA:CPU
    compiles for its instruction set; OpenBLAS / LAPACK pick kernels by it) and the jaxlib build (its
    XLA). Fixtures compared bit for bit only on a machine with the same fingerprint. The CPU is its model
    name with its family and model numbers (x86) or implementer and part (ARM): a virtual machine may
    name several generations alike ("AMD EPYC"), whose instruction sets differ."""
    import platform

    import jaxlib

    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                break  # the first processor's block
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:
        pass
    cpu = fields.get("model name") or platform.processor() or platform.machine()
    detail = [f"{k} {fields[k]}" for k in ("cpu family", "model", "CPU implementer", "CPU part") if k in fields]
    return dict(cpu=f"{cpu} ({', '.join(detail)})" if detail else cpu, jaxlib=jaxlib.__version__)


def _environment() -> dict[str, Any]:
    import jax

    import bayes_maxmargin

    return dict(bayes_maxmargin=bayes_maxmargin.__version__, jax=jax.__version__, numpy=np.__version__,
                jax_disable_most_optimizations=bool(jax.config.read("jax_disable_most_optimizations")),
                XLA_FLAGS=os.environ.get("XLA_FLAGS", ""), OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS"),
                platform=platform_fingerprint())


# ----------------------------------------------------------------------------------------------- checks
# Nothing below compares computed floating-point results bit for bit across machines: XLA:CPU compiles
# for the machine's instruction set (AVX-512 or not reorders sums), OpenBLAS and LAPACK choose their
# kernels by CPU, and jaxlib versions change both, so the last bits of every computed number are the
# machine's. Each comparison has a tolerance derived from what the computation is:
#
# - a loaded file's predictions: one pass of linear algebra on stored arrays (LOAD_RTOL);
# - a refit: under its fixed seed a deterministic function of the data, which carries the roundings of
#   every step along; bounded by the fit's own measured response to a rounding of its inputs
#   (PROBE_FACTOR, :func:`probe_tolerances`). This holds for the samplers too, as long as one rounding
#   does not send the chain down another path: the Gibbs samplers and LinearBSVM's NUTS of these cases
#   respond to one rounding by at most 1.2e-7 of an output's scale (the two-stage factor model's
#   predictive variance), and are compared so;
# - a refit whose draws one rounding moves entirely (CHAOTIC_REFITS; a sampler whose probe response
#   exceeds CHAOS_LIMIT fails, naming that list): the draws of another machine are another path, and
#   these short runs (10 to 20 draws) are too far from converged for two paths to agree in
#   distribution (checked: refits under two other seeds miss the golden means by 5 to 800 Monte Carlo
#   standard errors). Compared bit for bit on the platform that wrote the expected arrays
#   (:func:`platform_fingerprint`, recorded in golden.json and refit.npz when written), skipped
#   elsewhere.
#
# Integer and string outputs (``predict``) are compared exactly, except a label whose golden decision
# value is within the tolerance of the decision boundary.

#: Predictions of a loaded file, relative to the largest magnitude of each output (its draws are stored
#: arrays, compared exactly). Loading iterates and samples nothing: the outputs are one pass of kernel
#: evaluations, Cholesky factorisations and triangular solves on the stored arrays, whose rounding a
#: backward-stable solve turns into a relative error of about kappa * eps, kappa the condition number of
#: the diagonally scaled matrix (Cholesky is invariant to diagonal scaling; Higham, Accuracy and Stability
#: of Numerical Algorithms, 2nd ed., Sec. 10.1). The worst kappa a prediction of these fixtures solves
#: with: GPBSVM-gibbs-theta-ard's average over its draws of kappa(K_s + 1e-6 I), 3.0e6, i.e. 6.7e-10
#: relative (next: LinearBSVM-em-gamma-prior's posterior precision, 1.4e6; GPBSVM-ecm-ard's scaled
#: I + S K S, 2.6e4); 1e-9 bounds them. Observed between an Intel Xeon and an AMD EPYC: up to 3e-14
#: (1.8e-12 relative in an entry near zero, hence relative to the scale of the output).
LOAD_RTOL = 1e-9

#: Refits: every floating-point output and posterior array within PROBE_FACTOR times the change that
#: PROBES perturbations of the inputs by one rounding (X and the test X times 1 +- eps of the fit's
#: precision, random signs; same seed) make to it, relative to its largest magnitude (at least eps). The
#: probe measures the fit's condition number as it runs, iteration, stopping rule and ill-conditioned
#: parts included: EM's predictive variance (weights 1 / |margin| at the margin points) moves 1e-7
#: relative per rounding where its mean moves 4e-15; a VB fit whose stopping test flips moves 2e-8; a
#: float32 fit 2e-6. Another machine rounds every operation differently rather than the input once; the
#: effects propagate alike and add, and PROBE_FACTOR bounds the sum: between the fixtures' Intel Xeon
#: and an AMD EPYC the differences were at most 8.7 times the largest response of 3 probes (46 cases;
#: up to 34 times a single probe's, hence 3).
PROBE_FACTOR = 100.0
PROBES = 3
#: A probe response above this (relative to the output's scale) means one rounding moved the fit to
#: another result: PROBE_FACTOR times it would accept a change of 1e-3 of the scale, no longer a check.
#: A float32 fit rounds 2^29 times more coarsely and is held to 1e-3 (its tolerance then stays below a
#: tenth of the scale): LinearBSVM-em-float32's intercept, a sum over the margin points, responds with
#: 1.3e-5, about 100 float32 roundings.
CHAOS_LIMIT = {"float64": 1e-5, "float32": 1e-3}

#: Refits whose draws one rounding of the inputs moves entirely, compared only on the platform that
#: wrote their expected arrays (skipped elsewhere). GPBSVM-nuts-theta: 10 NUTS draws whose probe
#: response is 1.5 of the outputs' scale (its accept decisions and trajectories change), so that its
#: draws of an Intel Xeon and an AMD EPYC differ entirely. GPBSVM-nuts: NUTS with 20 warm-up iterations
#: on the 48 latent values, whose transitions after warm-up nearly all diverge (19 of 20 under seeds 1
#: and 2); whether all 20 do, which the estimator refuses (DivergentSamplerError), depends on the last
#: bits: they do under seed 0 on an AMD EPYC, not on the machine that wrote the fixture.
#: FactorBSVM-gibbs-linear-two-stage: its second stage's slice moves (LinearBSVM's Gibbs) accept or shrink by
#: comparisons that one rounding flips, which moves its predictive variance by 2.1e-5 of its scale.
CHAOTIC_REFITS = ("GPBSVM-nuts", "GPBSVM-nuts-theta", "FactorBSVM-gibbs-linear-two-stage")

#: Refits compared with outputs and draws re-recorded by today's code (``--refit-reference``, in
#: ``refit.npz``) instead of those of the fixtures (their files still load as golden): NUTS turns the
#: last bits that a change of the code moves (the LAPACK lowering of the fits) into other accept
#: decisions, so its draws of 10 iterations differ entirely; the fits with ML-II (ECM, FITC, svi) take
#: other steps since ML-II moves log theta and the pseudo-inputs in units of the data's spread (fits that
#: do not depend on the units of X), and stop elsewhere after their few ML-II iterations. The Gibbs samplers
#: whose sweeps gained moves since the fixtures were written (the linear and Luts samplers' directional and
#: scale moves, GP Gibbs's elliptical moves of f, the projection's moves of [w; b], its bias shift and
#: the moves of the scales of A and [w; b] and its draw of (A, b) with the residuals held, the
#: factor model's moves of [beta, b], of f and of the factors' scales) draw
#: other chains of the same posterior (each kernel is checked against NUTS), and the projection's posterior
#: gained ``coef``: their refits, and that of the two-stage factor model whose second stage is LinearBSVM's
#: Gibbs, are compared with re-recorded ones.
GIBBS_WITH_MOVES = ("LinearBSVM-gibbs", "LinearBSVM-gibbs-gamma-prior", "LinearBSVM-gibbs-penalty",
                    "LinearBSVM-gibbs-laplace_zero", "LinearBSVM-gibbs-mixed", "LinearBSVM-gibbs-missing",
                    "LinearBSVM-gibbs-multiclass", "GPBSVM-gibbs", "GPBSVM-gibbs-theta", "GPBSVM-gibbs-theta-ard",
                    "FactorBSVM-gibbs-linear", "FactorBSVM-gibbs-linear-rho", "FactorBSVM-gibbs-gp",
                    "FactorBSVM-gibbs-linear-two-stage",
                    "MaxMarginProjection-linear", "MaxMarginProjection-rbf",
                    "MaxMarginProjection-rbf-spike-slab", "MaxMarginProjection-poly-random-basis",
                    "MaxMarginProjection-linear-multiclass")
REFIT_REFERENCE = ("GPBSVM-nuts-theta", "GPBSVM-ecm", "GPBSVM-ecm-ard", "GPBSVM-ecm-adam", "GPBSVM-fitc",
                   "GPBSVM-svi", "GPBSVM-ecm-multiclass", "GPBSVM-svi-multiclass", *GIBBS_WITH_MOVES)
REFIT_NPZ = SAVED_DIR / "refit.npz"
#: The key of refit.npz holding the platform fingerprint it was written on (JSON).
PLATFORM_KEY = "__platform__"


class Skipped(Exception):
    """A check that cannot be made on this machine (the report records it as skipped, with why)."""


def _is_float(a: Any) -> bool:
    return np.issubdtype(np.asarray(a).dtype, np.floating)


def _scale(a: Any) -> float:
    """The largest magnitude of an array (1 for an empty, all-NaN or all-zero one)."""
    a = np.asarray(a, dtype=np.float64)
    m = float(np.nanmax(np.abs(a))) if a.size and not np.all(np.isnan(a)) else 0.0
    return m if m > 0 else 1.0


def _assert_keys(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], what: str) -> None:
    assert sorted(got) == sorted(expected), f"{what}: outputs {sorted(got)}, golden {sorted(expected)}"
    for key in expected:
        g, e = np.asarray(got[key]), np.asarray(expected[key])
        assert g.shape == e.shape and g.dtype == e.dtype, (
            f"{what}: {key} has shape {g.shape} and dtype {g.dtype}, golden {e.shape} {e.dtype}")


def assert_same(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], what: str) -> None:
    """The same arrays: same keys, and per key the same shape, dtype and values, bit for bit."""
    _assert_keys(got, expected, what)
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{what}: {key}", strict=True)


def _ambiguous(decision: np.ndarray, tol: Any) -> np.ndarray:
    """Rows whose predicted label may flip within ``tol`` of the decision values: two classes, |d| <= tol;
    K classes, the largest two margins within the sum of their tolerances."""
    d = np.asarray(decision, dtype=np.float64)
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), d.shape)
    if d.ndim == 1:
        return np.abs(d) <= tol
    order = np.argsort(d, axis=1)
    rows = np.arange(d.shape[0])
    first, second = order[:, -1], order[:, -2]
    return d[rows, first] - d[rows, second] <= tol[rows, first] + tol[rows, second]


def assert_close(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], what: str,
                 atol: dict[str, float], why: str, decision: str) -> None:
    """Same keys, shapes and dtypes; each floating-point array within ``atol[key]`` of the golden one;
    the others exactly, except labels where the golden decision value (``expected[decision]``) is within
    its tolerance of the decision boundary."""
    _assert_keys(got, expected, what)
    for key in expected:
        g, e = np.asarray(got[key]), np.asarray(expected[key])
        if _is_float(e):
            np.testing.assert_allclose(g, e, rtol=0, atol=atol[key], equal_nan=True,
                                       err_msg=f"{what}: {key} ({why})")
            continue
        differ = g != e
        if decision in expected and differ.any():
            differ &= ~_ambiguous(expected[decision], atol[decision])
        assert not differ.any(), (f"{what}: {key} differs at rows {np.flatnonzero(differ).tolist()} "
                                  f"({g[differ].tolist()}, golden {e[differ].tolist()}), whose golden decision "
                                  "values are farther than their tolerance from the boundary")


def _fit_eps(record: dict[str, Any]) -> float:
    """The machine epsilon of the precision the case's fit computes in."""
    precision = from_json(record["kwargs"]).get("precision", "float64")
    return float(np.finfo(np.float32 if precision == "float32" else np.float64).eps)


def probe_tolerances(name: str, record: dict[str, Any], data: dict[str, Any],
                     got: dict[str, np.ndarray]) -> tuple[dict[str, float], dict[str, float]]:
    """The tolerance of every floating-point array of the refit ``got`` (:data:`PROBE_FACTOR`): the
    largest change, relative to its scale, that :data:`PROBES` refits on inputs perturbed by one rounding
    make to it, floored at eps. Returns the absolute tolerances and the relative responses."""
    eps = _fit_eps(record)
    rng = np.random.default_rng(20240607)
    response = {key: 0.0 for key, value in got.items() if _is_float(value)}
    for _ in range(PROBES):
        perturbed = dict(data)
        for key in {record["fit_X"], record["predict_X"]}:
            x = np.asarray(data[key], dtype=np.float64)
            perturbed[key] = x * (1.0 + eps * rng.choice([-1.0, 1.0], size=x.shape))
        probe = case_arrays(name, fit(record, perturbed), record, perturbed)
        for key in response:
            diff = np.abs(np.asarray(probe[key], np.float64) - np.asarray(got[key], np.float64))
            response[key] = max(response[key], float(np.nanmax(diff, initial=0.0)) / _scale(got[key]))
    rel = {key: max(r, eps) for key, r in response.items()}
    return {key: PROBE_FACTOR * r * _scale(got[key]) for key, r in rel.items()}, rel


def _recorded_platform(meta: dict[str, Any], reference: dict[str, np.ndarray] | None) -> dict | None:
    """The platform fingerprint the expected arrays were written on, where recorded."""
    if reference is not None:
        return json.loads(str(reference[PLATFORM_KEY])) if PLATFORM_KEY in reference else None
    return meta.get("environment", {}).get("platform")


# ----------------------------------------------------------------------------------------------- the checks
def check_saved(name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray], data: dict[str, Any]) -> None:
    """The stored ``<name>.bmm`` loads as the estimator of the case, with its constructor arguments,
    holds the draws exactly as golden (stored arrays, no arithmetic) and predicts as golden to
    :data:`LOAD_RTOL` of each output's scale."""
    import bayes_maxmargin

    record = meta["cases"][name]
    est = bayes_maxmargin.load(SAVED_DIR / f"{name}.bmm")
    assert type(est) is getattr(bayes_maxmargin, record["estimator"]), type(est)
    params = est.get_params()
    for key, value in from_json(record["kwargs"]).items():
        assert params[key] == value and type(params[key]) is type(value), f"{key}: {params[key]!r} != {value!r}"
    expected_outputs, expected_posterior = golden_arrays(arrays, name)
    atol = {key: LOAD_RTOL * _scale(value) for key, value in expected_outputs.items() if _is_float(value)}
    why = f"to {LOAD_RTOL:g} of its largest magnitude: one pass of linear algebra on the stored arrays"
    assert_close(outputs(est, record, data), expected_outputs, f"{name} outputs", atol, why, "decision_function")
    assert_same(posterior(est), expected_posterior, f"{name} posterior")


def check_refit(name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray], data: dict[str, Any]) -> None:
    """The case refitted from its golden.json entry gives the golden draws and outputs (those of
    ``refit.npz`` for :data:`REFIT_REFERENCE`) to the tolerances of :func:`probe_tolerances`; those of
    :data:`CHAOTIC_REFITS` bit for bit on the platform that wrote them (:class:`Skipped` elsewhere)."""
    reference = None
    if name in REFIT_REFERENCE:
        with np.load(REFIT_NPZ, allow_pickle=False) as f:
            reference = {k: f[k] for k in f.files}
    expected = {k: v for k, v in (arrays if reference is None else reference).items() if k.startswith(f"{name}/")}
    record = meta["cases"][name]
    here = platform_fingerprint()
    if name in CHAOTIC_REFITS:
        recorded = _recorded_platform(meta, reference)
        if recorded != here:
            raise Skipped(f"{name}: one rounding sends this short sampler run down another path (CHAOTIC_REFITS "
                          f"in tests/data/make_golden.py), so its draws are compared bit for bit only on the "
                          f"platform that wrote them, {recorded or 'not recorded'}; this is {here}")
        assert_same(case_arrays(name, fit(record, data), record, data), expected, f"{name} (on {here})")
        return
    got = case_arrays(name, fit(record, data), record, data)
    _assert_keys(got, expected, name)
    atol, rel = probe_tolerances(name, record, data, got)
    worst = max(rel, key=rel.get)
    limit = CHAOS_LIMIT[from_json(record["kwargs"]).get("precision", "float64")]
    assert rel[worst] <= limit, (
        f"{name}: one rounding of the inputs moves {worst} by {rel[worst]:.1e} of its scale (> CHAOS_LIMIT = "
        f"{limit:g}): this refit cannot be compared across machines to a tolerance; list it in "
        "CHAOTIC_REFITS (compared on its own platform only) or make its run long enough to settle")
    why = (f"within {PROBE_FACTOR:g} x the change one rounding of the inputs makes, relative to the "
           f"largest magnitude; that change is at most {rel[worst]:.1e}, of {worst}")
    assert_close(got, expected, name, atol, why, f"{name}/decision_function")


def write_refit_reference() -> None:
    """Refit the cases of :data:`REFIT_REFERENCE` and write their outputs and draws to ``refit.npz``,
    with the platform fingerprint (:data:`PLATFORM_KEY`)."""
    configure_like_tests()
    meta, _ = load_golden()
    data = datasets()
    arrays = {PLATFORM_KEY: np.array(json.dumps(platform_fingerprint()))}
    for name in REFIT_REFERENCE:
        record = meta["cases"][name]
        arrays.update(case_arrays(name, fit(record, data), record, data))
    np.savez_compressed(REFIT_NPZ, **arrays)
    print(f"{len(REFIT_REFERENCE)} refit references in {REFIT_NPZ}")


CHECKS = {"load": check_saved, "refit": check_refit}


def run_checks(keys: list[str], report: Path) -> None:
    """Run the checks ``kind:NAME`` (kind ``load`` or ``refit``) in this process, writing after each
    one to ``report`` (JSON) ``{key: {"ok": bool, "skipped": bool, "message": str, "seconds": float}}``
    (``skipped``: a check this machine cannot make, :class:`Skipped`; ``message`` says why)."""
    import traceback

    configure_like_tests()
    meta, arrays = load_golden()
    data = datasets()
    results: dict[str, Any] = {}
    for key in keys:
        kind, _, name = key.partition(":")
        start = time.perf_counter()
        skipped = False
        try:
            CHECKS[kind](name, meta, arrays, data)
            ok, message = True, ""
        except Skipped as why:
            ok, message, skipped = True, str(why), True
        except AssertionError as err:
            ok, message = False, f"{key}: {err}"
        except Exception:  # noqa: BLE001 - reported to the test of this key
            ok, message = False, f"{key}:\n{traceback.format_exc()}"
        results[key] = dict(ok=ok, skipped=skipped, message=message, seconds=round(time.perf_counter() - start, 2))
        report.write_text(json.dumps(results, indent=1), encoding="utf-8")
        status = "skipped" if skipped else "ok" if ok else "FAILED"
        print(f"{key}: {status} ({results[key]['seconds']} s)", flush=True)


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
