"""The documentation site builds without a single warning, covers every module of the package, and
every public class and function of the package has a docstring example that runs."""

from __future__ import annotations

import doctest
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bayes_maxmargin

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "bayes_maxmargin"
#: The public API: the top-level names (the estimators among them), the version string aside.
PUBLIC = sorted(set(bayes_maxmargin.__all__) - {"__version__"})


def _modules() -> set[str]:
    """Every module of the package that has code (empty namespace ``__init__`` files aside)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py" and not path.read_text(encoding="utf-8").strip():
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_module_has_an_api_page() -> None:
    documented = set()
    for rst in (DOCS / "api").glob("*.rst"):
        documented |= set(re.findall(r"^\.\. automodule:: (\S+)", rst.read_text(encoding="utf-8"), re.M))
    missing = _modules() - documented - {"bayes_maxmargin.configs", "bayes_maxmargin._version"}
    assert not missing, f"modules without an automodule entry in docs/api/: {sorted(missing)}"


def test_estimators_are_public() -> None:
    from bayes_maxmargin import estimators

    assert set(estimators.__all__) <= set(PUBLIC)


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    """The html site (theme, MyST pages, notebooks through myst-nb, autodoc) builds with warnings as
    errors. The notebooks are rendered as stored, never executed here: ``tests/test_notebooks.py``
    runs them with small settings."""
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install '.[test]')")
    pytest.importorskip("myst_nb", reason="myst-nb is not installed (pip install '.[test]')")
    pytest.importorskip("pydata_sphinx_theme", reason="pydata-sphinx-theme is not installed (pip install '.[test]')")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "BMM_DOCS_NB_EXECUTION": "off",
    }
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-j", "1", "-b", "html",
         str(DOCS), str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 0, f"sphinx-build failed or warned:\n{proc.stdout}\n{proc.stderr}"
    for page in ("index", "getting_started", "user_guide/linear", "user_guide/gp", "user_guide/luts",
                 "user_guide/factor", "user_guide/projection", "performance", "changelog",
                 "notebooks/quickstart", "api/estimators"):
        assert (out / f"{page}.html").is_file(), f"{page}.html was not written"
    # the notebooks are rendered as notebooks (their code cells), not copied as raw JSON
    assert "LinearBSVM" in (out / "notebooks" / "quickstart.html").read_text(encoding="utf-8")
    # the figures stored in the notebooks are on their pages (the quick start stores its figures)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        figures = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        page = (out / "notebooks" / f"{path.stem}.html").read_text(encoding="utf-8")
        assert page.count("<img") >= figures, f"{path.name}: {figures} figures stored, fewer on its page"
        assert path.stem != "quickstart" or figures > 0, "the quick start is stored without its figures"
    # the reproduction pages show the benchmark figures they reference
    assert (out / "_images" / "wenzel_fig1.png").is_file()


@pytest.mark.parametrize("name", PUBLIC)
def test_public_docstring_has_an_example_that_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    obj = getattr(bayes_maxmargin, name)
    assert re.search(r"^\s*Examples\n\s*-{8}\n", obj.__doc__ or "", re.M), f"{name} has no Examples section"
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, name, globs={}) if t.examples]
    assert tests, f"the Examples section of {name} has no >>> example"
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, f"the example of {name} fails:\n{report.getvalue()}"


def test_architecture_guide_code_runs(tmp_path: Path) -> None:
    """The architecture guide's code blocks, its worked example of a new inference method among them,
    run as a reader would paste them, in one fresh process (their own asserts check the outcome: the
    method is fitted, named in ``idata_`` and calibrated)."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "architecture.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    script = tmp_path / "guide.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "MPLBACKEND": "Agg"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'lengthscale'" in run.stdout
