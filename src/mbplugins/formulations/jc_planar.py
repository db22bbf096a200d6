"""Joint-coordinate formulation for planar kinematic trees (Nikravesh (1988), §13.4,
algorithm JC-1, with reduced equations of motion derived by the TMT method of TAM 674
(2003), lectures of 10 to 26 February).

The state is ``y = [theta; thetadot]``: one relative coordinate per joint of a tree
rooted at the ground — the angle ``phi_j - phi_i`` of a revolute, the slide ``d``
along the axis of a translational joint (Prob. 13.10).  Every evaluation:

1. the Cartesian ``q``, ``qdot`` of every body by the forward recursion 13.36-13.37
   (the tree constraints hold identically: no drift);
2. ``qddot = B thetaddot + a0`` by the acceleration recursion, linear in
   ``thetaddot``: ``a0 = Bdot thetadot`` (``thetaddot = 0``) and the columns of ``B``
   (unit ``thetaddot_k``, in one vectorised pass);
3. ``B^T M B thetaddot = B^T (Q - M a0)`` (the composite, dense joint-space mass
   matrix; Cholesky).

Outputs are Cartesian, with the channels and names of the other formulations:
``q``, ``qd``, ``qdd`` and the multipliers of the joints from ``Phi_q^T lam = M qdd -
Q`` (consistent for the exact motion; least squares), so reactions, energies and
points are computed as usual.

Scope: planar rigid bodies; revolute and translational tree joints (a translational
joint whose axis body is the far one is cut); a body no joint reaches from the
ground gets a floating base (a ``free`` joint: its x, y, phi; composite solver);
other rows (cut joints closing loops, drivers) stay algebraic equations with
multipliers (composite solver), stabilised by Baumgarte terms or, with
``loop_stabilization``, projected / partitioned after every step
(:mod:`.jc_loops`).  Spatial models: :mod:`.jc_spatial`
(:class:`.jc_common.JointCoordinates` dispatches on the model's dimension).

Speed: on the compiled backend a tree without cut rows uses the O(N) articulated-body
recursion in C, and when every force element is compiled the whole right-hand side
``[thetadot; thetaddot; W']`` is one C call (:attr:`PlanarJointCoordinates.compiled`)
that the dynamic analysis' compiled integration loop steps
(mbcore.integrate.fastloop): ``mbplugins._ext._jc.CompiledJC`` for a tree,
``CompiledJCLoops`` for a tree closed by cut rows whose constraints are compiled too
(the composite path below in C: ``B``, ``B^T M B``, the cut rows' multipliers);
outputs come from the same evaluation.  Where it does not apply,
:attr:`PlanarJointCoordinates.compiled_reason` says why.  The NumPy functions of this
module are the reference of the compiled ones.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from mbcore.elements.base import perp
from mbcore.errors import AnalysisError, ModelError

from .jc_common import JointCoordinates, spanning_tree
from .jc_loops import cut_row_multipliers
from .partitioning import pivot_quality, pivoted_partition


def _A(phi):
    c, s = np.cos(phi), np.sin(phi)
    return np.array([[c, -s], [s, c]])




class _Joint:
    __slots__ = ("name", "kind", "parent", "child", "sp", "sc", "u", "angle", "index",
                 "rows")


class PlanarTree:
    """Topology and recursions of a planar tree of revolute / translational joints."""

    TYPES = ("revolute", "translational")

    def __init__(self, system, cut=()):
        s = system
        if not s.planar_only or s.padded or s.n_extra:
            raise ModelError("settings.formulation", "joint_coordinates handles planar "
                                                     "rigid bodies for now (spatial trees, "
                                                     "point masses: next steps)")
        self.system = s
        n = s.n
        body_of = {int(o): k for k, o in enumerate(s.body_offsets)}
        joints, named_cut = [], []
        for g in s.groups:
            if g.ctype.name not in self.TYPES:
                continue
            for e in range(g.ne):
                j = _Joint()
                j.name, j.kind = g.names[e], g.ctype.name
                j.rows = np.arange(g.row[e], g.row[e] + g.ctype.equations)
                bi, bj = (int(x) for x in g.boff[e])
                j.parent = None if bi == n else body_of[bi]
                j.child = None if bj == n else body_of[bj]
                p = g.par[e]
                if j.kind == "revolute":
                    j.sp, j.sc = np.array(p[0:2]), np.array(p[2:4])
                    j.u, j.angle = None, 0.0
                else:
                    j.u = np.array(p[0:2])
                    j.sp, j.sc = np.array(p[2:4]), np.array(p[4:6])
                    j.angle = float(p[6])
                (named_cut if j.name in cut else joints).append(j)
        unknown = set(cut) - {j.name for j in named_cut}
        if unknown:
            raise ModelError("settings.cut_joints", f"no revolute or translational joint "
                                                    f"named {', '.join(sorted(unknown))}")
        self.joints, self.cut = self._order(joints)
        self.cut += named_cut
        self.dof = sum(3 if j.kind == "free" else 1 for j in self.joints)
        #: floating bases (free joints: x, y, phi of the body): composite solver only
        self.floating = [j.child for j in self.joints if j.kind == "free"]
        self.nb = s.nb
        tree_rows = np.concatenate([j.rows for j in self.joints]) if self.joints else \
            np.zeros(0, np.intp)
        #: the rows of the tree joints (hold identically) and every other row: cut
        #: joints, drivers, other constraints — algebraic equations in theta
        self.tree_rows = np.sort(tree_rows)
        self.extra_rows = np.setdiff1d(np.arange(s.m), tree_rows)

    def _order(self, joints):
        """The spanning tree (:func:`spanning_tree`); a revolute may be given in
        either direction, a translational joint whose axis body is the far one is
        cut; a body no joint reaches gets a floating base (``free``: x, y, phi)."""
        s = self.system

        def swap(j):
            if j.kind != "revolute":             # the axis body must be the parent
                return False
            j.parent, j.child = j.child, j.parent
            j.sp, j.sc = j.sc, j.sp
            return True

        def free(k):
            j = _Joint()
            j.name, j.kind = f"<floating {s.body_names[k]}>", "free"
            j.parent, j.child = None, k
            j.sp = j.sc = np.zeros(2)
            j.u, j.angle = None, 0.0
            j.rows = np.zeros(0, np.intp)
            return j

        order, cut = spanning_tree(joints, s.nb, swap, free)
        o = 0
        for j in order:
            j.index = o
            o += 3 if j.kind == "free" else 1
        return order, cut

    # ------------------------------------------------------------------ maps
    def _block(self, x, body):
        """View of a body's 3 numbers in a Cartesian vector (ground: zeros)."""
        if body is None:
            return np.zeros(x.shape[:-1] + (3,)) if x.ndim > 1 else np.zeros(3)
        o = 3 * body
        return x[..., o:o + 3]

    def positions(self, theta):
        q = np.zeros(3 * self.nb)
        for j in self.joints:
            qc = q[3 * j.child:3 * j.child + 3]
            if j.kind == "free":                 # floating base: x, y, phi
                qc[:] = theta[j.index:j.index + 3]
                continue
            qp = self._block(q, j.parent)
            Ap = _A(qp[2])
            if j.kind == "revolute":
                qc[2] = qp[2] + theta[j.index]
                w = j.sp
            else:
                qc[2] = qp[2] - j.angle
                w = j.sp + theta[j.index] * j.u
            qc[:2] = qp[:2] + Ap @ w - _A(qc[2]) @ j.sc
        return q

    def velocities(self, q, thetad):
        qd = np.zeros(3 * self.nb)
        for j in self.joints:
            qp, vp = self._block(q, j.parent), self._block(qd, j.parent)
            qc = q[3 * j.child:3 * j.child + 3]
            vc = qd[3 * j.child:3 * j.child + 3]
            if j.kind == "free":
                vc[:] = thetad[j.index:j.index + 3]
                continue
            Ap, Ac = _A(qp[2]), _A(qc[2])
            if j.kind == "revolute":
                vc[2] = vp[2] + thetad[j.index]
                vc[:2] = vp[:2] + vp[2] * perp(Ap @ j.sp) - vc[2] * perp(Ac @ j.sc)
            else:
                d = self._slide(q, j)
                vc[2] = vp[2]
                vc[:2] = (vp[:2] + vp[2] * perp(Ap @ (j.sp + d * j.u))
                          + thetad[j.index] * (Ap @ j.u) - vc[2] * perp(Ac @ j.sc))
        return qd

    def _slide(self, q, j):
        qp, qc = self._block(q, j.parent), q[3 * j.child:3 * j.child + 3]
        Ap = _A(qp[2])
        return float((Ap @ j.u) @ (qc[:2] + _A(qc[2]) @ j.sc - qp[:2] - Ap @ j.sp))

    def accelerations(self, q, qd, theta, thetad, thetadd):
        """qddot for ``thetadd`` of shape (K, dof) -> (K, 3 nb) (linear in thetadd)."""
        K = thetadd.shape[0]
        a = np.zeros((K, 3 * self.nb))
        for j in self.joints:
            qp, vp = self._block(q, j.parent), self._block(qd, j.parent)
            ap = self._block(a, j.parent)
            oc = 3 * j.child
            if j.kind == "free":
                a[:, oc:oc + 3] = thetadd[:, j.index:j.index + 3]
                continue
            qc, vc = q[oc:oc + 3], qd[oc:oc + 3]
            Ap, Ac = _A(qp[2]), _A(qc[2])
            Sc = Ac @ j.sc
            if j.kind == "revolute":
                ac2 = ap[:, 2] + thetadd[:, j.index]
                Sp = Ap @ j.sp
                lin = (ap[:, :2] + ap[:, 2:3] * perp(Sp) - vp[2] ** 2 * Sp)
            else:
                d, dd = theta[j.index], thetad[j.index]
                ac2 = ap[:, 2]
                W = Ap @ (j.sp + d * j.u)
                U = Ap @ j.u
                lin = (ap[:, :2] + ap[:, 2:3] * perp(W) - vp[2] ** 2 * W
                       + 2.0 * vp[2] * dd * perp(U) + thetadd[:, j.index:j.index + 1] * U)
            a[:, oc + 2] = ac2
            a[:, oc:oc + 2] = lin - ac2[:, None] * perp(Sc) + vc[2] ** 2 * Sc
        return a

    def joint_coordinates(self, q, qd):
        """theta, thetadot of a Cartesian state (consistent with the tree)."""
        th = np.zeros(self.dof)
        thd = np.zeros(self.dof)
        for j in self.joints:
            qp, vp = self._block(q, j.parent), self._block(qd, j.parent)
            oc = 3 * j.child
            qc, vc = q[oc:oc + 3], qd[oc:oc + 3]
            if j.kind == "free":
                th[j.index:j.index + 3] = qc
                thd[j.index:j.index + 3] = vc
            elif j.kind == "revolute":
                th[j.index] = qc[2] - qp[2]
                thd[j.index] = vc[2] - vp[2]
            else:
                Ap, Ac = _A(qp[2]), _A(qc[2])
                U = Ap @ j.u
                th[j.index] = self._slide(q, j)
                vP_c = vc[:2] + vc[2] * perp(Ac @ j.sc)
                vP_p = vp[:2] + vp[2] * perp(Ap @ j.sp)
                Delta = qc[:2] + Ac @ j.sc - qp[:2] - Ap @ j.sp
                thd[j.index] = U @ (vP_c - vP_p) + (vp[2] * perp(U)) @ Delta
        return th, thd

    def nu_labels(self) -> list[tuple[str, bool]]:
        """(name, angular) of every entry of nu: a joint's name, ``<floating b>.x``,
        ``.y``, ``.phi`` for a floating base (names the partition of the loops)."""
        out = []
        for j in self.joints:
            if j.kind == "free":
                out += [(f"{j.name}.x", False), (f"{j.name}.y", False),
                        (f"{j.name}.phi", True)]
            else:
                out.append((j.name, j.kind == "revolute"))
        return out


def _children(tree):
    ch = [[] for _ in range(tree.nb)]
    roots = []
    for j in tree.joints:
        (roots if j.parent is None else ch[j.parent]).append(j)
    return ch, roots


def articulated_body(tree, mass, q, qd, theta, thetad, Q):
    """thetaddot and qddot of a tree by the articulated-body recursion (O(N); the
    recursive forward dynamics of the joint-coordinate issue, NumPy reference).

    With each joint written ``qddot_j = X_j qddot_i + S_j thetaddot_j + c_j`` (the
    acceleration recursion: X the rigid transport between the centroids, S the
    joint's motion, c the velocity terms) and the joint force F_j on the child in
    its coordinates (``S_j^T F_j = 0``, reaction ``-X_j^T F_j`` on the parent), the
    inward pass builds the articulated inertia ``I_j = M_j + sum X^T Ia X`` and bias
    ``p_j = -Q_j + sum X^T pa`` of every subtree, ``Ia = I - U U^T / D``, ``U = I S``,
    ``D = S^T U``, ``pa = Ia c + p - U (S^T p) / D``; the outward pass gives
    ``thetaddot_k = -(U^T (X qddot_parent + c) + S^T p) / D``."""
    nb = tree.nb
    X = np.zeros((tree.dof, 3, 3))
    S = np.zeros((tree.dof, 3))
    c = np.zeros((tree.dof, 3))
    for j in tree.joints:                       # outward: X, S, c
        qp = tree._block(q, j.parent)
        vp = tree._block(qd, j.parent)
        oc = 3 * j.child
        qc, vc = q[oc:oc + 3], qd[oc:oc + 3]
        Ap, Ac = _A(qp[2]), _A(qc[2])
        Sc = Ac @ j.sc
        k = j.index
        X[k] = np.eye(3)
        if j.kind == "revolute":
            Sp = Ap @ j.sp
            X[k, :2, 2] = perp(Sp) - perp(Sc)
            S[k, :2] = -perp(Sc)
            S[k, 2] = 1.0
            c[k, :2] = -vp[2] ** 2 * Sp + vc[2] ** 2 * Sc
        else:
            W = Ap @ (j.sp + theta[k] * j.u)
            U = Ap @ j.u
            X[k, :2, 2] = perp(W) - perp(Sc)
            S[k, :2] = U
            c[k, :2] = (2.0 * vp[2] * thetad[k] * perp(U) - vp[2] ** 2 * W
                        + vc[2] ** 2 * Sc)
    IA = np.zeros((nb, 3, 3))
    pA = np.zeros((nb, 3))
    for b in range(nb):
        IA[b] = np.diag(mass[3 * b:3 * b + 3])
        pA[b] = -Q[3 * b:3 * b + 3]
    Uv = np.zeros((tree.dof, 3))
    Dv = np.zeros(tree.dof)
    for j in reversed(tree.joints):             # inward: articulated inertias
        k, b = j.index, j.child
        U = IA[b] @ S[k]
        D = S[k] @ U
        Uv[k], Dv[k] = U, D
        if j.parent is None:
            continue
        Ia = IA[b] - np.outer(U, U) / D
        pa = Ia @ c[k] + pA[b] - U * (S[k] @ pA[b]) / D
        IA[j.parent] += X[k].T @ Ia @ X[k]
        pA[j.parent] += X[k].T @ pa
    qdd = np.zeros(3 * nb)
    thdd = np.zeros(tree.dof)
    for j in tree.joints:                       # outward: accelerations
        k, b = j.index, j.child
        ap = np.zeros(3) if j.parent is None else qdd[3 * j.parent:3 * j.parent + 3]
        base = X[k] @ ap + c[k]
        thdd[k] = -(Uv[k] @ base + S[k] @ pA[b]) / Dv[k]
        qdd[3 * b:3 * b + 3] = base + S[k] * thdd[k]
    return thdd, qdd


class PlanarJointCoordinates(JointCoordinates, planar=True):
    """``joint_coordinates`` for planar models (module docstring).  Rows of the model
    that are not tree joints (cut joints closing loops, drivers, other constraints)
    stay algebraic equations in theta with multipliers, ``D = Phi*_q B`` (spec
    §4.7.2, Eq. 13.41), stabilised by Baumgarte terms ``-2 alpha Phidot* - beta^2
    Phi*`` (alpha = beta = 0: none), or (``loop_stabilization``) projected / solved
    after every step (:mod:`.jc_loops`)."""

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        for k in ("alpha", "beta"):
            if self.settings[k] < 0:
                raise ModelError(f"settings.{k}", "must be >= 0")
        self.alpha, self.beta = self.settings["alpha"], self.settings["beta"]
        self.tree = PlanarTree(system, self.settings["cut_joints"])
        self.dof = self.tree.dof
        self.extra = self.tree.extra_rows
        self.mass = np.array(system.mass_diag, dtype=float)
        self._ydot = np.zeros(2 * self.dof)
        self._eye = None                 # unit thetaddot rows (composite path only)
        self.lam_full = np.zeros(system.m)
        choice = self.settings["solver"]
        if choice == "recursive" and (len(self.extra) or self.tree.floating):
            raise ModelError("settings.solver", "the recursive (articulated-body) solver "
                                                "handles trees of revolute / translational "
                                                "joints fixed to the ground; this model has "
                                                "cut joints, drivers or a floating base: "
                                                "use 'composite' or 'auto'")
        compiled = system.backend == "compiled"
        self.recursive = choice == "recursive" or (
            choice == "auto" and not len(self.extra) and not self.tree.floating
            and (compiled or self.dof > 10))
        #: the compiled recursions (ext/plugins/_jc.pyx jc_planar_*), by the System's
        #: backend; the NumPy functions above are their reference
        self._ck = None
        if self.recursive and system.backend == "compiled":
            try:
                from mbplugins._ext import _jc as D
                self._ck = (D.jc_planar_kinematics, D.jc_planar_aba)
            except (ImportError, AttributeError):     # pragma: no cover - old build
                self._ck = None
        #: the joint table of the compiled kernels (tree order): recursive trees and
        #: trees closed by cut rows on the compiled backend (no floating base)
        self._table = self._ck is not None or (
            system.backend == "compiled" and len(self.extra) > 0
            and not self.tree.floating and self.dof > 0)
        if self._table:
            js = self.tree.joints
            self._jk = np.array([0 if j.kind == "revolute" else 1 for j in js], np.intc)
            self._jp = np.array([-1 if j.parent is None else j.parent for j in js], np.intp)
            self._jc = np.array([j.child for j in js], np.intp)
            self._jsp = np.ascontiguousarray([j.sp for j in js], dtype=float).reshape(-1, 2)
            self._jsc = np.ascontiguousarray([j.sc for j in js], dtype=float).reshape(-1, 2)
            self._ju = np.ascontiguousarray([j.u if j.u is not None else (0.0, 0.0)
                                             for j in js], dtype=float).reshape(-1, 2)
            self._jang = np.array([j.angle for j in js], dtype=float)
        if self._ck is not None:
            n = system.n
            self._cq, self._cqd = np.zeros(n), np.zeros(n)
            self._cthdd, self._cqdd = np.zeros(self.dof), np.zeros(n)
            self._cwork = np.zeros((system.nb + self.dof, 16))
        #: the whole right-hand side in one C call (``mbplugins._ext._jc.CompiledJC``): the
        #: dynamic analysis' compiled loop steps it (mbcore.integrate.fastloop)
        self._ywork = np.zeros(2 * self.dof + 1)
        self._from_compiled = False
        self._loops_setup(self.dof, self.dof, dict(settings or {}))
        #: why the compiled right-hand side does not apply (None when it does)
        self.compiled_reason: str | None = None
        self.compiled = self._compiled_jc()
        self._views()

    def _compiled_jc(self):
        """The whole right-hand side in C, else None with :attr:`compiled_reason`:
        ``CompiledJC`` for a tree without cut rows on the compiled recursions,
        ``CompiledJCLoops`` for a tree closed by cut rows (Baumgarte terms of this
        formulation: alpha = beta = 0 with projection / partitioning), when the
        System's force elements (and, with cut rows, its constraints) are all
        compiled (the conditions of ``mbcore.solve.formulation._compiled_rhs``)."""
        s = self.system
        loops = len(self.extra) > 0
        reason = None
        if s.backend != "compiled":
            reason = "the System's kernels are NumPy"
        elif not self.dof:
            reason = "no joint coordinates"
        elif self.tree.floating:
            reason = ("a floating base (body "
                      f"{s.body_names[self.tree.floating[0]]} is reached by no joint)")
        elif not loops and self._ck is None:
            reason = "the NumPy recursions were chosen (solver)"
        elif s.mass_diag is None or not bool(np.all(self.mass > 0.0)):
            reason = "a body without mass or inertia"
        else:
            reason = s.why_python(constraints=loops)
        kernels = None if reason else s.compiled_kernels(constraints=loops)
        if reason is None and kernels is None:       # pragma: no cover - defensive
            reason = "the System's kernels are not all compiled"
        if reason is not None:
            self.compiled_reason = reason
            return None
        try:
            from mbplugins._ext import _jc as D
        except ImportError:                       # pragma: no cover - an old build
            self.compiled_reason = "the compiled extension is not built"
            return None
        table = (self._jk, self._jp, self._jc, self._jsp, self._jsc, self._ju,
                 self._jang, self.mass)
        self.compiled_reason = None
        if not loops:
            return D.CompiledJC(*table, kernels.constant_forces, kernels.forces,
                                kernels.functions)
        mode = self.loop_mode
        correction = {} if mode == "baumgarte" else {
            "correction": mode, "holonomic": self._hol,
            "weighted": bool(self.settings["mass_weighted"]),
            "tolerance": float(self.settings["projection_tolerance"]),
            "col_scale": self._col_scale,
            "factor": float(self.settings["repartition_factor"])}
        c = D.CompiledJCLoops(*table, kernels.constraints, kernels.forces,
                              kernels.functions, kernels.n, kernels.m,
                              kernels.jacobian_data, kernels.constant_forces,
                              np.asarray(self.extra, dtype=np.intp), float(self.alpha),
                              float(self.beta), **kernels.csr(), **correction)
        if mode == "partitioning" and getattr(self, "u", None) is not None:
            c.set_partition(self.u, self.v, float(self.best_ratio))
        return c

    # the correction after every step in C (CompiledJCLoops.c_post_step): the
    # partition it uses, and its count of corrections in ``projections``
    def _sync_partition(self) -> None:
        c = self.compiled
        if (c is not None and self.loop_mode == "partitioning" and len(self.extra)
                and getattr(self, "u", None) is not None):
            c.set_partition(self.u, self.v, float(self.best_ratio))

    @property
    def projections(self) -> int:
        """Corrections after accepted steps (``stats.projections``): the Python
        driver's and the compiled loop's; absent (AttributeError) where no
        correction runs (Baumgarte terms, trees)."""
        if "_projections" not in self.__dict__:
            raise AttributeError("projections")
        c = self.compiled
        if c is not None and getattr(c, "post_step", False):
            self._projections += int(c.take_projections())
        return self._projections

    @projections.setter
    def projections(self, value: int) -> None:
        self._projections = int(value)

    def set_resume_state(self, state):
        super().set_resume_state(state)
        self._sync_partition()

    def _project_loops(self, t, y, count=True):
        """The correction of :class:`.jc_loops.LoopClosure` by the compiled one
        (``CompiledJCLoops.c_post_step``) where it applies; at outputs (``count``
        False) the test for a better partition on its ``D``.  Where it fails, the
        Python correction (which raises the named error or asks for a new
        partition)."""
        c = self.compiled
        if c is None or not c.post_step:
            return super()._project_loops(t, y, count)
        dof = self.dof
        yy = np.zeros(2 * dof + 1)
        yy[:2 * dof] = y[:2 * dof]
        code = c.post_step_at(t, yy, False)
        if code < 0:
            return super()._project_loops(t, y, count)
        if self.loop_mode == "partitioning":
            self.ratio = float(c.ratio)
            if not count:                        # hysteresis: a much better partition
                D = c.D_view
                u2, v2, _ = pivoted_partition(D, self._col_scale)
                best = pivot_quality(D, u2, self._col_scale)
                factor = self.settings["repartition_factor"]
                if list(v2) != list(self.v) and best > factor * self.ratio:
                    self._want = (f"a better partition exists (pivot ratio "
                                  f"{self.ratio:.3g} -> {best:.3g})")
        if code == 0:
            return None
        self.projections += int(count)
        yn = np.array(y, dtype=float)
        yn[:2 * dof] = yy[:2 * dof]
        return yn

    def _views(self) -> None:
        """Views of the compiled evaluation's buffers, kept (they live as long as it):
        q, qd and, with cut rows, their multipliers."""
        c = self.compiled
        self._cviews = None if c is None else (
            c.q_view, c.qd_view, c.lam_view if len(self.extra) else None)

    def compiled_ready(self) -> bool:
        """The compiled right-hand side applies (with redundant cut rows it is built
        for the independent ones: :meth:`use_independent_rows`)."""
        return self.compiled is not None

    def use_independent_rows(self, rows, q=None, t=None):
        kept = super().use_independent_rows(rows, q, t)
        if self.compiled is not None:         # the cut rows kept
            self.compiled = self._compiled_jc()
        self._views()
        return kept

    @property
    def size(self) -> int:
        return 2 * self.dof

    def pack(self, q, qd):
        th, thd = self.tree.joint_coordinates(np.asarray(q, float), np.asarray(qd, float))
        return np.concatenate([th, thd])

    def split(self, y):
        th, thd = y[:self.dof], y[self.dof:2 * self.dof]
        if self._ck is not None:              # the compiled forward recursion
            n = self.system.n
            q, qd = np.zeros(n), np.zeros(n)
            self._ck[0](self._jk, self._jp, self._jc, self._jsp, self._jsc, self._ju,
                        self._jang, np.ascontiguousarray(th, dtype=float),
                        np.ascontiguousarray(thd, dtype=float), q, qd)
            return q, qd
        q = self.tree.positions(th)
        return q, self.tree.velocities(q, thd)

    def initialize(self, q, qd, t):
        y = self.pack(q, qd)
        qq, qqd = self.split(y)
        err = float(np.max(np.abs(qq - q))) if len(q) else 0.0
        if err > 1e-6 * (1.0 + np.max(np.abs(q), initial=0.0)):
            raise AnalysisError(f"joint_coordinates: the initial state is not on the tree "
                                f"(positions differ by {err:.3g})", t)
        self._loops_initialize(y, t)
        self._sync_partition()
        return y, None

    def _closure(self, theta, t, metric):
        """(q, D, H) at theta (:meth:`LoopClosure._closure`): B from the acceleration
        recursion at zero velocities (``qddot = B thetaddot`` there)."""
        tree, dof = self.tree, self.dof
        if self._table and self.system.backend == "compiled":
            # the compiled recursions (jc_planar_kinematics, jc_planar_columns)
            from mbplugins._ext import _jc as D
            n = self.system.n
            th = np.ascontiguousarray(theta, dtype=float)
            q, zero, Bc = np.zeros(n), np.zeros(n), np.zeros((dof, n))
            tab = (self._jk, self._jp, self._jc, self._jsp, self._jsc, self._ju)
            D.jc_planar_kinematics(*tab, self._jang, th, np.zeros(dof), q, zero)
            D.jc_planar_columns(*tab, q, zero, th, np.zeros(dof), np.zeros(n), Bc)
            B = Bc.T
        else:
            q = tree.positions(theta)
            B = tree.accelerations(q, np.zeros_like(q), theta, np.zeros(dof),
                                   np.eye(dof)).T
        D = self.system.jacobian_dense(q, t)[self.extra] @ B
        return q, D, (B.T @ (self.mass[:, None] * B) if metric else None)

    def _retract(self, theta, dnu):
        return theta + dnu

    def _solve(self, t, y):
        s, tree, dof, ex = self.system, self.tree, self.dof, self.extra
        th, thd = y[:dof], y[dof:2 * dof]
        if self._ck is not None:             # compiled recursions
            th = np.ascontiguousarray(th)
            thd = np.ascontiguousarray(thd)
            q, qd = self._cq, self._cqd
            self._ck[0](self._jk, self._jp, self._jc, self._jsp, self._jsc, self._ju,
                        self._jang, th, thd, q, qd)
            Q = s.forces(q, qd, t)
            self._ck[1](self._jk, self._jp, self._jc, self._jsp, self._jsc, self._ju,
                        self.mass, q, qd, th, thd, Q, self._cthdd, self._cqdd, self._cwork)
            return q, qd, self._cthdd, self._cqdd, Q, np.zeros(0)
        q = tree.positions(th)
        qd = tree.velocities(q, thd)
        if self.recursive:
            Q = s.forces(q, qd, t).copy()
            thdd, qdd = articulated_body(tree, self.mass, q, qd, th, thd, Q)
            return q, qd, thdd, qdd, Q, np.zeros(0)
        if self._eye is None:
            self._eye = np.eye(dof)
        # B from the recursion without velocity terms (Eq. 13.41: qddot = B thetaddot
        # + Bdot thetadot), a0 = Bdot thetadot from the one with thetaddot = 0: each
        # exact, rather than a difference of the two (which loses the digits of B
        # where the velocity terms are large)
        B = tree.accelerations(q, np.zeros_like(qd), th, np.zeros(dof), self._eye).T
        a0 = tree.accelerations(q, qd, th, thd, np.zeros((1, dof)))[0]
        Q = s.forces(q, qd, t).copy()
        H = B.T @ (self.mass[:, None] * B)
        f = B.T @ (Q - self.mass * a0)
        try:
            cho = sla.cho_factor(H, check_finite=False)
        except np.linalg.LinAlgError:
            raise AnalysisError("joint_coordinates: the joint-space mass matrix is singular "
                                "(a massless body in the tree?)", t) from None
        lam_e = np.zeros(len(ex))
        if len(ex):
            J = s.jacobian_dense(q, t)
            Je = J[ex]
            D = Je @ B
            phid = Je @ qd - s.nu(q, t)[ex]
            c = (s.gamma(q, qd, t)[ex] - Je @ a0 - 2.0 * self.alpha * phid
                 - self.beta ** 2 * s.phi(q, t)[ex])
            lam_e = cut_row_multipliers(self.solver, cho, D, c, f, Je, t, ex)
            f = f + D.T @ lam_e
        thdd = sla.cho_solve(cho, f, check_finite=False)
        return q, qd, thdd, B @ thdd + a0, Q, lam_e

    def rhs(self, t, y):
        self.nfev += 1
        dof = self.dof
        c = self.compiled
        if c is not None:                # one C call (else the Python path below,
            if c.eval(t, y, self._ywork) == 0:      # which raises the named error)
                self._from_compiled = True
                self.q_cur, self.qd_cur, lam_e = self._cviews
                self.solver.lam[:] = 0.0
                if lam_e is not None:
                    self.solver.lam[self.extra] = lam_e
                self._ydot[:] = self._ywork[:2 * dof]
                return self._ydot
        self._from_compiled = False
        q, qd, thdd, qdd, Q, lam_e = self._solve(t, y)
        self.q_cur, self.qd_cur = q, qd
        lam = self.solver.lam
        lam[:] = 0.0                     # tree rows do no work (Phi_q qd = 0 there)
        lam[self.extra] = lam_e
        if len(self.extra):
            self.system.jacobian(q, t)   # the System's buffer at q (work channel)
        self._ydot[:dof] = y[dof:2 * dof]
        self._ydot[dof:] = thdd
        return self._ydot

    def _compiled_state(self, t, y):
        """(q, qd, thdd, qdd, Q, lam*) of the compiled right-hand side at (t, y)
        (copies), or None where it does not apply or fails."""
        c = self.compiled
        if c is None:
            return None
        dof = self.dof
        yy = np.zeros(2 * dof + 1)
        yy[:2 * dof] = y[:2 * dof]
        ok = c.eval(t, yy, self._ywork) == 0
        c.nfev -= 1
        if not ok:
            return None
        lam_e = c.lam_view.copy() if len(self.extra) else np.zeros(0)
        return (c.q_view.copy(), c.qd_view.copy(), self._ywork[dof:2 * dof].copy(),
                c.qdd_view.copy(), c.Q_view.copy(), lam_e)

    def outputs(self, t, y):
        """Cartesian q, qd, qdd; the multipliers of the cut rows from the solve and of
        the tree joints from ``Phi_tree^T lam = M qdd - Q - Phi*^T lam*`` (least
        squares; exact for the motion).  On the compiled right-hand side, its
        evaluation at (t, y) (an output, not counted in its evaluations); where it
        fails, the Python path (which raises the named error)."""
        got = self._compiled_state(t, y)
        q, qd, thdd, qdd, Q, lam_e = got if got is not None else self._solve(t, y)
        s = self.system
        lam = np.zeros(s.m)
        lam[self.extra] = lam_e
        if s.m and getattr(self, "multipliers_wanted", True):
            tr = self.tree.tree_rows
            if s.dense:
                J = s.jacobian_dense(q, t)
                r = self.mass * qdd - Q - J[self.extra].T @ lam_e
                if len(tr):
                    lam[tr] = np.linalg.lstsq(J[tr].T, r, rcond=None)[0]
            else:                            # O(N): (J J^T) lam = J r, J sparse
                import scipy.sparse.linalg as spla
                J = s.jacobian(q, t).tocsr()
                r = self.mass * qdd - Q - (J[self.extra].T @ lam_e if len(self.extra)
                                           else 0.0)
                if len(tr):
                    Jt = J[tr]
                    lam[tr] = spla.spsolve((Jt @ Jt.T).tocsc(), Jt @ r)
        self.solver.lam[:] = lam
        s.jacobian(q, t)
        return q, qd, qdd, lam

    def warnings(self, step):
        from .baumgarte import CS
        return CS.warnings(self, step) if len(self.extra) and \
            self.loop_mode == "baumgarte" else []
