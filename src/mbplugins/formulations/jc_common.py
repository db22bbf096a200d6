"""What the planar and spatial joint-coordinate formulations share: the spanning
tree of the joints and the formulation class ``joint_coordinates`` itself, which
builds the implementation for the model's dimension
(:class:`.jc_planar.PlanarJointCoordinates`,
:class:`.jc_spatial.SpatialJointCoordinates`, both its subclasses; they register
themselves here when their modules are imported, as
:mod:`.joint_coordinates` does)."""
from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from mbcore.errors import ModelError
from mbcore.solve.formulation import Formulation
from mbcore.elements.schema import Param

from .jc_loops import LOOP_SETTINGS, LoopClosure

__all__ = ["JointCoordinates", "spanning_tree"]


def spanning_tree(joints, nb, swap, make_free):
    """Tree joints in breadth-first order from the ground (``parent`` None) and the
    cut joints (Nikravesh (1988), §13.4.2): a joint reaching a body already in the tree closes a
    loop and is cut; a joint met from its child side is reversed by ``swap(j)``
    (False: it cannot be — it may still be met from the other side, else it is
    cut); a body no joint reaches gets ``make_free(k)`` (a floating base) and the
    search continues from it.  Shared by the planar and spatial trees."""
    adj: dict = {}
    for j in joints:
        adj.setdefault(j.parent, []).append(j)
        adj.setdefault(j.child, []).append(j)
    seen, used = {None}, set()
    order, cut, deferred = [], [], []

    def bfs(start):
        queue = deque([start])
        while queue:
            b = queue.popleft()
            for j in adj.get(b, []):
                if id(j) in used:
                    continue
                other = j.child if j.parent == b else j.parent
                if other in seen:                 # closes a loop: a cut joint
                    used.add(id(j))
                    cut.append(j)
                    continue
                if j.child != other and not swap(j):
                    deferred.append(j)
                    continue
                used.add(id(j))
                seen.add(other)
                order.append(j)
                queue.append(other)

    bfs(None)
    for k in range(nb):
        if k not in seen:
            order.append(make_free(k))
            seen.add(k)
            bfs(k)
    for j in deferred:
        if id(j) not in used:
            used.add(id(j))
            cut.append(j)
    return order, cut


class JointCoordinates(LoopClosure, Formulation):
    """The ``joint_coordinates`` formulation: ``JointCoordinates(system, settings)``
    is the planar or the spatial implementation, by the model's bodies."""

    name = "joint_coordinates"
    description = ("relative (joint) coordinates of a kinematic tree, Cartesian results; "
                   "loops through cut joints (Nikravesh (1988), §13.4; TMT: TAM 674 (2003))")
    full_state = False
    settings_schema = {
        "alpha": Param("number", "Baumgarte damping of the cut-joint / driver rows",
                       default=5.0, unit="1/time"),
        "beta": Param("number", "Baumgarte stiffness of the cut-joint / driver rows",
                      default=5.0, unit="1/time"),
        "solver": Param("choice", "forward dynamics: 'recursive' (articulated-body, O(N); "
                        "trees without cut rows), 'composite' (dense B^T M B), 'auto' "
                        "(recursive for trees: compiled, or NumPy above 10 joints)", default="auto",
                        choices=("auto", "recursive", "composite")),
        "cut_joints": Param("strings", "joints to keep as algebraic (cut) equations "
                            "rather than tree joints (default: chosen by the spanning "
                            "tree)", default=()),
        **LOOP_SETTINGS,
    }

    #: implementation by "the model is planar" (filled by ``__init_subclass__``)
    _implementations: ClassVar[dict[bool, type]] = {}

    def __init_subclass__(cls, planar: bool | None = None, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if planar is not None:
            JointCoordinates._implementations[planar] = cls

    def __new__(cls, system, settings=None):
        if cls is JointCoordinates:
            planar = bool(system.planar_only)
            try:
                cls = JointCoordinates._implementations[planar]
            except KeyError:
                raise ModelError("settings.formulation", "joint_coordinates: no "
                                 f"implementation for {'planar' if planar else 'spatial'} "
                                 "models is loaded (import "
                                 "mbplugins.formulations.joint_coordinates)") from None
        return super().__new__(cls)

    def work_rate(self, t):
        """Rate of the work channel W at the last :meth:`rhs`: the power of the
        non-conservative forces and of the cut-joint / driver rows, ``P_nc + lam* .
        (Phi*_q qd)`` (tree joints and normalisation rows do no work)."""
        if self._from_compiled:
            return self.compiled.power
        s = self.system
        q, qd = self.q_cur, self.qd_cur
        P = s.nonconservative_power(q, qd, t)
        if len(self.extra):
            J = s.last_jacobian
            P += float(self.solver.lam @ (J @ qd))
        return P
