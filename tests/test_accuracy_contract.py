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
