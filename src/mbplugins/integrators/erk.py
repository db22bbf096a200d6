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

from mbcore.integrate.base import ADAPTIVE_OPTIONS, Integrator
from mbcore.integrate.common import RKDenseOutput, rms_norm, select_initial_step

__all__ = ["EmbeddedRK", "BS23", "DOPRI5"]

SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 5.0


class EmbeddedRK(Integrator):
    """Embedded RK pair with FSAL.  Class data (plain arrays): ``A`` (s×s), ``B``
    (s), ``C`` (s) for the propagated solution, ``E`` (s+1) the error weights
    (difference of the two solutions, including the FSAL stage), ``P``
    ((s+1)×degree) the dense-output coefficients, ``error_order`` q."""

    adaptive = True
    options = ADAPTIVE_OPTIONS
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    E: np.ndarray
    P: np.ndarray
    error_order: int

    def _restart_impl(self) -> None:
        s = self.B.size
        self._K = np.empty((s + 1, self.n))
        self._rtol = self.opts["rtol"]
        self._atol = self.opts["atol"]
        self._max_step = self.opts["max_step"]
        self._exponent = -1.0 / (self.error_order + 1)
        self._y_old = None
        if self.status != "running":
            self._f = None
            return
        self._f = self.fun(self.t, self.y).copy()
        if self.opts["first_step"] is not None:
            self._h_abs = self.opts["first_step"]
        else:
            self._h_abs = select_initial_step(self.fun, self.t, self.y, self._f,
                                              self.direction, self.order, self._rtol,
                                              self._atol, self.t_bound, self._max_step)

    def _step_impl(self):
        t, y, f = self.t, self.y, self._f
        A, B, C, E, K = self.A, self.B, self.C, self.E, self._K
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
            err = rms_norm((h * (E @ K)) / scale)
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

    def _dense_output_impl(self):
        return RKDenseOutput(self.t_old, self.t, self._y_old, self._K, self.P)


class BS23(EmbeddedRK):
    name = "bs23"
    description = ("Bogacki–Shampine 3(2) embedded RK, FSAL, cubic dense output "
                   "(ode23; 001 l.135–137; spec §2.10)")
    order = 3
    error_order = 2
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

