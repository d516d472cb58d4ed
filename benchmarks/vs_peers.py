"""GPBSVM and LinearBSVM side by side with the classifiers users already pick, in one run.

Data: the Raetsch benchmark sets of ``BMM_DATA_DIR`` (breast_cancer, diabetis, flare_solar, german,
heart, splice, waveform, ringnorm) and two half moons (``sklearn.datasets.make_moons``, 2000 rows,
noise 0.3). Each set is split ``--splits`` times (seeds 0, 1, ...) into stratified 70 % / 30 % parts
(:func:`bayes_maxmargin.data.splits.train_test_split_stratified`), the features standardised on the
training part (``StandardScaler``).

Models (``--models``, all by default):

* ``gpbsvm``: ``GPBSVM()`` at its defaults; ``gpbsvm_phi``: the same with the papers' predictive
  Phi(f) (``calibrate=False``); ``ecm``, ``fitc``, ``svi``, ``vi``, ``gibbs``:
  ``GPBSVM(inference=...)``, otherwise at the defaults; ``ecm_ard``, ``svi_ard``: the same with
  ``kernel="ard"``; ``linear``: ``LinearBSVM()``.
* ``gpjax``: GPJax's sparse variational GP classifier (optional: installed by the ``bench`` extra,
  ``pip install -e .[bench]``): Bernoulli likelihood with probit link, ARD RBF kernel (every
  length-scale starting at the median distance between training points over sqrt 2, i.e. the same
  kernel as GPBSVM's start), zero mean, 64 inducing points initialised by k-means,
  ``WhitenedVariationalGaussian``, the negative ``gpx.objectives.elbo`` minimised by ``gpx.fit`` with
  Adam (``--gpjax-lr``), the same number of steps and batch size as ``GPBSVM()`` (20 epochs of
  minibatches of 100, at least 250 steps with its RBF kernel below 2000 rows and 1000 with its ARD
  kernel from 2000 rows, at most 100 000; :func:`svi_default_steps`); float64, the fit jitted once per
  shape (``equinox.filter_jit``) so that a second fit reuses the program.
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
warnings the fits raised (e.g. a ConvergenceWarning), in the JSON. One table per data set (means
over the splits, error with its standard deviation), then ``gpbsvm``'s mean error and Brier score
over the best peer's (GPC, GPJax, SVC + Platt) with a 90 % paired t-interval over the splits
(:func:`ratios_to_best_peer`, ``ratios`` in the JSON).

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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

DATASETS = ("breast_cancer", "diabetis", "flare_solar", "german", "heart", "splice", "waveform", "ringnorm", "moons")
GP_INFERENCES = ("ecm", "fitc", "svi", "vi", "gibbs")
#: GPBSVM with the ARD kernel (one length-scale per feature, learnt by ML-II), by ECM and by svi
GP_ARD = {"ecm_ard": "ecm", "svi_ard": "svi"}
MODELS = ("gpbsvm", "gpbsvm_phi", *GP_INFERENCES, *GP_ARD, "linear", "gpjax", "gpc", "svc_platt", "logreg")
METRICS = ("error", "brier", "log_loss", "ece", "first_fit_s", "second_fit_s")
MOONS_N, MOONS_NOISE = 2000, 0.3
GPJAX_INDUCING = 64
#: the peers that ``GPBSVM()`` is compared with (:func:`ratios_to_best_peer`)
PEERS = ("gpc", "gpjax", "svc_platt")
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
    kernel (RBF: 2, ARD + Constant from 2000 rows: d + 2)."""
    from bayes_maxmargin.core.kernels import as_kernel
    from bayes_maxmargin.core.parameters import to_unconstrained
    from bayes_maxmargin.estimators.gp import default_kernel, default_svi_steps

    params = as_kernel(default_kernel("svi", n)).init_params(np.zeros((1, d)))
    n_kernel = sum(np.size(v) for v in to_unconstrained(params).values())
    return default_svi_steps(n, batch_size, n_kernel)


def gpjax_available() -> bool:
    try:
        import gpjax  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------------
# GPJax's sparse variational GP classifier
# ---------------------------------------------------------------------------


def _negative_elbo(q, data):
    import gpjax as gpx

    return -gpx.objectives.elbo(q, data)


def _jitted_gpjax_fit():
    """``gpx.fit`` compiled once per shape and configuration (module-level, so that refits reuse it)."""
    import equinox as eqx
    import gpjax as gpx

    if "fit" not in _GPJAX_CACHE:
        _GPJAX_CACHE["fit"] = eqx.filter_jit(gpx.fit)
    return _GPJAX_CACHE["fit"]


def _adam(learning_rate: float):
    """One optax Adam per rate, so that the jitted fit sees the same (static) optimiser every time."""
    import optax

    return _GPJAX_CACHE.setdefault(("adam", learning_rate), optax.adam(learning_rate))


_GPJAX_CACHE: dict[Any, Any] = {}


class GPJaxSVGP:
    """GPJax's SVGP classifier behind ``fit`` / ``predict_proba`` (labels -1 / +1; see the module
    docstring for the configuration). ``num_steps=None``: GPBSVM's svi default for the data size."""

    def __init__(self, num_steps: int | None = None, batch_size: int = 100, num_inducing: int = GPJAX_INDUCING,
                 learning_rate: float = 0.01, random_state: int = 0) -> None:
        self.num_steps, self.batch_size, self.num_inducing = num_steps, batch_size, num_inducing
        self.learning_rate, self.random_state = learning_rate, random_state

    def init_family(self, X: np.ndarray):
        import gpjax as gpx
        import jax.numpy as jnp
        from sklearn.cluster import KMeans

        from bayes_maxmargin.experiments.henao2014 import median_distance

        n, d = X.shape
        ell0 = median_distance(X, 1000, self.random_state) / np.sqrt(2.0)  # exp(-r^2/theta^2) = exp(-r^2/(2 l^2))
        kernel = gpx.kernels.RBF(lengthscale=jnp.full(d, ell0), variance=1.0)
        prior = gpx.gps.Prior(mean_function=gpx.mean_functions.Zero(), kernel=kernel)
        posterior = prior * gpx.likelihoods.Bernoulli()
        km = KMeans(min(self.num_inducing, n), n_init=1, random_state=self.random_state).fit(X)
        return gpx.variational_families.WhitenedVariationalGaussian(
            model=posterior, inducing_inputs=jnp.asarray(km.cluster_centers_))

    def steps_and_batch(self, n: int, d: int) -> tuple[int, int]:
        B = min(self.batch_size, n)
        return (self.num_steps or svi_default_steps(n, d, self.batch_size)), B

    def fit(self, X: np.ndarray, y: np.ndarray) -> "GPJaxSVGP":
        import gpjax as gpx
        import jax
        import jax.numpy as jnp
        import jax.random as jr

        with jax.enable_x64(True):
            X = np.asarray(X, np.float64)
            q = self.init_family(X)
            data = gpx.Dataset(X=jnp.asarray(X), y=jnp.asarray((np.asarray(y) > 0).astype(np.float64)[:, None]))
            steps, B = self.steps_and_batch(*X.shape)
            self.q_, self.loss_ = _jitted_gpjax_fit()(
                model=q, objective=_negative_elbo, train_data=data, optim=_adam(self.learning_rate),
                key=jr.key(self.random_state), num_iters=steps, batch_size=B, verbose=False)
            jax.block_until_ready(self.loss_)
        self.n_iter_, self.classes_ = steps, np.array([-1, 1])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        p = gpjax_proba(self.q_, X)
        return np.column_stack([1.0 - p, p])


def gpjax_proba(q, X: np.ndarray, chunk: int = 2000) -> np.ndarray:
    """P(y = 1) = Phi(m / sqrt(1 + v)) of the marginal predictive of ``q`` (the Bernoulli likelihood's
    ``predict``), in chunks of rows."""
    import jax
    import jax.numpy as jnp
    from scipy.special import ndtr

    with jax.enable_x64(True):
        post = q.condition(None)
        out = []
        for s in range(0, X.shape[0], chunk):
            dist = post(jnp.asarray(X[s : s + chunk], jnp.float64), covariance="diagonal")
            m, v = np.asarray(dist.mean).ravel(), np.asarray(dist.variance).ravel()
            out.append(ndtr(m / np.sqrt(1.0 + v)))
    return np.concatenate(out)


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
                      **(QUICK_GP["svi"] if quick else {}))  # svi: GPBSVM()'s inference
    if name in GP_INFERENCES:
        return GPBSVM(inference=name, progress_bar=False, random_state=seed, **(QUICK_GP[name] if quick else {}))
    if name in GP_ARD:
        inference = GP_ARD[name]
        return GPBSVM(kernel="ard", inference=inference, progress_bar=False, random_state=seed,
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
    est = make()
    t0 = time.perf_counter()
    est.fit(X, y)
    return est, time.perf_counter() - t0


def run_model(name: str, seed: int, quick: bool, Xtr, ytr, Xte, yte) -> dict[str, Any]:
    """First fit (caches cleared), second fit of the same configuration, scores of the second, and up
to 5 distinct warnings the fits and the prediction raised (e.g. a ConvergenceWarning)."""
    import jax

    make = lambda: make_model(name, seed, quick)  # noqa: E731
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.clear_caches()
        _, first = _timed_fit(make, Xtr, ytr)
        est, second = _timed_fit(make, Xtr, ytr)
        proba = est.predict_proba(Xte)[:, list(est.classes_).index(1)]
    row = {"model": name, **scores(yte, proba), "first_fit_s": first, "second_fit_s": second,
           "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught})[:5]}
    if hasattr(est, "n_iter_"):
        row["n_iter"] = int(np.max(est.n_iter_))
    return row


def load(name: str, quick: bool) -> tuple[np.ndarray, np.ndarray]:
    if name == "moons":
        from sklearn.datasets import make_moons

        X, y01 = make_moons(n_samples=200 if quick else MOONS_N, noise=MOONS_NOISE, random_state=0)
        return X, np.where(y01 == 1, 1, -1)
    from bayes_maxmargin import load_dataset

    ds = load_dataset(name)
    return np.asarray(ds.X, np.float64), np.asarray(ds.y)


def split(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    """Stratified 70/30 split, features standardised on the training part."""
    from sklearn.preprocessing import StandardScaler

    from bayes_maxmargin.data.splits import train_test_split_stratified

    Xtr, Xte, ytr, yte = train_test_split_stratified(X, y, test_size=0.3, random_state=seed)
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


def ratios_to_best_peer(rows: list[dict[str, Any]], metrics: tuple[str, ...] = ("error", "brier"),
                        model: str = "gpbsvm", peers: tuple[str, ...] = PEERS,
                        level: float = 0.9) -> list[dict[str, Any]]:
    """Per data set and metric: ``model``'s mean over the splits divided by the lowest mean of the
    ``peers`` present, with a paired t-interval of that ratio.

    The interval is the Student-t interval (``level``) of the mean of the per-split differences
    between ``model`` and the best peer, divided by the best peer's mean and shifted by 1: how far
    the ratio may move with other splits of the same data. One split gives no interval (None). Only
    splits where every model was fitted count; a data set without ``model`` or without a peer is left
    out.

    Examples
    --------
    >>> rows = [{"dataset": "d", "split": s, "model": m, "error": e}
    ...         for s, (a, b) in enumerate([(0.22, 0.20), (0.24, 0.20), (0.20, 0.20)])
    ...         for m, e in (("gpbsvm", a), ("gpc", b))]
    >>> r = ratios_to_best_peer(rows, ("error",))[0]
    >>> round(r["ratio"], 3), r["best_peer"], r["splits"], round(r["low"], 3), round(r["high"], 3)
    (1.1, 'gpc', 3, 0.931, 1.269)
    """
    from scipy import stats

    out = []
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        by: dict[str, dict[int, dict[str, Any]]] = {}
        for r in rows:
            if r["dataset"] == ds and (r["model"] == model or r["model"] in peers):
                by.setdefault(r["model"], {})[r["split"]] = r
        present = [p for p in peers if p in by]
        if model not in by or not present:
            continue
        splits = sorted(set.intersection(*(set(by[m]) for m in [model, *present])))
        n = len(splits)
        for metric in metrics:
            ours = np.array([by[model][s][metric] for s in splits])
            means = {p: np.mean([by[p][s][metric] for s in splits]) for p in present}
            best = min(present, key=means.get)
            diff = ours - np.array([by[best][s][metric] for s in splits])
            r = {"dataset": ds, "metric": metric, "ratio": float(ours.mean() / means[best]), "best_peer": best,
                 "low": None, "high": None, "splits": n}
            if n > 1:
                half = stats.t.ppf((1 + level) / 2, n - 1) * np.std(diff, ddof=1) / np.sqrt(n)
                r["low"], r["high"] = (float(1 + (diff.mean() + h) / means[best]) for h in (-half, half))
            out.append(r)
    return out


def run_tables(args: argparse.Namespace) -> dict[str, Any]:
    from _common import markdown_table

    models = [m for m in args.models if m != "gpjax" or gpjax_available()]
    if len(models) < len(args.models):
        print("note: gpjax is not installed (pip install -e .[bench]); its runs are skipped", flush=True)
    rows: list[dict[str, Any]] = []
    for ds in args.datasets:
        X, y = load(ds, args.quick)
        for seed in range(args.splits):
            Xtr, Xte, ytr, yte = split(X, y, seed)
            for m in models:
                row = run_model(m, seed, args.quick, Xtr, ytr, Xte, yte)
                rows.append({"dataset": ds, "split": seed, "n_train": len(ytr), "n_test": len(yte), **row})
                print(f"{ds} split {seed} {m}: " + ", ".join(f"{k} {row[k]:.4g}" for k in METRICS), flush=True)
    summary = summarise(rows)
    for ds in args.datasets:
        block = [s for s in summary if s["dataset"] == ds]
        print(f"\n## {ds} (n_train {block[0]['n_train']}, {block[0]['splits']} splits)\n")
        print(markdown_table(block, ["model", "error", "error_sd", "brier", "log_loss", "ece", "first_fit_s",
                                     "second_fit_s"]))
    ratios = ratios_to_best_peer(rows)
    if ratios:
        print(f"\n## gpbsvm / the best of {', '.join(PEERS)} (90 % paired t-interval over the splits)\n")
        print(markdown_table(ratios, ["dataset", "metric", "ratio", "best_peer", "low", "high", "splits"]))
    return {"rows": rows, "summary": summary, "ratios": ratios, "skipped": sorted(set(args.models) - set(models))}


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


def _strong(tree):
    """``tree`` with every array leaf strongly typed, so that a jitted chunk fed its own output is
    not traced again (weakly typed leaves come back strongly typed)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda x: jnp.asarray(x, dtype=x.dtype) if eqx.is_array(x) else x, tree)


def _chunk_length(steps: int, records: int) -> int:
    """The smallest divisor of ``steps`` that gives at most ``records`` chunks (equal chunks: one program)."""
    return next(k for k in range(max(1, -(-steps // records)), steps + 1) if steps % k == 0)


def susy_gpjax(Xtr, ytr, Xte, yte, quick: bool, records: int, learning_rate: float) -> dict[str, Any]:
    """The GPJax classifier trained in ``records`` chunks of Adam steps (state carried over, each chunk
    the step of ``gpx.fit``: a minibatch drawn with replacement, the gradient of the negative ELBO),
    scored after every chunk."""
    import equinox as eqx
    import gpjax as gpx
    import jax
    import jax.numpy as jnp
    import jax.random as jr
    from gpjax.fit import get_batch

    clf = GPJaxSVGP(num_steps=200 if quick else None, learning_rate=learning_rate)
    steps, B = clf.steps_and_batch(*Xtr.shape)
    optim = _adam(learning_rate)
    per = _chunk_length(steps, records)

    @eqx.filter_jit
    def chunk(q, opt_state, data, keys):
        def step(carry, key):
            q, opt_state = carry
            loss, grads = eqx.filter_value_and_grad(_negative_elbo)(q, get_batch(data, B, key))
            updates, opt_state = optim.update(grads, opt_state, eqx.filter(q, eqx.is_array))
            return (eqx.apply_updates(q, updates), opt_state), loss

        (q, opt_state), losses = jax.lax.scan(step, (q, opt_state), keys)
        return q, opt_state, losses

    jax.clear_caches()
    curve, scoring = [], 0.0
    with jax.enable_x64(True):
        t0 = time.perf_counter()
        q = _strong(clf.init_family(np.asarray(Xtr, np.float64)))
        data = gpx.Dataset(X=jnp.asarray(Xtr, jnp.float64), y=jnp.asarray((ytr > 0).astype(np.float64)[:, None]))
        opt_state = _strong(optim.init(eqx.filter(q, eqx.is_array)))
        keys = jr.split(jr.key(0), steps)
        done = 0
        while done < steps:
            q, opt_state, losses = chunk(q, opt_state, data, keys[done : done + per])
            jax.block_until_ready(losses)
            done = min(steps, done + per)
            t_s = time.perf_counter()
            p = gpjax_proba(q, Xte)
            curve.append({"steps": done, "seconds": t_s - t0 - scoring,
                          "error": float(np.mean(np.where(p > 0.5, 1, -1) != yte))})
            scoring += time.perf_counter() - t_s
    return {"model": "gpjax", "fit_s": curve[-1]["seconds"], "steps": steps, "batch_size": B,
            "num_inducing": clf.num_inducing, **_reached(curve), "curve": curve, "final_scores": scores(yte, p)}


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
        if "gpjax" in args.models and gpjax_available():
            runs.append(susy_gpjax(Xtr, ytr, Xte, yte, args.quick, args.susy_records, args.gpjax_lr))
        elif "gpjax" in args.models:
            print("note: gpjax is not installed (pip install -e .[bench]); its run is skipped", flush=True)
        rows += [{"n_train": n, "n_test": args.susy_test, **r} for r in runs]
    print("\n## SUSY-like scaling (error on the held-out rows; time to within 0.5 points of the final error)\n")
    print(markdown_table(rows, ["n_train", "model", "steps", "batch_size", "num_inducing", "final_error",
                                "time_to_final_s", "train_s", "fit_s"]))
    return {"susy_rows": rows, "tol": SUSY_TOL}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--splits", type=int, default=5, help="seeded stratified 70/30 splits per data set")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--quick", action="store_true", help="tiny settings of every fit (a smoke run)")
    p.add_argument("--susy", type=int, nargs="+", default=None, metavar="N",
                   help="the SUSY-like scaling run at these training sizes (instead of the tables)")
    p.add_argument("--susy-test", type=int, default=20_000, help="held-out rows of the SUSY-like run")
    p.add_argument("--susy-records", type=int, default=40,
                   help="about this many error records along the steps of each fit")
    p.add_argument("--gpjax-lr", type=float, default=0.01, help="GPJax: Adam's learning rate")
    p.add_argument("--out-dir", type=Path, default=None)
    p.add_argument("--tag", default="", help="appended to the result file name")
    args = p.parse_args(argv)
    if args.splits < 1:
        p.error(f"--splits must be >= 1, got {args.splits}")
    if args.susy is not None and min(args.susy) < 2:
        p.error(f"--susy sizes must be >= 2, got {args.susy}")
    if args.susy_records < 1:
        p.error(f"--susy-records must be >= 1, got {args.susy_records}")
    if args.quick and args.susy_test == 20_000:
        args.susy_test = 1000
    from _common import RESULTS, result_name, write_results

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        payload = run_susy(args) if args.susy else run_tables(args)
    import jax

    versions = {"jax": jax.__version__}
    if gpjax_available():
        import gpjax

        versions["gpjax"] = gpjax.__version__
    payload = {"config": {k: v for k, v in vars(args).items() if k != "out_dir"}, "versions": versions,
               "jax_compilation_cache_dir": os.environ.get("JAX_COMPILATION_CACHE_DIR", ""), **payload}
    name = result_name("vs_peers" + ("_susy" if args.susy else ""), args.quick, args.tag)
    path = write_results(name, payload, args.out_dir or RESULTS)
    print(f"\nwrote {path}")
    return payload


if __name__ == "__main__":
    main()
