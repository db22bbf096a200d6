"""Names of the inputs of a System: generalised forces on bodies and force-element
scales.  Shared by the linearisation (``modes`` analysis: the columns
of B) and :class:`mbcore.Simulation` (inputs set between steps), so that both
read the same names: ``<body>.fx|fy|torque`` (planar; particles ``fx|fy``),
``<body>.fx|fy|fz|nx|ny|nz`` (spatial: force at the body frame and moment about
the global axes), ``<element>.scale`` (the factor on a force element's time
functions).  docs/analyses.md "Linearisation and modes", docs/embedding.md.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from ..errors import ModelError

__all__ = ["BODY_INPUTS", "InputSpec", "parse_input"]

#: generalised-force inputs of a body by body kind: name -> coordinate offset in the
#: body's coordinates, or ``"n<axis>"`` (a moment about a global axis: through the
#: Euler parameters, ``b_p = 2 G(p)^T n``)
BODY_INPUTS = {
    "planar": {"fx": 0, "fy": 1, "torque": 2},
    "particle": {"fx": 0, "fy": 1},
    "particle3": {"fx": 0, "fy": 1, "fz": 2},
    "spatial": {"fx": 0, "fy": 1, "fz": 2, "nx": "n0", "ny": "n1", "nz": "n2"},
}


@dataclass(frozen=True)
class InputSpec:
    """A parsed input name.  ``kind``: ``"force"`` (``index``: the coordinate it
    acts on with a unit factor), ``"moment"`` (``index``: the body's first
    coordinate, ``axis`` 0-2) or ``"scale"`` (``group``, ``element``: the force
    group and the element's position in it)."""

    name: str
    kind: str
    index: int = -1
    axis: int = -1
    group: object = None
    element: int = -1


def parse_input(system, name: str, path: str, extra: Sequence[str] = ()) -> InputSpec:
    """The :class:`InputSpec` of ``name``; :class:`ModelError` at ``path`` naming the
    input (with a close match among the known names and ``extra`` ones) if it is
    none of the module docstring's forms."""
    s = system
    body, _, what = name.rpartition(".")
    if body in s.body_index:
        k = s.body_index[body]
        kind = s.body_kinds[k].name
        table = BODY_INPUTS.get(kind, {})
        if what not in table:
            raise ModelError(path, f"unknown input '{name}': a {kind} body takes "
                                   f"{', '.join(f'{body}.{x}' for x in table)}")
        o = int(s.body_offsets[k])
        j = table[what]
        if isinstance(j, int):
            return InputSpec(name, "force", index=o + j)
        return InputSpec(name, "moment", index=o, axis=int(j[1]))
    for fg in s.force_groups:
        if body in fg.names and what == "scale":
            e = list(fg.names).index(body)
            if not fg.ftype.n_fun:
                raise ModelError(path, f"force element '{body}' ({fg.ftype.name}) has no "
                                       f"time function to scale")
            return InputSpec(name, "scale", group=fg, element=e)
    elements = [x for fg in s.force_groups for x in fg.names]
    known = ([f"{b}.{x}" for k, b in enumerate(s.body_names)
              for x in BODY_INPUTS.get(s.body_kinds[k].name, {})]
             + [f"{x}.scale" for x in elements] + list(extra))
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    more = f", or an input function ({', '.join(extra)})" if extra else ""
    raise ModelError(path, f"unknown input '{name}'{hint}: expected <body>.fx, .fy, "
                           f".torque (planar), .fz/.nx/.ny/.nz (spatial) or <force "
                           f"element>.scale{more}")
