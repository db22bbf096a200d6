"""System: a Model compiled for evaluation, and the evaluation pipeline.

A System is the facade of two parts (as MuJoCo's mjModel/mjData or Pinocchio's
Model/Data):

* :attr:`System.compiled`, a :class:`~mbcore.system.compiled_model.SystemModel`:
  built once by :meth:`mbcore.Model.compile` and never changed — the coordinate
  index map, the constraint elements packed by type into contiguous arrays
  (*groups*), the Jacobian sparsity pattern, the function table's functions and
  the compiled evaluators;
* :attr:`System.data`, a :class:`~mbcore.system.data.SystemData`: the workspace of
  a run — buffers, time-function values, input values and constant forces.

The state (t, q, qd, qdd, lam) lives apart (:class:`mbcore.system.state.State`).
The evaluation methods come from four mixins, one job each:
:mod:`~mbcore.system.constraint_stages` (Nikravesh (1988), §3.2.2, Eqs.
3.12-3.17)::

    functions(t) -> phi(q, t) -> jacobian(q, t) -> nu(q, t) -> gamma(q, qd, t)

:mod:`~mbcore.system.force_stages` (forces, their Jacobians, energies),
:mod:`~mbcore.system.outputs` (initial state, point kinematics, inertia terms) and
:mod:`~mbcore.system.output_rows` (the output quantities of a block of rows at once).

Built-in types with a compiled kernel are assembled by one call into
``mbcore._ext._planar.PlanarEvaluator``; the NumPy reference path (environment
variable ``MBCORE_KERNELS=numpy`` or ``Model.compile(kernels="numpy")``) and
Python-only plugin types use the types' vectorised reference methods, one call
per group.  Force and constraint types of the compiled plugin tier (``c_kernel``,
:mod:`mbcore.plugins.compiled`) join the compiled force and constraint evaluators
on the compiled backend.  Returned arrays are the System's work buffers: valid until the next
call of the same stage; copy them to keep them.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from ..errors import ModelError
from .backend import (  # noqa: F401  (public names of this module)
    BACKENDS, DENSE_LIMIT, compiled_available, default_backend)
from .compiled_model import SystemModel
from .constraint_stages import ConstraintStages
from .data import SystemData
from .force_stages import ForceStages
from .groups import ForceGroup, Group, unique_ints as _unique_ints  # noqa: F401
from .kernels import CompiledKernels
from .outputs import OutputStages
from .output_rows import OutputRows

#: the SystemModel's attributes that a System shows as its own (read-only by
#: convention; the model never changes after compilation)
MODEL_ATTRIBUTES = (
    "model", "registry", "backend", "body_kind", "body_names", "body_index", "nb",
    "body_kinds", "body_offsets", "n_body", "spatial", "planar_only", "rigid_spatial",
    "coordinate_names", "n", "n_extra", "padded", "n_ext", "constraint_names",
    "element_rows", "element_types", "element_sections", "m_elements", "m", "holonomic",
    "all_holonomic", "force_groups", "force_labels", "gravity", "mass_weights",
    "mass_diag", "body_mass", "body_inertia", "functions", "nnz", "dense", "groups",
    "reaction_labels", "local_reaction_labels", "point_names", "point_labels",
    "angular_labels")


class System(ConstraintStages, ForceStages, OutputStages, OutputRows):
    """A compiled multibody system: the facade of its :attr:`compiled` model and
    its :attr:`data` workspace (see module docstring)."""

    def __init__(self, model, registry, kernels: str | None = None,
                 jacobian: str = "auto", dense_limit: int | None = None):
        self._bind(SystemModel(model, registry, kernels, jacobian, dense_limit))

    def _bind(self, compiled: SystemModel, data: SystemData | None = None) -> None:
        """Attach the two parts and bind, once, what the evaluation stages read (one
        attribute look-up per use on the hot paths, as before the split)."""
        #: the immutable compiled model
        self.compiled = compiled
        #: the evaluation workspace
        self.data = d = SystemData(compiled) if data is None else data
        c = compiled
        for name in MODEL_ATTRIBUTES:
            if hasattr(c, name):
                setattr(self, name, getattr(c, name))
        self.ftable, self.fv = d.ftable, d.fv
        # the model, for the stages
        self._evaluator, self._force_evaluator = c.constraint_evaluator, c.force_evaluator
        self._py_groups, self._py_force_groups = c.python_groups, c.python_force_groups
        self._compiled_groups = c.compiled_groups
        self._compiled_force_groups = c.compiled_force_groups
        self._element_groups = c.element_groups
        self._py_direct, self._py_forces_direct = c.python_direct, c.python_forces_direct
        self._pad_src, self._pad_dst, self._colmap = c.pad_src, c.pad_dst, c.colmap
        self._local_perm = c.local_reaction_order
        if c.spatial:
            self._r_idx, self._p_idx = c.r_index, c.p_index
        self._indptr, self._csr_cols, self._csr_rows = c.indptr, c.csr_cols, c.csr_rows
        self._pt_off, self._pt_loc, self._ang_p = (c.point_offsets, c.point_local,
                                                   c.angular_index)
        self._initial_extra = c.initial_extra
        self._constraint_failed = c.constraint_failed
        self._nshape = (c.n,)
        # the workspace, for the stages
        self._phi, self._nu, self._gamma = d.phi, d.nu, d.gamma
        self._jdata, self._jac_view, self._csr = d.jdata, d.jac_view, d.csr
        self._Q, self._Qx3, self._Qext = d.Q, d.Qx, d.Qext
        self._qx, self._qdx, self._reactions = d.qx, d.qdx, d.reactions
        self._q_gravity = d.constant_forces
        self._py_plans, self._py_force_plan = d.python_plans, d.python_force_plan
        self._kinematics = d.kinematics
        self._functions_at = d.functions_at
        self._load, self._load_qd = d.load, d.load_qd
        self._py_load, self._py_load_qd = d.loaded, d.loaded_qd

    def new_data(self) -> "System":
        """A System on the same compiled model with a fresh workspace (buffers,
        function values, inputs, constant forces): for a second run alongside this
        one.  Shared with this System: the packed parameters and the element type
        instances, so element types that keep state there (the rotation driver's
        tracked angle) must not be evaluated by two runs at once."""
        cls = type(self)
        other = cls.__new__(cls)
        cls._bind(other, self.compiled)
        return other

    # -- time functions ---------------------------------------------------------------
    def functions_at(self, t: float) -> np.ndarray:
        """Jets (c, c', c'') of every time function at t (cached per t)."""
        return self._functions_at(t)

    def set_input(self, name: str, value: float) -> None:
        """Set the ``input`` time functions named ``name`` to ``value``; the next
        evaluation sees it (both backends)."""
        self.data.set_input(name, value)

    # -- what formulations, analyses and the Simulation read ------------------------
    def why_python(self, constraints: bool = True) -> str | None:
        """Why evaluations cannot run wholly in compiled code, or None.

        With ``constraints=False`` only the forces count (formulations with their
        own constraint kernels, e.g. joint coordinates)."""
        return self.compiled.why_python(constraints)

    def compiled_kernels(self, constraints: bool = True) -> CompiledKernels | None:
        """The compiled evaluators and shared buffers (:class:`CompiledKernels`) when
        :meth:`why_python` finds nothing, else None: the one test of "compiled or
        Python" that every compiled twin of a formulation or analysis starts from."""
        if self.why_python(constraints) is not None:
            return None
        sparse = not self.dense
        return CompiledKernels(
            self._evaluator, self._force_evaluator, self.ftable.kernel, self.n, self.m,
            self._jdata, self._q_gravity,
            np.ascontiguousarray(self._indptr, dtype=np.intp) if sparse else None,
            np.ascontiguousarray(self._csr_cols, dtype=np.intp) if sparse else None)

    @property
    def constant_forces(self) -> np.ndarray:
        """The generalized constant forces (gravity, and a Simulation's inputs) that
        :meth:`forces` adds: the live array, shared with the compiled kernels."""
        return self._q_gravity

    @property
    def last_jacobian(self):
        """Phi_q as the last :meth:`jacobian` call left it (dense view or CSR matrix
        on the System's buffer): no evaluation."""
        return self._jac_view if self.dense else self._csr

    @property
    def last_forces(self) -> np.ndarray:
        """The generalized forces of the last :meth:`forces` call: no evaluation."""
        return self._Q

    @property
    def p_index(self) -> np.ndarray:
        """Spatial models: the coordinates of each rigid body's Euler parameters,
        shape (rigid bodies, 4)."""
        return self.compiled.p_index

    @property
    def r_index(self) -> np.ndarray:
        """Spatial models: the position coordinates of every body, flat (3 per body)."""
        return self.compiled.r_index

    def body_offset(self, name: str) -> int:
        """The index of the first coordinate of body ``name``."""
        return self.compiled.body_offset(name)

    def evaluate_jacobian_data(self, q: np.ndarray, t: float) -> np.ndarray:
        """Evaluate Phi_q into :attr:`jacobian_data` and return that buffer."""
        return self._jacobian_data(q, t)

    @property
    def jacobian_data(self) -> np.ndarray:
        """The buffer the Jacobian is evaluated into (row-major dense, or CSR data in
        the order of :meth:`jacobian_pattern`; ground entries follow): live, shared."""
        return self._jdata

    def csr_pattern(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, indices) of the sparse Jacobian's CSR structure."""
        return self._indptr, self._csr_cols

    def jacobian_pattern(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of the Jacobian's stored entries, in the order of its data."""
        return self._csr_rows, self._csr_cols

    def jacobian_dense(self, q: np.ndarray, t: float) -> np.ndarray:
        """Phi_q as a new dense array (any size; for diagnostics and tests)."""
        J = self.jacobian(q, t)
        return J.toarray() if issparse(J) else J.copy()

    def coordinate_index(self, name: str) -> int:
        try:
            return self.coordinate_names.index(name)
        except ValueError:
            raise KeyError(f"no coordinate '{name}'") from None

    def describe(self) -> str:
        lines = [f"System {self.model.name!r}: n = {self.n} coordinates, m = {self.m} "
                 f"constraint equations, {len(self.functions)} time functions, "
                 f"backend = {self.backend}, Jacobian {'dense' if self.dense else 'sparse'} "
                 f"({self.nnz} structural non-zeros)"]
        for g in self._element_groups:
            lines.append(f"  constraint {g.ctype.name:24s} x{g.ne:<4d} "
                         f"{'compiled' if g.compiled else 'python'}")
        for fg in self.force_groups:
            lines.append(f"  force      {fg.ftype.name:24s} x{len(fg.names):<4d} "
                         f"{'compiled' if fg.compiled else 'python'}")
        if any(self.gravity):
            lines.append(f"  gravity    {tuple(float(g) for g in self.gravity)}")
        if self.spatial:
            lines.append(f"  {self.nb} spatial bodies (Euler parameters; {self.nb} "
                         f"normalisation rows)")
        if self.n_extra:
            lines.append(f"  {self.n_extra} artificial coordinate(s): "
                         f"{', '.join(self.coordinate_names[self.n_body:])}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<System {self.model.name!r} n={self.n} m={self.m} backend={self.backend}>"


def issparse(a) -> bool:
    """``scipy.sparse.issparse`` without importing SciPy: nothing is a SciPy sparse
    matrix unless scipy.sparse has been imported."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(a)


def check_finite(name: str, x: np.ndarray, labels, t: float) -> None:
    """Raise a clear error if ``x`` has a NaN/inf, naming the first bad entry."""
    if x.size and not math.isfinite(float(np.add.reduce(x, axis=None))):
        bad = np.nonzero(~np.isfinite(x))[0]
        if not len(bad):            # the sum overflowed; the entries are finite
            return
        k = int(bad[0])
        from ..errors import AnalysisError
        raise AnalysisError(f"{name} is not finite at '{labels[k]}' ({x[k]})", t)


__all__ = ["System", "Group", "default_backend", "compiled_available", "check_finite",
           "ModelError"]
