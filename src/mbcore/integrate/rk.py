"""Explicit Runge–Kutta methods given by their tableau, and their compiled twin.

:class:`FixedStepRK` (a fixed step, RUNGK4 semantics) and :class:`EmbeddedRK` (an
embedded pair with error control and dense output) are complete integrators: a
subclass — built-in (``mbplugins.integrators``: euler, heun, midpoint, rk4, bs23,
dopri5, dop853) or third-party — declares only its coefficients as class
attributes.  Because the coefficients are plain data, the compiled loop
(:mod:`mbcore.integrate.fastloop`, ``mbcore._ext._steploop.run_rk``) steps the same method in
C when the right-hand side is compiled: :func:`compiled_twin` reads them.

The compiled twin (integrator contract, docs/integrators.md "Compiled twin").  A
class whose ``compiled_loop_kind()`` returns ``"fixed"`` or ``"embedded"`` declares

* both: ``A`` (s×s, strictly lower triangular; a larger A is cut to s×s), ``B``
  (s), ``C`` (s), ``order``;
* ``"embedded"`` also: ``E`` (s+1) error weights over the s stages and the stage
  ``f(t_new, y_new)`` (the difference of the two embedded solutions; its last
  entry is 0 for a pair that is not FSAL), ``error_order`` q (controller exponent
  ``-1/(q+1)``), ``P`` ((s+1)×degree) the continuous extension
  ``b_i(θ) = Σ_j P[i, j] θ^(j+1)`` (default, when ``P`` is None: the cubic Hermite
  interpolant from ``f`` at both ends, :func:`hermite_dense_coefficients`), and the
  controller ``SAFETY``, ``MIN_FACTOR``, ``MAX_FACTOR``;
* optionally (Hairer's DOP853 form): ``E3`` and ``E5`` (s+1) for the combined error
  ``|h| e5 / sqrt((e5 + 0.01 e3) N)``, and ``A_EXTRA`` (3×(s+4)), ``C_EXTRA`` (3),
  ``D`` (4×(s+4)) for the 7th-order continuous extension with three extra stages.

Both loops read these same arrays, and the Python steps below implement exactly
the formulas of the C loop, so the two runs
agree to rounding.  A subclass that overrides ``_step_impl``, ``_error_norm`` or
``_dense_output_impl`` keeps the Python driver (``compiled_loop_kind()`` is then
None).  The tableau is checked when the class is created (a ``TypeError`` names
the class and the array).

References: Nikravesh (1988), §12.2–12.2.2 (Eqs. 12.10, 12.15–12.17, subroutine RUNGK4);
TAM 674 (2003), lectures of 3, 10 and 24 March; Hairer, Nørsett & Wanner (1993),
§II.4–II.6 (controller, dense output, DOP853).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .base import ADAPTIVE_OPTIONS, CALIBRATION_OPTIONS, FIXED_STEP_OPTIONS, Integrator, \
    calibrated_tolerances
from .common import DenseOutput, HermiteDenseOutput, RKDenseOutput, rms_norm, \
    select_initial_step

__all__ = ["FixedStepRK", "start_fixed_grid", "EmbeddedRK", "RKTwin", "compiled_twin",
           "instance_twin",
           "hermite_dense_coefficients", "HairerDenseOutput", "SAFETY", "MIN_FACTOR",
           "MAX_FACTOR"]

#: default step-size controller of :class:`EmbeddedRK` (Hairer, Nørsett & Wanner (1993), §II.4)
SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 5.0


def hermite_dense_coefficients(B: np.ndarray) -> np.ndarray:
    """``P`` ((s+1)×3) of the cubic Hermite interpolant between ``(y_old, f_old =
    K_0)`` and ``(y_new, f_new = K_s)`` written as a continuous RK extension
    (``y_new - y_old = h Σ B_i K_i``): ``b_i(θ) = B_i (3θ² - 2θ³) + δ_i0 (θ - 2θ² +
    θ³) + δ_is (θ³ - θ²)``.  For Bogacki–Shampine 3(2) this is its own P (ntrp23)."""
    B = np.asarray(B, dtype=float)
    s = B.size
    P = np.zeros((s + 1, 3))
    P[:s] = B[:, None] * np.array([0.0, 3.0, -2.0])
    P[0] += (1.0, -2.0, 1.0)
    P[s] += (0.0, -1.0, 1.0)
    return P


def _check_tableau(cls: type, embedded: bool) -> None:
    """Shapes of a class's coefficients (only classes that declare ``B``)."""
    if "B" not in vars(cls):
        return
    B = np.asarray(cls.B, dtype=float)
    s = B.size

    def bad(what: str) -> TypeError:
        return TypeError(f"integrator class {cls.__module__}.{cls.__qualname__} "
                         f"({getattr(cls, 'name', '')!r}): {what}")
    if B.ndim != 1 or s == 0:
        raise bad(f"B must be a non-empty vector, got shape {B.shape}")
    A = np.asarray(cls.A, dtype=float)
    if A.ndim != 2 or A.shape[0] < s or A.shape[1] < s:
        raise bad(f"A must be at least {s}×{s} (s = B.size), got shape {A.shape}")
    if np.any(np.triu(A[:s, :s]) != 0.0):
        raise bad("A must be strictly lower triangular (an explicit method)")
    if np.asarray(cls.C, dtype=float).shape != (s,):
        raise bad(f"C must have {s} entries, got shape {np.shape(cls.C)}")
    if not embedded:
        return
    if np.asarray(cls.E, dtype=float).shape != (s + 1,):
        raise bad(f"E must have s + 1 = {s + 1} entries (the last for the stage "
                  f"f(t_new, y_new)), got shape {np.shape(cls.E)}")
    P = getattr(cls, "P", None)
    if P is not None and (np.ndim(P) != 2 or np.shape(P)[0] != s + 1):
        raise bad(f"P must have s + 1 = {s + 1} rows, got shape {np.shape(P)}")
    if not isinstance(getattr(cls, "error_order", None), (int, np.integer)):
        raise bad("error_order (the order of the error estimate) must be an integer")
    if getattr(cls, "E3", None) is not None:
        for key, shape in (("E3", (s + 1,)), ("E5", (s + 1,)), ("C_EXTRA", (3,))):
            if np.shape(getattr(cls, key, None)) != shape:
                raise bad(f"{key} must have shape {shape} with E3 (Hairer's form)")
        for key, rows in (("A_EXTRA", 3), ("D", 4)):
            a = getattr(cls, key, None)
            if np.ndim(a) != 2 or np.shape(a)[0] != rows or np.shape(a)[1] < s + 4:
                raise bad(f"{key} must have {rows} rows and s + 4 = {s + 4} columns "
                          f"with E3 (Hairer's form)")


# ----------------------------------------------------------------------------------
# fixed step
# ----------------------------------------------------------------------------------
def start_fixed_grid(integ) -> None:
    """(Re)start the step grid ``t0 + i·h`` of a fixed-step method at its current
    (t, y) (the book's RUNGK4 semantics): the step from ``opts["step"]``, no previous
    step, ``f`` at the start (kept for the first stage of the next step)."""
    integ._h = integ.opts["step"]
    integ._t_start = integ.t
    integ._i = 0
    integ._y_old = None
    integ._f_old = None
    integ._f = integ.fun(integ.t, integ.y).copy() if integ.status == "running" else None


class FixedStepRK(Integrator):
    """Explicit Runge–Kutta method with a fixed step, given by its Butcher
    tableau ``A`` (s×s, strictly lower), ``B`` (s) and ``C`` (s) — plain arrays the
    compiled loop reuses.  Option: ``step``.

    RUNGK4 semantics: the time of step ``i`` is recomputed as ``t0 + i·h`` (no
    accumulated round-off); the last step is shortened to end on ``t_bound``.  The
    derivative at the end of a step is the first stage of the next one, so a run of N
    steps costs ``s·N + 1`` evaluations and the dense output (cubic Hermite, O(h⁴))
    costs nothing extra."""

    A: ClassVar[np.ndarray] = np.zeros((1, 1))
    B: ClassVar[np.ndarray] = np.ones(1)
    C: ClassVar[np.ndarray] = np.zeros(1)
    #: True: the tableau is the run's (set by ``_restart_impl`` from an option, e.g.
    #: ``rk2``'s ``a``): the compiled loop reads it from the constructed integrator
    #: (:func:`instance_twin`); :func:`compiled_twin` of the class refuses
    TABLEAU_PER_RUN: ClassVar[bool] = False
    options = FIXED_STEP_OPTIONS
    #: step, grid origin and index, derivative at t (exact resume, rule 11)
    state_fields = ("_h", "_t_start", "_i", "_f")

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _check_tableau(cls, embedded=False)

    @classmethod
    def compiled_loop_kind(cls):
        """'fixed' unless a subclass changes the step."""
        return "fixed" if cls._step_impl is FixedStepRK._step_impl else None

    def loop_start(self) -> dict:
        """``f0`` (f at the start) and the step ``h`` of the compiled 'fixed' loop."""
        return {"f0": self._f, "h": float(self._h)}

    def _restart_impl(self) -> None:
        s = self.B.size
        self._K = np.empty((s, self.n))
        start_fixed_grid(self)

    def _step_impl(self):
        t = self.t
        y = self.y
        self._i += 1
        hd = self.direction * self._h
        t_new = self._t_start + self._i * hd
        if self.direction * (t_new - self.t_bound) > -1e-9 * self._h:
            t_new = self.t_bound          # last (possibly shortened) step
        h = t_new - t
        if abs(h) < self._min_step(t):
            self._step_too_small(h, "remaining interval")
        A, C, K, fun = self.A, self.C, self._K, self.fun
        K[0] = self._f
        for s in range(1, self.B.size):
            K[s] = fun(t + C[s] * h, y + h * (A[s, :s] @ K[:s]))
        y_new = y + h * (self.B @ K)
        self._y_old, self._f_old = y, self._f
        self.t = t_new
        self.y = y_new
        self._f = fun(t_new, y_new).copy()
        return True, None

    def _dense_output_impl(self):
        return HermiteDenseOutput(self.t_old, self.t, self._y_old, self._f_old,
                                  self.y, self._f)


# ----------------------------------------------------------------------------------
# embedded pairs
# ----------------------------------------------------------------------------------
class HairerDenseOutput(DenseOutput):
    """Hairer's continuous extension (DOP853's CONTD8): a polynomial in ``s = (t -
    t_old)/h`` in the nested form ``y_old + s(F0 + (1-s)(F1 + s(F2 + (1-s)(F3 +
    ...))))`` (F0..F2 from the step's ends, the rest ``h D·K``)."""

    __slots__ = ("y_old", "F")

    def __init__(self, t_old, t, y_old, F):
        super().__init__(t_old, t)
        self.y_old = y_old
        self.F = F

    def _call_impl(self, s):
        x = s[:, None]
        y = np.zeros((s.size, self.y_old.size))
        last = len(self.F) - 1
        for j in range(last, -1, -1):       # F_j is multiplied by s (j even) or 1 - s
            y += self.F[j]
            y *= x if j % 2 == 0 else (1 - x)
        return y + self.y_old


class EmbeddedRK(Integrator):
    """Embedded RK pair, the solution of higher order propagated (local
    extrapolation).  Class data (plain arrays, the compiled twin — module
    docstring): ``A`` (s×s), ``B`` (s), ``C`` (s), ``E`` (s+1), ``P`` ((s+1)×degree
    or None: cubic Hermite), ``error_order`` q; optionally Hairer's ``E3``/``E5``
    error norm and ``A_EXTRA``/``C_EXTRA``/``D`` dense output.

    Controller (Hairer, Nørsett & Wanner (1993), §II.4): error ``e = h·Σ E_i k_i``, scale ``atol + rtol·max(|y_n|,
    |y_n+1|)``, RMS norm, accept if ≤ 1, ``h_new = h·min(MAX_FACTOR, max(MIN_FACTOR,
    SAFETY·err^(-1/(q+1))))``, no increase right after a rejection."""

    adaptive = True
    options = {**ADAPTIVE_OPTIONS, **CALIBRATION_OPTIONS}
    #: derivative at t (FSAL) and the controller's next step (exact resume, rule 11)
    state_fields = ("_f", "_h_abs")
    #: internal tolerance = TOL_SCALE × user tolerance when ``calibrate`` (measured,
    #: docs/integrators.md "Tolerance calibration")
    TOL_SCALE: ClassVar[float] = 1.0
    #: step-size controller (also read by the compiled loop)
    SAFETY: ClassVar[float] = SAFETY
    MIN_FACTOR: ClassVar[float] = MIN_FACTOR
    MAX_FACTOR: ClassVar[float] = MAX_FACTOR
    A: ClassVar[np.ndarray]
    B: ClassVar[np.ndarray]
    C: ClassVar[np.ndarray]
    E: ClassVar[np.ndarray]
    P: ClassVar[np.ndarray | None] = None
    error_order: ClassVar[int]
    #: Hairer's combined error norm and 7th-order dense output (DOP853): all or none
    E3: ClassVar[np.ndarray | None] = None
    E5: ClassVar[np.ndarray | None] = None
    A_EXTRA: ClassVar[np.ndarray | None] = None
    C_EXTRA: ClassVar[np.ndarray | None] = None
    D: ClassVar[np.ndarray | None] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _check_tableau(cls, embedded=True)
        if "B" in vars(cls) and cls.P is None and cls.E3 is None:
            cls.P = hermite_dense_coefficients(cls.B)

    @classmethod
    def compiled_loop_kind(cls):
        """'embedded' unless a subclass changes the step, the error norm or the dense
        output."""
        if cls._step_impl is EmbeddedRK._step_impl and \
                cls._error_norm is EmbeddedRK._error_norm and \
                cls._dense_output_impl is EmbeddedRK._dense_output_impl:
            return "embedded"
        return None

    def loop_start(self) -> dict:
        """``f0``, the first step ``h_abs`` and the resolved ``rtol``, ``atol``,
        ``max_step`` and controller ``exponent`` of the compiled 'embedded' loop."""
        return {"f0": self._f, "h_abs": float(self._h_abs), "rtol": self._rtol,
                "atol": self._atol, "max_step": float(self._max_step),
                "exponent": float(self._exponent)}

    def _restart_impl(self) -> None:
        s = self.B.size
        self._K = np.empty((s + 1, self.n))
        self._dense_cache = None
        self._rtol, self._atol = calibrated_tolerances(
            self.opts["rtol"], self.opts["atol"], self.TOL_SCALE,
            calibrate=self.opts["calibrate"])
        self._max_step = self.opts["max_step"]
        self._exponent = -1.0 / (self.error_order + 1)
        self._y_old = None
        if self.status != "running":
            self._f = None
            return
        self._f = self.fun(self.t, self.y).copy()
        resume, self._resume_h = getattr(self, "_resume_h", None), None
        if resume:                      # resume(): keep the controller's step size
            self._h_abs = resume
        elif self.opts["first_step"] is not None:
            self._h_abs = self.opts["first_step"]
        else:
            self._h_abs = select_initial_step(self.fun, self.t, self.y, self._f,
                                              self.direction, self.order, self._rtol,
                                              self._atol, self.t_bound, self._max_step)

    def resume(self, t: float, y) -> None:
        """Continue from a slightly changed state (a projection onto the constraint
        manifold after a step): a one-step method needs no history, so only the
        derivative is re-evaluated and the controller's next step size is kept (a
        full :meth:`restart` would choose a new first step, one evaluation more and
        usually a much smaller step)."""
        self._resume_h = self._h_abs if self.status == "running" else None
        self.restart(t, y)

    def _step_impl(self):
        self._dense_cache = None
        t, y, f = self.t, self.y, self._f
        A, B, C, K = self.A, self.B, self.C, self._K
        s = B.size
        rtol, atol = self._rtol, self._atol
        safety, min_factor, max_factor = self.SAFETY, self.MIN_FACTOR, self.MAX_FACTOR
        min_step = self._min_step(t)
        h_abs = min(self._h_abs, self._max_step)
        if h_abs < min_step:
            h_abs = min_step
        rejected = False
        fun = self.fun
        while True:
            t_new, _ = self._trial_end(t, h_abs, min_step)
            h = t_new - t
            h_abs = abs(h)
            K[0] = f
            for i in range(1, s):
                K[i] = fun(t + C[i] * h, y + h * (A[i, :i] @ K[:i]))
            y_new = y + h * (B @ K[:s])
            K[s] = fun(t_new, y_new)
            scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
            err = self._error_norm(h, K, scale)
            if err <= 1.0:
                if err == 0.0:
                    factor = max_factor
                else:
                    factor = min(max_factor, safety * err ** self._exponent)
                if rejected:
                    factor = min(1.0, factor)
                h_abs *= factor
                break
            self._reject_error_test()
            h_abs *= max(min_factor, safety * err ** self._exponent)
            rejected = True
        self._y_old = y
        self.t = t_new
        self.y = y_new
        self._f = K[s].copy()
        self._h_abs = h_abs
        return True, None

    def _error_norm(self, h, K, scale) -> float:
        if self.E3 is None:
            return rms_norm((h * (self.E @ K)) / scale)
        err5 = (self.E5 @ K) / scale       # Hairer's DOP853 norm
        err3 = (self.E3 @ K) / scale
        e5, e3 = float(err5 @ err5), float(err3 @ err3)
        if e5 == 0.0 and e3 == 0.0:
            return 0.0
        return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * scale.size)

    def _dense_output_impl(self):
        if self.D is None:
            return RKDenseOutput(self.t_old, self.t, self._y_old, self._K, self.P)
        if self._dense_cache is not None:
            return self._dense_cache
        s = self.B.size
        h = self.t - self.t_old
        y_old = self._y_old
        K = np.empty((s + 1 + self.C_EXTRA.size, self.n))
        K[:s + 1] = self._K
        for i, (a, c) in enumerate(zip(self.A_EXTRA, self.C_EXTRA), start=s + 1):
            K[i] = self.fun(self.t_old + c * h, y_old + h * (a[:i] @ K[:i]))
        F = np.empty((3 + self.D.shape[0], self.n))
        f_old, f_new = K[0], K[s]
        dy = self.y - y_old
        F[0] = dy
        F[1] = h * f_old - dy
        F[2] = 2 * dy - h * (f_new + f_old)
        F[3:] = h * (self.D[:, :K.shape[0]] @ K)
        self._dense_cache = HairerDenseOutput(self.t_old, self.t, y_old.copy(), F)
        return self._dense_cache


# ----------------------------------------------------------------------------------
# the twin
# ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RKTwin:
    """What the compiled loop (``run_rk``) needs of an explicit RK class."""

    kind: str                         # "fixed" or "embedded"
    A: np.ndarray                     # (s, s)
    B: np.ndarray                     # (s,)
    C: np.ndarray                     # (s,)
    E: np.ndarray                     # (s+1,) (zeros for a fixed step)
    P: np.ndarray                     # (s+1, degree) (zeros for a fixed step / Hairer)
    controller: tuple[float, float, float]   # SAFETY, MIN_FACTOR, MAX_FACTOR
    order: int
    hairer: dict = field(default_factory=dict)   # E3, A_extra, C_extra, D (run_rk keys)


def compiled_twin(icls: Any, kind: str) -> RKTwin:
    """The compiled twin of an explicit RK class of loop kind ``kind`` ('fixed' or
    'embedded'), read from its class attributes (module docstring).  A class whose
    tableau is the run's (``TABLEAU_PER_RUN``) has none: ``LoopFallback`` (the caller
    keeps the Python driver, or reads the constructed integrator's by
    :func:`instance_twin`)."""
    if isinstance(icls, type) and getattr(icls, "TABLEAU_PER_RUN", False):
        from .loop_result import LoopFallback
        raise LoopFallback(float("nan"))
    B = np.ascontiguousarray(icls.B, dtype=float)
    s = B.size
    A = np.ascontiguousarray(np.asarray(icls.A, dtype=float)[:s, :s])
    C = np.ascontiguousarray(icls.C, dtype=float)
    if kind != "embedded":
        return RKTwin(kind, A, B, C, np.zeros(s + 1), np.zeros((s + 1, 1)),
                      (1.0, 1.0, 1.0), int(icls.order))
    controller = (float(icls.SAFETY), float(icls.MIN_FACTOR), float(icls.MAX_FACTOR))
    if getattr(icls, "E3", None) is not None:
        nx = len(icls.C_EXTRA)
        ax = np.zeros((nx, s + 1 + nx))
        a_extra = np.asarray(icls.A_EXTRA, dtype=float)
        ax[:, :min(a_extra.shape[1], s + 1 + nx)] = a_extra[:, :s + 1 + nx]
        hairer = dict(E3=np.ascontiguousarray(icls.E3, dtype=float), A_extra=ax,
                      C_extra=np.ascontiguousarray(icls.C_EXTRA, dtype=float),
                      D=np.ascontiguousarray(np.asarray(icls.D, dtype=float)[:, :s + 1 + nx]))
        return RKTwin(kind, A, B, C, np.ascontiguousarray(icls.E5, dtype=float),
                      np.zeros((s + 1, 1)), controller, int(icls.order), hairer)
    P = getattr(icls, "P", None)
    P = hermite_dense_coefficients(B) if P is None else P
    return RKTwin(kind, A, B, C, np.ascontiguousarray(icls.E, dtype=float),
                  np.ascontiguousarray(P, dtype=float), controller, int(icls.order))


def instance_twin(integ: Any, twin: RKTwin | None = None) -> RKTwin | None:
    """The 'fixed' twin of a constructed integrator: ``twin`` (its class's) when the
    object steps with the class's tableau, else the object's own ``A``, ``B``, ``C``
    (a tableau chosen per run by an option, e.g. ``rk2``'s weight ``a``; Nikravesh
    (1988), Eqs. 12.13–12.14; ``twin`` None: the class has none, ``TABLEAU_PER_RUN``),
    or None when those are not an explicit tableau (B a non-empty vector, A at least
    s×s and strictly lower triangular, C of s entries, all finite): the caller keeps
    the Python driver."""
    try:
        B = np.ascontiguousarray(integ.B, dtype=float)
        A = np.asarray(integ.A, dtype=float)
        C = np.ascontiguousarray(integ.C, dtype=float)
    except (TypeError, ValueError):
        return None
    s = B.size
    if (B.ndim != 1 or s == 0 or A.ndim != 2 or A.shape[0] < s or A.shape[1] < s
            or C.shape != (s,)):
        return None
    A = np.ascontiguousarray(A[:s, :s])
    if (twin is not None and np.array_equal(A, twin.A) and np.array_equal(B, twin.B)
            and np.array_equal(C, twin.C)):
        return twin
    if (np.any(np.triu(A) != 0.0) or not np.all(np.isfinite(A))
            or not np.all(np.isfinite(B)) or not np.all(np.isfinite(C))):
        return None
    order = getattr(integ, "order", None if twin is None else twin.order)
    return RKTwin("fixed", A, B, C, np.zeros(s + 1), np.zeros((s + 1, 1)),
                  (1.0, 1.0, 1.0), int(order))
