"""Nonlinear translational spring-damper-actuator (Nikravesh (1988), §9.2.4-9.2.5; 
§3 F5 "nonlinear characteristics").

Like ``tsda``, but the spring force is a law ``f_s(delta)`` of the deformation
``delta = L - L0`` and the damper force a law ``f_d(Ldot)`` of the length rate,
each a table (a cubic spline through the points, ``scipy.interpolate.CubicSpline``,
linear beyond the ends) or a polynomial.  The potential is the integral of the
spring law.  This type has no compiled kernel: it is evaluated through its NumPy
reference on both kernel settings (one Python call per element and evaluation —
use ``tsda`` for linear laws in large models).  Its force Jacobians are those of
``tsda`` (:meth:`TSDA.force_jacobian`) with the laws' slopes (:meth:`Law.slope`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.interpolate import CubicSpline

from mbcore.elements.base import PackContext
from mbcore.errors import ModelError
from mbcore.elements.schema import Param, check_keys, mapping, number, sequence

from .forces import TSDA, initial_length  # noqa: E402  (forces imports this module last)

_LAWS: list["Law"] = []          # process-local table; par holds indices into it


class Law:
    """A scalar law f(x) and its integral from 0: a polynomial, or a natural cubic
    spline through a table continued linearly (C1) beyond its ends."""

    def __init__(self, spec: Any, poly=None, table=None):
        self.spec = spec
        if poly is not None:
            self.p = np.polynomial.Polynomial(poly)
            self.P = self.p.integ()
            self.cs = None
        else:
            x, f = table
            self.cs = CubicSpline(x, f, bc_type="natural")
            self.I = self.cs.antiderivative()
            self.x0, self.x1 = float(x[0]), float(x[-1])
            self.f0, self.f1 = float(f[0]), float(f[-1])
            self.d0, self.d1 = float(self.cs(x[0], 1)), float(self.cs(x[-1], 1))

    def __call__(self, x):
        if self.cs is None:
            return self.p(x)
        x = np.asarray(x, float)
        inner = self.cs(np.clip(x, self.x0, self.x1))
        return np.where(x < self.x0, self.f0 + self.d0 * (x - self.x0),
                        np.where(x > self.x1, self.f1 + self.d1 * (x - self.x1), inner))

    def slope(self, x):
        """df/dx of the continued law (the spline's derivative inside the table,
        the end slopes beyond it)."""
        if self.cs is None:
            return self.p.deriv()(x)
        x = np.asarray(x, float)
        inner = self.cs(np.clip(x, self.x0, self.x1), 1)
        return np.where(x < self.x0, self.d0, np.where(x > self.x1, self.d1, inner))

    def _F(self, x):
        """An antiderivative of the continued law."""
        if self.cs is None:
            return self.P(x)
        x = np.asarray(x, float)
        xc = np.clip(x, self.x0, self.x1)
        F = self.I(xc)
        lo = x - self.x0
        hi = x - self.x1
        F = F + np.where(x < self.x0, self.f0 * lo + 0.5 * self.d0 * lo * lo, 0.0)
        F = F + np.where(x > self.x1, self.f1 * hi + 0.5 * self.d1 * hi * hi, 0.0)
        return F

    def integral(self, x):
        return self._F(x) - self._F(0.0)


def parse_law(value: Any, path: str) -> Law:
    mapping(value, path)
    if len(value) != 1 or next(iter(value)) not in ("table", "polynomial"):
        raise ModelError(path, "expected {table: {x: [...], f: [...]}} or "
                               "{polynomial: [c0, c1, ...]}")
    kind, body = next(iter(value.items()))
    if kind == "polynomial":
        c = [number(v, f"{path}.polynomial[{k}]")
             for k, v in enumerate(sequence(body, f"{path}.polynomial"))]
        if not c:
            raise ModelError(f"{path}.polynomial", "expected at least one coefficient")
        return Law(value, poly=c)
    mapping(body, f"{path}.table")
    check_keys(body, ("x", "f"), f"{path}.table", required=("x", "f"))
    x = np.array([number(v, f"{path}.table.x[{k}]")
                  for k, v in enumerate(sequence(body["x"], f"{path}.table.x"))])
    f = np.array([number(v, f"{path}.table.f[{k}]")
                  for k, v in enumerate(sequence(body["f"], f"{path}.table.f"))])
    if len(x) < 2 or len(x) != len(f):
        raise ModelError(f"{path}.table", f"expected x and f of equal length >= 2, got "
                                          f"{len(x)} and {len(f)}")
    if np.any(np.diff(x) <= 0):
        raise ModelError(f"{path}.table.x", "must be strictly increasing")
    return Law(value, table=(x, f))


class _LawParam(Param):
    def validate(self, value, path, ctx):
        if value is None:
            return None
        return parse_law(value, path)


class NonlinearTSDA(TSDA):
    """``f = f_s(L - L0) + f_d(Ldot) + f_a(t)`` along the line P_i P_j (positive =
    tension); ``g_i += [f u, S_i x f u]``, ``g_j -= [f u, S_j x f u]``.
    par = ``[s'_i, s'_j, L0, spring law index, damper law index (-1: none)]``."""

    name = "tsda_nonlinear"
    description = "spring-damper-actuator with tabulated or polynomial force laws"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "attachment on body i", default=(0.0, 0.0), on="body_i",
                         unit="length"),
        "point_j": Param("vec2", "attachment on body j", default=(0.0, 0.0), on="body_j",
                         unit="length"),
        "free_length": Param("number", "L0 (default: the initial length)", required=False,
                             unit="length"),
        "spring": _LawParam("law", "f_s(delta): {table: {x, f}} or {polynomial: [...]}"),
        "damper": _LawParam("law", "f_d(Ldot) (default: none)", required=False),
        "actuator": Param("function", "f_a(t)", default=0.0),
    }
    n_par = 8
    n_fun = 1
    kernel = None                      # Python only
    _L0 = 4

    def check(self, spec, path):
        if spec.get("free_length") is not None and spec["free_length"] < 0:
            raise ModelError(f"{path}.free_length", "must be >= 0")

    def pack(self, spec, ctx: PackContext):
        si, sj = spec["point_i"], spec["point_j"]
        _LAWS.append(spec["spring"])
        ks = len(_LAWS) - 1
        kd = -1
        if spec.get("damper") is not None:
            _LAWS.append(spec["damper"])
            kd = len(_LAWS) - 1
        return [si[0], si[1], sj[0], sj[1], initial_length(spec, ctx), ks, kd, 0.0], \
            [spec["actuator"]]

    def _laws(self, par, L, Ld, f):
        fs = np.array([float(_LAWS[int(k)](d)) for k, d in zip(par[:, 5], L - par[:, 4])])
        fd = np.array([float(_LAWS[int(k)](v)) if k >= 0 else 0.0
                       for k, v in zip(par[:, 6], Ld)])
        return fs, fd, f[:, 0, 0]

    def _slopes(self, par, L, Ld):
        """f_s'(L - L0) and f_d'(Ldot) (:meth:`Law.slope`) for the F5 Jacobian
        (:meth:`TSDA.force_jacobian`)."""
        ks = np.array([float(_LAWS[int(k)].slope(d)) for k, d in zip(par[:, 5], L - par[:, 4])])
        kd = np.array([float(_LAWS[int(k)].slope(v)) if k >= 0 else 0.0
                       for k, v in zip(par[:, 6], Ld)])
        return ks, kd

    def energy(self, par, qb, t, f):
        d = self._length(par, qb)[3] - par[:, 4]
        return np.array([float(_LAWS[int(k)].integral(x)) for k, x in zip(par[:, 5], d)])
