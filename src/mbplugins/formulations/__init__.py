"""Built-in formulations of the equations of motion (spec/algorithms.md §4)."""
from .baumgarte import DI, CS
from .partitioning import CP
from .ggl import GGL
from .omega import AngularVelocityDI
from .joint_coordinates import JointCoordinates
from .penalty import Penalty
from .projection import Projection
from .stiff import Stiff

FORMULATIONS = [DI, CS, CP, Projection, GGL, Penalty, Stiff, AngularVelocityDI,
                JointCoordinates]
