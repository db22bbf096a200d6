"""Embedded explicit Runge–Kutta pairs with error control and dense output.

* ``bs23``: Bogacki–Shampine 3(2), FSAL, cubic Hermite dense output (the ntrp23
  form of MATLAB's ode23).  P. Bogacki, L.F. Shampine, *Appl. Math. Lett.* 2
  (1989) 321–325.
* ``dopri5``: Dormand–Prince 5(4), FSAL, quartic dense output with Shampine's
  coefficients.  J.R. Dormand, P.J. Prince, *J. Comput. Appl. Math.* 6 (1980)
  19–26; L.F. Shampine, *Math. Comp.* 46 (1986) 135–150; Hairer, Nørsett &
  Wanner, *Solving ODEs I*, §II.4–II.6.

Sources in the course material: 001 l.135–137 (ode23, FSAL, ntrp23); the
coefficients, controller and dense output are spec/algorithms.md §2.10
(✓num there; re-checked by tests/test_integrators.py).

Controller (spec §2.10): error ``e = h·Σ E_i k_i``, scale
``atol + rtol·max(|y_n|, |y_n+1|)``, RMS norm, accept if ≤ 1, propagate the
higher-order solution (local extrapolation), ``h_new = h·min(5, max(0.2,
0.9·err^(-1/(q+1))))`` with q the order of the error estimator, no increase
right after a rejection.
"""
from __future__ import annotations

import numpy as np

from mbcore.integrate.base import (ADAPTIVE_OPTIONS, CALIBRATION_OPTIONS, Integrator,
                                   calibrated_tolerances)
from mbcore.integrate.common import DenseOutput, RKDenseOutput, rms_norm, select_initial_step

__all__ = ["EmbeddedRK", "BS23", "DOPRI5", "DOP853", "Dop853DenseOutput"]

SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 5.0


class EmbeddedRK(Integrator):
    """Embedded RK pair with FSAL.  Class data (plain arrays): ``A`` (s×s), ``B``
    (s), ``C`` (s) for the propagated solution, ``E`` (s+1) the error weights
    (difference of the two solutions, including the FSAL stage), ``P``
    ((s+1)×degree) the dense-output coefficients, ``error_order`` q."""

    adaptive = True
    options = {**ADAPTIVE_OPTIONS, **CALIBRATION_OPTIONS}
    #: internal tolerance = TOL_SCALE × user tolerance when ``calibrate`` (measured,
    #: docs/integrators.md "Tolerance calibration")
    TOL_SCALE = 1.0
    #: step-size controller (also read by the compiled loop)
    SAFETY, MIN_FACTOR, MAX_FACTOR = SAFETY, MIN_FACTOR, MAX_FACTOR
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    E: np.ndarray
    P: np.ndarray
    error_order: int

    @classmethod
    def compiled_loop_kind(cls):
        """'embedded' unless a subclass changes the step or the error norm."""
        if cls._step_impl is EmbeddedRK._step_impl and \
                cls._error_norm is EmbeddedRK._error_norm:
            return "embedded"
        return None

    def _restart_impl(self) -> None:
        s = self.B.size
        self._K = np.empty((s + 1, self.n))
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
        t, y, f = self.t, self.y, self._f
        A, B, C, K = self.A, self.B, self.C, self._K
        s = B.size
        rtol, atol = self._rtol, self._atol
        min_step = self._min_step(t)
        h_abs = min(self._h_abs, self._max_step)
        if h_abs < min_step:
            h_abs = min_step
        rejected = False
        fun = self.fun
        while True:
            if h_abs < min_step:
                self._step_too_small(h_abs)
            h = self.direction * h_abs
            t_new = t + h
            if self.direction * (t_new - self.t_bound) > 0 or \
                    abs(self.t_bound - t_new) < min_step:
                t_new = self.t_bound
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
                    factor = MAX_FACTOR
                else:
                    factor = min(MAX_FACTOR, SAFETY * err ** self._exponent)
                if rejected:
                    factor = min(1.0, factor)
                h_abs *= factor
                break
            self._reject_error_test()
            h_abs *= max(MIN_FACTOR, SAFETY * err ** self._exponent)
            rejected = True
        self._y_old = y
        self.t = t_new
        self.y = y_new
        self._f = K[s].copy()
        self._h_abs = h_abs
        return True, None

    def _error_norm(self, h, K, scale) -> float:
        return rms_norm((h * (self.E @ K)) / scale)

    def _dense_output_impl(self):
        return RKDenseOutput(self.t_old, self.t, self._y_old, self._K, self.P)


class BS23(EmbeddedRK):
    name = "bs23"
    description = ("Bogacki–Shampine 3(2) embedded RK, FSAL, cubic dense output "
                   "(ode23; 001 l.135–137; spec §2.10)")
    order = 3
    error_order = 2
    TOL_SCALE = 0.005
    C = np.array([0.0, 1 / 2, 3 / 4])
    A = np.array([[0.0, 0.0, 0.0],
                  [1 / 2, 0.0, 0.0],
                  [0.0, 3 / 4, 0.0]])
    B = np.array([2 / 9, 1 / 3, 4 / 9])
    B_HAT = np.array([7 / 24, 1 / 4, 1 / 3, 1 / 8])        # order 2, uses the FSAL stage
    E = np.append(B, 0.0) - B_HAT                           # = (-5/72, 1/12, 1/9, -1/8)
    P = np.array([[1.0, -4 / 3, 5 / 9],
                  [0.0, 1.0, -2 / 3],
                  [0.0, 4 / 3, -8 / 9],
                  [0.0, -1.0, 1.0]])


class DOPRI5(EmbeddedRK):
    name = "dopri5"
    description = ("Dormand–Prince 5(4) embedded RK, FSAL, quartic dense output "
                   "(ode45; spec §2.10)")
    order = 5
    error_order = 4
    TOL_SCALE = 0.005
    C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
    A = np.array([
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [1 / 5, 0.0, 0.0, 0.0, 0.0, 0.0],
        [3 / 40, 9 / 40, 0.0, 0.0, 0.0, 0.0],
        [44 / 45, -56 / 15, 32 / 9, 0.0, 0.0, 0.0],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0.0, 0.0],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0.0]])
    B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
    B_HAT = np.array([5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200,
                      187 / 2100, 1 / 40])
    E = np.append(B, 0.0) - B_HAT
    # Shampine (1986) continuous extension, b_i(s) = Σ_j P[i, j] s^(j+1)
    P = np.array([
        [1.0, -8048581381 / 2820520608, 8663915743 / 2820520608,
         -12715105075 / 11282082432],
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 131558114200 / 32700410799, -68118460800 / 10900136933,
         87487479700 / 32700410799],
        [0.0, -1754552775 / 470086768, 14199869525 / 1410260304,
         -10690763975 / 1880347072],
        [0.0, 127303824393 / 49829197408, -318862633887 / 49829197408,
         701980252875 / 199316789632],
        [0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
        [0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]])



# ----------------------------------------------------------------------------------
# Dormand–Prince 8(5,3)
# ----------------------------------------------------------------------------------
def _dop853_coefficients():
    """The DOP853 tableau of Hairer's code (12 stages + FSAL, 3 extra stages for
    the 7th-order dense output), taken from scipy (which transcribes Hairer's
    dop853.f), so that the coefficients are not retyped."""
    from scipy.integrate._ivp import dop853_coefficients as c
    s = c.N_STAGES
    return dict(A=np.array(c.A[:s, :s]), B=np.array(c.B), C=np.array(c.C[:s]),
                E3=np.array(c.E3), E5=np.array(c.E5), D=np.array(c.D),
                A_EXTRA=np.array(c.A[s + 1:]), C_EXTRA=np.array(c.C[s + 1:]))


class Dop853DenseOutput(DenseOutput):
    """Hairer's DOP853 continuous extension (CONTD8), a polynomial of degree 7 in
    ``s = (t - t_old)/h``, evaluated in the nested form
    ``y_old + s(F0 + (1-s)(F1 + s(F2 + (1-s)(F3 + ...))))``."""

    __slots__ = ("y_old", "F")

    def __init__(self, t_old, t, y_old, F):
        super().__init__(t_old, t)
        self.y_old = y_old
        self.F = F

    def _call_impl(self, s):
        x = s[:, None]
        y = np.zeros((s.size, self.y_old.size))
        for i, f in enumerate(self.F[::-1]):
            y += f
            y *= x if i % 2 == 0 else (1 - x)
        return y + self.y_old


class DOP853(EmbeddedRK):
    """Dormand–Prince 8(5,3): order 8, error estimated with the 5th- and
    3rd-order embedded solutions combined as in Hairer's DOP853
    (``err = err5² / sqrt(err5² + 0.01 err3²)``, behaving like an order-8
    estimate, exponent −1/8), FSAL, 7th-order dense output costing 3 extra
    evaluations in the steps where it is requested."""

    name = "dop853"
    description = ("Dormand–Prince 8(5,3) embedded RK, FSAL, 7th-order dense output "
                   "(Hairer's DOP853; spec §2.10 optional 8(5,3))")
    order = 8
    error_order = 7
    TOL_SCALE = 0.005
    _c = _dop853_coefficients()
    A, B, C = _c["A"], _c["B"], _c["C"]
    E3, E5, D = _c["E3"], _c["E5"], _c["D"]
    A_EXTRA, C_EXTRA = _c["A_EXTRA"], _c["C_EXTRA"]
    E = E5                                  # the 5th-order difference (for reference)
    del _c

    @classmethod
    def compiled_loop_kind(cls):
        """'embedded': the compiled loop knows Hairer's norm (E3) and the
        extra-stage dense output (A_EXTRA, C_EXTRA, D) — unless a subclass changes
        the step or the norm."""
        if cls._error_norm is DOP853._error_norm and cls._step_impl is DOP853._step_impl:
            return "embedded"
        return None

    def _restart_impl(self) -> None:
        super()._restart_impl()
        self._dense_cache = None

    def _error_norm(self, h, K, scale) -> float:
        err5 = (self.E5 @ K) / scale
        err3 = (self.E3 @ K) / scale
        e5, e3 = float(err5 @ err5), float(err3 @ err3)
        if e5 == 0.0 and e3 == 0.0:
            return 0.0
        return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * scale.size)

    def _step_impl(self):
        self._dense_cache = None
        return super()._step_impl()

    def _dense_output_impl(self):
        if self._dense_cache is not None:
            return self._dense_cache
        s = self.B.size
        h = self.t - self.t_old
        y_old = self._y_old
        K = np.empty((s + 1 + self.C_EXTRA.size, self.n))
        K[:s + 1] = self._K
        for i, (a, c) in enumerate(zip(self.A_EXTRA, self.C_EXTRA), start=s + 1):
            K[i] = self.fun(self.t_old + c * h, y_old + h * (a[:i] @ K[:i]))
        F = np.empty((7, self.n))
        f_old, f_new = K[0], K[s]
        dy = self.y - y_old
        F[0] = dy
        F[1] = h * f_old - dy
        F[2] = 2 * dy - h * (f_new + f_old)
        F[3:] = h * (self.D @ K)
        self._dense_cache = Dop853DenseOutput(self.t_old, self.t, y_old.copy(), F)
        return self._dense_cache
