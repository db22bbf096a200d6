"""Mass blocks of spatial bodies in the Euler-parameter form (Formulation I).

Nikravesh (1988), §11.2-11.4, Eqs. 11.10-11.16, 11.22, 11.26-11.32: per rigid
spatial body ``M_b = diag(m I3, J*)`` with ``J* = 4 L^T J' L`` (4x4, singular:
``J* p = 0``), the gyroscopic vector ``b* = 2 H pd = 8 L(pd)^T J' L(p) pd`` and the
normalisation row ``2 p^T`` among the constraints.

J* is singular, but ``p^T pdd = -pd^T pd`` holds exactly by the normalisation
row's acceleration equation, so adding ``alpha p p^T pdd = -alpha p pd^T pd`` to both
sides leaves the solution (accelerations and every multiplier) unchanged and makes
the block regular (any alpha > 0):

    (J* + alpha p p^T) pdd = n* - b* - alpha p (pd^T pd) + reactions

With ``s = p^T p``, ``L L^T = s I3``, ``L^T L = s I4 - p p^T`` and ``L p = 0`` its
inverse is ``L^T J'^-1 L / (4 s^2) + p p^T / (alpha s^2) = E D E^T`` with

    E = [L^T V, p]  (4x4),   D = diag(1 / (4 s^2 lambda_k), 1 / (alpha s^2))

where ``J' = V diag(lambda) V^T`` (principal axes).  The solvers therefore work
in transformed columns: ``J^ = J T``, ``Q^ = T^T Q``, ``minv^ = D`` with
``T = blockdiag(I, E_b)``, use the diagonal Schur complement unchanged
(``J^ D J^^T = J M^-1 J^T``), and map back ``qdd = T qdd^``.  The first three
columns of ``J E`` are ``2 Phi_pi' V``: the angular-velocity (Form III) Jacobian in
principal axes.
"""
from __future__ import annotations

import numpy as np

from ..elements.rotations import L as Lmat
from ..errors import ModelError


#: L(e_k) of the unit vectors (4, 3, 4): L(p) = sum_k p_k L(e_k) (Nikravesh (1988), Eq. 6.39)
_LK = Lmat(np.eye(4))
#: L(p) = (p @ _LFLAT).reshape(3, 4)
_LFLAT = _LK.reshape(4, 12)
#: (L_k^T w)_i = (w @ _LKT)[4 i + k]
_LKT = np.ascontiguousarray(_LK.transpose(1, 2, 0).reshape(3, 16))
_EYE4 = np.eye(4)


def _axis(a) -> str:
    return "(" + ", ".join(f"{x:.3g}" for x in np.where(np.abs(a) < 1e-12, 0.0, a)) + ")"


class SpatialMass:
    """Formulation I mass blocks of the rigid spatial bodies of a System, and the
    column transform of the Jacobian data (see the module docstring)."""

    def __init__(self, system):
        s = system
        self.system = s
        n = s.n
        self.p_idx = np.ascontiguousarray(s.p_index, dtype=np.intp)       # (nb, 4)
        self.nb = nb = len(self.p_idx)
        Jp = np.array(s.body_inertia, dtype=float).reshape(nb, 3, 3)
        self.inertia = Jp
        lam, V = np.linalg.eigh(Jp)                   # principal moments and axes
        #: thin rods (the model makes their axial moment exactly 0): (body, axis)
        #: pairs without inertia; their transformed columns are massless
        self.massless = lam <= 1e-12 * lam.max(axis=1, keepdims=True, initial=0.0)
        lam = np.where(self.massless, 0.0, lam)
        self.lam = lam
        self.V = np.ascontiguousarray(V)
        #: regularisation weight per body: the mean of the eigenvalues of 4 J'
        self.alpha = 4.0 * lam.mean(axis=1)
        #: diagonal part of M^-1 (translations of every body; 0 for the p columns,
        #: which the transform replaces by D)
        self.minv = np.zeros(n)
        rm = np.repeat(s.body_mass, 3)
        self.minv[s.r_index] = 1.0 / rm
        self.minv_hat = self.minv.copy()
        #: the transformed mass matrix diag(m, 4 s^2 lambda_k, alpha s^2) (0 on the
        #: massless columns of thin rods), at the last :meth:`update`
        self.mass_hat = np.zeros(n)
        self.mass_hat[s.r_index] = rm
        self.E = np.zeros((nb, 4, 4))
        self.d = np.zeros((nb, 4))
        self._positions(s)
        self._qhat = np.zeros(n)

    def _positions(self, s) -> None:
        """Data positions of the p columns of every (row, body) pair of the
        Jacobian pattern: ``pos`` (K, 4) in column order p0..p3, ``bod`` (K,)."""
        n = s.n
        col_body = np.full(n, -1, dtype=np.intp)
        col_j = np.zeros(n, dtype=np.intp)
        for b, idx in enumerate(self.p_idx):
            col_body[idx] = b
            col_j[idx] = np.arange(4)
        rows, cols = s.jacobian_pattern()
        sel = np.nonzero(col_body[cols] >= 0)[0]
        r, c = rows[sel], cols[sel]
        data = (r * n + c) if s.dense else sel
        key = (r * max(self.nb, 1) + col_body[c]) * 4 + col_j[c]
        order = np.argsort(key, kind="stable")
        key, data = key[order], data[order]
        if len(key) % 4 or np.any(key.reshape(-1, 4) % 4 != np.arange(4)):
            raise RuntimeError("the Jacobian pattern lacks some Euler-parameter columns")
        self.pos = np.ascontiguousarray(data.reshape(-1, 4), dtype=np.intp)
        self.bod = np.ascontiguousarray((key.reshape(-1, 4)[:, 0] // 4) % max(self.nb, 1),
                                        dtype=np.intp)

    # ------------------------------------------------------------------ per state
    def update(self, q: np.ndarray) -> None:
        """E and D at q (module docstring)."""
        p = q[self.p_idx]
        s2 = np.einsum("bk,bk->b", p, p) ** 2
        self.E[:, :, :3] = np.einsum("bkj,bkl->bjl", Lmat(p), self.V)
        self.E[:, :, 3] = p
        m3 = 4.0 * s2[:, None] * self.lam
        self.d[:, :3] = np.divide(1.0, m3, out=np.zeros_like(m3), where=~self.massless)
        self.d[:, 3] = 1.0 / (self.alpha * s2)
        self.minv_hat[self.p_idx] = self.d
        self.mass_hat[self.p_idx[:, :3]] = m3
        self.mass_hat[self.p_idx[:, 3]] = self.alpha * s2

    @property
    def has_massless(self) -> bool:
        """Some body is a thin rod (zero inertia about its axis): M is singular
        and only the augmented (KKT) solve applies."""
        return bool(self.massless.any())

    def massless_columns(self) -> np.ndarray:
        """The transformed columns without mass (p_idx slots of the rods' axes)."""
        return self.p_idx[:, :3][self.massless]

    def massless_names(self) -> list[tuple[str, tuple[float, float, float]]]:
        """(body, its axis in body coordinates) of every massless column."""
        s = self.system
        names = [s.body_names[k] for k in s.rigid_spatial]
        return [(names[b], tuple(float(x) for x in self.V[b][:, k]))
                for b, k in zip(*np.nonzero(self.massless))]

    def refuse_massless(self, what: str) -> None:
        """Raise the named error of a formulation that needs M^-1 (``what``) when
        a body is a thin rod."""
        if self.has_massless:
            body, axis = self.massless_names()[0]
            raise ModelError("settings.formulation", f"{what} needs every spatial body's "
                             f"inertia positive definite, and body '{body}' is a thin rod "
                             f"(zero inertia about its axis {_axis(axis)}): use di, cs, cp "
                             f"or projection")

    def inertial_forces(self, q: np.ndarray, qd: np.ndarray, Q: np.ndarray) -> None:
        """Q_p -= b* + alpha p (pd^T pd)  (in place)."""
        p, pd = q[self.p_idx], qd[self.p_idx]
        w = 2.0 * np.einsum("bkl,bl->bk", Lmat(p), pd)                 # omega'
        Jw = np.einsum("bkl,bl->bk", self.inertia, w)
        gyro = 4.0 * np.einsum("bkl,bk->bl", Lmat(pd), Jw)             # 8 L(pd)^T J' L pd
        Q[self.p_idx] -= gyro + (self.alpha * np.einsum("bk,bk->b", pd, pd))[:, None] * p

    def transform_jacobian(self, jdata: np.ndarray, out: np.ndarray) -> None:
        """out = J T (the data of the transformed Jacobian, same layout)."""
        out[:] = jdata[:len(out)]
        if len(self.pos):
            out[self.pos] = np.einsum("kj,kji->ki", jdata[self.pos], self.E[self.bod])

    def nonzero_entries(self, samples: int = 2, seed: int = 0,
                        tol: float = 1e-10) -> tuple[np.ndarray | None, str]:
        """The data positions of the transformed (sparse) Jacobian ``J T`` that may be
        non-zero, or None when none vanish identically; with the reason.

        The fourth transformed column of a body is ``Phi_p p``, zero at every q for a
        constraint invariant to the scale of p (``Phi_p = 2 Phi_pi' L(p)`` and
        ``L(p) p = 0``, Nikravesh (1988), Eqs. 6.39, 7.45); the body's normalisation
        row ``2 p^T`` becomes ``2 p^T E = [0, 0, 0, 2 p^T p]``, zero off that column.
        So every normalisation row couples to nothing in ``J M^-1 J^T``.  Also left
        out: the translation columns a constraint type declares untouched
        (``r_columns``: a spherical joint's ``Phi_r = [I, -I]``).  Which
        entries vanish is checked on the System's own kernels at ``samples`` random
        states (random p of every body, t = 0): an entry is dropped only if it is
        below ``tol`` times its row's largest entry at all of them (a constraint type
        that is not invariant keeps its fourth columns)."""
        s = self.system
        if s.dense or not len(self.pos):
            return None, "dense Jacobian or no spatial bodies"
        rows, _ = s.jacobian_pattern()
        rows = np.asarray(rows, dtype=np.intp)
        nnz = len(rows)
        prow = rows[self.pos[:, 0]]
        own = prow >= s.m_elements                   # the normalisation rows' pairs
        cand = np.zeros(nnz, dtype=bool)
        cand[self.pos[~own, 3]] = True               # Phi_p p of the model's rows
        norm = np.zeros(s.m, dtype=bool)
        norm[prow[own]] = True
        cand[norm[rows]] = True                      # normalisation rows ...
        cand[self.pos[own, 3]] = False               # ... but their own p column
        for g in s.groups:                           # translation columns a type
            rc = getattr(g.ctype, "r_columns", None)  # declares untouched
            if rc is None or g.ncol != 7:
                continue
            nbk, jp = len(g.ctype.bodies), np.asarray(g.jpos, dtype=np.intp)
            for i, cols in enumerate(rc):
                for k in range(nbk):
                    for c in sorted({0, 1, 2} - set(cols)):
                        at = jp[:, (i * nbk + k) * 7 + c]
                        cand[at[at < nnz]] = True
        if not cand.any():
            return None, "no vanishing entries"
        buf = s.jacobian_data
        saved = buf.copy()
        rng = np.random.default_rng(seed)
        hat = np.zeros(len(buf))
        E = np.zeros((self.nb, 4, 4))
        try:
            for _ in range(samples):
                q = rng.normal(size=s.n)
                p = rng.normal(size=(self.nb, 4))
                p /= np.linalg.norm(p, axis=1, keepdims=True)
                q[self.p_idx] = p
                jd = np.array(s.evaluate_jacobian_data(q, 0.0), dtype=float)
                E[:, :, :3] = np.einsum("bkj,bkl->bjl", Lmat(p), self.V)
                E[:, :, 3] = p
                hat[:] = jd[:len(hat)]
                hat[self.pos] = np.einsum("kj,kji->ki", jd[self.pos], E[self.bod])
                a = np.abs(hat[:nnz])
                scale = np.zeros(s.m)
                np.maximum.at(scale, rows, a)
                if not np.all(np.isfinite(a)):
                    return None, "the Jacobian is not finite at a sample state"
                cand &= a <= tol * scale[rows]
        except Exception as exc:                     # a kernel refused a sample state
            return None, f"sample Jacobian failed: {exc}"
        finally:
            buf[:] = saved
        if not cand.any():
            return None, "no vanishing entries"
        return np.nonzero(~cand)[0].astype(np.intp), f"{int(cand.sum())} of {nnz} " \
            f"entries vanish in transformed columns"

    def transform_forces(self, Q: np.ndarray) -> np.ndarray:
        """Q^ = T^T Q (a work buffer)."""
        qh = self._qhat
        qh[:] = Q
        qh[self.p_idx] = np.einsum("bji,bj->bi", self.E, Q[self.p_idx])
        return qh

    def back(self, qdd_hat: np.ndarray) -> None:
        """qdd = T qdd^ (in place)."""
        qdd_hat[self.p_idx] = np.einsum("bij,bj->bi", self.E, qdd_hat[self.p_idx])

    def matrix(self, q: np.ndarray) -> np.ndarray:
        """The dense Formulation I mass matrix ``diag(m I3, J*)`` (no regularisation)."""
        s = self.system
        M = np.diag(np.where(self.minv > 0, 1.0 / np.where(self.minv > 0, self.minv, 1.0),
                             0.0))
        Lp = Lmat(q[self.p_idx])
        Js = 4.0 * np.einsum("bki,bkl,blj->bij", Lp, self.inertia, Lp)
        for b, idx in enumerate(self.p_idx):
            M[np.ix_(idx, idx)] = Js[b]
        del s
        return M

    def matrix_regular(self, q: np.ndarray) -> np.ndarray:
        """``M + alpha p p^T`` per body (dense, n x n): the regular mass matrix that
        goes with :meth:`inertial_forces` (module docstring)."""
        M = self.matrix(q)
        p = q[self.p_idx]
        for b, idx in enumerate(self.p_idx):
            M[np.ix_(idx, idx)] += self.alpha[b] * np.outer(p[b], p[b])
        return M

    def matrix_regular_sparse(self, q: np.ndarray):
        """:meth:`matrix_regular` as a scipy CSR matrix (O(n) entries)."""
        import scipy.sparse as sp
        n = self.system.n
        Lp = Lmat(q[self.p_idx])
        p = q[self.p_idx]
        blocks = (4.0 * np.einsum("bki,bkl,blj->bij", Lp, self.inertia, Lp)
                  + self.alpha[:, None, None] * np.einsum("bi,bj->bij", p, p))
        diag = np.where(self.minv > 0, 1.0 / np.where(self.minv > 0, self.minv, 1.0), 0.0)
        rows = np.concatenate([np.arange(n), np.repeat(self.p_idx, 4, axis=1).ravel()])
        cols = np.concatenate([np.arange(n), np.tile(self.p_idx, (1, 4)).ravel()])
        vals = np.concatenate([diag, blocks.ravel()])
        return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))

    def solve_columns(self, q: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``(M + alpha p p^T)^-1 X`` for a matrix X (n, k): the regular mass matrix
        of :meth:`solve` applied to columns (no inertial terms), through the same
        ``E D E^T`` per body (module docstring).  A new array."""
        self.update(q)
        Y = np.array(X, dtype=float)
        if self.nb:
            E = self.E
            Y[self.p_idx] = E.transpose(0, 2, 1) @ Y[self.p_idx]
            Y *= self.minv_hat[:, None]
            Y[self.p_idx] = E @ Y[self.p_idx]
        else:
            Y *= self.minv_hat[:, None]
        return Y

    def inertial_jacobians(self, q: np.ndarray, qd: np.ndarray,
                           qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per body (nb, 4, 4): the derivatives of the Euler-parameter rows of
        :meth:`solve`'s equation ``(J* + alpha p p^T) pdd + b* + alpha p (pd^T pd) = F_p``
        (the left-hand side at fixed pdd): ``Dq = d/dp`` and ``Dv = d/dpd``, with
        ``J* = 4 L^T J' L``, ``b* = 8 L(pd)^T J' L(p) pd`` (Nikravesh (1988),
        Eqs. 11.22, 11.26-11.32) and L(p) linear in p (Eq. 6.39): with the constant
        ``L_k = L(e_k)`` and ``L(x) y = -L(y) x``

            Dq[:, k] = 4 L_k^T J' L(p) pdd - 4 L(p)^T J' L(pdd) e_k
                       + alpha (e_k (p . pdd) + p pdd_k)
                       - 8 L(pd)^T J' L(pd) e_k + alpha e_k (pd . pd)
            Dv[:, k] = 8 L_k^T J' L(p) pd + 8 L(pd)^T J' L(p) e_k + 2 alpha p pd_k

        The translational rows ``m rdd = F_r`` have none.  So the accelerations
        ``a = M^-1 (F - b* - ...)`` of :meth:`solve` have ``da/dq = M^-1 (dF/dq - Dq)``
        and ``da/dqd = M^-1 (dF/dqd - Dv)`` (Dq, Dv on the p rows and columns)."""
        nb = self.nb
        idx = self.p_idx
        X = np.empty((3, nb, 4))
        X[0], X[1], X[2] = q[idx], qd[idx], qdd[idx]
        p, pd, a = X
        Lp, Lpd, La = (X @ _LFLAT).reshape(3, nb, 3, 4)             # L(p) = sum p_k L_k
        Jp = self.inertia
        JL = Jp @ Lp                                                 # J' L(p)
        Lpd_T = Lpd.transpose(0, 2, 1)
        w = np.empty((2, nb, 3))
        w[0] = (JL @ a[:, :, None])[:, :, 0]                         # J' L(p) pdd
        w[1] = (JL @ pd[:, :, None])[:, :, 0]                        # J' L(p) pd
        R = (w @ _LKT).reshape(2, nb, 4, 4)                          # L_k^T w, column k
        al = self.alpha[:, None, None]
        pa = np.einsum("bi,bi->b", p, a) + np.einsum("bi,bi->b", pd, pd)
        Dq = 4.0 * R[0] - 4.0 * (Lp.transpose(0, 2, 1) @ (Jp @ La)) \
            - 8.0 * (Lpd_T @ (Jp @ Lpd)) + al * p[:, :, None] * a[:, None, :]
        Dq += (al[:, :, 0] * pa[:, None])[:, :, None] * _EYE4
        Dv = 8.0 * R[1] + 8.0 * (Lpd_T @ JL) + 2.0 * al * p[:, :, None] * pd[:, None, :]
        return Dq, Dv

    def solve(self, q: np.ndarray, qd: np.ndarray, F: np.ndarray,
              out: np.ndarray) -> np.ndarray:
        """``out = (M + alpha p p^T)^-1 (F - b* - alpha p pd^T pd)``: the accelerations
        of the given generalised force (applied + constraint forces)."""
        self.update(q)
        out[:] = F
        self.inertial_forces(q, qd, out)
        out[:] = self.transform_forces(out)
        out *= self.minv_hat
        self.back(out)
        return out


def impact_mass(system, q, spatial=None) -> np.ndarray:
    """The mass matrix of impact equations at q: diagonal for planar bodies and
    particles, the regular Formulation I matrix ``M + alpha p p^T`` of rigid spatial
    bodies (exact in an impact map whose rows include the Euler-parameter norms,
    where ``p^T pdot = 0`` before and after).  ``spatial``:
    the System's :class:`SpatialMass`, if the caller keeps one."""
    if system.mass_diag is not None:
        return np.diag(system.mass_diag)
    if getattr(system, "rigid_spatial", None):
        return (spatial or SpatialMass(system)).matrix_regular(q)
    return np.diag(np.repeat(system.body_mass, 3))
