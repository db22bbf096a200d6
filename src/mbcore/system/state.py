"""The mutable state of an analysis, kept apart from Model and System."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class State:
    """``t``, coordinates ``q``, velocities ``qd``, accelerations ``qdd`` and
    Lagrange multipliers ``lam`` (convention: docs/conventions.md)."""

    t: float
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lam: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def copy(self) -> "State":
        return State(self.t, self.q.copy(), self.qd.copy(), self.qdd.copy(), self.lam.copy())
