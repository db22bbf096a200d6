"""The scale of the position-level constraint violations, and the bound within
which a run that asked for ``rtol``/``atol`` keeps them.

The direct integration of the index-1 equations (Nikravesh (1988), §13.1) lets the
violations ``Phi(q, t)`` grow with the integration error; its results keep the
accuracy asked for only while the violations stay at the size of the positions'
error, ``atol + rtol L`` with L a length of the model.  Both the projection on
that bound (the formulations' ``drift: project``) and the warning past ten times
it use these numbers.
"""
from __future__ import annotations

import numpy as np


def model_length(system) -> float:
    """A characteristic length of the model: the median distance of the bodies'
    initial positions from the origin (at least 1e-3), the scale of its
    position-level violations."""
    bodies = system.model.bodies
    if not bodies:
        return 1.0
    pos = np.array([b.position for b in bodies], dtype=float)
    d = np.sort(np.sqrt(np.sum(pos * pos, axis=1)))
    k = d.size                   # the median (np.median would import numpy.ma)
    return max(float((d[(k - 1) // 2] + d[k // 2]) / 2.0), 1e-3)


def drift_bound(system, rtol, atol) -> float:
    """``max(atol) + max(rtol) L``: the size of a position error the run's
    tolerances allow (L: :func:`model_length`)."""
    return float(np.max(atol)) + float(np.max(rtol)) * model_length(system)
