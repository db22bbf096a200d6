"""Constraint rows removed as redundant at the start of a run are checked at every
solved point (mbcore.solve.redundancy): a rank test at one instant is not redundancy for
all time.  Conflicting constraints that look dependent at t = 0 stop the run with a
ConflictingConstraintsError naming the removed equation; genuinely redundant ones
(a duplicated pin, Bennett's and the Cardan shaft's overconstrained loops) run as
before, with the largest checked residual at most 1 % of its bound."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.cli import main
from mbcore.errors import ConflictingConstraintsError

MODELS = Path(__file__).resolve().parent / "models"
CONFLICT = MODELS / "conflicting_drivers.yaml"


def conflicting(**changes) -> Model:
    """The fixture model (phi = t and x = 0.5), with changes of its settings or of
    the turning driver's function (``turn=...``)."""
    m = Model.from_file(CONFLICT)
    d = m.to_dict()
    turn = changes.pop("turn", None)
    if turn is not None:
        d["drivers"][0]["function"] = turn
    d["settings"].update(changes)
    return Model.from_dict(d)


# -- the kinematic run of the issue ---------------------------------------------------
@pytest.mark.parametrize("analysis", ["kinematic", "kinetostatic"])
@pytest.mark.parametrize("coordinates", ["cartesian", "joint"])
def test_drivers_that_agree_only_at_t0_are_rejected(analysis, coordinates, backend):
    """The second driver was removed at t = 0 and never enforced: the run finished
    with x going 0.5 -> 0.4388.  Now it fails at t = 0, where the pin gives
    xdd = -0.5 phid^2 = -0.5 and the x driver xdd = 0."""
    m = conflicting()
    if analysis == "kinetostatic":        # massless link: give it a mass
        d = m.to_dict()
        d["bodies"][0].update(mass=1.0, inertia=0.1)
        m = Model.from_dict(d)
    with pytest.raises(ConflictingConstraintsError) as exc:
        mbcore.run(m, analysis=analysis, kernels=backend,
                   settings={"coordinates": coordinates})
    err = exc.value
    assert err.t == 0.0
    assert err.constraints[0] == "hold_x.c"
    msg = str(err)
    assert "constraint 'hold_x.c' (removed as redundant at t = 0) is violated by" in msg
    assert "the constraints conflict" in msg
    # |e| = 0.5: the acceleration both drivers cannot have at once
    assert "violated by 0.5 in its accelerations" in msg


def test_cli_run_fails_and_the_file_says_why(tmp_path, capsys):
    out = tmp_path / "conflict.h5"
    assert main(["run", str(CONFLICT), "-o", str(out), "-q"]) == 1
    assert "hold_x.c" in capsys.readouterr().err
    with mbcore.Result(out) as res:
        assert res.status == "failed"
        assert "ConflictingConstraintsError" in res.reason and "hold_x.c" in res.reason
        assert [e.kind for e in res.events].count("redundant") == 1


def test_a_conflict_from_a_later_time_fails_there_and_keeps_the_rows(tmp_path):
    """phi = max(t - 0.25, 0)^3: the link rests until t = 0.25, so the drivers agree
    until then (and the x driver is redundant); the run fails at the first output
    after it and keeps every row before, each holding every equation."""
    m = conflicting(turn="max(t - 0.25, 0)**3", t_end=1.0)
    out = tmp_path / "late.h5"
    with pytest.raises(ConflictingConstraintsError) as exc:
        mbcore.run(m, output=out)
    err = exc.value
    assert err.t == pytest.approx(0.3) and err.constraints[0] == "hold_x.c"
    with mbcore.Result(out) as res:
        assert res.status == "failed" and "hold_x.c" in res.reason
        np.testing.assert_allclose(res.t, 0.05 * np.arange(6), rtol=0, atol=1e-12)
        # x = 0.5 cos(0), to the Newton tolerance 1e-10 (1 + max|q|)
        np.testing.assert_allclose(res["q/link.x"], 0.5, rtol=0, atol=1.5e-10)


def test_a_conflict_after_t0_fails_at_the_first_output(tmp_path):
    """phi = t^2: at t = 0 the drivers agree in position, velocity and acceleration
    (xd = -0.5 sin(phi) phid = 0, xdd = -0.5 phid^2 = 0); right after it they part
    (xd = -t^3 + O(t^7), xdd = -4 t^2 + O(t^6) from the pin, 0 from the driver).
    The first output after t = 0 fails, the row at t = 0 is kept."""
    m = conflicting(turn="t*t", output_step=0.02)
    out = tmp_path / "t2.h5"
    with pytest.raises(ConflictingConstraintsError, match="hold_x.c") as exc:
        mbcore.run(m, output=out)
    assert exc.value.t == pytest.approx(0.02)
    with mbcore.Result(out) as res:
        assert res.status == "failed" and len(res) == 1


def test_conflict_detected_at_the_velocity_level_at_t0():
    """x = 0.5 + 0.1 t: positions agree at t = 0, velocities do not (0 from the pin
    at phi = 0, 0.1 from the driver): the check at the removal time."""
    d = Model.from_file(CONFLICT).to_dict()
    d["drivers"][1]["function"] = "0.5 + 0.1*t"
    with pytest.raises(ConflictingConstraintsError, match="in its velocities") as exc:
        mbcore.run(Model.from_dict(d))
    assert exc.value.t == 0.0 and exc.value.constraints[0] == "hold_x.c"


# -- dynamics ------------------------------------------------------------------------
def _pendulum(kind: str) -> Model:
    """A horizontal link (1 m, 1 kg) pinned at its left end, falling under gravity,
    and a second x constraint on its centre that agrees with the pin at phi = 0
    only: ``hold`` a constant x = 0.5 (the true motion is none: both together lock
    the link), ``push`` a driver x = 0.5 + 0.1 t (impossible beyond x = 0.5)."""
    m = Model("locked-pendulum")
    m.set_gravity(0, -9.81)
    m.add_body("link", mass=1.0, inertia=1 / 12, position=(0.5, 0.0), angle=0.0)
    m.add_joint("revolute", "pin", body_i="link", body_j="ground", point_i=(-0.5, 0),
                point_j=(0, 0))
    if kind == "hold":
        m.add_joint("absolute", "hold_x", body="link", coordinate="x", value=0.5)
    else:
        m.add_joint("absolute_driver", "push_x", body="link", coordinate="x",
                    function="0.5 + 0.1*t")
    m.settings = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.01}
    return m


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "penalty"])
def test_dynamic_removed_row_violated_later_stops_the_run(formulation, tmp_path):
    """Today the pendulum swung freely with x = 0.5 cos(phi) != 0.5 and the run
    finished.  Now the first output after t = 0 (where the link moves) fails, the
    row at t = 0 is kept and the file is marked failed."""
    out = tmp_path / "dyn.h5"
    with pytest.raises(ConflictingConstraintsError) as exc:
        mbcore.run(_pendulum("hold"), output=out, settings={"formulation": formulation})
    assert exc.value.t == pytest.approx(0.01) and exc.value.constraints[0] == "hold_x.c"
    with mbcore.Result(out) as res:
        assert res.status == "failed" and "hold_x.c" in res.reason
        assert len(res) == 1 and res.t[0] == 0.0


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "penalty"])
def test_dynamic_velocity_conflict_at_the_start(formulation):
    """The assembly's least-squares velocities share the conflict between the pin
    and the driver (xd = 0.05); the check at the removal configuration sees the
    whole inconsistency, 0.1, whatever the kept rows' residual."""
    with pytest.raises(ConflictingConstraintsError, match="violated by 0.1 in its "
                                                          "velocities") as exc:
        mbcore.run(_pendulum("push"), settings={"formulation": formulation})
    assert exc.value.t == 0.0 and exc.value.constraints[0] == "push_x.c"


def test_simulation_checks_the_removed_rows_after_each_call():
    sim = mbcore.Simulation(_pendulum("hold"))
    assert [e for e in sim.events if e[1] == "redundant"]
    with pytest.raises(ConflictingConstraintsError, match="hold_x.c"):
        for k in range(1, 11):
            sim.advance_to(0.01 * k)
    assert sim.t == pytest.approx(0.01)


# -- genuinely redundant constraints: as before, far from the bound -----------------------
def _fourbar_twin(examples):
    m = Model.from_file(examples / "fourbar_kap.yaml")
    m.add_joint("revolute", "O2_twin", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-1, 0))
    return m


#: the largest |e| / bound (``stats.redundant_check``) allowed for a redundant model:
#: a margin of 100 (measured: Bennett in joint coordinates 1.1e-3 at output step
#: 0.01, the others below 1e-4; the bound is 1e3 times the estimated rounding and
#: solution error, mbcore.solve.redundancy)
MARGIN = 1e-2


@pytest.mark.parametrize("name,settings", [
    ("spatial_bennett", {}),
    ("spatial_bennett", {"coordinates": "joint", "output_step": 0.01, "t_end": 0.65}),
    ("spatial_cardan_shaft", {}),
    ("spatial_cardan_shaft", {"coordinates": "joint", "output_step": 0.05}),
    ("spatial_bennett", {"analysis": "kinetostatic"}),
])
def test_overconstrained_spatial_loops_run_with_margin(examples, name, settings):
    settings = dict(settings)
    res = mbcore.run(Model.from_file(examples / f"{name}.yaml"),
                     analysis=settings.pop("analysis", None), settings=settings)
    assert res.status == "finished"
    assert res.stats["redundant_equations"].count(",") == 2
    assert 0.0 <= res.stats["redundant_check"] <= MARGIN


def test_bennett_in_joint_coordinates_leaving_its_branch_is_caught(examples):
    """At output step 0.025 Newton in joint coordinates jumps at t = 0.25 to a
    configuration where the kept rows hold and the removed rows of the cut joint J3
    do not (|Phi| up to 1.6 later): before this check the run finished with it."""
    with pytest.raises(ConflictingConstraintsError) as exc:
        mbcore.run(Model.from_file(examples / "spatial_bennett.yaml"),
                   settings={"coordinates": "joint", "output_step": 0.025})
    assert exc.value.t == pytest.approx(0.25)
    assert exc.value.constraints[0].startswith("J3.")
    assert "another assembly branch" in str(exc.value)


def test_duplicated_pin_kinematic_same_numbers_and_margin(examples, backend):
    res = mbcore.run(_fourbar_twin(examples), kernels=backend)
    ref = mbcore.run(Model.from_file(examples / "fourbar_kap.yaml"), kernels=backend)
    # both solve the same independent equations to the Newton tolerance 1e-10
    # (scaled by 1 + max|q|; measured difference 7e-16)
    tol = 1e-10 * (1 + np.max(np.abs(ref["q"])))
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=tol)
    assert res.stats["redundant_check"] <= MARGIN


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "penalty", "cp"])
def test_duplicated_pin_dynamic_margin(examples, formulation):
    from test_dynamics import dap_fourbar
    m = dap_fourbar(examples, integrator="dopri5", output_step=0.05, formulation=formulation,
                    t_end=0.3 if formulation == "penalty" else 1.0)   # penalty: stiff
    m.add_joint("revolute", "O2_twin", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-1, 0))
    res = mbcore.run(m)
    assert res.status == "finished"
    assert res.stats["redundant_check"] <= MARGIN


def _late_push(examples) -> Model:
    """The pendulum without gravity at rest and a driver x = 0.5 + 0.1 max(t - 0.5,
    0)^3: redundant and consistent until t = 0.5, conflicting after."""
    m = _pendulum("push")
    d = m.to_dict()
    d["gravity"] = [0.0, 0.0]
    d["joints"][1]["function"] = "0.5 + 0.1*max(t - 0.5, 0)**3"
    d["settings"] = {"analysis": "dynamic", "integrator": "rk4", "step": 0.01,
                     "output_step": 0.05, "t_end": 1.0, "formulation": "cs"}
    return Model.from_dict(d)


def test_removed_rows_checked_after_resume(examples, tmp_path):
    """A run resumed from a checkpoint rebuilds the check from the stored rows:
    the conflict that starts at t = 0.5 stops the resumed run too."""
    from mbcore.analysis.runner import resume
    out = tmp_path / "part.h5"
    part = mbcore.run(_late_push(examples), output=out, settings={"t_end": 0.4})
    assert part.status == "finished" and part.stats["redundant_check"] <= MARGIN
    with pytest.raises(ConflictingConstraintsError, match="push_x.c") as exc:
        resume(out, t_end=1.0)
    assert exc.value.t == pytest.approx(0.55)
    with mbcore.Result(out) as res:
        assert res.status == "failed" and "push_x.c" in res.reason
        assert res.t[-1] == pytest.approx(0.5)
    with pytest.raises(ConflictingConstraintsError) as exc2:
        mbcore.run(_late_push(examples))
    assert exc2.value.t == exc.value.t
