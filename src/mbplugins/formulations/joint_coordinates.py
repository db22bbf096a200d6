"""The joint-coordinate formulation ``joint_coordinates`` (Nikravesh (1988), §13.4):
the formulation class (:class:`JointCoordinates`, which builds the planar or the
spatial implementation for the model) with both implementations loaded —
:mod:`.jc_planar` (planar trees, O(N) recursion, loops through cut joints),
:mod:`.jc_spatial` (spatial trees), :mod:`.jc_loops` (loop closure) and
:mod:`.jc_common` (the spanning tree)."""
from __future__ import annotations

from .jc_common import JointCoordinates, spanning_tree
from .jc_planar import PlanarJointCoordinates, PlanarTree, articulated_body
from .jc_spatial import SpatialJointCoordinates, SpatialTree

__all__ = ["JointCoordinates", "PlanarJointCoordinates", "SpatialJointCoordinates",
           "PlanarTree", "SpatialTree", "spanning_tree", "articulated_body"]

# the class's public home is this module (the registry and pickles name it here;
# it is defined in jc_common so that both implementations can subclass it)
JointCoordinates.__module__ = __name__
