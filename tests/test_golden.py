"""Golden fixtures: saved files of an earlier commit still load and predict as they did, and every
fit still gives the same draws and predictions, to the rounding of the machine it runs on.

``tests/data/make_golden.py`` defines the cases (``CASES``: estimator, constructor arguments, data)
and wrote, with the code of one commit, ``tests/data/saved/<name>.bmm`` and the outputs and posterior
draws of each fit (``golden.npz``, ``golden.json``). Two checks per case:

* ``test_saved_file_predicts_as_golden``: :func:`bayes_maxmargin.load` reads the stored file, the
  estimator has the case's class and constructor arguments, its posterior draws equal the stored ones
  exactly (stored arrays) and its predictions (``predict_latent``, ``predict_proba``,
  ``decision_function``, ``predict``, ``transform``) are the golden ones to 1e-9 of each output's
  largest magnitude (``make_golden.LOAD_RTOL``, derived there from the condition numbers of the
  matrices those predictions solve with), with the same shapes and dtypes;
* ``test_refit_reproduces_golden``: the case refitted from its golden.json entry on the same data
  reproduces the stored outputs and draws (for ``make_golden.REFIT_REFERENCE``, those re-recorded in
  ``refit.npz``) to 100 times the change that one rounding of its inputs makes to each array, measured
  by refitting on perturbed inputs under the same seed (``make_golden.PROBE_FACTOR``): deterministic
  fits and the samplers whose chains a rounding does not send down another path alike. The short NUTS
  runs whose draws one rounding moves entirely (``make_golden.CHAOTIC_REFITS``) are compared bit for
  bit on the platform that wrote their draws (CPU model and jaxlib, ``make_golden.platform_fingerprint``)
  and skipped elsewhere, saying so.

No comparison of computed numbers is bit for bit across machines: XLA:CPU compiles for the machine's
instruction set, OpenBLAS and LAPACK pick kernels by CPU, and both change with jaxlib, so the last bits
are the machine's. The values still depend on how XLA compiles the programs: the fixtures were written,
as these checks run, with ``jax_disable_most_optimizations`` on and one XLA:CPU thread
(``tests/conftest.py``), and with the package's per-program XLA options
(``bayes_maxmargin.core.compilation``) settled under that setting. Those options are settled once per
process, at the package's first compiled call, and a pytest worker that ran the ``xla_optimized`` tests
of ``tests/test_distributions.py`` first has them settled with LLVM's optimisation level 1. So the
checks run in one fresh Python process per test run (``make_golden.py --check``, started by the
``report`` fixture for the checks selected in this session), and each test reports its own result.

A refit compiles its own programs: only the fits of about a second are in the default suite, every
other refit is ``extended`` (``-m extended``); the loading checks all run by default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import bayes_maxmargin as bmm

from .data import make_golden as golden

# one worker runs every check of this module: one subprocess for all of them
pytestmark = pytest.mark.xdist_group("golden")

META, _ = golden.load_golden()
CASES = META["cases"]
SAVED_FILES = sorted(p.stem for p in golden.SAVED_DIR.glob("*.bmm"))
#: Longest run of the checking process: every check, refits and their probe refits included, takes about
#: 5 minutes on 2 busy cores (kept under tests/conftest.py's HANG_TIMEOUT_S).
CHECK_TIMEOUT_S = 840

#: Refits that run in the default suite (about a second each, compilation included); every other refit
#: is extended.
DEFAULT_REFITS = frozenset({
    "LinearBSVM-em",
    "LinearBSVM-em-gamma-prior",
    "LinearBSVM-vb",
    "LinearBSVM-vb-sweeps",
    "LinearBSVM-vb-penalty",
    "LinearBSVM-vb-mixed",
    "GPBSVM-vi-poly",
    "GPBSVM-svi-random-fixed",
})
_KIND = {"test_saved_file_predicts_as_golden": "load", "test_refit_reproduces_golden": "refit"}


@pytest.fixture(scope="module")
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Run the checks of this module selected in this session in one fresh process; their results
    by ``kind:NAME``, and the process."""
    keys = [f"{_KIND[item.originalname]}:{item.callspec.params['name']}" for item in request.session.items
            if item.module is request.module and item.originalname in _KIND]
    path = tmp_path_factory.mktemp("golden") / "report.json"
    package = Path(bmm.__file__).resolve()
    # the same bayes_maxmargin as this process (not an installed one), the environment of conftest.py
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(package.parents[1]),
                                                                      os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, str(Path(golden.__file__).resolve()), "--expect-package", str(package),
         "--check", str(path), *keys],
        check=False, env=env, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S,
    )
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return results, proc


def _result(report, key: str) -> None:
    results, proc = report
    if key not in results:
        pytest.fail(f"no result for {key}: the checking process exited with {proc.returncode}\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}", pytrace=False)
    if not results[key]["ok"]:
        pytest.fail(results[key]["message"], pytrace=False)
    if results[key].get("skipped"):
        pytest.skip(results[key]["message"])


def test_fixtures_match_the_cases_and_the_test_setup():
    """golden.json holds exactly the cases of make_golden.py, with a .bmm for each saved one, and was
    written under the numerical setup of the tests."""
    assert CASES == {c["name"]: golden.case_record(c) for c in golden.CASES}
    assert SAVED_FILES == sorted(name for name, record in CASES.items() if record["saved"])
    env = META["environment"]
    assert env["jax_disable_most_optimizations"] is True
    assert jax.config.read("jax_disable_most_optimizations") is True
    assert "--xla_cpu_multi_thread_eigen=false" in env["XLA_FLAGS"]
    assert "--xla_cpu_multi_thread_eigen=false" in os.environ.get("XLA_FLAGS", "")


@pytest.mark.parametrize("name", SAVED_FILES)
def test_saved_file_predicts_as_golden(report, name):
    _result(report, f"load:{name}")


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[] if name in DEFAULT_REFITS else [pytest.mark.extended]) for name in CASES
])
def test_refit_reproduces_golden(report, name):
    _result(report, f"refit:{name}")
