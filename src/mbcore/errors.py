"""Exception hierarchy of mbcore.

Every error raised for bad input names *where* the problem is: the key path in the
model file (``joints[3].point_j``), the element name, or the simulation time.
"""
from __future__ import annotations

from typing import Sequence


class MbcoreError(Exception):
    """Base class of every error raised by mbcore."""


class ModelError(MbcoreError, ValueError):
    """A model description (file or Python API) is invalid.

    ``path`` is the key path of the offending entry, e.g. ``joints[3].point_j``;
    the message reads ``"<path>: <reason>"``.
    """

    def __init__(self, path: str, message: str):
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)


class PluginError(MbcoreError):
    """A plugin is broken or two plugins claim the same type name."""


class UnknownTypeError(ModelError):
    """A model names an element type that no installed plugin provides."""


class AnalysisError(MbcoreError):
    """An analysis could not proceed.  ``t`` is the simulation time at failure."""

    def __init__(self, message: str, t: float | None = None):
        self.t = t
        self.reason = message          # the message without the time prefix
        super().__init__(message if t is None else f"t = {t:.9g}: {message}")


class SingularJacobianError(AnalysisError):
    """The constraint Jacobian is (numerically) rank deficient.

    ``constraints`` lists the names of the constraint equations involved in the
    dependency (the rows carrying weight in the left null vector).
    """

    def __init__(self, message: str, t: float | None = None,
                 constraints: Sequence[str] = ()):
        self.constraints = list(constraints)
        super().__init__(message, t)


class ConvergenceError(AnalysisError):
    """Newton-Raphson did not converge (e.g. a mechanism driven into lock-up)."""

    def __init__(self, message: str, t: float | None = None,
                 constraints: Sequence[str] = ()):
        self.constraints = list(constraints)
        super().__init__(message, t)


class LockupError(ConvergenceError):
    """No assembly exists near the predicted configuration: the mechanism locks up
    (dead point / limit position) — Nikravesh (1988), §3.2.2, Prob. 5.7."""


class AssemblyError(ConvergenceError):
    """The initial configuration could not be assembled from the estimates
    (Nikravesh (1988), §5.1: Newton-Raphson from the initial estimates did not converge)."""


class ConflictingConstraintsError(AnalysisError):
    """A constraint equation removed as redundant (dependent on the others at the
    time of its removal) no longer holds along the motion the others give: the
    constraint set conflicts.  ``constraints`` names the removed equation(s)
    first, then the kept equations it was a combination of."""

    def __init__(self, message: str, t: float | None = None,
                 constraints: Sequence[str] = ()):
        self.constraints = list(constraints)
        super().__init__(message, t)


class ElementEvaluationError(MbcoreError):
    """Raised by an element type's evaluation for element ``index`` of its group
    (e.g. a spring of zero length has no direction); the System re-raises it as an
    :class:`AnalysisError` naming the element and the time."""

    def __init__(self, index: int, reason: str):
        self.index = index
        self.reason = reason
        super().__init__(f"element {index}: {reason}")


class ResultWriteError(AnalysisError):
    """The result file could not be written during a run (disk full, the file-size
    limit ``RLIMIT_FSIZE``, an I/O error).  ``path`` is the file, ``t`` the time of
    the run when it happened; the file keeps the rows flushed before (its status says
    ``failed`` and why when it could still be updated, else it stays ``running``,
    like the file of a killed run)."""

    def __init__(self, message: str, t: float | None = None, path: str = ""):
        self.path = path
        super().__init__(message, t)
