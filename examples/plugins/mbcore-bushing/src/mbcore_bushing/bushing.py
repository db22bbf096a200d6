"""Planar bushing: a linear spring-damper in x, y and rotation between two body points.

With the attachment points ``P_i = r_i + A_i s'_i`` and ``P_j = r_j + A_j s'_j``:

* relative displacement ``d = P_j - P_i`` and its rate ``dd = Pdot_j - Pdot_i``
  (global axes), relative angle ``theta = phi_j - phi_i - theta0`` and rate
  ``thetad = w_j - w_i``;
* bushing force ``F = [kx dx + cx ddx, ky dy + cy ddy]`` and torque
  ``n = k_phi theta + c_phi thetad``;
* generalised forces ``g_i = [F, S_i x F + n]``, ``g_j = [-F, -(S_j x F) - n]``
  (``S = A s'``; moments about the body origins, mbcore's ForceType rule 3):
  the bushing pulls ``P_j`` back towards ``P_i`` and turns body j back;
* potential energy ``(kx dx^2 + ky dy^2 + k_phi theta^2) / 2``, non-conservative
  power ``-(cx ddx^2 + cy ddy^2 + c_phi thetad^2)``.

In matrix form with ``D = dd/dq = [-I, -R S_i, I, R S_j]`` (2 x 6) and
``t = dtheta/dq = [0, 0, -1, 0, 0, 1]``: ``g = -D^T F - t n``; the analytic
Jacobians are in :meth:`Bushing.force_jacobian`.

``par`` (11 floats per element): ``[s'_i (2), s'_j (2), kx, ky, k_phi, cx, cy,
c_phi, theta0]`` — the same layout the compiled kernel (:mod:`._kernel`) reads.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements import ForceType, PackContext, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.schema import Param

#: indices in par
SI, SJ, K, C, THETA0 = slice(0, 2), slice(2, 4), slice(4, 7), slice(7, 10), 10
GAINS = ("kx", "ky", "k_phi", "cx", "cy", "c_phi")


class Bushing(ForceType):
    """Planar bushing between two body points (module docstring)."""

    name = "bushing"
    description = "planar bushing: linear springs and dampers in x, y (global) and rotation"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "attachment on body i (body coordinates)",
                         default=(0.0, 0.0), on="body_i"),
        "point_j": Param("vec2", "attachment on body j (body coordinates)",
                         default=(0.0, 0.0), on="body_j"),
        "kx": Param("number", "stiffness along global x", default=0.0),
        "ky": Param("number", "stiffness along global y", default=0.0),
        "k_phi": Param("number", "rotational stiffness", default=0.0),
        "cx": Param("number", "damping along global x", default=0.0),
        "cy": Param("number", "damping along global y", default=0.0),
        "c_phi": Param("number", "rotational damping", default=0.0),
        "angle_offset": Param("number", "theta0: relative angle phi_j - phi_i at rest",
                              default=0.0),
    }
    n_par = 11
    n_fun = 0
    labels = ("dx", "dy", "angle", "fx", "fy", "torque")
    conservative = False

    def check(self, spec, path):
        for key in GAINS:
            if spec[key] < 0:
                raise ModelError(f"{path}.{key}", f"must be >= 0, got {spec[key]:g}")

    def pack(self, spec, ctx: PackContext):
        si, sj = spec["point_i"], spec["point_j"]
        return [si[0], si[1], sj[0], sj[1], *(spec[k] for k in GAINS),
                spec["angle_offset"]], []

    # -- kinematics of the two points ------------------------------------------------
    @staticmethod
    def _relative(par, qb, qdb):
        """S_i, S_j (ne, 2), d, dd (ne, 2), theta, thetad (ne,)."""
        Si = rot(qb[:, 0, 2], par[:, SI])
        Sj = rot(qb[:, 1, 2], par[:, SJ])
        d = qb[:, 1, :2] + Sj - qb[:, 0, :2] - Si
        dd = (qdb[:, 1, :2] + qdb[:, 1, 2:3] * perp(Sj)
              - qdb[:, 0, :2] - qdb[:, 0, 2:3] * perp(Si))
        th = qb[:, 1, 2] - qb[:, 0, 2] - par[:, THETA0]
        thd = qdb[:, 1, 2] - qdb[:, 0, 2]
        return Si, Sj, d, dd, th, thd

    def _loads(self, par, qb, qdb):
        """Geometry plus the bushing force F (ne, 2) and torque n (ne,)."""
        Si, Sj, d, dd, th, thd = self._relative(par, qb, qdb)
        F = par[:, 4:6] * d + par[:, 7:9] * dd
        n = par[:, 6] * th + par[:, 9] * thd
        return Si, Sj, d, dd, th, thd, F, n

    # -- the ForceType contract -------------------------------------------------------
    def force(self, par, qb, qdb, t, f):
        Si, Sj, d, dd, th, thd, F, n = self._loads(par, qb, qdb)
        g = np.empty((par.shape[0], 2, 3))
        g[:, 0, :2] = F
        g[:, 0, 2] = Si[:, 0] * F[:, 1] - Si[:, 1] * F[:, 0] + n
        g[:, 1, :2] = -F
        g[:, 1, 2] = -(Sj[:, 0] * F[:, 1] - Sj[:, 1] * F[:, 0]) - n
        return g

    def force_jacobian(self, par, qb, qdb, t, f):
        """``(K, C)``, each (ne, 2, 3, 2, 3), from ``g = -D^T F - t n``::

            dF/dq  = diag(k) D + diag(c) E,   E = d(dd)/dq: w_i S_i at phi_i,
                                                          -w_j S_j at phi_j
            dF/dqd = diag(c) D,   dn/dq = k_phi t,   dn/dqd = c_phi t
            K = -D^T dF/dq - H - k_phi t t^T,  H = diag(S_i . F at phi_i,
                                                        -S_j . F at phi_j)
            C = -D^T diag(c) D - c_phi t t^T

        (``H`` is the derivative of ``D^T`` at fixed F: d(R S)/dphi = -S.)
        """
        Si, Sj, d, dd, th, thd, F, n = self._loads(par, qb, qdb)
        ne = par.shape[0]
        D = np.zeros((ne, 2, 6))
        D[:, 0, 0] = D[:, 1, 1] = -1.0
        D[:, 0, 3] = D[:, 1, 4] = 1.0
        D[:, :, 2] = -perp(Si)
        D[:, :, 5] = perp(Sj)
        E = np.zeros((ne, 2, 6))
        E[:, :, 2] = qdb[:, 0, 2:3] * Si
        E[:, :, 5] = -qdb[:, 1, 2:3] * Sj
        kxy, cxy = par[:, 4:6, None], par[:, 7:9, None]
        dFdq = kxy * D + cxy * E
        K = -np.einsum("erk,erl->ekl", D, dFdq)
        C = -np.einsum("erk,erl->ekl", D, cxy * D)
        K[:, 2, 2] -= np.sum(Si * F, -1)
        K[:, 5, 5] += np.sum(Sj * F, -1)
        for M, gain in ((K, par[:, 6]), (C, par[:, 9])):   # - gain t t^T
            M[:, 2, 2] -= gain
            M[:, 5, 5] -= gain
            M[:, 2, 5] += gain
            M[:, 5, 2] += gain
        return K.reshape(ne, 2, 3, 2, 3), C.reshape(ne, 2, 3, 2, 3)

    def energy(self, par, qb, t, f):
        zero = np.zeros_like(qb)
        Si, Sj, d, dd, th, thd = self._relative(par, qb, zero)
        return 0.5 * (par[:, 4] * d[:, 0] ** 2 + par[:, 5] * d[:, 1] ** 2
                      + par[:, 6] * th ** 2)

    def power_nc(self, par, qb, qdb, t, f):
        """The dampers' power (<= 0): ``-(cx ddx^2 + cy ddy^2 + c_phi thetad^2)``."""
        Si, Sj, d, dd, th, thd = self._relative(par, qb, qdb)
        return -(par[:, 7] * dd[:, 0] ** 2 + par[:, 8] * dd[:, 1] ** 2
                 + par[:, 9] * thd ** 2)

    def outputs(self, par, qb, qdb, t, f):
        """``dx, dy, angle`` (= theta) and the bushing load ``fx, fy, torque`` (F and n:
        what body j exerts on body i; body j receives the opposite)."""
        Si, Sj, d, dd, th, thd, F, n = self._loads(par, qb, qdb)
        return np.stack([d[:, 0], d[:, 1], th, F[:, 0], F[:, 1], n], -1)


class CompiledBushing(Bushing):
    """``bushing_c``: the bushing with a compiled kernel.

    Same schema, packing and Python reference methods (inherited); ``c_kernel``
    names the PyCapsule ``mbcore.force_kernel`` of :mod:`mbcore_bushing._kernel`
    that mbcore's compiled assembly, right-hand side and loops call without
    Python (mbcore_plugin.h).  Where mbcore cannot use the kernel, the inherited
    methods give the same numbers (the package's tests keep them equal to 1e-12).
    """

    name = "bushing_c"
    description = "planar bushing with a compiled kernel (C contract mbcore_plugin.h)"
    c_kernel = "mbcore_bushing._kernel:BUSHING"
