"""SystemModel: the immutable compiled part of a System.

Built once by :class:`mbcore.system.System` from a Model: the coordinate layout, the
constraint and force elements packed by type into groups, the mass and gravity
data, the Jacobian sparsity pattern, the compiled evaluators (kernels) and the
index maps of the output stages.  It holds no work buffers and no evaluation
state: those are the :class:`mbcore.system.data.SystemData` of a run (MuJoCo's
mjModel/mjData split; Pinocchio's Model/Data).

Packed parameters are shared with the compiled evaluators; a type may keep state
in them (the rotation driver's tracked angle), a Simulation its parameters.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..elements.base import PackContext
from ..plugins.contract import holonomic_rows
from ..errors import ModelError, PluginError
from .backend import (BACKENDS, DENSE_LIMIT, compiled_available, constraint_evaluator,
                      default_backend, force_evaluator)
from .frames import centroidal_model
from .groups import ForceGroup, Group, pack_element, unique_ints
from .output_maps import point_maps, reaction_maps

__all__ = ["SystemModel"]

class SystemModel:
    """A Model compiled for evaluation, immutable (see module docstring).

    Compilation is a sequence of named steps, each filling its own attributes:
    ``_layout_coordinates`` (bodies -> coordinates, by body kind) ->
    ``_pack_constraints`` (elements -> groups and rows) -> ``_pack_forces`` ->
    ``_mass_and_gravity`` -> ``_jacobian_pattern`` (rows, columns, data positions)
    -> ``_kernels`` (compiled evaluators) -> ``_python_tier`` -> ``_reaction_maps``
    -> ``_points``.
    """

    def __init__(self, model, registry, kernels: str | None = None,
                 jacobian: str = "auto", dense_limit: int | None = None):
        # bodies whose reference frame is not at the centroid: compiled from the
        # centroidal equivalent (mbcore.system.frames; the same object otherwise)
        self.model = model = centroidal_model(model, registry)
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
        functions: list[Any] = []
        self._layout_coordinates(model, registry)
        order, by_type = self._pack_constraints(model, registry, functions)
        self._pack_forces(model, registry, functions)
        self._mass_and_gravity(model)
        #: the time functions of every element, in function-table order
        self.functions = functions
        size, n_ground = self._jacobian_pattern(order, by_type, jacobian, dense_limit)
        #: entries of Phi_q's data (m*n dense, nnz sparse); then the ground entries
        self.jacobian_size = size
        self.jacobian_slots = size + n_ground
        self._kernels()
        self._python_tier()
        reaction_maps(self, model)
        point_maps(self, model)

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
        self.initial_extra = np.zeros(self.n_extra)
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
        self.pad_src = np.array(src, dtype=np.intp)
        self.pad_dst = np.array(dst, dtype=np.intp)
        self.pad_const = const
        self.colmap = np.arange(off, dtype=np.intp)
        self.colmap[n:] = n                    # ground and padding: constants
        self.colmap[self.pad_dst] = self.pad_src

    def _body_offset(self, name: str, kind: str) -> int:
        return self._ground_off[kind] if name == self.model.ground else self._boff[name]

    def _check_kind(self, cls, el, kind: str) -> None:
        """An element's bodies must be of the kind its type works on."""
        for key in cls.bodies:
            value = el.values.get(key)
            listed = key == getattr(cls, "body_list", None)
            for i, name in enumerate(value if listed else (value,)):
                if name is None or name == self.model.ground:
                    continue
                bk = self.body_kinds[self.body_index[name]]
                if bk.elements != kind:
                    kp = f"{el.path}.{key}[{i}]" if listed else f"{el.path}.{key}"
                    raise ModelError(kp, f"{cls.name} works on {kind} bodies; "
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
            par, fidx = pack_element(ct, el, model, functions, "constraint")
            bodies = [el.values[b] for b in cls.bodies]
            if cls.extra:
                x0 = np.asarray(ct.initial_extra(el.values, PackContext(model, el.path)),
                                dtype=float).ravel()
                if x0.size != len(cls.extra):
                    raise PluginError(f"constraint type '{el.type}': initial_extra() returned "
                                      f"{x0.size} values for {len(cls.extra)} coordinates")
                self.initial_extra[np.array(self._xoff[el.name]) - self.n_body] = x0
            by_type[el.type].append((el.name, el.path, ct, par, fidx, bodies, row))
            labels = ct.equation_labels()
            self.constraint_names += [f"{el.name}.{lab}" for lab in labels]
            holo_rows.extend(holonomic_rows(ct))
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
            same = next((g for g in self.force_groups if g.ftype.name == el.type), None)
            ft = cls() if same is None else same.ftype  # one instance per type and System
            # a body-list type: every element is a group of its own (its bodies and
            # parameters vary in number, ForceType.body_list)
            blist = getattr(cls, "body_list", None)
            fg = None if blist else same
            par, fidx = pack_element(ft, el, model, functions, "force")
            names = [el.values[b] for b in cls.bodies if b != blist]
            if blist:
                for i, name in enumerate(el.values[blist]):
                    if name in names:
                        raise ModelError(f"{el.path}.{blist}[{i}]", f"body '{name}' is "
                                         f"also a fixed body of the element")
                names += list(el.values[blist])
            boff = [self._body_offset(b, kind) for b in names]
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
            nbk, ne = len(fg.boff[0]), len(fg.names)
            ncol = KINDS[getattr(fg.ftype, "body_kind", "planar")].nq
            fg.boff = np.array(fg.boff, dtype=np.intp).reshape(ne, nbk)
            fg.par = np.array(fg.par, dtype=float).reshape(ne, -1)
            fg.fidx = np.array(fg.fidx, dtype=np.intp).reshape(ne, fg.ftype.n_fun)
            fg.gather = fg.boff[:, :, None] + np.arange(ncol)
            fg.gather_flat = fg.gather.reshape(-1)
            # ground slots [n, n + 10) are dropped; padded particle slots (>= n + 10)
            # are folded onto the particle's coordinates: both count for repeats
            real = fg.gather_flat[(fg.gather_flat < self.n) | (fg.gather_flat >= self.n + 10)]
            fg.unique = len(unique_ints(real)) == real.size
            fg.direct = fg.unique and bool(np.all(fg.gather_flat < self.n))
            c0 = int(fg.gather_flat[0]) if fg.gather_flat.size else 0
            # a run of consecutive coordinates (e.g. one body): a slice, not a fancy index
            fg.gather_slice = slice(c0, c0 + fg.gather_flat.size) if fg.direct and np.array_equal(
                fg.gather_flat, np.arange(c0, c0 + fg.gather_flat.size)) else fg.gather_flat
            fg.fv0 = np.zeros((ne, 0, 3))
            fg.force_fn = fg.ftype.force
            fg.shape = (ne, nbk, ncol)
        self.force_labels = [f"{name}.{lab}" for fg in self.force_groups
                             for name in fg.names for lab in fg.ftype.labels]

    def _mass_and_gravity(self, model) -> None:
        """Mass (Nikravesh (1988), Eqs. 9.2-9.3; spatial: Eqs. 11.10-11.16, Formulation I) and the
        gravity forces (Nikravesh (1988), Eq. 9.9a; centroidal body frames)."""
        n = self.n
        self.gravity = np.array(model.gravity, dtype=float)
        #: generalized gravity forces (the initial constant forces of a SystemData)
        self.gravity_forces = np.zeros(n)
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
                self.gravity_forces[o + k] = self.mass_diag[o + k] * self.gravity[k]
            self.mass_weights[:] = self.mass_diag
        else:
            # M(q) depends on p (J* = 4 L^T J' L): no diagonal mass matrix
            self.mass_diag = None
            self.body_mass = np.array([b.mass for b in model.bodies], dtype=float)
            rs = self.rigid_spatial                # particles: r only
            self.body_inertia = np.array([model.bodies[k].inertia for k in rs],
                                         dtype=float).reshape(len(rs), 3, 3)
            o = self.body_offsets
            self.r_index = (o[:, None] + np.arange(3)).reshape(-1)      # every r
            self.p_index = (o[rs][:, None] + 3 + np.arange(4))          # (rigid, 4)
            self.gravity_forces[self.r_index] = (self.body_mass[:, None] * self.gravity).reshape(-1)
            self.mass_weights[self.r_index] = np.repeat(self.body_mass, 3)
            # a rotation by d(theta) moves p by d(theta)/2: weight 4 J
            jw = 4.0 * np.trace(self.body_inertia, axis1=1, axis2=2) / 3.0
            self.mass_weights[self.p_index.reshape(-1)] = np.repeat(jw, 4)

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
            c_ = self.colmap[boff[:, None, :, None] + np.arange(ncol)[None, None, None, :]]
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
        key = unique_ints(R[real] * max(self.n, 1) + C[real])
        self.csr_rows = key // max(self.n, 1)
        self.csr_cols = key % max(self.n, 1)
        self.nnz = len(key)
        indptr = np.zeros(self.m + 1, dtype=np.intp)
        np.add.at(indptr, self.csr_rows + 1, 1)
        self.indptr = np.cumsum(indptr)
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
            g.pyoff = np.where(boff == self.n, self._ground_off[kind], boff)
            self.groups.append(g)
        return size, n_ground


    def _kernels(self) -> None:
        """The compiled evaluators of the groups that have kernels (compiled backend:
        :mod:`mbcore.system.backend`); the other groups are evaluated in Python."""
        self.constraint_evaluator = self.force_evaluator = None
        if self.backend == "compiled":
            n = self.n_ext if self.padded else self.n
            self.constraint_evaluator = constraint_evaluator(
                self.groups, n, self.padded, self.constraint_failed, self.registry)
            self.force_evaluator = force_evaluator(self.force_groups, n, self.registry)
        self.compiled_groups = [g for g in self.groups if g.compiled]
        self.python_groups = [g for g in self.groups if not g.compiled]
        self.compiled_force_groups = [g for g in self.force_groups if g.compiled]
        self.python_force_groups = [g for g in self.force_groups if not g.compiled]

    def _python_tier(self) -> None:
        """Gather/scatter indices and shapes of the groups evaluated in Python
        (Python-only plugin types; every group on the NumPy backend), computed once
        (``python_plugin_framework_overhead`` in benchmarks/run.py)."""
        n = self.n
        self.python_forces_direct = all(fg.direct for fg in self.python_force_groups)
        for g in self.python_groups:      # precomputed gather/scatter indices and shapes
            g.row_slots = g.rows()
            if g.row_slots.size and np.array_equal(g.row_slots, np.arange(g.row_slots[0],
                                                                  g.row_slots[0] + g.row_slots.size)):
                g.row_slots = slice(int(g.row_slots[0]), int(g.row_slots[0]) + g.row_slots.size)
            g.gather = g.cidx()
            g.fv0 = np.zeros((g.ne, 0, 3))
            g.shape_rows = (g.ne, g.m)
            g.shape_jac = (g.ne, g.m, len(g.ctype.bodies), g.ncol)
        #: the Python groups gather from q itself (no ground slot, padding or
        #: artificial coordinate read)
        self.python_direct = not self.padded and all(
            not g.nx and (g.gather.size == 0 or int(g.gather.max()) < n)
            for g in self.python_groups)

    def constraint_failed(self, k: int, e: int, t: float) -> None:
        """The compiled constraint evaluator's report: the plugin kernel of compiled
        group k refused element e at time t (raises the named error)."""
        from ..errors import AnalysisError
        g = self.compiled_groups[k]
        src = g.ckernel.source if g.ckernel is not None else f"kernel {g.ctype.kernel!r}"
        if g.ckernel is None or not 0 <= e < g.ne:
            raise PluginError(f"constraint type '{g.ctype.name}': compiled kernel {src} "
                              f"returned element index {e}, the group has {g.ne} elements")
        raise AnalysisError(f"constraint element '{g.names[e]}' ({g.paths[e]}, "
                            f"{g.ctype.name}): {g.ckernel.reason}", t)

    def why_python(self, constraints: bool = True) -> str | None:
        """Why evaluations cannot run wholly in compiled code, or None.

        With ``constraints=False`` only the forces count (formulations with their
        own constraint kernels, e.g. joint coordinates)."""
        if self.backend != "compiled":
            return "kernels: numpy"
        if self.padded:
            return "particles (padded coordinate layout)"
        names = [fg.ftype.name for fg in self.python_force_groups]
        if constraints:
            names += [g.ctype.name for g in self.python_groups]
        if names:
            return "element types without compiled kernels: " + ", ".join(
                dict.fromkeys(names))
        return None

    def body_offset(self, name: str) -> int:
        """The index of the first coordinate of body ``name``."""
        return self._boff[name]
