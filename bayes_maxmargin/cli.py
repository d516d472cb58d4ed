"""The ``bmm`` command: fit a model on a dataset and write its diagnostics (Hydra).

``bmm`` with no arguments fits :class:`~bayes_maxmargin.LinearBSVM` with Gibbs on the built-in
breast-cancer (diagnostic) data with a seeded stratified hold-out split, prints held-out error,
balanced error, Brier score, log loss, wall time, max R-hat and min ESS, and writes ``idata.nc``,
``metrics.json``, the fitted estimator as ``model.bmm`` (:func:`bayes_maxmargin.load` reads it),
``config.yaml``, ``trace.png`` and ``reliability.png`` to the run's output folder
(vi and svi: also the final ELBO, and ``elbo.png``, the ELBO per sweep / per estimate, for
``trace.png``).

Config groups (structured dataclass schemas in Hydra's ConfigStore): ``model`` (linear, gp),
``inference`` (gibbs, em, nuts, vb, svi for the linear model; ecm, fitc, gibbs, nuts, vi, svi for
the GP model; by default the estimator's own: gibbs for the linear model, and for the GP model
``default``, GPBSVM's choice by size (ECM up to 300 training rows, svi above),
:data:`DEFAULT_INFERENCE`), ``data`` (every named dataset), and ``experiment`` (paper
reproductions, selected with ``+``). A dataset with a cluster column (``toenail``) fits a random intercept per cluster with
the linear model unless ``data.use_groups=false``. ``data.n`` sets the number of rows of a generated
dataset (``susy_synthetic``; the first rows of ``susy``); it is passed to the loader only when set.
Examples::

    bmm inference=em data=pima
    bmm inference=vb model.prior=laplace_zero model.rho=0.01 data=spambase
    bmm inference=vb model.prior=penalty model.missing=model data=acath
    bmm inference.num_samples=2000 model.gamma0=0.1 seed=3
    bmm model=gp data=ionosphere                     # GPBSVM's default (ECM on 245 training rows)
    bmm model=gp inference=ecm data=ionosphere
    bmm model=gp inference=vi data=ionosphere
    bmm model=gp inference=svi data=susy_synthetic data.n=5000000
    bmm model=gp inference=svi inference.num_inducing=64 inference.step_size=adaptive data=waveform
    bmm +experiment=henao_table1
    bmm +experiment=henao_table1 smoke=true          # a tiny version in seconds (not a reproduction)
    bmm --multirun +experiment=luts_simulation smoke=true seed=0,1,2
    bmm --multirun inference=gibbs,em data=pima    # one folder per job under multirun/
    bmm resume=outputs/<date>/<time>/checkpoint     # continue an interrupted run (same options)

``smoke=true`` makes any job tiny: an experiment runs its smoke settings (see
:mod:`bayes_maxmargin.experiments`); a model job caps the draws, chains and iterations
(:func:`smoke_inference`). ``--multirun`` sweeps comma-separated values with Hydra's basic
launcher, one output folder per job.

Every run writes a checkpoint to ``<run folder>/checkpoint`` after every chunk (``checkpoint=false``
turns it off): Gibbs, SVI, EM, VB and VI chunks of iterations (about a second each), ECM and FITC every
ECM + ML-II round and chunk of the final ECM run, NUTS its warm-up and every chunk of draws. Ctrl-C or
SIGTERM stop the run at the end of its chunk, or 2 s after the signal, and leave the checkpoint and the
draws so far (exit status 130 after Ctrl-C, 143 after SIGTERM, as for a process the signal ended; one line
``bmm: interrupted: ...`` says where ``resume=<run folder>/checkpoint`` continues, with the same options).
A multi-class problem is checkpointed the same way: its one-vs-rest problems run together, in one
checkpoint.

Every argument of the estimators is an option: ``model.<name>``, ``inference.<name>`` (a dict or a list
given whole, ``model.kernel_params={lengthscale:2.0}``), or the top-level ``precision``, ``seed`` and
``progress_bar``. Errors end in one line ``bmm: error: ...`` saying what to set, with exit status 2 (an
unknown group choice, option or value, listing the valid ones; an invalid value, naming the option; an
override that removes an option, ``~key``; an output folder that cannot be written; missing data; a fit the
memory guard refuses, naming the size to lower) or 1 (a failed run); ``HYDRA_FULL_ERROR=1 bmm ...``
shows the traceback instead. The run's log (``<run folder>/cli.log``) records the steps of the run and every
warning.

Compiled programs are kept between runs in JAX's persistent compilation cache,
``~/.cache/bayes_maxmargin/jax`` by default (``compilation_cache=<folder>`` elsewhere,
``compilation_cache=null`` off; see :func:`use_compilation_cache`), so that a rerun with data of
the same shapes skips most of the compilation.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import MISSING, DictConfig, OmegaConf

from bayes_maxmargin.core import compilation
from bayes_maxmargin.core.compilation import COMPILATION_CACHE_MAX_BYTES
from bayes_maxmargin.core.io import NETCDF_ENGINE, atomic_path, write_config, write_json
from bayes_maxmargin.persistence import save

__all__ = ["COMPILATION_CACHE_MAX_BYTES", "SMOKE_INFERENCE", "main", "run", "smoke_inference", "use_compilation_cache"]

#: Datasets that need no data folder (the rest of :data:`DATASETS` are read from BMM_DATA_DIR).
BUILT_IN_DATASETS = ("wdbc", "susy_synthetic")

#: Experiments whose ``smoke=true`` run needs no data folder (the others read benchmark datasets).
SMOKE_WITHOUT_DATA = ("luts_simulation", "wenzel_susy", "wenzel_fig1", "wenzel_fig2", "wenzel_fig3")

log = logging.getLogger("bayes_maxmargin.cli")

#: Datasets that may be asked for with ``data=<name>`` (loaded through BMM_DATA_DIR except the
#: built-in wdbc and susy_synthetic).
DATASETS = (
    "wdbc", "acath", "arcene", "breast_cancer", "crabs", "diabetis", "dna", "dorothea", "flare_solar",
    "german", "heart", "ionosphere", "isolet", "leukemia", "p53_proxy", "pima", "ringnorm",
    "satimage", "sonar", "spambase", "splice", "susy", "susy_synthetic", "toenail", "usps", "usps_3vs5",
    "waveform", "wisconsin",
)  # fmt: skip


@dataclass
class LinearModelConfig:
    """Schema of ``model=linear``: the arguments of :class:`LinearBSVM` that define the model."""

    name: str = "linear"
    sigma: float = 1.0
    intercept_scale: float | None = 10.0
    fit_intercept: bool = True
    gamma: float = 1.0
    gamma_prior: list[float] | None = None
    gamma0: float = 0.0
    gamma0_prior: list[float] | None = None
    prior: str = "gaussian"
    rho: float = 0.01
    A_u: float = 0.01
    B_u: float = 0.01
    missing: str = "error"


@dataclass
class GPModelConfig:
    """Schema of ``model=gp``: the arguments of :class:`GPBSVM` that define the model."""

    name: str = "gp"
    kernel: Optional[str] = None  # None: GPBSVM's default (ARD + Constant for svi on >= 600 rows, else "rbf")
    # Any, not dict | None: OmegaConf cannot merge a dict into a None of a typed Optional[Dict]; the estimator
    # checks the value (model.kernel_params={lengthscale:2.0})
    kernel_params: Any = None
    learn_kernel: Any = True
    kernel_prior_scale: float = 1.0
    gamma: float = 1.0
    gamma_prior: list[float] | None = None
    gamma0: float | None = None
    gamma0_prior: list[float] | None = None
    jitter: float = 1e-6
    # Any, not Optional[bool]: true, false or "cv" (the link learnt from refits on five folds); None: GPBSVM's
    # default (a learnt link for ecm, fitc, vi, svi)
    calibrate: Any = None


@dataclass
class MCMCConfig:
    """Schema shared by the samplers: draws, warm-up, chains, thinning."""

    name: str = MISSING
    num_samples: Optional[int] = None  # None: the estimator's default (LinearBSVM 1000, GPBSVM 2000 per chain)
    num_warmup: int = 500
    num_chains: int = 4
    thin: int = 1


@dataclass
class GibbsConfig(MCMCConfig):
    """Schema of ``inference=gibbs``."""

    name: str = "gibbs"
    overrelaxation: float = -0.9
    marginal_moves: bool = True  # model=linear, gp: moves of the coefficients or f with lambda integrated out
    theta_sampler: str = "collapsed"  # model=gp with learn_kernel: "collapsed" or "surrogate" slice steps on theta


@dataclass
class NUTSConfig(MCMCConfig):
    """Schema of ``inference=nuts``."""

    name: str = "nuts"


@dataclass
class EMConfig:
    """Schema of ``inference=em``."""

    name: str = "em"
    max_iter: int = 1000
    tol: float = 1e-10
    solver: str = "interior_point"  # the hinge with gamma fixed: the QP solved exactly; fixed_point: the paper's EM


@dataclass
class VBConfig:
    """Schema of ``inference=vb`` (linear model): mean-field VB, Luts & Ormerod (2014) Alg. 1-4."""

    name: str = "vb"
    max_iter: int = 1000
    tol: float = 1e-10
    accelerate: bool = True


@dataclass
class ECMConfig:
    """Schema of ``inference=ecm`` (GP model): ECM with ML-II every ``mlii_every`` iterations."""

    name: str = "ecm"
    max_iter: int = 200
    mlii_every: int = 20
    mlii_steps: int = 10
    mlii_tol: Any = "auto"  # "auto": GPBSVM's default (1e-4 for ECM, null for FITC); null: every round and step
    mlii_criterion: Optional[str] = None  # None: GPBSVM's default ("loo" for ECM, eq. (10) "evidence" for FITC)
    accelerate: bool = True  # SQUAREM cycles of three ECM iterations; false: the paper's plain iterations
    solver: str = "interior_point"  # the last f-step solved exactly (hinge, gamma fixed); fixed_point: ECM's
    optimizer: str = "lbfgs"
    learning_rate: float = 0.05
    tol: float = 1e-10


@dataclass
class FITCConfig(ECMConfig):
    """Schema of ``inference=fitc`` (GP model): ECM and ML-II under the FITC prior."""

    name: str = "fitc"
    num_inducing: int = 100
    inducing: str = "kmeans"
    optimize_inducing: bool = True


@dataclass
class VIConfig:
    """Schema of ``inference=vi`` (GP model): B-BSVM, coordinate ascent on q(f) q(lambda) for the
    full GP at the initial kernel parameters (Wenzel et al. 2017, Sec. 4.1); stops when a sweep
    raises the ELBO by less than ``tol``."""

    name: str = "vi"
    max_iter: int = 200
    tol: float = 1e-8


@dataclass
class SVIConfig:
    """Schema of ``inference=svi``: S-BSVM, natural-gradient stochastic VI (Wenzel et al. 2017,
    Alg. 1) with ``num_inducing`` inducing points and ML-II (Adam, ``learning_rate``) on the kernel
    and the inducing points every ``mlii_every`` steps (eq. 12); for the linear model the same
    step on q(beta) (Sec. 4.5, eq. 14; the inducing-point and ML-II options do not apply).
    ``max_iter`` counts natural-gradient steps (None: the estimator's default, for the GP model 20
    epochs within [250, 100000], at least 1000 with ARD); ``step_size`` is a number in (0, 1],
    ``robbins_monro`` or ``adaptive``; ``devices`` splits every minibatch across that many devices
    (None: all)."""

    name: str = "svi"
    max_iter: Optional[int] = None
    batch_size: int = 100
    step_size: Any = "robbins_monro"
    num_inducing: Optional[int] = None  # None: GPBSVM's default, min(64, N // 3)
    inducing: str = "kmeans"
    optimize_inducing: Optional[bool] = None  # None: GPBSVM's default (moved from 600 rows on)
    mlii_every: Optional[int] = None  # None: GPBSVM's default (5)
    learning_rate: float = 0.05
    devices: Optional[int] = None


@dataclass
class DefaultGPConfig(SVIConfig):
    """Schema of ``model=gp`` without an ``inference``: ``GPBSVM(inference=None)``, ECM with the
    cross-fitted link on at most 300 training rows and S-BSVM above (``inference_``); the options are
    svi's, and apply where it is chosen."""

    name: str = "default"


@dataclass
class DataConfig:
    """Schema of ``data=<name>``: the dataset and how it is split and scaled."""

    name: str = MISSING
    test_size: float = 0.3
    use_given_split: bool = True
    standardize: bool = True
    use_groups: bool = True
    n: Optional[int] = None


@dataclass
class Config:
    """The whole ``bmm`` configuration."""

    model: Any = MISSING
    inference: Any = MISSING
    data: Any = MISSING
    experiment: Any = None
    seed: int = 0
    precision: str = "float64"
    progress_bar: bool = True
    plots: bool = True
    checkpoint: bool = True
    resume: Optional[str] = None
    smoke: bool = False
    compilation_cache: Optional[str] = "auto"


#: The schema of every option of the ``inference`` group.
INFERENCE = {
    "gibbs": GibbsConfig, "nuts": NUTSConfig, "em": EMConfig, "vb": VBConfig, "ecm": ECMConfig, "fitc": FITCConfig,
    "vi": VIConfig, "svi": SVIConfig,
}


#: The inference of a model job that names none: the estimator's own default ("default": the GP model's
#: ``inference=None``, which chooses by the number of training rows).
DEFAULT_INFERENCE = {"linear": "gibbs", "gp": "default"}
#: The schemas of :data:`DEFAULT_INFERENCE`.
DEFAULT_SCHEMAS = {**INFERENCE, "default": DefaultGPConfig}


def _register() -> None:
    from bayes_maxmargin.configs import register_resolvers

    register_resolvers()
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    cs.store(group="model", name="linear", node=LinearModelConfig)
    cs.store(group="model", name="gp", node=GPModelConfig)
    for name, schema in INFERENCE.items():
        cs.store(group="inference", name=name, node=schema)
    for model, name in DEFAULT_INFERENCE.items():  # the default choice, ${model}_default (config.yaml)
        cs.store(group="inference", name=f"{model}_default", node=DEFAULT_SCHEMAS[name])
    for name in DATASETS:
        cs.store(group="data", name=name, node=DataConfig(name=name))


_register()


#: Caps of a model job's inference options under ``smoke=true``.
SMOKE_INFERENCE = {"num_samples": 50, "num_warmup": 50, "num_chains": 2, "max_iter": 20, "num_inducing": 10,
                   "mlii_steps": 2}


def smoke_inference(inference: dict[str, Any]) -> dict[str, Any]:
    """The inference options of a ``smoke=true`` model job: each option of
    :data:`SMOKE_INFERENCE` capped at its value (None, the estimator's default, becomes the cap)."""
    out = dict(inference)
    for key, cap in SMOKE_INFERENCE.items():
        if key in out:
            out[key] = cap if out[key] is None else min(out[key], cap)
    return out


def _estimator(cfg: DictConfig):
    """The configured estimator. Options of the ``inference`` group that the model does not take
    (e.g. the linear sampler's ``overrelaxation`` under ``model=gp``) are dropped while they keep
    their defaults, and are an error when set. Options left at their default None (``max_iter``,
    ``devices`` of svi) are not passed: the estimator's own default applies; an option set to null
    whose default is a value (``inference.mlii_tol=null``) passes None."""
    from bayes_maxmargin.core.checks import InvalidParameterError
    from bayes_maxmargin.estimators.gp import GPBSVM
    from bayes_maxmargin.estimators.linear import LinearBSVM

    model = OmegaConf.to_container(cfg.model)
    inference = OmegaConf.to_container(cfg.inference)
    cls = {"linear": LinearBSVM, "gp": GPBSVM}[model.pop("name")]
    for prior in ("gamma_prior", "gamma0_prior"):
        if model.get(prior) is not None:
            model[prior] = tuple(model[prior])
    if isinstance(model.get("learn_kernel"), list):
        model["learn_kernel"] = tuple(model["learn_kernel"])
    name = inference.pop("name")
    schema = DEFAULT_SCHEMAS[name]()
    inference = {k: v for k, v in inference.items() if v is not None or getattr(schema, k) is not None}
    accepted = cls().get_params()
    for key in [k for k in inference if k not in accepted]:
        if inference[key] != getattr(schema, key):
            raise InvalidParameterError(
                f"inference.{key} does not apply to model={cfg.model.name} (its {cls.__name__} has no "
                f"{key!r} option)"
            )
        del inference[key]
    if cfg.get("smoke", False):
        inference = smoke_inference(inference)
    return cls(
        inference=None if name == "default" else name,
        **model,
        **inference,
        precision=cfg.precision,
        progress_bar=cfg.progress_bar,
        random_state=cfg.seed,
    )


def _split(ds, cfg: DictConfig):
    """Row indices of the training and test sets."""
    import numpy as np

    from bayes_maxmargin.data import train_test_split_stratified
    from bayes_maxmargin.core.checks import InvalidParameterError

    rows = np.arange(len(ds.y))
    if cfg.data.use_given_split and ds.split is not None:
        return rows[ds.split == "train"], rows[ds.split != "train"]
    size = cfg.data.test_size
    if not 0 < size < 1:
        raise InvalidParameterError(f"Invalid value for data.test_size: {size} (must be the test fraction, in (0, 1))")
    train, test, _, _ = train_test_split_stratified(rows, ds.y, test_size=cfg.data.test_size, random_state=cfg.seed)
    return train, test


def _load(cfg: DictConfig):
    """The dataset of ``cfg.data``; ``data.n`` (rows of a generated dataset) only when set."""
    from bayes_maxmargin.data import load_dataset
    from bayes_maxmargin.core.checks import InvalidParameterError

    n = cfg.data.get("n")
    if n is None:
        return load_dataset(cfg.data.name)
    try:
        return load_dataset(cfg.data.name, n=n)
    except TypeError as err:
        if "unexpected keyword argument" not in str(err):
            raise
        raise InvalidParameterError(
            f"data.n does not apply to data={cfg.data.name} (a fixed dataset); it sets the number of rows "
            "of a generated dataset such as susy_synthetic (or the first rows of susy)"
        ) from None


def run(cfg: DictConfig, output_dir: Path) -> dict[str, float]:
    """Fit the configured estimator, evaluate it on the held-out split and write the outputs.

    Returns
    -------
    dict
        The metrics also written to ``metrics.json``.
    """
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    from bayes_maxmargin.core.kernels import kernel_name
    from bayes_maxmargin.diagnostics import convergence_summary, has_draws
    from bayes_maxmargin.metrics import classification_report_dict

    ds = _load(cfg)
    train, test = _split(ds, cfg)
    X_tr, X_te, y_tr, y_te = ds.X[train], ds.X[test], ds.y[train], ds.y[test]
    log.info("data=%s: %d training and %d test rows, %d features", cfg.data.name, len(train), len(test), ds.X.shape[1])
    if cfg.data.standardize:  # training-set statistics; missing cells stay missing
        scaler = StandardScaler().fit(X_tr)
        X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    X_tr, X_te = _named(X_tr, ds.feature_names), _named(X_te, ds.feature_names)
    clf = _estimator(cfg)
    log.info("fitting %r", clf)
    grouped = ds.groups is not None and cfg.data.use_groups and cfg.model.name == "linear"
    fit_groups, test_groups = ({"groups": ds.groups[train]}, {"groups": ds.groups[test]}) if grouped else ({}, {})
    t0 = time.perf_counter()
    fit_groups.update(_run_io(cfg, clf, output_dir))
    clf.fit(X_tr, y_tr, **fit_groups)
    wall = time.perf_counter() - t0
    log.info("fitted in %.1f s", wall)
    proba = clf.predict_proba(X_te, **test_groups)[:, 1]
    pred = clf.predict(X_te, **test_groups)
    pos = clf.classes_[1]
    metrics = {k: float(v) for k, v in classification_report_dict(y_te, pred, proba, pos).items()}
    draws = has_draws(clf.idata_)
    if draws:
        metrics.update(convergence_summary(clf.idata_))
    metrics.update(
        wall_time_s=wall,
        n_train=int(len(y_tr)),
        n_test=int(len(y_te)),
        dataset=cfg.data.name,
        groups=int(len(clf.groups_)) if grouped else 0,
        model=cfg.model.name,
        inference=getattr(clf, "inference_", clf.inference),
    )
    if getattr(clf, "elbo_", None) is not None and len(clf.elbo_):  # vi, svi (and linear vb, svi)
        metrics.update(elbo=float(clf.elbo_[-1]), n_iter=int(clf.n_iter_))
    if cfg.model.name == "gp":  # the kernel fitted (model.kernel=null: GPBSVM's default) and its scalar parameters
        metrics["kernel"] = kernel_name(clf.kernel_)
        metrics.update({f"kernel_{k}": float(v) for k, v in clf.kernel_params_.items() if np.ndim(v) == 0})
    output_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(output_dir / "idata.nc") as tmp:
        clf.idata_.to_netcdf(str(tmp), engine=NETCDF_ENGINE)
    save(clf, output_dir / "model.bmm", overwrite=True)
    write_json(output_dir / "metrics.json", metrics)
    log.info("metrics: %s", ", ".join(f"{k}={v}" for k, v in metrics.items()))
    if cfg.plots:
        import matplotlib

        matplotlib.use("Agg")
        from bayes_maxmargin import plots

        if "elbo" in metrics:  # no chains: the ELBO trace instead (GP vi and svi, linear svi)
            plots.plot_objective(clf.elbo_, path=output_dir / "elbo.png", label="ELBO")
        elif draws:
            plots.plot_trace(clf.idata_, path=output_dir / "trace.png")
        else:
            log.info("no trace plot: inference=%s has no chains (its idata.nc holds draws of %s)",
                     metrics["inference"], clf.idata_.posterior.attrs.get("approximation", "its approximation"))
        plots.plot_reliability(np.asarray(y_te), proba, pos, path=output_dir / "reliability.png")
    return metrics


def _run_io(cfg: DictConfig, clf: Any, output_dir: Path) -> dict[str, Any]:
    """``checkpoint`` / ``resume`` of the fit: ``<run folder>/checkpoint`` (unless ``checkpoint=false``),
    written after every chunk; ``resume=<folder>`` continues there. Every checkpointed inference
    (``_checkpointed``) has them, for binary and multi-class problems."""
    inference = cfg.inference.name
    checkpointed = type(clf)._checkpointed()
    resume = Path(cfg.resume).expanduser().resolve() if cfg.resume else None
    if inference not in checkpointed and inference != "default":  # "default": ECM or svi, both checkpointed
        why = f"runs without checkpoints (checkpointed: {', '.join(checkpointed)})"
        if resume is not None:
            raise ValueError(f"resume={cfg.resume}: inference={inference} {why}")
        if cfg.checkpoint:
            log.info("no checkpoint: inference=%s %s", inference, why)
        return {}
    if resume is not None and not resume.is_dir():
        raise ValueError(f"resume={cfg.resume}: no checkpoint folder there (the 'checkpoint' folder of an "
                         f"earlier bmm run with inference={inference})")
    return {"resume": resume, "checkpoint": resume or (output_dir / "checkpoint" if cfg.checkpoint else None)}


def _named(X: Any, names: Any) -> Any:
    """A dense ``X`` as a DataFrame with the dataset's feature names (the estimator then keeps them
    as ``feature_names_in_`` and labels its draws and trace plot with them); anything else as is."""
    import numpy as np

    if not isinstance(X, np.ndarray) or names is None or len(names) != X.shape[1] or len(set(names)) != len(names):
        return X
    import pandas as pd

    return pd.DataFrame(X, columns=[str(n) for n in names])


def use_compilation_cache(setting: str | None) -> Path | None:
    """JAX's persistent compilation cache for this ``bmm`` process
    (:func:`bayes_maxmargin.core.compilation.use_compilation_cache`; the default job takes 5.1 s
    instead of 6.9-7.5 s once the cache holds its programs).

    Parameters
    ----------
    setting : str or None
        "auto", a folder, or None (no cache): the ``compilation_cache`` option.

    Warns
    -----
    CompilationCacheWarning
        The folder cannot be created or written (the message names the option); the job runs
        without the cache.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", compilation.CompilationCacheWarning)
        path = compilation.use_compilation_cache(setting)
    for w in caught:
        warnings.warn(f"compilation_cache={setting}: {w.message}; or set compilation_cache=null",
                      compilation.CompilationCacheWarning, stacklevel=2)
    return path


def _print_metrics(metrics: dict[str, Any], output_dir: Path) -> None:
    rows = [
        ("test error", "error"),
        ("balanced error", "balanced_error"),
        ("Brier score", "brier"),
        ("log loss", "log_loss"),
        ("wall time (s)", "wall_time_s"),
        ("max R-hat", "max_rhat"),
        ("min ESS (bulk)", "min_ess_bulk"),
    ]
    print(f"{metrics['model']} / {metrics['inference']} on {metrics['dataset']} "
          f"({metrics['n_train']} train, {metrics['n_test']} test)")
    if "elbo" in metrics:
        rows.append(("final ELBO", "elbo"))
    for label, key in rows:
        if key in metrics:
            print(f"  {label:<16} {metrics[key]:.4f}")
    if "max_rhat" not in metrics:
        print(f"  {'convergence':<16} none to check: inference={metrics['inference']} gives a point estimate, not draws")
    print(f"  outputs in {output_dir}")


def _full_error() -> bool:
    """Whether the user asked for tracebacks (``HYDRA_FULL_ERROR=1``)."""
    import os

    return os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")


def data_dir_message(dataset: str, experiment: str | None = None) -> str:
    """What to do when ``dataset`` (read by ``experiment``, if given) needs the benchmark data
    folder and BMM_DATA_DIR is not set."""
    hint = ""
    if dataset == "breast_cancer":
        hint = " (the breast-cancer data of Raetsch's benchmarks; the built-in breast-cancer data is data=wdbc)"
    who = f"+experiment={experiment} reads the dataset {dataset}{hint}, one" if experiment else f"data={dataset}{hint} is one"
    return (
        f"{who} of the papers' benchmark datasets, which do not ship with the package: "
        f"set BMM_DATA_DIR to the folder that holds them (one sub-folder per dataset, e.g. "
        f"$BMM_DATA_DIR/{dataset}/data.csv.gz with meta.json; docs/reproductions/index.md lists the datasets and "
        f"each folder's PROVENANCE.txt its public source). Built in, no download: "
        f"{', '.join(f'data={n}' for n in BUILT_IN_DATASETS)}; "
        f"{', '.join(f'+experiment={n}' for n in SMOKE_WITHOUT_DATA)} smoke=true."
    )


def error_message(err: BaseException, experiment: str | None = None) -> tuple[str, int]:
    """The one-line message and exit status of an error that ends a ``bmm`` run: 2 for a wrong
    option, missing data or a fit refused for its memory (the user can fix the command), 1 for a
    run that failed."""
    from bayes_maxmargin.core.memory import InsufficientMemoryError
    from bayes_maxmargin.data.datasets import DataDirNotSetError
    from bayes_maxmargin.core.checks import InvalidParameterError

    if isinstance(err, DataDirNotSetError):
        return data_dir_message(getattr(err, "dataset", "?"), experiment), 2
    text = " ".join(str(err).split()) or type(err).__name__
    # an option or a path to correct; a memory refusal names the option to lower
    if isinstance(err, (InvalidParameterError, FileNotFoundError, InsufficientMemoryError)):
        return text, 2
    if isinstance(err, ValueError) and text.startswith("Invalid value for "):  # the library's checks of an option
        return text, 2
    if isinstance(err, ValueError):  # invalid data or settings found during the run
        return text, 1
    return f"{type(err).__name__}: {text} (HYDRA_FULL_ERROR=1 shows the traceback)", 1


def with_option(message: str, cfg: DictConfig) -> str:
    """``message`` of an estimator's check of its parameter ``name`` ("Invalid value for name...",
    "Invalid key ... in name ...") with the command-line option that sets it (``model.name``,
    ``inference.name``, ``data.name`` or the top-level ``name``) appended."""
    import re

    found = re.match(r"Invalid (?:value for|key '[^']*' in) (\w+)(?![\w.])", message)
    if found is None or cfg.get("experiment") is not None:
        return message
    name = found.group(1)
    for group in ("model", "inference", "data"):
        if name in (cfg.get(group) or {}):
            return f"{message} [bmm option {group}.{name}]"
    return f"{message} [bmm option {name}]" if name in cfg else message


@hydra.main(version_base=None, config_path="configs", config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    logging.getLogger("jax").setLevel(logging.WARNING)
    logging.captureWarnings(True)  # the library's warnings (MixingWarning, ...) reach cli.log
    output_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        write_config(output_dir / "config.yaml", cfg)
        use_compilation_cache(cfg.compilation_cache)
        _job(cfg, output_dir)
    except Exception as err:  # noqa: BLE001 - one line for the user; the traceback on request
        if _full_error():
            raise
        experiment = cfg.experiment.get("name") if cfg.get("experiment") is not None else None
        message, status = error_message(err, experiment)
        message = with_option(message, cfg)
        log.info("error: %s", message)
        log.debug("traceback of the error", exc_info=err)  # to cli.log only
        print(f"bmm: error: {message}", file=sys.stderr)
        sys.exit(status)


def _job(cfg: DictConfig, output_dir: Path) -> None:
    if cfg.get("experiment") is not None:
        from bayes_maxmargin.experiments import run as run_experiment

        result = run_experiment(cfg, output_dir)
        print(result.get("table", ""))
        print(f"  outputs in {output_dir}")
        return
    _print_metrics(run(cfg, output_dir), output_dir)


def _valid_keys(node: Any) -> list[str]:
    return sorted(str(k) for k in node.keys()) if isinstance(node, DictConfig) else []


#: The flag after which ``bmm`` still checks its overrides before Hydra starts (every job of the sweep);
#: with any other flag (``--help``, ``--cfg``, ...) Hydra reads them alone.
MULTIRUN_FLAGS = ("-m", "--multirun")
#: A sweep of more jobs than this is checked value by value (each swept value once, the other
#: overrides at their first value), not job by job.
CHECKED_JOBS = 64


def _jobs(overrides: list[str], multirun: bool) -> list[list[str]] | None:
    """The overrides of each job to check: ``overrides``, or for ``--multirun`` those of every job of
    the sweep (:data:`CHECKED_JOBS`); None when a sweep is not a list of values (Hydra's own
    message then)."""
    if not multirun:
        return [overrides]
    import itertools

    from hydra.core.override_parser.overrides_parser import OverridesParser

    choices = []
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.get_key_element()
        if not override.is_sweep_override():
            choices.append([f"{key}={override.get_value_element_as_str()}"])
        elif override.is_discrete_sweep():
            choices.append([f"{key}={value}" for value in override.sweep_string_iterator()])
        else:
            return None
    if math.prod(len(c) for c in choices) <= CHECKED_JOBS:
        return [list(job) for job in itertools.product(*choices)]
    first = [c[0] for c in choices]
    return [first[:i] + [value] + first[i + 1:] for i, c in enumerate(choices) for value in c]


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _override_of(overrides: list[str], key: str) -> str:
    """The override that sets ``key`` (``+key=...`` too), or ``key`` itself."""
    return next((o for o in overrides if o.lstrip("+~").split("=", 1)[0] == key), key)


def _composition_error(err: BaseException, overrides: list[str], compose_without) -> str:
    """One line for an error of composing the configuration: the override, the value and the valid
    choices where there is a list of them."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    cause = err.__cause__ or err
    if isinstance(err, MissingConfigException) and err.options is not None and err.missing_cfg_file:
        group, _, value = str(err.missing_cfg_file).rpartition("/")
        # the <model>_default options of `inference` only stand for the model's default inference
        options = sorted(o for o in err.options if not o.endswith("_default"))
        return (f"Unknown {group} '{value}' ({_override_of(overrides, group)}). Valid choices of {group}: "
                f"{', '.join(options)}.")
    if isinstance(err, OverrideParseException):
        return (f"Cannot read the override '{err.override}': {_one_line(err.message)} (quote a value with "
                "brackets, braces or spaces for the shell, e.g. model.kernel_params='{lengthscale: 2.0}').")
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        key = str(getattr(cause, "full_key", "") or "")
        parent, _, leaf = key.rpartition(".")
        try:
            base = compose_without(key)
            node = OmegaConf.select(base, parent) if parent else base
        except Exception:  # noqa: BLE001 - another override is wrong too: the key alone
            return f"Unknown option '{key}'."
        if not isinstance(node, DictConfig):  # e.g. model.kernel_params.lengthscale=2 while kernel_params is null
            value = _override_of(overrides, key).partition("=")[2]
            return (f"Unknown option '{key}': {parent} is one option, not a group; set it whole, e.g. "
                    f"{parent}={{{leaf}:{value}}}.")
        valid = [k for k in _valid_keys(node) if k != "defaults"]
        where = f"under '{parent}'" if parent else "at the top level"
        return f"Unknown option '{key}'. Valid options {where}: {', '.join(valid)}."
    if isinstance(cause, ValidationError) and getattr(cause, "full_key", None):
        key = str(cause.full_key)
        return f"Invalid value for {key} ({_override_of(overrides, key)}): {str(cause.msg).splitlines()[0]}."
    return f"Cannot compose the configuration from {' '.join(overrides)}: {_one_line(err) or type(err).__name__}."


def _folder_problem(option: str, folder: Any) -> str | None:
    """What keeps ``bmm`` from writing its outputs to ``folder`` (the value of ``option``), or None.
    Nothing is created: a temporary folder made and removed in its deepest existing parent tells
    whether the folders can be created there."""
    import tempfile

    path = Path(str(folder)).expanduser().absolute()
    parent = path
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{option}={folder}: {parent} is a file, not a folder; set {option} to a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".bmm-", dir=parent))
    except OSError as err:
        return (f"{option}={folder}: cannot create folders in {parent} ({err.strerror or err}); set {option} to a "
                "folder you can write to")
    return None


def _precheck(overrides: list[str], multirun: bool = False) -> str | None:
    """Compose the configuration of every job once; on an error, return one line for ``bmm: error:``:
    an unknown option or group choice with the valid ones, an invalid value with the option, an
    output folder that cannot be written, a removal (``~key``)."""
    from hydra import compose, initialize_config_module

    removed = [o for o in overrides if o.startswith("~")]
    if removed:  # the options are typed fields and the groups' choices are needed: nothing can be removed
        key = removed[0][1:].split("=", 1)[0]
        return (f"Cannot remove '{key}' ({removed[0]}): every bmm option has a value; leave the override out for "
                f"its default or set another value ({key}=...).")
    try:
        jobs = _jobs(overrides, multirun)
    except Exception as err:  # noqa: BLE001 - an unreadable override
        return _composition_error(err, overrides, None)
    if jobs is None:
        return None
    with initialize_config_module("bayes_maxmargin.configs", version_base=None):
        for job in jobs:
            try:
                cfg = compose(config_name="config", overrides=job, return_hydra_config=True)
            except Exception as err:  # noqa: BLE001 - any composition error is one line
                return _composition_error(err, job, lambda key, job=job: compose(
                    config_name="config", overrides=[o for o in job if not o.lstrip("+").startswith(key)]))
            option = "hydra.sweep.dir" if multirun else "hydra.run.dir"
            try:
                folder = OmegaConf.select(cfg, option, throw_on_resolution_failure=True)
            except Exception:  # noqa: BLE001 - left to Hydra
                continue
            problem = _folder_problem(option, folder) if folder is not None else None
            if problem:
                return problem
    return None


def _exit_on_signal(signum: int) -> None:
    """End the process as ``signum`` ends it (status 128 + signum in a shell), without the seconds of
    the interpreter's shutdown: the logs and the standard streams flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main() -> None:
    """Entry point of ``bmm``."""
    args = sys.argv[1:]
    flags = [a for a in args if a.startswith("-")]
    if all(f in MULTIRUN_FLAGS for f in flags):
        # "+group=option" overrides (e.g. +experiment=henao_table1) stay: without them the keys they
        # add (experiment.n_folds, ...) would read as unknown
        message = _precheck([a for a in args if "=" in a or a.startswith("~")], multirun=bool(flags))
        if message:
            print(f"bmm: error: {_one_line(message)}", file=sys.stderr)
            sys.exit(2)
    from bayes_maxmargin.engine.checkpoint import Terminated

    try:
        _hydra_main()
    except Terminated as stop:
        # the checkpoint and the draws are written: end as the signal ends a process (status 143 in
        # a shell), without the seconds of the interpreter's shutdown
        _exit_on_signal(stop.signum)
        raise  # the signal is blocked: exit with 128 + its number
    except KeyboardInterrupt as stop:
        # Ctrl-C: one line (where a checkpointed run resumes), then end as SIGINT ends a process (130)
        print(f"bmm: interrupted{': ' + _one_line(stop) if str(stop) else ''}", file=sys.stderr)
        _exit_on_signal(signal.SIGINT)
        raise
