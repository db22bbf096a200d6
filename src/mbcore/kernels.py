"""The compiled kernels of a System, in the form the compiled twins of formulations
and analyses take them (:meth:`mbcore.system.System.compiled_kernels`).

One place decides whether a model runs compiled: the System, from its backend and
its elements.  A formulation adds only its own conditions (a dense Jacobian, a
diagonal mass matrix, planar bodies) and passes :attr:`CompiledKernels.args` to
its compiled right-hand side.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CompiledKernels"]


@dataclass(frozen=True)
class CompiledKernels:
    """The pieces of a System that compiled code evaluates.

    The arrays are the System's own buffers, shared, never copies: ``jacobian_data``
    is where the constraint evaluator writes Phi_q (row-major dense, or the CSR
    data of ``indptr``/``indices``), ``constant_forces`` the generalized gravity
    and input forces that the force evaluation adds (written in place by a
    Simulation's inputs)."""

    #: the constraint evaluator (``mbcore._ext._planar.PlanarEvaluator``)
    constraints: Any
    #: the force evaluator (``mbcore._ext._forces.ForceEvaluator``) or None (no forces)
    forces: Any
    #: the time-function evaluator or None (no functions)
    functions: Any
    n: int
    m: int
    jacobian_data: np.ndarray
    constant_forces: np.ndarray
    #: the CSR pattern of a sparse Jacobian (None when dense)
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None

    @property
    def dense(self) -> bool:
        return self.indptr is None

    @property
    def args(self) -> tuple:
        """The leading arguments of every compiled right-hand side:
        ``(constraints, forces, functions, n, m, jacobian_data, constant_forces)``."""
        return (self.constraints, self.forces, self.functions, self.n, self.m,
                self.jacobian_data, self.constant_forces)

    def csr(self) -> dict[str, np.ndarray]:
        """``indptr=``, ``indices=`` keywords of a sparse Jacobian ({} when dense)."""
        if self.indptr is None:
            return {}
        return dict(indptr=self.indptr, indices=self.indices)
