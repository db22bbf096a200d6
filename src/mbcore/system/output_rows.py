"""Output quantities of a System for a block of output rows at once.

The row-by-row methods (:meth:`~mbcore.system.System.kinetic_energy`,
:meth:`~mbcore.system.System.reactions`, ...) are the reference; the methods here
compute the same quantities for ``R`` states stacked along a leading axis, from
the per-row Jacobian values, multipliers and accelerations that the caller
collected (e.g. from the compiled right-hand side at each output time):

* kinetic energy T = qd^T M qd / 2 (Nikravesh (1988), Eq. 14.8; spatial bodies
  T = m rd^2 / 2 + w'^T J' w' / 2 with w' = 2 L(p) pd, Prob. 11.5);
* gravity potential -sum m g . r and the force elements' energies (Eqs. 14.10-14.12);
* generalised reactions g_b = (Phi_k)_{q_b}^T lam_k (Eq. 8.50, §9.3), for spatial
  bodies converted to global moments n = G(p) n* / 2 (Eq. 11.4);
* constraint violations max |Phi| and max |Phi_q qd - nu| (Eqs. 3.12-3.14);
* point kinematics (Eqs. 4.1, 4.43-4.45; spatial 6.62-6.63, 6.102) and angular
  kinematics w = 2 G pd, wdot = 2 G pdd (Eqs. 6.96, 6.107).

Per-type quantities (force outputs and energies, local reactions) are evaluated
with the rows stacked as elements of one call when the type declares
``rows_stacked`` (its methods treat each element independently and depend on
time only through the function jets ``f``); other types are called once per row,
as the reference does.

A mixin of :class:`mbcore.system.System`."""
from __future__ import annotations

import inspect

import numpy as np

from ..errors import PluginError

__all__ = ["OutputRows", "takes_gen", "MISSING_KERNELS"]


_KERNELS: dict = {}
#: the compiled block kernels this build lacks (rebuild the extensions), with the
#: reason; their rows are computed by the NumPy methods
MISSING_KERNELS: dict[str, str] = {}

#: rows per pass of the computations whose temporaries are wide (a few Jacobian
#: entries per constraint row): a pass's temporaries stay in the processor's cache
_CHUNK = 512


class OutputRows:
    """Block (rows x quantities) output methods of :class:`mbcore.system.System`."""

    # -- what a caller collects per row --------------------------------------------
    @property
    def jacobian_values(self) -> np.ndarray:
        """The live buffer of Phi_q's values (row-major dense or CSR data, then the
        ground entries) as the last Jacobian evaluation left it: what
        :meth:`reactions_rows` and :meth:`violation_rows` read per row."""
        return self._jdata

    @property
    def function_count(self) -> int:
        """Number of time functions (columns of :meth:`functions_at`)."""
        return len(self.fv)

    def extended_rows(self, Q: np.ndarray) -> np.ndarray:
        """(R, n_ext): each row's q extended by the ground blocks and the particles'
        padded blocks (as the System's extended buffer holds one q)."""
        QX = np.empty((Q.shape[0], self._qx.size))
        QX[:] = self._qx
        QX[:, :self.n] = Q
        if self.padded:
            QX[:, self._pad_dst] = QX[:, self._pad_src]
        return QX

    def extended_rates(self, QD: np.ndarray) -> np.ndarray:
        """(R, n_ext): each row's qd extended as :meth:`extended_rows` extends q (the
        ground blocks at rest)."""
        QDX = np.zeros((QD.shape[0], self._qdx.size))
        QDX[:, :self.n] = QD
        if self.padded:
            QDX[:, self._pad_dst] = QDX[:, self._pad_src]
        return QDX

    # -- energies -----------------------------------------------------------------
    def kinetic_energy_rows(self, Q: np.ndarray, QD: np.ndarray) -> np.ndarray:
        """T of each row, (R,) (as :meth:`kinetic_energy`)."""
        if self.mass_diag is not None:
            return 0.5 * _sum_last(self.mass_diag * QD * QD)
        R = Q.shape[0]
        rd = QD[:, self._r_idx].reshape(R, -1, 3)
        w = 2.0 * _Lx(Q[:, self._p_idx], QD[:, self._p_idx])             # (R, nb, 3)
        Jw = _mv(self.body_inertia, w)
        return 0.5 * (_sum_last(self.body_mass * _sum_last(rd * rd))
                      + _sum_last(_sum_last(w * Jw)))

    def potential_energy_rows(self, Q: np.ndarray, T: np.ndarray,
                              FV: np.ndarray | None) -> np.ndarray:
        """V of each row, (R,) (as :meth:`potential_energy`); ``FV`` (R, nfun, 3) the
        function jets of each row (None without time functions)."""
        return self.gravity_potential_rows(Q) + self.force_energy_rows(Q, T, FV)

    def gravity_potential_rows(self, Q: np.ndarray) -> np.ndarray:
        """-sum m g . r of each row (with a Simulation's constant forces), (R,)."""
        nz = np.nonzero(self._q_gravity)[0]
        return -_sum_last(Q[:, nz] * self._q_gravity[nz])

    def force_energy_rows(self, Q: np.ndarray, T: np.ndarray, FV: np.ndarray | None,
                          stacked: bool | None = None) -> np.ndarray:
        """The force elements' potential energy of each row, (R,); ``stacked``:
        only the groups whose type is (True) or is not (False) ``rows_stacked``
        (None: every group)."""
        V = np.zeros(Q.shape[0])
        groups = self._force_groups_of(stacked)
        if groups:
            QX = self.extended_rows(Q)
            for fg in groups:
                V += _sum_last(self._group_rows(fg, "energy", (len(fg.names),), T, FV,
                                                (QX[:, fg.gather],)))
        return V

    def force_outputs_rows(self, Q: np.ndarray, QD: np.ndarray, T: np.ndarray,
                           FV: np.ndarray | None, stacked: bool | None = None,
                           out: np.ndarray | None = None) -> np.ndarray:
        """Force element outputs of each row, (R, len(force_labels)) (as
        :meth:`force_outputs`); ``stacked`` as in :meth:`force_energy_rows` (the
        columns of the other groups are left as they are in ``out``)."""
        R = Q.shape[0]
        if out is None:
            out = np.zeros((R, len(self.force_labels)))
        groups = self._force_groups_of(stacked)
        if not groups:
            return out
        QX, QDX = self.extended_rows(Q), self.extended_rates(QD)
        off = 0
        for fg in self.force_groups:
            w = len(fg.names) * len(fg.ftype.labels)
            if any(fg is g for g in groups):
                out[:, off:off + w] = self._group_rows(
                    fg, "outputs", (len(fg.names), len(fg.ftype.labels)), T, FV,
                    (QX[:, fg.gather], QDX[:, fg.gather])).reshape(R, -1)
            off += w
        return out

    def output_types_stacked(self) -> tuple[bool, bool]:
        """(every force group, every constraint group with local reactions) of a
        type that declares ``rows_stacked``: else some groups must be evaluated
        one row at a time (``stacked=False`` of the ``*_rows`` methods)."""
        return (all(_stacked(fg.ftype) for fg in self.force_groups),
                all(_stacked(g.ctype) and not g.nx for g in self._element_groups
                    if g.ctype.local_labels))

    def _force_groups_of(self, stacked: bool | None) -> list:
        if stacked is None:
            return list(self.force_groups)
        return [fg for fg in self.force_groups if _stacked(fg.ftype) == stacked]

    def _group_rows(self, fg, method: str, shape: tuple, T, FV, blocks) -> np.ndarray:
        """One force group's ``method`` for every row: (R, *shape).  ``blocks``: the
        rows' gathered body blocks (R, ne, nb, nc) (q, and qd for ``outputs``)."""
        R, ne = len(T), shape[0]
        ftype = fg.ftype
        f_rows = _function_rows(FV, fg.fidx, R)
        if _stacked(ftype):
            par = np.broadcast_to(fg.par, (R,) + fg.par.shape).reshape(R * ne, -1)
            args = [par] + [b.reshape((R * ne,) + b.shape[2:]) for b in blocks]
            args += [float(T[0]), f_rows.reshape((R * ne,) + f_rows.shape[2:])]
            out = self._force_call(fg, method, tuple(args), (R * ne,) + shape[1:],
                                   float(T[0]))
            return out.reshape((R,) + shape)
        out = np.empty((R,) + shape)
        for i in range(R):
            t = float(T[i])
            args = (fg.par,) + tuple(b[i] for b in blocks) + (t, f_rows[i])
            out[i] = self._force_call(fg, method, args, shape, t)
        return out

    # -- reactions -------------------------------------------------------------------
    def generalised_rows(self, LAM: np.ndarray, JD: np.ndarray) -> list[np.ndarray]:
        """Each element group's ``g_b = (Phi_k)_{q_b}^T lam_k`` on its bodies for every
        row, (R, ne, nb, ncol) in the System's coordinates (Nikravesh (1988), Eq.
        8.50), in the order of the element groups: what :meth:`reactions_rows` and
        :meth:`reactions_local_rows` share (``gen``) when both are recorded."""
        return [self._generalised_group(g, LAM, JD) for g in self._element_groups]

    def _generalised_group(self, g, LAM: np.ndarray, JD: np.ndarray) -> np.ndarray:
        """:func:`_generalised` of one group: by the compiled block kernel on the
        compiled backend (the same sums in the same order), else by NumPy."""
        kernel = self._block_kernel("_output_rows", "generalised_rows")
        if kernel is None:
            return _generalised(g, LAM, JD)
        jb, lr = g.jac_blocks, g.lam_rows
        if not (jb.dtype == np.intp and jb.flags.c_contiguous):
            jb = np.ascontiguousarray(jb, dtype=np.intp)
        if not (lr.dtype == np.intp and lr.flags.c_contiguous):
            lr = np.ascontiguousarray(lr, dtype=np.intp)
        out = np.empty((LAM.shape[0], jb.shape[0]) + jb.shape[2:])
        kernel(np.ascontiguousarray(JD), LAM, jb, lr, out)
        return out

    def reactions_rows(self, Q: np.ndarray, LAM: np.ndarray, JD: np.ndarray,
                       gen: list | None = None) -> np.ndarray:
        """Generalised reactions of each row, (R, len(reaction_labels)) (as
        :meth:`reactions`); ``JD`` (R, slots) each row's :attr:`jacobian_values`;
        ``gen``: :meth:`generalised_rows` of the same rows, if at hand.  Spatial
        bodies: the global moment ``n = G(p) n* / 2`` (Eq. 11.4)."""
        R = Q.shape[0]
        out = np.zeros((R, len(self.reaction_labels)))
        QX = None
        for k, g in enumerate(self._element_groups):
            gb = self._generalised_group(g, LAM, JD) if gen is None else gen[k]
            if g.kind == "spatial":
                if QX is None:
                    QX = self.extended_rows(Q)
                out[:, g.react_pos[..., :3]] = gb[..., :3]
                out[:, g.react_pos[..., 3:]] = 0.5 * _Gx(QX[:, g.gather_all][..., 3:7],
                                                         gb[..., 3:7])
            else:
                out[:, g.react_pos] = gb
        return out

    @property
    def local_reactions_use_jacobian(self) -> bool:
        """Some group with joint-local reactions reads the generalised reactions
        (``reaction_local_gen``): :meth:`reactions_local_rows` then wants ``JD``."""
        return any(takes_gen(g.ctype) for g in self._element_groups
                   if g.ctype.local_labels)

    def reactions_local_rows(self, Q: np.ndarray, T: np.ndarray, FV: np.ndarray | None,
                             LAM: np.ndarray, stacked: bool | None = None,
                             out: np.ndarray | None = None,
                             JD: np.ndarray | None = None,
                             gen: list | None = None) -> np.ndarray:
        """Joint-local reactions of each row, (R, len(local_reaction_labels)) (as
        :meth:`reactions_local`); ``stacked`` as in :meth:`force_energy_rows`.
        ``JD`` (R, slots): each row's :attr:`jacobian_values`; with it, the types
        that declare ``reaction_local_gen`` get the rows' generalised reactions
        ``g_b = (Phi)_{q_b}^T lam`` (Nikravesh (1988), Eq. 8.50) as ``gen`` instead
        of evaluating their Jacobian again (the others, and every type without
        ``JD``, are called as :meth:`reactions_local` calls them); ``gen``:
        :meth:`generalised_rows` of the same rows, if at hand."""
        R = Q.shape[0]
        if out is None:
            out = np.zeros((R, len(self.local_reaction_labels)))
        QX = None
        inv = np.argsort(self._local_perm)      # raw (group-order) index -> column
        off = 0
        for k, g in enumerate(self._element_groups):
            ct = g.ctype
            if not ct.local_labels:
                continue
            nl, ne = len(ct.local_labels), g.ne
            cols = inv[off:off + ne * nl]
            off += ne * nl
            together = _stacked(ct) and not g.nx
            if stacked is not None and together != stacked:
                continue
            if QX is None:
                QX = self.extended_rows(Q)
            f_rows = _function_rows(FV, g.fidx, R)
            qb, lam = QX[:, g.gather_all], LAM[:, g.lam_rows]
            gb = None
            if takes_gen(ct) and (gen is not None or JD is not None):
                gb = self._generalised_group(g, LAM, JD) if gen is None else gen[k]
            if together:
                par = np.broadcast_to(g.par, (R,) + g.par.shape).reshape(R * ne, -1)
                kw = {} if gb is None else {"gen": gb.reshape((R * ne,) + gb.shape[2:])}
                loc = ct.reaction_local(par, qb.reshape((R * ne,) + qb.shape[2:]),
                                        float(T[0]),
                                        f_rows.reshape((R * ne,) + f_rows.shape[2:]),
                                        lam.reshape(R * ne, -1), **kw)
                out[:, cols] = _checked(ct, loc, (R * ne, nl)).reshape(R, ne * nl)
            else:
                for i in range(R):
                    kw = {"qe": QX[i, g.xoff]} if g.nx else {}
                    if gb is not None:
                        kw["gen"] = gb[i]
                    out[i, cols] = _checked(ct, ct.reaction_local(
                        g.par, qb[i], float(T[i]), f_rows[i], lam[i], **kw),
                        (ne, nl)).ravel()
        return out

    # -- violations ---------------------------------------------------------------------
    def violation_rows(self, QD: np.ndarray, JD: np.ndarray, PHI: np.ndarray,
                       NU: np.ndarray) -> np.ndarray:
        """(R, 2): max |Phi| and max |Phi_q qd - nu| of each row (as the dynamic
        analysis' violation channel), from each row's Jacobian values ``JD``,
        ``PHI`` and ``NU``."""
        R, m, n = QD.shape[0], self.m, self.n
        out = np.zeros((R, 2))
        if not m:
            return out
        if R > _CHUNK and not (self.dense and self._block_kernel(
                "_output_rows", "violation_rows_dense")):
            # NumPy: the gathered products of a few hundred rows at a time stay in
            # the cache (each row's values do not depend on the others)
            for lo in range(0, R, _CHUNK):
                hi = lo + _CHUNK
                out[lo:hi] = self.violation_rows(QD[lo:hi], JD[lo:hi], PHI[lo:hi],
                                                 NU[lo:hi])
            return out
        if self.dense:                  # the structural entries of each row, in order
            pos, col = self._dense_rows_layout()                # (k, m) each
            kernel = self._block_kernel("_output_rows", "violation_rows_dense")
            if kernel is not None:
                kernel(QD, np.ascontiguousarray(JD), np.ascontiguousarray(PHI),
                       np.ascontiguousarray(NU), pos, col, out)
                return out
            QDz = np.zeros((R, n + 1))
            QDz[:, :n] = QD
            V = np.take(JD, pos, axis=1)                        # (R, k, m)
            V *= np.take(QDz, col, axis=1)
            Jq = V[:, 0].copy()
            for j in range(1, V.shape[1]):                      # the k entries of a row
                Jq += V[:, j]
        else:
            ptr = self._indptr            # CSR rows: sums of their entries
            vals = JD[:, :ptr[-1]] * QD[:, self._csr_cols]
            Jq = np.zeros((R, m))
            full = np.nonzero(np.diff(ptr) > 0)[0]
            if full.size:
                Jq[:, full] = np.add.reduceat(vals, ptr[full], axis=1)
        out[:, 0] = np.max(np.abs(PHI), axis=1)
        out[:, 1] = np.max(np.abs(Jq - NU), axis=1)
        return out

    def _dense_rows_layout(self) -> tuple[np.ndarray, np.ndarray]:
        """(k, m) data positions and columns of each row's structural entries of the
        dense Jacobian (ascending columns; k the longest row, shorter rows padded
        with column n, a zero rate): ``sum_k J[pos] qd[col]`` adds the products of
        the full row's sum that are not exact zeros, in the same order (built once)."""
        lay = getattr(self, "_dense_rows", None)
        if lay is None:
            m, n = self.m, self.n
            rows, cols = self._csr_rows, self._csr_cols       # sorted by row, column
            counts = np.bincount(rows, minlength=m)
            k = max(int(counts.max(initial=0)), 1)
            start = np.concatenate([[0], np.cumsum(counts)[:-1]])
            slot = np.arange(len(rows)) - start[rows]
            pos = np.zeros((m, k), dtype=np.intp)
            col = np.full((m, k), n, dtype=np.intp)
            pos[rows, slot] = rows * n + cols
            col[rows, slot] = cols
            lay = self._dense_rows = (np.ascontiguousarray(pos.T),
                                      np.ascontiguousarray(col.T))
        return lay

    # -- kinematics of points and bodies ---------------------------------------------
    def _rows_kernel(self, name: str):
        """The compiled block kernel ``name`` of :mod:`mbcore._ext._kinematics` (the
        per-row kernels' arithmetic, row after row) on the compiled backend, else
        None (the NumPy methods here, its reference)."""
        return self._block_kernel("_kinematics", name)

    def _block_kernel(self, module: str, name: str):
        """The compiled block kernel ``name`` of ``mbcore._ext.<module>`` on the
        compiled backend (with coordinates), else None (the NumPy methods here; also
        when an older build lacks the kernel: :data:`MISSING_KERNELS` names it)."""
        if self.backend != "compiled" or not self.n:
            return None
        key = f"{module}.{name}"
        if key not in _KERNELS:
            import importlib
            try:
                _KERNELS[key] = getattr(importlib.import_module(f"mbcore._ext.{module}"),
                                        name)
            except (ImportError, AttributeError) as exc:
                _KERNELS[key] = None
                MISSING_KERNELS[key] = f"{type(exc).__name__}: {exc}"
        return _KERNELS[key]

    def point_kinematics_rows(self, Q, QD, QDD) -> np.ndarray:
        """(R, np * 6) planar / (R, np * 9) spatial: :meth:`point_kinematics` of
        each row, flattened as the ``points`` channel."""
        R = Q.shape[0]
        if not len(self.point_names):
            return np.zeros((R, 0))
        if self.padded:                  # points of particles: the row-by-row method
            return np.stack([self.point_kinematics(Q[i], QD[i], QDD[i]).ravel()
                             for i in range(R)])
        if self.spatial:
            kernel = self._rows_kernel("point_kinematics_spatial_rows")
            if kernel is None:
                return self._point_rows_spatial(Q, QD, QDD)
            out = np.empty((R, 9 * len(self._pt_off)))
            kernel(Q, QD, QDD, self._pt_off, self._pt_loc, out)
            return out
        o, loc = self._pt_off, self._pt_loc
        ext = np.zeros((3, R, self.n + 3))
        ext[0, :, :self.n], ext[1, :, :self.n], ext[2, :, :self.n] = Q, QD, QDD
        phi, w, a = ext[0][:, o + 2], ext[1][:, o + 2], ext[2][:, o + 2]
        c, s = np.cos(phi), np.sin(phi)
        lx, ly = loc[:, 0], loc[:, 1]
        Sx, Sy = c * lx - s * ly, s * lx + c * ly
        w2 = w * w
        out = np.empty((R, len(o), 6))
        out[..., 0] = ext[0][:, o] + Sx
        out[..., 1] = ext[0][:, o + 1] + Sy
        out[..., 2] = ext[1][:, o] - w * Sy
        out[..., 3] = ext[1][:, o + 1] + w * Sx
        out[..., 4] = ext[2][:, o] - a * Sy - w2 * Sx
        out[..., 5] = ext[2][:, o + 1] + a * Sx - w2 * Sy
        return out.reshape(R, -1)

    def _point_rows_spatial(self, Q, QD, QDD) -> np.ndarray:
        """r + A s', its rate A-dot s' = 2 G(pd) L(p)^T s' and acceleration
        A-ddot s' = 2 G(pd) L(pd)^T s' + 2 G(p) L(pdd)^T s' (Nikravesh (1988), Eqs.
        6.42, 6.62-6.63, 6.102)."""
        R, n = Q.shape[0], self.n
        ext = np.zeros((3, R, n + 10))
        ext[0, :, n + 3:n + 10] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
        ext[0, :, :n], ext[1, :, :n], ext[2, :, :n] = Q, QD, QDD
        o = np.where(self._pt_off == n, n + 3, self._pt_off)
        ri = o[:, None] + np.arange(3)
        pi = o[:, None] + 3 + np.arange(4)
        p, pd, pdd = ext[0][:, pi], ext[1][:, pi], ext[2][:, pi]
        s = self._pt_loc
        out = np.empty((R, len(o), 9))
        out[..., 0:3] = ext[0][:, ri] + _GLt(p, p, s)
        out[..., 3:6] = ext[1][:, ri] + 2.0 * _GLt(pd, p, s)
        out[..., 6:9] = ext[2][:, ri] + 2.0 * (_GLt(pd, pd, s) + _GLt(p, pdd, s))
        return out.reshape(R, -1)

    def angular_kinematics_rows(self, Q, QD, QDD) -> np.ndarray:
        """(R, nb_spatial * 6): :meth:`angular_kinematics` of each row, flattened."""
        idx = self._ang_p
        R = Q.shape[0]
        if not len(idx):
            return np.zeros((R, 0))
        kernel = self._rows_kernel("angular_kinematics_rows")
        if kernel is not None:
            out = np.empty((R, 6 * len(idx)))
            kernel(Q, QD, QDD, idx, out)
            return out
        p = Q[:, idx]
        out = np.empty((R, len(idx), 6))
        out[..., 0:3] = 2.0 * _Gx(p, QD[:, idx])
        out[..., 3:6] = 2.0 * _Gx(p, QDD[:, idx])
        return out.reshape(R, -1)


def _sum_last(X: np.ndarray) -> np.ndarray:
    """Sum over the last axis, term by term in index order (a few terms: added one by
    one; more: the last partial sum of ``cumsum``, whose order is the same): each
    row's value is the same whatever the other rows of the block (a resumed run's
    rows are recorded again in other blocks and must come out bit for bit as
    before)."""
    k = X.shape[-1]
    if k == 0:
        return np.zeros(X.shape[:-1])
    if k > 64:
        return np.cumsum(X, axis=-1)[..., -1]
    acc = X[..., 0].copy()
    for j in range(1, k):
        acc += X[..., j]
    return acc


def _mv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``A @ x`` over the last two / one axes (broadcast), by :func:`_sum_last`."""
    return _sum_last(A * x[..., None, :])


def _stacked(etype) -> bool:
    return bool(getattr(etype, "rows_stacked", False))


_GEN: dict[type, bool] = {}


def takes_gen(ctype: object) -> bool:
    """The type declares ``reaction_local_gen`` and its ``reaction_local`` takes the
    keyword ``gen`` (a subclass that overrides the method without it is called
    without: its own reference); cached per class."""
    cls = type(ctype)
    ok = _GEN.get(cls)
    if ok is None:
        ok = False
        if getattr(ctype, "reaction_local_gen", False):
            try:
                par = inspect.signature(ctype.reaction_local).parameters
            except (TypeError, ValueError):
                par = {}
            ok = "gen" in par or any(v.kind is v.VAR_KEYWORD for v in par.values())
        _GEN[cls] = ok
    return ok


def _generalised(g, LAM: np.ndarray, JD: np.ndarray) -> np.ndarray:
    """(R, ne, nb, ncol): each row's ``g_b = (Phi_k)_{q_b}^T lam_k`` of a group's
    elements on their bodies (Nikravesh (1988), Eq. 8.50) from the rows' Jacobian
    values ``JD`` and multipliers ``LAM``, summed over the element's equations in
    index order (as :func:`_sum_last`: a row's value does not depend on the others)."""
    jb, lr = g.jac_blocks, g.lam_rows                       # (ne, m, nb, ncol), (ne, m)
    acc = JD[:, jb[:, 0]] * LAM[:, lr[:, 0], None, None]
    for j in range(1, jb.shape[1]):                         # the element's m equations
        acc += JD[:, jb[:, j]] * LAM[:, lr[:, j], None, None]
    return acc


def _Gx(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``G(p) x`` (..., 3) for p, x (..., 4) (Nikravesh (1988), Eq. 6.38), the four
    products of each component added in index order (bit for bit ``_mv(G(p), x)``
    without forming G)."""
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    x0, x1, x2, x3 = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    out = np.empty(np.broadcast_shapes(p.shape, x.shape)[:-1] + (3,))
    out[..., 0] = -e1 * x0 + e0 * x1 - e3 * x2 + e2 * x3
    out[..., 1] = -e2 * x0 + e3 * x1 + e0 * x2 - e1 * x3
    out[..., 2] = -e3 * x0 - e2 * x1 + e1 * x2 + e0 * x3
    return out


def _Lx(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``L(p) x`` (..., 3) (Nikravesh (1988), Eq. 6.39), as :func:`_Gx`."""
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    x0, x1, x2, x3 = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    out = np.empty(np.broadcast_shapes(p.shape, x.shape)[:-1] + (3,))
    out[..., 0] = -e1 * x0 + e0 * x1 + e3 * x2 - e2 * x3
    out[..., 1] = -e2 * x0 - e3 * x1 + e0 * x2 + e1 * x3
    out[..., 2] = -e3 * x0 + e2 * x1 - e1 * x2 + e0 * x3
    return out


def _GLt(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``G(a) L(b)^T s`` (..., 3) without forming the matrices: with
    ``G(a) L(b)^T = a_v b_v^T + b_v a_v^T + (a0 b0 - a_v.b_v) I + b0 ã_v + a0 b̃_v``
    (from Nikravesh (1988), Eqs. 6.38-6.39; ``A = G(p) L(p)^T``, Eq. 6.42)."""
    a0, b0 = a[..., 0:1], b[..., 0:1]
    av, bv = a[..., 1:4], b[..., 1:4]
    out = av * _sum_last(bv * s)[..., None]
    out += bv * _sum_last(av * s)[..., None]
    out += (a0 * b0 - _sum_last(av * bv)[..., None]) * s
    out += b0 * _cross(av, s)
    out += a0 * _cross(bv, s)
    return out


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b for stacks of 3-vectors, component by component."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def _checked(ct, loc, shape) -> np.ndarray:
    loc = np.asarray(loc, dtype=float)
    if loc.shape != shape:
        raise PluginError(f"constraint type '{ct.name}'.reaction_local() returned shape "
                          f"{loc.shape}, expected {shape}")
    return loc


def _function_rows(FV, fidx, R: int) -> np.ndarray:
    """(R, ne, n_fun, 3): the jets of a group's functions in each row (``FV`` None:
    the System has no time functions)."""
    if FV is None:
        return np.zeros((R,) + np.shape(fidx) + (3,))
    return FV[:, fidx]
