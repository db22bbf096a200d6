"""The compiled plugin tier for constraint types (issue 16; include/mbcore_plugin.h
``mbcore_constraint_kernel``, mbcore.plugins.compiled.load_constraint_kernel): a
constraint type with ``c_kernel`` joins the compiled constraint evaluator, hence the
compiled kinematic step, right-hand sides and loops, and equals its Python reference
to 1e-12.

No compiler runs here: the kernels are mbcore's self-test capsules
(``mbcore._ext._planar.builtin_constraint_capsule``), built-in kernels behind the
external ABI, and the types' Python methods are the built-in references."""
from __future__ import annotations

import numpy as np
import pytest
from test_compiled_plugins import _states

import mbcore
from mbcore import Model, hookimpl
from mbcore.elements import ConstraintType
from mbcore.errors import AnalysisError, PluginError
from mbcore.plugins import PluginManager, registry
from mbcore.elements.schema import Param
from mbplugins.planar.constraints import Revolute
from mbplugins.planar.links import DistanceDriver
from mbplugins.spatial.constraints import DistanceDriver as SpatialDistanceDriver
from mbplugins.spatial.constraints import Spherical

_planar = pytest.importorskip("mbcore._ext._planar", reason="compiled kernels not built")
ABI_VERSION = _planar.ABI_VERSION
builtin_constraint_capsule = _planar.builtin_constraint_capsule
_pc = pytest.importorskip("mbplugins._ext._planar_constraints")
_sc = pytest.importorskip("mbplugins._ext._spatial_constraints")
#: a capsule named by "module:attribute" (the form a plugin package uses): the
#: built-in revolute's kernel behind the block layout of ABI version 1
REVOLUTE_CAPSULE = builtin_constraint_capsule(_pc.REVOLUTE)


class CapsuleRevolute(Revolute):
    name = "capsule_revolute"
    kernel = None
    c_kernel = f"{__name__}:REVOLUTE_CAPSULE"


class CapsuleRevoluteNoNu(Revolute):
    """A scleronomic kernel without ``nu`` (NULL: zeros)."""

    name = "capsule_revolute_nonu"
    kernel = None
    c_kernel = builtin_constraint_capsule(_pc.REVOLUTE, nu=False)


class CapsuleDistanceDriver(DistanceDriver):
    name = "capsule_distance_driver"
    kernel = None
    c_kernel = builtin_constraint_capsule(_pc.DISTANCE)


class CapsuleSpherical(Spherical):
    name = "capsule_spherical"
    kernel = None
    c_kernel = builtin_constraint_capsule(_sc.SPHERICAL)


class CapsuleSpatialDistanceDriver(SpatialDistanceDriver):
    name = "capsule_distance_driver"
    kernel = None
    c_kernel = builtin_constraint_capsule(_sc.DISTANCE)


class Clock(ConstraintType):
    """x_body - t = 0: the Python twin of the self-test kernel "clock" (the only one
    that reads the ABI's t; it refuses every element at t < 0)."""

    name = "capsule_clock"
    equations = 1
    bodies = ("body",)
    params = {"body": Param("body", "the clocked body")}
    category = "driver"
    c_kernel = builtin_constraint_capsule("clock")

    def pack(self, spec, ctx):
        return [], []

    def phi(self, par, qb, t, f):
        return qb[:, 0, 0:1] - t

    def jacobian(self, par, qb, t, f):
        J = np.zeros((par.shape[0], 1, 1, 3))
        J[:, 0, 0, 0] = 1.0
        return J

    def nu(self, par, qb, t, f):
        return np.ones((par.shape[0], 1))

    def gamma(self, par, qb, qdb, t, f):
        return np.zeros((par.shape[0], 1))


class Plug:
    @hookimpl
    def mbcore_constraint_types(self):
        return [CapsuleRevolute, CapsuleRevoluteNoNu, CapsuleDistanceDriver, Clock,
                CapsuleSpherical, CapsuleSpatialDistanceDriver]


@pytest.fixture(scope="module")
def pm():
    p = PluginManager()
    p.register(Plug(), name="capsules")
    return p


# ------------------------------------------------------------------ models
def slider_crank(pm, driver: str = "angle") -> Model:
    """The slider-crank of examples/slider_crank.yaml with capsule revolutes (one
    revolute stays built-in); driven by the crank angle (built-in driver) or by a
    capsule distance driver on the slider (a time function: nu and gamma terms)."""
    d = Model.from_file(mbcore_examples() / "slider_crank.yaml").to_dict()
    for j in d["joints"]:
        if j["name"] in ("A", "C"):
            j["type"] = "capsule_revolute"
        elif j["name"] == "B":
            j["type"] = "capsule_revolute_nonu"
    if driver == "distance":
        d["drivers"] = [{"name": "push", "type": "capsule_distance_driver",
                         "body_i": "ground", "body_j": "slider", "point_i": [0, 0],
                         "point_j": [0, 0], "function": "663.1 - 40*t + 5*sin(t)"}]
    return Model.from_dict(d, registry=pm.registry)


def mbcore_examples():
    from pathlib import Path
    return Path(__file__).parents[1] / "examples"


def planar_mix(pm) -> Model:
    """Every planar capsule kernel next to built-in groups (evaluation only: the
    equations are not meant to be consistent)."""
    m = Model("mix")
    m.add_body("a", position=(0.5, 0.1), angle=0.2, mass=2.0, inertia=0.2)
    m.add_body("b", position=(1.5, 0.0), angle=-0.3, mass=1.5, inertia=0.15)
    m.add_body("c", position=(2.2, 0.4), angle=0.7, mass=1.0, inertia=0.1)
    m.add_joint("capsule_revolute", "O", body_i="ground", body_j="a", point_i=(0.0, 0.0),
                point_j=(-0.5, 0.0))
    m.add_joint("revolute", "A", body_i="a", body_j="b", point_i=(0.5, 0.0),
                point_j=(-0.5, 0.0))
    m.add_joint("capsule_revolute_nonu", "B", body_i="b", body_j="c", point_i=(0.5, 0.1),
                point_j=(-0.3, 0.0))
    m.add_driver("capsule_distance_driver", "D", body_i="ground", body_j="c",
                 point_i=(2.0, 1.0), point_j=(0.2, 0.1),
                 function="1.4 + 0.2*sin(1.5*t)")
    m.add_driver("capsule_clock", "clk", body="b")
    return m


def spatial_mix(pm) -> Model:
    d = Model.from_file(mbcore_examples() / "spatial_double_pendulum.yaml").to_dict()
    d["joints"][0]["type"] = "capsule_spherical"
    d["bodies"].append({"name": "c", "mass": 0.5, "inertia": [0.01, 0.01, 0.01],
                        "position": [1.2, 0.3, -0.2],
                        "orientation": {"axis": [1, 2, 3], "angle": 40, "unit": "deg"}})
    d["drivers"] = [{"name": "d", "type": "capsule_distance_driver", "body_i": "bar2",
                     "body_j": "c", "point_i": [0.25, 0, 0], "point_j": [0.1, 0.2, -0.1],
                     "function": "0.6 + 0.1*sin(2*t)"}]
    return Model.from_dict(d, registry=pm.registry)


def _dense(J):
    return np.asarray(J.todense() if hasattr(J, "todense") else J)


# ------------------------------------------------------------------ equal to Python
@pytest.mark.parametrize("which", ["planar", "spatial"])
@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
def test_capsule_stages_equal_the_python_path(pm, which, jacobian):
    """phi, the Jacobian, nu and gamma of systems with capsule groups equal the
    Python references (the types' methods on the NumPy backend) to 1e-12, dense
    and sparse, planar and spatial."""
    m = planar_mix(pm) if which == "planar" else spatial_mix(pm)
    sc = m.compile(kernels="compiled", plugins=pm, jacobian=jacobian)
    sn = m.compile(kernels="numpy", plugins=pm, jacobian=jacobian)
    caps = [g for g in sc.groups if g.ctype.name.startswith("capsule")]
    assert len(caps) == (4 if which == "planar" else 2)
    assert all(g.compiled and g.ckernel is not None for g in caps)
    assert not sc._py_groups and sc.dense == (jacobian == "dense")
    assert not any(g.compiled for g in sn.groups)
    rng = np.random.default_rng(7)
    seen_nu = 0.0
    for q, qd, t in _states(sn, rng):
        for stage, args in (("phi", (q, t)), ("nu", (q, t)), ("gamma", (q, qd, t))):
            a = getattr(sc, stage)(*args).copy()
            b = getattr(sn, stage)(*args).copy()
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * (1.0 + np.abs(b).max()),
                                       err_msg=stage)
        seen_nu = max(seen_nu, float(np.abs(b).max()))
        Ja, Jb = _dense(sc.jacobian(q, t)), _dense(sn.jacobian(q, t))
        np.testing.assert_allclose(Ja, Jb, rtol=0, atol=1e-12 * (1.0 + np.abs(Jb).max()))
        assert np.abs(Jb).max() > 0.1
        # ground-column entries land in their own slots, as the built-ins'
        np.testing.assert_allclose(sc._jdata, sn._jdata, rtol=0,
                                   atol=1e-12 * (1.0 + np.abs(sn._jdata).max()))
    nu = sc.nu(q, t)
    rows = sc.element_rows["D" if which == "planar" else "d"]
    assert np.abs(nu[rows]).max() > 1e-3        # the driver's nu reaches the rows


def test_the_kernel_receives_the_time(pm):
    """The clock's phi is x - t and its nu 1: the evaluator passes the time."""
    s = planar_mix(pm).compile(kernels="compiled", plugins=pm)
    q = s.initial_state(0.0).q
    r = s.element_rows["clk"].start
    x = q[int(s.body_offsets[1])]
    assert s.phi(q, 1.25)[r] == pytest.approx(x - 1.25, abs=1e-14)
    assert s.phi(q, 0.25)[r] == pytest.approx(x - 0.25, abs=1e-14)
    assert s.nu(q, 0.25)[r] == 1.0


# ------------------------------------------------------------------ compiled paths
@pytest.mark.parametrize("driver", ["angle", "distance"])
def test_kinematic_analysis_stays_on_the_compiled_step(pm, driver, monkeypatch):
    """Every step after the assembly goes through the compiled kinematic step (none
    fails over to the reference path) and equals the NumPy-backend run."""
    from mbcore._ext import _planar

    base = _planar.KinematicStepper
    calls = []

    class Spy(base):
        def step(self, *args):
            calls.append(base.step(self, *args))
            return calls[-1]

    monkeypatch.setattr(_planar, "KinematicStepper", Spy)
    m = slider_crank(pm, driver)
    st = {"analysis": "kinematic", "t_end": 2.0, "output_step": 0.05}
    rc = mbcore.run(m, plugins=pm, kernels="compiled", settings=st)
    assert len(calls) == len(rc.t) - 1 and set(calls) == {0}
    rn = mbcore.run(m, plugins=pm, kernels="numpy", settings=st)
    assert len(calls) == len(rc.t) - 1
    for ch in ("q", "qd", "qdd"):
        b = rn[ch]
        np.testing.assert_allclose(rc[ch], b, rtol=0,
                                   atol=1e-9 * max(1.0, np.abs(b).max()), err_msg=ch)
    assert np.ptp(rc["q/slider.x"]) > 50.0              # the mechanism moves


@pytest.mark.parametrize("formulation, integrator", [
    ("di", "dopri5"), ("di", "bdf"), ("cs", "dopri5"), ("ggl", "bdf"),
    ("penalty", "dopri5"), ("cp", "dopri5")])
def test_planar_runs_stay_on_the_compiled_rhs_and_loop(pm, formulation, integrator):
    """A model of built-in and capsule constraints keeps the compiled right-hand side
    and loop of every compiled formulation, and equals the NumPy-backend run."""
    d = Model.from_file(mbcore_examples() / "slider_crank_dynamic.yaml").to_dict()
    for j in d["joints"]:
        if j["type"] == "revolute":
            j["type"] = "capsule_revolute"
    m = Model.from_dict(d, registry=pm.registry)
    sc = m.compile(kernels="compiled", plugins=pm)
    # every group runs a compiled kernel: the capsule revolutes the built-in one
    # behind the block layout, the others their built-in capsules (direct layout)
    kernels = {g.ctype.name: g.ckernel.name for g in sc.groups}
    assert kernels["capsule_revolute"] == "builtin:revolute"
    assert all(g.compiled for g in sc.groups) and len(kernels) > 1
    rtol = 1e-9 if formulation == "ggl" else 1e-10       # the DAE forms' smallest rtol
    st = {"analysis": "dynamic", "t_end": 0.5, "output_step": 0.05, "rtol": rtol,
          "atol": rtol / 100, "formulation": formulation, "integrator": integrator}
    a = mbcore.run(m, plugins=pm, kernels="compiled", settings=st)
    b = mbcore.run(m, plugins=pm, kernels="numpy", settings=st)
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    tol = 1e-8 if integrator == "dopri5" else 1e-6
    np.testing.assert_allclose(a["q"], b["q"], atol=tol)
    assert np.ptp(a["q/crank.phi"]) > 0.5


def test_spatial_run_stays_on_the_compiled_rhs_and_loop(pm):
    d = Model.from_file(mbcore_examples() / "spatial_double_pendulum.yaml").to_dict()
    d["joints"][0]["type"] = "capsule_spherical"
    m = Model.from_dict(d, registry=pm.registry)
    form = registry().get("formulation", "di")(m.compile(kernels="compiled", plugins=pm), {})
    assert form.compiled is not None
    st = {"t_end": 0.5, "output_step": 0.05}
    a = mbcore.run(m, plugins=pm, kernels="compiled", settings=st)
    b = mbcore.run(m, plugins=pm, kernels="numpy", settings=st)
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-8)
    assert np.ptp(a["q/bar2.x"]) > 0.05


# ------------------------------------------------------------------ refusals
def _refused(ctypes_, kernels="compiled"):
    pm_ = PluginManager()

    class P:
        @hookimpl
        def mbcore_constraint_types(self):
            return ctypes_

    pm_.register(P(), name="broken")
    m = Model("broken")
    m.add_body("a", position=(1.0, 0.0), mass=1.0, inertia=0.1)
    m.add_joint(ctypes_[0].name, "j", body_i="ground", body_j="a", point_i=(0.5, 0.0),
                point_j=(-0.5, 0.0))
    return m.compile(kernels=kernels, plugins=pm_)


def _revolute_with(name, capsule, **attrs):
    return type("Broken", (Revolute,), {"name": name, "kernel": None, "c_kernel": capsule,
                                        **attrs})


def test_abi_version_mismatch_names_plugin_type_and_both_versions():
    bad = builtin_constraint_capsule(_pc.REVOLUTE, abi_version=ABI_VERSION + 1)
    with pytest.raises(PluginError) as exc:
        _refused([_revolute_with("old_revolute", bad)])
    msg = str(exc.value)
    assert "constraint type 'old_revolute'" in msg and __name__.split(".")[0] in msg
    assert f"ABI version {ABI_VERSION + 1}" in msg
    assert f"ABI versions {_planar.ABI_MIN_VERSION} to {ABI_VERSION}" in msg
    assert "Rebuild the plugin against the installed mbcore" in msg
    # the NumPy backend does not load the kernel: the Python reference runs
    s = _refused([_revolute_with("old_revolute", bad)], kernels="numpy")
    np.testing.assert_allclose(s.phi(np.array([1.0, 0.0, 0.0]), 0.0), [0.0, 0.0],
                               atol=1e-15)


@pytest.mark.parametrize("capsule, message", [
    ("mbcore._ext._forces:ABI_VERSION", r"is not a PyCapsule"),
    ("no_such_plugin_module_xyz:kernel", r"cannot be imported"),
    ("math:no_such_kernel", r"module 'math' has no attribute 'no_such_kernel'"),
])
def test_wrong_capsules_are_refused(capsule, message):
    with pytest.raises(PluginError, match=r"constraint type 'odd_revolute'.*" + message):
        _refused([_revolute_with("odd_revolute", capsule)])


def test_a_force_capsule_is_not_a_constraint_kernel():
    from mbcore._ext._forces import builtin_capsule
    with pytest.raises(PluginError, match=r"constraint type 'odd_revolute'.*is a PyCapsule "
                                          r"named 'mbcore.force_kernel', expected a "
                                          r"PyCapsule named 'mbcore.constraint_kernel'"):
        _refused([_revolute_with("odd_revolute", builtin_capsule("null"))])


@pytest.mark.parametrize("override, message", [
    (dict(n_equations=3), r"equations 3 \(type: 2\)"),
    (dict(n_par=5, n_bodies=1), r"n_bodies 1 \(type: 2\), n_par 5 \(type: 4\)"),
    (dict(n_fun=1), r"n_fun 1 \(type: 0\)"),
    (dict(body_kind=1), r"body kind 'spatial' \(type: 'planar'\)"),
    (dict(holonomic=False), r"holonomic False \(type: True\)"),
    (dict(phi=False), r"has no phi function \(mbcore_constraint_kernel.phi is NULL\)"),
    (dict(jacobian=False), r"has no jacobian function"),
    (dict(gamma=False), r"has no gamma function"),
])
def test_declaration_mismatches_are_refused(override, message):
    with pytest.raises(PluginError, match=r"constraint type 'sized_revolute'.*compiled "
                                          r"kernel <capsule object> \('builtin:revolute'\).*"
                                          + message):
        _refused([_revolute_with("sized_revolute",
                                 builtin_constraint_capsule(_pc.REVOLUTE, **override))])


def test_artificial_coordinates_need_the_direct_layout():
    """A block-layout (version 1) kernel has no artificial coordinates: a type with
    ``extra`` is refused (the built-in curve pairs use the direct layout, as their
    tests show)."""
    with pytest.raises(PluginError, match=r"constraint type 'cam_like'.*has 0 artificial "
                                          r"coordinates per element, the type declares "
                                          r"extra = \('theta',\) \(the block layout of ABI "
                                          r"version 1 has none"):
        _refused([_revolute_with("cam_like", builtin_constraint_capsule(_pc.REVOLUTE),
                                 extra=("theta",))])


# ------------------------------------------------------------------ failing elements
def test_failing_element_is_named_with_the_time(pm):
    """The clock refuses t < 0: every stage, the compiled right-hand side (which
    then falls back to the Python path) and the kinematic step report the element,
    its path, its type, the time and the kernel's reason."""
    m = Model("clocked")
    m.add_body("a", position=(0.0, 0.0), mass=1.0, inertia=0.1)
    m.add_driver("capsule_clock", "tick", body="a")
    s = m.compile(kernels="compiled", plugins=pm)
    pat = (r"t = -0\.5: constraint element 'tick' \(drivers\[0\], capsule_clock\): the "
           r"clock constraint is defined for t >= 0 only")
    q = np.zeros(3)
    for stage in (lambda: s.phi(q, -0.5), lambda: s.jacobian(q, -0.5),
                  lambda: s.nu(q, -0.5)):
        with pytest.raises(AnalysisError, match=pat):
            stage()
    assert s.phi(q, 0.5)[0] == -0.5                          # t >= 0 evaluates
    form = registry().get("formulation", "di")(s, {})
    assert form.compiled is not None
    assert form.compiled.eval(-0.5, np.zeros(7), np.zeros(7)) == 8   # CONSTRAINT_FAILED
    with pytest.raises(AnalysisError, match=pat):
        form.rhs(-0.5, np.zeros(6))


def test_an_element_index_outside_the_group_is_a_plugin_error(pm):
    """A kernel returning an index outside [0, ne) is the plugin's fault."""
    s = planar_mix(pm).compile(kernels="compiled", plugins=pm)
    k = next(i for i, g in enumerate(s._compiled_groups) if g.ctype.name == "capsule_clock")
    with pytest.raises(PluginError, match=r"constraint type 'capsule_clock': compiled kernel "
                                          r"<capsule object> returned element index 5, the "
                                          r"group has 1 elements"):
        s._constraint_failed(k, 5, 0.0)
