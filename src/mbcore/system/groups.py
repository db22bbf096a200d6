"""The packed element groups of a compiled System: every element of one type in
contiguous arrays, with the gather/scatter indices the evaluation stages use."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..elements.base import ConstraintType, PackContext
from ..errors import PluginError

__all__ = ["Group", "ForceGroup", "pack_element", "reason_of",
           "kernel_group", "short_label", "unique_ints"]


@dataclass
class ForceGroup:
    """All force elements of one type, packed contiguously."""

    ftype: Any
    names: list[str]
    paths: list[str]
    boff: Any                 # (ne, nb) body offsets (ground: n)
    par: Any                  # (ne, n_par)
    fidx: Any                 # (ne, n_fun)
    compiled: bool = False
    ckernel: Any = None       # compiled_plugins.ForceKernel of a c_kernel type
    # set by the compile step (SystemModel): gather indices into the extended
    # buffer (ne, nb, ncol) and flat; whether they are distinct (``unique``) and all
    # within q (``direct``; then ``gather_slice`` is a slice when consecutive)
    gather: Any = None
    gather_flat: Any = None
    unique: bool = False
    direct: bool = False
    gather_slice: Any = None
    fv0: Any = None           # (ne, 0, 3): the function values of a type without any
    force_fn: Any = None      # the type's bound ``force``
    shape: tuple = ()         # (ne, nb, ncol) of the type's force result


@dataclass
class Group:
    """All elements of one constraint type, packed contiguously."""

    ctype: ConstraintType
    names: list[str]          # element names
    paths: list[str]          # key paths (joints[2])
    boff: np.ndarray          # (ne, nb) offsets of each body's x in the extended q
    row: np.ndarray           # (ne,) first row of each element
    par: np.ndarray           # (ne, n_par)
    fidx: np.ndarray          # (ne, n_fun) indices into the function table
    jpos: np.ndarray          # (ne, m*nb*3 + m*nx) Jacobian data positions (ground: beyond size)
    xoff: np.ndarray = None   # (ne, nx) offsets of the element's artificial coordinates
    compiled: bool = False
    kind: str = "planar"      # body kind of the type
    ncol: int = 3             # Jacobian columns per body (the kind's coordinates)
    internal: bool = False    # added by the System (normalisation rows), not a model element
    ckernel: Any = None       # compiled_plugins.ConstraintKernel of a c_kernel type
    # set by the compile step (SystemModel)
    pyoff: Any = None         # boff with the ground at the block of the type's kind
    gather: Any = None        # cidx() of a Python-evaluated group
    row_slots: Any = None     # rows(), a slice when consecutive (Python groups)
    fv0: Any = None           # (ne, 0, 3)
    shape_rows: tuple = ()    # (ne, m)
    shape_jac: tuple = ()     # (ne, m, nb, ncol)
    nreact: int = 0           # reaction components per body (3 planar, 6 spatial)
    react_pos: Any = None     # (ne, nb, nreact) positions in the reactions vector
    jac_blocks: Any = None    # (ne, m, nb, ncol) Jacobian data positions of the bodies
    lam_rows: Any = None      # (ne, m) rows of each element
    gather_all: Any = None    # cidx() of every group (output stages)

    @property
    def ne(self) -> int:
        return len(self.names)

    @property
    def nx(self) -> int:
        return 0 if self.xoff is None else self.xoff.shape[1]

    @property
    def m(self) -> int:
        return self.ctype.equations

    def rows(self) -> np.ndarray:
        return (self.row[:, None] + np.arange(self.m)).ravel()

    def cidx(self) -> np.ndarray:
        """Indices into the System's extended q buffer of each body's block."""
        off = self.boff if self.pyoff is None else self.pyoff
        return off[:, :, None] + np.arange(self.ncol)


def pack_element(obj, el, model, functions: list, kind: str):
    """Pack one element: its float parameters, and the indices of its time functions
    (appended to ``functions``); checks the counts the type declares."""
    par, funs = obj.pack(el.values, PackContext(model, el.path))
    par = np.asarray(par, dtype=float).ravel()
    # a body-list force type (ForceType.body_list): n_par is the fixed head
    head = getattr(obj, "body_list", None) and par.size >= obj.n_par
    if (par.size != obj.n_par and not head) or len(funs) != obj.n_fun:
        raise PluginError(f"{kind} type '{el.type}': pack() returned {par.size} parameters "
                          f"and {len(funs)} functions, declared n_par={obj.n_par}, "
                          f"n_fun={obj.n_fun}")
    fidx = list(range(len(functions), len(functions) + len(funs)))
    functions.extend(funs)
    return par, fidx


def reason_of(fg: ForceGroup, e: int) -> str:
    """Why a compiled force kernel refused element e (kernels signal by index; a
    plugin kernel's index outside its group is itself a PluginError)."""
    if not 0 <= e < len(fg.names):
        raise PluginError(f"force type '{fg.ftype.name}': compiled kernel "
                          f"{fg.ckernel.source} returned element index {e}, the group "
                          f"has {len(fg.names)} elements")
    return fg.ckernel.reason


def kernel_group(fg: ForceGroup) -> dict:
    """What the compiled force evaluators pack of a compiled group (its kernel's
    capsule; ``par`` the group's own array, shared with the NumPy path)."""
    return dict(kernel=fg.ckernel.name, capsule=fg.ckernel.capsule, boff=fg.boff,
                par=fg.par, fidx=fg.fidx, body_list=bool(getattr(fg.ftype, "body_list",
                                                                 None)))


def short_label(key: str) -> str:
    """Body parameter key -> label part: body_i -> i, body_j -> j, body -> body."""
    return key[5:] if key.startswith("body_") else key


def unique_ints(a: np.ndarray) -> np.ndarray:
    """``np.unique`` of an integer array (sorted, distinct), without numpy.ma, which
    np.unique imports on its first call (~35 ms of start-up time)."""
    a = np.sort(a, kind="stable")
    if a.size > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a
