"""A model shared by the tests of the spatial point and angular kinematics: three
free bodies at random positions and orientations, a point on each, and a point of
the ground."""
from __future__ import annotations

import numpy as np


def three_bodies_with_points(rng: np.random.Generator, angle0: float):
    """The model (bodies b0..b2 turned by ``angle0 + k`` rad about random axes, points
    P0..P2 on them, G on the ground), compiled with the compiled and the NumPy
    kernels: ``(compiled, numpy)``."""
    import mbcore
    m = mbcore.Model()
    m.set_dimensions(3)
    for k in range(3):
        m.add_body(f"b{k}", inertia=[1, 2, 3], position=list(rng.normal(size=3)),
                   orientation={"axis": list(rng.normal(size=3)), "angle": angle0 + k,
                                "unit": "rad"})
        m.add_point(f"P{k}", f"b{k}", list(rng.normal(size=3)))
    m.add_point("G", "ground", [0.3, -0.2, 0.5])
    return m.compile(kernels="compiled"), m.compile(kernels="numpy")
