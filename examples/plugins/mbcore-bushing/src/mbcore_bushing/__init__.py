"""mbcore-bushing: the worked example of an mbcore plugin distribution.

It provides, by type name in model files (docs/plugin-guide.md of mbcore):

* ``bushing`` — a planar bushing force element (Python tier, :mod:`.bushing`);
* ``bushing_c`` — the same element with a compiled kernel (:mod:`._kernel`, C
  contract ``mbcore_plugin.h``);
* ``point_on_circle`` — a constraint: a body point on a global circle
  (:mod:`.constraints`);
* ``point_on_circle_c`` — the same constraint with a compiled kernel;
* ``peaks`` — a reporter writing per-channel peak values to JSON
  (:mod:`.reporters`).

The entry point ``[project.entry-points.mbcore] bushing = "mbcore_bushing.plugin"``
registers them; nothing is imported until a model uses a type.
"""
from __future__ import annotations

__version__ = "0.1.0"
