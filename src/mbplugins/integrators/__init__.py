"""Built-in integrators (hook ``mbcore_integrators``), one module per family:

* :mod:`.explicit` — fixed-step explicit RK: ``euler``, ``heun``, ``midpoint``, ``rk4``
* :mod:`.erk` — embedded RK with error control and dense output: ``bs23``, ``dopri5``,
  ``dop853``
* :mod:`.adams` — variable-step, variable-order Adams PECE: ``abm``
* :mod:`.bdf` — variable-step, variable-order BDF with Newton: ``bdf``
* :mod:`.implicit` — fixed-step implicit one-step methods: ``implicit_euler``,
  ``trapezoid``
* :mod:`.radau` — Radau IIA of order 5, variable step, stiff ODEs and DAEs: ``radau``
* :mod:`.sdirk` — L-stable SDIRK of order 4 (embedded 3), variable step: ``sdirk``
* :mod:`.classical` — the remaining classical fixed-step methods: ``rk3``, ``rk2``
  (family with parameter ``a``), ``ab`` (Adams–Bashforth, order 1–4), ``abm4``,
  ``taylor2``, ``verlet`` (Störmer–Verlet)
* :mod:`.adams_moulton` — Adams–Moulton of fixed order 1–4, implicit: ``am``
* :mod:`.genalpha` — generalized-α for second-order and index-3 equations:
  ``genalpha``, ``hht`` (fixed step), ``genalpha_var`` (variable step)
* :mod:`.liegroup` — RK4 in the Lie algebra (Runge–Kutta–Munthe-Kaas), unit
  quaternions by the exponential map: ``rkmk4``

Each class subclasses :class:`mbcore.integrate.Integrator`; see
docs/integrators.md.  The names below (and :data:`INTEGRATORS`) import their
module on first access (PEP 562; start-up).
"""
from __future__ import annotations

import importlib

_WHERE = {"Euler": "explicit", "Heun": "explicit", "Midpoint": "explicit", "RK4": "explicit",
          "BS23": "erk", "DOPRI5": "erk", "DOP853": "erk", "AdamsPECE": "adams", "BDF": "bdf",
          "ImplicitEuler": "implicit", "Trapezoid": "implicit", "Radau5": "radau",
          "SDIRK4": "sdirk", "RK3": "classical",
          "RK2Family": "classical", "AdamsBashforth": "classical", "ABM4": "classical",
          "Taylor2": "classical", "Verlet": "classical", "AdamsMoulton": "adams_moulton",
          "GeneralizedAlpha": "genalpha", "HHT": "genalpha",
          "VariableGeneralizedAlpha": "genalpha", "RKMK4": "liegroup"}
_ORDER = ["Euler", "Heun", "Midpoint", "RK4", "BS23", "DOPRI5", "DOP853", "AdamsPECE", "BDF",
          "ImplicitEuler", "Trapezoid", "Radau5", "SDIRK4", "RK3", "RK2Family",
          "AdamsBashforth", "ABM4", "Taylor2", "Verlet", "AdamsMoulton", "GeneralizedAlpha",
          "HHT", "VariableGeneralizedAlpha", "RKMK4"]

__all__ = ["INTEGRATORS", "Euler", "Heun", "Midpoint", "RK4", "BS23", "DOPRI5", "DOP853",
           "AdamsPECE", "BDF", "ImplicitEuler", "Trapezoid", "Radau5", "SDIRK4", "RK3",
           "RK2Family", "AdamsBashforth", "ABM4", "Taylor2", "Verlet", "AdamsMoulton",
           "GeneralizedAlpha", "HHT", "VariableGeneralizedAlpha", "RKMK4"]


def __getattr__(name):
    if name == "INTEGRATORS":
        value = [__getattr__(n) for n in _ORDER]
    elif name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
