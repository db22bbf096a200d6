"""Built-in integrators (hook ``mbcore_integrators``), one module per family:

* :mod:`.explicit` — fixed-step explicit RK: ``euler``, ``heun``, ``midpoint``, ``rk4``
* :mod:`.erk` — embedded RK with error control and dense output: ``bs23``, ``dopri5``,
  ``dop853``
* :mod:`.adams` — variable-step, variable-order Adams PECE: ``abm``
* :mod:`.bdf` — variable-step, variable-order BDF with Newton: ``bdf``
* :mod:`.implicit` — fixed-step implicit one-step methods: ``implicit_euler``,
  ``trapezoid``

Each class subclasses :class:`mbcore.integrate.Integrator`; see
docs/integrators.md.
"""
from __future__ import annotations

from .adams import AdamsPECE
from .bdf import BDF
from .erk import BS23, DOP853, DOPRI5
from .explicit import RK4, Euler, Heun, Midpoint
from .implicit import ImplicitEuler, Trapezoid

INTEGRATORS = [Euler, Heun, Midpoint, RK4, BS23, DOPRI5, DOP853, AdamsPECE, BDF,
               ImplicitEuler, Trapezoid]

__all__ = ["INTEGRATORS", "Euler", "Heun", "Midpoint", "RK4", "BS23", "DOPRI5", "DOP853",
           "AdamsPECE", "BDF", "ImplicitEuler", "Trapezoid"]
