"""Adams–Moulton of fixed order 1–4 as a standalone implicit method (``am``).

    y_n+1 = y_n + h Σ_{j=0..k−1} β_j f_n+1−j          (Nikravesh (1988), §12.3.2,
                                                      Table 12.2)

with β = (1) (AM1, backward Euler), (1, 1)/2 (AM2, the trapezoidal rule),
(5, 8, −1)/12 (AM3), (9, 19, −5, 1)/24 (AM4): the integral over ``[t_n, t_n+1]`` of
the polynomial interpolating ``f`` at ``t_n+1, t_n, …, t_n−k+2``
(:func:`adams_moulton_weights` derives them in exact rational arithmetic).  The
implicit equation ``y = base + hβ_0 f(t_n+1, y)`` is solved by the modified Newton
iteration of the θ-methods (:mod:`.implicit`: matrix ``I − hβ_0 J`` factorised once
and reused, the Jacobian re-evaluated only after a failed iteration;
Hairer & Wanner (1996), §IV.8), from the Adams–Bashforth predictor of order k − 1.

On the compiled loop of the dynamic analysis (DI, CS on built-in elements; no given
Jacobian, scalar Newton tolerances) it runs as ``mbcore._ext._steploop.run_fixedgrid``'s
method 'am' (``compiled_loop_kind() == "fixedgrid"``): the same steps, Newton
iterations, Jacobians, LU factorisations and evaluations as the Python driver.

Absolute stability: AM1 and AM2 are A-stable; AM3 and AM4 have bounded regions
(real intervals (−6, 0) and (−3, 0)), much larger than those of AB3 and AB4
((−6/11, 0), (−3/10, 0)) (Hairer & Wanner (1996), §V.1).
"""
from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from mbcore.integrate.base import FIXED_STEP_OPTIONS, NEWTON_OPTIONS, Option, int_range

from .classical import AB_COEFFICIENTS, _FixedGrid
from .implicit import ThetaMethod

__all__ = ["AdamsMoulton", "AM_COEFFICIENTS", "adams_moulton_weights"]


def adams_moulton_weights(k: int) -> list[Fraction]:
    """β_0..β_k−1 of AM_k, exact: ``β_j = ∫_0^1 L_j(s) ds`` with ``L_j`` the Lagrange
    basis polynomial of the nodes ``s_i = 1 − i`` (i = 0..k−1; s = (t − t_n)/h)."""
    nodes = [Fraction(1 - i) for i in range(k)]
    weights = []
    for j, sj in enumerate(nodes):
        coeffs = [Fraction(1)]                  # ∏_{i≠j} (s − s_i)/(s_j − s_i), ascending
        for i, si in enumerate(nodes):
            if i == j:
                continue
            d = sj - si
            coeffs = [(c_lo - si * c) / d for c, c_lo in
                      zip(coeffs + [Fraction(0)], [Fraction(0)] + coeffs)]
        weights.append(sum(c / (p + 1) for p, c in enumerate(coeffs)))
    return weights


#: Adams–Moulton weights β_j of ``y_n+1 = y_n + h Σ_j β_j f_n+1−j`` (Nikravesh (1988),
#: §12.3.2, Table 12.2), orders 1–4
AM_COEFFICIENTS: dict[int, np.ndarray] = {
    1: np.array([1.0]),
    2: np.array([1.0, 1.0]) / 2.0,
    3: np.array([5.0, 8.0, -1.0]) / 12.0,
    4: np.array([9.0, 19.0, -5.0, 1.0]) / 24.0,
}


class AdamsMoulton(_FixedGrid):
    """Adams–Moulton of fixed order k = 1–4, constant step, Newton.  The first k − 2
    steps (and a shortened last step, and the first after ``restart()``) are
    classical RK4 steps (order 4 ≥ k); then per step: the AB_{k−1} predictor, Newton
    iterations (one evaluation each) and ``f`` at the new point (one evaluation, kept
    for the history, as the trapezoidal rule does)."""

    name = "am"
    description = ("Adams–Moulton of fixed order 1–4, implicit, fixed step, Newton, "
                   "started by RK4 (Nikravesh (1988), §12.3.2, Table 12.2)")
    order = 4
    implicit = True
    options = {**FIXED_STEP_OPTIONS,
               "order": Option(4, "order k of the Adams–Moulton formula (1–4; 1 is "
                               "backward Euler, 2 the trapezoidal rule)", int_range(1, 4)),
               **NEWTON_OPTIONS}
    #: step grid, derivative at t, past derivatives (newest first), Newton Jacobian, LU
    state_fields = ("_h", "_t_start", "_i", "_f", "_hist", "_J", "_jac_current", "_lu",
                    "_c_lu")

    _solve = ThetaMethod._solve                 # modified Newton for y = base + c f(t, y)
    _newton = ThetaMethod._newton               # its Jacobian/LU policy
    #: the compiled twin: run_fixedgrid's method 'am' (``_FixedGrid.compiled_loop_kind``)
    LOOP_METHOD = "am"
    LOOP_KEEPS = ("_implicit_step", "_solve", "_newton", "jac", "lu_factor", "lu_solve")

    def loop_start(self) -> dict:
        """``_FixedGrid.loop_start`` with the AM weights (``beta``), the predictor's
        (``corr``), ``f`` at the start and the Newton options."""
        o = self.opts
        return {**super().loop_start(), "f": self._f,
                "beta": np.array(self._beta, dtype=float),
                "corr": np.array(self._pred, dtype=float),
                "maxiter": int(o["newton_maxiter"]), "newton_rtol": o["newton_rtol"],
                "newton_atol": o["newton_atol"]}

    def restore_loop_history(self, h: Mapping[str, Any]) -> dict[str, Any]:
        """``_FixedGrid.restore_loop_history``; the loop's Jacobian ``J`` and ``c_lu``
        (``hβ_0`` of its LU, 0: none) returned as ``J0``, ``c_lu0``
        (``ThetaMethod.restore_loop_history``)."""
        super().restore_loop_history(h)
        if h.get("J") is None:
            return {}
        return {"J0": np.ascontiguousarray(h["J"], dtype=float).ravel(),
                "c_lu0": float(h["c_lu"])}

    def _restart_impl(self) -> None:
        super()._restart_impl()
        k = self.order = self.opts["order"]
        self._beta = AM_COEFFICIENTS[k]
        self._pred = AB_COEFFICIENTS[max(k - 1, 1)]
        self._hist = () if self._f is None else (self._f,)
        self._J = None
        self._jac_current = False
        self._lu = None
        self._c_lu = None
        self._I = np.eye(self.n)

    def _step_impl(self):
        t, y = self.t, self.y
        t_new, full = self._next_time()
        h = t_new - t
        k = self._beta.size
        if full and len(self._hist) >= k - 1:
            y_new = self._implicit_step(t_new, y, h)
        else:                                   # starter (or shortened last step)
            y_new = self._rk4(t, y, self._f, h)
        f_new = self.fun(t_new, y_new).copy()
        self._accept(t_new, y_new, f_new)
        self._hist = ((f_new,) + self._hist)[:max(k - 1, 1)] if full else (f_new,)
        return True, None

    def _implicit_step(self, t_new: float, y: np.ndarray, h: float) -> np.ndarray:
        beta, hist = self._beta, self._hist
        base = y.copy()
        for b, fj in zip(beta[1:], hist):
            base += (h * b) * fj
        y_pred = y.copy()
        for b, fj in zip(self._pred, hist):
            y_pred += (h * b) * fj
        return self._newton(t_new, y, base, y_pred, h * beta[0], h)
