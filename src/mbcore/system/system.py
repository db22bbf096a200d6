"""System: a Model compiled for evaluation, and the evaluation pipeline.

``System`` is built once by :meth:`mbcore.Model.compile` and never changes: the
coordinate index map, the constraint elements packed by type into contiguous
arrays (*groups*), the Jacobian sparsity pattern, the function table of all time
functions and preallocated buffers.  The state (t, q, qd, qdd, lam) lives apart
(:class:`mbcore.system.state.State`).

The pipeline (Nikravesh (1988), §3.2.2, Eqs. 3.12-3.17) — one call per quantity, top to
bottom in this file::

    functions(t) -> phi(q, t) -> jacobian(q, t) -> nu(q, t) -> gamma(q, qd, t)

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
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..elements.base import ConstraintType, PackContext
from ..errors import ElementEvaluationError, ModelError, PluginError
from .kernels import CompiledKernels
from .state import State

#: systems with at most this many coordinates use dense Jacobians and LAPACK; larger
#: ones a CSR Jacobian and the sparse Schur solver (mbcore.solve.sparse_schur).  Measured on
#: the pendulum chain (docs/linear-solvers.md): one equations-of-motion solve is
#: cheaper sparse from n ~ 15; the compiled dense right-hand side loses from n ~ 36;
#: a whole 1 s dopri5 run breaks even at n ~ 48 (16 links).  Override per model
#: with ``compile(jacobian="dense"|"sparse")`` or MBCORE_DENSE_LIMIT.
DENSE_LIMIT = int(os.environ.get("MBCORE_DENSE_LIMIT", "48"))
BACKENDS = ("compiled", "numpy")
_NDARRAY = np.ndarray
_F64 = np.dtype(np.float64)        # the fast path's output check: ``dtype is _F64``


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


def _pack(obj, el, model, functions: list, kind: str):
    """Pack one element: its float parameters, and the indices of its time functions
    (appended to ``functions``); checks the counts the type declares."""
    par, funs = obj.pack(el.values, PackContext(model, el.path))
    par = np.asarray(par, dtype=float).ravel()
    if par.size != obj.n_par or len(funs) != obj.n_fun:
        raise PluginError(f"{kind} type '{el.type}': pack() returned {par.size} parameters "
                          f"and {len(funs)} functions, declared n_par={obj.n_par}, "
                          f"n_fun={obj.n_fun}")
    fidx = list(range(len(functions), len(functions) + len(funs)))
    functions.extend(funs)
    return par, fidx


def _kernel_spec(module, kind: str, etype) -> tuple:
    """The compiled module's declaration of the kernel a type names."""
    if etype.kernel not in module.KERNELS:
        raise PluginError(f"{kind} type '{etype.name}' names kernel {etype.kernel!r}, which "
                          f"{module.__name__} does not provide")
    return tuple(module.KERNELS[etype.kernel])


def _reason_of(fg: ForceGroup, e: int) -> str:
    """Why a compiled force kernel refused element e (kernels signal by index; a
    plugin kernel's index outside its group is itself a PluginError)."""
    if fg.ckernel is not None:
        if not 0 <= e < len(fg.names):
            raise PluginError(f"force type '{fg.ftype.name}': compiled kernel "
                              f"{fg.ckernel.source} returned element index {e}, the group "
                              f"has {len(fg.names)} elements")
        return fg.ckernel.reason
    from .._ext import _forces
    return _forces.REASONS.get(fg.ftype.kernel, "the element could not be evaluated")


def _kernel_group(fg: ForceGroup) -> dict:
    """What the compiled force evaluators pack of a compiled group."""
    if fg.ckernel is not None:
        return dict(kernel=fg.ckernel.name, capsule=fg.ckernel.capsule, boff=fg.boff,
                    par=fg.par, fidx=fg.fidx)
    return dict(kernel=fg.ftype.kernel, boff=fg.boff, par=fg.par, fidx=fg.fidx)


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
        off = getattr(self, "_pyoff", self.boff)
        return off[:, :, None] + np.arange(self.ncol)


class System:
    """A compiled, immutable multibody system (see module docstring).

    Compilation is a sequence of named steps, each filling its own attributes:
    ``_layout_coordinates`` (bodies -> coordinates, by body kind) ->
    ``_pack_constraints`` (elements -> groups and rows) -> ``_pack_forces`` ->
    ``_mass_and_gravity`` -> ``_jacobian_pattern`` (rows, columns, data positions)
    -> ``_buffers_and_kernels`` -> ``_reaction_maps`` -> ``_points``.
    """

    def __init__(self, model, registry, kernels: str | None = None,
                 jacobian: str = "auto", dense_limit: int | None = None):
        self.model = model
        #: the plugin registry this System was compiled with: analyses look up their
        #: integrators and formulations here (state per System, docs/plugins.md)
        self.registry = registry
        if jacobian not in ("auto", "dense", "sparse"):
            raise ValueError(f"jacobian={jacobian!r}: expected 'auto', 'dense' or 'sparse'")
        backend = kernels or default_backend()
        if backend not in BACKENDS:
            raise ValueError(f"kernels={backend!r}: expected one of {', '.join(BACKENDS)}")
        if backend == "compiled" and not compiled_available():
            warnings.warn("mbcore's compiled kernels are not available (was the package "
                          "built?); using the NumPy reference path", RuntimeWarning)
            backend = "numpy"
        self.backend = backend
        self.body_kind = getattr(model, "body_kind", "planar")
        from ..elements.functions import FunctionTable
        functions: list[Any] = []
        self._layout_coordinates(model, registry)
        order, by_type = self._pack_constraints(model, registry, functions)
        self._pack_forces(model, registry, functions)
        self._mass_and_gravity(model)
        self.functions = functions
        self.ftable = FunctionTable(functions, backend=backend)
        self.fv = np.zeros((len(functions), 3))
        self._ft = None                       # time of the last function evaluation
        size, n_ground = self._jacobian_pattern(order, by_type, jacobian, dense_limit)
        self._buffers_and_kernels(size, n_ground)
        self._python_tier()
        self._reaction_maps(model)
        self._points(model)

    # ------------------------------------------------------------------ compile steps
    def _layout_coordinates(self, model, registry) -> None:
        """Bodies -> coordinates: per body kind its q block (x, y, phi | x, y, z,
        p0..p3), then the artificial coordinates of curve pairs (Nikravesh (1988), §4.2.5).  The
        ground is no coordinate: elements see it through a constant block after q
        (planar: 3 zeros at n; spatial: r = 0, p = (1, 0, 0, 0) at n + 3)."""
        from ..elements.bodykinds import KINDS
        self.body_names = [b.name for b in model.bodies]
        #: body name -> index (O(1) look-ups while packing large models)
        self.body_index = {name: k for k, name in enumerate(self.body_names)}
        self.nb = len(self.body_names)
        self.body_kinds = [KINDS[getattr(b, "kind", "planar")] for b in model.bodies]
        self.body_offsets = np.zeros(self.nb, dtype=np.intp)
        names: list[str] = []
        for k, (b, kind) in enumerate(zip(self.body_names, self.body_kinds)):
            self.body_offsets[k] = len(names)
            names += [f"{b}.{c}" for c in kind.coordinates]
        self.n_body = len(names)                 # coordinates of the bodies
        self.spatial = any(kd.elements == "spatial" for kd in self.body_kinds)
        self.planar_only = not self.spatial
        #: rigid spatial bodies (Euler parameters; normalisation rows, mass blocks J*)
        self.rigid_spatial = [k for k, kd in enumerate(self.body_kinds) if kd.name == "spatial"]
        self._xoff: dict[str, list[int]] = {}
        bk = self.body_kind
        for el in model.constraint_elements():
            extra = registry.get("constraint", el.type, bk).extra
            if extra:
                self._xoff[el.name] = list(range(len(names), len(names) + len(extra)))
                names += [f"{el.name}.{x}" for x in extra]
        self.coordinate_names = names
        self.n = len(names)
        self.n_extra = self.n - self.n_body
        self._extra0 = np.zeros(self.n_extra)
        self._boff = {name: int(o) for name, o in zip(self.body_names, self.body_offsets)}
        self._boff[model.ground] = self.n
        #: offset of the ground block an element of a body kind reads (after q)
        self._ground_off = {"planar": self.n, "spatial": self.n + 3}
        self._layout_padding()

    def _layout_padding(self) -> None:
        """Particles (point masses): elements read a padded block for each, after the
        ground blocks in the extended buffer (``[x, y, 0]`` or ``[x, y, z, 1, 0, 0,
        0]``): ``_boff`` points there, ``_pad_src``/``_pad_dst`` copy the particle's
        coordinates in, and ``_colmap`` maps every extended index to its coordinate
        (>= n: a constant, whose Jacobian entries are dropped)."""
        n = self.n
        src, dst, const = [], [], []
        off = n + 10
        for k, kd in enumerate(self.body_kinds):
            if not kd.pad:
                continue
            o = int(self.body_offsets[k])
            self._boff[self.body_names[k]] = off
            src += list(range(o, o + kd.nq))
            dst += list(range(off, off + kd.nq))
            const += [(off + kd.nq + j, v) for j, v in enumerate(kd.pad)]
            off += kd.nq + len(kd.pad)
        self.padded = bool(src)
        self.n_ext = off
        self._pad_src = np.array(src, dtype=np.intp)
        self._pad_dst = np.array(dst, dtype=np.intp)
        self._pad_const = const
        self._colmap = np.arange(off, dtype=np.intp)
        self._colmap[n:] = n                    # ground and padding: constants
        self._colmap[self._pad_dst] = self._pad_src

    def _body_offset(self, name: str, kind: str) -> int:
        return self._ground_off[kind] if name == self.model.ground else self._boff[name]

    def _check_kind(self, cls, el, kind: str) -> None:
        """An element's bodies must be of the kind its type works on."""
        for key in cls.bodies:
            name = el.values.get(key)
            if name is None or name == self.model.ground:
                continue
            bk = self.body_kinds[self.body_index[name]]
            if bk.elements != kind:
                raise ModelError(f"{el.path}.{key}", f"{cls.name} works on {kind} bodies; "
                                                     f"'{name}' is a {bk.name} body")

    def _pack_constraints(self, model, registry, functions: list):
        """Elements -> groups: every constraint element packed by type, rows in model
        order; then the normalisation row of every spatial body (Nikravesh (1988),
        Eqs. 6.23, 7.33)."""
        by_type: dict[str, list] = {}
        order: list[str] = []
        row = 0
        self.constraint_names: list[str] = []
        holo_rows: list[bool] = []
        self.element_rows: dict[str, slice] = {}
        self.element_types: dict[str, str] = {}
        self.element_sections: dict[str, str] = {}
        self._types: dict[str, Any] = {}
        bk = self.body_kind
        for el in model.constraint_elements():
            cls = registry.get("constraint", el.type, bk)
            self._check_kind(cls, el, getattr(cls, "body_kind", "planar"))
            if el.type not in by_type:
                by_type[el.type] = []
                order.append(el.type)
            # one instance per type and System: it packs and evaluates every element
            # (plugin state is per System, docs/plugins.md)
            ct = self._types[el.type] if el.type in self._types else cls()
            self._types[el.type] = ct
            par, fidx = _pack(ct, el, model, functions, "constraint")
            bodies = [el.values[b] for b in cls.bodies]
            if cls.extra:
                x0 = np.asarray(ct.initial_extra(el.values, PackContext(model, el.path)),
                                dtype=float).ravel()
                if x0.size != len(cls.extra):
                    raise PluginError(f"constraint type '{el.type}': initial_extra() returned "
                                      f"{x0.size} values for {len(cls.extra)} coordinates")
                self._extra0[np.array(self._xoff[el.name]) - self.n_body] = x0
            by_type[el.type].append((el.name, el.path, ct, par, fidx, bodies, row))
            labels = ct.equation_labels()
            self.constraint_names += [f"{el.name}.{lab}" for lab in labels]
            holo_rows.extend([bool(cls.holonomic)] * ct.equations)
            self.element_rows[el.name] = slice(row, row + ct.equations)
            self.element_types[el.name] = el.type
            self.element_sections[el.name] = el.section
            row += ct.equations
        self.m_elements = row
        spatial = [b for b, kd in zip(self.body_names, self.body_kinds) if kd.name == "spatial"]
        if spatial:                              # Euler-parameter normalisation rows
            from ..elements.bodykinds import EulerNormalization
            ct = EulerNormalization()
            key = "@" + ct.name                  # no model-file type can have this name
            by_type[key] = []
            order.append(key)
            for b in spatial:
                by_type[key].append((f"{b}", f"bodies[{self.body_index[b]}]", ct,
                                     np.zeros(0), [], [b], row))
                self.constraint_names.append(f"{b}.norm")
                holo_rows.append(True)
                row += 1
        self.m = row
        #: per constraint row: True for position-level (holonomic) equations
        self.holonomic = np.array(holo_rows, dtype=bool)
        self.all_holonomic = bool(self.holonomic.all()) if self.m else True
        return order, by_type

    def _pack_forces(self, model, registry, functions: list) -> None:
        """Force elements packed by type like constraints (no rows)."""
        self.force_groups: list[ForceGroup] = []
        bk = self.body_kind
        for el in model.force_elements():
            cls = registry.get("force", el.type, bk)
            kind = getattr(cls, "body_kind", "planar")
            self._check_kind(cls, el, kind)
            fg = next((g for g in self.force_groups if g.ftype.name == el.type), None)
            ft = cls() if fg is None else fg.ftype     # one instance per type and System
            par, fidx = _pack(ft, el, model, functions, "force")
            boff = [self._body_offset(el.values[b], kind) for b in cls.bodies]
            if fg is None:
                fg = ForceGroup(ft, [], [], [], [], [])
                self.force_groups.append(fg)
            fg.names.append(el.name)
            fg.paths.append(el.path)
            fg.boff.append(boff)
            fg.par.append(par)
            fg.fidx.append(fidx)
            self.element_types[el.name] = el.type
            self.element_sections[el.name] = el.section
        from ..elements.bodykinds import KINDS
        for fg in self.force_groups:
            nbk, ne = len(fg.ftype.bodies), len(fg.names)
            ncol = KINDS[getattr(fg.ftype, "body_kind", "planar")].nq
            fg.boff = np.array(fg.boff, dtype=np.intp).reshape(ne, nbk)
            fg.par = np.array(fg.par, dtype=float).reshape(ne, fg.ftype.n_par)
            fg.fidx = np.array(fg.fidx, dtype=np.intp).reshape(ne, fg.ftype.n_fun)
            fg._cidx = fg.boff[:, :, None] + np.arange(ncol)
            fg._cflat = fg._cidx.reshape(-1)
            # ground slots [n, n + 10) are dropped; padded particle slots (>= n + 10)
            # are folded onto the particle's coordinates: both count for repeats
            real = fg._cflat[(fg._cflat < self.n) | (fg._cflat >= self.n + 10)]
            fg._unique = len(np.unique(real)) == real.size
            fg._direct = fg._unique and bool(np.all(fg._cflat < self.n))
            c0 = int(fg._cflat[0]) if fg._cflat.size else 0
            # a run of consecutive coordinates (e.g. one body): a slice, not a fancy index
            fg._cslice = slice(c0, c0 + fg._cflat.size) if fg._direct and np.array_equal(
                fg._cflat, np.arange(c0, c0 + fg._cflat.size)) else fg._cflat
            fg._fv0 = np.zeros((ne, 0, 3))
            fg._force_fn = fg.ftype.force
            fg._shape = (ne, nbk, ncol)
        self.force_labels = [f"{name}.{lab}" for fg in self.force_groups
                             for name in fg.names for lab in fg.ftype.labels]

    def _mass_and_gravity(self, model) -> None:
        """Mass (Nikravesh (1988), Eqs. 9.2-9.3; spatial: Eqs. 11.10-11.16, Formulation I) and the
        gravity forces (Nikravesh (1988), Eq. 9.9a; centroidal body frames)."""
        n = self.n
        self.gravity = np.array(model.gravity, dtype=float)
        self._q_gravity = np.zeros(n)
        #: positive weights per coordinate (mass-like) for nearest-state problems
        self.mass_weights = np.zeros(n)
        if self.planar_only:
            blocks = [[b.mass, b.mass, b.inertia] if kd.name == "planar" else [b.mass, b.mass]
                      for b, kd in zip(model.bodies, self.body_kinds)]
            self.mass_diag = np.concatenate(
                [np.array(x, dtype=float) for x in blocks]
                + [np.zeros(self.n_extra)])      # artificial coordinates are massless
            o = self.body_offsets
            for k in range(2):                   # m g on x and y of every body
                self._q_gravity[o + k] = self.mass_diag[o + k] * self.gravity[k]
            self.mass_weights[:] = self.mass_diag
        else:
            # M(q) depends on p (J* = 4 L^T J' L): no diagonal mass matrix
            self.mass_diag = None
            self.body_mass = np.array([b.mass for b in model.bodies], dtype=float)
            rs = self.rigid_spatial                # particles: r only
            self.body_inertia = np.array([model.bodies[k].inertia for k in rs],
                                         dtype=float).reshape(len(rs), 3, 3)
            o = self.body_offsets
            self._r_idx = (o[:, None] + np.arange(3)).reshape(-1)      # every r
            self._p_idx = (o[rs][:, None] + 3 + np.arange(4))          # (rigid, 4)
            self._q_gravity[self._r_idx] = (self.body_mass[:, None] * self.gravity).reshape(-1)
            self.mass_weights[self._r_idx] = np.repeat(self.body_mass, 3)
            # a rotation by d(theta) moves p by d(theta)/2: weight 4 J
            jw = 4.0 * np.trace(self.body_inertia, axis1=1, axis2=2) / 3.0
            self.mass_weights[self._p_idx.reshape(-1)] = np.repeat(jw, 4)
        self._Q = np.zeros(n)
        self._Qx3 = np.zeros(self.n_ext)

    def _jacobian_pattern(self, order, by_type, jacobian: str, dense_limit):
        """Rows, columns and data positions of every Jacobian entry (dense row-major
        or CSR; entries in ground columns get slots after the matrix data)."""
        from ..elements.bodykinds import KINDS
        rows_all, cols_all = [], []
        pre = []
        for tname in order:
            items = by_type[tname]
            ct = items[0][2]
            kind = getattr(ct, "body_kind", "planar")
            ncol = KINDS[kind].nq
            nbk = len(ct.bodies)
            # kernels see the ground at n (compiled evaluators add its block there)
            boff = np.array([[self._boff[b] for b in it[5]] for it in items],
                            dtype=np.intp).reshape(len(items), nbk)
            rowa = np.array([it[6] for it in items], dtype=np.intp)
            # entry (e, r, b, c): row = row_e + r, col = boff[e,b] + c  (col >= n -> ground)
            r_ = rowa[:, None, None, None] + np.arange(ct.equations)[None, :, None, None]
            c_ = self._colmap[boff[:, None, :, None] + np.arange(ncol)[None, None, None, :]]
            r_, c_ = np.broadcast_arrays(r_, c_)
            r_, c_ = r_.reshape(len(items), -1), c_.reshape(len(items), -1)
            xoff = None
            if ct.extra:   # entries (e, r, x) after the body entries
                xoff = np.array([self._xoff[it[0]] for it in items], dtype=np.intp)
                rx = rowa[:, None, None] + np.arange(ct.equations)[None, :, None]
                cx = np.broadcast_to(xoff[:, None, :], rx.shape[:2] + (xoff.shape[1],))
                rx = np.broadcast_to(rx, cx.shape)
                r_ = np.concatenate([r_, rx.reshape(len(items), -1)], axis=1)
                c_ = np.concatenate([c_, cx.reshape(len(items), -1)], axis=1)
            pre.append((tname, items, ct, boff, rowa, r_, c_, xoff, kind, ncol))
            rows_all.append(r_.ravel())
            cols_all.append(c_.ravel())
        R = np.concatenate(rows_all) if rows_all else np.zeros(0, np.intp)
        C = np.concatenate(cols_all) if cols_all else np.zeros(0, np.intp)
        real = C < self.n
        # CSR pattern of the non-ground entries (unique: an element owns its rows and
        # connects distinct bodies)
        key = _unique_ints(R[real] * max(self.n, 1) + C[real])
        self._csr_rows = key // max(self.n, 1)
        self._csr_cols = key % max(self.n, 1)
        self.nnz = len(key)
        indptr = np.zeros(self.m + 1, dtype=np.intp)
        np.add.at(indptr, self._csr_rows + 1, 1)
        self._indptr = np.cumsum(indptr)
        limit = DENSE_LIMIT if dense_limit is None else int(dense_limit)
        self.dense = (self.n <= limit) if jacobian == "auto" else jacobian == "dense"

        # Entries in ground columns are not part of Phi_q; each gets a slot of its own
        # after the matrix data, so that the blocks (and reactions on the ground) can
        # be read back from the data array.
        self.groups: list[Group] = []
        size = self.m * self.n if self.dense else self.nnz
        n_ground = 0
        for tname, items, ct, boff, rowa, r_, c_, xoff, kind, ncol in pre:
            ground = c_ >= self.n
            gslot = size + n_ground + np.cumsum(ground.ravel()).reshape(ground.shape) - 1
            n_ground += int(ground.sum())
            if self.dense:
                jpos = np.where(ground, gslot, r_ * self.n + c_)
            else:
                pos = np.searchsorted(key, r_ * max(self.n, 1) + c_)
                jpos = np.where(ground, gslot, pos)
            g = Group(ct, [it[0] for it in items], [it[1] for it in items],
                      boff, rowa, np.array([it[3] for it in items]).reshape(len(items), ct.n_par),
                      np.array([it[4] for it in items], dtype=np.intp).reshape(len(items),
                                                                                ct.n_fun),
                      np.ascontiguousarray(jpos, dtype=np.intp), xoff)
            g.kind = kind
            g.ncol = ncol
            g.internal = tname.startswith("@")
            # the Python path reads the ground block of its kind
            g._pyoff = np.where(boff == self.n, self._ground_off[kind], boff)
            self.groups.append(g)
        return size, n_ground

    def _buffers_and_kernels(self, size: int, n_ground: int) -> None:
        """Work buffers, the CSR view of the Jacobian buffer, and the compiled
        evaluators of the groups that have kernels."""
        from ..elements.bodykinds import SPATIAL
        self._qx = np.zeros(self.n_ext)
        self._qx[self.n + 3:self.n + 10] = SPATIAL.ground
        for j, v in self._pad_const:             # the fixed rotation of particles
            self._qx[j] = v
        self._qdx = np.zeros(self.n_ext)
        self._phi = np.zeros(self.m)
        self._nu = np.zeros(self.m)
        self._gamma = np.zeros(self.m)
        self._jdata = np.zeros(size + n_ground)    # matrix data, then ground entries
        self._jac_view = self._jdata[:size].reshape(self.m, self.n) if self.dense else None
        self._csr = None
        if not self.dense:   # a CSR matrix whose data array *is* the kernel buffer
            import scipy.sparse as sp    # only sparse systems need it (start-up time)
            self._csr = sp.csr_matrix((self._jdata[:size], self._csr_cols.astype(np.int32),
                                       self._indptr.astype(np.int32)),
                                      shape=(self.m, self.n), copy=False)
            if size and not np.shares_memory(self._csr.data, self._jdata):  # pragma: no cover
                raise RuntimeError("scipy copied the Jacobian buffer")
        self._evaluator = None
        self._py_groups = list(self.groups)
        if self.backend == "compiled":
            from .._ext import _planar
            comp = []
            spatial_kernels = getattr(_planar, "SPATIAL_KERNELS", {})
            for g in self.groups:
                k = g.ctype.kernel
                if getattr(g.ctype, "c_kernel", None) is not None:   # compiled plugin tier
                    from ..plugins.compiled import load_constraint_kernel
                    g.ckernel = load_constraint_kernel(g.ctype)
                    g.compiled = True
                    comp.append(dict(kernel=g.ckernel.name, capsule=g.ckernel.capsule,
                                     kind=g.kind, boff=g._pyoff if self.padded else g.boff,
                                     row=g.row, par=g.par, fidx=g.fidx, jpos=g.jpos))
                    continue
                if k is None or k not in _planar.KERNELS and g.kind != "planar":
                    continue            # a spatial kernel this build does not have
                spec = _kernel_spec(_planar, "constraint", g.ctype)
                if (spec + (0,))[5] != len(g.ctype.extra) or tuple(spec[1:5]) != (
                        g.ctype.equations, len(g.ctype.bodies), g.ctype.n_par, g.ctype.n_fun):
                    raise PluginError(f"constraint type '{g.ctype.name}': its declaration "
                                      f"does not match kernel {k!r}")
                if (k in spatial_kernels) != (g.kind == "spatial"):
                    raise PluginError(f"constraint type '{g.ctype.name}' works on {g.kind} "
                                      f"bodies; kernel {k!r} does not")
                g.compiled = True
                # par is passed as the group's own array, never a copy: the rotation
                # driver's kernel updates its tracked angle in it (as its NumPy phi
                # does), so both paths share that state
                # with particles the evaluator reads the System's padded buffer, the
                # ground blocks included (``_pyoff``)
                comp.append(dict(kernel=k, kind=g.kind,
                                 boff=g._pyoff if self.padded else g.boff, row=g.row, par=g.par,
                                 fidx=g.fidx, jpos=g.jpos,
                                 xoff=g.xoff if g.xoff is not None
                                 else np.zeros((g.ne, 0), np.intp)))
            self._evaluator = _planar.PlanarEvaluator(self.n_ext if self.padded else self.n,
                                                      comp, self._constraint_failed)
            self._compiled_groups = [g for g in self.groups if g.compiled]
            self._py_groups = [g for g in self.groups if not g.compiled]
        self._force_evaluator = None
        self._py_force_groups = list(self.force_groups)
        if self.backend == "compiled" and any(
                fg.ftype.kernel or getattr(fg.ftype, "c_kernel", None)
                for fg in self.force_groups):
            from .._ext import _forces
            comp = []
            for fg in self.force_groups:
                k = fg.ftype.kernel
                if getattr(fg.ftype, "c_kernel", None) is not None:   # compiled plugin tier
                    from ..plugins.compiled import load_force_kernel
                    fg.ckernel = load_force_kernel(fg.ftype)
                elif k is None:
                    continue
                elif _kernel_spec(_forces, "force", fg.ftype)[1:] != (
                        len(fg.ftype.bodies), fg.ftype.n_par, fg.ftype.n_fun):
                    raise PluginError(f"force type '{fg.ftype.name}': its declaration does "
                                      f"not match kernel {k!r}")
                fg.compiled = True
                comp.append(_kernel_group(fg))
            self._force_evaluator = _forces.ForceEvaluator(
                self.n_ext if self.padded else self.n, comp)
            self._Qext = np.zeros(self.n_ext)
            self._compiled_force_groups = [g for g in self.force_groups if g.compiled]
            self._py_force_groups = [g for g in self.force_groups if not g.compiled]
        self._py_forces_direct = all(fg._direct for fg in self._py_force_groups)
        for g in self._py_groups:      # precomputed gather/scatter indices and shapes
            g._rows = g.rows()
            if g._rows.size and np.array_equal(g._rows, np.arange(g._rows[0],
                                                                  g._rows[0] + g._rows.size)):
                g._rows = slice(int(g._rows[0]), int(g._rows[0]) + g._rows.size)
            g._cidx = g.cidx()
            g._jflat = g.jpos.ravel()
            g._nf = g.ctype.n_fun
            g._fv0 = np.zeros((g.ne, 0, 3))
            g._shape_rows = (g.ne, g.m)
            g._shape_jac = (g.ne, g.m, len(g.ctype.bodies), g.ncol)

    def _constraint_failed(self, k: int, e: int, t: float) -> None:
        """The compiled constraint evaluator's report: the plugin kernel of compiled
        group k refused element e at time t (raises the named error)."""
        from ..errors import AnalysisError
        g = self._compiled_groups[k]
        src = g.ckernel.source if g.ckernel is not None else f"kernel {g.ctype.kernel!r}"
        if g.ckernel is None or not 0 <= e < g.ne:
            raise PluginError(f"constraint type '{g.ctype.name}': compiled kernel {src} "
                              f"returned element index {e}, the group has {g.ne} elements")
        raise AnalysisError(f"constraint element '{g.names[e]}' ({g.paths[e]}, "
                            f"{g.ctype.name}): {g.ckernel.reason}", t)

    def _python_tier(self) -> None:
        """Evaluation plans of the groups evaluated in Python (Python-only plugin
        types; every group on the NumPy backend): per stage, one tuple per group
        with everything the stage needs (bound method, parameters, gather indices,
        function indices, declared shape, destination buffer and scatter indices
        shaped like the result), so that an evaluation does no attribute look-up,
        index arithmetic or reshape per group
        (``python_plugin_framework_overhead`` in benchmarks/run.py).  A type's
        result is copied into the System's buffers, never kept, so a type may
        return the same array at every call."""
        n = self.n
        self._nshape = (n,)
        self._qx_head = self._qx[:n]
        self._qdx_head = self._qdx[:n]
        plans: dict[str, list] = {"phi": [], "nu": [], "gamma": [], "jacobian": []}
        for g in self._py_groups:
            fidx = g.fidx if g._nf else None
            rows = g.row[:, None] + np.arange(g.m)          # (ne, m): g._rows, shaped
            xk = bool(g.nx)
            for stage, buf in (("phi", self._phi), ("nu", self._nu),
                               ("gamma", self._gamma)):
                plans[stage].append((g, getattr(g.ctype, stage), g.par, g._cidx, fidx,
                                     g._fv0, g._shape_rows, buf, rows, xk))
            plans["jacobian"].append((g, g.ctype.jacobian, g.par, g._cidx, fidx, g._fv0,
                                      None if xk else g._shape_jac, self._jdata,
                                      g.jpos if xk else g.jpos.reshape(g._shape_jac), xk))
        self._py_plans = plans
        # gather from q itself when no Python group reads beyond the n coordinates
        self._py_direct = not self.padded and all(
            not g.nx and (g._cidx.size == 0 or int(g._cidx.max()) < n)
            for g in self._py_groups)
        fplan = []
        for fg in self._py_force_groups:
            fidx = fg.fidx if fg.ftype.n_fun else None
            if fg._direct and isinstance(fg._cslice, slice):
                mode, dst, idx = "add", self._Q[fg._cslice].reshape(fg._shape), None
            elif fg._direct:
                mode, dst, idx = "scatter", self._Q, fg._cidx
            else:
                mode, dst, idx = ("ext", None, fg._cidx) if fg._unique else \
                    ("at", None, fg._cflat)
            fplan.append((fg, fg.par, fg._cidx, fidx, fg._fv0, fg._shape, mode, dst, idx))
        self._py_force_plan = fplan

    def _reaction_maps(self, model) -> None:
        """Reactions: per (element, body) ``[fx, fy, n]`` (planar) or ``[fx, fy, fz,
        nx, ny, nz]`` (spatial, global components, moment about the body origin), in
        element order; and the gather indices of the joint-local components."""
        self._element_groups = [g for g in self.groups if not g.internal]
        groups = self._element_groups
        off = 0
        for g in groups:
            nbk = len(g.ctype.bodies)
            nr = 3 if g.kind == "planar" else 6
            g._nr = nr
            g._roff = off + np.arange(g.ne * nbk * nr).reshape(g.ne, nbk, nr)
            off += g.ne * nbk * nr
        by_name = {}
        for g in groups:
            for e, name in enumerate(g.names):
                by_name[name] = (g, e)
        order_ = np.concatenate([by_name[el.name][0]._roff[by_name[el.name][1]].ravel()
                                 for el in model.constraint_elements()]) \
            if groups else np.zeros(0, np.intp)
        perm = np.empty_like(order_)
        perm[order_] = np.arange(len(order_))
        for g in groups:          # final positions in element order
            g._roff = perm[g._roff]
        labels = [""] * off
        for g in groups:
            comps = ("fx", "fy", "n") if g._nr == 3 else ("fx", "fy", "fz", "nx", "ny", "nz")
            for e, el in enumerate(g.names):
                for b, key in enumerate(g.ctype.bodies):
                    for c, lab in enumerate(comps):
                        labels[g._roff[e, b, c]] = f"{el}.{_short(key)}.{lab}"
        self.reaction_labels = labels
        self._reactions = np.zeros(off)
        self.local_reaction_labels = [f"{el.name}.{lab}"
                                      for el in model.constraint_elements()
                                      for lab in by_name[el.name][0].ctype.local_labels] \
            if groups else []
        # gather indices of the output stages (reactions, local reactions): once
        pos, start = {}, 0
        for g in self.groups:
            nbk, nl = len(g.ctype.bodies), len(g.ctype.local_labels)
            g._jblk = g.jpos[:, :g.m * nbk * g.ncol].reshape(g.ne, g.m, nbk, g.ncol)
            g._lrows = g.row[:, None] + np.arange(g.m)
            g._cidx_all = g.cidx()
            if g.internal:
                continue
            for e, name in enumerate(g.names):
                pos[name] = np.arange(start + e * nl, start + (e + 1) * nl)
            start += g.ne * nl
        self._local_perm = np.concatenate(
            [pos[el.name] for el in model.constraint_elements()]).astype(np.intp) \
            if groups else np.zeros(0, np.intp)

    def _points(self, model) -> None:
        """Points of interest (the "points" of the book's KAP program, Nikravesh (1988),
        §5.1): body offsets and local coordinates."""
        self.point_names = [p.name for p in model.points]
        self._pt_off = np.array([self._boff[p.body] for p in model.points], dtype=np.intp)
        dim = 3 if self.spatial else 2
        self._pt_loc = np.array([p.at for p in model.points], dtype=float).reshape(-1, dim)
        comps = (("x", "y", "xd", "yd", "xdd", "ydd") if dim == 2 else
                 ("x", "y", "z", "xd", "yd", "zd", "xdd", "ydd", "zdd"))
        self.point_labels = [f"{p}.{c}" for p in self.point_names for c in comps]
        # angular velocity and acceleration of every spatial body (global axes)
        sp = [k for k, kd in enumerate(self.body_kinds) if kd.name == "spatial"]
        self._ang_p = (self.body_offsets[sp][:, None] + 3 + np.arange(4)).astype(np.intp)
        self.angular_labels = [f"{self.body_names[k]}.{c}" for k in sp
                               for c in ("wx", "wy", "wz", "wxd", "wyd", "wzd")]

    # =========================================================================
    # evaluation pipeline
    # =========================================================================
    def functions_at(self, t: float) -> np.ndarray:
        """Jets (c, c', c'') of every time function at t (cached per t)."""
        if self._ft != t:
            if len(self.functions):
                self.ftable.evaluate(t, self.fv)
            self._ft = t
        return self.fv

    def set_input(self, name: str, value: float) -> None:
        """Set the ``input`` time functions named ``name`` to ``value``; the next
        evaluation sees it (both backends)."""
        self.ftable.set_input(name, value)
        self._ft = math.nan

    def phi(self, q: np.ndarray, t: float) -> np.ndarray:
        """Constraint violations Phi(q, t), length m (Nikravesh (1988), Eq. 3.18)."""
        fv = self.functions_at(t)
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
        fv = self.functions_at(t)
        if self._evaluator is not None:
            self._evaluator.jacobian(self._ev_q(q), t, fv, self._jdata)
        if self._py_groups:
            self._py_call(self._py_plans["jacobian"], "jacobian", q, None, t, fv)
        return self._jdata

    def nu(self, q: np.ndarray, t: float) -> np.ndarray:
        """Velocity right-hand side nu = -Phi_t (Nikravesh (1988), Eq. 3.14)."""
        fv = self.functions_at(t)
        if self._evaluator is not None:
            self._evaluator.nu(self._ev_q(q), t, fv, self._nu)
        if self._py_groups:
            self._py_call(self._py_plans["nu"], "nu", q, None, t, fv)
        return self._nu

    def gamma(self, q: np.ndarray, qd: np.ndarray, t: float) -> np.ndarray:
        """Acceleration right-hand side gamma (Nikravesh (1988), Eq. 3.16)."""
        fv = self.functions_at(t)
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
                out = self._py_conform(g, method, out, shape)
            dst[idx] = out              # a copy: the type may reuse its array

    @staticmethod
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

    # ------------------------------------------------------------ forces and mass
    def forces(self, q: np.ndarray, qd: np.ndarray, t: float) -> np.ndarray:
        """Generalised applied forces Q(q, qd, t): gravity plus every force element
        (Nikravesh (1988), Eq. 9.8).  Length n."""
        fv = self.functions_at(t)
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
                self._element_failed(fg, e, _reason_of(fg, e), t)
        else:
            if (getattr(q, "shape", None) != (self.n,) or getattr(qd, "shape", None)
                    != (self.n,)) and (np.shape(q) != (self.n,) or np.shape(qd) != (self.n,)):
                raise ValueError(f"q and qd must have {self.n} entries")
            Q[:] = 0.0
        Q += self._q_gravity
        if not self._py_force_groups:
            return Q
        # the force groups evaluated in Python (``_python_tier``'s plan): one
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

    def _force_call(self, fg: "ForceGroup", method: str, args, shape, t):
        """One call of a Python force group's ``method`` (``force`` through
        ``fg._force_fn``): a float64 array of ``shape`` (anything else is converted,
        or refused with the type and method named)."""
        try:
            out = (fg._force_fn if method == "force" else getattr(fg.ftype, method))(*args)
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

        Per force group: the compiled kernel of ``mbcore._ext._forces``
        (``JAC_KERNELS``) on the compiled backend, else the type's NumPy reference
        ``force_jacobian(par, qb, qdb, t, f) -> (K, C)`` with blocks
        (ne, nb, nc, nb, nc) (planar: the force elements of Nikravesh (1988), §9.2;
        spatial Euler-parameter form ``[f, 2 G^T n]``: Eqs. 11.1-11.7), else forward differences
        of that group's own forces (``user_force``, third-party types),
        vectorised over the group's elements (nb x nc force calls).  Blocks on the
        ground (and the padding of particles) are dropped."""
        if getattr(self, "_fj", None) is None:
            self._fj_setup()
        fj = self._fj
        fv = self.functions_at(t)
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
                self._element_failed(fg, e, _reason_of(fg, e), t)
        if fj["python"]:
            self._load(q)
            self._load_qd(qd)
            for fg, sl, mode in fj["python"]:
                args = (fg.par, self._qx[fg._cidx], self._qdx[fg._cidx], t,
                        fv[fg.fidx] if fg.ftype.n_fun else fg._fv0)
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

    def _fd_force_blocks(self, fg: "ForceGroup", par, qb, qdb, t, f):
        """Forward differences of one group's forces in its elements' coordinates:
        (K, C) blocks (ne, nb, nc, nb, nc), all elements at once per column."""
        ne, nb, nc = fg._shape
        qb = np.array(qb, dtype=float)
        qdb = np.array(qdb, dtype=float)
        g0 = self._force_call(fg, "force", (par, qb, qdb, t, f), fg._shape, t).copy()
        K = np.zeros((ne, nb, nc, nb, nc))
        C = np.zeros((ne, nb, nc, nb, nc))
        for X, J in ((qb, K), (qdb, C)):
            for b in range(nb):
                for c in range(nc):
                    x0 = X[:, b, c].copy()
                    d = self.FD_STEP * (1.0 + np.abs(x0))
                    X[:, b, c] = x0 + d
                    g = self._force_call(fg, "force", (par, qb, qdb, t, f), fg._shape, t)
                    J[:, :, :, b, c] = (g - g0) / d[:, None, None]
                    X[:, b, c] = x0
        return K, C

    def _fj_setup(self) -> None:
        """How each force group's Jacobian blocks are computed, their place in the
        flat block buffers (compiled groups first, written by the evaluator) and
        the scatter indices (ground/padding dropped, particles folded)."""
        from ..elements.base import ForceType
        comp, py, order = [], [], []
        jk = {}
        if self.backend == "compiled" and self._force_evaluator is not None:
            from .._ext import _forces
            jk = getattr(_forces, "JAC_KERNELS", {})
        for fg in self.force_groups:
            if fg.compiled and (fg.ckernel.has_jacobian if fg.ckernel is not None
                                else fg.ftype.kernel in jk):
                comp.append(fg)
        comp_ids = {id(fg) for fg in comp}
        for fg in self.force_groups:
            if id(fg) in comp_ids:
                continue
            has_ref = type(fg.ftype).force_jacobian is not ForceType.force_jacobian
            py.append((fg, "reference" if has_ref else "fd"))
        rows, cols, pos, python = [], [], 0, []
        for fg in comp + [g for g, _ in py]:
            ne, nb, nc = fg._shape
            nl = nb * nc
            ridx = self._colmap[fg._cidx.reshape(ne, nl)]
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
                self.n_ext if self.padded else self.n, [_kernel_group(fg) for fg in comp])
        lin = (rows[keep] * n + cols[keep]).astype(np.intp)
        # sparse: the CSR pattern of the blocks and each entry's data position
        # (duplicates summed by bincount)
        uniq, where = np.unique(lin, return_inverse=True)
        ptr = np.searchsorted(uniq // max(n, 1), np.arange(n + 1)).astype(np.int32)
        csr = (where.astype(np.intp), uniq.size, (uniq % max(n, 1)).astype(np.int32), ptr)
        self._fj = dict(eval=ev, compiled=comp, python=python, K=np.zeros(pos),
                        C=np.zeros(pos), keep=None if keep.all() else np.nonzero(keep)[0],
                        lin=lin, csr=csr)

    def force_jacobian_kernels(self) -> tuple | None:
        """``(evaluator, pos, boffs)`` for a compiled right-hand side's analytic force
        Jacobian when every force group has a compiled force-Jacobian kernel, else
        None: the ``ForceJacobianEvaluator`` (None without forces), the position in
        the dense n x n matrix of each entry of its block buffer (-1: a ground or
        padding entry) and the body offsets of each compiled force group."""
        if getattr(self, "_fj", None) is None:
            self._fj_setup()
        fj = self._fj
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
        if getattr(self, "_fj", None) is None:
            self._fj_setup()
        out = {fg.ftype.name: "compiled" for fg in self._fj["compiled"]}
        out.update({fg.ftype.name: m for fg, _, m in self._fj["python"]})
        return out

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

    def potential_energy(self, q: np.ndarray, t: float = 0.0) -> float:
        """V = -sum m_i g . r_i (gravity) + the potential of every conservative part
        of the force elements (spring energies, Nikravesh (1988), Eqs. 14.10-14.12)."""
        V = -float(np.dot(self._q_gravity, q))
        if self.force_groups:
            fv = self.functions_at(t)
            self._load(q)
            for fg in self.force_groups:
                V += float(np.sum(self._force_call(fg, "energy", (
                    fg.par, self._qx[fg._cidx], t, fv[fg.fidx]), (len(fg.names),), t)))
        return V

    def nonconservative_power(self, q: np.ndarray, qd: np.ndarray, t: float,
                              compiled: bool = False) -> float:
        """Power of every non-conservative force part (dampers, actuators, applied
        forces): the rate of the work that changes T + V.  ``compiled=True``: the
        compiled groups' power from their kernels (equal to the references to
        1e-12; used by the DAE Jacobians' work row)."""
        if not self.force_groups:
            return 0.0
        fv = self.functions_at(t)
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
            fg.par, self._qx[fg._cidx], self._qdx[fg._cidx], t, fv[fg.fidx]),
            (len(fg.names),), t)) for fg in groups))

    def force_outputs(self, q: np.ndarray, qd: np.ndarray, t: float) -> np.ndarray:
        """Element quantities of every force element (labels :attr:`force_labels`),
        e.g. a spring-damper's length, rate and forces."""
        fv = self.functions_at(t)
        self._load(q)
        self._load_qd(qd)
        out = [self._force_call(fg, "outputs", (fg.par, self._qx[fg._cidx],
                                                self._qdx[fg._cidx], t, fv[fg.fidx]),
                                (len(fg.names), len(fg.ftype.labels)), t).ravel()
               for fg in self.force_groups]
        return np.concatenate(out) if out else np.zeros(0)

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
            blocks = data[g._jblk]                      # (ne, m, nb, ncol)
            lam_g = lam[g._lrows]                       # (ne, m)
            if g.m == 1:
                gen = blocks[:, 0] * lam_g[:, 0, None, None]
            else:                  # sum over the element's equations (einsum is slower)
                gen = (blocks * lam_g[:, :, None, None]).sum(axis=1)
            if g.kind == "spatial":
                # Euler-parameter generalised force n* -> global moment n = G n* / 2
                # (Nikravesh (1988), Eq. 11.4)
                from ..elements.rotations import G as Gmat
                self._load(q)
                p = self._qx[g._cidx_all][..., 3:7]
                n = 0.5 * np.einsum("ebkl,ebl->ebk", Gmat(p), gen[..., 3:7])
                gen = np.concatenate([gen[..., :3], n], axis=-1)
            self._reactions[g._roff] = gen
        return self._reactions

    def reactions_local(self, q: np.ndarray, t: float, lam: np.ndarray) -> np.ndarray:
        """Joint-local reaction components of every element (a revolute's force in
        body-i axes, a link's tension, a driver's effort...; labels
        :attr:`local_reaction_labels`, meanings in docs/constraints.md)."""
        fv = self.functions_at(t)
        self._load(q)
        parts = []
        for g in self._element_groups:
            if not g.ctype.local_labels:
                continue
            loc = np.asarray(g.ctype.reaction_local(g.par, self._qx[g._cidx_all], t,
                                                    fv[g.fidx], lam[g._lrows],
                                                    **self._xkw(g)), dtype=float)
            if loc.shape != (g.ne, len(g.ctype.local_labels)):
                raise PluginError(f"constraint type '{g.ctype.name}'.reaction_local() "
                                  f"returned shape {loc.shape}, expected "
                                  f"{(g.ne, len(g.ctype.local_labels))}")
            parts.append(loc.ravel())
        if not parts:
            return np.zeros(0)
        return np.concatenate(parts)[self._local_perm]

    # ------------------------------------------------------------------ helpers
    def _load(self, q: np.ndarray) -> None:
        if getattr(q, "shape", None) != self._nshape and np.shape(q) != self._nshape:
            raise ValueError(f"q has shape {np.shape(q)}, the system has {self.n} coordinates")
        self._qx_head[...] = q
        if self.padded:                          # particles' padded blocks
            self._qx[self._pad_dst] = self._qx[self._pad_src]

    def _load_qd(self, qd: np.ndarray) -> None:
        self._qdx_head[...] = qd
        if self.padded:
            self._qdx[self._pad_dst] = self._qdx[self._pad_src]

    def _py_load(self, q) -> np.ndarray:
        """The extended buffer loaded with q (checked), for the Python groups."""
        self._load(q)
        return self._qx

    def _py_load_qd(self, qd) -> np.ndarray:
        """The extended buffer loaded with qd, its shape checked."""
        if getattr(qd, "shape", None) != self._nshape and np.shape(qd) != self._nshape:
            raise ValueError(f"qd has shape {np.shape(qd)}, the system has {self.n} "
                             f"coordinates")
        self._load_qd(qd)
        return self._qdx

    def _ev_q(self, q: np.ndarray) -> np.ndarray:
        """What the compiled evaluator reads: q itself, or the padded buffer."""
        if self.padded:
            self._load(q)
            return self._qx
        return q

    @staticmethod
    def _py_conform(g: Group, method: str, out, shape) -> np.ndarray:
        """The slow path of :meth:`_py_call`: a result that is not a float64 array of
        ``shape`` converted (or refused with the type and method named); ``shape``
        None: the block pair of a type with ``extra`` (:meth:`_x_jacobian`)."""
        if shape is None:
            return System._x_jacobian(g, out)
        out = np.asarray(out, dtype=float)
        if out.shape != shape:
            try:
                out = out.reshape(shape)
            except ValueError:
                raise PluginError(f"constraint type '{g.ctype.name}'.{method}() returned "
                                  f"shape {out.shape}, expected {shape}") from None
        return out

    def _xkw(self, g: Group, velocities: bool = False) -> dict:
        """Keyword arguments with the artificial coordinates (and their rates) of a
        group's elements, for types that declare ``extra`` (else empty)."""
        if not g.nx:
            return {}
        kw = {"qe": self._qx[g.xoff]}
        if velocities:
            kw["qde"] = self._qdx[g.xoff]
        return kw

    # -- what formulations, analyses and the Simulation read ------------------------
    def why_python(self, constraints: bool = True) -> str | None:
        """Why evaluations cannot run wholly in compiled code, or None.

        With ``constraints=False`` only the forces count (formulations with their
        own constraint kernels, e.g. joint coordinates)."""
        if self.backend != "compiled":
            return "kernels: numpy"
        if self.padded:
            return "particles (padded coordinate layout)"
        names = [fg.ftype.name for fg in self._py_force_groups]
        if constraints:
            names += [g.ctype.name for g in self._py_groups]
        if names:
            return "element types without compiled kernels: " + ", ".join(
                dict.fromkeys(names))
        return None

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
        return self._p_idx

    @property
    def r_index(self) -> np.ndarray:
        """Spatial models: the position coordinates of every body, flat (3 per body)."""
        return self._r_idx

    def body_offset(self, name: str) -> int:
        """The index of the first coordinate of body ``name``."""
        return self._boff[name]

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

    def initial_state(self, t: float = 0.0) -> State:
        """State from the bodies' initial estimates (not yet assembled)."""
        q = np.zeros(self.n)
        qd = np.zeros(self.n)
        for k, b in enumerate(self.model.bodies):
            o = int(self.body_offsets[k])
            if self.body_kinds[k].pad:          # a particle: position and velocity
                nq = self.body_kinds[k].nq
                q[o:o + nq] = b.position
                qd[o:o + nq] = b.velocity
            elif self.body_kinds[k].name == "spatial":
                from ..elements.rotations import G as Gmat
                p = np.asarray(b.orientation, dtype=float)
                q[o:o + 7] = (*b.position, *p)
                qd[o:o + 3] = b.velocity
                qd[o + 3:o + 7] = 0.5 * Gmat(p).T @ np.asarray(b.angular_velocity, float)
            else:
                q[o:o + 3] = (b.position[0], b.position[1], b.angle)
                qd[o:o + 3] = (b.velocity[0], b.velocity[1], b.angular_velocity)
        q[self.n_body:] = self._extra0
        return State(t=t, q=q, qd=qd, qdd=np.zeros(self.n), lam=np.zeros(self.m))

    def coordinate_index(self, name: str) -> int:
        try:
            return self.coordinate_names.index(name)
        except ValueError:
            raise KeyError(f"no coordinate '{name}'") from None

    def point_kinematics(self, q, qd, qdd) -> np.ndarray:
        """Position, velocity and acceleration of every named point, (np, 6):
        ``x, y, xd, yd, xdd, ydd`` (Nikravesh (1988), Eqs. 4.1, 4.43-4.45; the "points of
        interest" of the book's KAP program, subroutine REPORT).
        Returns a work buffer."""
        npt = len(self.point_names)
        if not npt:
            return np.zeros((0, 6))
        if self.padded:          # points of particles: read their padded blocks
            if not hasattr(self, "_pk_ext"):
                self._pk_ext = np.zeros((3, self.n_ext))
                self._pk_ext[0] = self._qx
            ext = self._pk_ext
            for k, x in enumerate((q, qd, qdd)):
                ext[k, :self.n] = x
                ext[k, self._pad_dst] = ext[k, self._pad_src]
            q, qd, qdd = ext[0], ext[1], ext[2]
        if self.spatial:
            return self._point_kinematics_spatial(q, qd, qdd)
        if not hasattr(self, "_pk"):
            self._pk = np.zeros((3, len(q) + 3))
            self._pk_out = np.zeros((npt, 6))
            self._pk_c = None
            if self.backend == "compiled":
                from .._ext._kinematics import point_kinematics
                self._pk_c = point_kinematics
                self._pt_off = np.ascontiguousarray(self._pt_off, dtype=np.intp)
                self._pt_loc = np.ascontiguousarray(self._pt_loc)
        if self._pk_c is not None:
            self._pk_c(q, qd, qdd, self._pt_off, self._pt_loc, self._pk_out)
            return self._pk_out
        pk, out, o = self._pk, self._pk_out, self._pt_off
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
        if not hasattr(self, "_ang_out"):
            self._ang_out = np.zeros((len(idx), 6))
            self._ang_c = None
            if self.backend == "compiled":
                from .._ext._kinematics import angular_kinematics
                self._ang_c = angular_kinematics
        out = self._ang_out
        if self._ang_c is not None:
            self._ang_c(q, qd, qdd, idx, out)
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
        if not hasattr(self, "_pks_out"):
            self._pks_out = np.zeros((len(self._pt_off), 9))
            self._pks_c = None
            self._pks = np.zeros((3, nq + 10))
            self._pks[0, self.n + 3:self.n + 10] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
            # points of the ground read the spatial ground block
            self._pks_off = np.ascontiguousarray(
                np.where(self._pt_off == self.n, self.n + 3, self._pt_off), dtype=np.intp)
            if self.backend == "compiled":
                from .._ext._kinematics import point_kinematics_spatial
                self._pks_c = point_kinematics_spatial
                self._pt_loc = np.ascontiguousarray(self._pt_loc)
                self._pt_off = np.ascontiguousarray(self._pt_off, dtype=np.intp)
        if self._pks_c is not None:
            self._pks_c(q, qd, qdd, self._pks_off if self.padded else self._pt_off,
                        self._pt_loc, self._pks_out)
            return self._pks_out
        from ..elements.rotations import G as Gmat, L as Lmat
        ext = self._pks
        ext[0, :nq], ext[1, :nq], ext[2, :nq] = q, qd, qdd
        if self.padded:
            ext[0, self.n + 3:self.n + 10] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
        o = self._pks_off
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
        out = self._pks_out
        out[:, 0:3] = r + np.einsum("pkm,pm->pk", A, s)
        out[:, 3:6] = rd + np.einsum("pkm,pm->pk", Ad, s)
        out[:, 6:9] = rdd + np.einsum("pkm,pm->pk", Add, s)
        return out

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


def _short(key: str) -> str:
    """Body parameter key -> label part: body_i -> i, body_j -> j, body -> body."""
    return key[5:] if key.startswith("body_") else key


def _unique_ints(a: np.ndarray) -> np.ndarray:
    """``np.unique`` of an integer array (sorted, distinct), without numpy.ma, which
    np.unique imports on its first call (~35 ms of start-up time)."""
    a = np.sort(a, kind="stable")
    if a.size > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


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
