"""Many spheres colliding with each other and with planes: ``spatial:sphere_group``,
one model-file entry for N spheres (e.g. a pile falling into a box), with a broad
phase whose cost grows ~linearly with N.

Design.  One element acts on a variable list of bodies (the core's generic
``ForceType.body_list``: its body blocks are the fixed ``surface`` followed by the
listed ``spheres``, and it is a group of its own), so the kernel sees every sphere
of the element in one call and can find the touching pairs itself: a hashed uniform
grid (Ericson (2005), ch. 7; :mod:`mbplugins.contact.broadphase`), O(N) per
evaluation, instead of N (N - 1) / 2 pair elements of ``spatial:contact``.  The
narrow phase and the law are exactly those of ``spatial:contact``
(:mod:`mbplugins.contact.spatial`): every found pair is evaluated as one
``spatial:contact`` pair (shape ``sphere_sphere``, body i the sphere of lower list
index, the sphere centred at the body origin; shape ``sphere_plane`` for every
sphere against every plane of ``surface``) with the same packed law parameters —
in the reference by :meth:`SpatialContact._pair` / ``_loads``, in C by ``_pair`` of
ext/plugins/_contact_law.pxi.  The core knows nothing about contact.

Law (the shared ``law_params``): Hertz's ``k delta^e`` (Johnson (1985), Ch. 4)
with Hunt & Crossley (1975) damping, regularised Coulomb friction.  Energy: the
sum of ``k delta^(e+1) / (e+1)`` over the active contacts; non-conservative power:
the sum of the pairs' ``-(f_n - k delta^e) delta_dot + f_t . v_t``.

Outputs (per element, not per pair): ``contacts`` (active contacts, delta > 0),
``sphere_contacts``, ``plane_contacts``, ``max_penetration`` (largest delta, 0
without contact) and ``total_normal_force`` (sum of f_n).  They are computed by
the NumPy reference on both kernel paths (the plugin ABI has no output function).

par = ``[k, c, e, mu, v_eps, damping_model, friction_model, h, n_planes,
n_spheres]`` (``n_par`` = 10, the head), then per plane ``[point(3), normal(3)]``
(surface coordinates), then one radius per sphere; ``h`` is the grid's cell size
(``cell_size``, default twice the largest radius).  Compiled kernel:
``SPHERE_GROUP`` of ``mbplugins._ext._sphere_group``.

Limits: the force has no analytic Jacobian; implicit integrators and
linearisation difference it (cost ~ N^2): use an explicit integrator.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from mbcore.elements.schema import Param, check_keys, mapping, vector
from mbcore.errors import ElementEvaluationError, ModelError

from ..planar.contact import DAMPING_MODELS, FRICTION_MODELS, check_law, law_params
from ..spatial.forces import SpatialForceType
from .broadphase import grid_pairs
from .spatial import SpatialContact

HEAD = 10
K, C, E, MU, VEPS, DM, FM, CELL, NPL, NSP = range(HEAD)
_LAW = SpatialContact()
_GROUND = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])


def _unpack(par: np.ndarray):
    """(law (7,), h, planes (np, 6), radii (N,)) of one element's parameters."""
    npl, n = int(par[NPL]), int(par[NSP])
    planes = par[HEAD:HEAD + 6 * npl].reshape(npl, 6)
    return par[:7], float(par[CELL]), planes, par[HEAD + 6 * npl:HEAD + 6 * npl + n]


def _pair_par(law, Ri, Rj, plane, shape: int) -> np.ndarray:
    """The packed parameters of ``spatial:contact`` for a block of pairs."""
    m = Ri.shape[0]
    p = np.zeros((m, 22))
    p[:, 6] = Ri
    if plane is not None:
        p[:, 7:13] = plane
    p[:, 13] = Rj
    p[:, 14:21] = law
    p[:, 21] = shape
    return p


class SphereGroup(SpatialForceType):
    """Spheres on a body list colliding with each other and with the planes of a
    surface body (module docstring)."""
    rows_stacked = False

    name = "sphere_group"
    #: spheres centred at their body origins, planes in the surface body's frame:
    #: refused on bodies with ``center_of_mass``
    frame_fixed = {"spheres": "spheres", "planes": "surface"}
    description = ("many spheres colliding with each other and with planes (compliant "
                   "contact of spatial:contact, grid broad phase)")
    c_kernel = "mbplugins._ext._sphere_group:SPHERE_GROUP"
    bodies = ("surface", "spheres")
    body_list = "spheres"
    params = {
        "spheres": Param("bodies", "the sphere bodies (each sphere centred at its body "
                                   "origin)"),
        "radius": Param("number", "radius of every sphere (> 0), unless radii is given",
                        required=False, unit="length"),
        "radii": Param("numbers", "one radius per sphere (> 0)", required=False, unit="length"),
        "surface": Param("body", "body carrying the planes", default="ground"),
        "planes": Param("mapping", "name: {point: [x, y, z], normal: [nx, ny, nz]} "
                                   "(surface coordinates, normal towards the free side)",
                        default={}),
        "cell_size": Param("number", "grid cell size h (>= the largest diameter; "
                                     "default: the largest diameter)", required=False,
                           unit="length"),
        **law_params(1.5),
    }
    n_par = HEAD
    n_fun = 0
    labels = ("contacts", "sphere_contacts", "plane_contacts", "max_penetration",
              "total_normal_force")

    # ------------------------------------------------------------------ model file
    def _radii(self, spec, path) -> np.ndarray:
        n = len(spec["spheres"])
        if spec.get("radii") is not None:
            if spec.get("radius") is not None:
                raise ModelError(f"{path}.radii", "give radius or radii, not both")
            R = np.asarray(spec["radii"], dtype=float)
            if R.size != n:
                raise ModelError(f"{path}.radii", f"expected {n} radii (one per sphere), "
                                                  f"got {R.size}")
            key = "radii"
        elif spec.get("radius") is not None:
            R = np.full(n, float(spec["radius"]))
            key = "radius"
        else:
            raise ModelError(f"{path}.radius", "required key is missing (or radii)")
        bad = np.nonzero(~(R > 0.0))[0]
        if bad.size:
            kp = f"{path}.radii[{bad[0]}]" if key == "radii" else f"{path}.radius"
            raise ModelError(kp, f"must be > 0, got {R[bad[0]]:g}")
        return R

    @staticmethod
    def _planes(spec, path) -> list[list[float]]:
        out = []
        for name, raw in mapping(spec["planes"], f"{path}.planes").items():
            kp = f"{path}.planes.{name}"
            raw = mapping(raw, kp)
            check_keys(raw, ("point", "normal"), kp, required=("normal",))
            pt = vector(raw.get("point", (0.0, 0.0, 0.0)), f"{kp}.point", 3)
            nr = Param("axis3").validate(raw["normal"], f"{kp}.normal", None)
            out.append([*map(float, pt), *nr])
        return out

    def _cell(self, spec, path, R) -> float:
        h = spec.get("cell_size")
        if h is None:
            return 2.0 * float(R.max())
        if not h >= 2.0 * float(R.max()):
            raise ModelError(f"{path}.cell_size", f"must be >= the largest sphere "
                                                  f"diameter {2.0 * float(R.max()):g}, "
                                                  f"got {h:g}")
        return float(h)

    def check(self, spec, path):
        check_law(spec, path, ("damping", "friction"))
        R = self._radii(spec, path)
        self._planes(spec, path)
        self._cell(spec, path, R)

    def pack(self, spec, ctx):
        R = self._radii(spec, ctx.path)
        planes = self._planes(spec, ctx.path)
        head = [spec["stiffness"], spec["damping"], spec["exponent"], spec["friction"],
                spec["slip_velocity"], float(DAMPING_MODELS.index(spec["damping_model"])),
                float(FRICTION_MODELS.index(spec["friction_model"])),
                self._cell(spec, ctx.path, R), float(len(planes)), float(R.size)]
        return [*head, *(x for p in planes for x in p), *R], []

    # ------------------------------------------------------------------ reference
    def _contacts(self, par, qb, qdb):
        """Every candidate contact of one element: a list of (pair tuple of
        SpatialContact._pair, qbp (m, 2, 7), body rows (m, 2) in qb) — the planes'
        (every sphere) and the sphere pairs' (the broad phase's)."""
        law, h, planes, R = _unpack(par)
        n = R.size
        xs = qb[1:, :3]
        out = []
        s0 = np.zeros((n, 3))
        for plane in planes:
            qbp = np.empty((n, 2, 7))
            qbp[:, 0] = qb[1:]
            qbp[:, 1] = qb[0]
            qdbp = np.empty((n, 2, 7))
            qdbp[:, 0] = qdb[1:]
            qdbp[:, 1] = qdb[0]
            pp = _pair_par(law, R, np.zeros(n), plane, 0)
            rows = np.stack([np.arange(1, n + 1), np.zeros(n, dtype=np.intp)], -1)
            out.append((_LAW._pair(pp, qbp, qdbp, s0), qbp, rows))
        pairs = grid_pairs(xs, R, h)
        if pairs.shape[0]:
            i, j = pairs[:, 0], pairs[:, 1]
            pp = _pair_par(law, R[i], R[j], None, 1)
            qbp = np.stack([qb[1 + i], qb[1 + j]], 1)
            qdbp = np.stack([qdb[1 + i], qdb[1 + j]], 1)
            try:
                pr = _LAW._pair(pp, qbp, qdbp, np.zeros((i.size, 3)))
            except ElementEvaluationError as exc:
                raise ElementEvaluationError(0, exc.reason) from None
            out.append((pr, qbp, pairs + 1))
        return out

    def _each(self, par, qb, qdb, fn) -> list:
        return [fn(par[e], qb[e], None if qdb is None else qdb[e], e)
                for e in range(par.shape[0])]

    def force(self, par, qb, qdb, t, f):
        g = np.zeros(qb.shape)
        for e in range(par.shape[0]):
            try:
                contacts = self._contacts(par[e], qb[e], qdb[e])
            except ElementEvaluationError as exc:
                raise ElementEvaluationError(e, exc.reason) from None
            for pr, qbp, rows in contacts:
                Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft = pr
                loads = _LAW._loads(qbp, Xi, Xj, fn[:, None] * n + ft)
                np.add.at(g[e], rows[:, 0], loads[:, 0])
                np.add.at(g[e], rows[:, 1], loads[:, 1])
        return g

    def energy(self, par, qb, t, f):
        out = np.zeros(par.shape[0])
        qdb = np.zeros_like(qb)
        for e in range(par.shape[0]):
            e1 = par[e, E] + 1.0
            for pr, _, _ in self._contacts(par[e], qb[e], qdb[e]):
                delta = pr[3]
                on = delta > 0.0
                out[e] += float(np.sum(par[e, K] * np.power(delta[on], e1) / e1))
        return out

    def power_nc(self, par, qb, qdb, t, f):
        out = np.zeros(par.shape[0])
        for e in range(par.shape[0]):
            for pr, _, _ in self._contacts(par[e], qb[e], qdb[e]):
                Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft = pr
                out[e] += float(np.sum(np.where(
                    delta > 0.0, -(fn - fel) * dd + np.einsum("ek,ek->e", ft, vt), 0.0)))
        return out

    def outputs(self, par, qb, qdb, t, f):
        out = np.zeros((par.shape[0], len(self.labels)))
        for e in range(par.shape[0]):
            npl = int(par[e, NPL])
            counts, dmax, fsum = [0, 0], 0.0, 0.0
            for k, (pr, _, _) in enumerate(self._contacts(par[e], qb[e], qdb[e])):
                delta, fn = pr[3], pr[8]
                on = delta > 0.0
                counts[0 if k >= npl else 1] += int(np.count_nonzero(on))
                if np.any(on):
                    dmax = max(dmax, float(delta[on].max()))
                fsum += float(np.sum(fn[on]))
            out[e] = [counts[0] + counts[1], counts[0], counts[1], dmax, fsum]
        return out


def sphere_pairs(par: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """The touching sphere pairs (list indices, i < j) of one element (tests)."""
    law, h, planes, R = _unpack(np.asarray(par, dtype=float).ravel())
    return grid_pairs(np.asarray(qb)[1:, :3], R, h)


FORCE_TYPES: list[Any] = [SphereGroup]
