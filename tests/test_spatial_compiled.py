"""Compiled kernels of the spatial constraint types (ext/plugins/_spatial_constraints.pyx) against their
NumPy references (mbplugins.spatial.constraints, .composites), through the System:

* every type of ``CONSTRAINT_TYPES`` and ``COMPOSITE_TYPES`` (and the
  Euler-parameter normalisation rows) is compiled, and phi, the Jacobian (dense and CSR storage), nu and gamma equal
  the NumPy path to 1e-12 on random seeded states (normalised p, random rates),
  groups of several elements with the ground as body i and as body j, drivers
  with time-dependent functions;
* the rotation driver's and the screw's tracked angles live in the System group's own par array,
  shared by the compiled and the NumPy path;
* the spatial slider-crank runs its kinematic analysis on the compiled
  KinematicStepper and equals the NumPy path to 1e-10 over 3 s (the crank turns
  past pi and 2 pi: the tracked driver angle);
* the System refuses a spatial type that names a planar kernel.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import PluginError
from mbcore.system import compiled_available
from mbplugins.spatial import composites as SX
from mbplugins.spatial import constraints as SC

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BODIES = ("b1", "b2", "b3")
#: (body_i, body_j) of the elements of every two-body group: ground on both sides
PAIRS = (("ground", "b1"), ("b1", "b2"), ("b3", "ground"), ("b2", "b3"))


def _unit(rng):
    v = rng.normal(size=3)
    return list(v / np.linalg.norm(v))


def _vec(rng, scale=0.5):
    return list(scale * rng.normal(size=3))


def _params(tname: str, rng, k: int) -> dict:
    """Parameters of element k of a type (defaults exercised on odd k)."""
    odd = k % 2 == 1
    drive = f"{0.4 + 0.1 * k} + 0.3*sin({1.0 + k}*t) + 0.2*t"
    if tname == "spherical":
        return {"point_i": _vec(rng)} if odd else {"point_i": _vec(rng), "point_j": _vec(rng)}
    if tname == "universal":
        return {"point_i": _vec(rng), "axis_i": _unit(rng), "axis_j": _unit(rng),
                **({} if odd else {"point_j": _vec(rng)})}
    if tname in ("revolute", "cylindrical", "translational", "planar"):
        p = {"point_i": _vec(rng), "axis_i": _unit(rng)}
        if not odd:
            p["point_j"] = _vec(rng)
            if tname != "translational":
                p["axis_j"] = _unit(rng)
        return p
    if tname in ("distance", "spherical_spherical"):
        p = {"point_i": _vec(rng), "point_j": _vec(rng)}
        if odd:
            p["length"] = 1.3 + 0.1 * k
        return p
    if tname == "distance_driver":
        return {"point_i": _vec(rng), "point_j": _vec(rng), "function": "1.0 + " + drive}
    if tname == "spherical_revolute":
        return {"point_i": _vec(rng), "point_j": _vec(rng), "axis_j": _unit(rng),
                **({"length": 1.1} if odd else {})}
    if tname == "revolute_revolute":
        return {"point_i": _vec(rng), "point_j": _vec(rng), "axis_i": _unit(rng),
                "axis_j": _unit(rng), **({"length": 1.2} if odd else {})}
    if tname == "angle_driver":
        return {"vector_i": _unit(rng), "vector_j": _unit(rng), "function": drive}
    if tname == "rotation_driver":
        p = {"axis_i": _unit(rng), "function": drive}
        if not odd:
            p["reference_i"] = _unit(rng)
            p["reference_j"] = _unit(rng)
        return p
    if tname == "fixed":
        return {"point_i": _vec(rng)} if odd else {"point_i": _vec(rng), "point_j": _vec(rng)}
    if tname == "perpendicular":
        return {"vector_i": _unit(rng), "vector_j": _unit(rng)}
    if tname == "parallel":
        return {"vector_i": _unit(rng), **({} if odd else {"vector_j": _unit(rng)})}
    if tname == "screw":
        p = {"point_i": _vec(rng), "axis_i": _unit(rng), "pitch": 0.05 * (k - 1.5)}
        if not odd:
            p["point_j"] = _vec(rng)
            p["axis_j"] = _unit(rng)
        return p
    if tname == "revolute_cylindrical":
        return {"point_i": _vec(rng), "axis_i": _unit(rng), "axis_j": _unit(rng),
                **({} if odd else {"point_j": _vec(rng)})}
    if tname in ("point_on_line", "point_on_plane"):
        key = "axis_i" if tname == "point_on_line" else "normal_i"
        return {"point_i": _vec(rng), key: _unit(rng),
                **({} if odd else {"point_j": _vec(rng)})}
    if tname == "relative_rotation_ep":
        return {"function": drive, **({"zero": "initial"} if odd else {})}
    if tname == "orientation_lock":
        return {}
    raise AssertionError(f"no parameters for {tname}")


def group_model(tname: str, seed: int) -> Model:
    """Three spatial bodies in random poses and one group of ``tname`` (4-5
    elements, the ground as body i and as body j)."""
    rng = np.random.default_rng(seed)
    m = Model(f"grp_{tname}")
    m.set_dimensions(3)
    for b in BODIES:
        m.add_body(b, mass=1.0, inertia=[0.1, 0.2, 0.3], position=_vec(rng, 1.0),
                   orientation={"axis": _unit(rng), "angle": float(rng.uniform(-3, 3)),
                                "unit": "rad"})
    cls = next(c for c in ALL_TYPES if c.name == tname)
    add = m.add_driver if cls.category == "driver" else m.add_joint
    if tname == "point_coordinate":
        for k, (b, c) in enumerate((("b1", "x"), ("ground", "y"), ("b2", "z"), ("b3", "y"))):
            if b == "ground":
                continue
            p = {"body": b, "coordinate": c, "point": _vec(rng)}
            if k != 2:
                p["function"] = f"{0.1 * k} + 0.5*cos({k + 1}*t)"
            add(tname, f"e{k}", **p)
        return m
    default_j = tname in ("fixed", "orientation_lock")
    pairs = PAIRS + ((("b1", "ground"),) if default_j else ())
    for k, (bi, bj) in enumerate(pairs):
        if tname == "fixed" and bi == "ground":
            bi, bj = bj, bi            # fixed: body_i is the welded body
        p = _params(tname, rng, k)
        if default_j and k == 4:
            add(tname, f"e{k}", body_i=bi, **p)          # body_j defaults to the ground
        else:
            add(tname, f"e{k}", body_i=bi, body_j=bj, **p)
    return m


def random_state(sysm, rng):
    """Random q (normalised Euler parameters) and qd (any rates)."""
    q = np.empty(sysm.n)
    qd = rng.normal(size=sysm.n)
    for o in sysm.body_offsets:
        q[o:o + 3] = rng.normal(size=3)
        p = rng.normal(size=4)
        q[o + 3:o + 7] = p / np.linalg.norm(p)
    return q, qd


def assert_close(a, b, what):
    scale = max(1.0, float(np.max(np.abs(b))) if np.size(b) else 1.0)
    err = float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) if np.size(b) else 0.0
    assert err <= 1e-12 * scale, f"{what}: compiled - numpy = {err:.3g} (scale {scale:.3g})"


ALL_TYPES = list(SC.CONSTRAINT_TYPES) + list(SX.COMPOSITE_TYPES)
TYPE_NAMES = [c.name for c in ALL_TYPES]


def test_every_spatial_type_names_a_compiled_kernel():
    """Every built-in spatial type has a capsule of the compiled plugin tier
    (mbplugins._ext._spatial_constraints) declaring its sizes; the body kind's
    normalization constraint has the core's own."""
    from mbcore._ext import _planar
    from mbcore.elements.bodykinds import EulerNormalization
    from mbcore.plugins.compiled import load_constraint_kernel
    for cls in ALL_TYPES:
        assert cls.kernel == f"spatial_{cls.name}" or cls in SC.CONSTRAINT_TYPES, cls.name
        assert cls.c_kernel.startswith("mbplugins._ext._spatial_constraints:"), cls.name
        k = load_constraint_kernel(cls)             # checks the declared sizes
        info = _planar.constraint_kernel_info(k.capsule)
        assert info["name"] == cls.kernel and info["direct"], cls.name
        assert (info["n_equations"], info["n_bodies"], info["n_par"], info["n_fun"]) == (
            cls.equations, len(cls.bodies), cls.n_par, cls.n_fun)
        # the stateful ones keep a tracked angle in their own parameters
        assert info["stateful"] == (cls.name in ("rotation_driver", "screw")), cls.name
    assert load_constraint_kernel(EulerNormalization).capsule is _planar.EULER_NORMALIZATION


@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
@pytest.mark.parametrize("tname", TYPE_NAMES)
def test_compiled_equals_numpy(tname, jacobian):
    model = group_model(tname, seed=len(tname) * 7919)
    a = model.compile(kernels="compiled", jacobian=jacobian)
    b = model.compile(kernels="numpy", jacobian=jacobian)
    # everything on the compiled path, the normalisation rows included
    assert not a._py_groups and a._evaluator is not None
    assert all(g.compiled for g in a.groups)
    assert any(g.ctype.name == tname and g.ne >= 3 for g in a.groups)
    rng = np.random.default_rng(len(tname))
    for t in (0.0, 0.37, 1.9):
        for _ in range(3):
            q, qd = random_state(a, rng)
            assert_close(a.phi(q, t), b.phi(q, t), f"{tname} phi")
            Ja, Jb = a.jacobian_dense(q, t), b.jacobian_dense(q, t)
            assert np.count_nonzero(Jb) > 0
            assert_close(Ja, Jb, f"{tname} jacobian")
            assert_close(a.nu(q, t), b.nu(q, t), f"{tname} nu")
            assert_close(a.gamma(q, qd, t), b.gamma(q, qd, t), f"{tname} gamma")
    # the ground entries (reactions on the ground come from them) agree as well
    assert_close(a._jdata, b._jdata, f"{tname} jacobian data incl. ground slots")


def test_time_dependent_drivers_have_nonzero_nu_and_gamma_terms():
    """The driver comparisons above are not vacuous: nu != 0 and gamma changes
    with t at a fixed state."""
    for tname in ("distance_driver", "angle_driver", "rotation_driver", "point_coordinate",
                  "relative_rotation_ep"):
        a = group_model(tname, seed=3).compile(kernels="compiled")
        q, qd = random_state(a, np.random.default_rng(1))
        assert np.abs(a.nu(q, 0.4)).max() > 1e-3, tname
        g1 = a.gamma(q, qd, 0.4).copy()
        assert np.abs(a.gamma(q, qd, 1.3) - g1).max() > 1e-3, tname


def _turn(sysm, q, body, angle):
    """q with ``body`` rotated to ``angle`` about global z."""
    o = int(sysm.body_offsets[sysm.body_names.index(body)])
    q = q.copy()
    q[o + 3:o + 7] = [math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)]
    return q


def _driver_model():
    m = Model("rot")
    m.set_dimensions(3)
    m.add_body("disc", mass=1.0, inertia=[1, 1, 1], position=[0, 0, 0])
    m.add_body("arm", mass=1.0, inertia=[1, 1, 1], position=[1, 0, 0])
    m.add_driver("rotation_driver", "d0", body_i="ground", body_j="disc", axis_i=[0, 0, 1],
                 reference_i=[1, 0, 0], function="0.5*t")
    m.add_driver("rotation_driver", "d1", body_i="disc", body_j="ground", axis_i=[0, 0, 1],
                 reference_i=[1, 0, 0], function="0.0")
    m.add_driver("rotation_driver", "d2", body_i="arm", body_j="disc", axis_i=[0, 0, 1],
                 reference_i=[0, 1, 0], function="t")
    return m


def test_rotation_driver_tracks_turns_like_numpy():
    """Turning the disc through 2.5 turns in steps < pi: the compiled phi follows
    the continuous angle (past pi and 2 pi) exactly like the NumPy path, and both
    leave the same tracked angles in their groups' par."""
    m = _driver_model()
    a, b = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    q0 = a.initial_state().q
    ga = next(g for g in a.groups if g.ctype.name == "rotation_driver")
    gb = next(g for g in b.groups if g.ctype.name == "rotation_driver")
    for ang in np.linspace(0.0, 5.0 * math.pi, 41):
        q = _turn(a, q0, "disc", ang)
        pa, pb = a.phi(q, 0.0).copy(), b.phi(q, 0.0).copy()
        assert_close(pa, pb, "tracked phi")
        assert pa[0] == pytest.approx(ang, abs=1e-12)          # disc relative to ground
        assert pa[1] == pytest.approx(-ang, abs=1e-12)         # ground relative to disc
        np.testing.assert_array_equal(ga.par[:, 9], gb.par[:, 9])
    assert ga.par[0, 9] == pytest.approx(5.0 * math.pi, abs=1e-12)


def test_rotation_driver_state_is_the_system_par_array():
    """The compiled kernel writes its tracked angle into the System group's own
    par array (not a copy): the NumPy method then continues from it."""
    m = _driver_model()
    a = m.compile(kernels="compiled")
    g = next(g for g in a.groups if g.ctype.name == "rotation_driver")
    assert g.compiled
    q0 = a.initial_state().q
    for ang in (1.0, 2.0, 3.0):                     # compiled: up to 3 rad
        a.phi(_turn(a, q0, "disc", ang), 0.0)
    assert g.par[0, 9] == pytest.approx(3.0, abs=1e-12)
    # the NumPy reference, on the same par, continues on the branch past pi
    a._load(_turn(a, q0, "disc", 3.5))
    qb = a._qx[g.gather_all]
    th = g.ctype.phi(g.par, qb, 0.0, np.zeros((g.ne, 1, 3)))[:, 0]
    assert th[0] == pytest.approx(3.5, abs=1e-12)
    assert g.par[0, 9] == pytest.approx(3.5, abs=1e-12)
    # ... and the compiled kernel continues from the NumPy update
    assert a.phi(_turn(a, q0, "disc", 4.0), 0.0)[0] == pytest.approx(4.0, abs=1e-12)


def test_evaluator_refuses_a_copied_par_for_the_rotation_driver():
    from mbcore._ext import _planar
    m = _driver_model()
    a = m.compile(kernels="compiled")
    g = next(g for g in a.groups if g.ctype.name == "rotation_driver")
    from mbplugins._ext._spatial_constraints import ROTATION_DRIVER
    spec = dict(kernel="spatial_rotation_driver", capsule=ROTATION_DRIVER, kind="spatial",
                boff=g.boff, row=g.row, fidx=g.fidx, jpos=g.jpos,
                xoff=np.zeros((g.ne, 0), np.intp))
    _planar.PlanarEvaluator(a.n, [dict(spec, par=g.par)])           # the array itself: fine
    with pytest.raises(ValueError, match="in place"):
        _planar.PlanarEvaluator(a.n, [dict(spec, par=np.asfortranarray(g.par))])
    with pytest.raises(ValueError, match="in place"):
        _planar.PlanarEvaluator(a.n, [dict(spec, par=g.par.tolist())])
    with pytest.raises(ValueError, match="spatial bodies"):
        _planar.PlanarEvaluator(a.n, [dict(spec, par=g.par, kind="planar")])


def test_spatial_type_naming_a_planar_kernel_is_refused():
    """A plugin subclass that names the kernel of a planar type whose counts match
    (revolute_translational: 1 row, 2 bodies, 6 parameters) is still refused: the
    kernel's body kind is not the type's."""
    from mbcore import hookimpl
    from mbcore.plugins import PluginManager

    class BadPerpendicular(SC.Perpendicular):
        name = "bad_perpendicular"
        kernel = "revolute_translational"

    class Plug:
        @hookimpl
        def mbcore_constraint_types(self):
            return [BadPerpendicular]

    pm = PluginManager()
    pm.register(Plug(), name="bad")
    d = {"name": "bad", "dimensions": 3,
         "bodies": [{"name": "a", "mass": 1.0, "inertia": [1, 1, 1]}],
         "joints": [{"name": "j", "type": "bad_perpendicular", "body_i": "ground",
                     "body_j": "a", "vector_i": [1, 0, 0], "vector_j": [0, 1, 0]}]}
    m = Model.from_dict(d, registry=pm.registry)
    with pytest.raises(PluginError, match=r"constraint type 'bad_perpendicular'.*"
                                          r"body kind 'planar' \(type: 'spatial'\)"):
        m.compile(plugins=pm, kernels="compiled")
    assert m.compile(plugins=pm, kernels="numpy").m == 2


def test_spatial_slider_crank_compiled_stepper_equals_numpy(monkeypatch):
    from mbcore._ext import _planar

    base = _planar.KinematicStepper
    calls = []

    class Spy(base):
        """Counts the compiled kinematic steps."""

        def step(self, *args):
            calls.append(args[3])
            return base.step(self, *args)

    monkeypatch.setattr(_planar, "KinematicStepper", Spy)
    model = Model.from_file(EXAMPLES / "spatial_slider_crank.yaml")
    settings = {"t_end": 3.0, "output_step": 0.01}
    rc = mbcore.run(model, settings=settings, kernels="compiled")
    steps = len(rc.t)
    assert steps == 301 and rc.stats["steps"] == steps
    # every step after the first (assembly) went through the compiled stepper, and
    # none failed over to the reference path
    assert len(calls) == steps - 1
    sysm = model.compile(kernels="compiled")
    assert not sysm._py_groups and all(g.compiled for g in sysm.groups)
    rn = mbcore.run(model, settings=settings, kernels="numpy")
    assert len(calls) == steps - 1            # the NumPy path has no stepper
    th = 0.3 + 2.0 * rc.t
    assert th[-1] > 2.0 * math.pi                    # past pi and 2 pi: tracked angle
    for ch in ("q", "qd", "qdd", "points", "angular"):
        a, b = rc[ch], rn[ch]
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * max(1.0, np.abs(b).max()),
                                   err_msg=ch)
    # and it is the right motion (spec §4.5 closed form)
    a_ = 0.05 - 0.1 * np.sin(th)
    np.testing.assert_allclose(rc["q/slider.x"], 0.1 * np.cos(th) + np.sqrt(0.15 - a_ * a_),
                               atol=1e-10)


def test_point_and_angular_kinematics_compiled_equal_numpy():
    """The compiled point and angular kinematics of spatial bodies equal their NumPy
    references (System._point_kinematics_spatial, angular_kinematics) to 1e-12 on
    random states, including a point of the ground."""
    from spatial_points import three_bodies_with_points
    rng = np.random.default_rng(11)
    sc, sn = three_bodies_with_points(rng, 1.0)
    for _ in range(5):
        q, qd, qdd = rng.normal(size=(3, sc.n))
        for k in range(3):
            o = sc.body_offsets[k] + 3
            q[o:o + 4] /= np.linalg.norm(q[o:o + 4])
        pc = sc.point_kinematics(q, qd, qdd).copy()
        pn = sn.point_kinematics(q, qd, qdd).copy()
        np.testing.assert_allclose(pc, pn, rtol=0, atol=1e-12 * (1 + np.abs(pn).max()))
        np.testing.assert_allclose(pn[-1], [0.3, -0.2, 0.5, 0, 0, 0, 0, 0, 0], atol=0)
        ac = sc.angular_kinematics(q, qd, qdd).copy()
        an = sn.angular_kinematics(q, qd, qdd).copy()
        np.testing.assert_allclose(ac, an, rtol=0, atol=1e-12 * (1 + np.abs(an).max()))
    # an independent check of the reference: omega x s = sdot - rdot for unit p, pd
    # tangent (p . pd = 0)
    q, qd = rng.normal(size=(2, sn.n))
    for k in range(3):
        o = sn.body_offsets[k] + 3
        q[o:o + 4] /= np.linalg.norm(q[o:o + 4])
        qd[o:o + 4] -= (qd[o:o + 4] @ q[o:o + 4]) * q[o:o + 4]
    P = sn.point_kinematics(q, qd, np.zeros(sn.n)).copy()
    W = sn.angular_kinematics(q, qd, np.zeros(sn.n)).copy()
    for k in range(3):
        o = sn.body_offsets[k]
        s = P[k, 0:3] - q[o:o + 3]
        np.testing.assert_allclose(P[k, 3:6] - qd[o:o + 3], np.cross(W[k, 0:3], s),
                                   atol=1e-12)


def test_screw_tracks_turns_like_numpy():
    """The screw's compiled phi follows the tracked angle through 2.5 turns (steps
    < pi) exactly like Screw.phi, both leaving the same angle in par[:, 24]."""
    m = Model("screw")
    m.set_dimensions(3)
    m.add_body("disc", mass=1.0, inertia=[1, 1, 1], position=[0, 0, 0])
    m.add_joint("screw", "s0", body_i="ground", body_j="disc", point_i=[0, 0, 0],
                axis_i=[0, 0, 1], pitch=0.1)
    m.add_joint("screw", "s1", body_i="disc", body_j="ground", point_i=[0, 0, 0],
                axis_i=[0, 0, 1], pitch=-0.2)
    a, b = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    ga = next(g for g in a.groups if g.ctype.name == "screw")
    gb = next(g for g in b.groups if g.ctype.name == "screw")
    assert ga.compiled and not gb.compiled
    q0 = a.initial_state().q
    for ang in np.linspace(0.0, 5.0 * math.pi, 41):
        q = _turn(a, q0, "disc", ang)
        pa, pb = a.phi(q, 0.0).copy(), b.phi(q, 0.0).copy()
        assert_close(pa, pb, "screw phi")
        assert pa[4] == pytest.approx(-0.1 * ang, abs=1e-12)    # delta = 0: -a theta
        np.testing.assert_array_equal(ga.par[:, 24], gb.par[:, 24])
    assert ga.par[0, 24] == pytest.approx(5.0 * math.pi, abs=1e-12)
    assert ga.par[1, 24] == pytest.approx(-5.0 * math.pi, abs=1e-12)
