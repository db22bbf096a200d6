"""Output quantities of a System: the initial state, point and angular kinematics
and the inertia terms (kinetic energy, ``M qdd + b - Q``).

A mixin of :class:`mbcore.system.System`: it reads the facade's bindings of the
SystemModel (layout, mass data, point maps) and SystemData (kinematics
workspace)."""
from __future__ import annotations

import numpy as np

from .state import State

__all__ = ["OutputStages"]


class OutputStages:
    """Output methods of :class:`mbcore.system.System`."""

    def kinetic_energy(self, qd: np.ndarray, q: np.ndarray | None = None) -> float:
        """T = qd^T M qd / 2 (Nikravesh (1988), Eq. 14.8 for centroidal frames; spatial bodies:
        T = m rd^2 / 2 + w'^T J' w' / 2 with w' = 2 L(p) pd, Prob. 11.5, which
        needs q)."""
        if self.mass_diag is not None:
            return 0.5 * float(np.dot(self.mass_diag * qd, qd))
        if q is None:
            raise ValueError("the kinetic energy of spatial bodies needs q")
        from ..elements.rotations import L as Lmat
        rd = np.asarray(qd)[self._r_idx].reshape(-1, 3)
        w = 2.0 * np.einsum("bkl,bl->bk", Lmat(np.asarray(q)[self._p_idx]),
                            np.asarray(qd)[self._p_idx])
        return 0.5 * float(np.dot(self.body_mass, np.einsum("bk,bk->b", rd, rd))
                           + np.einsum("bk,bkl,bl->", w, self.body_inertia, w))

    def inertia_minus_forces(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                             t: float) -> np.ndarray:
        """``M(q) qdd + b(q, qd) - Q(q, qd, t)``: the right side of
        ``Phi_q^T lam = M qdd - Q`` of inverse dynamics (Nikravesh (1988), Eq. 9.62).  Spatial
        bodies (Formulation I): ``M = diag(m I, J*)``,
        ``J* = 4 L^T J' L``, ``b = [0; 8 Ldot^T J' L pd]``; the moment loads of the
        force elements arrive as ``n* = 2 G^T n``."""
        if self.mass_diag is not None:
            return self.mass_diag * qdd - self.forces(q, qd, t)
        from ..elements.rotations import L as Lmat
        out = -self.forces(q, qd, t).copy()
        q, qd, qdd = np.asarray(q), np.asarray(qd), np.asarray(qdd)
        out[self._r_idx] += np.repeat(self.body_mass, 3) * qdd[self._r_idx]
        p, pd, pdd = q[self._p_idx], qd[self._p_idx], qdd[self._p_idx]
        Lp, Ld = Lmat(p), Lmat(pd)
        Jw = np.einsum("bkl,blm->bkm", self.body_inertia, Lp)          # J' L
        acc = 4.0 * np.einsum("bkl,bk->bl", Lp, np.einsum("bkm,bm->bk", Jw, pdd))
        gyro = 8.0 * np.einsum("bkl,bk->bl", Ld, np.einsum("bkm,bm->bk", Jw, pd))
        out[self._p_idx] += acc + gyro
        return out

    def initial_state(self, t: float = 0.0) -> State:
        """State from the bodies' initial estimates (not yet assembled)."""
        q = np.zeros(self.n)
        qd = np.zeros(self.n)
        sp_off, sp_w = [], []                   # spatial bodies: pd in one batch
        for k, b in enumerate(self.model.bodies):
            o = int(self.body_offsets[k])
            if self.body_kinds[k].pad:          # a particle: position and velocity
                nq = self.body_kinds[k].nq
                q[o:o + nq] = b.position
                qd[o:o + nq] = b.velocity
            elif self.body_kinds[k].name == "spatial":
                q[o:o + 7] = (*b.position, *b.orientation)
                qd[o:o + 3] = b.velocity
                sp_off.append(o)
                sp_w.append(b.angular_velocity)
            else:
                q[o:o + 3] = (b.position[0], b.position[1], b.angle)
                qd[o:o + 3] = (b.velocity[0], b.velocity[1], b.angular_velocity)
        if sp_off:                              # pd = G(p)^T omega / 2 (Eq. 6.100)
            from ..elements.rotations import G as Gmat
            pi = np.asarray(sp_off, dtype=np.intp)[:, None] + np.arange(3, 7)
            w = np.asarray(sp_w, dtype=float)
            qd[pi] = 0.5 * np.einsum("bji,bj->bi", Gmat(q[pi]), w)
        q[self.n_body:] = self._initial_extra
        return State(t=t, q=q, qd=qd, qdd=np.zeros(self.n), lam=np.zeros(self.m))

    def point_kinematics(self, q, qd, qdd) -> np.ndarray:
        """Position, velocity and acceleration of every named point, (np, 6):
        ``x, y, xd, yd, xdd, ydd`` (Nikravesh (1988), Eqs. 4.1, 4.43-4.45; the "points of
        interest" of the book's KAP program, subroutine REPORT).
        Returns a work buffer."""
        npt = len(self.point_names)
        if not npt:
            return np.zeros((0, 6))
        ws = self._kinematics
        if self.padded:          # points of particles: read their padded blocks
            ext = ws.get("ext")
            if ext is None:
                ext = ws["ext"] = np.zeros((3, self.n_ext))
                ext[0] = self._qx
            for k, x in enumerate((q, qd, qdd)):
                ext[k, :self.n] = x
                ext[k, self._pad_dst] = ext[k, self._pad_src]
            q, qd, qdd = ext[0], ext[1], ext[2]
        if self.spatial:
            return self._point_kinematics_spatial(q, qd, qdd)
        if "pk" not in ws:
            ws["pk"] = np.zeros((3, len(q) + 3))
            ws["pk_out"] = np.zeros((npt, 6))
            ws["pk_c"] = None
            if self.backend == "compiled":
                from .._ext._kinematics import point_kinematics
                ws["pk_c"] = point_kinematics
        pk, out, o = ws["pk"], ws["pk_out"], self._pt_off
        if ws["pk_c"] is not None:
            ws["pk_c"](q, qd, qdd, o, self._pt_loc, out)
            return out
        pk[0, :len(q)] = q
        pk[1, :len(q)] = qd
        pk[2, :len(q)] = qdd
        phi = pk[0, o + 2]
        c, s = np.cos(phi), np.sin(phi)
        lx, ly = self._pt_loc[:, 0], self._pt_loc[:, 1]
        Sx = c * lx - s * ly
        Sy = s * lx + c * ly
        w, a = pk[1, o + 2], pk[2, o + 2]
        w2 = w * w
        out[:, 0] = pk[0, o] + Sx
        out[:, 1] = pk[0, o + 1] + Sy
        out[:, 2] = pk[1, o] - w * Sy
        out[:, 3] = pk[1, o + 1] + w * Sx
        out[:, 4] = pk[2, o] - a * Sy - w2 * Sx
        out[:, 5] = pk[2, o + 1] + a * Sx - w2 * Sy
        return out

    def angular_kinematics(self, q, qd, qdd) -> np.ndarray:
        """Angular velocity and acceleration of every spatial body in global axes,
        (nb_spatial, 6) = [omega, omegadot]: omega = 2 G(p) pd, omegadot = 2 G(p) pdd
        (Nikravesh (1988), Eqs. 6.96, 6.107; G(pd) pd = 0)."""
        idx = self._ang_p
        ws = self._kinematics
        if "ang_out" not in ws:
            ws["ang_out"] = np.zeros((len(idx), 6))
            ws["ang_c"] = None
            if self.backend == "compiled":
                from .._ext._kinematics import angular_kinematics
                ws["ang_c"] = angular_kinematics
        out = ws["ang_out"]
        if ws["ang_c"] is not None:
            ws["ang_c"](q, qd, qdd, idx, out)
            return out
        from ..elements.rotations import G as Gmat
        Gp = Gmat(np.asarray(q)[idx])
        out[:, 0:3] = 2.0 * np.einsum("bkl,bl->bk", Gp, np.asarray(qd)[idx])
        out[:, 3:6] = 2.0 * np.einsum("bkl,bl->bk", Gp, np.asarray(qdd)[idx])
        return out

    def _point_kinematics_spatial(self, q, qd, qdd) -> np.ndarray:
        """Points of spatial bodies, (np, 9): position, velocity, acceleration
        (r + A s', rd + Adot s', rdd + Addot s'; Nikravesh (1988), Eqs. 6.62-6.63, 6.102).  Compiled:
        ``mbcore._ext._kinematics.point_kinematics_spatial`` (same function)."""
        nq = len(q)              # n, or n_ext with particles (padded blocks)
        ws = self._kinematics
        if "pks_out" not in ws:
            ws["pks_out"] = np.zeros((len(self._pt_off), 9))
            ws["pks_c"] = None
            ws["pks"] = np.zeros((3, nq + 10))
            ws["pks"][0, self.n + 3:self.n + 10] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
            # points of the ground read the spatial ground block
            ws["pks_off"] = np.ascontiguousarray(
                np.where(self._pt_off == self.n, self.n + 3, self._pt_off), dtype=np.intp)
            if self.backend == "compiled":
                from .._ext._kinematics import point_kinematics_spatial
                ws["pks_c"] = point_kinematics_spatial
        if ws["pks_c"] is not None:
            ws["pks_c"](q, qd, qdd, ws["pks_off"] if self.padded else self._pt_off,
                        self._pt_loc, ws["pks_out"])
            return ws["pks_out"]
        from ..elements.rotations import G as Gmat, L as Lmat
        ext = ws["pks"]
        ext[0, :nq], ext[1, :nq], ext[2, :nq] = q, qd, qdd
        if self.padded:
            ext[0, self.n + 3:self.n + 10] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
        o = ws["pks_off"]
        r = ext[0][o[:, None] + np.arange(3)]
        rd = ext[1][o[:, None] + np.arange(3)]
        rdd = ext[2][o[:, None] + np.arange(3)]
        pi = o[:, None] + 3 + np.arange(4)
        p, pd, pdd = ext[0][pi], ext[1][pi], ext[2][pi]
        Gp, Lp, Gd, Ld = Gmat(p), Lmat(p), Gmat(pd), Lmat(pd)
        s = self._pt_loc
        A = np.einsum("pkl,pml->pkm", Gp, Lp)
        Ad = 2.0 * np.einsum("pkl,pml->pkm", Gd, Lp)
        Add = 2.0 * np.einsum("pkl,pml->pkm", Gd, Ld) + 2.0 * np.einsum(
            "pkl,pml->pkm", Gp, Lmat(pdd))
        out = ws["pks_out"]
        out[:, 0:3] = r + np.einsum("pkm,pm->pk", A, s)
        out[:, 3:6] = rd + np.einsum("pkm,pm->pk", Ad, s)
        out[:, 6:9] = rdd + np.einsum("pkm,pm->pk", Add, s)
        return out
