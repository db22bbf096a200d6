"""Rigid impacts with Newton's coefficient of restitution (TAM 674 (2003), lectures
of 5, 17 and 26 February).

A contact is a body point with a radius (a disc; a sphere in spatial models)
against a line (a plane in spatial models) fixed on a surface body (ground or any
body), a line optionally limited to a segment, or against another disc (sphere) of
radius ``rho_S`` centred at a point of the surface body (ball to ball).  Its gap
``c(q) = n^T (r_P - r_L) - rho`` (ball to ball: ``|r_P - r_S| - rho - rho_S``, n
along the line of centres) is an event function of the dynamic analysis; at
``c = 0`` with approaching normal velocity the velocities jump by the impact map

    [ M      -Phi_q^T  -C^T ] [qd+ ]   [ M qd-      ]
    [ Phi_q   0         0   ] [Lam ] = [ nu         ]
    [ C       0         0   ] [Lamn]   [ -e C qd-   ]

(Nikravesh sign, Lam_n >= 0 compressive), which keeps every bilateral constraint
and gives ``v_n+ = -e v_n-``; contacts with a negative impulse are released and the
map is solved again.  Positions do not change.

Spatial bodies: q = [r, p] and qd = [rdot, pdot]; the gap's Jacobian row has the
Euler-parameter columns ``2 c_pi' L(p)`` (Nikravesh (1988), Eq. 11.48), M is the regular
Formulation I mass ``M + alpha p p^T`` (mbcore.system.mass; exact here because the
normalisation rows are among the bilateral constraints, so ``p^T pdot`` is 0 before
and after the impact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..elements import schema as S
from ..errors import ModelError

KEYS = ("name", "body", "point", "radius", "surface", "surface_point", "normal", "extent",
        "restitution", "surface_radius")


@dataclass
class Contact:
    """One validated contact description (model data); vectors have 2 or 3
    components (planar or spatial model)."""

    name: str
    body: str
    point: tuple[float, ...]
    radius: float
    surface: str
    surface_point: tuple[float, ...]
    normal: tuple[float, ...]
    extent: tuple[float, float] | None
    restitution: float
    #: ball to ball: the radius of the disc (sphere) centred at surface_point; None:
    #: the surface is the line (plane) through surface_point with ``normal``
    surface_radius: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "body": self.body, "point": list(self.point),
             "radius": self.radius, "surface": self.surface,
             "surface_point": list(self.surface_point), "normal": list(self.normal),
             "restitution": self.restitution}
        if self.extent is not None:
            d["extent"] = list(self.extent)
        if self.surface_radius is not None:
            d["surface_radius"] = self.surface_radius
            del d["normal"]
        return d


def parse_contact(data: Any, path: str, ctx: S.ValidationContext, dims: int = 2) -> Contact:
    S.mapping(data, path)
    S.check_keys(data, KEYS, path, required=("body", "restitution"))
    body = S.string(data["body"], f"{path}.body")
    ctx.check_body(body, f"{path}.body")
    surface = S.string(data.get("surface", ctx.ground), f"{path}.surface")
    ctx.check_body(surface, f"{path}.surface")
    if surface == body:
        raise ModelError(f"{path}.surface", f"a body cannot hit itself ('{body}')")
    zero = (0.0,) * dims
    normal = S.vector(data.get("normal", zero[:-1] + (1.0,)), f"{path}.normal", dims)
    nn = float(np.linalg.norm(normal))
    if nn < 1e-12:
        raise ModelError(f"{path}.normal", "must be a non-zero vector")
    extent = None
    if data.get("extent") is not None and dims == 3:
        raise ModelError(f"{path}.extent", "a spatial contact plane is unbounded (extent "
                                           "is for planar contact lines)")
    if data.get("extent") is not None:
        extent = S.vector(data["extent"], f"{path}.extent")
        if extent[1] <= extent[0]:
            raise ModelError(f"{path}.extent", f"expected [min, max] with min < max, "
                                               f"got {S.format_vector(extent)}")
    e = S.number(data["restitution"], f"{path}.restitution", min=0.0, max=1.0)
    rs = None
    if data.get("surface_radius") is not None:
        rs = S.number(data["surface_radius"], f"{path}.surface_radius", min=0.0)
        for key in ("normal", "extent"):
            if data.get(key) is not None:
                raise ModelError(f"{path}.{key}", "a ball-to-ball contact (surface_radius) "
                                                  "has no line: its normal is the line of "
                                                  "centres")
    radius = S.number(data.get("radius", 0.0), f"{path}.radius", min=0.0)
    if rs is not None and radius + rs <= 0.0:
        raise ModelError(f"{path}.surface_radius", "two points cannot collide: give the "
                                                   "balls a radius")
    return Contact(S.string(data.get("name", f"contact{path}"), f"{path}.name"), body,
                   S.vector(data.get("point", zero), f"{path}.point", dims),
                   radius, surface,
                   S.vector(data.get("surface_point", zero), f"{path}.surface_point", dims),
                   tuple(x / nn for x in normal), extent, e, rs)


def _rot(phi, v):
    c, s = np.cos(phi), np.sin(phi)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


class ContactSet:
    """The contacts of a System: gaps, their Jacobian, and the impact map."""

    def __init__(self, system, contacts: Sequence[Contact]):
        self.system = system
        self.contacts = list(contacts)
        self.names = [c.name for c in self.contacts]
        n = system.n
        self._n = n
        self.spatial = bool(system.spatial)
        if self.spatial:
            from ..system.mass import SpatialMass
            self._mass = SpatialMass(system) if system.rigid_spatial else None
            # per contact: (offset, kind) of body and surface; ground: None
            self._ob = [self._where(c.body) for c in self.contacts]
            self._os = [self._where(c.surface) for c in self.contacts]
            return
        self._mass = None
        self._ob = [system.body_offset(c.body) for c in self.contacts]
        self._os = [system.body_offset(c.surface) for c in self.contacts]

    def _where(self, name):
        s = self.system
        if name == s.model.ground:
            return None
        k = s.body_names.index(name)
        return int(s.body_offsets[k]), s.body_kinds[k].name == "spatial"

    def _pose(self, where, q):
        """r, A of a spatial body, particle3 or the ground."""
        from ..elements.rotations import A as Amat
        if where is None:
            return np.zeros(3), np.eye(3)
        o, rigid = where
        return q[o:o + 3], (Amat(q[o + 3:o + 7]) if rigid else np.eye(3))

    def _gap3(self, k, q):
        c = self.contacts[k]
        rB, AB = self._pose(self._ob[k], q)
        rS, AS = self._pose(self._os[k], q)
        d = rB + AB @ np.asarray(c.point) - rS - AS @ np.asarray(c.surface_point)
        nrm = AS @ np.asarray(c.normal) if c.surface_radius is None else _unit(d)
        return c, AB, AS, nrm, d

    def _row3(self, k, q):
        """dc/dq of a spatial contact: omega'-columns mapped to p by 2 (.) L(p)."""
        from ..elements.rotations import L as Lmat
        c, AB, AS, nrm, d = self._gap3(k, q)
        row = np.zeros(self._n)
        # the surface's omega' columns: of n^T d with n fixed on it (a plane), or of
        # |d| (ball to ball: d/dt |d| = n^T d', the surface point moving with it)
        ws = -np.cross(np.asarray(c.surface_point), AS.T @ nrm)
        if c.surface_radius is None:
            ws = ws + np.cross(np.asarray(c.normal), AS.T @ d)
        for where, sign, wrow in (
                (self._ob[k], 1.0, np.cross(np.asarray(c.point), AB.T @ nrm)),
                (self._os[k], -1.0, ws)):
            if where is None:
                continue
            o, rigid = where
            row[o:o + 3] += sign * nrm
            if rigid:                    # wrow: the omega' columns, signs included
                row[o + 3:o + 7] += 2.0 * wrow @ Lmat(q[o + 3:o + 7])
        return row

    def __len__(self) -> int:
        return len(self.contacts)

    def _geometry(self, k: int, q: np.ndarray):  # planar
        c = self.contacts[k]
        qx = np.concatenate([q, np.zeros(3)])
        ob, os_ = self._ob[k], self._os[k]
        SP = _rot(qx[ob + 2], c.point)
        SL = _rot(qx[os_ + 2], c.surface_point)
        rP = qx[ob:ob + 2] + SP
        rL = qx[os_:os_ + 2] + SL
        nrm = _rot(qx[os_ + 2], c.normal) if c.surface_radius is None else _unit(rP - rL)
        return c, ob, os_, SP, SL, nrm, rP, rL

    def gap(self, k: int, q: np.ndarray) -> float:
        """Signed gap; +inf outside the contact's extent (no contact possible)."""
        if self.spatial:
            c, AB, AS, nrm, d = self._gap3(k, q)
            return float(nrm @ d) - c.radius - (c.surface_radius or 0.0)
        c, ob, os_, SP, SL, nrm, rP, rL = self._geometry(k, q)
        d = rP - rL
        if c.surface_radius is not None:
            return float(np.linalg.norm(d)) - c.radius - c.surface_radius
        if c.extent is not None:
            tang = np.array([nrm[1], -nrm[0]])
            s = float(tang @ d)
            if not (c.extent[0] <= s <= c.extent[1]):
                return np.inf
        return float(nrm @ d) - c.radius

    def jacobian_row(self, k: int, q: np.ndarray) -> np.ndarray:
        """C_k = dc_k/dq (1 x n)."""
        if self.spatial:
            return self._row3(k, q)
        c, ob, os_, SP, SL, nrm, rP, rL = self._geometry(k, q)
        row = np.zeros(self._n + 3)
        row[ob:ob + 2] += nrm
        row[ob + 2] += nrm @ np.array([-SP[1], SP[0]])
        row[os_:os_ + 2] -= nrm
        if c.surface_radius is None:          # the line's normal turns with the surface
            Rn = np.array([-nrm[1], nrm[0]])
            row[os_ + 2] += Rn @ (rP - rL)
        row[os_ + 2] -= nrm @ np.array([-SL[1], SL[0]])
        return row[:self._n]

    def approaching(self, q: np.ndarray, qd: np.ndarray, touching: bool = False
                    ) -> list[tuple[int, float]]:
        """(contact, normal velocity) of the contacts at gap 0 (within 1e-8 of the
        coordinate scale) that approach faster than 1e-12 of the velocity scale
        (``touching``: or stay in contact, normal velocity within that; slower
        approaches are the round-off of earlier impact maps, not impacts)."""
        tol = 1e-8 * (1.0 + float(np.max(np.abs(q), initial=0.0)))
        vtol = 1e-12 * (1.0 + float(np.max(np.abs(qd), initial=0.0)))
        out = []
        for k in range(len(self.contacts)):
            if abs(self.gap(k, q)) > tol:
                continue
            vn = float(self.jacobian_row(k, q) @ qd)
            if vn < (vtol if touching else -vtol):
                out.append((k, vn))
        return out

    def resolve(self, q: np.ndarray, qd: np.ndarray, t: float, mode: str = "simultaneous",
                max_impacts: int = 10000) -> tuple[np.ndarray, list[tuple[int, float, float,
                                                                             float]]]:
        """Velocities after the impacts at q, and per impact (contact, normal velocity
        before, after, impulse).

        ``simultaneous``: one impact map of every contact at gap 0 that approaches or
        touches (a touching contact keeps ``v_n+ = -e 0 = 0`` unless its impulse
        would pull: released).  ``sequential``: the approaching contact with the
        largest approach speed alone, then again at the new velocities, until no
        contact at gap 0 approaches (Newton's cradle with e = 1: the velocity passes
        down the chain)."""
        qd = np.array(qd, dtype=float)
        log = []
        if mode == "simultaneous":
            act = self.approaching(q, qd, touching=True)
            vtol = 1e-12 * (1.0 + float(np.max(np.abs(qd), initial=0.0)))
            if not any(vn < -vtol for _, vn in act):
                return qd, log
            qd_new, imp = self.impact(q, qd, t, [k for k, _ in act])
            vn0 = dict(act)
            for k, lam in imp.items():
                log.append((k, vn0[k], float(self.jacobian_row(k, q) @ qd_new), lam))
            return qd_new, log
        if mode != "sequential":
            raise ModelError("settings.impact_resolution", f"expected 'simultaneous' or "
                                                           f"'sequential', got {mode!r}")
        for _ in range(max_impacts):
            act = self.approaching(q, qd)
            if not act:
                return qd, log
            k, vn = min(act, key=lambda kv: kv[1])
            qd_new, imp = self.impact(q, qd, t, [k])
            log.append((k, vn, float(self.jacobian_row(k, q) @ qd_new), imp.get(k, 0.0)))
            qd = qd_new
        from ..errors import AnalysisError
        raise AnalysisError(f"sequential impacts: still approaching contacts after "
                            f"{max_impacts} pairwise impacts "
                            f"({', '.join(self.names[k] for k, _ in act[:4])})", t)

    def impact(self, q: np.ndarray, qd: np.ndarray, t: float, active: list[int],
               rows=None) -> tuple[np.ndarray, dict[int, float]]:
        """Velocities after the impact of the ``active`` contacts (all at gap 0),
        and their normal impulses.  Contacts with a negative impulse are released."""
        s = self.system
        from ..system.mass import impact_mass
        M = impact_mass(s, q, self._mass)
        J = s.jacobian_dense(q, t)
        if rows is not None:
            J = J[rows]
        nu = s.nu(q, t)
        if rows is not None:
            nu = nu[rows]
        active = list(active)
        while active:
            C = np.array([self.jacobian_row(k, q) for k in active])
            e = np.array([self.contacts[k].restitution for k in active])
            m, nc, n = J.shape[0], len(active), s.n
            A = np.zeros((n + m + nc, n + m + nc))
            A[:n, :n] = M
            A[:n, n:n + m] = -J.T
            A[:n, n + m:] = -C.T
            A[n:n + m, :n] = J
            A[n + m:, :n] = C
            b = np.concatenate([M @ qd, nu, -e * (C @ qd)])
            x = np.linalg.lstsq(A, b, rcond=None)[0]
            lam_n = x[n + m:]
            if np.all(lam_n >= -1e-12 * (1 + np.abs(lam_n).max())):
                return x[:n], dict(zip(active, lam_n))
            active.pop(int(np.argmin(lam_n)))      # separating contact: release it
        return qd.copy(), {}


def _unit(d: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(d))
    return d / n if n > 0.0 else np.eye(len(d))[0]


def validate_contacts(data: Any, ctx: S.ValidationContext, dims: int = 2) -> list[Contact]:
    out = []
    names = set()
    for k, item in enumerate(S.sequence(data or [], "impacts")):
        c = parse_contact(item, f"impacts[{k}]", ctx, dims)
        if "name" not in item:
            c.name = f"impact{k + 1}"
        if c.name in names:
            raise ModelError(f"impacts[{k}].name", f"duplicate contact name '{c.name}'")
        names.add(c.name)
        out.append(c)
    return out


__all__ = ["Contact", "ContactSet", "parse_contact", "validate_contacts", "Mapping"]
