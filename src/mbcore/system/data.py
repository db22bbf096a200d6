"""SystemData: the workspace of one run on a compiled SystemModel.

Everything an evaluation writes lives here, nothing of it in the model: the
extended coordinate buffers (q and qd followed by the ground and particle
blocks), the stage outputs (Phi, nu, gamma, the Jacobian data, Q, reactions), the
time functions' values and the time they were evaluated at, the input values (in
the function table), the constant forces (gravity plus a Simulation's inputs),
and the Python tier's evaluation plans, which write into those buffers.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .compiled_model import SystemModel

__all__ = ["SystemData"]


class SystemData:
    """The mutable workspace of a :class:`SystemModel` (see module docstring).
    Returned arrays of the evaluation stages are these buffers: valid until the next
    call of the same stage."""

    def __init__(self, model: SystemModel):
        from ..elements.bodykinds import SPATIAL
        from ..elements.functions import FunctionTable
        self.model = model
        n, m = model.n, model.m
        #: the time-function table (input values, compiled evaluator state)
        self.ftable = FunctionTable(model.functions, backend=model.backend)
        #: jets (c, c', c'') of every time function at :attr:`ft`
        self.fv = np.zeros((len(model.functions), 3))
        #: the time of the last function evaluation (None: never; NaN: stale)
        self.ft: float | None = None
        #: q and qd extended by the ground blocks and the particles' padded blocks
        self.qx = np.zeros(model.n_ext)
        self.qx[n + 3:n + 10] = SPATIAL.ground
        for j, v in model.pad_const:             # the fixed rotation of particles
            self.qx[j] = v
        self.qdx = np.zeros(model.n_ext)
        self.phi = np.zeros(m)
        self.nu = np.zeros(m)
        self.gamma = np.zeros(m)
        size = model.jacobian_size
        #: Phi_q's data (row-major dense or CSR), then the ground entries
        self.jdata = np.zeros(model.jacobian_slots)
        self.jac_view = self.jdata[:size].reshape(m, n) if model.dense else None
        self.csr = None
        if not model.dense:  # a CSR matrix whose data array *is* the kernel buffer
            import scipy.sparse as sp    # only sparse systems need it (start-up time)
            self.csr = sp.csr_matrix((self.jdata[:size], model.csr_cols.astype(np.int32),
                                      model.indptr.astype(np.int32)),
                                     shape=(m, n), copy=False)
            if size and not np.shares_memory(self.csr.data, self.jdata):  # pragma: no cover
                raise RuntimeError("scipy copied the Jacobian buffer")
        #: the generalized forces; ``Qx`` the Python groups' extended accumulator,
        #: ``Qext`` the compiled force evaluator's output with particles
        self.Q = np.zeros(n)
        self.Qx = np.zeros(model.n_ext)
        self.Qext = np.zeros(model.n_ext) if model.force_evaluator is not None else None
        #: gravity and a Simulation's inputs, added by every force evaluation
        self.constant_forces = model.gravity_forces.copy()
        self.reactions = np.zeros(len(model.reaction_labels))
        #: lazily built workspaces: force Jacobians, point and angular kinematics
        self.force_jacobian_plan: dict | None = None
        self.kinematics: dict[str, Any] = {}
        self._nshape = (n,)
        self._n = n
        self._padded = model.padded
        self._pad_src, self._pad_dst = model.pad_src, model.pad_dst
        self._qx_head = self.qx[:n]
        self._qdx_head = self.qdx[:n]
        self._plans()

    def _plans(self) -> None:
        """Evaluation plans of the groups evaluated in Python (Python-only plugin
        types; every group on the NumPy backend): per stage, one tuple per group
        with everything the stage needs (bound method, parameters, gather indices,
        function indices, declared shape, destination buffer and scatter indices
        shaped like the result), so that an evaluation does no attribute look-up,
        index arithmetic or reshape per group
        (``python_plugin_framework_overhead`` in benchmarks/run.py).  A type's
        result is copied into these buffers, never kept, so a type may return the
        same array at every call."""
        plans: dict[str, list] = {"phi": [], "nu": [], "gamma": [], "jacobian": []}
        for g in self.model.python_groups:
            fidx = g.fidx if g.ctype.n_fun else None
            rows = g.row[:, None] + np.arange(g.m)          # (ne, m): g.row_slots, shaped
            xk = bool(g.nx)
            for stage, buf in (("phi", self.phi), ("nu", self.nu),
                               ("gamma", self.gamma)):
                plans[stage].append((g, getattr(g.ctype, stage), g.par, g.gather, fidx,
                                     g.fv0, g.shape_rows, buf, rows, xk))
            plans["jacobian"].append((g, g.ctype.jacobian, g.par, g.gather, fidx, g.fv0,
                                      None if xk else g.shape_jac, self.jdata,
                                      g.jpos if xk else g.jpos.reshape(g.shape_jac), xk))
        self.python_plans = plans
        fplan = []
        for fg in self.model.python_force_groups:
            fidx = fg.fidx if fg.ftype.n_fun else None
            if fg.direct and isinstance(fg.gather_slice, slice):
                mode, dst, idx = "add", self.Q[fg.gather_slice].reshape(fg.shape), None
            elif fg.direct:
                mode, dst, idx = "scatter", self.Q, fg.gather
            else:
                mode, dst, idx = ("ext", None, fg.gather) if fg.unique else \
                    ("at", None, fg.gather_flat)
            fplan.append((fg, fg.par, fg.gather, fidx, fg.fv0, fg.shape, mode, dst, idx))
        self.python_force_plan = fplan

    # ------------------------------------------------------------------ functions
    def functions_at(self, t: float) -> np.ndarray:
        """Jets (c, c', c'') of every time function at t (cached per t)."""
        if self.ft != t:
            if len(self.fv):
                self.ftable.evaluate(t, self.fv)
            self.ft = t
        return self.fv

    def set_input(self, name: str, value: float) -> None:
        """Set the ``input`` time functions named ``name`` to ``value``; the next
        evaluation sees it (both backends)."""
        self.ftable.set_input(name, value)
        self.ft = math.nan

    def invalidate(self) -> None:
        """Forget the time of the last function evaluation (the next stage
        re-evaluates the time functions)."""
        self.ft = None

    # ------------------------------------------------------------------ loading
    def load(self, q: np.ndarray) -> None:
        """Copy q (its shape checked) into the extended buffer :attr:`qx`."""
        if getattr(q, "shape", None) != self._nshape and np.shape(q) != self._nshape:
            raise ValueError(f"q has shape {np.shape(q)}, the system has {self._n} "
                             f"coordinates")
        self._qx_head[...] = q
        if self._padded:                         # particles' padded blocks
            self.qx[self._pad_dst] = self.qx[self._pad_src]

    def load_qd(self, qd: np.ndarray) -> None:
        """Copy qd into the extended buffer :attr:`qdx` (unchecked)."""
        self._qdx_head[...] = qd
        if self._padded:
            self.qdx[self._pad_dst] = self.qdx[self._pad_src]

    def loaded(self, q) -> np.ndarray:
        """The extended buffer loaded with q (checked), for the Python groups."""
        self.load(q)
        return self.qx

    def loaded_qd(self, qd) -> np.ndarray:
        """The extended buffer loaded with qd, its shape checked."""
        if getattr(qd, "shape", None) != self._nshape and np.shape(qd) != self._nshape:
            raise ValueError(f"qd has shape {np.shape(qd)}, the system has {self._n} "
                             f"coordinates")
        self.load_qd(qd)
        return self.qdx
