"""The force stages of a System: the generalized forces Q(q, qd, t) (Nikravesh
(1988), Eq. 9.8), their Jacobians dQ/dq and dQ/dqd, the potential energy, the
non-conservative power and the force elements' outputs.

A mixin of :class:`mbcore.system.System`: it reads the facade's bindings of the
SystemModel (evaluators, force groups) and SystemData (buffers, plans)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ElementEvaluationError, PluginError
from .groups import ForceGroup, kernel_group, reason_of

__all__ = ["ForceStages"]

_NDARRAY = np.ndarray
_F64 = np.dtype(np.float64)        # the fast path's output check: ``dtype is _F64``


class ForceStages:
    """Force evaluation methods of :class:`mbcore.system.System`."""

    def forces(self, q: np.ndarray, qd: np.ndarray, t: float) -> np.ndarray:
        """Generalised applied forces Q(q, qd, t): gravity plus every force element
        (Nikravesh (1988), Eq. 9.8).  Length n."""
        fv = self._functions_at(t)
        Q = self._Q
        if self._force_evaluator is not None:
            if self.padded:
                self._load(q)
                self._load_qd(qd)
                ok = self._force_evaluator.forces(self._qx, self._qdx, t, fv, self._Qext)
                Q[:] = self._Qext[:self.n]
                Q[self._pad_src] += self._Qext[self._pad_dst]
            else:
                ok = self._force_evaluator.forces(q, qd, t, fv, Q)
            if not ok:
                fg = self._compiled_force_groups[self._force_evaluator.failed_group]
                e = self._force_evaluator.failed_element
                self._element_failed(fg, e, reason_of(fg, e), t)
        else:
            if (getattr(q, "shape", None) != (self.n,) or getattr(qd, "shape", None)
                    != (self.n,)) and (np.shape(q) != (self.n,) or np.shape(qd) != (self.n,)):
                raise ValueError(f"q and qd must have {self.n} entries")
            Q[:] = 0.0
        Q += self._q_gravity
        if not self._py_force_groups:
            return Q
        # the force groups evaluated in Python (the SystemData's plan): one
        # _force_call per group, the result added in place into a precomputed view
        # of Q (``add``: one run of coordinates) or scattered (``scatter``: distinct
        # bodies, no ground; ``ext``: into the extended buffer, ground slots
        # dropped; ``at``: bodies repeated across the group's elements need the
        # unbuffered add)
        if self._py_forces_direct:      # no ground slots: gather from q, qd directly
            qs = q if q.__class__ is _NDARRAY else np.asarray(q)
            qds = qd if qd.__class__ is _NDARRAY else np.asarray(qd)
        else:
            self._load(q)
            self._load_qd(qd)
            qs, qds = self._qx, self._qdx
        Qx = None
        call = self._force_call
        for fg, par, cidx, fidx, fv0, shape, mode, dst, idx in self._py_force_plan:
            g = call(fg, "force", (par, qs[cidx], qds[cidx], t,
                                   fv0 if fidx is None else fv[fidx]), shape, t)
            if mode == "add":             # dst: a view of Q shaped like g
                dst += g
            elif mode == "scatter":
                dst[idx] += g
            else:
                if Qx is None:
                    Qx = self._Qx3
                    Qx[:] = 0.0
                if mode == "ext":
                    Qx[idx] += g
                else:
                    np.add.at(Qx, idx, g.reshape(-1))
        if Qx is not None:
            Q += Qx[:self.n]
            if self.padded:
                Q[self._pad_src] += Qx[self._pad_dst]
        return Q

    def _force_call(self, fg: ForceGroup, method: str, args, shape, t):
        """One call of a Python force group's ``method`` (``force`` through
        ``fg.force_fn``): a float64 array of ``shape`` (anything else is converted,
        or refused with the type and method named)."""
        try:
            out = (fg.force_fn if method == "force" else getattr(fg.ftype, method))(*args)
        except ElementEvaluationError as exc:
            self._element_failed(fg, exc.index, exc.reason, t)
        except Exception as exc:        # name the plugin, elements, method, time
            from ..plugins.errors import group_failed
            group_failed(fg, method, args, exc)
        if out.__class__ is _NDARRAY and out.dtype is _F64 and out.shape == shape:
            return out
        out = np.asarray(out, dtype=float)
        if out.shape != shape:
            raise PluginError(f"force type '{fg.ftype.name}'.{method}() returned shape "
                              f"{out.shape}, expected {shape}")
        return out

    def _element_failed(self, fg, e, reason, t):
        from ..errors import AnalysisError
        raise AnalysisError(f"force element '{fg.names[e]}' ({fg.paths[e]}, "
                            f"{fg.ftype.name}): {reason}", t)

    # ------------------------------------------------------------ force Jacobians
    #: relative step of the forward-difference fallback (as the formulations' FD)
    FD_STEP = 1e-7

    def force_jacobians(self, q: np.ndarray, qd: np.ndarray, t: float) -> tuple[Any, Any]:
        """``K = dQ/dq`` and ``C = dQ/dqd`` of :meth:`forces` (gravity is constant):
        dense (n, n) arrays for dense systems, CSR matrices for sparse ones (as
        :meth:`jacobian`).  New arrays, not work buffers.

        Per force group: its compiled kernel's ``jacobian`` (the compiled plugin
        tier) on the compiled backend, else the type's NumPy reference
        ``force_jacobian(par, qb, qdb, t, f) -> (K, C)`` with blocks
        (ne, nb, nc, nb, nc) (planar: the force elements of Nikravesh (1988), §9.2;
        spatial Euler-parameter form ``[f, 2 G^T n]``: Eqs. 11.1-11.7), else forward differences
        of that group's own forces (``user_force``, third-party types),
        vectorised over the group's elements (nb x nc force calls).  Blocks on the
        ground (and the padding of particles) are dropped."""
        fj = self.data.force_jacobian_plan or self._fj_setup()
        fv = self._functions_at(t)
        Kv, Cv = fj["K"], fj["C"]
        if fj["eval"] is not None:
            ev = fj["eval"]
            if self.padded:
                self._load(q)
                self._load_qd(qd)
                ok = ev.jacobians(self._qx, self._qdx, fv, Kv[:ev.size], Cv[:ev.size], t)
            else:
                if np.shape(q) != (self.n,) or np.shape(qd) != (self.n,):
                    raise ValueError(f"q and qd must have {self.n} entries")
                ok = ev.jacobians(np.ascontiguousarray(q, dtype=float),
                                  np.ascontiguousarray(qd, dtype=float), fv,
                                  Kv[:ev.size], Cv[:ev.size], t)
            if not ok:
                fg = fj["compiled"][ev.failed_group]
                e = ev.failed_element
                self._element_failed(fg, e, reason_of(fg, e), t)
        if fj["python"]:
            self._load(q)
            self._load_qd(qd)
            for fg, sl, mode in fj["python"]:
                args = (fg.par, self._qx[fg.gather], self._qdx[fg.gather], t,
                        fv[fg.fidx] if fg.ftype.n_fun else fg.fv0)
                if mode == "reference":
                    try:
                        Kb, Cb = fg.ftype.force_jacobian(*args)
                    except ElementEvaluationError as exc:
                        self._element_failed(fg, exc.index, exc.reason, t)
                    except Exception as exc:
                        from ..plugins.errors import group_failed
                        group_failed(fg, "force_jacobian", args, exc)
                else:
                    Kb, Cb = self._fd_force_blocks(fg, *args)
                Kv[sl] = np.asarray(Kb, dtype=float).reshape(-1)
                Cv[sl] = np.asarray(Cb, dtype=float).reshape(-1)
        n = self.n
        keep = fj["keep"]
        kv, cv = (Kv, Cv) if keep is None else (Kv[keep], Cv[keep])
        if self.dense:
            return (np.bincount(fj["lin"], kv, n * n).reshape(n, n),
                    np.bincount(fj["lin"], cv, n * n).reshape(n, n))
        import scipy.sparse as sp
        pos, nnz, ind, ptr = fj["csr"]
        return tuple(sp.csr_matrix((np.bincount(pos, x, nnz), ind, ptr), shape=(n, n),
                                   copy=False) for x in (kv, cv))

    def _fd_force_blocks(self, fg: ForceGroup, par, qb, qdb, t, f):
        """Forward differences of one group's forces in its elements' coordinates:
        (K, C) blocks (ne, nb, nc, nb, nc), all elements at once per column."""
        ne, nb, nc = fg.shape
        qb = np.array(qb, dtype=float)
        qdb = np.array(qdb, dtype=float)
        g0 = self._force_call(fg, "force", (par, qb, qdb, t, f), fg.shape, t).copy()
        K = np.zeros((ne, nb, nc, nb, nc))
        C = np.zeros((ne, nb, nc, nb, nc))
        for X, J in ((qb, K), (qdb, C)):
            for b in range(nb):
                for c in range(nc):
                    x0 = X[:, b, c].copy()
                    d = self.FD_STEP * (1.0 + np.abs(x0))
                    X[:, b, c] = x0 + d
                    g = self._force_call(fg, "force", (par, qb, qdb, t, f), fg.shape, t)
                    J[:, :, :, b, c] = (g - g0) / d[:, None, None]
                    X[:, b, c] = x0
        return K, C

    def _fj_setup(self) -> dict:
        """How each force group's Jacobian blocks are computed, their place in the
        flat block buffers (compiled groups first, written by the evaluator) and
        the scatter indices (ground/padding dropped, particles folded): built on
        first use, kept in the SystemData."""
        from ..elements.base import ForceType
        comp, py, order = [], [], []
        for fg in self.force_groups:
            if fg.compiled and fg.ckernel.has_jacobian:
                comp.append(fg)
        comp_ids = {id(fg) for fg in comp}
        for fg in self.force_groups:
            if id(fg) in comp_ids:
                continue
            has_ref = type(fg.ftype).force_jacobian is not ForceType.force_jacobian
            py.append((fg, "reference" if has_ref else "fd"))
        rows, cols, pos, python = [], [], 0, []
        for fg in comp + [g for g, _ in py]:
            ne, nb, nc = fg.shape
            nl = nb * nc
            ridx = self._colmap[fg.gather.reshape(ne, nl)]
            rows.append(np.repeat(ridx, nl, axis=1).reshape(-1))
            cols.append(np.tile(ridx, (1, nl)).reshape(-1))
            order.append((fg, slice(pos, pos + ne * nl * nl)))
            pos += ne * nl * nl
        modes = dict((id(g), m) for g, m in py)
        python = [(fg, sl, modes[id(fg)]) for fg, sl in order if id(fg) in modes]
        rows = np.concatenate(rows) if rows else np.zeros(0, np.intp)
        cols = np.concatenate(cols) if cols else np.zeros(0, np.intp)
        n = self.n
        keep = (rows < n) & (cols < n)
        ev = None
        if comp:
            from .._ext import _forces
            ev = _forces.ForceJacobianEvaluator(
                self.n_ext if self.padded else self.n, [kernel_group(fg) for fg in comp])
        lin = (rows[keep] * n + cols[keep]).astype(np.intp)
        # sparse: the CSR pattern of the blocks and each entry's data position
        # (duplicates summed by bincount)
        uniq, where = np.unique(lin, return_inverse=True)
        ptr = np.searchsorted(uniq // max(n, 1), np.arange(n + 1)).astype(np.int32)
        csr = (where.astype(np.intp), uniq.size, (uniq % max(n, 1)).astype(np.int32), ptr)
        fj = dict(eval=ev, compiled=comp, python=python, K=np.zeros(pos),
                  C=np.zeros(pos), keep=None if keep.all() else np.nonzero(keep)[0],
                  lin=lin, csr=csr)
        self.data.force_jacobian_plan = fj
        return fj

    def force_jacobian_kernels(self) -> tuple | None:
        """``(evaluator, pos, boffs)`` for a compiled right-hand side's analytic force
        Jacobian when every force group has a compiled force-Jacobian kernel, else
        None: the ``ForceJacobianEvaluator`` (None without forces), the position in
        the dense n x n matrix of each entry of its block buffer (-1: a ground or
        padding entry) and the body offsets of each compiled force group."""
        fj = self.data.force_jacobian_plan or self._fj_setup()
        if fj["python"] or (self._force_evaluator is None) != (fj["eval"] is None):
            return None
        ev = fj["eval"]
        size = 0 if ev is None else ev.size
        pos = np.full(size, -1, dtype=np.intp)
        if size:
            keep = fj["keep"]
            pos[np.arange(size) if keep is None else keep] = fj["lin"]
        boffs = ([] if self._force_evaluator is None
                 else [np.asarray(fg.boff, dtype=np.intp).reshape(len(fg.names), -1)
                       for fg in self._compiled_force_groups])
        return ev, pos, boffs

    def force_jacobian_modes(self) -> dict[str, str]:
        """Force type name -> how :meth:`force_jacobians` differentiates it:
        'compiled', 'reference' (NumPy) or 'fd' (forward differences)."""
        fj = self.data.force_jacobian_plan or self._fj_setup()
        out = {fg.ftype.name: "compiled" for fg in fj["compiled"]}
        out.update({fg.ftype.name: m for fg, _, m in fj["python"]})
        return out

    def potential_energy(self, q: np.ndarray, t: float = 0.0) -> float:
        """V = -sum m_i g . r_i (gravity) + the potential of every conservative part
        of the force elements (spring energies, Nikravesh (1988), Eqs. 14.10-14.12)."""
        V = -float(np.dot(self._q_gravity, q))
        if self.force_groups:
            fv = self._functions_at(t)
            self._load(q)
            for fg in self.force_groups:
                V += float(np.sum(self._force_call(fg, "energy", (
                    fg.par, self._qx[fg.gather], t, fv[fg.fidx]), (len(fg.names),), t)))
        return V

    def nonconservative_power(self, q: np.ndarray, qd: np.ndarray, t: float,
                              compiled: bool = False) -> float:
        """Power of every non-conservative force part (dampers, actuators, applied
        forces): the rate of the work that changes T + V.  ``compiled=True``: the
        compiled groups' power from their kernels (equal to the references to
        1e-12; used by the DAE Jacobians' work row)."""
        if not self.force_groups:
            return 0.0
        fv = self._functions_at(t)
        groups = self.force_groups
        P = 0.0
        if compiled and self._force_evaluator is not None and not self.padded:
            P = self._force_evaluator.power_nc(np.ascontiguousarray(q, dtype=float),
                                               np.ascontiguousarray(qd, dtype=float), fv, t)
            if P != P:                   # a failing element: the reference names it
                P, groups = 0.0, self.force_groups
            else:
                groups = self._py_force_groups
                if not groups:
                    return float(P)
        self._load(q)
        self._load_qd(qd)
        return float(P) + float(sum(np.sum(self._force_call(fg, "power_nc", (
            fg.par, self._qx[fg.gather], self._qdx[fg.gather], t, fv[fg.fidx]),
            (len(fg.names),), t)) for fg in groups))

    def force_outputs(self, q: np.ndarray, qd: np.ndarray, t: float) -> np.ndarray:
        """Element quantities of every force element (labels :attr:`force_labels`),
        e.g. a spring-damper's length, rate and forces."""
        fv = self._functions_at(t)
        self._load(q)
        self._load_qd(qd)
        out = [self._force_call(fg, "outputs", (fg.par, self._qx[fg.gather],
                                                self._qdx[fg.gather], t, fv[fg.fidx]),
                                (len(fg.names), len(fg.ftype.labels)), t).ravel()
               for fg in self.force_groups]
        return np.concatenate(out) if out else np.zeros(0)
