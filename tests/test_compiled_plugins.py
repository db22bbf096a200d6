"""The compiled plugin tier (issue 16; include/mbcore_plugin.h, mbcore.plugins.compiled):
a force type with ``c_kernel`` joins the compiled force evaluator, the compiled
right-hand side and the compiled loops, and equals its Python reference to 1e-12.

No compiler runs here: the kernels are mbcore's self-test capsules
(``mbcore._ext._forces.builtin_capsule``), built-in kernels behind the external ABI,
and the types' Python methods are the built-in references."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model, hookimpl
from mbcore.elements import ForceType
from mbcore.errors import AnalysisError, PluginError
from mbcore.plugins import PluginManager, registry
from mbcore.elements.schema import Param
from mbcore.system import compiled_available
from mbplugins.planar.forces import TSDA, PointForce
from mbplugins.spatial.forces import Bushing, SpatialTSDA

needs_compiled = pytest.mark.skipif(not compiled_available(),
                                    reason="compiled kernels not built")

if compiled_available():
    from mbcore._ext._forces import ABI_MIN_VERSION, ABI_VERSION, builtin_capsule
    from mbplugins._ext import _planar_forces as PLANAR_KERNELS
    from mbplugins._ext import _spatial_forces as SPATIAL_KERNELS

    #: a capsule named by "module:attribute" (the form a plugin package uses)
    TSDA_CAPSULE = builtin_capsule(PLANAR_KERNELS.TSDA)
else:                                        # pragma: no cover - no build
    ABI_MIN_VERSION, ABI_VERSION, TSDA_CAPSULE = None, None, None

    def builtin_capsule(kernel, **kw):
        return None

    class PLANAR_KERNELS:
        TSDA = FORCE = None


class CapsuleTSDA(TSDA):
    name = "capsule_tsda"
    kernel = None
    c_kernel = f"{__name__}:TSDA_CAPSULE"


class CapsuleForce(PointForce):
    name = "capsule_force"
    kernel = None
    c_kernel = builtin_capsule(PLANAR_KERNELS.FORCE)


class CapsuleBushing(Bushing):
    name = "capsule_bushing"
    kernel = None
    c_kernel = builtin_capsule(SPATIAL_KERNELS.BUSHING)


class CapsuleSpatialTSDA(SpatialTSDA):
    name = "capsule_tsda"
    kernel = None
    c_kernel = builtin_capsule(SPATIAL_KERNELS.TSDA)


class Clock(ForceType):
    """f_x = t on one body: the Python twin of the self-test kernel "clock" (the
    only one that reads the ABI's t)."""

    name = "capsule_clock"
    bodies = ("body",)
    params = {"body": Param("body", "the loaded body")}
    c_kernel = builtin_capsule("clock")

    def pack(self, spec, ctx):
        return [], []

    def force(self, par, qb, qdb, t, f):
        g = np.zeros((par.shape[0], 1, 3))
        g[:, 0, 0] = t
        return g

    def force_jacobian(self, par, qb, qdb, t, f):
        z = np.zeros((par.shape[0], 1, 3, 1, 3))
        return z, z


class NoJacobianTSDA(TSDA):
    """A capsule without a Jacobian function and a type without a reference
    Jacobian: forward differences."""

    name = "capsule_tsda_fd"
    kernel = None
    c_kernel = builtin_capsule(PLANAR_KERNELS.TSDA, jacobian=False)
    force_jacobian = ForceType.force_jacobian


class Plug:
    @hookimpl
    def mbcore_force_types(self):
        return [CapsuleTSDA, CapsuleForce, CapsuleBushing, CapsuleSpatialTSDA, Clock,
                NoJacobianTSDA]


@pytest.fixture(scope="module")
def pm():
    p = PluginManager()
    p.register(Plug(), name="capsules")
    return p


def planar_model(tsda="capsule_tsda") -> Model:
    """Two links on revolutes (planar, dense, compiled constraints) loaded by the
    capsule forces (time functions included) and a built-in RSDA."""
    m = Model("capsules")
    m.set_gravity(0.2, -9.81)
    m.add_body("a", position=(0.5, 0.0), angle=0.0, mass=2.0, inertia=0.2)
    m.add_body("b", position=(1.5, 0.0), angle=0.0, mass=1.5, inertia=0.15)
    m.add_joint("revolute", "O", body_i="ground", body_j="a", point_i=(0.0, 0.0),
                point_j=(-0.5, 0.0))
    m.add_joint("revolute", "A", body_i="a", body_j="b", point_i=(0.5, 0.0),
                point_j=(-0.5, 0.0))
    m.add_force(tsda, "spring", body_i="ground", body_j="b", point_i=(2.0, 1.0),
                point_j=(0.3, 0.05), stiffness=80.0, damping=2.5, free_length=0.8,
                actuator={"harmonic": {"amplitude": 1.5, "frequency": 2.0}})
    m.add_force(tsda, "spring2", body_i="a", body_j="b", point_i=(0.1, 0.1),
                point_j=(0.2, -0.1), stiffness=30.0, damping=1.0, free_length=0.9)
    m.add_force("capsule_force", "push", body="b", point=(0.2, 0.1),
                fx={"polynomial": [0.5, 1.0]}, fy=2.0, frame="body")
    m.add_force("capsule_clock", "clock", body="a")
    m.add_force("rsda", "coil", body_i="a", body_j="b", stiffness=8.0, damping=0.7)
    return m


def spatial_model() -> Model:
    m = Model("capsules3")
    m.set_dimensions(3)
    m.add_body("a", mass=2.0, inertia=[0.3, 0.4, 0.5], position=[0.1, 0.2, 0.3],
               orientation={"axis": [1, 2, 3], "angle": 40, "unit": "deg"})
    m.add_body("b", mass=1.5, inertia=[0.2, 0.25, 0.15], position=[0.9, -0.3, 0.5],
               orientation={"axis": [-1, 0.5, 1], "angle": 70, "unit": "deg"})
    m.add_force("capsule_bushing", "bu", body_i="a", body_j="b", point_i=[0.4, -0.2, 0.1],
                stiffness=[100, 200, 300], damping=[1, 2, 3],
                rotational_stiffness=[10, 20, 30], rotational_damping=[0.1, 0.2, 0.3])
    m.add_force("capsule_bushing", "bu0", body_i="ground", body_j="a",
                stiffness=[10, 20, 30], rotational_stiffness=[1, 2, 3])
    m.add_force("capsule_tsda", "s", body_i="a", body_j="b", point_i=[0.1, 0.2, -0.1],
                point_j=[-0.2, 0.1, 0.3], stiffness=50.0, damping=3.0, free_length=0.4,
                actuator="2*sin(t)")
    return m


def _states(s, rng, k=4):
    from mbcore.elements.rotations import normalize
    for _ in range(k):
        q = s.initial_state(0.0).q + 0.05 * rng.standard_normal(s.n)
        for idx in getattr(s, "_p_idx", []):
            q[idx] = normalize(q[idx]) * rng.uniform(0.98, 1.02)   # also off |p| = 1
        yield q, rng.standard_normal(s.n), float(rng.uniform(0.0, 2.0))


# ------------------------------------------------------------------ shipped contract
def test_header_and_pxd_are_shipped():
    """mbcore.get_include() holds the header, the Cython mirror sits in the package,
    both are package data, and the header's version is the build's."""
    inc = Path(mbcore.get_include())
    header = (inc / "mbcore_plugin.h").read_text()
    pxd = (Path(mbcore.__file__).parent / "plugin.pxd").read_text()
    assert "mbcore_force_kernel" in header and "mbcore_force_kernel" in pxd
    root = Path(__file__).parents[1]
    if (root / "pyproject.toml").exists():
        pyproject = (root / "pyproject.toml").read_text()
        data = re.search(r"^mbcore = \[(.*)\]", pyproject, re.M).group(1)
        assert '"plugin.pxd"' in data and '"include/*.h"' in data
    version = int(re.search(r"#define MBCORE_ABI_VERSION (\d+)", header).group(1))
    if compiled_available():
        from mbcore.plugins.compiled import abi_version
        assert version == ABI_VERSION == abi_version()


# ------------------------------------------------------------------ equal to Python
@needs_compiled
@pytest.mark.parametrize("which", ["planar", "spatial"])
def test_capsule_forces_power_and_jacobians_equal_the_python_path(pm, which):
    """Forces, the non-conservative power (kernel's P) and the force Jacobians (the
    kernel's ``jacobian``) of capsule groups equal the Python references (the
    types' methods on the NumPy backend) to 1e-12."""
    m = planar_model() if which == "planar" else spatial_model()
    sc = m.compile(kernels="compiled", plugins=pm)
    sn = m.compile(kernels="numpy", plugins=pm)
    caps = [fg for fg in sc.force_groups if fg.ftype.name.startswith("capsule")]
    assert caps and all(fg.compiled and fg.ckernel is not None for fg in caps)
    assert not sc._py_force_groups
    assert set(sc.force_jacobian_modes().values()) == {"compiled"}
    assert sn.force_jacobian_modes()["capsule_tsda"] == "reference"
    rng = np.random.default_rng(3)
    for q, qd, t in _states(sn, rng):
        a, b = sc.forces(q, qd, t).copy(), sn.forces(q, qd, t).copy()
        scale = 1.0 + np.abs(b).max()
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale)
        assert sc.nonconservative_power(q, qd, t, compiled=True) == pytest.approx(
            sn.nonconservative_power(q, qd, t), rel=1e-12, abs=1e-12 * scale)
        (Ka, Ca), (Kb, Cb) = sc.force_jacobians(q, qd, t), sn.force_jacobians(q, qd, t)
        for x, y in ((Ka, Kb), (Ca, Cb)):
            y = np.asarray(y.todense() if hasattr(y, "todense") else y)
            x = np.asarray(x.todense() if hasattr(x, "todense") else x)
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * (1.0 + np.abs(y).max()))
        assert np.abs(Kb).max() > 1.0          # the test sees stiffness


@needs_compiled
def test_the_kernel_receives_the_time(pm):
    """The clock kernel's force is t: the evaluator passes the time it is given."""
    m = planar_model()
    sc = m.compile(kernels="compiled", plugins=pm)
    fe = sc._force_evaluator
    q, qd = sc.initial_state(0.0).q, np.ones(sc.n)
    fv = sc.functions_at(1.25)
    Q1, Q2 = np.zeros(sc.n), np.zeros(sc.n)
    assert fe.forces(q, qd, 1.25, fv, Q1) and fe.forces(q, qd, 0.25, fv, Q2)
    o = int(sc.body_offsets[0])
    assert Q1[o] - Q2[o] == pytest.approx(1.0, abs=1e-12)
    P1 = fe.power_nc(q, qd, fv, 1.25)
    assert P1 - fe.power_nc(q, qd, fv, 0.25) == pytest.approx(qd[o], abs=1e-12)


@needs_compiled
def test_capsule_without_jacobian_takes_forward_differences(pm):
    ma, mb = planar_model("capsule_tsda"), planar_model("capsule_tsda_fd")
    sa = ma.compile(kernels="compiled", plugins=pm)
    sb = mb.compile(kernels="compiled", plugins=pm)
    assert sb.force_jacobian_modes()["capsule_tsda_fd"] == "fd"
    assert [fg.compiled for fg in sb.force_groups] == [True] * len(sb.force_groups)
    q, qd, t = next(_states(sa, np.random.default_rng(5), 1))
    np.testing.assert_allclose(sb.forces(q, qd, t), sa.forces(q, qd, t), atol=1e-12)
    (Ka, Ca), (Kb, Cb) = sa.force_jacobians(q, qd, t), sb.force_jacobians(q, qd, t)
    # forward differences: truncation h |K'| / 2 and rounding eps |Q| / h (observed
    # 8.6e-6 absolute)
    np.testing.assert_allclose(Kb, Ka, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(Cb, Ca, rtol=1e-4, atol=1e-3)
    form = registry().get("formulation", "di")(sb, {})
    assert form.compiled is not None and not form.compiled.analytic_jac


# ------------------------------------------------------------------ runs
@needs_compiled
@pytest.mark.parametrize("integrator", ["dopri5", "bdf"])
def test_runs_stay_on_the_compiled_rhs_and_loop(pm, integrator):
    """A model of built-in and capsule elements keeps the compiled right-hand side
    (with the kernels' analytic Jacobian for bdf) and the compiled loop, and equals
    the NumPy-backend run."""
    m = planar_model()
    sc = m.compile(kernels="compiled", plugins=pm)
    form = registry().get("formulation", "di")(sc, {})
    assert form.compiled is not None and form.compiled.analytic_jac
    st = {"analysis": "dynamic", "t_end": 0.6, "output_step": 0.05, "rtol": 1e-10,
          "atol": 1e-12, "formulation": "di", "integrator": integrator}
    a = mbcore.run(m, plugins=pm, kernels="compiled", settings=st)
    b = mbcore.run(m, plugins=pm, kernels="numpy", settings=st)
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    if integrator == "bdf":                  # Jacobians from the kernels, no FD
        assert a.stats["integrator_njev"] > 0 and a.stats["integrator_nfev_jac"] == 0
    tol = 1e-9 if integrator == "dopri5" else 1e-7
    np.testing.assert_allclose(a["q"], b["q"], atol=tol)
    np.testing.assert_allclose(a["energy"], b["energy"], atol=100 * tol)
    assert np.ptp(a["q"][:, 2]) > 0.1        # the mechanism moves


# ------------------------------------------------------------------ refusals
def _refused(pm_types, kernels="compiled"):
    pm_ = PluginManager()

    class P:
        @hookimpl
        def mbcore_force_types(self):
            return pm_types

    pm_.register(P(), name="broken")
    m = Model("broken")
    m.add_body("a", position=(1.0, 0.0), mass=1.0, inertia=0.1)
    m.add_force(pm_types[0].name, "s", body_i="ground", body_j="a", stiffness=1.0,
                free_length=0.5)
    return m.compile(kernels=kernels, plugins=pm_)


def _tsda_with(name, capsule):
    return type("Broken", (TSDA,), {"name": name, "kernel": None, "c_kernel": capsule})


@needs_compiled
def test_a_kernel_of_the_oldest_abi_version_still_loads():
    """Versions only append struct members: a version-1 capsule (no ``stateful``)
    loads and gives the forces of the current one."""
    assert ABI_MIN_VERSION == 1 < ABI_VERSION
    old = builtin_capsule(PLANAR_KERNELS.TSDA, abi_version=ABI_MIN_VERSION)
    q = np.array([1.0, 0.2, 0.3])
    f_old = _refused([_tsda_with("v1_tsda", old)]).forces(q, np.ones(3), 0.0)
    f_new = _refused([_tsda_with("v2_tsda", PLANAR_KERNELS.TSDA)]).forces(q, np.ones(3), 0.0)
    np.testing.assert_array_equal(f_old, f_new)     # one kernel, one process: bitwise


@needs_compiled
def test_abi_version_mismatch_names_plugin_type_and_both_versions():
    bad = builtin_capsule(PLANAR_KERNELS.TSDA, abi_version=ABI_VERSION + 1)
    with pytest.raises(PluginError) as exc:
        _refused([_tsda_with("old_tsda", bad)])
    msg = str(exc.value)
    assert "force type 'old_tsda'" in msg and __name__.split(".")[0] in msg
    assert f"ABI version {ABI_VERSION + 1}" in msg
    assert f"ABI versions {ABI_MIN_VERSION} to {ABI_VERSION}" in msg
    assert "Rebuild the plugin against the installed mbcore" in msg
    # the NumPy backend does not load the kernel: the Python reference runs
    assert _refused([_tsda_with("old_tsda", bad)], kernels="numpy").forces(
        np.array([1.0, 0.0, 0.0]), np.zeros(3), 0.0)[0] == pytest.approx(-0.5)


@needs_compiled
@pytest.mark.parametrize("capsule, message", [
    ("datetime:datetime_CAPI", r"is a PyCapsule named 'datetime.datetime_CAPI', expected "
                               r"a PyCapsule named 'mbcore.force_kernel'"),
    ("math:pi", r"is not a PyCapsule"),
    ("no_such_plugin_module_xyz:kernel", r"cannot be imported"),
    ("math:no_such_kernel", r"module 'math' has no attribute 'no_such_kernel'"),
    ("math.pi", r"is not 'package.module:attribute'"),
])
def test_wrong_capsules_are_refused(capsule, message):
    with pytest.raises(PluginError, match=r"force type 'odd_tsda'.*" + message):
        _refused([_tsda_with("odd_tsda", capsule)])


@needs_compiled
@pytest.mark.parametrize("override, message", [
    (dict(n_par=6), r"n_par 6 \(type: 7\)"),
    (dict(n_fun=0, n_bodies=1), r"n_bodies 1 \(type: 2\), n_fun 0 \(type: 1\)"),
    (dict(body_kind=1), r"body kind 'spatial' \(type: 'planar'\)"),
    (dict(force=False), r"has no force function"),
])
def test_declaration_mismatches_are_refused(override, message):
    with pytest.raises(PluginError, match=r"force type 'sized_tsda'.*compiled kernel "
                                          r"<capsule object> \('builtin:tsda'\).*" + message):
        _refused([_tsda_with("sized_tsda", builtin_capsule(PLANAR_KERNELS.TSDA, **override))])


# ------------------------------------------------------------------ failing elements
@needs_compiled
def test_failing_element_is_named_with_the_time(pm):
    """A zero-length TSDA through the capsule: forces, Jacobians and the compiled
    right-hand side report the element, its path, its type, the time and the
    kernel's reason."""
    m = Model("zero")
    m.add_body("a", position=(0.0, 0.0), mass=1.0, inertia=0.1)
    m.add_force("capsule_tsda", "s", body_i="ground", body_j="a", stiffness=1.0,
                free_length=1.0)
    s = m.compile(kernels="compiled", plugins=pm)
    pat = (r"t = 0\.5: force element 's' \(forces\[0\], capsule_tsda\): the attachment "
           r"points coincide")
    with pytest.raises(AnalysisError, match=pat):
        s.forces(np.zeros(3), np.zeros(3), 0.5)
    with pytest.raises(AnalysisError, match=pat):
        s.force_jacobians(np.zeros(3), np.zeros(3), 0.5)
    form = registry().get("formulation", "di")(s, {})
    assert form.compiled.eval(0.5, np.zeros(7), np.zeros(7)) == 3        # FORCE_FAILED
    with pytest.raises(AnalysisError, match=pat):
        form.rhs(0.5, np.zeros(6))
