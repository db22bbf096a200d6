"""The constraint stages of a System: Phi, Phi_q, nu, gamma (Nikravesh (1988), §3.2.2,
Eqs. 3.12-3.17) and the reactions, evaluated into the SystemData's buffers.

A mixin of :class:`mbcore.system.System`: it reads the facade's bindings of the
SystemModel (evaluators, groups) and SystemData (buffers, plans)."""
from __future__ import annotations

import numpy as np

from ..errors import PluginError
from .groups import Group

__all__ = ["ConstraintStages"]

_NDARRAY = np.ndarray
_F64 = np.dtype(np.float64)        # the fast path's output check: ``dtype is _F64``


class ConstraintStages:
    """Constraint evaluation methods of :class:`mbcore.system.System`."""

    def phi(self, q: np.ndarray, t: float) -> np.ndarray:
        """Constraint violations Phi(q, t), length m (Nikravesh (1988), Eq. 3.18)."""
        fv = self._functions_at(t)
        if self._evaluator is not None:
            self._evaluator.phi(self._ev_q(q), t, fv, self._phi)
        if self._py_groups:
            self._py_call(self._py_plans["phi"], "phi", q, None, t, fv)
        return self._phi

    def jacobian(self, q: np.ndarray, t: float):
        """Phi_q: dense (m, n) array for small systems, else a CSR matrix."""
        self._jacobian_data(q, t)
        if self.dense:
            return self._jac_view
        return self._csr

    def _jacobian_data(self, q: np.ndarray, t: float) -> np.ndarray:
        fv = self._functions_at(t)
        if self._evaluator is not None:
            self._evaluator.jacobian(self._ev_q(q), t, fv, self._jdata)
        if self._py_groups:
            self._py_call(self._py_plans["jacobian"], "jacobian", q, None, t, fv)
        return self._jdata

    def nu(self, q: np.ndarray, t: float) -> np.ndarray:
        """Velocity right-hand side nu = -Phi_t (Nikravesh (1988), Eq. 3.14)."""
        fv = self._functions_at(t)
        if self._evaluator is not None:
            self._evaluator.nu(self._ev_q(q), t, fv, self._nu)
        if self._py_groups:
            self._py_call(self._py_plans["nu"], "nu", q, None, t, fv)
        return self._nu

    def gamma(self, q: np.ndarray, qd: np.ndarray, t: float) -> np.ndarray:
        """Acceleration right-hand side gamma (Nikravesh (1988), Eq. 3.16)."""
        fv = self._functions_at(t)
        if self._evaluator is not None:
            if self.padded:
                self._load(q)
                self._load_qd(qd)
                self._evaluator.gamma(self._qx, self._qdx, t, fv, self._gamma)
            else:
                self._evaluator.gamma(q, qd, t, fv, self._gamma)
        if self._py_groups:
            self._py_call(self._py_plans["gamma"], "gamma", q, qd, t, fv)
        return self._gamma

    def _py_call(self, plan: list, method: str, q, qd, t: float, fv: np.ndarray) -> None:
        """One stage of every group evaluated in Python (``_python_tier``'s plans;
        ``qd`` None for the stages of q only): per group, gather its bodies'
        coordinates, call the type's ``method`` once and copy the result into the
        stage's buffer at the group's precomputed positions.  The only place the
        Python groups' stage methods are called.  The result must be a float64
        array of the declared shape: anything else goes through
        :meth:`_py_conform` (converted, or refused naming the type and method)."""
        # gather from q (qd) itself when no group reads a ground slot, padding or
        # artificial coordinates and it is a float64 vector of n: no copy
        direct, nshape = self._py_direct, self._nshape
        qs = q if direct and q.__class__ is _NDARRAY and q.dtype is _F64 and \
            q.shape == nshape else self._py_load(q)
        qds = qd if qd is None or direct and qd.__class__ is _NDARRAY and \
            qd.dtype is _F64 and qd.shape == nshape else self._py_load_qd(qd)
        for g, fn, par, cidx, fidx, fv0, shape, dst, idx, xk in plan:
            f = fv0 if fidx is None else fv[fidx]
            args = (par, qs[cidx], t, f) if qds is None else (par, qs[cidx], qds[cidx], t, f)
            kw = self._xkw(g, qds is not None) if xk else None
            try:
                out = fn(*args, **kw) if kw else fn(*args)
            except Exception as exc:    # name the plugin, elements, method, time
                from ..plugins.errors import group_failed
                group_failed(g, method, args, exc)
            if out.__class__ is not _NDARRAY or out.dtype is not _F64 or out.shape != shape:
                out = _py_conform(g, method, out, shape)
            dst[idx] = out              # a copy: the type may reuse its array

    def reactions(self, q: np.ndarray, t: float, lam: np.ndarray) -> np.ndarray:
        """Generalised reaction of every element on each of its bodies,
        ``[fx, fy, n]`` with the moment about the body origin, in global
        components: ``g_b = (Phi_k)_{q_b}^T lam_k`` (Nikravesh (1988), Eq. 8.50, §9.3;
        the sign convention of its Ch. 9, docs/conventions.md).  Reactions on the ground
        are included.  Labels: :attr:`reaction_labels`."""
        if np.shape(lam) != (self.m,):
            raise ValueError(f"lam has shape {np.shape(lam)}, the system has {self.m} "
                             f"constraint equations")
        data = self._jacobian_data(q, t)
        for g in self._element_groups:
            blocks = data[g.jac_blocks]                 # (ne, m, nb, ncol)
            lam_g = lam[g.lam_rows]                     # (ne, m)
            if g.m == 1:
                gen = blocks[:, 0] * lam_g[:, 0, None, None]
            else:                  # sum over the element's equations (einsum is slower)
                gen = (blocks * lam_g[:, :, None, None]).sum(axis=1)
            if g.kind == "spatial":
                # Euler-parameter generalised force n* -> global moment n = G n* / 2
                # (Nikravesh (1988), Eq. 11.4)
                from ..elements.rotations import G as Gmat
                self._load(q)
                p = self._qx[g.gather_all][..., 3:7]
                n = 0.5 * np.einsum("ebkl,ebl->ebk", Gmat(p), gen[..., 3:7])
                gen = np.concatenate([gen[..., :3], n], axis=-1)
            self._reactions[g.react_pos] = gen
        return self._reactions

    def reactions_local(self, q: np.ndarray, t: float, lam: np.ndarray) -> np.ndarray:
        """Joint-local reaction components of every element (a revolute's force in
        body-i axes, a link's tension, a driver's effort...; labels
        :attr:`local_reaction_labels`, meanings in docs/constraints.md)."""
        fv = self._functions_at(t)
        self._load(q)
        parts = []
        for g in self._element_groups:
            if not g.ctype.local_labels:
                continue
            loc = np.asarray(g.ctype.reaction_local(g.par, self._qx[g.gather_all], t,
                                                    fv[g.fidx], lam[g.lam_rows],
                                                    **self._xkw(g)), dtype=float)
            if loc.shape != (g.ne, len(g.ctype.local_labels)):
                raise PluginError(f"constraint type '{g.ctype.name}'.reaction_local() "
                                  f"returned shape {loc.shape}, expected "
                                  f"{(g.ne, len(g.ctype.local_labels))}")
            parts.append(loc.ravel())
        if not parts:
            return np.zeros(0)
        return np.concatenate(parts)[self._local_perm]

    def _ev_q(self, q: np.ndarray) -> np.ndarray:
        """What the compiled evaluator reads: q itself, or the padded buffer."""
        if self.padded:
            self._load(q)
            return self._qx
        return q

    def _xkw(self, g: Group, velocities: bool = False) -> dict:
        """Keyword arguments with the artificial coordinates (and their rates) of a
        group's elements, for types that declare ``extra`` (else empty)."""
        if not g.nx:
            return {}
        kw = {"qe": self._qx[g.xoff]}
        if velocities:
            kw["qde"] = self._qdx[g.xoff]
        return kw



def _py_conform(g: Group, method: str, out, shape) -> np.ndarray:
    """The slow path of ``_py_call``: a result that is not a float64 array of
    ``shape`` converted (or refused with the type and method named); ``shape``
    None: the block pair of a type with ``extra`` (``_x_jacobian``)."""
    if shape is None:
        return _x_jacobian(g, out)
    out = np.asarray(out, dtype=float)
    if out.shape != shape:
        try:
            out = out.reshape(shape)
        except ValueError:
            raise PluginError(f"constraint type '{g.ctype.name}'.{method}() returned "
                              f"shape {out.shape}, expected {shape}") from None
    return out


def _x_jacobian(g: Group, out) -> np.ndarray:
    """The (body blocks, artificial-coordinate blocks) pair returned by the
    ``jacobian`` of a type with ``extra`` coordinates, as one (ne, k) block row
    per element (the layout of ``g.jpos``)."""
    jb, jx = out
    blk = np.concatenate([np.asarray(jb, float).reshape(g.ne, -1),
                          np.asarray(jx, float).reshape(g.ne, -1)], axis=1)
    if blk.shape != g.jpos.shape:
        raise PluginError(f"constraint type '{g.ctype.name}'.jacobian() "
                          f"returned blocks of the wrong shape")
    return blk
