"""The Sphinx API reference builds from the docstrings without a single warning, and covers every
module of the package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "bayes_maxmargin"


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


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install '.[test]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # the dummy builder reads and resolves everything (autodoc, napoleon, references) but writes nothing
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-j", "1", "-b", "dummy",
         str(DOCS), str(tmp_path / "build")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, f"sphinx-build failed or warned:\n{proc.stdout}\n{proc.stderr}"
