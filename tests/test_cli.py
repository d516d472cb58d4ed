"""The `bmm` command: the default job, options, errors; the README's commands are what CI runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import arviz as az
import pytest

from bayes_maxmargin import load
from bayes_maxmargin.diagnostics import APPROXIMATION_DRAWS

from .conftest import needs_data
from .conftest import run_bmm as bmm

ROOT = Path(__file__).resolve().parents[1]


def bmm_in_process(*args: str, cwd: Path, monkeypatch, capsys) -> tuple[int, str]:
    """Run `bmm` in this process, for errors found before Hydra starts (Hydra's own logging set-up
    would replace pytest's captured streams): exit code and stderr."""
    from bayes_maxmargin.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["bmm", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def test_default_job_writes_everything(tmp_path):
    out = tmp_path / "run"
    res = bmm(f"hydra.run.dir={out}", "inference.num_samples=300", "inference.num_warmup=150", cwd=tmp_path,
              optimised=True)
    assert res.returncode == 0, res.stderr
    for line in ["test error", "balanced error", "Brier score", "log loss", "wall time", "max R-hat", "min ESS"]:
        assert line in res.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dataset"] == "wdbc" and metrics["inference"] == "gibbs"
    assert metrics["error"] < 0.08 and 1.0 <= metrics["max_rhat"] < 1.3 and metrics["min_ess_bulk"] > 20
    idata = az.from_netcdf(str(out / "idata.nc"))
    assert idata.posterior["beta"].shape == (4, 300, 30)
    for png in ["trace.png", "reliability.png"]:
        assert (out / png).stat().st_size > 10_000
    assert (out / "config.yaml").exists()


@needs_data
def test_em_on_a_shared_dataset(tmp_path):
    from bayes_maxmargin.cli import run

    metrics = run(_composed("model=linear", "inference=em", "data=pima", "plots=false"), tmp_path)
    assert metrics["dataset"] == "pima" and metrics["error"] < 0.3
    assert json.loads((tmp_path / "metrics.json").read_text())["error"] == metrics["error"]
    clf = load(tmp_path / "model.bmm")  # the fitted estimator, saved beside the metrics
    assert clf.inference == "em" and clf.coef_.shape == (1, 8)


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bmm: error: "), err
    return lines[0]


@pytest.mark.parametrize("args, expected", [
    (("inference=variational",), ["'variational' (inference=variational)", "ecm, em, fitc, gibbs, nuts, svi, vb, vi."]),
    (("data=no_such_data",), ["'no_such_data' (data=no_such_data)", "acath, arcene", "wdbc, wisconsin."]),
    (("model=unknown",), ["'unknown' (model=unknown)", "Valid choices of model: gp, linear."]),
    (("+experiment=nope",), ["'nope' (+experiment=nope)", "henao_table1", "luts_simulation"]),
    (("--multirun", "seed=0,1", "data=wdbc,nope"), ["'nope' (data=nope)", "susy_synthetic"]),
    (("model.sigma=abc",), ["Invalid value for model.sigma (model.sigma=abc)", "'abc'"]),
    (("model=gp", "model.kernel_params={lengthscale:"), ["'model.kernel_params={lengthscale:'", "quote"]),
    (("model=gp", "model.kernel_params.lengthscale=2"), ["set it whole, e.g. model.kernel_params={lengthscale:2}"]),
    (("seed=0,1",), ["seed=0,1", "--multirun"]),
    (("~model.sigma",), ["Cannot remove 'model.sigma' (~model.sigma)", "model.sigma=..."]),
    (("~seed",), ["Cannot remove 'seed' (~seed)"]),
    (("-m", "~data", "seed=0,1"), ["Cannot remove 'data' (~data)"]),
], ids=["inference", "data", "model", "experiment", "multirun", "type", "syntax", "dict-key", "sweep",
        "remove-option", "remove-top-level", "remove-group"])
def test_a_wrong_choice_or_override_is_one_line_with_the_valid_ones(tmp_path, monkeypatch, capsys, args, expected):
    """Before Hydra starts: exit status 2 and one `bmm: error:` line naming the value and, for a
    config group, every choice it has (the inference group without its internal <model>_default)."""
    code, err = bmm_in_process(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    line = _one_error_line(err)
    assert code == 2
    for text in expected:
        assert text in line, line
    assert "_default" not in line and not list(tmp_path.iterdir())  # no run folder either


def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """hydra.run.dir (hydra.sweep.dir with --multirun) below a regular file, or where no folder can be
    created (/proc): exit status 2, one line naming the option and the folder; nothing is created."""
    (tmp_path / "a_file").write_text("")
    cases = [(("hydra.run.dir=a_file/sub",),
              f"hydra.run.dir=a_file/sub: {tmp_path / 'a_file'} is a file, not a folder"),
             (("hydra.run.dir=/proc/x",), "hydra.run.dir=/proc/x: cannot create folders in /proc"),
             (("-m", "hydra.sweep.dir=/proc/y", "inference=em,vb"), "hydra.sweep.dir=/proc/y: cannot create folders")]
    for args, expected in cases:
        code, err = bmm_in_process(*args, cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
        assert code == 2 and expected in _one_error_line(err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_unknown_key_lists_valid_ones(tmp_path, monkeypatch, capsys):
    code, err = bmm_in_process("inference.num_sample=10", cwd=tmp_path, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    assert "inference.num_sample" in err and "num_samples" in err and "num_warmup" in err


def test_invalid_value_names_the_parameter(tmp_path):
    from bayes_maxmargin.cli import run

    with pytest.raises(ValueError, match=r"num_samples.*-5"):
        run(_composed("inference.num_samples=-5", "plots=false"), tmp_path)


@pytest.fixture(scope="module")
def em_job_twice(tmp_path_factory):
    """`bmm inference=em` run twice with a compilation cache of its own (the suite's shared cache
    unset): the folder of the runs, each run's process and the cache's listing after each run. The
    first run serves test_point_estimate_job_logs_and_skips_the_trace too."""
    tmp = tmp_path_factory.mktemp("em_job")
    cache = tmp / "cache"
    runs, listings = [], []
    for run in ("first", "second"):
        runs.append(bmm("inference=em", f"compilation_cache={cache}", f"hydra.run.dir={tmp / run}", cwd=tmp,
                        unset_env=("JAX_COMPILATION_CACHE_DIR",)))
        listings.append(sorted(p.name for p in cache.iterdir()) if cache.is_dir() else [])
    return tmp, runs, listings


def test_compiled_programs_are_kept_between_runs(em_job_twice):
    """The second run of a job finds every compiled program in the cache and writes nothing new."""
    _, runs, listings = em_job_twice
    for res in runs:
        assert res.returncode == 0, res.stderr
    assert len(listings[0]) >= 5
    assert listings[1] == listings[0]


def test_compilation_cache_settings(tmp_path, monkeypatch):
    from bayes_maxmargin.cli import use_compilation_cache
    from bayes_maxmargin.core.compilation import CompilationCacheWarning

    assert use_compilation_cache(None) is None
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "theirs"))
    assert use_compilation_cache(str(tmp_path / "ours")) is None  # the environment's folder wins
    assert not (tmp_path / "ours").exists()
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    (tmp_path / "a_file").write_text("")
    with pytest.warns(CompilationCacheWarning, match=r"compilation_cache=.*a_file.*compilation_cache=null") as caught:
        assert use_compilation_cache(str(tmp_path / "a_file" / "cache")) is None
    assert len(caught) == 1


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```")[1]
    return [line.strip() for line in block.splitlines()[1:] if line.strip() and not line.startswith("#")]


def test_ci_runs_the_readme_commands():
    commands = _readme_commands()
    assert len(commands) == 2 and "bmm" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command in ci, f"{command!r} is not run verbatim by .ci/run"


def test_readme_quick_start_runs(capsys):
    """The README's quick-start snippet runs as written."""
    text = (ROOT / "README.md").read_text()
    snippet = text.split("## Quick start", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    exec(compile(snippet, "README quick start", "exec"), {})
    printed = capsys.readouterr().out
    assert "intercept" in printed and "r_hat" in printed


def test_gp_ecm_job(tmp_path):
    """`bmm model=gp inference=ecm` fits the GP Bayesian SVM (here on a subsample-sized budget)."""
    from bayes_maxmargin.cli import run

    out = tmp_path / "run"
    run(_composed("model=gp", "inference=ecm", "inference.max_iter=20", "inference.mlii_every=10",
                  "inference.mlii_steps=5", "plots=false"), out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "gp" and metrics["inference"] == "ecm" and metrics["error"] < 0.1
    idata = az.from_netcdf(str(out / "idata.nc"))
    # draws of f from its Gaussian at the mode; the ML-II kernel parameters are points (constant_data)
    assert idata.posterior["f"].shape[:2] == APPROXIMATION_DRAWS and "lengthscale" in idata.constant_data


def test_gp_job_without_inference_reports_the_method_gpbsvm_chose(tmp_path):
    """`bmm model=gp` on 210 training rows: GPBSVM(inference=None) chooses ECM with the cross-fitted link,
    and the metrics and the saved model name that choice."""
    from bayes_maxmargin import load
    from bayes_maxmargin.cli import run

    out = tmp_path / "run"
    metrics = run(_composed("model=gp", "data=susy_synthetic", "data.n=300", "inference.max_iter=20",
                            "plots=false"), out)
    assert metrics["inference"] == "ecm" and metrics["n_train"] == 210
    model = load(out / "model.bmm")
    assert model.inference is None and model.inference_ == "ecm" and model.link_input_ == "margin"


def test_option_of_another_model_is_an_error(tmp_path):
    from bayes_maxmargin.cli import run

    with pytest.raises(ValueError, match="inference.overrelaxation does not apply to model=gp"):
        run(_composed("model=gp", "inference=gibbs", "inference.overrelaxation=0.5", "plots=false"), tmp_path)


def _composed(*overrides: str):
    """The ``bmm`` configuration for ``overrides``, composed without starting a Hydra job."""
    from hydra import compose, initialize_config_module

    import bayes_maxmargin.cli  # noqa: F401  (registers the schemas)

    with initialize_config_module(config_module="bayes_maxmargin.configs", version_base=None):
        return compose("config", overrides=list(overrides))


@needs_data
def test_grouped_dataset_fits_random_intercepts(tmp_path):
    """`bmm inference=vb data=toenail`: the patient column becomes a random intercept."""
    from bayes_maxmargin.cli import run

    metrics = run(_composed("inference=vb", "data=toenail", "plots=false"), tmp_path)
    assert metrics["groups"] > 200 and metrics["balanced_error"] < 0.3
    metrics = run(_composed("inference=vb", "data=toenail", "data.use_groups=false", "plots=false"), tmp_path)
    assert metrics["groups"] == 0


@needs_data
def test_missing_predictors_job(tmp_path):
    """`bmm inference=vb model.prior=penalty model.missing=model data=acath`: NaN entries of the
    training and test sets are modelled, not dropped."""
    from bayes_maxmargin.cli import run

    metrics = run(_composed("inference=vb", "model.prior=penalty", "model.missing=model", "data=acath",
                            "plots=false"), tmp_path)
    assert metrics["n_test"] + metrics["n_train"] == 3504 and metrics["balanced_error"] < 0.4


# ---------------------------------------------------------------- Wenzel et al. (2017): vi and svi
def test_svi_schema_and_data_n():
    """`bmm model=gp inference=svi data=susy_synthetic data.n=5000000` composes into S-BSVM with the
    estimator's defaults for what is left at None, progress reporting on, and n for the loader."""
    from bayes_maxmargin import GPBSVM
    from bayes_maxmargin.cli import _estimator

    cfg = _composed("model=gp", "inference=svi", "data=susy_synthetic", "data.n=5000000")
    assert cfg.data.n == 5_000_000 and cfg.data.name == "susy_synthetic"
    assert cfg.inference.max_iter is None and cfg.inference.devices is None
    clf = _estimator(cfg)
    assert isinstance(clf, GPBSVM) and clf.inference == "svi" and clf.progress_bar
    params = clf.get_params()
    assert params["max_iter"] is None and params["devices"] is None
    assert params["batch_size"] == 100 and params["step_size"] == "robbins_monro"
    assert params["inducing"] == "kmeans" and params["optimize_inducing"] is None
    assert params["num_inducing"] is None and params["mlii_every"] is None and params["kernel"] is None  # the estimator's defaults
    cfg = _composed("model=gp", "inference=svi", "inference.step_size=0.05", "inference.max_iter=500",
                    "inference.devices=1", "inference.inducing=random")
    params = _estimator(cfg).get_params()
    assert params["step_size"] == 0.05 and params["max_iter"] == 500 and params["devices"] == 1
    assert params["inducing"] == "random"
    assert _estimator(_composed("model=gp", "inference=svi", "inference.step_size=adaptive")).step_size == "adaptive"
    assert _composed("data=wdbc").data.n is None


def test_a_model_job_without_inference_takes_the_estimators_default():
    """`bmm` is the linear model's Gibbs sampler and `bmm model=gp` GPBSVM()'s default choice (not the full-GP
    Gibbs sampler); a named inference still wins, over the command line and in a sweep."""
    from bayes_maxmargin import GPBSVM, LinearBSVM
    from bayes_maxmargin.cli import DEFAULT_INFERENCE, _estimator

    assert DEFAULT_INFERENCE == {"linear": LinearBSVM().inference, "gp": "default"} and GPBSVM().inference is None
    assert _estimator(_composed()).inference == "gibbs"
    gp = _composed("model=gp")
    assert gp.inference.name == "default" and _estimator(gp).inference is None
    assert _estimator(_composed("model=gp", "inference.num_inducing=8")).num_inducing == 8
    assert _estimator(_composed("model=gp", "inference=ecm")).inference == "ecm"
    assert _estimator(_composed("model=linear", "inference=em")).inference == "em"


def test_vi_and_ecm_schemas_pass_their_max_iter():
    """B-BSVM gets its sweeps and tolerance; ECM still gets the paper's 200 iterations explicitly."""
    from bayes_maxmargin.cli import _estimator

    vi = _estimator(_composed("model=gp", "inference=vi", "inference.max_iter=50"))
    assert vi.inference == "vi" and vi.max_iter == 50 and vi.tol == 1e-8
    ecm = _estimator(_composed("model=gp", "inference=ecm"))
    assert ecm.inference == "ecm" and ecm.max_iter == 200 and ecm.mlii_every == 20
    fitc = _estimator(_composed("model=gp", "inference=fitc"))
    assert fitc.max_iter == 200 and fitc.inducing == "kmeans"


def test_linear_svi_schema():
    """`model=linear inference=svi`: the linear model's SVI (Sec. 4.5) takes the minibatch options;
    its own default max_iter applies; the GP-only options are an error when set."""
    import pytest

    from bayes_maxmargin import LinearBSVM
    from bayes_maxmargin.cli import _estimator
    from bayes_maxmargin.core.checks import InvalidParameterError

    clf = _estimator(_composed("inference=svi", "inference.batch_size=32", "inference.step_size=0.1"))
    assert isinstance(clf, LinearBSVM) and clf.inference == "svi"
    assert clf.batch_size == 32 and clf.step_size == 0.1 and clf.max_iter == LinearBSVM().max_iter
    with pytest.raises(InvalidParameterError, match="inference.num_inducing does not apply to model=linear"):
        _estimator(_composed("inference=svi", "inference.num_inducing=10"))


def test_data_n_of_a_fixed_dataset_is_an_error(tmp_path):
    import pytest

    from bayes_maxmargin.cli import _load
    from bayes_maxmargin.core.checks import InvalidParameterError

    assert _load(_composed("data=susy_synthetic", "data.n=300")).X.shape == (300, 18)
    with pytest.raises(InvalidParameterError, match="data.n does not apply to data=wdbc"):
        _load(_composed("data=wdbc", "data.n=100"))


def test_gp_svi_job(tmp_path, capsys):
    """`bmm model=gp inference=svi data=susy_synthetic data.n=2000` end to end, on a few hundred steps."""
    from bayes_maxmargin.cli import _print_metrics, run

    out = tmp_path / "run"
    metrics = run(_composed("model=gp", "inference=svi", "data=susy_synthetic", "data.n=2000", "inference.max_iter=100",
                            "inference.num_inducing=16", "inference.batch_size=50", "precision=float32"), out)
    _print_metrics(metrics, out)
    printed = capsys.readouterr().out
    for line in ["gp / svi on susy_synthetic (1400 train, 600 test)", "test error", "final ELBO"]:
        assert line in printed
    assert json.loads((out / "metrics.json").read_text())["error"] == metrics["error"]
    assert metrics["inference"] == "svi" and metrics["n_iter"] == 100 and metrics["error"] < 0.4
    # GPBSVM's default from 600 rows: ARD + Constant, whose scalar parameters the metrics hold
    assert metrics["kernel"] == "ARD() + Constant()" and metrics["kernel_k2__variance"] > 0
    assert "kernel_k1__lengthscales" not in metrics  # one per feature: not a metric
    idata = az.from_netcdf(str(out / "idata.nc"))
    assert idata.posterior["u"].shape == (*APPROXIMATION_DRAWS, 16) and idata.sample_stats["elbo"].shape == (1, 1, 20)
    assert (out / "elbo.png").stat().st_size > 5_000 and not (out / "trace.png").exists()


def test_gibbs_job_checkpoints_and_resumes(tmp_path):
    """`bmm resume=<run>/checkpoint` continues the checkpointed chains: the same draws as the run."""
    import numpy as np

    from bayes_maxmargin.cli import run

    cfg = ("inference.num_samples=30", "inference.num_warmup=20", "inference.num_chains=2", "plots=false")
    first = run(_composed(*cfg), tmp_path / "a")
    ckpt = tmp_path / "a" / "checkpoint"
    assert (ckpt / "checkpoint.npz").exists() and (ckpt / "idata.nc").exists()
    again = run(_composed(*cfg, f"resume={ckpt}"), tmp_path / "b")
    assert again["error"] == first["error"] and again["brier"] == first["brier"]
    a, b = (az.from_netcdf(str(tmp_path / d / "idata.nc")) for d in "ab")
    np.testing.assert_array_equal(a.posterior["beta"].values, b.posterior["beta"].values)
    with pytest.raises(ValueError, match="no checkpoint folder there"):
        run(_composed(*cfg, f"resume={tmp_path / 'none'}"), tmp_path / "c")


def test_missing_data_folder_is_one_line_saying_what_to_set(tmp_path, monkeypatch):
    """No BMM_DATA_DIR: `bmm data=pima` (and an experiment's smoke run on benchmark data) end in one
    line naming BMM_DATA_DIR and what runs without it, exit status 2, no traceback; the
    traceback is in cli.log, and on the console with HYDRA_FULL_ERROR=1."""
    from bayes_maxmargin.cli import error_message
    from bayes_maxmargin.data import load_dataset
    from bayes_maxmargin.data.datasets import DataDirNotSetError

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    out = tmp_path / "pima"
    res = bmm("data=pima", f"hydra.run.dir={out}", "compilation_cache=null", cwd=tmp_path, unset_env=("BMM_DATA_DIR",))
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bmm: error: data=pima "), res.stderr
    assert "BMM_DATA_DIR" in lines[0] and "data=wdbc" in lines[0] and "luts_simulation" in lines[0]
    assert "Traceback" in (out / "cli.log").read_text()
    monkeypatch.delenv("BMM_DATA_DIR", raising=False)
    for name, experiment, expected in [("breast_cancer", None, "the built-in breast-cancer data is data=wdbc"),
                                       ("crabs", "henao_table1", "+experiment=henao_table1 reads the dataset crabs")]:
        with pytest.raises(DataDirNotSetError) as info:
            load_dataset(name)
        message, status = error_message(info.value, experiment)
        assert status == 2 and expected in message and "BMM_DATA_DIR" in message
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    res = bmm("data=pima", f"hydra.run.dir={tmp_path / 'full'}", cwd=tmp_path, unset_env=("BMM_DATA_DIR",))
    assert res.returncode != 0 and "Traceback" in res.stderr and "DataDirNotSetError" in res.stderr


def test_help_describes_the_command_and_the_data(tmp_path):
    res = bmm("--help", cwd=tmp_path)
    assert res.returncode == 0
    assert res.stdout.startswith("bmm: fit a Bayesian SVM")
    for text in ("Examples:", "bmm inference=em", "+experiment=luts_simulation smoke=true", "BMM_DATA_DIR",
                 "HYDRA_FULL_ERROR=1", "== Configuration groups =="):
        assert text in res.stdout, text


def test_point_estimate_job_logs_and_skips_the_trace(em_job_twice):
    """EM: no "max R-hat nan" and no empty trace plot, but a line saying there are no draws; the
    coefficients carry the dataset's feature names; cli.log holds the run's steps."""
    from bayes_maxmargin.data import load_dataset

    tmp, (res, _), _ = em_job_twice
    out = tmp / "first"
    assert res.returncode == 0, res.stderr
    assert "nan" not in res.stdout and "point estimate, not draws" in res.stdout
    assert not (out / "trace.png").exists() and (out / "reliability.png").exists()
    metrics = json.loads((out / "metrics.json").read_text())
    assert "max_rhat" not in metrics
    names = [str(n) for n in load_dataset("wdbc").feature_names]
    idata = az.from_netcdf(str(out / "idata.nc"))
    assert list(idata.posterior["beta"].coords["feature"].values) == names
    log_text = (out / "cli.log").read_text()
    for text in ("data=wdbc: 398 training and 171 test rows", "fitting LinearBSVM", "fitted in", "metrics: error="):
        assert text in log_text, log_text


# ---------------------------------------------------------------- every estimator option from the command line
#: A value other than the default for every option of the model and inference schemas: the override's text
#: and the estimator argument it must give (dicts and lists are given whole, in Hydra's syntax).
OPTION_VALUES = {
    "sigma": ("2.5", 2.5), "intercept_scale": ("null", None), "fit_intercept": ("false", False), "gamma": ("0.5", 0.5),
    "gamma_prior": ("[3,2]", (3.0, 2.0)), "gamma0": ("0.1", 0.1), "gamma0_prior": ("[2,10]", (2.0, 10.0)),
    "prior": ("penalty", "penalty"),
    "rho": ("0.05", 0.05),
    "A_u": ("0.5", 0.5), "B_u": ("0.25", 0.25), "missing": ("model", "model"), "kernel": ("ard", "ard"),
    "kernel_params": ("{lengthscale:2.0,amplitude:0.5}", {"lengthscale": 2.0, "amplitude": 0.5}),
    "learn_kernel": ("[lengthscale]", ("lengthscale",)), "kernel_prior_scale": ("0.5", 0.5), "jitter": ("1e-5", 1e-5),
    "calibrate": ("false", False), "num_samples": ("123", 123), "num_warmup": ("45", 45), "num_chains": ("3", 3),
    "thin": ("2", 2), "overrelaxation": ("0.5", 0.5), "marginal_moves": ("false", False),
    "theta_sampler": ("surrogate", "surrogate"), "max_iter": ("77", 77), "tol": ("1e-6", 1e-6),
    "solver": ("fixed_point", "fixed_point"), "accelerate": ("false", False), "mlii_every": ("5", 5),
    "mlii_steps": ("3", 3), "mlii_tol": ("null", None), "mlii_criterion": ("loo", "loo"),
    "optimizer": ("adam", "adam"), "learning_rate": ("0.1", 0.1),
    "num_inducing": ("30", 30), "inducing": ("random", "random"), "optimize_inducing": ("false", False),
    "batch_size": ("50", 50), "step_size": ("adaptive", "adaptive"), "devices": ("1", 1),
}
#: Estimator arguments set by top-level options (or the group choice) instead: the option and a value.
TOP_LEVEL = {"inference": None, "precision": ("precision", "float32"), "random_state": ("seed", 5),
             "progress_bar": ("progress_bar", False)}


def test_every_estimator_option_can_be_set_from_the_command_line():
    """Every argument of LinearBSVM and GPBSVM (each one documented in its docstring) is a model.*,
    inference.* or top-level option, and each schema field reaches the estimator with the value set
    (null where the default is a value: inference.mlii_tol=null is the paper's schedule)."""
    from dataclasses import fields

    from bayes_maxmargin import GPBSVM, LinearBSVM
    from bayes_maxmargin.cli import INFERENCE, GPModelConfig, LinearModelConfig, _estimator

    top = [f"{option}={str(value).lower()}" for option, value in filter(None, TOP_LEVEL.values())]
    for model, cls, schema in (("linear", LinearBSVM, LinearModelConfig), ("gp", GPBSVM, GPModelConfig)):
        accepted, reached = cls().get_params(), set()
        for inference in (["gibbs", "em", "nuts", "vb", "svi"] if model == "linear" else
                          ["ecm", "fitc", "gibbs", "nuts", "vi", "svi"]):
            names = [f.name for f in fields(schema) if f.name != "name"]
            names += [f.name for f in fields(INFERENCE[inference]) if f.name != "name" and f.name in accepted]
            group = {f.name: "model" for f in fields(schema)}
            overrides = [f"{group.get(n, 'inference')}.{n}={OPTION_VALUES[n][0]}" for n in names]
            params = _estimator(_composed(f"model={model}", f"inference={inference}", *overrides, *top)).get_params()
            for n in names:
                assert params[n] == OPTION_VALUES[n][1], (model, inference, n, params[n])
            assert params["inference"] == inference
            assert all(params[arg] == value for arg, (_, value) in
                       ((a, v) for a, v in TOP_LEVEL.items() if v is not None))
            reached.update(names)
        assert set(accepted) - reached == set(TOP_LEVEL), cls


def test_calibrate_takes_a_bool_or_cv_from_the_command_line():
    """model.calibrate is true, false or cv (the link from refits on five folds), as GPBSVM's calibrate."""
    from bayes_maxmargin.cli import _estimator

    for text, value in (("cv", "cv"), ("true", True), ("null", None)):
        assert _estimator(_composed("model=gp", "inference=ecm", f"model.calibrate={text}")).calibrate == value


@pytest.mark.parametrize("args, expected", [
    (("model=gp", "inference=ecm", "model.kernel_params={lengthscale:-1.0}"),
     "Invalid value for kernel_params['lengthscale']: -1.0 (must be a real number > 0.0) "
     "[bmm option model.kernel_params]"),
    (("model=gp", "inference=ecm", "model.kernel_params={foo:1}"), "Invalid key 'foo' in kernel_params"),
    (("model=gp", "model.kernel=foo"), "Invalid value for kernel: 'foo'"),
    (("model=gp", "inference=ecm", "model.learn_kernel=[foo]"), "[bmm option model.learn_kernel]"),
    (("model.gamma_prior=[1]",), "[bmm option model.gamma_prior]"),
    (("inference=em", "inference.solver=magic"), "Invalid value for solver: 'magic'"),
    (("model=gp", "inference=svi", "inference.step_size=fast"), "[bmm option inference.step_size]"),
    (("precision=float16",), "[bmm option precision]"),
    (("data.test_size=1.5",), "Invalid value for data.test_size: 1.5"),
], ids=["kernel_params", "kernel_params-key", "kernel", "learn_kernel", "gamma_prior", "solver", "step_size",
        "precision", "test_size"])
def test_an_invalid_value_is_an_option_error(tmp_path, args, expected):
    """An invalid value that composes (the estimator or the loader finds it): exit status 2 and a
    message naming the option, as _hydra_main prints it."""
    from bayes_maxmargin.cli import error_message, run, with_option

    cfg = _composed(*args, "plots=false", "progress_bar=false", "smoke=true")
    with pytest.raises(ValueError) as info:
        run(cfg, tmp_path)
    message, status = error_message(info.value)
    message = with_option(message, cfg)
    assert status == 2 and expected in message and "\n" not in message, message


def test_a_memory_refusal_is_an_option_error(tmp_path, monkeypatch):
    """A fit the memory guard refuses (here ECM's dense N x N matrices on 3000 rows under 50 MB) ends
    with exit status 2, like a wrong option: its one line names the size parameter to lower."""
    from bayes_maxmargin.cli import error_message, run
    from bayes_maxmargin.core.memory import MEMORY_ENV, InsufficientMemoryError

    monkeypatch.setenv(MEMORY_ENV, "5e7")
    cfg = _composed("model=gp", "inference=ecm", "data=susy_synthetic", "data.n=3000", "plots=false",
                    "progress_bar=false")
    with pytest.raises(InsufficientMemoryError) as info:
        run(cfg, tmp_path)
    message, status = error_message(info.value)
    assert status == 2 and "N = " in message and "\n" not in message, message


def test_kernel_params_from_the_command_line():
    """`bmm model=gp model.kernel_params={lengthscale:2.0}` (a dict set whole; ARD: a list) composes (the
    check bmm runs before Hydra passes it) and reaches GPBSVM as given."""
    from bayes_maxmargin.cli import _estimator, _precheck

    for args, expected in [(("model.kernel_params={lengthscale:2.0}",), {"lengthscale": 2.0}),
                           (("model.kernel=ard", "model.kernel_params={lengthscales:[1.0,2.0]}"),
                            {"lengthscales": [1.0, 2.0]})]:
        assert _precheck(["model=gp", *args]) is None
        assert _estimator(_composed("model=gp", *args)).kernel_params == expected
