"""Element contracts: what a constraint (joint/driver) or force type provides.

The *reference* ("slow path") methods are vectorised over all elements of one type
(a *group*), so a Python-only plugin type costs one Python call per group, never
one per element.  Built-in types additionally name a compiled ``kernel`` that
computes exactly the same numbers (tests keep them equal to 1e-12); a third-party
type may name its own compiled kernel through ``ForceType.c_kernel`` or
``ConstraintType.c_kernel`` (the compiled plugin tier, ``mbcore_plugin.h``).

Array conventions for a group of ``ne`` elements touching ``nb`` bodies each:

* ``par``  (ne, n_par)  float64 — packed parameters (from :meth:`ConstraintType.pack`)
* ``qb``   (ne, nb, 3)  coordinates ``[x, y, phi]`` of each element's bodies (ground: 0)
* ``qdb``  (ne, nb, 3)  their velocities
* ``f``    (ne, n_fun, 3) time-function jets ``(c, c', c'')`` at time t
* returns: phi/nu/gamma (ne, m); jacobian (ne, m, nb, 3) = d phi_r / d q_(body b, coord c)

Constraint equations follow Nikravesh (1988), §3.2.2, Eqs. 3.12-3.17: ``Phi(q, t) = 0``,
``Phi_q qd = nu`` with ``nu = -Phi_t``, ``Phi_q qdd = gamma``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, NamedTuple, Sequence

import numpy as np

from ..errors import ModelError
from ..plugins.contract import CONTRACT_VERSION
from .schema import Param


@dataclass
class PackContext:
    """Passed to :meth:`ConstraintType.pack`: read-only access to the model."""

    model: Any        # mbcore.model.Model
    path: str         # key path of the element, e.g. "joints[2]"

    def body(self, name: str):
        return self.model.body(name)

    def initial(self, name: str) -> np.ndarray:
        """Initial estimate of a body's coordinates: ``[x, y, phi]`` of a planar body
        (zeros for the ground of a planar model), ``[x, y, z, e0, e1, e2, e3]`` of a
        spatial body (ground: ``[0, 0, 0, 1, 0, 0, 0]``)."""
        if name == self.model.ground:
            if getattr(self.model, "dimensions", 2) == 3:
                return np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
            return np.zeros(3)
        b = self.model.body(name)
        if getattr(b, "kind", "planar") == "spatial":
            return np.array([*b.position, *b.orientation], dtype=float)
        if getattr(self.model, "dimensions", 2) == 3:        # particle3: no rotation
            return np.array([*b.position, 1.0, 0.0, 0.0, 0.0], dtype=float)
        return np.array([b.position[0], b.position[1], b.angle], dtype=float)

    def pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Initial position r (3,) and rotation matrix A (3, 3) of a spatial body
        (ground: 0 and I), for types that accept global points/axes at assembly."""
        from .rotations import A
        q = self.initial(name)
        return q[:3].copy(), A(q[3:7])


def frame_points(etype: Any, spec: Mapping[str, Any],
                 shift: Callable[[str], np.ndarray | None], path: str) -> dict[str, Any]:
    """The default of the ``frame_shift`` hook of element types (a body's reference
    frame away from its centroid, Nikravesh (1988), Problem 9.4): every point
    parameter (kind ``vec2``/``vec3`` with ``on``) on a body whose centroid is at
    ``s_C = shift(body)`` in its reference frame becomes ``s' - s_C``, returned as
    model-file data ``{key: [numbers]}``; directions (no ``on``) do not move.  A
    key of :attr:`frame_fixed` on such a body cannot be moved: ModelError naming
    it."""
    out: dict[str, Any] = {}
    for key, bkeys in getattr(etype, "frame_fixed", {}).items():
        bodies: list = []
        for bkey in (bkeys,) if isinstance(bkeys, str) else bkeys:
            v = spec.get(bkey)
            bodies += list(v) if isinstance(v, (list, tuple)) else [v]
        for b in bodies:
            if b is not None and shift(b) is not None and spec.get(key) is not None:
                raise ModelError(f"{path}.{key}", f"{etype.name} cannot be used with body "
                                 f"'{b}', whose reference frame is not at its centre of "
                                 f"mass (center_of_mass): {key} depends on the body's "
                                 f"centroidal coordinates")
    for key, p in etype.params.items():
        if p.kind not in ("vec2", "vec3") or not p.on:
            continue
        v, s = spec.get(key), shift(spec.get(p.on)) if spec.get(p.on) is not None else None
        if v is not None and s is not None:
            out[key] = [float(x) for x in np.asarray(v, dtype=float) - s]
    return out


class Sketch(NamedTuple):
    """A picture of an element, drawn with the mechanism by
    :mod:`mbcore.results.plotting` (returned by :meth:`ConstraintType.sketch`).

    ``points`` (n, 2) are in the coordinates of ``body`` (the ground's: global) and
    move with it.  ``kind``: ``"curve"`` (an open or closed polyline, e.g. a cam
    outline), ``"circle"`` (a closed polyline, e.g. a pitch circle), ``"segment"``
    (a straight line) or ``"slot"`` (a groove along its polyline).  A
    ``"segment"`` or ``"slot"`` with ``follow = (body, point)`` is a straight
    line through its two points whose drawn extent is the travel of that point of
    another body along it, as seen in the result (a slider's guide, a pin's slot),
    the point being at the signed distance ``offset`` from the line (positive on
    the left of its direction; 0: on it) while it follows it; ``style`` is a
    drawing hint (``"cam"``, ``"pitch"``, ``"guide"``, ``"slot"``)."""

    body: str
    kind: str
    points: np.ndarray
    style: str = ""
    follow: tuple[str, tuple[float, float]] | None = None
    offset: float = 0.0


def _kernel_choice(cls: type) -> None:
    """A subclass that sets ``kernel`` itself (e.g. ``kernel = None``: its Python
    methods run) and not ``c_kernel`` does not inherit its base's ``c_kernel``:
    the kernel it chose is the one that applies."""
    if "kernel" in vars(cls) and "c_kernel" not in vars(cls):
        cls.c_kernel = None


class ConstraintType:
    """Base class of constraint types (joints, absolute constraints, drivers).

    Rules for implementers:

    1. ``name``: the model-file type name; ``equations``: rows per element;
       ``bodies``: the parameter keys naming the bodies (order = ``qb`` axis 1);
       ``params``: the parameter schema (keys other than ``name``/``type``).
    2. ``pack(spec, ctx)`` turns one validated element description into
       ``(par, functions)``: ``n_par`` floats and ``n_fun`` time functions.
    3. ``phi``, ``jacobian``, ``nu``, ``gamma`` implement Nikravesh (1988), Eqs. 3.12-3.17 for a
       whole group (see the module docstring for shapes).  They must not depend
       on anything but their arguments.
    4. ``c_kernel`` (optional): the type's compiled kernel (see :attr:`c_kernel`),
       computing the same function from the same packed parameters; ``kernel`` its
       name (a type that sets only ``kernel`` runs the kernel of the registered type
       that declares that name, e.g. its own Python class around a built-in kernel).
    5. ``labels``: one suffix per equation for naming rows (``joint.x``).
    """

    name: ClassVar[str] = ""
    #: plugin contract version this type was built for (mbcore.plugins.contract)
    contract: ClassVar[tuple[int, int]] = CONTRACT_VERSION
    equations: ClassVar[int] = 0
    bodies: ClassVar[tuple[str, ...]] = ("body_i", "body_j")
    params: ClassVar[Mapping[str, Param]] = {}
    n_par: ClassVar[int] = 0
    n_fun: ClassVar[int] = 0
    kernel: ClassVar[str | None] = None
    #: The compiled plugin tier (docs/plugins.md "Compiled tier"): the type's C
    #: kernel, ``"package.module:attribute"`` naming a PyCapsule
    #: ``"mbcore.constraint_kernel"`` (or that capsule object itself) that wraps a
    #: ``mbcore_constraint_kernel`` of ``mbcore_plugin.h`` (``mbcore.get_include()``).
    #: On the compiled backend the System checks it against this declaration
    #: (:func:`mbcore.plugins.compiled.load_constraint_kernel`) and calls it from the
    #: compiled assembly, right-hand sides, kinematic step and loops; the Python
    #: methods remain the reference (backend ``"numpy"``) and provide
    #: ``reaction_local``.  With ``extra`` coordinates: the direct layout of ABI v2.
    c_kernel: ClassVar[Any] = None
    labels: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _kernel_choice(cls)
    category: ClassVar[str] = "joint"      # "joint" | "driver" | "constraint"
    description: ClassVar[str] = ""
    #: names of artificial coordinates each element adds (e.g. ("theta",) for a cam
    #: or a pin in a curved slot, Nikravesh (1988), §4.2.5); they follow the bodies' coordinates
    #: in q, are massless, and reach the reference methods as keyword arguments
    #: ``qe`` (ne, nx) (and ``qde`` in gamma); ``jacobian`` then returns a pair
    #: ``(blocks (ne, m, nb, 3), extra (ne, m, nx))``.
    extra: ClassVar[tuple[str, ...]] = ()
    #: False for velocity-level (nonholonomic) constraints such as a knife edge
    #: (Nikravesh (1988), Prob. 4.24(b)): no position equation (``phi`` returns 0), the
    #: Jacobian row acts on velocities, ``nu`` and ``gamma`` as usual.  A tuple of
    #: ``equations`` booleans mixes them in one element (a rolling wheel: its contact
    #: height a position equation, its no-slip rows velocity equations; ``phi``
    #: returns 0 in the velocity rows; mbcore.plugins.contract.holonomic_rows).
    holonomic: ClassVar[bool | tuple[bool, ...]] = True
    #: spatial types: per equation, the translation columns (0, 1, 2: x, y, z of a
    #: body's r) its Jacobian row can touch, the same for every body of the element
    #: (a spherical joint's ``Phi_r = [I, -I]``: ``((0,), (1,), (2,))``); None: any.
    #: The equations of motion leave the others out of the sparse Schur pattern
    #: (``SpatialMass.nonzero_entries``, which checks them at sample states).
    r_columns: ClassVar[tuple[tuple[int, ...], ...] | None] = None
    #: the body kind this type works on (:mod:`mbcore.elements.bodykinds`): "planar" (the
    #: default: blocks ``(ne, nb, 3)``) or "spatial" (see :class:`SpatialConstraintType`)
    body_kind: ClassVar[str] = "planar"

    # -- model time ------------------------------------------------------------
    def check(self, spec: dict[str, Any], path: str) -> None:
        """Extra validation beyond the schema (raise ModelError naming the key)."""

    def pack(self, spec: dict[str, Any], ctx: PackContext) -> tuple[Sequence[float], Sequence[Any]]:
        raise NotImplementedError  # pragma: no cover - abstract

    def initial_extra(self, spec: dict[str, Any], ctx: PackContext) -> Sequence[float]:
        """Initial estimates of the artificial coordinates (default 0)."""
        return [0.0] * len(self.extra)

    #: parameter key -> the body parameter(s) whose reference frame it depends on,
    #: for geometry that :meth:`frame_shift` cannot move (a law on the centroidal
    #: coordinates): an element that has the key on a body with a
    #: ``center_of_mass`` is refused by name
    frame_fixed: ClassVar[Mapping[str, str | tuple[str, ...]]] = {}

    def frame_shift(self, spec: dict[str, Any], shift: Callable[[str], np.ndarray | None],
                    ctx: PackContext) -> dict[str, Any]:
        """Optional hook: the element's entries (model-file data, model units) in
        the centroidal frames, for bodies whose reference frame is not at their
        centre of mass (``shift(body)``: the centroid in the body's reference
        frame, None for a centroidal frame or the ground).  ``spec``: the validated
        values; ``ctx``: the model as written (``ctx.initial``: the reference
        frames' initial estimates).  Default (:func:`frame_points`): every point
        parameter on such a body moves by ``-s_C``; override for other body-local
        geometry (a cam's curve).  See docs/plugin-guide.md."""
        return frame_points(self, spec, shift, ctx.path)

    # -- drawing (optional) --------------------------------------------------------
    def sketch(self, spec: dict[str, Any], ctx: PackContext) -> list[Sketch]:
        """Optional: what the element looks like, as :class:`Sketch` es in body
        coordinates (a cam's outline, pitch circles, a slot), from the same
        validated ``spec`` and context as :meth:`pack`.  Animations and snapshots
        draw them moving with their bodies.  Default: nothing (the element shows
        only through its attachment points)."""
        return []

    # -- evaluation (reference / slow path) -------------------------------------
    def phi(self, par, qb, t, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def jacobian(self, par, qb, t, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def nu(self, par, qb, t, f):
        """Default: scleronomic (nu = 0)."""
        return np.zeros((par.shape[0], self.equations))

    def gamma(self, par, qb, qdb, t, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def equation_labels(self) -> tuple[str, ...]:
        if self.labels:
            return self.labels
        return tuple(str(k) for k in range(self.equations))

    # -- reactions (Nikravesh (1988), §9.3) ----------------------------------------
    #: names of the joint-local reaction components, e.g. ("normal", "torque")
    local_labels: ClassVar[tuple[str, ...]] = ()

    #: True when :meth:`reaction_local` treats every element independently (row e of
    #: the result depends on row e of its arguments only) and depends on time only
    #: through ``f``: the System may then evaluate it for a block of output rows in
    #: one call, the rows stacked as elements (:mod:`mbcore.system.output_rows`).
    #: False (the default): one call per output row.
    rows_stacked: ClassVar[bool] = False

    #: True when :meth:`reaction_local` also accepts the keyword ``gen`` (ne, nb, nc):
    #: each element's generalised reactions ``g_b = (Phi)_{q_b}^T lam`` on its bodies
    #: (Nikravesh (1988), Eq. 8.50) in the System's coordinates of the body (planar
    #: ``[x, y, phi]``, spatial ``[r, p]`` with the Euler-parameter columns of the
    #: System's Jacobian), which the output rows already have from the Jacobian
    #: evaluated at each row: the type then need not evaluate its Jacobian again.
    #: Without ``gen`` the method is the reference and must give the same values.
    reaction_local_gen: ClassVar[bool] = False

    def reaction_local(self, par, qb, t, f, lam):
        """Joint-local reaction components, (ne, len(local_labels)), from the
        multipliers ``lam`` (ne, m) in the convention of docs/conventions.md
        (reaction = +Phi_q^T lam).  E.g. a revolute's force in body-i axes, a
        translational joint's normal force and torque, a link's tension, a driver's
        effort.  The global per-body reactions need no code: the System computes
        them from the Jacobian blocks.  Types with ``extra`` coordinates also get
        ``qe``."""
        return np.zeros((par.shape[0], 0))

    # -- relative joint coordinates (the ``joints`` result channel, docs/results.md) --
    #: suffixes of the element's relative coordinates and their rates, e.g.
    #: ``("angle", "angle_rate")`` (labels ``joint.angle``, ``joint.angle_rate``);
    #: empty (the default): the type reports none
    relative_labels: ClassVar[tuple[str, ...]] = ()
    #: the columns of :meth:`relative` that are angles in (-pi, pi] (atan2
    #: values): the channel unwraps them continuously over the run
    relative_angles: ClassVar[tuple[int, ...]] = ()

    def relative_reference(self, par, qb0) -> np.ndarray:
        """What :meth:`relative` needs from the model's initial configuration (the
        bodies' given positions and orientations, before assembly), (ne, r):
        e.g. a revolute's reference direction on body j, the zero of its angle.
        ``qb0`` (ne, nb, nc) the bodies' coordinates there.  Evaluated once per
        run.  Default: nothing (r = 0)."""
        return np.zeros((par.shape[0], 0))

    def relative(self, par, qb, qdb, ref) -> np.ndarray:
        """The relative coordinates of each element and their rates, (ne,
        len(relative_labels)), vectorised over the group like :meth:`phi`: ``qb``,
        ``qdb`` the bodies' coordinates and velocities, ``ref`` the rows of
        :meth:`relative_reference`.  Each row must depend on that row of the
        arguments only (the channel evaluates many output rows in one call,
        stacked as elements).  Default: none."""
        return np.zeros((par.shape[0], len(self.relative_labels)))


class ForceType:
    """Base class of force element types (Nikravesh (1988), §9.2).

    Rules for implementers (same group conventions as :class:`ConstraintType`):

    1. ``name``, ``bodies`` (parameter keys naming the bodies it acts on),
       ``params`` (schema), ``n_par``, ``n_fun``, optional ``c_kernel`` (the type's
       compiled kernel, see :attr:`c_kernel`) and ``kernel`` its name (a type that
       sets only ``kernel`` runs the kernel of the registered type that declares
       that name).
    2. ``pack(spec, ctx)`` -> ``(par, functions)``.
    3. ``force(par, qb, qdb, t, f)`` -> (ne, nb, 3): the generalised force on each
       body, ``[f_x, f_y, n]`` in global components with the moment about the body
       origin (= centroid), Nikravesh (1988), Eq. 9.8.
    4. ``energy(par, qb, t, f)`` -> (ne,): potential energy of the conservative
       part (default 0: non-conservative).  The power an element injects is not
       a method: the System computes it as ``sum_b g_b . qd_b``.
    5. ``outputs(par, qb, qdb, t, f)`` -> (ne, len(labels)): element quantities
       reported with the results (e.g. a spring's length and force).
    6. Optional, a variable body list (:attr:`body_list`): one element acts on its
       fixed bodies and on every body of a list (e.g. many colliding spheres).
    """

    name: ClassVar[str] = ""
    #: plugin contract version this type was built for (mbcore.plugins.contract)
    contract: ClassVar[tuple[int, int]] = CONTRACT_VERSION
    bodies: ClassVar[tuple[str, ...]] = ("body",)
    #: A force element on a variable list of bodies: the key of a parameter of
    #: kind ``bodies`` (a list of body names), the last key of :attr:`bodies`.
    #: Each element of such a type is a group of its own: its body blocks are the
    #: fixed bodies followed by the listed ones (``qb`` (1, nb, nc), nb = fixed +
    #: list length) and ``pack`` may return more than ``n_par`` floats (``n_par``
    #: is then the fixed head; per-body data follow), so ``par`` is (1, npar).  A
    #: compiled kernel declares the fixed counts (``n_bodies`` = len(bodies) - 1,
    #: ``n_par``) and reads the element's own from ``G->nb``, ``G->npar``.  None
    #: (the default): every body key names one body.
    body_list: ClassVar[str | None] = None
    params: ClassVar[Mapping[str, Param]] = {}
    n_par: ClassVar[int] = 0
    n_fun: ClassVar[int] = 0
    kernel: ClassVar[str | None] = None
    #: The compiled plugin tier (docs/plugins.md "Compiled tier"): the type's C
    #: kernel, ``"package.module:attribute"`` naming a PyCapsule
    #: ``"mbcore.force_kernel"`` (or that capsule object itself) that wraps a
    #: ``mbcore_force_kernel`` of ``mbcore_plugin.h`` (``mbcore.get_include()``).
    #: On the compiled backend the System checks it against this declaration
    #: (:func:`mbcore.plugins.compiled.load_force_kernel`) and calls it from the
    #: compiled assembly, right-hand side and loops; the Python methods remain the
    #: reference (backend ``"numpy"``) and provide ``energy``/``outputs``.
    c_kernel: ClassVar[Any] = None
    labels: ClassVar[tuple[str, ...]] = ()
    conservative: ClassVar[bool] = False
    description: ClassVar[str] = ""
    body_kind: ClassVar[str] = "planar"
    #: True when :meth:`energy` and :meth:`outputs` treat every element
    #: independently and depend on time only through ``f``: the System may then
    #: evaluate them for a block of output rows in one call, the rows stacked as
    #: elements (:mod:`mbcore.system.output_rows`).  False (the default): one call
    #: per output row.
    rows_stacked: ClassVar[bool] = False

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _kernel_choice(cls)

    def check(self, spec: dict[str, Any], path: str) -> None:
        """Extra validation beyond the schema (raise ModelError naming the key)."""

    #: as :attr:`ConstraintType.frame_fixed`
    frame_fixed: ClassVar[Mapping[str, str | tuple[str, ...]]] = {}

    def frame_shift(self, spec: dict[str, Any], shift: Callable[[str], np.ndarray | None],
                    ctx: PackContext) -> dict[str, Any]:
        """Optional hook, as :meth:`ConstraintType.frame_shift`."""
        return frame_points(self, spec, shift, ctx.path)

    def pack(self, spec: dict[str, Any], ctx: PackContext) -> tuple[Sequence[float], Sequence[Any]]:
        raise NotImplementedError  # pragma: no cover - abstract

    def force(self, par, qb, qdb, t, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def force_jacobian(self, par, qb, qdb, t, f):
        """Optional: ``(K, C)`` with K = dg/dq_b, C = dg/dqd_b, each (ne, nb, nc,
        nb, nc) (``[e, b, c, b2, c2] = d g[e, b, c] / d qb[e, b2, c2]``).  Types
        that do not override it get forward differences of their own ``force``
        (:meth:`mbcore.System.force_jacobians`)."""
        raise NotImplementedError

    def energy(self, par, qb, t, f):
        return np.zeros(par.shape[0])

    def outputs(self, par, qb, qdb, t, f):
        return np.zeros((par.shape[0], len(self.labels)))

    def power_nc(self, par, qb, qdb, t, f):
        """Power of the non-conservative part, (ne,).  Default: the element is
        entirely non-conservative, ``sum_b g_b . qd_b``."""
        g = self.force(par, qb, qdb, t, f)
        return np.einsum("ebc,ebc->e", g, qdb)


class SpatialConstraintType(ConstraintType):
    """Base class of constraint types between spatial bodies (Nikravesh (1988), Ch. 7).

    Body blocks: ``qb`` (ne, nb, 7) = ``[x, y, z, e0, e1, e2, e3]`` of each body
    (ground: ``[0, 0, 0, 1, 0, 0, 0]``).  A type implements the angular-velocity
    form of Nikravesh (1988), §11.4.2, Eq. 11.48, Table 11.1:

    * ``phi(par, qb, t, f)`` -> (ne, m)
    * ``jacobian_v(par, qb, t, f)`` -> (ne, m, nb, 6): the columns ``[Phi_r, Phi_pi']``
      acting on ``v_b = [rdot, omega']`` (omega' in body axes)
    * ``gamma_v(par, qb, vb, t, f)`` -> (ne, m): ``gamma#`` with ``vb`` (ne, nb, 6)
    * ``nu(par, qb, t, f)`` (default 0)

    The Euler-parameter form used with ``q_b = [r, p]`` and ``qdot`` follows without
    code: ``Phi_p = 2 Phi_pi' L(p)``, and since
    ``omega'dot = 2 L(p) pddot`` exactly, its right side is the same ``gamma#``.
    """

    body_kind: ClassVar[str] = "spatial"

    def jacobian_v(self, par, qb, t, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def gamma_v(self, par, qb, vb, t, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def jacobian(self, par, qb, t, f):
        """Euler-parameter (projected) Jacobian (ne, m, nb, 7) = [Phi_r, 2 Phi_pi' L]."""
        from .rotations import L as Lmat
        Jv = np.asarray(self.jacobian_v(par, qb, t, f), dtype=float)
        out = np.empty(Jv.shape[:3] + (7,))
        out[..., :3] = Jv[..., :3]
        out[..., 3:] = 2.0 * np.einsum("embk,ebkl->embl", Jv[..., 3:], Lmat(qb[..., 3:7]))
        return out

    def gamma(self, par, qb, qdb, t, f):
        """gamma for the Euler-parameter form: gamma# at omega' = 2 L(p) pdot."""
        return self.gamma_v(par, qb, velocity_blocks(qb, qdb), t, f)


# --- small planar helpers shared by reference implementations ---------------------
def rot(phi: np.ndarray, s: np.ndarray) -> np.ndarray:
    """A(phi) s for arrays: phi (...,), s (..., 2) -> (..., 2)  (Nikravesh (1988), Eq. 4.2)."""
    c, sn = np.cos(phi), np.sin(phi)
    return np.stack([c * s[..., 0] - sn * s[..., 1], sn * s[..., 0] + c * s[..., 1]], axis=-1)


def perp(v: np.ndarray) -> np.ndarray:
    """R v with R = [[0,-1],[1,0]] (rotate +90 degrees)."""
    return np.stack([-v[..., 1], v[..., 0]], axis=-1)


def velocity_blocks(qb: np.ndarray, qdb: np.ndarray) -> np.ndarray:
    """Spatial blocks ``[rdot, omega']`` (ne, nb, 6) from ``[r, p]`` and ``[rdot,
    pdot]`` (omega' = 2 L(p) pdot)."""
    from .rotations import L as Lmat
    vb = np.empty(qdb.shape[:2] + (6,))
    vb[..., :3] = qdb[..., :3]
    vb[..., 3:] = 2.0 * np.einsum("ebkl,ebl->ebk", Lmat(qb[..., 3:7]), qdb[..., 3:7])
    return vb

