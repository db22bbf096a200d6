"""The accuracy contract on spatial problems (benchmarks/accuracy3d.py): with dopri5 at
rtol 1e-6 (atol 1e-8) the global error of di, cs, projection and joint_coordinates
stays within 10× the requested tolerance on the heavy top of Brüls & Cardona, the
torque-free asymmetric body (elliptic-function solution) and the conical rod (closed
form).  Error of a cell: max over the compared groups of
max_{t,k} |y - y_ref| / (atol + rtol * max|y_ref|) (benchmarks/accuracy3d.py); the
bound 10 is the contract itself (README: "within 10× the requested one").  Only the
cells that meet it today are here; the others are listed by the benchmark table in
docs/benchmarks.md."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import accuracy3d

# observed errors (units of the tolerance) at the commit that added this file:
# heavy_top   di 0.0073, cs 0.0015, projection 0.0002, joint_coordinates 0.97
# torque_free di 0.013,  cs 7.5e-5, projection 0.0074, joint_coordinates 0.063
# conical_rod di 4e-4 ... (all <= 1e-2)
CELLS = [(p, f) for p in ("heavy_top", "torque_free", "conical_rod")
         for f in ("di", "cs", "projection", "joint_coordinates")]


@pytest.mark.parametrize("problem,formulation", CELLS)
def test_global_error_within_ten_times_the_tolerance(problem, formulation):
    c = accuracy3d._cell(problem, formulation, "dopri5", 1e-6)
    assert c["status"] == "ok", c
    assert c["error"] <= accuracy3d.BOUND, c


# the DAE forms with bdf (calibrated on a DAE: docs/integrators.md "Tolerance
# calibration"); observed: torque_free ggl 0.09, stiff 0.27; conical_rod ggl 0.008,
# stiff 0.026 (before the calibration of DAEs: ggl 59x and stiff 154x on the
# torque-free body)
DAE_CELLS = [(p, f) for p in ("torque_free", "conical_rod") for f in ("ggl", "stiff")]


@pytest.mark.parametrize("problem,formulation", DAE_CELLS)
def test_dae_forms_within_ten_times_the_tolerance(problem, formulation):
    c = accuracy3d._cell(problem, formulation, "bdf", 1e-6)
    assert c["status"] == "ok", c
    assert c["error"] <= accuracy3d.BOUND, c


@pytest.mark.parametrize("formulation", ["ggl", "stiff"])
def test_dae_forms_refuse_a_tolerance_they_cannot_meet(formulation):
    """Below rtol 1e-9 the DAE forms' global error no longer follows the tolerance
    (16-70x at 1e-10): refused up front, naming the setting and the alternatives."""
    c = accuracy3d._cell("torque_free", formulation, "bdf", 1e-10)
    assert c["status"] == "refused", c
    assert "settings.rtol" in c["message"] and "down to rtol = 1e-09" in c["message"]
    assert "di, cs or projection" in c["message"]


# cp (re-partitions at step ends, docs/analyses.md "Coordinate partitioning"):
# observed torque_free 0.039, conical_rod 0.001, bricard 0.0018 (rtol 1e-6) and
# bricard 0.035 at rtol 1e-10 (22x before the step-end re-partitions)
CP_CELLS = [("torque_free", 1e-6), ("conical_rod", 1e-6), ("bricard", 1e-6),
            ("bricard", 1e-10)]


@pytest.mark.parametrize("problem,rtol", CP_CELLS)
def test_cp_within_ten_times_the_tolerance(problem, rtol):
    c = accuracy3d._cell(problem, "cp", "dopri5", rtol)
    assert c["status"] == "ok", c
    assert c["error"] <= accuracy3d.BOUND, c


@pytest.mark.slow
def test_cp_runs_the_steady_top():
    """The fast symmetric top (steady precession): cp stopped at t = 0 with "Phi_u is
    nearly singular" when it re-partitioned by restarting from the last output;
    observed 0.15 (22 s on the NumPy path)."""
    c = accuracy3d._cell("steady_top", "cp", "dopri5", 1e-6)
    assert c["status"] == "ok", c
    assert c["error"] <= accuracy3d.BOUND, c


# cp on the spinning heavy top with the low- and high-order Runge-Kutta pairs: the
# dependent Euler parameters' error gain (|Phi_u^-1 Phi_v|) grows as a parameter
# passes through zero twice per revolution, long before Phi_u's pivot ratio shows
# it; CP re-partitions on the gain.  Observed 0.68 (bs23, rtol 1e-6) and 0.30 (dop853,
# rtol 1e-10); before the gain trigger 88x and 54x.
CP_TOP_CELLS = [("bs23", 1e-6), ("dop853", 1e-10)]


@pytest.mark.parametrize("integrator,rtol", CP_TOP_CELLS)
def test_cp_spinning_top_within_ten_times_the_tolerance(integrator, rtol):
    c = accuracy3d._cell("heavy_top", "cp", integrator, rtol)
    assert c["status"] == "ok", c
    assert c["error"] <= accuracy3d.BOUND, c


# the cells where the direct integration's drift alone took the global error past
# 10x the tolerance (16-161x with ``drift: warn``, observed); with the default ``drift:
# project`` they are within it (di bs23 heavy top 1e-6: 2.2x, bdf 1e-10: 4.9x; cs bdf
# heavy top 1e-10: 4.5x; observed)
DRIFTING = [("heavy_top", "di", "bs23", 1e-6), ("steady_top", "di", "bdf", 1e-6),
            ("heavy_top", "cs", "bdf", 1e-10)]


@pytest.mark.parametrize("problem, formulation, integrator, rtol", DRIFTING)
def test_drift_projection_keeps_the_tolerance(problem, formulation, integrator, rtol):
    """The default ``drift: project`` projects the state where the position violation
    passes the tolerance: the global error is within 10x of it."""
    c = accuracy3d._cell(problem, formulation, integrator, rtol)
    assert c["status"] == "ok" and c["error"] <= accuracy3d.BOUND, c
    assert c.get("drift_projections", 0) > 0, c
    assert "warnings" not in c, c


def test_di_drift_beyond_the_tolerance_is_named():
    """Without the projection (``drift: warn``) DI does not correct the drift: on the
    heavy top with bs23 (24 761 steps at rtol 1e-6) the position violation passes ten
    times the tolerance at t = 0.83 and the global error is 19x the tolerance; the run
    says so (a warning event), and the benchmark counts the cell as ``warned``, not
    silently inaccurate."""
    c = accuracy3d._cell("heavy_top", "di", "bs23", 1e-6, {"drift": "warn"})
    assert c["status"] == "warned", c
    assert any("constraint drift" in w for w in c["warnings"]), c
