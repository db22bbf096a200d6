"""Loops of the joint-coordinate formulation closed by projection or coordinate
partitioning (issue 13, deliverable 2; src/mbplugins/formulations/jc_loops.py):
``formulation_options: {loop_stabilization: projection | partitioning}`` keeps the
cut-joint rows Phi* at the projection tolerance after every step (spec/algorithms.md
§4.7.2 with §4.5 and §4.3 / §4.4(b)), planar and spatial.

* the same Cartesian motion (1e-8) and reactions (1e-7 relative) as ``cp`` (``di``
  for Andrews' squeezer) at tight tolerances;
* at a loose rtol (1e-4) with alpha = beta = 0 the Baumgarte mode (plain DI)
  drifts (measured 4.2e-9 ... 1.2e-7) while both modes stay at their tolerance
  (<= 1e-10; measured <= 2.6e-12) — if the correction were skipped these would
  fail (checked by mutation: 21 tests of this file fail);
* the correction of a perturbed state: on the constraints; projection: the velocity
  step is the minimum-norm one in the metric and does not add kinetic energy;
  partitioning: the independent joint coordinates are untouched;
* ``theta ⊕ dnu`` against finite differences (``d/ds Phi* = D dnu``; spatial: the
  rotation-vector update of a ball joint's Euler parameters has the derivative
  thetadot = N(theta) nu of the integrated equations);
* a driver row (nu* != 0) and a floating base;
* re-partitioning (a named poor initial partition is replaced, ``repartition``
  event), no-ops on trees, baumgarte unchanged, and the named errors.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.solve.assembly import assemble
from mbcore.errors import AnalysisError, ModelError
from mbplugins.formulations.joint_coordinates import JointCoordinates

from conftest import EXAMPLES

MODES = ("projection", "partitioning")
#: model -> (t_end, reference formulation, extra settings of the tight runs)
CASES = {
    "fourbar_dap": (0.5, "cp", {}),
    "slider_crank_dynamic": (0.5, "cp", {}),
    "nfourbar_2": (0.3, "cp", {}),              # before its singular passage (0.71 s)
    "andrews_squeezer": (0.03, "di", {"integrator": "dop853"}),
    "spatial_slider_crank_dynamic": (0.5, "di", {}),      # cp: 12 s (Python path)
}
TIGHT = {"rtol": 1e-11, "atol": 1e-12}


def jc(mode, **opts):
    return {"formulation": "joint_coordinates",
            "formulation_options": {"loop_stabilization": mode, **opts}}


def model(name):
    return Model.from_file(EXAMPLES / f"{name}.yaml")


@pytest.fixture(scope="module")
def references():
    """The Cartesian reference run of each model (cached)."""
    out = {}

    def get(name):
        if name not in out:
            t_end, ref, extra = CASES[name]
            st = {"t_end": t_end, "output_step": t_end / 10, **TIGHT, **extra}
            out[name] = mbcore.run(model(name), settings={**st, "formulation": ref})
        return out[name]
    return get


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CASES))
def test_modes_agree_with_cartesian(references, name, mode):
    """Tight tolerances: the motion of cp / di to 1e-8 (Andrews: 1e-6), reactions to
    1e-6 (1e-5) of the largest, every output on the cut rows (measured: motion <= 5e-9
    for Andrews vs di, <= 5e-12 for the others; reactions <= 2.2e-8; |Phi*| <=
    3.3e-13)."""
    t_end, _, extra = CASES[name]
    a = references(name)
    st = {"t_end": t_end, "output_step": t_end / 10, **TIGHT, **extra}
    b = mbcore.run(model(name), settings={**st, **jc(mode)})
    assert b.stats["formulation"] == "joint_coordinates"
    assert "projections" in b.stats
    np.testing.assert_allclose(b["t"], a["t"])
    # two integrations at rtol 1e-11 differ by their global errors: <= 5e-12 here,
    # but up to 5e-9 on Andrews' squeezer (angles up to 16 rad, ~290 steps; see
    # test_andrews_squeezer), whose bound is 1e-6 like there
    # (reactions: 2.2e-8 of the largest on the squeezer, <= 1e-9 on the others)
    motion, react = (1e-6, 1e-5) if name == "andrews_squeezer" else (1e-8, 1e-6)
    np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=motion)
    np.testing.assert_allclose(b["reactions"], a["reactions"], rtol=0,
                               atol=react * np.abs(a["reactions"]).max())
    # the cut rows to the projection test 1e-12 (1 + |q|), 100x it
    bound = 100 * 1e-12 * (1 + np.abs(b["q"]).max())
    assert b["violation/position"].max() <= bound
    assert b["violation/velocity"].max() <= bound
    parts = [e for e in b.events if e.kind == "partition"]
    assert len(parts) == (mode == "partitioning")


@pytest.mark.parametrize("name", ["fourbar_dap", "slider_crank_dynamic", "andrews_squeezer",
                                  "spatial_slider_crank_dynamic"])
def test_loose_tolerance_drift_is_removed(name):
    """rtol 1e-4, alpha = beta = 0: the Baumgarte mode is plain DI and the cut rows
    drift with the integration error; projection and partitioning correct theta
    and nu after every step (``stats.projections`` > 0) and keep both violations
    at their tolerance at every output."""
    t_end = CASES[name][0]
    st = {"t_end": t_end, "output_step": t_end / 10, "rtol": 1e-4, "atol": 1e-5}
    m = model(name)
    di = mbcore.run(m, settings={**st, "alpha": 0.0, "beta": 0.0, **jc("baumgarte")})
    drift = di["violation/position"].max()
    assert drift > 1e-9                        # measured 4.2e-9 ... 1.2e-7
    for mode in MODES:
        r = mbcore.run(m, settings={**st, **jc(mode)})
        assert r.stats["projections"] > 0
        # the projection test 1e-12 (1 + |q|) (observed <= 2.5e-12 on the squeezer,
        # |q| <= 16), 100x it
        bound = 100 * 1e-12 * (1 + np.abs(r["q"]).max())
        assert r["violation/position"].max() <= bound
        assert r["violation/position"].max() < 1e-2 * drift
        assert r["violation/velocity"].max() <= bound


def test_driver_rows_and_floating_base():
    """A driver on a tree joint (a time-dependent row, nu* != 0: the velocity step
    solves ``D nu = nu*``) and a floating base whose translational joint is cut (the
    partition names the base's entries): DI's motion and multipliers at rtol 1e-11;
    at rtol 1e-4 the driven pendulum's DI drifts (6.2e-9) and both modes do not."""
    from test_joint_coordinates import ST, chain
    m = chain(2)
    m.add_driver("relative_driver", "motor", body_i="L0", body_j="L1",
                 function="0.3*sin(2*t)")
    r = Model()
    r.set_gravity(0.0, -9.81)
    r.add_body("s", mass=1.0, inertia=0.1, position=(1.0, 0.0), velocity=(0.5, 0.0))
    r.add_joint("translational", "slide", body_i="s", body_j="ground", axis=(1.0, 0.0))
    r.add_force("tsda", "spring", body_i="ground", body_j="s", point_i=(0.0, 0.0),
                stiffness=10.0, free_length=0.5)
    for mod, independent in ((m, "J0"), (r, "<floating s>.x")):
        a = mbcore.run(mod, analysis="dynamic", settings={**ST, "formulation": "di"})
        for mode in MODES:
            b = mbcore.run(mod, analysis="dynamic", settings={**ST, **jc(mode)})
            np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=1e-8)
            np.testing.assert_allclose(b["lam"], a["lam"], rtol=0,
                                       atol=1e-7 * np.abs(a["lam"]).max())
            if mode == "partitioning":
                assert [e.message for e in b.events if e.kind == "partition"] == \
                    [f"independent coordinates: {independent}"]
    loose = {**ST, "rtol": 1e-4, "atol": 1e-5}
    di = mbcore.run(m, analysis="dynamic",
                    settings={**loose, "alpha": 0.0, "beta": 0.0, **jc("baumgarte")})
    assert di["violation/position"].max() > 1e-9
    for mode in MODES:
        b = mbcore.run(m, analysis="dynamic", settings={**loose, **jc(mode)})
        assert b.stats["projections"] > 0
        assert b["violation/position"].max() <= 1e-10
        assert b["violation/velocity"].max() <= 1e-10


# --- the correction itself ------------------------------------------------------------

def formulation(name, **opts):
    """(formulation, y0, t0) at the assembled initial state of an example."""
    s = model(name).compile()
    st = s.initial_state(0.0)
    rep = assemble(s, st.q, st.qd, 0.0)
    form = JointCoordinates(s, opts)
    y, _ = form.initialize(rep.q, rep.qd, 0.0)
    return form, y


def residuals(form, y, t=0.0):
    s, nq = form.system, form._nq
    q, D, _ = form._closure(y[:nq], t, False)
    ex = form.extra
    return (np.abs(s.phi(q, t)[ex]).max(),
            np.abs(D @ y[nq:nq + form._nv] - s.nu(q, t)[ex]).max())


def perturbed(form, y, seed):
    rng = np.random.default_rng(seed)
    dth = 1e-4 * rng.normal(size=form._nv)
    yp = y.copy()
    yp[:form._nq] = form._retract(y[:form._nq], dth)
    yp[form._nq:] += 1e-2 * rng.normal(size=form._nv)
    return yp


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("weighted", [True, False])
def test_projection_of_a_perturbed_state(name, weighted):
    """Back on Phi* = 0 and D nu = nu*; the velocity step is ``-W^-1 D^T mu`` (W = H
    = B^T M B or I) and, in the mass metric without drivers, does not increase the
    kinetic energy 1/2 nu^T H nu."""
    form, y = formulation(name, loop_stabilization="projection", mass_weighted=weighted)
    nq, nv = form._nq, form._nv
    yp = perturbed(form, y, 1)
    assert min(residuals(form, yp)) > 1e-8
    yn = form.project(0.0, yp)
    assert yn is not None and form.projections == 1
    p, v = residuals(form, yn)
    tol = form._tolerance(form._closure(yn[:nq], 0.0, False)[0])      # 1e-12 (1 + |q|)
    assert p <= tol and v <= tol
    _, D, H = form._closure(yn[:nq], 0.0, True)
    W = H if weighted else np.eye(nv)
    dnu = yn[nq:] - yp[nq:]
    mu = np.linalg.lstsq(D.T, W @ dnu, rcond=None)[0]
    np.testing.assert_allclose(D.T @ mu, W @ dnu, atol=1e-10 * np.abs(W @ dnu).max())
    if weighted and not np.any(form.system.nu(form._closure(yn[:nq], 0.0, False)[0],
                                              0.0)[form.extra]):
        assert yn[nq:] @ H @ yn[nq:] <= yp[nq:] @ H @ yp[nq:]
    assert form.project(0.0, yn) is None          # nothing left to correct


@pytest.mark.parametrize("name", list(CASES))
def test_partitioning_of_a_perturbed_state(name):
    """Newton moves only the dependent joint coordinates: the independent nu and
    (planar, or scalar joints) theta entries are unchanged; Phi* = 0, D nu = nu*."""
    form, y = formulation(name, loop_stabilization="partitioning")
    nq = form._nq
    yp = perturbed(form, y, 2)
    yn = form.project(0.0, yp)
    p, v = residuals(form, yn)
    tol = form._tolerance(form._closure(yn[:nq], 0.0, False)[0])
    assert p <= tol and v <= tol
    assert np.array_equal(yn[nq:][form.v], yp[nq:][form.v])
    assert np.any(yn[nq:][form.u] != yp[nq:][form.u])
    for j in form.tree.joints:                  # scalar joints: theta moves with nu
        qo, vo = (j.qo, j.vo) if hasattr(j, "qo") else (j.index, j.index)
        if j.kind in ("revolute", "translational") and vo in form.v:
            assert yn[qo] == yp[qo]


def test_the_coordinate_update_against_finite_differences():
    """d/ds Phi*(theta ⊕ s dnu) = D dnu at s = 0 (planar four-bar; spatial
    slider-crank, whose ball joint is in the tree), and for the spatial tree the
    derivative of theta ⊕ s dnu is thetadot = N(theta) dnu of the integrated
    equations (the rotation-vector update of the Euler parameters), at a generic
    theta (at the reference e = identity, where left and right products agree)."""
    rng = np.random.default_rng(3)
    for name in ("fourbar_dap", "spatial_slider_crank_dynamic"):
        form, y = formulation(name, loop_stabilization="projection")
        s, ex, nq, nv = form.system, form.extra, form._nq, form._nv
        th = form._retract(y[:nq], 0.5 * rng.normal(size=nv))
        for _ in range(3):
            dnu = rng.normal(size=nv)
            h = 1e-6

            def phi(x):
                q = form._closure(form._retract(th, x * dnu), 0.2, False)[0]
                return s.phi(q, 0.2)[ex]
            _, D, _ = form._closure(th, 0.2, False)
            np.testing.assert_allclose((phi(h) - phi(-h)) / (2 * h), D @ dnu,
                                       atol=1e-8 * (1 + np.abs(D @ dnu).max()))
            if nq != nv:                            # spatial: the Euler parameters
                d = (form._retract(th, h * dnu) - form._retract(th, -h * dnu)) / (2 * h)
                np.testing.assert_allclose(d, form.tree.theta_dot(th, dnu), atol=1e-8)
    # a finite rotation: e stays a unit quaternion, and turning back undoes it
    form, y = formulation("spatial_slider_crank_dynamic", loop_stabilization="projection")
    dnu = rng.normal(size=form._nv)
    th2 = form._retract(y[:form._nq], dnu)
    j = next(j for j in form.tree.joints if j.kind == "spherical")
    assert abs(np.linalg.norm(th2[j.qo:j.qo + 4]) - 1.0) < 1e-15
    back = form._retract(th2, -dnu)
    np.testing.assert_allclose(back, form.tree.normalised(y[:form._nq]), atol=1e-14)


# --- re-partitioning, trees, baumgarte, errors ----------------------------------------

def crank_rocker(omega=200.0, a0=0.3):
    """A Grashof crank-rocker (ground 4, crank 1, coupler 4, rocker 3; no gravity)
    whose crank turns fully; the rocker angle D is a poor independent coordinate
    (stationary at the rocker's dead points)."""
    d, a, b, c = 4.0, 1.0, 4.0, 3.0
    A = np.array([a * math.cos(a0), a * math.sin(a0)])
    Dp = np.array([d, 0.0])
    L = float(np.linalg.norm(Dp - A))
    ex = (Dp - A) / L
    x = (b * b - c * c + L * L) / (2 * L)
    B = A + x * ex + math.sqrt(b * b - x * x) * np.array([-ex[1], ex[0]])
    m = Model()
    m.set_gravity(0.0, 0.0)

    def link(name, P, Q, mass):
        ln = float(np.linalg.norm(Q - P))
        m.add_body(name, mass=mass, inertia=mass * ln * ln / 12,
                   position=tuple(0.5 * (P + Q)), angle=math.atan2(Q[1] - P[1], Q[0] - P[0]))
        return ln
    la, lb, lc = link("crank", np.zeros(2), A, 1.0), link("coupler", A, B, 2.0), \
        link("rocker", Dp, B, 1.5)
    m.add_joint("revolute", "O", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-la / 2, 0))
    m.add_joint("revolute", "A", body_i="crank", body_j="coupler", point_i=(la / 2, 0),
                point_j=(-lb / 2, 0))
    m.add_joint("revolute", "B", body_i="coupler", body_j="rocker", point_i=(lb / 2, 0),
                point_j=(lc / 2, 0))
    m.add_joint("revolute", "D", body_i="rocker", body_j="ground", point_i=(-lc / 2, 0),
                point_j=(d, 0))
    m.bodies[0].angular_velocity = omega
    return m


def test_poor_partition_is_replaced():
    """Independent joint coordinate D (the rocker) named: the hysteresis test at the
    outputs finds a partition 10x better and the analysis restarts with it (a
    ``repartition`` event naming the joint coordinates); the crank turns more than
    once and the motion is cp's (measured 1.6e-11)."""
    m = crank_rocker()
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.01, "rtol": 1e-9,
          "atol": 1e-11}
    r = mbcore.run(m, settings={**st, **jc("partitioning", independent="D")})
    c = mbcore.run(m, settings={**st, "formulation": "cp"})
    ev = [e for e in r.events if e.kind in ("partition", "repartition")]
    assert ev[0].message == "independent coordinates: D"
    assert any(e.kind == "repartition" and "independent coordinates D -> " in e.message
               for e in ev)
    assert r.stats["restarts"] >= 1
    assert r["q/crank.phi"][-1] - r["q/crank.phi"][0] > 2 * math.pi
    np.testing.assert_allclose(r["q"], c["q"], rtol=0, atol=1e-8)
    assert r["violation/position"].max() <= 1e-10


def test_trees_and_baumgarte_unchanged():
    """A tree (no cut rows; planar chain, spatial double pendulum): both modes are
    no-ops, the results equal baumgarte's bit for bit; the default is baumgarte."""
    from test_joint_coordinates import chain
    st = {"analysis": "dynamic", "t_end": 0.3, "output_step": 0.1}
    for m in (chain(3), model("spatial_double_pendulum")):
        base = mbcore.run(m, settings={**st, "formulation": "joint_coordinates"})
        for mode in MODES:
            r = mbcore.run(m, settings={**st, **jc(mode)})
            for k in ("q", "qd", "qdd", "lam", "energy"):
                assert np.array_equal(r[k], base[k])
            assert "projections" not in r.stats
    s = chain(3).compile()
    assert JointCoordinates(s).loop_mode == "baumgarte"
    assert not hasattr(JointCoordinates(s, {"loop_stabilization": "projection"}), "project")
    four = model("fourbar_dap").compile()
    assert not hasattr(JointCoordinates(four), "project")
    assert hasattr(JointCoordinates(four, {"loop_stabilization": "projection"}), "project")


def test_named_errors():
    m = model("fourbar_dap")
    st = {"t_end": 0.05, "output_step": 0.01}
    with pytest.raises(ModelError, match=r"settings\.formulation_options\.loop_stabilization: "
                                         r"expected one of .*got .*stabilise"):
        mbcore.run(m, settings={**st, **jc("stabilise")})
    with pytest.raises(ModelError, match=r"settings\.alpha"):
        mbcore.run(m, settings={**st, "alpha": 2.0, **jc("projection")})
    with pytest.raises(ModelError, match=r"settings\.independent: used with "
                                         r"loop_stabilization: partitioning, not projection"):
        mbcore.run(m, settings={**st, **jc("projection", independent="A")})
    with pytest.raises(ModelError, match=r"settings\.mass_weighted"):
        mbcore.run(m, settings={**st, **jc("partitioning", mass_weighted=False)})
    with pytest.raises(ModelError, match=r"settings\.repartition_factor"):
        mbcore.run(m, settings={**st, "repartition_factor": 5.0, **jc("baumgarte")})
    with pytest.raises(ModelError, match=r"unknown joint coordinate 'Q'"):
        mbcore.run(m, settings={**st, **jc("partitioning", independent="Q")})
    with pytest.raises(ModelError, match=r"expected 1 independent"):
        mbcore.run(m, settings={**st, **jc("partitioning", independent="A, O2")})
    # an unreachable tolerance: the iteration stops with the time and |Phi*|
    for mode in MODES:
        with pytest.raises(AnalysisError, match=r"did not converge at t = .*\|Phi\*\| = "):
            mbcore.run(m, settings={**st, **jc(mode, projection_tolerance=1e-22)})
