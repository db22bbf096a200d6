"""Coordinate partitioning (and the other formulations) with redundant constraints:
one redundancy policy. The
analysis finds the independent rows once (rank-revealing) and checks the others at
every output; cp partitions with those rows, so an over-constrained loop that moves
(the Bennett 4R linkage: n = 21 coordinates, m = 23 equations of rank 20) has its one
independent coordinate; a loop with no freedom is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import ModelError


def _free_bennett(examples):
    d = Model.from_file(examples / "spatial_bennett.yaml").to_dict()
    d.pop("drivers")                       # the motor: a free 1-dof loop under gravity
    d["settings"] = {}
    d["gravity"] = [0.0, -9.81, 0.0]
    return Model.from_dict(d)


ST = {"analysis": "dynamic", "t_end": 0.5, "output_step": 0.05}


def test_cp_runs_the_free_bennett_loop_like_di(examples):
    m = _free_bennett(examples)
    s = m.compile()
    assert (s.n, s.m) == (21, 23)
    ref = mbcore.run(m, settings={**ST, "formulation": "di", "rtol": 1e-12, "atol": 1e-14})
    res = mbcore.run(m, settings={**ST, "formulation": "cp", "rtol": 1e-9, "atol": 1e-11})
    kinds = [e.kind for e in res.events]
    assert kinds.count("redundant") == 1
    part = [e.message for e in res.events if e.message.startswith("independent coordinates")]
    assert part and part[0].count(",") == 0          # one independent coordinate
    assert np.ptp(ref["q"], axis=0).max() > 1.0      # the loop moves
    # both runs within 10x their tolerance of the exact motion (observed: 5e-11):
    # a bound of 1e-6 on |q| ~ 1 keeps a margin over 1e4
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=1e-6)
    assert res.stats["redundant_check"] <= 1e-2        # the removed rows hold


def test_cp_refuses_a_loop_without_freedom(examples):
    """The driven Bennett loop (the motor makes it rank 21 = n): no independent
    coordinate is left, and cp says so."""
    m = Model.from_file(examples / "spatial_bennett.yaml")
    with pytest.raises(ModelError, match="at least one degree of freedom: the constraints "
                                         "have rank 21 for 21 coordinates"):
        mbcore.run(m, settings={**ST, "formulation": "cp"})


def test_di_omega_runs_the_free_bennett_loop_like_di(examples):
    """The angular-velocity form solves with the independent kinematic rows too (its
    normalisation rows are not constraints)."""
    m = _free_bennett(examples)
    ref = mbcore.run(m, settings={**ST, "formulation": "di", "rtol": 1e-12, "atol": 1e-14})
    res = mbcore.run(m, settings={**ST, "formulation": "di_omega", "rtol": 1e-9,
                                  "atol": 1e-11})
    assert [e.kind for e in res.events].count("redundant") == 1
    # observed 2e-14; the bound as for cp above
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=1e-6)
    assert res.stats["redundant_check"] <= 1e-2


# (stiff at rtol 1e-6: at 1e-9 its spatial Python path takes 30 s here)
@pytest.mark.parametrize("formulation, rtol, bound", [("ggl", 1e-9, 1e-6),
                                                      ("stiff", 1e-6, 1e-5)])
def test_dae_forms_run_the_free_bennett_loop_like_di(examples, formulation, rtol, bound):
    """The index-2 and index-3 DAEs keep the independent rows only (as many
    multipliers as independent equations: a regular Newton matrix) and the analysis
    checks the removed ones at every output; the multipliers of the kept rows are
    those of DI (observed 1.4e-5 of their scale with stiff at rtol 1e-6)."""
    m = _free_bennett(examples)
    ref = mbcore.run(m, settings={**ST, "formulation": "di", "rtol": 1e-12, "atol": 1e-14})
    res = mbcore.run(m, settings={**ST, "formulation": formulation, "integrator": "bdf",
                                  "rtol": rtol, "atol": rtol / 100})
    assert [e.kind for e in res.events].count("redundant") == 1
    # observed ggl 3e-12 (rtol 1e-9), stiff 1.4e-8 (rtol 1e-6); the bounds: 10x the
    # tolerance on |q| ~ 1 (the contract) or less, >= 300x the observed errors
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=bound)
    assert res.stats["redundant_check"] <= 1e-2
    lam_scale = np.max(np.abs(ref["lam"]))
    np.testing.assert_allclose(res["lam"], ref["lam"], rtol=0, atol=1e-2 * lam_scale)


def test_joint_coordinates_run_the_free_bennett_loop_like_di(examples):
    """Joint coordinates keep every tree row (they hold identically) and drop the
    dependent cut rows: rank-revealing on the cut rows' Jacobian over the tree's
    motions; the analysis checks the dropped ones at every output."""
    m = _free_bennett(examples)
    ref = mbcore.run(m, settings={**ST, "formulation": "di", "rtol": 1e-12, "atol": 1e-14})
    res = mbcore.run(m, settings={**ST, "formulation": "joint_coordinates", "rtol": 1e-9,
                                  "atol": 1e-11})
    red = [e.message for e in res.events if e.kind == "redundant"]
    assert len(red) == 1
    form = mbcore.Simulation(m, settings={**ST, "formulation": "joint_coordinates"}
                             ).analysis.formulation
    s = form.system
    dropped = red[0].split(": ")[-1].split(", ")
    cut = {s.constraint_names[r] for r in form.tree.extra_rows}
    assert dropped and set(dropped) <= cut                 # a cut row, never a tree row
    # observed 1e-10; the bound as for cp above
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=1e-6)
    assert res.stats["redundant_check"] <= 1e-2


def _bricard():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from accuracy_problems import PROBLEMS
    return PROBLEMS["bricard"]


def test_redundant_rows_are_chosen_again_where_they_turn_dependent():
    """The Bricard mechanism (IFToMM A04) in joint coordinates: with the cut row J4.z
    dropped at the start, that row becomes independent along the motion and the
    kept rows dependent (their rank ratio 0.17 -> 0.016 at t = 1.22 s, before the
    singular configuration of the kept set at 1.248 s): the watch says so there,
    and the rows chosen again keep J4.z.  (Which of the nearly equivalent cut rows
    the rank-revealing QR drops at t = 0 depends on the rounding of the BLAS:
    J4.z here, J4.x with another kernel; the run below goes either way.)"""
    from mbcore.solve.redundancy import RemovedRows
    p = _bricard()
    st = {"t_end": 1.3, "output_step": 0.02, "rtol": 1e-10, "atol": 1e-12}
    ref = mbcore.run(p.build(), analysis="dynamic", settings={**st, "formulation": "di"})
    sim = mbcore.Simulation(p.build(), settings={**st, "formulation": "joint_coordinates"})
    a, s = sim.analysis, sim.system
    names = s.constraint_names
    kept = [r for r in range(s.m) if names[r] != "J4.z"]
    k0, k1, k2 = 0, int(np.argmin(np.abs(ref.t - 1.20))), int(np.argmin(np.abs(ref.t - 1.22)))
    a.removed_rows = RemovedRows(s, kept, ref["q"][k0], 0.0, 1e-10)
    assert a.removed_rows.degraded(float(ref.t[k1]), ref["q"][k1]) is None
    why = a.removed_rows.degraded(float(ref.t[k2]), ref["q"][k2])
    assert why is not None and "rank ratio" in why
    events = []
    assert a.reselect_rows(ref["q"][k2], float(ref.t[k2]), why,
                           lambda t, kind, text: events.append((t, kind, text)))
    assert "J4.z" not in a.removed_rows.names and len(a.removed_rows.names) == 1
    assert events and "chosen again" in events[0][2]


def test_joint_coordinates_pass_the_bricard_mechanism():
    """The whole run (where the kept rows turn dependent, they are chosen again and
    the run restarts there; before, it stopped at t = 1.248 with a singular Jacobian
    after 17 s of shrinking steps): the motion is the Cartesian one (observed
    2.6e-11 m at rtol 1e-6; bound 1e-6 m)."""
    p = _bricard()
    st = {"t_end": 1.5, "output_step": 0.02, "rtol": 1e-6, "atol": 1e-8}
    res = mbcore.run(p.build(), analysis="dynamic",
                     settings={**st, "formulation": "joint_coordinates"})
    again = [e for e in res.events if e.kind == "redundant" and "chosen again" in e.message]
    assert len(again) <= 1 and all(e.t < 1.248 for e in again)
    ref = mbcore.run(p.build(), analysis="dynamic",
                     settings={**st, "formulation": "di", "rtol": 1e-11, "atol": 1e-13})
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=1e-6)
    assert res.stats["redundant_check"] <= 1e-2
