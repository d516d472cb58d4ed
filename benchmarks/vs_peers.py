"""GPBSVM and LinearBSVM side by side with the classifiers users already pick, in one run.

Data (``--suite``, :mod:`_suite`): ``nine`` (the default) is the Raetsch benchmark sets of
``BMM_DATA_DIR`` (breast_cancer, diabetis, flare_solar, german, heart, splice, waveform, ringnorm)
and two half moons (``sklearn.datasets.make_moons``, 2000 rows, noise 0.3), 5 splits each. ``all``
is the broad benchmark that ``GPBSVM()``'s defaults are chosen on, so that they do not fit a few
sets: every binary set of ``BMM_DATA_DIR`` (but pima, a copy of diabetis, and dorothea, whose
88 119 sparse columns cost minutes per fit), scikit-learn's breast cancer (``wdbc``), synthetic sets
(half moons, circles, XOR with four irrelevant features, and ``make_classification`` with 30 of 40
features informative in three clusters per class, with 5 of 50 informative, and with one class in
ten), binary "class vs rest" tasks of the multi-class sets (dna, satimage, usps, isolet, digits,
iris, wine: every class of a set of up to three classes, else the largest one, so that no set
outweighs the others; and digits odd vs even), and those seven sets as multi-class problems, fitted
by each model's own multi-class mode (GPBSVM's and GPC's one-vs-rest, SVC's one-vs-one with Platt
scaling per class, LogisticRegression's multinomial; GPJax's SVGP here is binary only): 47 tasks
when ``BMM_DATA_DIR`` holds every set (``--list`` prints them). ``--suite all`` runs 20 splits per
task, 10 above 3000 training rows (``--splits``, ``--splits-large``), the models ``gpbsvm gpjax gpc
svc_platt logreg``, GPC only up to ``--gpc-max-train`` (2000) training rows (its ML-II costs
O(N^3) per step; so do our full-GP fits ``ecm``, ``ecm_ard``, ``ecm_evidence``, ``vi`` and ``gibbs``, which
run on the same tasks), and fits the scikit-learn models once (``--refit jax``: they compile nothing, so their
second fit time is their first's); the rest is as for ``nine``.

Each set is split ``--splits`` times (seeds 0, 1, ...) into stratified 70 % / 30 % parts
(:func:`bayes_maxmargin.data.splits.train_test_split_stratified`), missing cells (acath's
cholesterol) filled with the training part's medians plus a missing-indicator column
(``SimpleImputer(add_indicator=True)``), the features standardised on the training part
(``StandardScaler``).

Models (``--models``, all by default):

* ``gpbsvm``: ``GPBSVM()`` at its defaults (ECM with the cross-fitted link up to 300 training rows, svi
  above; each row's ``inference``); ``gpbsvm_phi``: the same with the papers' predictive
  Phi(f) (``calibrate=False``); ``ecm``, ``fitc``, ``svi``, ``vi``, ``gibbs``:
  ``GPBSVM(inference=...)``, otherwise at the defaults; ``ecm_ard``, ``svi_ard``: the same with
  ``kernel="ard"``; ``ecm_evidence``: ECM with ``mlii_criterion="evidence"`` (eq. 9, not ECM's default),
  ``fitc_loo``: FITC with ``mlii_criterion="loo"`` (not FITC's default); ``linear``:
  ``LinearBSVM()``.
* ``gpjax``: GPJax's sparse variational GP classifier (optional; GPJax 1.0.0 requires jax < 0.11, so
  it runs in its own environment, in a subprocess of ``--gpjax-python`` (default: ``BMM_GPJAX_PYTHON``,
  else this interpreter if gpjax is installed in it), :mod:`_gpjax_worker`; make that environment with
  ``python3.12 -m venv venvgpjax && venvgpjax/bin/pip install "gpjax==1.0.0" "jax<0.11" scikit-learn``):
  Bernoulli likelihood with probit link, ARD RBF kernel (every
  length-scale starting at the median distance between training points over sqrt 2, i.e. the same
  kernel as GPBSVM's start), zero mean, 64 inducing points initialised by k-means,
  ``WhitenedVariationalGaussian``, the negative ``gpx.objectives.elbo`` minimised by ``gpx.fit`` with
  Adam (``--gpjax-lr``), the same number of steps and batch size as ``GPBSVM()`` (20 epochs of
  minibatches of 100, at least 250 steps with its RBF kernel below 600 rows and 1000 with its ARD
  kernel from 600 rows, at most 100 000; :func:`svi_default_steps`); float64, the fit jitted once per
  shape (``equinox.filter_jit``) in the worker, which lives for the whole run, so that a second fit
  reuses the program; the times are the worker's own (k-means and the fit) plus the median distance.
* ``gpc``: ``GaussianProcessClassifier(ConstantKernel() * RBF())`` (amplitude and length-scale by ML-II).
* ``svc_platt``: ``SVC`` with C and gamma chosen by ``GridSearchCV`` (3 folds, accuracy) over
  C in {0.1, 1, 10} and gamma in {0.25, 1, 4} / d, then ``CalibratedClassifierCV(method="sigmoid",
  ensemble=False)`` of the chosen SVC; the time is both steps together.
* ``logreg``: ``LogisticRegression()``.

A peer that is not installed is skipped with a printed note. Metrics on the test part (from
:mod:`bayes_maxmargin.metrics`): error, Brier score and log loss of P(y = +1), top-label ECE (10
bins); ``first_fit_s``: a fresh estimator with JAX's in-memory compilation caches cleared
(``jax.clear_caches()``) first, so compilation is included (a persistent cache set through
``JAX_COMPILATION_CACHE_DIR`` still applies); ``second_fit_s``: a second fresh estimator of the same
configuration on the same data, reusing the compiled programs; ``warnings``: up to 5 distinct
warnings the fits raised (e.g. a ConvergenceWarning), in the JSON. A multi-class task scores the
most probable class and all class probabilities (:func:`_suite.scores_multiclass`). One table per
data set (means over the splits, error with its standard deviation), then ``gpbsvm``'s mean error,
Brier score, log loss and ECE over the best peer's (the lowest mean of GPC, GPJax, SVC + Platt, of
those that ran: a peer skipped on a task, e.g. GPC above ``--gpc-max-train`` rows, is named in the
table's ``without`` column and in ``skipped_runs``) with a 90 % paired t-interval over the splits
(:func:`ratios_to_best_peer`, ``ratios`` in the JSON), their geometric means over the tasks, and
``gpbsvm``'s first and second fit times over GPJax's and GPC's (:func:`time_ratios`,
``time_ratios``).

Threads: every model runs with ``--threads`` (1) BLAS / OpenMP threads: run as a script, the
script sets ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``XLA_FLAGS``
(``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=N`` for N = 1) before numpy and
JAX are imported, and limits the loaded pools again with threadpoolctl (GPBSVM's svi fit keeps
OpenBLAS at one thread itself); the GPJax worker starts with the same variables (:func:`thread_env`);
the JSON records them, the worker's (``versions["gpjax_worker"]``) and the load average (``uptime``)
at the start and end and ``load1`` per row.

Resuming: every (task, split, model) row is appended to ``<result name>.rows.jsonl`` beside the
JSON as soon as it is done (a fit that raises is recorded with its message, in ``failed_runs``, and
the run goes on). ``--resume`` reads that file and runs only what is missing (the rows'
``quick`` and ``threads`` must match); without it the file is started afresh. The full
``--suite all`` takes days of one core: run it as ``nice python benchmarks/vs_peers.py --suite all --tag all``
and, after an interruption, the same with ``--resume``. ``--report`` fits nothing: it prints the
tables and writes the JSON from the rows file as it stands (e.g. while a run goes on).

``--susy N [N ...]``: the scaling run instead of the tables, on ``load_dataset("susy_synthetic",
n=N, random_state=0)`` with a held-out set of ``--susy-test`` rows (``random_state=1``), standardised
on the training rows: ``GPBSVM(inference="svi")`` at its defaults against the GPJax classifier above,
the held-out error recorded about ``--susy-records`` times along the steps (GPBSVM: its run cut into
that many compiled chunks, the state kept after each; GPJax: that many equal chunks of Adam steps, each
the step of ``gpx.fit``, the optimiser state carried over); scoring time is not counted. Reported:
the final error and the time until the error first came within 0.5 points of it (k-means and
compilation included). The sizes of interest are 20 000 and 200 000.

Writes ``benchmarks/results/vs_peers.json`` (or ``vs_peers_susy.json``; ``_quick`` with ``--quick``,
``_<tag>`` with ``--tag``).

    python benchmarks/vs_peers.py [--quick] [--datasets heart moons] [--splits 5] [--models gpbsvm gpc]
    python benchmarks/vs_peers.py --suite all --tag all [--resume | --report] [--threads 1]
    python benchmarks/vs_peers.py --suite all --list
    python benchmarks/vs_peers.py --susy 20000 200000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

#: XLA's flags for one thread (see the module docstring)
XLA_ONE_THREAD = ("--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1")


def threads_from_argv(argv: list[str]) -> int:
    """The ``--threads`` value of a command line (1 when absent), read before argparse runs so
    that the thread settings precede the imports of numpy and JAX."""
    for i, a in enumerate(argv):
        value = argv[i + 1] if a == "--threads" and i + 1 < len(argv) else a[10:] if a.startswith("--threads=") else ""
        if value.isdigit():
            return int(value)
    return 1  # absent or malformed: argparse reports the latter


def thread_env(n: int, base: dict[str, str]) -> dict[str, str]:
    """``base`` with BLAS and OpenMP pools of ``n`` threads, and XLA's one-thread flags
    (:data:`XLA_ONE_THREAD`) when ``n == 1`` (the other flags of ``XLA_FLAGS`` kept)."""
    env = {**base, **{v: str(n) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                          "VECLIB_MAXIMUM_THREADS")}}
    if n == 1:
        flags = env.get("XLA_FLAGS", "").split()
        kept = [f for f in flags if f.split("=")[0] not in {x.split("=")[0] for x in XLA_ONE_THREAD}]
        env["XLA_FLAGS"] = " ".join([*kept, *XLA_ONE_THREAD])
    return env


def set_thread_env(n: int) -> None:
    """:func:`thread_env` in ``os.environ``; effective only before numpy and JAX are imported."""
    os.environ.update(thread_env(n, dict(os.environ)))


if __name__ == "__main__":
    set_thread_env(threads_from_argv(sys.argv[1:]))

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

GP_INFERENCES = ("ecm", "fitc", "svi", "vi", "gibbs")
#: GPBSVM(inference=...) with one setting off its default: (inference, setting). The ARD kernel (one
#: length-scale per feature, learnt by ML-II) by ECM and by svi; svi with the isotropic RBF kernel at any size
#: (the default's ARD + Constant from 600 rows on); ECM and FITC with the ML-II criterion that is not their
#: default; ECM and svi with the link learnt from refits on five folds.
GP_VARIANTS = {"ecm_ard": ("ecm", {"kernel": "ard"}), "svi_ard": ("svi", {"kernel": "ard"}),
               "svi_rbf": ("svi", {"kernel": "rbf"}), "ecm_evidence": ("ecm", {"mlii_criterion": "evidence"}),
               "fitc_loo": ("fitc", {"mlii_criterion": "loo"}), "ecm_cv": ("ecm", {"calibrate": "cv"}),
               "svi_cv": ("svi", {"calibrate": "cv"})}
#: Our full-GP fits (O(N^3) per step like GPC), run only where GPC runs.
FULL_GP = ("ecm", "ecm_ard", "ecm_evidence", "ecm_cv", "vi", "gibbs")
MODELS = ("gpbsvm", "gpbsvm_phi", *GP_INFERENCES, *GP_VARIANTS, "linear", "gpjax", "gpc", "svc_platt",
          "logreg")
METRICS = ("error", "brier", "log_loss", "ece", "first_fit_s", "second_fit_s")
GPJAX_INDUCING = 64
#: the peers that ``GPBSVM()`` is compared with (:func:`ratios_to_best_peer`)
PEERS = ("gpc", "gpjax", "svc_platt")
#: the metrics of :func:`ratios_to_best_peer`, and the fit times of :func:`time_ratios` with their peers
QUALITY = ("error", "brier", "log_loss", "ece")
TIMES, TIME_PEERS = ("first_fit_s", "second_fit_s"), ("gpjax", "gpc")
#: ``--suite all``: the default models, GPC's largest training part and the splits above LARGE_ROWS rows
SUITE_MODELS = ("gpbsvm", "gpjax", "gpc", "svc_platt", "logreg")
GPC_MAX_TRAIN, SPLITS_ALL, SPLITS_LARGE, LARGE_ROWS = 2000, 20, 10, 3000
#: models whose fits compile nothing (``--refit jax`` fits them once)
SKLEARN_MODELS = ("gpc", "svc_platt", "logreg")
#: within this many error points of the final error counts as reached (the SUSY-like run)
SUSY_TOL = 0.005

#: ``--quick``: small settings of every fit, for the smoke test
QUICK_GP = {"ecm": dict(max_iter=20, mlii_every=10),
            "fitc": dict(max_iter=20, mlii_every=10, num_inducing=16), "svi": dict(max_iter=60, num_inducing=16),
            "vi": dict(max_iter=20), "gibbs": dict(num_samples=20, num_warmup=20, num_chains=1)}
QUICK_LINEAR = dict(num_samples=50, num_warmup=50, num_chains=1)


def svi_default_steps(n: int, d: int, batch_size: int = 100) -> int:
    """The number of steps of ``GPBSVM()`` (svi at ``max_iter=None``) on ``n`` rows of ``d`` features:
    :func:`~bayes_maxmargin.estimators.gp.default_svi_steps` with the numbers ML-II learns in its default
    kernel (RBF: 2, ARD + Constant from 600 rows: d + 2)."""
    from bayes_maxmargin.core.kernels import as_kernel
    from bayes_maxmargin.core.parameters import to_unconstrained
    from bayes_maxmargin.estimators.gp import default_kernel, default_svi_steps

    params = as_kernel(default_kernel("svi", n)).init_params(np.zeros((1, d)))
    n_kernel = sum(np.size(v) for v in to_unconstrained(params).values())
    return default_svi_steps(n, batch_size, n_kernel)


#: how to make GPJax's environment (:mod:`_gpjax_worker`)
GPJAX_SETUP = ('GPJax 1.0.0 needs jax < 0.11: python3.12 -m venv venvgpjax && venvgpjax/bin/pip install '
               '"gpjax==1.0.0" "jax<0.11" scikit-learn, then --gpjax-python venvgpjax/bin/python '
               '(or BMM_GPJAX_PYTHON=venvgpjax/bin/python)')
#: the GPJax worker of the run (:func:`start_gpjax`; None: not started or not available)
GPJAX_WORKER: Any = None


def gpjax_python(option: str | None, environ: dict[str, str]) -> str | None:
    """The interpreter of the GPJax worker: ``option`` (``--gpjax-python``), else ``BMM_GPJAX_PYTHON``,
    else this one if gpjax is installed here, else None."""
    import importlib.util

    return option or environ.get("BMM_GPJAX_PYTHON") or (sys.executable if importlib.util.find_spec("gpjax")
                                                         else None)


def start_gpjax(python: str | None, threads: int) -> tuple[Any, str | dict[str, Any]]:
    """The GPJax worker on ``python`` with the thread settings of ``threads`` (:func:`thread_env`) and
    its ``hello`` (versions, threads); or None and the note why its runs are skipped."""
    from _gpjax_worker import start

    if python is None:
        why = "not installed here, and neither --gpjax-python nor BMM_GPJAX_PYTHON is set"
    else:
        try:
            return start(python, thread_env(threads, dict(os.environ)))
        except RuntimeError as exc:
            why = str(exc)
    return None, f"note: gpjax is not available ({why}); its runs are skipped. {GPJAX_SETUP}"


# ---------------------------------------------------------------------------
# GPJax's sparse variational GP classifier (fitted in the worker, :mod:`_gpjax_worker`)
# ---------------------------------------------------------------------------


class GPJaxSVGP:
    """GPJax's SVGP classifier behind ``fit`` / ``predict_proba`` (labels -1 / +1; see the module
    docstring for the configuration), fitted in ``worker`` (default: :data:`GPJAX_WORKER`).
    ``num_steps=None``: GPBSVM's svi default for the data size. ``fit_seconds_``: the worker's time
    of the fit plus the median distance's here."""

    def __init__(self, num_steps: int | None = None, batch_size: int = 100, num_inducing: int = GPJAX_INDUCING,
                 learning_rate: float = 0.01, random_state: int = 0, worker: Any = None) -> None:
        self.num_steps, self.batch_size, self.num_inducing = num_steps, batch_size, num_inducing
        self.learning_rate, self.random_state, self.worker = learning_rate, random_state, worker

    def running_worker(self) -> Any:
        worker = self.worker or GPJAX_WORKER
        if worker is None:
            raise RuntimeError(f"no GPJax worker is running. {GPJAX_SETUP}")
        return worker

    def config(self, X: np.ndarray) -> tuple[dict[str, Any], float]:
        """The worker's configuration for ``X`` (:mod:`_gpjax_worker`) and the seconds of its
        length-scale: the median distance between training points over sqrt 2."""
        from bayes_maxmargin.experiments.henao2014 import median_distance

        n, d = X.shape
        t0 = time.perf_counter()
        ell0 = median_distance(X, 1000, self.random_state) / np.sqrt(2.0)  # exp(-r^2/theta^2) = exp(-r^2/(2 l^2))
        seconds = time.perf_counter() - t0
        return {"lengthscale": ell0, "num_steps": self.num_steps or svi_default_steps(n, d, self.batch_size),
                "batch_size": min(self.batch_size, n), "num_inducing": self.num_inducing,
                "learning_rate": self.learning_rate, "random_state": self.random_state}, seconds

    def fit(self, X: np.ndarray, y: np.ndarray) -> "GPJaxSVGP":
        worker, X = self.running_worker(), np.asarray(X, np.float64)
        cfg, seconds = self.config(X)
        reply, _ = worker.request({"op": "fit", **cfg}, X=X, y=np.asarray(y))
        for category, message in reply["warnings"]:  # as raised in the worker, for the row's warnings
            warnings.warn(message, type(category, (UserWarning,), {}), stacklevel=2)
        self.id_, self.fit_seconds_ = reply["id"], seconds + reply["fit_s"]
        self.n_iter_, self.classes_ = reply["n_iter"], np.array([-1, 1])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        _, out = self.running_worker().request({"op": "predict", "id": self.id_}, X=np.asarray(X, np.float64))
        return np.column_stack([1.0 - out["p"], out["p"]])


# ---------------------------------------------------------------------------
# SVC + Platt scaling with a small grid
# ---------------------------------------------------------------------------


class PlattSVC:
    """``GridSearchCV(SVC())`` over C and gamma (3 folds), then ``CalibratedClassifierCV(method=
    "sigmoid", ensemble=False)`` of the chosen SVC."""

    def __init__(self, random_state: int = 0) -> None:
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> "PlattSVC":
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        d = X.shape[1]
        grid = {"C": [0.1, 1.0, 10.0], "gamma": [0.25 / d, 1.0 / d, 4.0 / d]}
        search = GridSearchCV(SVC(), grid, cv=3).fit(X, y)
        self.best_params_ = search.best_params_
        self.model_ = CalibratedClassifierCV(SVC(**search.best_params_), method="sigmoid", ensemble=False).fit(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.model_.predict_proba(X)


# ---------------------------------------------------------------------------
# the side-by-side tables
# ---------------------------------------------------------------------------


def make_model(name: str, seed: int, quick: bool) -> Any:
    """A fresh estimator for model ``name`` (see :data:`MODELS`)."""
    from bayes_maxmargin import GPBSVM, LinearBSVM

    if name in ("gpbsvm", "gpbsvm_phi"):
        return GPBSVM(progress_bar=False, random_state=seed, calibrate=None if name == "gpbsvm" else False,
                      **(QUICK_GP["svi"] if quick else {}))  # ECM or svi: GPBSVM()'s choice
    if name in GP_INFERENCES:
        return GPBSVM(inference=name, progress_bar=False, random_state=seed, **(QUICK_GP[name] if quick else {}))
    if name in GP_VARIANTS:
        inference, setting = GP_VARIANTS[name]
        return GPBSVM(inference=inference, progress_bar=False, random_state=seed, **setting,
                      **(QUICK_GP[inference] if quick else {}))
    if name == "linear":
        return LinearBSVM(progress_bar=False, random_state=seed, **(QUICK_LINEAR if quick else {}))
    if name == "gpjax":
        return GPJaxSVGP(num_steps=QUICK_GP["svi"]["max_iter"] if quick else None, random_state=seed)
    if name == "gpc":
        from sklearn.gaussian_process import GaussianProcessClassifier
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel

        return GaussianProcessClassifier(ConstantKernel() * RBF(), random_state=seed)
    if name == "svc_platt":
        return PlattSVC(random_state=seed)
    if name == "logreg":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression()
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


def scores(y: np.ndarray, proba_pos: np.ndarray) -> dict[str, float]:
    """Error (label +1 where P(y = +1) > 0.5), Brier score, log loss and top-label ECE."""
    from bayes_maxmargin.metrics import brier_score, error_rate, expected_calibration_error, log_loss

    pred = np.where(proba_pos > 0.5, 1, -1)
    return {"error": error_rate(y, pred), "brier": brier_score(y, proba_pos, 1),
            "log_loss": log_loss(y, proba_pos, 1), "ece": expected_calibration_error(y, proba_pos, 1)}


def _timed_fit(make: Callable[[], Any], X: np.ndarray, y: np.ndarray) -> tuple[Any, float]:
    """A fresh estimator fitted, and the seconds of its fit (its own ``fit_seconds_`` if it times itself)."""
    est = make()
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    return est, getattr(est, "fit_seconds_", seconds)


def run_model(name: str, seed: int, quick: bool, Xtr, ytr, Xte, yte, refit: bool = True) -> dict[str, Any]:
    """First fit (caches cleared), second fit of the same configuration (``refit=False``: none, its
time is the first's), scores of the last (binary: of P(y = +1); more classes:
:func:`_suite.scores_multiclass`), and up to 5 distinct warnings the fits and the prediction raised
(e.g. a ConvergenceWarning)."""
    import jax
    from _suite import scores_multiclass

    make = lambda: make_model(name, seed, quick)  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.clear_caches()
        if name == "gpjax" and GPJAX_WORKER is not None:
            GPJAX_WORKER.request({"op": "clear_caches"})  # the worker's, as here
        est, first = _timed_fit(make, Xtr, ytr)
        est, second = _timed_fit(make, Xtr, ytr) if refit else (est, first)
        proba = est.predict_proba(Xte)
    multiclass = len(est.classes_) > 2
    quality = (scores_multiclass(yte, proba, est.classes_) if multiclass
               else scores(yte, proba[:, list(est.classes_).index(1)]))
    row = {"model": name, **quality, "first_fit_s": first, "second_fit_s": second,
           "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught})[:5]}
    if not refit:
        row["refit"] = False
    if hasattr(est, "n_iter_"):
        row["n_iter"] = int(np.max(est.n_iter_))
    if hasattr(est, "inference_"):  # GPBSVM: the inference method fitted (inference=None: its choice)
        row["inference"] = est.inference_
    return row


def load(name: str, quick: bool) -> tuple[np.ndarray, np.ndarray]:
    """Features and +1 / -1 labels of a set of ``--suite nine`` (:func:`_suite.task_data`)."""
    from _suite import Task, task_data

    return task_data(Task(name, name, "binary"), quick)


def split(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    """Stratified 70/30 split, missing cells (NaN) filled with the training part's medians plus one
    missing-indicator column per such column, features standardised on the training part."""
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import StandardScaler

    from bayes_maxmargin.data.splits import train_test_split_stratified

    Xtr, Xte, ytr, yte = train_test_split_stratified(X, y, test_size=0.3, random_state=seed)
    if np.isnan(X).any():
        imputer = SimpleImputer(strategy="median", add_indicator=True).fit(Xtr)
        Xtr, Xte = imputer.transform(Xtr), imputer.transform(Xte)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per data set and model: means of :data:`METRICS` over the splits, and the sd of the error."""
    out = []
    for ds, model in dict.fromkeys((r["dataset"], r["model"]) for r in rows):
        group = [r for r in rows if r["dataset"] == ds and r["model"] == model]
        s = {"dataset": ds, "model": model, "splits": len(group), "n_train": group[0]["n_train"]}
        for k in METRICS:
            s[k] = float(np.mean([r[k] for r in group]))
        s["error_sd"] = float(np.std([r["error"] for r in group], ddof=1)) if len(group) > 1 else 0.0
        out.append(s)
    return out


def paired_ratio(ours: np.ndarray, theirs: np.ndarray, level: float = 0.9) -> tuple[float, Any, Any]:
    """``mean(ours) / mean(theirs)`` with a paired Student-t interval (``level``): the interval of
    the mean of the per-split differences, divided by ``mean(theirs)`` and shifted by 1, i.e. how far
    the ratio may move with other splits of the same data. One split gives no interval (None, None).
    ``mean(theirs) == 0``: 1 (interval (1, 1)) when ``ours`` is 0 too, else inf without interval.

    Examples
    --------
    >>> r, low, high = paired_ratio(np.array([0.22, 0.24, 0.20]), np.array([0.20, 0.20, 0.20]))
    >>> round(r, 3), round(low, 3), round(high, 3)
    (1.1, 0.931, 1.269)
    """
    from scipy import stats

    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    n, base = len(ours), float(np.mean(theirs))
    if base == 0.0:
        same = not np.any(ours)
        return (1.0, *((1.0, 1.0) if n > 1 else (None, None))) if same else (float("inf"), None, None)
    diff = ours - theirs
    ratio = float(ours.mean() / base)
    if n < 2:
        return ratio, None, None
    half = stats.t.ppf((1 + level) / 2, n - 1) * np.std(diff, ddof=1) / np.sqrt(n)
    return ratio, float(1 + (diff.mean() - half) / base), float(1 + (diff.mean() + half) / base)


def _by_split(rows: list[dict[str, Any]], models: tuple[str, ...]) -> dict[str, dict[str, dict[int, dict]]]:
    """{data set: {model: {split: row}}} of the rows of ``models``."""
    out: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for r in rows:
        if r["model"] in models:
            out.setdefault(r["dataset"], {}).setdefault(r["model"], {})[r["split"]] = r
    return out


def ratios_to_best_peer(rows: list[dict[str, Any]], metrics: tuple[str, ...] = QUALITY,
                        model: str = "gpbsvm", peers: tuple[str, ...] = PEERS, level: float = 0.9,
                        skipped: dict[tuple[str, str], str] | None = None) -> list[dict[str, Any]]:
    """Per data set and metric: ``model``'s mean over the splits divided by the lowest mean of the
    ``peers`` present, with a paired t-interval of that ratio (:func:`paired_ratio`).

    Only splits where every model was fitted count; a data set without ``model`` or without a peer is
    left out. ``without`` names the peers that did not run on the data set, with the reason from
    ``skipped`` ({(data set, model): reason}) or "not run": the ratio is then to the best of the others.

    Examples
    --------
    >>> rows = [{"dataset": "d", "split": s, "model": m, "error": e}
    ...         for s, (a, b) in enumerate([(0.22, 0.20), (0.24, 0.20), (0.20, 0.20)])
    ...         for m, e in (("gpbsvm", a), ("gpc", b))]
    >>> r = ratios_to_best_peer(rows, ("error",))[0]
    >>> round(r["ratio"], 3), r["best_peer"], r["splits"], round(r["low"], 3), round(r["high"], 3)
    (1.1, 'gpc', 3, 0.931, 1.269)
    >>> r["without"]
    {'gpjax': 'not run', 'svc_platt': 'not run'}
    """
    out = []
    for ds, by in _by_split(rows, (model, *peers)).items():
        present = [p for p in peers if p in by]
        if model not in by or not present:
            continue
        without = {p: (skipped or {}).get((ds, p), "not run") for p in peers if p not in by}
        splits = sorted(set.intersection(*(set(by[m]) for m in [model, *present])))
        for metric in metrics:
            ours = np.array([by[model][s][metric] for s in splits])
            means = {p: np.mean([by[p][s][metric] for s in splits]) for p in present}
            best = min(present, key=means.get)
            ratio, low, high = paired_ratio(ours, np.array([by[best][s][metric] for s in splits]), level)
            out.append({"dataset": ds, "metric": metric, "ratio": ratio, "best_peer": best, "low": low,
                        "high": high, "splits": len(splits), "without": without})
    return out


def time_ratios(rows: list[dict[str, Any]], metrics: tuple[str, ...] = TIMES, model: str = "gpbsvm",
                peers: tuple[str, ...] = TIME_PEERS, level: float = 0.9) -> list[dict[str, Any]]:
    """Per data set, peer and fit time: ``model``'s mean time over the peer's on the splits both
    have, with its paired interval (:func:`paired_ratio`); pairs that did not both run are left out."""
    out = []
    for ds, by in _by_split(rows, (model, *peers)).items():
        for peer in (p for p in peers if model in by and p in by):
            splits = sorted(set(by[model]) & set(by[peer]))
            for metric in metrics:
                ratio, low, high = paired_ratio(np.array([by[model][s][metric] for s in splits]),
                                                np.array([by[peer][s][metric] for s in splits]), level)
                out.append({"dataset": ds, "peer": peer, "metric": metric, "ratio": ratio, "low": low,
                            "high": high, "splits": len(splits)})
    return out


#: The targets of the broad benchmark: on every task the upper end of the 90 % interval of the ratio to the
#: best peer at most HIGH_BOUND, and the ratio itself at most MEAN_BOUND on most tasks.
HIGH_BOUND, MEAN_BOUND = 1.10, 1.05


def targets_met(rows: list[dict[str, Any]], metrics: tuple[str, ...] = ("error", "brier"),
                models: tuple[str, ...] = ("gpbsvm", *PEERS)) -> list[dict[str, Any]]:
    """Per model and metric: on how many tasks its ratio to the best of the *other* peers meets
    :data:`HIGH_BOUND` (the interval's upper end) and :data:`MEAN_BOUND` (the ratio), out of the tasks where
    it has such a ratio. Each peer measured the same way as ``gpbsvm`` tells how hard the targets are.

    Examples
    --------
    >>> rows = [{"dataset": "d", "split": s, "model": m, "error": e}
    ...         for s, (a, b) in enumerate([(0.22, 0.20), (0.24, 0.20), (0.20, 0.20)])
    ...         for m, e in (("gpbsvm", a), ("gpc", b))]
    >>> [(r["model"], r["high_met"], r["mean_met"], r["tasks"]) for r in targets_met(rows, ("error",))]
    [('gpbsvm', 0, 0, 1), ('gpc', 0, 0, 0), ('gpjax', 0, 0, 0), ('svc_platt', 0, 0, 0)]
    """
    out = []
    for model in models:
        others = tuple(p for p in PEERS if p != model)
        ratios = ratios_to_best_peer(rows, metrics, model=model, peers=others)
        for metric in metrics:
            group = [r for r in ratios if r["metric"] == metric]
            out.append({"model": model, "metric": metric, "tasks": len(group),
                        "high_met": sum(r["high"] is not None and r["high"] <= HIGH_BOUND for r in group),
                        "mean_met": sum(r["ratio"] <= MEAN_BOUND for r in group)})
    return out


def geometric_means(ratios: list[dict[str, Any]], key: str = "metric") -> dict[str, dict[str, Any]]:
    """Per value of ``key``: the geometric mean of the finite positive ratios over the data sets,
    how many there are, and how many intervals lie wholly above 1 (worse) and below 1 (better).

    Examples
    --------
    >>> geometric_means([{"metric": "error", "ratio": 2.0, "low": 1.5, "high": 2.5},
    ...                  {"metric": "error", "ratio": 0.5, "low": 0.2, "high": 1.1}])
    {'error': {'geomean': 1.0, 'sets': 2, 'worse': 1, 'better': 0}}
    """
    out = {}
    for k in dict.fromkeys(r[key] for r in ratios):
        group = [r for r in ratios if r[key] == k]
        logs = [np.log(r["ratio"]) for r in group if 0 < r["ratio"] < np.inf]
        out[k] = {"geomean": float(np.exp(np.mean(logs))) if logs else None, "sets": len(logs),
                  "worse": sum(r["low"] is not None and r["low"] > 1 for r in group),
                  "better": sum(r["high"] is not None and r["high"] < 1 for r in group)}
    return out


def skip_reason(model: str, kind: str, n_train: int, gpc_max_train: int | None,
                gpjax_available: bool = True) -> str | None:
    """Why ``model`` does not run on a task of ``kind`` with ``n_train`` training rows (None: it runs)."""
    if model == "gpjax" and not gpjax_available:
        return "not available (--gpjax-python)"
    if model == "gpjax" and kind == "multiclass":
        return "binary only"
    full_gp = model in ("gpc", *FULL_GP)
    if full_gp and gpc_max_train is not None and n_train > gpc_max_train:
        return f"n_train {n_train} > --gpc-max-train {gpc_max_train}"
    return None


def read_rows(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The header and the rows of a rows file (see the module docstring); a line cut short by an
    interruption is dropped."""
    import json

    header, rows = None, []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "header" in item:
                header = item["header"]
            else:
                rows.append(item)
    return header, rows


def append_row(path: Path, item: dict[str, Any]) -> None:
    import json

    with path.open("a") as fh:
        fh.write(json.dumps(item, default=float) + "\n")


def _cell(r: dict[str, Any] | None, peer: bool = True) -> str:
    if r is None:
        return "-"
    text = f"{r['ratio']:.3f}" + (f" [{r['low']:.3f}, {r['high']:.3f}]" if r["low"] is not None else "")
    return text + (f" {r['best_peer']}" if peer else "")


def ratio_tables(tasks: list[dict[str, Any]], ratios: list[dict[str, Any]], times: list[dict[str, Any]],
                 met: list[dict[str, Any]] | None = None) -> str:
    """The markdown tables of the ratios (one row per task), their geometric means and ``met``
    (:func:`targets_met`)."""
    from _common import markdown_table

    find = {(r["dataset"], r["metric"]): r for r in ratios}
    find_t = {(r["dataset"], r["peer"], r["metric"]): r for r in times}
    names = {"error": "error", "brier": "Brier", "log_loss": "log loss", "ece": "ECE"}
    quality, timing = [], []
    for t in tasks:
        done = max((r["splits"] for r in ratios + times if r["dataset"] == t["name"]), default=t["splits"])
        label = f"{t['name']} ({t['n_train']}, {done})"  # the splits compared, fewer while a run goes on
        first = next((r for r in ratios if r["dataset"] == t["name"]), None)
        without = "; ".join(f"{p}: {why}" for p, why in (first or {}).get("without", {}).items())
        quality.append({"data (n train, splits)": label, **{names[m]: _cell(find.get((t["name"], m)))
                                                             for m in QUALITY}, "without": without or "-"})
        timing.append({"data (n train, splits)": label,
                       **{f"{'first' if m == TIMES[0] else 'second'} fit / {p}": _cell(find_t.get((t["name"], p, m)),
                                                                                       False)
                          for m in TIMES for p in TIME_PEERS}})
    means = [{"ratio": k, **v} for k, v in geometric_means(ratios).items()]
    means += [{"ratio": f"{m} / {p}", **v} for (m, p), v in geometric_means(
        [{**r, "pair": (r["metric"], r["peer"])} for r in times], "pair").items()]
    return "\n\n".join([
        f"## gpbsvm / the best of {', '.join(PEERS)} (90 % paired t-interval over the splits; best peer)",
        markdown_table(quality, list(quality[0])) if quality else "(none)",
        "## gpbsvm's fit time / the peer's (90 % paired t-interval over the splits)",
        markdown_table(timing, list(timing[0])) if timing else "(none)",
        "## geometric means of the ratios over the tasks (worse / better: intervals wholly above / below 1)",
        markdown_table(means, ["ratio", "geomean", "sets", "worse", "better"]) if means else "(none)",
        f"## tasks where each model's ratio to the best of the other peers has its upper 90 % bound at most "
        f"{HIGH_BOUND} (high_met) and is itself at most {MEAN_BOUND} (mean_met)",
        markdown_table(met, ["model", "metric", "tasks", "high_met", "mean_met"]) if met else "(none)"])


def run_tables(args: argparse.Namespace) -> dict[str, Any]:
    from _common import markdown_table
    from _suite import n_splits, task_data

    gpjax_available = args.report or GPJAX_WORKER is not None  # --report: the rows say what ran
    models = [m for m in args.models if m != "gpjax" or gpjax_available]
    header = {"quick": args.quick, "threads": args.threads}
    old_header, rows = read_rows(args.rows_file) if args.resume else (None, [])
    if args.resume and old_header not in (None, header):
        raise SystemExit(f"--resume: {args.rows_file} was run with {old_header}, this run is {header}")
    if args.report and not rows:
        raise SystemExit(f"--report: no rows in {args.rows_file}")
    if not args.resume or old_header is None:
        args.rows_file.write_text("")
        append_row(args.rows_file, {"header": header})
    done = {(r["dataset"], r["split"], r["model"]) for r in rows}
    if args.resume:
        print(f"resuming: {len(rows)} rows in {args.rows_file}", flush=True)
    tasks, skipped_runs = [], []
    for task in args.tasks:
        X, y = task_data(task, args.quick)
        n_train = len(split(X, y, 0)[2])
        k = n_splits(n_train, args.splits, args.splits_large, LARGE_ROWS)
        tasks.append({**task._asdict(), "n_train": n_train, "n_test": len(y) - n_train, "splits": k,
                      "n_features": X.shape[1], "classes": len(np.unique(y))})
        reasons = {m: skip_reason(m, task.kind, n_train, args.gpc_max_train, gpjax_available) for m in args.models}
        skipped_runs += [{"dataset": task.name, "model": m, "reason": why} for m, why in reasons.items() if why]
        for seed in range(k):
            todo = [m for m in models if not (reasons[m] or args.report) and (task.name, seed, m) not in done]
            if not todo:
                continue
            Xtr, Xte, ytr, yte = split(X, y, seed)
            for m in todo:
                where = {"dataset": task.name, "kind": task.kind, "split": seed, "n_train": len(ytr),
                         "n_test": len(yte)}
                try:
                    row = run_model(m, seed, args.quick, Xtr, ytr, Xte, yte,
                                    refit=args.refit == "all" or m not in SKLEARN_MODELS)
                except Exception as exc:  # noqa: BLE001 -- one failed fit must not end a run of hours
                    row = {"model": m, "failed": f"{type(exc).__name__}: {str(exc)[:300]}"}
                row = {**where, **row, "threads": args.threads, "load1": os.getloadavg()[0]}
                rows.append(row)
                append_row(args.rows_file, row)
                print(f"{task.name} split {seed} {m}: " + (row["failed"] if "failed" in row else ", ".join(
                    f"{k} {row[k]:.4g}" for k in METRICS)), flush=True)
    names = [t["name"] for t in tasks]
    failed = [r for r in rows if r["dataset"] in names and "failed" in r]
    rows = [r for r in rows if r["dataset"] in names and "failed" not in r]
    summary = summarise(rows)
    for t in tasks:
        block = [s for s in summary if s["dataset"] == t["name"]]
        if block:
            print(f"\n## {t['name']} (n_train {block[0]['n_train']}, {block[0]['splits']} splits)\n")
            print(markdown_table(block, ["model", "error", "error_sd", "brier", "log_loss", "ece", "first_fit_s",
                                         "second_fit_s"]))
    skips = {(s["dataset"], s["model"]): s["reason"] for s in skipped_runs}
    ratios, times, met = ratios_to_best_peer(rows, skipped=skips), time_ratios(rows), targets_met(rows)
    if ratios or times:
        print("\n" + ratio_tables([t for t in tasks if any(r["dataset"] == t["name"] for r in ratios + times)],
                                  ratios, times, met))
    if failed:
        print(f"\n{len(failed)} fits failed (failed_runs in the JSON; --resume does not retry them): "
              + "; ".join(f"{r['dataset']} split {r['split']} {r['model']}" for r in failed[:10]))
    return {"tasks": tasks, "rows": rows, "summary": summary, "ratios": ratios, "time_ratios": times,
            "geometric_means": geometric_means(ratios), "targets_met": met,
            "skipped": sorted(set(args.models) - set(models)),
            "skipped_runs": skipped_runs, "failed_runs": failed}


# ---------------------------------------------------------------------------
# the SUSY-like scaling run
# ---------------------------------------------------------------------------


def _reached(curve: list[dict[str, Any]]) -> dict[str, Any]:
    """Final error and the first record within :data:`SUSY_TOL` of it."""
    final = curve[-1]["error"]
    hit = next(c for c in curve if c["error"] <= final + SUSY_TOL)
    return {"final_error": final, "time_to_final_s": hit["seconds"], "steps_to_final": hit["steps"],
            "train_s": curve[-1]["seconds"]}


def susy_sbsvm(Xtr, ytr, Xte, yte, quick: bool, records: int) -> dict[str, Any]:
    """``GPBSVM(inference="svi")`` at its defaults, its run cut into about ``records`` compiled chunks
    (the engine's ``rounds_per_chunk``) and a snapshot of the state taken after every chunk (through
    the callback of :func:`~bayes_maxmargin.models.gp.svi.svi_gp`), scored after the fit by the sign of
    the latent mean (a snapshot has no link yet); ``final_scores`` are the fitted estimator's, through
    its learnt link."""
    import functools
    from unittest import mock

    import jax

    from bayes_maxmargin import GPBSVM
    from bayes_maxmargin.core.predict import probit_predictive
    from bayes_maxmargin.engine.svi import predict_moments
    from bayes_maxmargin.models.gp import svi as gp_svi

    snaps: list[tuple[Any, int, float]] = []
    spec: list[Any] = []
    t0 = [0.0]

    class Recorded(GPBSVM):
        def _solve(self, fn, *a, **kw):
            if fn is not gp_svi.svi_gp:
                return super()._solve(fn, *a, **kw)
            rounds = -(-kw["num_steps"] // kw["hyper_every"])
            kw["callback"] = lambda state, steps, _s: snaps.append(
                (jax.device_get(state), steps, time.perf_counter() - t0[0]))
            chunked = functools.partial(gp_svi._run_from, rounds_per_chunk=max(1, rounds // records))
            with mock.patch.object(gp_svi, "_run_from", chunked):
                res, problem = super()._solve(fn, *a, **kw)
            spec.append(problem.features.spec)
            return res, problem

    est = Recorded(inference="svi", progress_bar=False, random_state=0,
                   **({"max_iter": 200, "num_inducing": 16} if quick else {}))
    jax.clear_caches()
    t0[0] = time.perf_counter()
    est.fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0[0]
    curve = []
    with jax.enable_x64(True):
        for state, steps, seconds in snaps:
            m, v = predict_moments(state, gp_svi.prediction_problem(spec[0], state), Xte)
            p = probit_predictive(np.asarray(m, np.float64), np.asarray(v, np.float64))
            curve.append({"steps": int(steps), "seconds": seconds,
                          "error": float(np.mean(np.where(p > 0.5, 1, -1) != yte))})
    p_final = est.predict_proba(Xte)[:, list(est.classes_).index(1)]
    return {"model": "svi", "fit_s": fit_s, "steps": int(est.n_iter_), "batch_size": est.batch_size,
            "num_inducing": est.inducing_points_.shape[0], **_reached(curve), "curve": curve,
            "final_scores": scores(yte, p_final)}


def susy_gpjax(Xtr, ytr, Xte, yte, quick: bool, records: int, learning_rate: float) -> dict[str, Any]:
    """The GPJax classifier trained in about ``records`` chunks of Adam steps in the worker
    (:func:`_gpjax_worker.susy_curve`), scored after every chunk; the seconds include the median
    distance's here."""
    clf = GPJaxSVGP(num_steps=200 if quick else None, learning_rate=learning_rate)
    cfg, seconds = clf.config(Xtr)
    reply, out = clf.running_worker().request({"op": "susy", **cfg, "records": records},
                                              X=np.asarray(Xtr, np.float64), y=np.asarray(ytr),
                                              X_test=np.asarray(Xte, np.float64))
    curve = [{"steps": int(k), "seconds": seconds + t, "error": float(np.mean(np.where(p > 0.5, 1, -1) != yte))}
             for k, t, p in zip(reply["steps"], reply["seconds"], out["proba"])]
    return {"model": "gpjax", "fit_s": curve[-1]["seconds"], "steps": cfg["num_steps"], "batch_size": cfg["batch_size"],
            "num_inducing": clf.num_inducing, **_reached(curve), "curve": curve,
            "final_scores": scores(yte, out["proba"][-1])}


def run_susy(args: argparse.Namespace) -> dict[str, Any]:
    from _common import markdown_table
    from sklearn.preprocessing import StandardScaler

    from bayes_maxmargin import load_dataset

    test = load_dataset("susy_synthetic", n=args.susy_test, random_state=1)
    rows = []
    for n in args.susy:
        tr = load_dataset("susy_synthetic", n=n, random_state=0)
        scaler = StandardScaler().fit(tr.X)
        Xtr, Xte = scaler.transform(tr.X), scaler.transform(test.X)
        ytr, yte = np.asarray(tr.y), np.asarray(test.y)
        runs = [susy_sbsvm(Xtr, ytr, Xte, yte, args.quick, args.susy_records)]
        if "gpjax" in args.models and GPJAX_WORKER is not None:
            runs.append(susy_gpjax(Xtr, ytr, Xte, yte, args.quick, args.susy_records, args.gpjax_lr))
        rows += [{"n_train": n, "n_test": args.susy_test, **r} for r in runs]
    print("\n## SUSY-like scaling (error on the held-out rows; time to within 0.5 points of the final error)\n")
    print(markdown_table(rows, ["n_train", "model", "steps", "batch_size", "num_inducing", "final_error",
                                "time_to_final_s", "train_s", "fit_s"]))
    return {"susy_rows": rows, "tol": SUSY_TOL}


def _resolve_suite(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The suite's defaults for the options left unset, and the tasks of ``--datasets``."""
    from _suite import suite_tasks

    wide = args.suite == "all"
    args.splits = args.splits if args.splits is not None else SPLITS_ALL if wide else 5
    args.splits_large = args.splits_large if args.splits_large is not None else SPLITS_LARGE if wide else None
    args.models = args.models or list(SUITE_MODELS if wide else MODELS)
    args.gpc_max_train = args.gpc_max_train if args.gpc_max_train is not None else GPC_MAX_TRAIN if wide else None
    args.refit = args.refit or ("jax" if wide else "all")
    tasks, args.left_out = suite_tasks(args.suite, args.quick)
    by_name = {t.name: t for t in tasks}
    unknown = [d for d in args.datasets or () if d not in by_name]
    if unknown:
        p.error(f"--datasets: {', '.join(unknown)} not in --suite {args.suite}; choose from {', '.join(by_name)}")
    args.tasks = [by_name[d] for d in args.datasets] if args.datasets else tasks
    args.datasets = [t.name for t in args.tasks]


def list_tasks(args: argparse.Namespace) -> None:
    """Print the tasks of the suite with their sizes and the sets left out."""
    from _suite import n_splits, task_data

    print("| task | kind | source | rows | features | classes | n_train | splits |\n|---|---|---|---|---|---|---|---|")
    for t in args.tasks:
        X, y = task_data(t, args.quick)
        n_train = len(split(X, y, 0)[2])
        print(f"| {t.name} | {t.kind} | {t.source} | {X.shape[0]} | {X.shape[1]} | {len(np.unique(y))} | {n_train} "
              f"| {n_splits(n_train, args.splits, args.splits_large, LARGE_ROWS)} |")
    print(f"\n{len(args.tasks)} tasks; left out: " + "; ".join(f"{k} ({v})" for k, v in args.left_out.items()))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=("nine", "all"), default="nine",
                   help="nine: the Raetsch sets and half moons (quick); all: the broad benchmark "
                        "of docs/performance.md")
    p.add_argument("--datasets", nargs="+", default=None, help="tasks of the suite to run (default: all of them)")
    p.add_argument("--list", action="store_true", help="print the suite's tasks and exit")
    p.add_argument("--splits", type=int, default=None,
                   help=f"seeded stratified 70/30 splits per data set (default: 5; --suite all: {SPLITS_ALL})")
    p.add_argument("--splits-large", type=int, default=None,
                   help=f"at most this many splits above {LARGE_ROWS} training rows (--suite all: {SPLITS_LARGE})")
    p.add_argument("--models", nargs="+", default=None, choices=MODELS,
                   help=f"default: all; --suite all: {' '.join(SUITE_MODELS)}")
    p.add_argument("--gpc-max-train", type=int, default=None,
                   help=f"GPC only up to this many training rows (default: no limit; --suite all: {GPC_MAX_TRAIN})")
    p.add_argument("--refit", choices=("all", "jax"), default=None,
                   help="which models are fitted a second time: all (default), or jax (--suite all's default): "
                        "the scikit-learn models are fitted once, their second fit time is their first's")
    p.add_argument("--threads", type=int, default=1, help="BLAS / OpenMP / XLA threads of every model")
    p.add_argument("--resume", action="store_true", help="continue from the rows file of an interrupted run")
    p.add_argument("--report", action="store_true",
                   help="fit nothing: the tables and the JSON from the rows file as it stands")
    p.add_argument("--quick", action="store_true", help="tiny settings of every fit (a smoke run)")
    p.add_argument("--susy", type=int, nargs="+", default=None, metavar="N",
                   help="the SUSY-like scaling run at these training sizes (instead of the tables)")
    p.add_argument("--susy-test", type=int, default=20_000, help="held-out rows of the SUSY-like run")
    p.add_argument("--susy-records", type=int, default=40,
                   help="about this many error records along the steps of each fit")
    p.add_argument("--gpjax-lr", type=float, default=0.01, help="GPJax: Adam's learning rate")
    p.add_argument("--gpjax-python", default=None, metavar="PATH",
                   help="GPJax: the interpreter of its environment (default: BMM_GPJAX_PYTHON, else this one if "
                        "gpjax is installed here)")
    p.add_argument("--out-dir", type=Path, default=None)
    p.add_argument("--tag", default="", help="appended to the result file name")
    args = p.parse_args(argv)
    for opt in ("splits", "splits_large", "gpc_max_train", "threads"):
        if getattr(args, opt) is not None and getattr(args, opt) < 1:
            p.error(f"--{opt.replace('_', '-')} must be >= 1, got {getattr(args, opt)}")
    if args.susy is not None and min(args.susy) < 2:
        p.error(f"--susy sizes must be >= 2, got {args.susy}")
    if args.report and args.susy:
        p.error("--report reads the rows of the tables' run; the --susy run keeps none")
    if args.susy_records < 1:
        p.error(f"--susy-records must be >= 1, got {args.susy_records}")
    if args.quick and args.susy_test == 20_000:
        args.susy_test = 1000
    from threadpoolctl import threadpool_info, threadpool_limits

    from _common import RESULTS, result_name, write_results

    _resolve_suite(p, args)
    args.resume = args.resume or args.report
    if args.list:
        list_tasks(args)
        return {}
    name = result_name("vs_peers" + ("_susy" if args.susy else "_all" if args.suite == "all" else ""), args.quick,
                       args.tag)
    out_dir = args.out_dir or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    args.rows_file = out_dir / f"{name}.rows.jsonl"
    load_start = os.getloadavg()
    global GPJAX_WORKER
    worker_info: Any = None
    if "gpjax" in args.models and not args.report:
        GPJAX_WORKER, worker_info = start_gpjax(gpjax_python(args.gpjax_python, dict(os.environ)), args.threads)
        if GPJAX_WORKER is None:
            print(worker_info, flush=True)
    try:
        with warnings.catch_warnings(), threadpool_limits(limits=args.threads):
            warnings.simplefilter("ignore")
            pools = sorted({f"{i['internal_api']}: {i['num_threads']}" for i in threadpool_info()})
            payload = run_susy(args) if args.susy else run_tables(args)
    finally:
        if GPJAX_WORKER is not None:
            GPJAX_WORKER.close()
            GPJAX_WORKER = None
    import jax

    versions: dict[str, Any] = {"jax": jax.__version__}
    if isinstance(worker_info, dict):
        versions["gpjax"], versions["gpjax_worker"] = worker_info["gpjax"], worker_info
    elif worker_info is not None:
        versions["gpjax_skipped"] = worker_info
    config = {k: v for k, v in vars(args).items() if k not in ("out_dir", "rows_file", "tasks")}
    threads = {"threads": args.threads, "thread_pools": pools, "xla_flags": os.environ.get("XLA_FLAGS", ""),
               **{v: os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
               "load_start": load_start, "load_end": os.getloadavg()}
    payload = {"config": config, "versions": versions, "threads": threads,
               "jax_compilation_cache_dir": os.environ.get("JAX_COMPILATION_CACHE_DIR", ""), **payload}
    path = write_results(name, payload, out_dir)
    print(f"\nwrote {path}")
    return payload


if __name__ == "__main__":
    main()
