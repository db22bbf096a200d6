"""Shared by the docs extensions that draw into ``docs/_generated/<subdir>`` when the
build starts (``mbcore_stability``, ``mbcore_plots``)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable


def connect(app, subdir: str, generate: Callable) -> dict:
    """Run ``generate(outdir, log=...)`` at ``builder-inited``; the extension's
    metadata for its ``setup``."""
    def on_builder_inited(app) -> None:
        from sphinx.util import logging
        logger = logging.getLogger(generate.__module__)
        generate(Path(app.srcdir) / "_generated" / subdir, log=logger.info)
    app.connect("builder-inited", on_builder_inited)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
