"""Built-in formulations of the equations of motion (spec/algorithms.md §4)."""
from .baumgarte import DI, CS
from .partitioning import CP

FORMULATIONS = [DI, CS, CP]
