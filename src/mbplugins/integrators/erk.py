"""Embedded explicit Runge–Kutta pairs with error control and dense output.

* ``bs23``: Bogacki–Shampine 3(2), FSAL, cubic Hermite dense output (the ntrp23
  form of MATLAB's ode23).  P. Bogacki, L.F. Shampine, *Appl. Math. Lett.* 2
  (1989) 321–325.
* ``dopri5``: Dormand–Prince 5(4), FSAL, quartic dense output with Shampine's
  coefficients.  J.R. Dormand, P.J. Prince, *J. Comput. Appl. Math.* 6 (1980)
  19–26; L.F. Shampine, *Math. Comp.* 46 (1986) 135–150; Hairer, Nørsett &
  Wanner, *Solving ODEs I*, §II.4–II.6.

Sources in the course material: TAM 674 (2003), lecture of 24 March (ode23, FSAL, ntrp23); the
coefficients of Bogacki & Shampine (1989) and Dormand & Prince (1980), checked numerically
by tests/test_integrators.py.

The pairs are tableaux on the core's :class:`mbcore.integrate.rk.EmbeddedRK`
(re-exported here with ``Dop853DenseOutput`` = ``rk.HairerDenseOutput``), which
steps them in Python, holds the controller and declares their compiled twin.

Controller (Hairer, Nørsett & Wanner (1993), §II.4): error ``e = h·Σ E_i k_i``, scale
``atol + rtol·max(|y_n|, |y_n+1|)``, RMS norm, accept if ≤ 1, propagate the
higher-order solution (local extrapolation), ``h_new = h·min(5, max(0.2,
0.9·err^(-1/(q+1))))`` with q the order of the error estimator, no increase
right after a rejection.
"""
from __future__ import annotations

import numpy as np

from mbcore.integrate.rk import EmbeddedRK
from mbcore.integrate.rk import HairerDenseOutput as Dop853DenseOutput

__all__ = ["EmbeddedRK", "BS23", "DOPRI5", "DOP853", "Dop853DenseOutput"]


class BS23(EmbeddedRK):
    name = "bs23"
    description = ("Bogacki–Shampine 3(2) embedded RK, FSAL, cubic dense output "
                   "(ode23; TAM 674 (2003), lecture of 24 March)")
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
                   "(ode45; Dormand & Prince (1980))")
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
def _scipy_dop853_module():
    """scipy's transcription of the DOP853 tableau (a NumPy-only file), loaded without
    importing ``scipy.integrate`` (that package imports ``scipy.optimize`` and costs
    ~0.1 s at the first run of a process, for arrays this module needs once) nor
    SciPy's package ``__init__`` (~10 ms: the folder is found by ``find_spec``)."""
    import importlib.util
    import os

    scipy_spec = importlib.util.find_spec("scipy")
    folders = list(getattr(scipy_spec, "submodule_search_locations", None) or [])
    path = os.path.join(folders[0] if folders else "", "integrate", "_ivp",
                        "dop853_coefficients.py")
    spec = importlib.util.spec_from_file_location("_mbcore_dop853_coefficients", path)
    if not folders or spec is None or spec.loader is None or not os.path.isfile(path):
        from scipy.integrate._ivp import dop853_coefficients   # another layout
        return dop853_coefficients
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dop853_coefficients():
    """The DOP853 tableau of Hairer's code (12 stages + FSAL, 3 extra stages for
    the 7th-order dense output), taken from scipy (which transcribes Hairer's
    dop853.f), so that the coefficients are not retyped."""
    c = _scipy_dop853_module()
    s = c.N_STAGES
    return dict(A=np.array(c.A[:s, :s]), B=np.array(c.B), C=np.array(c.C[:s]),
                E3=np.array(c.E3), E5=np.array(c.E5), D=np.array(c.D),
                A_EXTRA=np.array(c.A[s + 1:]), C_EXTRA=np.array(c.C[s + 1:]))


class DOP853(EmbeddedRK):
    """Dormand–Prince 8(5,3): order 8, error estimated with the 5th- and
    3rd-order embedded solutions combined as in Hairer's DOP853
    (``err = err5² / sqrt(err5² + 0.01 err3²)``, behaving like an order-8
    estimate, exponent −1/8), FSAL, 7th-order dense output costing 3 extra
    evaluations in the steps where it is requested."""

    name = "dop853"
    description = ("Dormand–Prince 8(5,3) embedded RK, FSAL, 7th-order dense output "
                   "(Hairer's DOP853; Hairer, Nørsett & Wanner (1993), §II.5, §II.10)")
    order = 8
    error_order = 7
    TOL_SCALE = 0.005
    _c = _dop853_coefficients()
    A, B, C = _c["A"], _c["B"], _c["C"]
    E3, E5, D = _c["E3"], _c["E5"], _c["D"]
    A_EXTRA, C_EXTRA = _c["A_EXTRA"], _c["C_EXTRA"]
    E = E5                                  # the 5th-order difference (for reference)
    del _c
