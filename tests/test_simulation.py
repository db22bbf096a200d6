"""mbcore.Simulation: the embedding API (issue 17 item 1; docs/embedding.md)."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Simulation, SimulationError

EX = Path(__file__).resolve().parents[1] / "examples"
FOURBAR = EX / "fourbar_dap.yaml"
SLIDER = EX / "slider_crank_dynamic.yaml"
STATE = ["q", "qd"]


def _columns(res, names):
    return np.column_stack([res[c] for c in names])


def _state_columns(system):
    return ([f"q/{c}" for c in system.coordinate_names]
            + [f"qd/{c}" for c in system.coordinate_names])


def _chunks(model, settings, n_chunks=100):
    """mbcore.run with the chunk ends as output grid, and a Simulation advanced to
    each of them: (run result, simulation rows, simulation)."""
    res = mbcore.run(mbcore.load(model) if isinstance(model, Path) else model,
                     analysis="dynamic", settings=settings)
    sim = Simulation(model, settings)
    cols = _state_columns(sim.system)
    rows = [sim.outputs(cols)]
    assert len(res.t) == n_chunks + 1
    for t in res.t[1:]:
        sim.advance_to(float(t))
        rows.append(sim.outputs(cols))
    return res, np.array(rows), sim


def _run_stats(res):
    return (res.stats["integrator_nsteps"], res.stats["integrator_nrejected"],
            res.stats["integrator_nfev"])


# -- chunks reproduce one run ----------------------------------------------------------
def test_rk4_chunks_bit_identical():
    s = {"integrator": "rk4", "step": 0.0025, "t_end": 1.0, "output_step": 0.01}
    res, rows, sim = _chunks(FOURBAR, s)
    np.testing.assert_array_equal(rows, _columns(res, _state_columns(sim.system)))
    st = sim.stats
    assert st["loop"] == "compiled"
    assert (st["steps"], st["rejected"], st["rhs_evaluations"]) == _run_stats(res)
    assert st["restarts"] == 0
    # every other channel at the chunk end equals the run's row too: bit for bit the
    # row-by-row path's (the Simulation's), to round-off the blocks' (sums in another
    # order: within 1e-12 of the value, observed <= 2e-16)
    ref = mbcore.run(mbcore.load(FOURBAR), analysis="dynamic",
                     settings=dict(s, output_rows="reference"))
    for c in ("energy/total", "energy/work_nc", "energy/kinetic",
              "lam/" + sim.system.constraint_names[0],
              "reactions/" + sim.system.reaction_labels[0]):
        assert sim[c] == ref[c][-1], c
        assert abs(sim[c] - res[c][-1]) <= 1e-12 * abs(ref[c][-1]), c


@pytest.mark.parametrize("output_step", [0.01, 0.0005])
def test_dopri5_chunks_within_tolerance(output_step):
    """dopri5: the chunk ends inside steps (0.0005: most of them) come from the step's
    dense output; the error against the run is bounded by the tolerance (and is in
    fact zero: the loop continues exactly and redoes a step for a target inside it)."""
    rtol, atol = 1e-8, 1e-10
    s = {"integrator": "dopri5", "rtol": rtol, "atol": atol,
         "t_end": 100 * output_step, "output_step": output_step}
    res, rows, sim = _chunks(FOURBAR, s)
    ref = _columns(res, _state_columns(sim.system))
    bound = 100 * (rtol * np.abs(ref) + atol)
    assert np.all(np.abs(rows - ref) <= bound)
    np.testing.assert_array_equal(rows, ref)
    st = sim.stats
    assert (st["steps"], st["rejected"], st["rhs_evaluations"]) == _run_stats(res)
    if output_step < 0.001:
        assert st["replay_steps"] > 0


def test_bdf_chunks_within_tolerance():
    rtol, atol = 1e-7, 1e-9
    s = {"integrator": "bdf", "rtol": rtol, "atol": atol, "t_end": 1.0,
         "output_step": 0.01}
    res, rows, sim = _chunks(FOURBAR, s)
    ref = _columns(res, _state_columns(sim.system))
    # global error of a run at rtol: a few hundred local errors (1.0 s, ~10^2..10^3 steps)
    bound = 100 * (rtol * np.abs(ref) + atol)
    err = np.abs(rows - ref)
    assert np.all(err <= bound), float(np.max(err / bound))
    assert sim.stats["restarts"] == 0


# -- several simulations ---------------------------------------------------------------
SETTINGS_A = {"integrator": "dopri5", "t_end": 0.5, "output_step": 0.005}
SETTINGS_B = {"integrator": "rk4", "step": 0.001, "t_end": 0.5, "output_step": 0.005}


def _alone(model, settings):
    res = mbcore.run(mbcore.load(model), analysis="dynamic", settings=settings)
    sysm = res.system
    return _columns(res, _state_columns(sysm)), res.t


def test_two_simulations_alternately_equal_separate_runs():
    ref_a, ts = _alone(FOURBAR, SETTINGS_A)
    ref_b, _ = _alone(SLIDER, SETTINGS_B)
    a, b = Simulation(FOURBAR, SETTINGS_A), Simulation(SLIDER, SETTINGS_B)
    ca, cb = _state_columns(a.system), _state_columns(b.system)
    ra, rb = [a.outputs(ca)], [b.outputs(cb)]
    for t in ts[1:]:
        a.advance_to(t)
        b.advance_to(t)
        ra.append(a.outputs(ca))
        rb.append(b.outputs(cb))
    np.testing.assert_array_equal(np.array(ra), ref_a)
    np.testing.assert_array_equal(np.array(rb), ref_b)


def test_simulations_in_threads_equal_separate_runs():
    ref_a, ts = _alone(FOURBAR, SETTINGS_A)
    ref_b, _ = _alone(SLIDER, SETTINGS_B)
    out: dict = {}

    def work(key, model, settings):
        sim = Simulation(model, settings)
        cols = _state_columns(sim.system)
        rows = [sim.outputs(cols)]
        for t in ts[1:]:
            sim.advance_to(t)
            rows.append(sim.outputs(cols))
        out[key] = np.array(rows)

    threads = [threading.Thread(target=work, args=(k, m, s)) for k, m, s in
               (("a", FOURBAR, SETTINGS_A), ("b", SLIDER, SETTINGS_B),
                ("a2", FOURBAR, SETTINGS_A))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    np.testing.assert_array_equal(out["a"], ref_a)
    np.testing.assert_array_equal(out["a2"], ref_a)
    np.testing.assert_array_equal(out["b"], ref_b)


# -- inputs ------------------------------------------------------------------------------
def _slider_with_torque(spec):
    m = mbcore.load(SLIDER).to_dict()
    m["forces"] = list(m.get("forces") or []) + [
        {"name": "motor", "type": "torque", "body": "crank", "torque": spec}]
    return m


T_JUMP = 0.3
TOL = {"integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12, "t_end": 0.6,
       "output_step": 0.01}


def _step_reference(level):
    """A run whose motor torque switches from 0 to ``level`` at T_JUMP."""
    spec = f"{level} * min(1, max(0, (t - {T_JUMP}) * 1e14))"
    res = mbcore.run(mbcore.Model.from_dict(_slider_with_torque(spec)),
                     analysis="dynamic", settings=TOL)
    return res


@pytest.mark.parametrize("how", ["body_force", "input_function"])
def test_input_jump_equals_switched_force(how):
    level = 0.8
    ref = _step_reference(level)
    if how == "body_force":
        sim, name = Simulation(SLIDER, TOL), "crank.torque"
    else:
        sim = Simulation(_slider_with_torque({"input": {"name": "u", "value": 0.0}}), TOL)
        name = "u"
        assert sim.input_names == ["u"]
    cols = _state_columns(sim.system)
    rows = [sim.outputs(cols)]
    for t in ref.t[1:]:
        if t > T_JUMP and sim.t <= T_JUMP + 1e-12 and sim[name] == 0.0:
            assert sim.t == pytest.approx(T_JUMP)
            assert sim.stats["restarts"] == 0
            sim[name] = level
        sim.advance_to(float(t))
        rows.append(sim.outputs(cols))
    assert sim.stats["restarts"] == 1
    err = np.abs(np.array(rows) - _columns(ref, cols))
    assert err.max() < 1e-7
    # before the jump: the same motion as the run (whose torque is still 0).  The two
    # evaluate the same ODE through different code (an input vs. a force expression),
    # so they differ by round-off that the step controller carries; bound: the local
    # error tolerance rtol*|y| + atol (observed <= 0.005 of it across BLAS kernels).
    # A torque applied one output step early gives 2e8 times the bound.
    k = int(np.searchsorted(ref.t, T_JUMP))
    ref_y = _columns(ref, cols)[:k + 1]
    assert np.all(err[:k + 1] <= TOL["rtol"] * np.abs(ref_y) + TOL["atol"])
    if how == "body_force":
        # the work of the input force is in the energy balance: T + V - W constant
        e0 = Simulation(SLIDER, TOL)["energy/balance"]
        assert abs(sim["energy/balance"] - e0) < 1e-7
        w = ref["energy/work_nc"][-1]            # the motor element's work in the run
        assert abs(w) > 0.1 and sim["energy/work_nc"] == pytest.approx(w, rel=1e-7)


def test_step_after_jump_starts_from_state_at_jump():
    """rk4, jump off the step grid: the first step after it is one RK4 step of the
    new right-hand side from (t_jump, y(t_jump)) -- the same step a simulation of a
    model with the constant torque takes from that state."""
    s = {"integrator": "rk4", "step": 0.01, "t_end": 1.0, "output_step": 0.01}
    sim = Simulation(SLIDER, s)
    tj = 0.3037
    sim.advance_to(tj)
    q, qd = sim.get_state().q, sim.get_state().qd
    sim["crank.torque"] = 0.5
    sim.step()
    assert sim.t == pytest.approx(tj + 0.01, abs=1e-15)
    other = Simulation(_slider_with_torque(0.5), {**s, "t_start": tj, "assemble": False})
    other.set_coordinates(q, qd, project=False, tol=1e-6)    # DI drifts ~1e-7
    other.step()
    cols = _state_columns(sim.system)
    np.testing.assert_allclose(sim.outputs(cols), other.outputs(cols), rtol=0, atol=1e-13)
    # a third simulation that did not jump is elsewhere
    plain = Simulation(SLIDER, s).advance_to(tj).step()
    assert np.max(np.abs(plain.outputs(cols) - sim.outputs(cols))) > 1e-7


@pytest.mark.parametrize("integrator", ["dopri5", "rk4"])
def test_unchanged_inputs_keep_history(integrator):
    model = _slider_with_torque({"input": {"name": "u", "value": 0.25}})
    s = {"integrator": integrator, "t_end": 0.5, "output_step": 0.005}
    res = mbcore.run(mbcore.Model.from_dict(model), analysis="dynamic", settings=s)
    sim = Simulation(model, s)
    cols = _state_columns(sim.system)
    for t in res.t[1:]:
        sim["u"] = 0.25                      # the same value: no jump
        sim.set_inputs({"u": 0.25})
        sim.advance_to(float(t))
    np.testing.assert_array_equal(sim.outputs(cols), _columns(res, cols)[-1])
    st = sim.stats
    assert st["restarts"] == 0
    assert (st["steps"], st["rejected"], st["rhs_evaluations"]) == _run_stats(res)


def test_driver_input_reassembles():
    m = mbcore.load(EX / "fourbar_kap.yaml").to_dict()
    m["drivers"][0]["function"] = {"input": {"name": "crank_angle", "value": 1.0}}
    m["settings"] = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.01}
    sim = Simulation(m)
    phi0 = sim["q/crank.phi"]
    assert phi0 == pytest.approx(1.0, abs=1e-10)
    sim["crank_angle"] = 1.2
    sim.advance_to(0.1)
    assert sim["q/crank.phi"] == pytest.approx(1.2, abs=1e-9)
    assert sim["violation/position"] < 1e-8
    assert any(kind == "assembly" and "input jump" in msg for _, kind, msg in sim.events)


# -- state --------------------------------------------------------------------------------
def test_state_round_trip_and_copy_independence():
    s = {"integrator": "dopri5", "t_end": 1.0, "output_step": 0.01}
    sim = Simulation(FOURBAR, s)
    cols = _state_columns(sim.system)
    sim.advance_to(0.3)
    st = sim.get_state()
    twin = sim.copy()
    sim.advance_to(0.6)
    a = sim.outputs(cols)
    sim.set_state(st)
    assert sim.t == 0.3
    sim.advance_to(0.6)
    np.testing.assert_array_equal(sim.outputs(cols), a)      # exact continuation
    # the copy: an independent simulation at the same state
    assert twin.system is not sim.system
    twin["crank.torque"] = 50.0
    twin.advance_to(0.6)
    assert np.max(np.abs(twin.outputs(cols) - a)) > 1e-3
    sim.set_state(st)
    sim.advance_to(0.6)
    np.testing.assert_array_equal(sim.outputs(cols), a)      # unaffected by the copy
    c2 = sim.copy()
    c2.advance_to(0.9)
    sim.advance_to(0.9)
    np.testing.assert_array_equal(c2.outputs(cols), sim.outputs(cols))


def test_state_round_trip_python_stepper():
    s = {"integrator": "bdf", "t_end": 1.0, "output_step": 0.01, "rtol": 1e-9,
         "atol": 1e-11, "loop": "python"}
    sim = Simulation(FOURBAR, s)
    assert sim.loop == "python"
    cols = _state_columns(sim.system)
    sim.advance_to(0.2)
    st = sim.get_state()
    sim.advance_to(0.4)
    a = sim.outputs(cols)
    sim.set_state(st)
    sim.advance_to(0.4)
    np.testing.assert_allclose(sim.outputs(cols), a, rtol=0, atol=1e-6)


def test_set_coordinates_projects_or_refuses():
    sim = Simulation(FOURBAR, {"t_end": 1.0})
    st = sim.get_state()
    q = st.q.copy()
    q[sim.system.coordinate_index("crank.phi")] += 0.05
    with pytest.raises(SimulationError, match=r"t = 0: set_coordinates: .*violates"):
        sim.set_coordinates(q, project=False)
    sim.set_coordinates(q, hold=["crank.phi"])
    assert sim["q/crank.phi"] == pytest.approx(q[sim.system.coordinate_index("crank.phi")])
    assert sim["violation/position"] < 1e-10
    sim.advance_to(0.05)
    assert sim.stats["restarts"] == 1


# -- errors ---------------------------------------------------------------------------------
def test_named_errors():
    sim = Simulation(SLIDER, {"t_end": 1.0})
    sim.advance_to(0.25)
    with pytest.raises(SimulationError, match=r"t = 0.25: .*unknown input 'crank.fz'"):
        sim["crank.fz"] = 1.0
    with pytest.raises(SimulationError, match=r"t = 0.25: .*unknown input 'krank.torque'"
                                              r".*did you mean 'crank"):
        sim.set_input("krank.torque", 1.0)
    with pytest.raises(SimulationError, match=r"t = 0.25: unknown output 'q/crank.psi'.*"
                                              r"did you mean 'q/crank.phi'"):
        sim.outputs(["q/crank.psi"])
    with pytest.raises(SimulationError, match=r"t = 0.25: input 'crank.torque' = nan"):
        sim["crank.torque"] = float("nan")
    with pytest.raises(SimulationError, match=r"advance_to: t = 0.1 is before the current "
                                              r"time t = 0.25"):
        sim.advance_to(0.1)
    assert sim.t == 0.25 and sim.stats["restarts"] == 0


# -- recording ------------------------------------------------------------------------------
def test_record_to_hdf5_and_memory(tmp_path):
    path = tmp_path / "cosim.h5"
    s = {"integrator": "rk4", "step": 0.001, "t_end": 0.1, "output_step": 0.01}
    with Simulation(SLIDER, s, record=[path, "memory"]) as sim:
        for k in range(1, 11):
            sim["crank.torque"] = 0.1 * k
            sim.advance_to(0.01 * k)
        mem = sim.result()
    with mbcore.Result(path) as res:
        assert res.status == "finished"
        np.testing.assert_allclose(res.t, 0.01 * np.arange(11), atol=1e-15)
        np.testing.assert_array_equal(res["qd/crank.phi"], mem["qd/crank.phi"])
        assert res["qd/crank.phi"][-1] == sim["qd/crank.phi"]


def test_spatial_chunks_bit_identical_and_inputs():
    """A spatial model (Euler parameters) on the compiled loop: chunks equal the run;
    body forces are inputs, body moments are refused with the way to apply them."""
    path = EX / "spatial_slider_crank_dynamic.yaml"
    s = {"integrator": "dopri5", "t_end": 0.5, "output_step": 0.005}
    res, rows, sim = _chunks(path, s)
    np.testing.assert_array_equal(rows, _columns(res, _state_columns(sim.system)))
    body = sim.system.body_names[0]
    sim[f"{body}.fz"] = 2.0
    assert sim[f"{body}.fz"] == 2.0
    with pytest.raises(SimulationError, match=rf"t = 0.5: input '{body}.nx': a moment "
                                              rf".*moments=\['{body}.nx'\]"):
        sim[f"{body}.nx"] = 1.0
    sim.advance_to(0.6)
    assert sim.stats["restarts"] == 1


# -- element parameters ---------------------------------------------------------------------
SPRING = EX / "fourbar_spring_modes.yaml"
SPATIAL = EX / "spatial_slider_crank_dynamic.yaml"
T1, T2 = 0.3, 0.6
PAR_TOL = {"integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12, "t_end": T2,
           "output_step": 0.01}


def _spring_model(**values):
    m = mbcore.load(SPRING).to_dict()
    m["forces"][0].update(values)
    return m


def _two_segments(model_1, model_2, settings, kernels=None, project=False):
    """The reference of a change at T1: model_1 to T1, then a simulation of model_2
    started from that state."""
    a = Simulation(model_1, settings, kernels=kernels).advance_to(T1)
    st = a.get_state()
    b = Simulation(model_2, {**settings, "t_start": T1, "assemble": False},
                   kernels=kernels)
    b.set_coordinates(st.q, st.qd, project=project, tol=1e-6)
    return b.advance_to(T2)


@pytest.mark.parametrize("kernels", [None, "numpy"])
def test_parameter_change_equals_two_segment_run(kernels):
    """spring.stiffness and .free_length changed at T1 == a model with the new values
    from T1 on, on the compiled loop and on the NumPy backend (Python driver): the
    packed floats reach the evaluators in place."""
    sim = Simulation(_spring_model(), PAR_TOL, kernels=kernels)
    assert sim.loop == ("compiled" if kernels is None else "python")
    assert sim.get_parameter("spring.stiffness") == 400.0
    fg = sim.system.force_groups[0]
    par_before = fg.par
    sim.advance_to(T1)
    sim.set_parameter("spring.stiffness", 2500.0)
    sim.set_parameter("spring.free_length", 1.5)
    assert sim.system.force_groups[0].par is par_before          # the same array
    assert sim.get_parameter("spring.stiffness") == 2500.0
    sim.advance_to(T2)
    assert sim.stats["restarts"] == 1
    cols = _state_columns(sim.system)
    ref = _two_segments(_spring_model(), _spring_model(stiffness=2500.0, free_length=1.5),
                        PAR_TOL, kernels)
    np.testing.assert_allclose(sim.outputs(cols), ref.outputs(cols), rtol=0, atol=2e-7)
    assert sim["forces/spring.spring_force"] == pytest.approx(
        ref["forces/spring.spring_force"], abs=1e-5)
    plain = Simulation(_spring_model(), PAR_TOL, kernels=kernels).advance_to(T2)
    assert np.max(np.abs(plain.outputs(cols) - sim.outputs(cols))) > 1e-3
    # the copy has the new values (its model), get_state/set_state carries them
    twin, st = sim.copy(), sim.get_state()
    assert twin.get_parameter("spring.stiffness") == 2500.0
    other = Simulation(_spring_model(), PAR_TOL, kernels=kernels)
    other.set_state(st)
    assert other.get_parameter("spring.free_length") == 1.5
    for s in (sim, twin, other):
        s.advance_to(T2 + 0.1)
    np.testing.assert_allclose(twin.outputs(cols), sim.outputs(cols), rtol=0, atol=1e-9)
    np.testing.assert_allclose(other.outputs(cols), sim.outputs(cols), rtol=0, atol=1e-9)


def test_spatial_parameter_change_equals_two_segment_run():
    """Spatial compiled kernels: a damping (number) and a torque's frame (choice)
    changed at T1 == the model with those values from T1 on."""
    def model(**changes):
        m = mbcore.load(SPATIAL).to_dict()
        for f in m["forces"]:
            f.update(changes.get(f["name"], {}))
        return m
    s = {"integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12, "t_end": T2,
         "output_step": 0.01}
    sim = Simulation(SPATIAL, s)
    assert sim.loop == "compiled"
    sim.advance_to(T1)
    sim.set_parameter("damper.damping", 20.0)
    sim.set_parameter("motor.frame", "body")
    assert sim.get_parameter("motor.frame") == "body"
    sim.advance_to(T2)
    new = {"damper": {"damping": 20.0}, "motor": {"frame": "body"}}
    ref = _two_segments(model(), model(**new), s)
    cols = _state_columns(sim.system)
    np.testing.assert_allclose(sim.outputs(cols), ref.outputs(cols), rtol=0, atol=1e-7)
    plain = Simulation(SPATIAL, s).advance_to(T2)
    assert np.max(np.abs(plain.outputs(cols) - sim.outputs(cols))) > 1e-3
    with pytest.raises(SimulationError, match=r"parameter 'motor.frame': forces\[0\]"
                                              r"\.frame: expected one of"):
        sim.set_parameter("motor.frame", "world")


def test_unchanged_parameter_keeps_history():
    s = {"integrator": "rk4", "step": 0.001, "t_end": 0.2, "output_step": 0.01}
    sim = Simulation(_spring_model(), s)
    sim.advance_to(0.1)
    sim.set_parameter("spring.stiffness", 400)       # the same packed value
    sim.set_parameter("pivot.damping", 2.0)
    sim.advance_to(0.2)
    assert sim.stats["restarts"] == 0
    ref = Simulation(_spring_model(), s).advance_to(0.2)
    cols = _state_columns(sim.system)
    np.testing.assert_array_equal(sim.outputs(cols), ref.outputs(cols))


def test_constraint_parameter_reassembles():
    """A ground pivot moved at T1: the state is re-assembled (nearest consistent)
    and the motion equals a model with the pivot there from T1 on."""
    def fourbar(x):
        m = mbcore.load(FOURBAR).to_dict()
        m["joints"][3]["point_j"] = [x, 0.0]
        return m
    s = {**PAR_TOL, "formulation": "cs"}
    sim = Simulation(fourbar(2.5), s)
    sim.advance_to(T1)
    sim.set_parameter("O4.point_j", [2.55, 0.0])
    assert sim.get_parameter("O4.point_j") == (2.55, 0.0)
    sim.advance_to(T2)
    assert sim["violation/position"] < 1e-8
    assert any(k == "assembly" and "input jump" in m for _, k, m in sim.events)
    ref = _two_segments(fourbar(2.5), fourbar(2.55), s, project=True)
    cols = _state_columns(sim.system)
    np.testing.assert_allclose(sim.outputs(cols), ref.outputs(cols), rtol=0, atol=1e-6)


def test_parameter_errors_named():
    sim = Simulation(_spring_model(), {"t_end": 1.0}).advance_to(0.25)
    cases = [
        ("spring.stifness", 1.0, r"unknown parameter 'spring.stifness' \(did you mean "
                                 r"'spring.stiffness'\?\): a tsda element has .*damping"),
        ("sprung.stiffness", 1.0, r"unknown parameter 'sprung.stiffness' \(did you mean "
                                  r"'spring.stiffness'"),
        ("spring.body_j", "crank", r"parameter 'spring.body_j' names a body"),
        ("spring.actuator", 1.0, r"parameter 'spring.actuator' is a time function.*input"),
        ("spring.stiffness", "stiff", r"parameter 'spring.stiffness': forces\[0\]"
                                      r"\.stiffness: .*number"),
        ("spring.point_i", [1.0], r"parameter 'spring.point_i': forces\[0\]\.point_i"),
        ("spring.damping", float("inf"), r"parameter 'spring.damping'"),
    ]
    for name, value, msg in cases:
        with pytest.raises(SimulationError, match=r"t = 0.25: " + msg):
            sim.set_parameter(name, value)
    assert sim.get_parameter("spring.stiffness") == 400.0
    with pytest.raises(SimulationError, match=r"t = 0.25: 'spring.stiffness' is an element "
                                              r"parameter, not an input: use set_parameter"):
        sim["spring.stiffness"] = 1.0
    assert sim.stats["restarts"] == 0
    sim.advance_to(0.3)
    assert sim.stats["restarts"] == 0                 # nothing was changed


def test_constraint_parameters_refused_under_joint_coordinates():
    sim = Simulation(FOURBAR, {"t_end": 1.0, "formulation": "joint_coordinates"})
    with pytest.raises(SimulationError, match=r"t = 0: parameter 'O4.point_j': the "
                                              r"joint_coordinates formulation copies"):
        sim.set_parameter("O4.point_j", [2.55, 0.0])


# -- moments on spatial bodies ------------------------------------------------------------------


def test_spatial_moment_input_equals_switched_torque():
    """``moments=['<body>.nz']``: a global-axis moment input equals a torque element
    switched on at T1 (the moment acts through 2 G(p)^T n, re-evaluated with p)."""
    s = {"integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12, "t_end": 0.4,
         "output_step": 0.01}
    m = mbcore.load(SPATIAL)
    body = m.bodies[0].name
    level, tj = 0.7, 0.2
    ref_m = m.to_dict()
    sw = f"min(1, max(0, (t - {tj}) * 1e14))"
    ref_m["forces"] = list(ref_m.get("forces") or []) + [
        {"name": "moment_ref", "type": "torque", "body": body, "tx": f"{-level} * {sw}",
         "tz": f"{level} * {sw}"}]
    ref = mbcore.run(mbcore.Model.from_dict(ref_m), analysis="dynamic", settings=s)
    sim = Simulation(SPATIAL, s, moments=[f"{body}.nx", f"{body}.nz"])
    assert {f"{body}.nx", f"{body}.ny", f"{body}.nz"} <= set(sim.input_names)
    cols = _state_columns(sim.system)
    sim.advance_to(tj)
    sim[f"{body}.nz"] = level
    sim.set_input(f"{body}.nx", -level)
    sim.advance_to(0.3)
    twin = sim.copy()                    # its model has the moment element already
    for x in (sim, twin):
        x.advance_to(0.4)
    assert sim.stats["restarts"] == 1
    assert twin[f"{body}.nz"] == level
    np.testing.assert_allclose(twin.outputs(cols), sim.outputs(cols), rtol=0, atol=1e-9)
    np.testing.assert_allclose(sim.outputs(cols), _columns(ref, cols)[-1], rtol=0,
                               atol=1e-7)
    w = ref["energy/work_nc"][-1]
    assert abs(w) > 1e-3 and sim["energy/work_nc"] == pytest.approx(w, rel=1e-6)
    with pytest.raises(mbcore.ModelError, match=r"moments: 'ground.nz': expected"):
        Simulation(SPATIAL, s, moments=["ground.nz"])
    with pytest.raises(mbcore.ModelError, match=rf"moments: '{body}.fz': expected"):
        Simulation(SPATIAL, s, moments=[f"{body}.fz"])
