"""Sphinx configuration of the bayes_maxmargin documentation site.

Build with ``python -m sphinx -W -b html docs docs/_build/html``. The pages are MyST Markdown, the
API reference comes from the docstrings (autodoc, numpydoc through napoleon), and the notebooks of
``notebooks/`` (linked as ``docs/notebooks``) are rendered by myst-nb as they are stored, without
executing them; ``BMM_DOCS_NB_EXECUTION=auto`` executes them at full size during the build instead.
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

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "myst_nb"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("BMM_DOCS_NB_EXECUTION", "off")  # the test suite runs them small
nb_execution_timeout = 1800
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc sections already give the types
autodoc_inherit_docstrings = False  # scikit-learn's inherited docstrings are not numpydoc-clean here
autodoc_preserve_defaults = True
exclude_patterns = ["_build", "notebooks/README.md", "**.ipynb_checkpoints"]
html_theme = "pydata_sphinx_theme"
html_title = f"bayes_maxmargin {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 8,
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"index": [], "changelog": []}
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
