"""Forward dynamics end to end (004 Ch.10; spec/planar.md §6.8-6.9;
spec/algorithms.md §4.1-4.2)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model


def dap_fourbar(examples, **settings):
    d = yaml.safe_load((examples / "fourbar_kap.yaml").read_text())
    d.pop("drivers")
    d["gravity"] = [0, -9.81]
    for b, (m, J), q in zip(d["bodies"], [(1, 0.3), (2.25, 2), (2, 1.35)],
                            [(.5, .866, 1.047), (2.824, 2.553, .423), (3.574, 1.687, 1.004)],
                            strict=True):
        b["mass"], b["inertia"] = m, J
        b["position"], b["angle"] = list(q[:2]), q[2]
    d["settings"] = {"analysis": "dynamic", **settings}
    return Model.from_dict(d)


def test_dap_fourbar_rk4_as_printed(examples, backend):
    """004 §10.3.1: DAP integrates the printed 3-decimal state without correcting
    it (assemble: no), RK4 with h = DT = 0.025; printed t = 0 accelerations, point
    P and reactions (spec §6.8)."""
    m = dap_fourbar(examples, integrator="rk4", step=0.025, output_step=0.025, t_end=0.25,
                    formulation="di", assemble="no")
    res = mbcore.run(m, kernels=backend)
    assert len(res) == 11 and res.status == "finished"
    np.testing.assert_allclose(res["qdd"][0], [2.544, -1.470, -2.938, 5.183, -3.149, -.115,
                                               2.639, -1.679, -1.564], atol=1.5e-3)
    np.testing.assert_allclose([res["points/P.xdd"][0], res["points/P.ydd"][0]],
                               [5.364, -3.131], atol=1.5e-3)
    assert res["reactions/O4.j.n"][0] == pytest.approx(-60.504, abs=2e-3)


def test_platform_dap_t0_and_equilibrium_at_3s(examples):
    """004 §10.3.2 (spec §6.9): with y3 = 0.470 as the book's DAP input (not
    assembled), RK4 h = 0.01: printed t = 0 accelerations and spring data; at
    t = 3 s the platform is at rest at its equilibrium."""
    m = Model.from_file(examples / "platform.yaml")
    m.body("platform").position = (-0.171, 0.470)
    res = mbcore.run(m, settings={"integrator": "rk4", "step": 0.01, "formulation": "di",
                                  "assemble": "no"})
    np.testing.assert_allclose(res["qdd"][0][:6], [13.630, 4.829, -57.838, 27.260, 9.658, 0],
                               atol=2e-3)
    f = {k: res[f"forces/spring.{k}"][0] for k in ("length", "length_rate", "spring_force",
                                                    "damper_force")}
    np.testing.assert_allclose(list(f.values()), [.819, -.201, 153.462, -10.072], atol=1.5e-3)
    k = -1
    assert res.t[k] == pytest.approx(3.0)
    np.testing.assert_allclose(res["q"][k][:3], [-.173, .238, -.311], atol=1.5e-3)
    assert res["forces/spring.length"][k] == pytest.approx(0.589, abs=1e-3)
    assert np.max(np.abs(res["qd"][k])) < 5e-3


@pytest.mark.parametrize("formulation", ["di", "cs"])
def test_energy_conserved_adaptive(examples, formulation):
    """Conservative four-bar falling under gravity, dopri5 at rtol 1e-10 over 10 s:
    |Delta E| / E <= 1e-7 (issue acceptance)."""
    m = dap_fourbar(examples, integrator="dopri5", rtol=1e-10, atol=1e-12, t_end=10.0,
                    output_step=0.05, formulation=formulation)
    res = mbcore.run(m)
    E = res["energy/total"]
    scale = np.max(np.abs(res["energy/kinetic"])) + np.max(np.abs(E))
    assert np.max(np.abs(E - E[0])) / scale <= 1e-7
    assert np.max(res["violation/position"]) < 1e-6


def test_damped_platform_energy_balance(examples):
    """With the damper, T + V - W_nc stays constant (W_nc = work of the damper)."""
    res = mbcore.run(Model.from_file(examples / "platform.yaml"),
                     settings={"rtol": 1e-10, "atol": 1e-12, "t_end": 2.0})
    bal = res["energy/balance"]
    assert res["energy/work_nc"][-1] < -0.1             # the damper dissipated energy
    assert np.max(np.abs(bal - bal[0])) < 1e-6 * np.max(np.abs(res["energy/total"]))


def test_cs_bounds_the_drift_that_di_accumulates(examples):
    """Same model and fixed-step RK4: DI's position violation grows, CS keeps it
    bounded (spec §4.2)."""
    common = dict(integrator="rk4", step=0.01, output_step=0.1, t_end=10.0)
    di = mbcore.run(dap_fourbar(examples, formulation="di", **common))
    cs = mbcore.run(dap_fourbar(examples, formulation="cs", alpha=10.0, beta=10.0, **common))
    v_di, v_cs = di["violation/position"], cs["violation/position"]
    assert v_di[-1] > 10 * v_cs[-1]
    # the level CS holds is RK4's truncation error (h = 0.01: 3.4e-6), the same under
    # every BLAS kernel: the claim under test, not a rounding comparison
    assert np.max(v_cs) < 1e-5


def test_integrator_channel_records_steps(examples):
    res = mbcore.run(Model.from_file(examples / "platform.yaml"), settings={"t_end": 1.0})
    steps = res["integrator/steps"]
    assert steps[0] == 0 and np.all(np.diff(steps) >= 0) and steps[-1] > 10
    h = res["integrator/step_size"][1:]
    assert np.all(h > 0) and np.all(h <= 1.0)
    assert res["integrator/rhs_evaluations"][-1] == res.stats["integrator_nfev"]
    assert np.all(res["integrator/order"][1:] == 5)           # dopri5


def pendulum(n_links=1):
    m = Model(f"chain{n_links}")
    m.set_gravity(0, -9.81)
    for k in range(n_links):
        m.add_body(f"l{k}", mass=1.0, inertia=1.0 / 12, position=(0.5 + k, 0.0), angle=0.0)
        m.add_joint("revolute", f"j{k}", body_i="ground" if k == 0 else f"l{k - 1}",
                    body_j=f"l{k}", point_i=(0, 0) if k == 0 else (0.5, 0),
                    point_j=(-0.5, 0))
    return m


@pytest.mark.parametrize("n_links", [1, 10])
def test_energy_of_pendulum_and_chain_at_rtol_1e_9(n_links):
    """Issue acceptance: conservative pendulum and chain of 10, adaptive integrator
    at rtol 1e-9, 10 s: |Delta E| / E <= 1e-7 (E scale: the largest kinetic energy)."""
    res = mbcore.run(pendulum(n_links), settings={
        "analysis": "dynamic", "t_end": 10.0, "output_step": 0.05, "rtol": 1e-9,
        "atol": 1e-11, "formulation": "cs"})
    E = res["energy/total"]
    assert np.max(np.abs(E - E[0])) <= 1e-7 * np.max(res["energy/kinetic"])


def test_third_party_force_type_equals_builtin(backend):
    """A force type written in Python and registered through the plugin hooks gives
    the built-in TSDA's results (the same slow-path contract as user forces)."""
    from python_tier import python_tsda_plugins
    pm = python_tsda_plugins()
    models = []
    for kind in ("tsda", "py_tsda"):
        m = Model.from_file(__import__("pathlib").Path(__file__).parents[1] / "examples" /
                            "platform.yaml", registry=pm.registry)
        m.elements["forces"][0].raw["type"] = kind
        models.append(m)
    a = models[0].compile(kernels=backend, plugins=pm)
    b = models[1].compile(kernels=backend, plugins=pm)
    assert not any(g.compiled for g in b.force_groups)
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, qd = rng.normal(size=9), rng.normal(size=9)
        np.testing.assert_allclose(a.forces(q, qd, 0.3), b.forces(q, qd, 0.3), rtol=1e-12,
                                   atol=1e-12)
    ra = mbcore.run(models[0], plugins=pm, kernels=backend, settings={"t_end": 0.5})
    rb = mbcore.run(models[1], plugins=pm, kernels=backend, settings={"t_end": 0.5})
    np.testing.assert_allclose(ra["q"], rb["q"], atol=1e-10)


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "cp"])
def test_redundant_constraints_in_dynamics(examples, formulation, backend):
    """The DAP four-bar with its crank pin modelled twice: the duplicate rows are
    named once and removed, and the motion equals the plain model's."""
    st = dict(integrator="dopri5", rtol=1e-10, atol=1e-12, t_end=1.0, output_step=0.05,
              formulation=formulation)
    plain = dap_fourbar(examples, **st)
    dup = dap_fourbar(examples, **st)
    dup.add_joint("revolute", "O2_twin", body_i="ground", body_j="crank", point_i=(0, 0),
                  point_j=(-1, 0))
    a = mbcore.run(plain, kernels=backend)
    b = mbcore.run(dup, kernels=backend)
    ev = [e for e in b.events if e.kind == "redundant"]
    assert len(ev) == 1 and "O2" in ev[0].message
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    # the pin's total reaction is shared out, but equals the plain model's
    fa = a["reactions/O2.j.fx"]
    fb = b["reactions/O2.j.fx"] + b["reactions/O2_twin.j.fx"]
    np.testing.assert_allclose(fb, fa, atol=1e-7 * (1 + np.abs(fa).max()))


def test_stop_condition_in_the_model_file():
    """settings.stop_when: 'ball.y < 0' stops a falling ball at y = 0, t = sqrt(2h/g)."""
    m = Model("drop")
    m.set_gravity(0, -9.81)
    m.add_body("ball", mass=1.0, inertia=0.1, position=(0, 2.0))
    m.settings = {"analysis": "dynamic", "t_end": 5.0, "stop_when": "ball.y < 0",
                  "rtol": 1e-10, "atol": 1e-12}
    res = mbcore.run(m)
    ev = [e for e in res.events if e.kind == "stop"]
    assert len(ev) == 1 and ev[0].t == pytest.approx(np.sqrt(2 * 2.0 / 9.81), abs=1e-9)
    assert res.status == "finished" and res.t[-1] <= ev[0].t
    m.settings["stop_when"] = "qd:ball.y < -5"
    res = mbcore.run(m)
    assert [e for e in res.events if e.kind == "stop"][0].t == pytest.approx(5 / 9.81, abs=1e-9)
    m.settings["stop_when"] = "__import__('os') < 1"
    with pytest.raises(mbcore.ModelError, match="settings.stop_when: cannot read condition"):
        mbcore.run(m)


@pytest.mark.parametrize("integrator", ["euler", "heun", "midpoint", "rk4", "bs23", "dopri5",
                                        "abm", "bdf", "implicit_euler", "trapezoid"])
def test_every_integrator_runs_the_multibody_ode(integrator, examples):
    """Every built-in method advances the DI form of the DAP four-bar; the higher
    the order, the better the energy (fixed steps: 1 ms; adaptive: rtol 1e-8)."""
    st = dict(integrator=integrator, t_end=0.5, output_step=0.05, formulation="di",
              step=1e-3, rtol=1e-8, atol=1e-10)
    res = mbcore.run(dap_fourbar(examples, **st))
    E = res["energy/total"]
    drift = np.max(np.abs(E - E[0])) / np.max(res["energy/kinetic"])
    bound = {"euler": 0.5, "implicit_euler": 0.5}.get(integrator, 1e-3)
    assert res.status == "finished" and len(res) == 11 and drift < bound


@pytest.mark.parametrize("t_end, step", [(0.3, 0.1), (1.7, 0.05), (0.7, 0.1)])
def test_output_times_never_round_past_t_end(t_end, step):
    m = Model("free")
    m.set_gravity(0, -9.81)
    m.add_body("b", position=(0, 0))
    res = mbcore.run(m, settings={"analysis": "dynamic", "t_end": t_end, "output_step": step,
                                  "formulation": "di"})
    assert res.t[-1] == pytest.approx(t_end) and res.t[-1] <= t_end
    assert len(res) == int(round(t_end / step)) + 1


def test_stop_condition_true_at_start():
    m = Model("below")
    m.add_body("ball", position=(0, -1.0))
    res = mbcore.run(m, settings={"analysis": "dynamic", "t_end": 1.0, "stop_when": "ball.y < 0"})
    assert len(res) == 1 and res.stats["stopped_by"] == "ball.y < 0"


def test_compiled_schur_detects_near_singular_like_the_reference():
    """A duplicated pin, solved at a state without removing rows: both backends
    report the singular system (or pass with least squares when asked)."""
    from mbcore.solve.dynamics import AccelerationSolver
    m = Model("twice")
    m.set_gravity(0, -9.81)
    m.add_body("p", position=(0.5, 0.0))
    for k in range(2):
        m.add_joint("revolute", f"pin{k}", body_i="ground", body_j="p", point_i=(0, 0),
                    point_j=(-0.5, 0))
    for kernels in ("compiled", "numpy"):
        s = m.compile(kernels=kernels)
        solver = AccelerationSolver(s)
        with pytest.raises(mbcore.SingularJacobianError):
            solver.solve(np.array([0.5, 0.0, 0.0]), np.zeros(3), 0.0)
        solver.rank_deficiency = "least_squares"
        qdd, lam = solver.solve(np.array([0.5, 0.0, 0.0]), np.zeros(3), 0.0)
        assert qdd[1] == pytest.approx(-9.81 * 0.25 / (0.25 + 1.0), rel=1e-9)   # J = 1


def test_formulation_options_reach_the_formulation(examples):
    """settings.formulation_options passes any setting of the formulation's own
    table; unknown keys and keys given twice are errors naming the key path."""
    from mbcore.errors import ModelError
    m = Model.from_file(examples / "fourbar_dap.yaml")
    st = {"analysis": "dynamic", "t_end": 0.1, "output_step": 0.05, "formulation": "cs"}
    a = mbcore.run(m, settings={**st, "formulation_options": {"alpha": 2.0, "beta": 3.0}})
    b = mbcore.run(m, settings={**st, "alpha": 2.0, "beta": 3.0})
    np.testing.assert_array_equal(a["q"], b["q"])
    with pytest.raises(ModelError, match=r"settings.formulation_options.gama: unknown key"):
        mbcore.run(m, settings={**st, "formulation_options": {"gama": 1.0}})
    with pytest.raises(ModelError, match=r"settings.formulation_options.alpha: also given"):
        mbcore.run(m, settings={**st, "alpha": 1.0, "formulation_options": {"alpha": 2.0}})
    with pytest.raises(ModelError, match=r"settings.formulation_options: expected a mapping"):
        mbcore.run(m, settings={**st, "formulation_options": [1, 2]})


# ------------------------------------------------------------ output rows (issue 14)
def _pendulum_chain(n):
    """n slender 1 m, 1 kg links pinned end to end, released horizontal (n = 1: the
    pendulum of the issue-14 benchmark; n = 20: 60 coordinates, a sparse System)."""
    m = Model(f"chain{n}")
    m.set_gravity(0, -9.81)
    for k in range(n):
        m.add_body(f"L{k}", mass=1.0, inertia=1.0 / 12, position=(k + 0.5, 0.0))
        m.add_joint("revolute", f"J{k}", body_i="ground" if k == 0 else f"L{k - 1}",
                    body_j=f"L{k}", point_i=(0, 0) if k == 0 else (0.5, 0),
                    point_j=(-0.5, 0))
    m.settings = {"analysis": "dynamic"}
    return m


def _row_by_row(monkeypatch):
    """The previous implementation's path: every output row through _Run.output."""
    import mbplugins.analyses.dynamic as dyn
    monkeypatch.setattr(dyn._Run, "_row_block", lambda self: None)


def _assert_block_equal(c, got, ref, res):
    """Copied channels (q, qd, qdd, lam, integrator) bit for bit; the computed ones
    (energy, violation, ...) are sums in another order than the row-by-row path: within
    1e-12 of their scale (observed <= 5e-16 relative; for the velocity violation the scale
    is max|Phi_q| max|qd|, observed <= 2e-16 of it)."""
    got, ref = np.asarray(got), np.asarray(ref)
    if c in ("q", "qd", "qdd", "lam", "integrator"):
        assert np.array_equal(got, ref), c
        return
    assert got.shape == ref.shape, c
    scale = np.max(np.abs(ref)) if ref.size else 0.0
    if c == "violation":
        sysm, q = res.system, np.asarray(res["q"]) if "q" in res.channels else None
        qd = np.asarray(res["qd"]) if "qd" in res.channels else None
        if q is not None and qd is not None and sysm.m:
            J = max(np.max(np.abs(sysm.jacobian_dense(q[i], float(res.t[i]))))
                    for i in (0, len(q) // 2, len(q) - 1))
            scale = max(scale, J * np.max(np.abs(qd)))
        else:
            scale = max(scale, 1.0)
    assert np.max(np.abs(got - ref), initial=0.0) <= 1e-12 * scale, c


@pytest.mark.parametrize("record", ["q, qd", "qd, q", "q, qd, energy", "integrator, qd",
                                    "q, qd, energy, integrator", "violation, q",
                                    "q, qd, energy, violation, integrator", None])
@pytest.mark.parametrize("case", ["pendulum", "platform", "chain20", "stop"])
def test_batched_output_rows_equal_row_by_row(case, record, examples, tmp_path, monkeypatch):
    """The compiled loop hands rows to the reporters in blocks: every recorded
    channel, the times, the HDF5 file, the events and the statistics equal those of
    the row-by-row path (copied channels bit for bit, computed ones to round-off) —
    also across a stop condition (the compiled loop hands the last step to the
    Python driver) and for every channel."""
    from mbcore.results.result import Result
    st = {"t_end": 1.0, "output_step": 0.01, "integrator": "dopri5", "formulation": "di",
          "rtol": 1e-4, "atol": 1e-7}
    if case == "platform":
        model = Model.from_file(examples / "platform.yaml")
        st.update(formulation="cs")
    elif case == "chain20":
        model, st["t_end"] = _pendulum_chain(20), 0.2
    else:
        model = _pendulum_chain(1)
        if case == "stop":
            st.update(stop_when="qd:L0.phi < -3", t_end=2.0)
    if record:
        st["record"] = record

    def go(tag):
        res = mbcore.run(model, settings=st, output=tmp_path / f"{tag}.h5")
        stats = {k: v for k, v in res.stats.items() if k != "wall_time"}
        return res, stats

    new, new_stats = go("new")
    assert new_stats["loop"] == "compiled"
    with monkeypatch.context() as mp:
        _row_by_row(mp)
        old, old_stats = go("old")
    assert new_stats == old_stats
    assert new.events == old.events and len(new) == len(old) > 10
    assert new.channels == old.channels
    assert np.array_equal(new.t, old.t)
    for c in new.channels:
        _assert_block_equal(c, new[c], old[c], new)
    with Result(tmp_path / "new.h5") as a, Result(tmp_path / "old.h5") as b:
        assert a.channels == b.channels and np.array_equal(a.t, b.t)
        for c in a.channels:
            _assert_block_equal(c, a[c], b[c], new)
        assert a.events == b.events and a.status == b.status == "finished"
    if case == "stop":
        assert new.stats["stopped_by"] == "qd:L0.phi < -3"


def test_batched_rows_reach_a_plain_record_function(monkeypatch):
    """An analysis run with a plain ``record(t, data)`` callable (no ``rows``
    attribute: not the runner's) still gets one call per row, in order, with the
    values of the row-by-row path."""
    from mbcore.results.reporting import Row
    m = _pendulum_chain(1)
    st = {"t_end": 0.5, "output_step": 0.01, "record": "q, qd, integrator", "rtol": 1e-5,
          "formulation": "di"}
    sysm = m.compile()
    reg = mbcore.plugins.registry()
    rows = {}
    for tag in ("new", "old"):
        with monkeypatch.context() as mp:
            if tag == "old":
                _row_by_row(mp)
            job = reg.get("analysis", "dynamic")(sysm, st)
            got = []

            def record(t, data):
                assert isinstance(data, Row)
                got.append((t, data.flat.copy()))
            job.run(record, lambda *a: None)
            rows[tag] = got
    assert len(rows["new"]) == len(rows["old"]) == 51
    for (ta, a), (tb, b) in zip(rows["new"], rows["old"], strict=True):
        assert ta == tb and np.array_equal(a, b)


def test_failed_run_keeps_the_batched_rows(tmp_path):
    """A reporter failing in the middle of a run: the rows collected before reach the
    other reporters (the block is handed over when the loop stops), and the HDF5
    file is marked failed with them."""
    from mbcore.results.reporting import Reporter
    from mbcore.results.result import Result

    class Boom(Reporter):
        def __init__(self):
            self.n = 0

        def start(self, info):
            pass

        def record(self, t, data):
            self.n += 1
            if t > 0.3:
                raise RuntimeError("disk full")

        def finish(self, *a):
            pass

    m = _pendulum_chain(1)
    st = {"t_end": 1.0, "output_step": 0.01, "record": "q, qd", "formulation": "di"}
    path = tmp_path / "f.h5"
    with pytest.raises(RuntimeError, match="disk full"):
        mbcore.run(m, settings=st, output=path, reporters=[Boom()])
    with Result(path) as res:
        assert res.status == "failed" and "disk full" in res.reason
        assert len(res) >= 31 and res.t[30] == pytest.approx(0.3)
