"""DI and CS formulations (Nikravesh (1988), §13.3.1;
Nikravesh (1988), §10.1, Prob. 10.16)."""
from __future__ import annotations

import math


from mbcore.errors import ModelError
from mbcore.solve.formulation import FollowsKeptRows, Formulation
from mbcore.elements.schema import Param

from .drift import DRIFT, DriftProjection


class DI(DriftProjection, FollowsKeptRows, Formulation):
    """Direct integration of the augmented index-1 system: ``y = [q; qd]``,
    ``y' = [qd; qdd(q, qd, t)]`` with qdd from ``[M, -Phi_q^T; Phi_q, 0]``.
    The constraint violations drift with the integration error; ``drift:
    project`` (the default) projects the state where they pass the run's
    tolerance (:mod:`mbplugins.formulations.drift`)."""

    corrects_drift = False
    name = "di"
    description = ("direct integration of the augmented index-1 equations (the state "
                   "projected where the drift passes the tolerance)")
    settings_schema = {"drift": DRIFT}

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        self._drift_setup()


class CS(DriftProjection, FollowsKeptRows, Formulation):
    """Baumgarte constraint stabilisation: gamma is replaced by
    ``gamma - 2 alpha Phidot - beta^2 Phi`` with ``Phidot = Phi_q qd - nu``, so the
    violations obey ``Phi'' + 2 alpha Phi' + beta^2 Phi = 0`` (poles
    ``-alpha +- sqrt(alpha^2 - beta^2)``).  alpha = beta gives critical damping;
    alpha = beta = 0 is DI.  Defaults alpha = beta = 5 1/s (mbcore's choice; the
    book suggests 1-10)."""

    name = "cs"
    description = "Baumgarte constraint stabilisation (alpha, beta)"
    settings_schema = {
        "alpha": Param("number", "damping of the violation dynamics", default=5.0,
                       unit="1/time"),
        "beta": Param("number", "stiffness of the violation dynamics", default=5.0,
                      unit="1/time"),
        "drift": DRIFT,
    }

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        self._drift_setup()
        for k in ("alpha", "beta"):
            if self.settings[k] < 0:
                raise ModelError(f"settings.{k}", "must be >= 0")
        self.alpha, self.beta = self.settings["alpha"], self.settings["beta"]

    def compiled_stabilisation(self):
        cls = type(self)
        if cls.gamma_extra is not CS.gamma_extra or cls.rhs is not Formulation.rhs:
            return None                  # a subclass changed the function: Python path
        return float(self.settings["alpha"]), float(self.settings["beta"])

    def gamma_extra(self, q, qd, t):
        s = self.system
        phid = s.jacobian(q, t) @ qd - s.nu(q, t) if s.dense else \
            s.jacobian(q, t).dot(qd) - s.nu(q, t)
        return -2.0 * self.alpha * phid - self.beta ** 2 * s.phi(q, t)

    def warnings(self, step):
        """The violation dynamics must be resolved by the step: warn when
        ``h |pole| > 1`` (well inside every explicit method's stability region)."""
        a, b = self.alpha, self.beta
        disc = a * a - b * b
        pole = a + math.sqrt(disc) if disc >= 0 else math.hypot(a, math.sqrt(-disc))
        out = []
        if step and step * pole > 1.0:
            out.append(f"Baumgarte alpha = {a:g}, beta = {b:g}: the violation dynamics have "
                       f"a pole of magnitude {pole:.3g} 1/s, too fast for the step "
                       f"{step:g} s (h*|pole| = {step * pole:.2g} > 1); reduce alpha/beta or "
                       f"the step")
        if a == 0 and b == 0:
            out.append("Baumgarte alpha = beta = 0 is plain DI (no stabilisation)")
        return out
