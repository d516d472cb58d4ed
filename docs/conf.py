"""Sphinx configuration of the bayes_maxmargin documentation (API reference from the docstrings).

Build with ``sphinx-build -W --keep-going -b html docs docs/_build/html``.
"""

from __future__ import annotations

import os
import sys
import warnings

sys.path.insert(0, os.path.abspath(".."))
warnings.filterwarnings("ignore", message="ArviZ is undergoing", category=FutureWarning)

import bayes_maxmargin  # noqa: E402

project = "bayes_maxmargin"
author = "bayes_maxmargin developers"
copyright = "bayes_maxmargin developers"
release = version = bayes_maxmargin.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc sections already give the types
autodoc_inherit_docstrings = False  # scikit-learn's inherited docstrings are not numpydoc-clean here
autodoc_preserve_defaults = True
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []
napoleon_use_ivar = True  # Attributes sections as fields: NamedTuple fields are not described twice


def _skip_member(app, what, name, obj, skip, options):  # noqa: ANN001, ARG001
    """Leave out NamedTuple field accessors (their class's Attributes section describes them) and
    scikit-learn's generated metadata-routing setters."""
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Alias for field number") or (name.startswith("set_") and name.endswith("_request")):
        return True
    return None


def setup(app):  # noqa: ANN001, ANN201
    app.connect("autodoc-skip-member", _skip_member)
