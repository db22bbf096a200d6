"""Rigid impacts with Newton's coefficient of restitution (001 weeks 4-5;
spec/algorithms.md §7).

A contact is a body point with a radius (a disc) against a line fixed on a
surface body (ground or any body), optionally limited to a segment.  Its gap
``c(q) = n^T (r_P - r_L) - rho`` is an event function of the dynamic analysis; at
``c = 0`` with approaching normal velocity the velocities jump by the impact map

    [ M      -Phi_q^T  -C^T ] [qd+ ]   [ M qd-      ]
    [ Phi_q   0         0   ] [Lam ] = [ nu         ]
    [ C       0         0   ] [Lamn]   [ -e C qd-   ]

(Nikravesh sign, Lam_n >= 0 compressive), which keeps every bilateral constraint
and gives ``v_n+ = -e v_n-``; contacts with a negative impulse are released and the
map is solved again.  Positions do not change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from . import schema as S
from .errors import ModelError

KEYS = ("name", "body", "point", "radius", "surface", "surface_point", "normal", "extent",
        "restitution")


@dataclass
class Contact:
    """One validated contact description (model data)."""

    name: str
    body: str
    point: tuple[float, float]
    radius: float
    surface: str
    surface_point: tuple[float, float]
    normal: tuple[float, float]
    extent: tuple[float, float] | None
    restitution: float

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "body": self.body, "point": list(self.point),
             "radius": self.radius, "surface": self.surface,
             "surface_point": list(self.surface_point), "normal": list(self.normal),
             "restitution": self.restitution}
        if self.extent is not None:
            d["extent"] = list(self.extent)
        return d


def parse_contact(data: Any, path: str, ctx: S.ValidationContext) -> Contact:
    S.mapping(data, path)
    S.check_keys(data, KEYS, path, required=("body", "restitution"))
    body = S.string(data["body"], f"{path}.body")
    ctx.check_body(body, f"{path}.body")
    surface = S.string(data.get("surface", ctx.ground), f"{path}.surface")
    ctx.check_body(surface, f"{path}.surface")
    if surface == body:
        raise ModelError(f"{path}.surface", f"a body cannot hit itself ('{body}')")
    normal = S.vector(data.get("normal", (0.0, 1.0)), f"{path}.normal")
    nn = float(np.hypot(*normal))
    if nn < 1e-12:
        raise ModelError(f"{path}.normal", "must be a non-zero vector")
    extent = None
    if data.get("extent") is not None:
        extent = S.vector(data["extent"], f"{path}.extent")
        if extent[1] <= extent[0]:
            raise ModelError(f"{path}.extent", f"expected [min, max] with min < max, "
                                               f"got {list(extent)}")
    e = S.number(data["restitution"], f"{path}.restitution", min=0.0, max=1.0)
    return Contact(S.string(data.get("name", f"contact{path}"), f"{path}.name"), body,
                   S.vector(data.get("point", (0.0, 0.0)), f"{path}.point"),
                   S.number(data.get("radius", 0.0), f"{path}.radius", min=0.0), surface,
                   S.vector(data.get("surface_point", (0.0, 0.0)), f"{path}.surface_point"),
                   (normal[0] / nn, normal[1] / nn), extent, e)


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
        self._ob = [system._boff[c.body] for c in self.contacts]
        self._os = [system._boff[c.surface] for c in self.contacts]
        self._n = n

    def __len__(self) -> int:
        return len(self.contacts)

    def _geometry(self, k: int, q: np.ndarray):
        c = self.contacts[k]
        qx = np.concatenate([q, np.zeros(3)])
        ob, os_ = self._ob[k], self._os[k]
        SP = _rot(qx[ob + 2], c.point)
        SL = _rot(qx[os_ + 2], c.surface_point)
        nrm = _rot(qx[os_ + 2], c.normal)
        rP = qx[ob:ob + 2] + SP
        rL = qx[os_:os_ + 2] + SL
        return c, ob, os_, SP, SL, nrm, rP, rL

    def gap(self, k: int, q: np.ndarray) -> float:
        """Signed gap; +inf outside the contact's extent (no contact possible)."""
        c, ob, os_, SP, SL, nrm, rP, rL = self._geometry(k, q)
        d = rP - rL
        if c.extent is not None:
            tang = np.array([nrm[1], -nrm[0]])
            s = float(tang @ d)
            if not (c.extent[0] <= s <= c.extent[1]):
                return np.inf
        return float(nrm @ d) - c.radius

    def jacobian_row(self, k: int, q: np.ndarray) -> np.ndarray:
        """C_k = dc_k/dq (1 x n)."""
        c, ob, os_, SP, SL, nrm, rP, rL = self._geometry(k, q)
        row = np.zeros(self._n + 3)
        row[ob:ob + 2] += nrm
        row[ob + 2] += nrm @ np.array([-SP[1], SP[0]])
        row[os_:os_ + 2] -= nrm
        Rn = np.array([-nrm[1], nrm[0]])
        row[os_ + 2] += Rn @ (rP - rL) - nrm @ np.array([-SL[1], SL[0]])
        return row[:self._n]

    def impact(self, q: np.ndarray, qd: np.ndarray, t: float, active: list[int],
               rows=None) -> tuple[np.ndarray, dict[int, float]]:
        """Velocities after the impact of the ``active`` contacts (all at gap 0),
        and their normal impulses.  Contacts with a negative impulse are released."""
        s = self.system
        M = np.diag(s.mass_diag)
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


def validate_contacts(data: Any, ctx: S.ValidationContext) -> list[Contact]:
    out = []
    names = set()
    for k, item in enumerate(S.sequence(data or [], "impacts")):
        c = parse_contact(item, f"impacts[{k}]", ctx)
        if "name" not in item:
            c.name = f"impact{k + 1}"
        if c.name in names:
            raise ModelError(f"impacts[{k}].name", f"duplicate contact name '{c.name}'")
        names.add(c.name)
        out.append(c)
    return out


__all__ = ["Contact", "ContactSet", "parse_contact", "validate_contacts", "Mapping"]
