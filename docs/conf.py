"""Sphinx configuration of the mbcore documentation site.

Build (warnings are errors, as in CI)::

    python -m pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

The existing Markdown pages are read with myst-parser.  Two local extensions
(``docs/_ext``) generate pages into ``docs/_generated`` (git-ignored) when the
build starts: the model-file reference from the plugin registry
(``mbcore_reference``) and the gallery, which runs every example of
``examples/`` (``mbcore_gallery``; a failing example or a warning fails the build).
A third draws the integrators' stability regions (``mbcore_stability``, PNGs in
``docs/_generated/stability``, shown by docs/integrators.md); a fourth the gallery of
plot types (``mbcore_plots``, PNGs in ``docs/_generated/plots``, shown by
docs/plotting.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import mbcore  # noqa: E402

project = "mbcore"
author = "mbcore developers"
copyright = "mbcore developers"
release = version = mbcore.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "mbcore_reference",
    "mbcore_gallery",
    "mbcore_stability",
    "mbcore_plots",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# MyST: heading anchors so that links such as functions.md#the-expression-language resolve
myst_heading_anchors = 3
myst_enable_extensions: list[str] = []

# autodoc: the public API (docs/api.rst); docstrings use NumPy-style sections
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True

html_theme = "alabaster"
html_title = f"mbcore {release}"
html_static_path: list[str] = []
