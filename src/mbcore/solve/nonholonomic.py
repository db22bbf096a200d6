"""Refusing velocity-level (nonholonomic) constraint rows by name.

A constraint row is position level (``Phi(q, t) = 0``) or velocity level
(``B(q, t) qdot = nu``; Nikravesh (1988), Prob. 4.24(b)), per row
(``System.holonomic``).  A method that needs position equations for every row
(coordinate partitioning, the index-3 and GGL DAE forms, a kinematic analysis)
refuses a model with velocity rows through :func:`refuse_velocity_rows`, which names
the rows and what to use instead.
"""
from __future__ import annotations

from typing import Any

from ..errors import ModelError


def velocity_rows(system: Any) -> list[str]:
    """Names (``element.label``) of the velocity-level rows of ``system``."""
    return [nm for nm, h in zip(system.constraint_names, system.holonomic) if not h]


def refuse_velocity_rows(system: Any, key: str, who: str, instead: str) -> None:
    """Raise :class:`ModelError` at ``key`` when ``system`` has velocity-level rows:
    ``who`` needs position-level constraints; ``instead`` says what works."""
    if bool(system.all_holonomic):
        return
    rows = velocity_rows(system)
    shown = ", ".join(rows[:4]) + (f" and {len(rows) - 4} more" if len(rows) > 4 else "")
    raise ModelError(key, f"{who} needs position-level constraints; the velocity-level "
                          f"(nonholonomic) rows {shown} have none: {instead}")
