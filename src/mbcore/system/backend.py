"""The backend of a System: the choice between compiled kernels and the NumPy
reference path, and the construction of the compiled evaluators.

:func:`constraint_evaluator` and :func:`force_evaluator` are the one place that
decides which groups run compiled (built-in kernels of ``mbcore._ext`` and the
compiled plugin tier, :mod:`mbcore.plugins.compiled`) and builds their evaluator;
:meth:`mbcore.system.System.why_python` reports what stays in Python."""
from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from ..errors import PluginError
from .groups import ForceGroup, Group, kernel_group

__all__ = ["DENSE_LIMIT", "BACKENDS", "default_backend", "compiled_available",
           "constraint_evaluator", "force_evaluator"]

#: systems with at most this many coordinates use dense Jacobians and LAPACK; larger
#: ones a CSR Jacobian and the sparse Schur solver (mbcore.solve.sparse_schur).  Measured on
#: the pendulum chain (docs/linear-solvers.md): one equations-of-motion solve is
#: cheaper sparse from n ~ 15; the compiled dense right-hand side loses from n ~ 36;
#: a whole 1 s dopri5 run breaks even at n ~ 48 (16 links).  Override per model
#: with ``compile(jacobian="dense"|"sparse")`` or MBCORE_DENSE_LIMIT.
DENSE_LIMIT = int(os.environ.get("MBCORE_DENSE_LIMIT", "48"))
BACKENDS = ("compiled", "numpy")


def default_backend() -> str:
    b = os.environ.get("MBCORE_KERNELS", "compiled").strip().lower() or "compiled"
    if b not in BACKENDS:
        raise ValueError(f"MBCORE_KERNELS={b!r}: expected one of {', '.join(BACKENDS)}")
    return b


def compiled_available() -> bool:
    try:
        from .._ext import _forces, _functions, _linalg, _planar  # noqa: F401
    except ImportError:
        return False
    return True


def named_kernel(etype: Any, family: str, registry: Any) -> Any:
    """The ``c_kernel`` for a type that names a kernel by ``kernel`` only (its own
    Python class around another type's compiled kernel, e.g. ``kernel =
    "revolute"``): the ``c_kernel`` of the registered ``family`` type that declares
    the same ``kernel`` name; None when there is none (the type is evaluated in
    Python)."""
    k = getattr(etype, "kernel", None)
    if k is None or registry is None:
        return None
    for kind, _name, _provider, cls in registry.rows():
        if (kind == family and cls is not etype and getattr(cls, "kernel", None) == k
                and getattr(cls, "c_kernel", None) is not None):
            return cls.c_kernel
    return None


def _with_kernel(etype: Any, c_kernel: Any) -> Any:
    """``etype`` seen with ``c_kernel`` (the loader reads the type's declaration)."""
    return type(getattr(etype, "__name__", "Named"), (), {
        "name": getattr(etype, "name", ""), "c_kernel": c_kernel,
        **{k: getattr(etype, k) for k in ("bodies", "n_par", "n_fun", "equations",
                                           "holonomic", "extra", "body_kind")
           if hasattr(etype, k)}})


def load_kernel(etype: Any, family: str, registry: Any, load: Callable[[Any], Any]) -> Any:
    """The checked compiled kernel of a type (``load``: the loader of
    :mod:`mbcore.plugins.compiled` for ``family``): its ``c_kernel``, else the one its
    ``kernel`` name resolves to (:func:`named_kernel`); None when it has neither."""
    if getattr(etype, "c_kernel", None) is None:
        c_kernel = named_kernel(etype, family, registry)
        if c_kernel is None:
            return None
        etype = _with_kernel(etype, c_kernel)
    return load(etype)


def constraint_evaluator(groups: list[Group], n: int, padded: bool,
                         on_failure: Callable[[int, int, float], None],
                         registry: Any = None) -> Any:
    """The compiled constraint evaluator (``PlanarEvaluator``) of every group whose
    type has a compiled kernel (``c_kernel``, or a ``kernel`` name another registered
    type provides, :func:`named_kernel`); marks those groups ``compiled``.  ``n``: the
    length of the coordinate buffer it reads (the padded buffer with particles);
    ``on_failure(k, e, t)`` raises the error of compiled group k's element e."""
    from .._ext import _planar
    from ..plugins.compiled import load_constraint_kernel
    comp = []
    for g in groups:
        g.ckernel = load_kernel(g.ctype, "constraint", registry, load_constraint_kernel)
        if g.ckernel is None:
            continue
        g.compiled = True
        # par is passed as the group's own array, never a copy: a stateful kernel (the
        # rotation driver's tracked angle) updates it in place, as its NumPy phi does,
        # so both paths share that state; with particles the evaluator reads the
        # System's padded buffer, the ground blocks included (``pyoff``)
        comp.append(dict(kernel=g.ckernel.name, capsule=g.ckernel.capsule,
                         kind=g.kind, boff=g.pyoff if padded else g.boff,
                         row=g.row, par=g.par, fidx=g.fidx, jpos=g.jpos,
                         xoff=g.xoff if g.xoff is not None
                         else np.zeros((g.ne, 0), np.intp)))
    return _planar.PlanarEvaluator(n, comp, on_failure)


def force_evaluator(force_groups: list[ForceGroup], n: int, registry: Any = None) -> Any:
    """The compiled force evaluator (``ForceEvaluator``) of every force group whose
    type has a compiled kernel (``c_kernel``, or a ``kernel`` name another registered
    type provides, :func:`named_kernel`), or None when no group has one; marks those
    groups ``compiled``."""
    from ..plugins.compiled import load_force_kernel
    comp = []
    for fg in force_groups:
        fg.ckernel = load_kernel(fg.ftype, "force", registry, load_force_kernel)
        if fg.ckernel is None:
            continue
        fg.compiled = True
        comp.append(kernel_group(fg))
    if not comp:
        return None
    from .._ext import _forces
    return _forces.ForceEvaluator(n, comp)
