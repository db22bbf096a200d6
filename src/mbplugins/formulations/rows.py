"""The independent constraint rows of a redundant set, as the formulations that keep
only those rows see the System (Nikravesh (1988), App. C: the analysis finds the rows
once and checks the others at every output)."""
from __future__ import annotations

import numpy as np

__all__ = ["RowSubset", "full_multipliers"]


class RowSubset:
    """A System seen through a subset of its constraint rows: Phi, its Jacobian, nu
    and gamma of those rows, ``m`` their number; everything else is the System's
    (``base_system``)."""

    def __init__(self, system, rows):
        self.base_system = getattr(system, "base_system", system)
        self.rows = np.asarray(rows, dtype=np.intp)
        self.m = len(self.rows)
        self.holonomic = np.asarray(self.base_system.holonomic)[self.rows]

    def __getattr__(self, name):
        return getattr(self.base_system, name)

    def phi(self, q, t):
        return self.base_system.phi(q, t)[self.rows]

    def jacobian(self, q, t):
        return self.base_system.jacobian(q, t)[self.rows]

    def jacobian_dense(self, q, t):
        return self.base_system.jacobian_dense(q, t)[self.rows]

    def nu(self, q, t):
        return self.base_system.nu(q, t)[self.rows]

    def gamma(self, q, qd, t):
        return self.base_system.gamma(q, qd, t)[self.rows]


def full_multipliers(lam, system) -> np.ndarray:
    """The multipliers of every constraint row of the System from those of
    ``system``'s rows (a :class:`RowSubset`: the removed rows carry none)."""
    rows = getattr(system, "rows", None)
    if rows is None:
        return lam
    full = np.zeros(system.base_system.m)
    full[rows] = lam
    return full
