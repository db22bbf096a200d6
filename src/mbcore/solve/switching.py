"""Switching constraint sets: joints and drivers that engage and release on events.

A mechanism whose constraints change during the motion (the Geneva wheel: the
wheel is locked while the crank pin is out of the slots and driven by the pin
while it is in one, Nikravesh (1988), Prob. 5.37; a leg whose knee locks at full
extension) is modelled with every constraint it can have and a ``switching:``
section that says which are engaged at the start and which engage or release
when a guard is crossed::

    switching:
      released: [slot_b, slot_c, lock_b, lock_c]   # at t_start; all others engaged
      switches:
        - name: pin_enters
          when: {measure: {crank.phi: 1.0}, crosses: -1.0471975511965976,
                 period: 6.283185307179586, direction: rising}
          engage: [{one_of: [slot_a, slot_b, slot_c]}]
          release: [lock_a, lock_b, lock_c]

The guard is a linear measure of the coordinates and time, ``x = sum a_i q_i +
a_t t``, crossing the level ``c`` (with ``period`` P: any of ``c + k P``, for
angles); ``direction`` filters the crossings that switch (``rising``,
``falling``, ``either``).  ``one_of`` engages the candidate whose equations are
best satisfied at the event (the slot the pin is at).  Released elements carry no
load (their multipliers are zero) and their equations take no part in the
solution; engaged ones hold.

At an engagement the state is made consistent with the new constraint set: the
positions by the nearest consistent configuration in the mass metric
(Nikravesh (1988), §10.3.2), the velocities by the plastic impact map of the engaged
constraints,

    [ M      -Phi_q^T ] [qd+]   [ M qd- ]
    [ Phi_q   0       ] [Lam] = [ nu    ]

(every engaged row: the impact map of TAM 674 (2003), lectures of 5 and 17 February,
with restitution 0 and no contact rows;
the velocity jump is the M-orthogonal projection of qd- onto the new constraint
set, so the kinetic energy can only fall).  ``Lam`` are the impulses of the
engagement, reported in the event; the energy lost is booked in the work of the
non-conservative forces.

The guard is tracked as a band: the coordinate of the measure lies in
``[c + k P, c + (k + 1) P)`` (or on one side of ``c``); an event is the measure
leaving its band, which restarts the integration in the next band.  A crossing
against ``direction`` only moves the band.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..elements import schema as S
from ..errors import AnalysisError, ModelError

KEYS = ("released", "switches")
SWITCH_KEYS = ("name", "when", "engage", "release")
WHEN_KEYS = ("measure", "crosses", "period", "direction")
DIRECTIONS = {"rising": 1, "falling": -1, "either": 0}


@dataclass
class Switch:
    """One validated switch (model data)."""

    name: str
    measure: dict[str, float]        #: coordinate name (or ``t``) -> coefficient
    crosses: float
    period: float | None
    direction: int                   #: +1 rising, -1 falling, 0 either
    engage: list[tuple[str, ...]]    #: each: one element, or the candidates of one_of
    release: list[str]
    path: str = ""


@dataclass
class Switching:
    """The validated ``switching:`` section."""

    released: list[str] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.switches) or bool(self.released)

    def elements(self) -> set[str]:
        out = set(self.released)
        for sw in self.switches:
            out.update(sw.release)
            for group in sw.engage:
                out.update(group)
        return out


def validate_switching(data: Any, constraint_names: Sequence[str]) -> Switching:
    """The ``switching:`` section checked against the model's constraint elements
    (joints and drivers); :class:`ModelError` naming the key path."""
    S.mapping(data, "switching")
    S.check_keys(data, KEYS, "switching")
    known = set(constraint_names)

    def element(name: Any, path: str) -> str:
        name = S.string(name, path)
        if name not in known:
            import difflib
            close = difflib.get_close_matches(name, sorted(known), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ModelError(path, f"no joint or driver named '{name}'{hint}: only "
                                   f"constraint elements switch")
        return name

    released = [element(x, f"switching.released[{k}]")
                for k, x in enumerate(S.sequence(data.get("released") or [],
                                                 "switching.released"))]
    out = Switching(released, [])
    names = set()
    for k, item in enumerate(S.sequence(data.get("switches") or [], "switching.switches")):
        path = f"switching.switches[{k}]"
        S.mapping(item, path)
        S.check_keys(item, SWITCH_KEYS, path, required=("when",))
        name = S.string(item.get("name", f"switch{k + 1}"), f"{path}.name")
        if name in names:
            raise ModelError(f"{path}.name", f"duplicate switch name '{name}'")
        names.add(name)
        when = item["when"]
        S.mapping(when, f"{path}.when")
        S.check_keys(when, WHEN_KEYS, f"{path}.when", required=("measure", "crosses"))
        meas = S.mapping(when["measure"], f"{path}.when.measure")
        if not meas:
            raise ModelError(f"{path}.when.measure", "expected at least one coordinate "
                                                     "(e.g. {crank.phi: 1.0})")
        measure = {str(c): S.number(a, f"{path}.when.measure.{c}")
                   for c, a in meas.items()}
        if not any(measure.values()):
            raise ModelError(f"{path}.when.measure", "every coefficient is zero")
        period = when.get("period")
        if period is not None:
            period = S.number(period, f"{path}.when.period", min=0.0)
            if period <= 0.0:
                raise ModelError(f"{path}.when.period", "must be positive")
        d = when.get("direction", "either")
        if d not in DIRECTIONS:
            raise ModelError(f"{path}.when.direction", f"expected one of "
                                                       f"{', '.join(DIRECTIONS)}, got {d!r}")
        engage: list[tuple[str, ...]] = []
        for j, e in enumerate(S.sequence(item.get("engage") or [], f"{path}.engage")):
            p = f"{path}.engage[{j}]"
            if isinstance(e, dict):
                S.check_keys(e, ("one_of",), p, required=("one_of",))
                cands = S.sequence(e["one_of"], f"{p}.one_of")
                if len(cands) < 2:
                    raise ModelError(f"{p}.one_of", "expected two or more candidates")
                engage.append(tuple(element(c, f"{p}.one_of[{i}]")
                                    for i, c in enumerate(cands)))
            else:
                engage.append((element(e, p),))
        release = [element(x, f"{path}.release[{j}]")
                   for j, x in enumerate(S.sequence(item.get("release") or [],
                                                    f"{path}.release"))]
        both = {c for g in engage for c in g} & set(release)
        if both:
            raise ModelError(f"{path}.release", f"{', '.join(sorted(both))} both engaged "
                                                f"and released by one switch")
        if not engage and not release:
            raise ModelError(path, "a switch must engage or release something")
        out.switches.append(Switch(name, measure, S.number(when["crosses"],
                                                           f"{path}.when.crosses"),
                                   period, DIRECTIONS[d], engage, release, path))
    return out


class SwitchSet:
    """The run-time state of a model's switching: which elements are engaged, the
    active constraint rows, the guards' bands, and the engagement map."""

    def __init__(self, system, spec: Switching):
        self.system = system
        self.spec = spec
        self.names = [sw.name for sw in spec.switches]
        rows = system.element_rows
        self.element_rows = {e: np.arange(rows[e].start, rows[e].stop)
                             for e in spec.elements()}
        self.engaged = {e: e not in spec.released for e in self.element_rows}
        n = system.n
        self.a = np.zeros((len(spec.switches), n))
        self.at = np.zeros(len(spec.switches))
        for k, sw in enumerate(spec.switches):
            for c, coef in sw.measure.items():
                if c == "t":
                    self.at[k] += coef
                    continue
                if c not in system.coordinate_names:
                    import difflib
                    close = difflib.get_close_matches(c, system.coordinate_names, n=3)
                    hint = f" (did you mean {', '.join(close)}?)" if close else ""
                    raise ModelError(f"{sw.path}.when.measure.{c}",
                                     f"unknown coordinate '{c}'{hint}; the measure is a "
                                     f"sum of coordinates (body.x, body.phi, ...) and t")
                self.a[k, system.coordinate_names.index(c)] += coef
        self.band = np.zeros(len(spec.switches), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.names)

    # -- rows ----------------------------------------------------------------------
    def rows(self) -> np.ndarray:
        """The active constraint rows: all but those of released elements."""
        keep = np.ones(self.system.m, bool)
        for e, on in self.engaged.items():
            if not on:
                keep[self.element_rows[e]] = False
        return np.flatnonzero(keep)

    def released(self) -> list[str]:
        return sorted(e for e, on in self.engaged.items() if not on)

    # -- guards ---------------------------------------------------------------------
    def measure(self, k: int, q: np.ndarray, t: float) -> float:
        return float(self.a[k] @ q + self.at[k] * t)

    def _band_of(self, k: int, x: float) -> int:
        sw = self.spec.switches[k]
        if sw.period is None:
            return 1 if x >= sw.crosses else 0
        return int(math.floor((x - sw.crosses) / sw.period))

    def start(self, q: np.ndarray, t: float) -> None:
        """The bands at the start of a run."""
        for k in range(len(self)):
            self.band[k] = self._band_of(k, self.measure(k, q, t))

    def gap(self, k: int, q: np.ndarray, t: float) -> float:
        """Distance of the measure inside its band (negative outside): an event
        function that falls through zero where the measure leaves the band."""
        sw, x, b = self.spec.switches[k], self.measure(k, q, t), int(self.band[k])
        if sw.period is None:
            return x - sw.crosses if b else sw.crosses - x
        lo = sw.crosses + b * sw.period
        return min(x - lo, lo + sw.period - x)

    def crossing(self, k: int, q: np.ndarray, t: float) -> int:
        """+1 / -1 where the measure has left its band upwards / downwards (its
        band is moved), 0 inside.  At a located event (the measure on the band's
        edge to rounding) the nearer edge decides."""
        sw, x, b = self.spec.switches[k], self.measure(k, q, t), int(self.band[k])
        if sw.period is None:
            d = 1 if b == 0 else -1
            self.band[k] = 1 - b
            return d
        lo = sw.crosses + b * sw.period
        d = 1 if abs(x - (lo + sw.period)) < abs(x - lo) else -1
        self.band[k] = b + d
        return d

    def crossed(self, k: int, q: np.ndarray, t: float) -> int:
        """Like :meth:`crossing` but only when the measure is outside its band
        (0 and nothing moved inside it)."""
        if self.gap(k, q, t) >= 0.0:
            return 0
        return self.crossing(k, q, t)

    def fires(self, k: int, d: int) -> bool:
        want = self.spec.switches[k].direction
        return want == 0 or want == d

    # -- the switch --------------------------------------------------------------------
    def apply(self, k: int, q: np.ndarray, t: float) -> str:
        """Engage and release switch k's elements at (q, t); the description."""
        sw, s = self.spec.switches[k], self.system
        phi = None
        done = []
        for e in sw.release:
            if self.engaged[e]:
                self.engaged[e] = False
                done.append(f"{e} released")
        for group in sw.engage:
            pick = group[0]
            if len(group) > 1:
                if phi is None:
                    phi = s.phi(q, t)
                res = [float(np.max(np.abs(phi[self.element_rows[c]]), initial=0.0))
                       for c in group]
                pick = group[int(np.argmin(res))]
                done.append(f"{pick} engaged (one of {', '.join(group)}; |Phi| "
                            f"{min(res):.3g}, next {sorted(res)[1]:.3g})")
                for c in group:
                    if c != pick:
                        self.engaged[c] = False
            elif not self.engaged[pick]:
                done.append(f"{pick} engaged")
            self.engaged[pick] = True
        return f"switch '{sw.name}': " + (", ".join(done) if done else "no change")

    def state(self) -> dict:
        return {"released": self.released(), "band": [int(b) for b in self.band]}

    def set_state(self, st: dict) -> None:
        rel = set(st["released"])
        for e in self.engaged:
            self.engaged[e] = e not in rel
        self.band[:] = st["band"]


def engage_state(system, q: np.ndarray, qd: np.ndarray, t: float, rows: np.ndarray,
                 tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """(q, qd) made consistent with the constraint ``rows`` at an engagement (module
    docstring): nearest consistent positions in the mass metric, then the plastic
    impact map.  Returns (q, qd, the largest position move, the impulses Lam of the
    rows)."""
    from .assembly import assemble
    from ..system.mass import impact_mass
    rep = assemble(system, q, qd, t, rows=rows, tol=tol)
    q1 = rep.q
    move = float(np.max(np.abs(q1 - q), initial=0.0))
    M = impact_mass(system, q1)
    J = system.jacobian_dense(q1, t)[rows]
    nu = system.nu(q1, t)[rows]
    n, m = system.n, len(rows)
    A = np.zeros((n + m, n + m))
    A[:n, :n] = M
    A[:n, n:] = -J.T
    A[n:, :n] = J
    b = np.concatenate([M @ qd, nu])
    try:
        x = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        x = np.linalg.lstsq(A, b, rcond=None)[0]
    if not np.all(np.isfinite(x)):
        raise AnalysisError("engagement: the impact map of the engaged constraints has "
                            "no solution (dependent or conflicting equations)", t)
    return q1, x[:n], move, x[n:]


__all__ = ["Switch", "Switching", "SwitchSet", "validate_switching", "engage_state"]
