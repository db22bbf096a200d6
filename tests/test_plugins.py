"""Plugin core: entry-point discovery, run-time registration, name clashes, and a
Python-only constraint type that must give the built-in's numbers."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mbcore
from mbcore import Model, PluginError, hookimpl
from mbcore.elements import ConstraintType
from mbcore.plugins import PluginManager
from mbcore.elements.schema import Param


class PyRevolute(ConstraintType):
    """A revolute joint written the way a third party would: plain Python, one
    element at a time, no kernel (spec/planar.md C3)."""

    name = "py_revolute"
    equations = 2
    params = {"body_i": Param("body"), "body_j": Param("body"),
              "point_i": Param("vec2", on="body_i"), "point_j": Param("vec2", on="body_j")}
    n_par = 4
    labels = ("x", "y")

    def pack(self, spec, ctx):
        return [*spec["point_i"], *spec["point_j"]], []

    @staticmethod
    def _A(phi):
        return np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])

    def phi(self, par, qb, t, f):
        out = []
        for p, (qi, qj) in zip(par, qb, strict=True):
            out.append(qi[:2] + self._A(qi[2]) @ p[:2] - qj[:2] - self._A(qj[2]) @ p[2:])
        return np.array(out)

    def jacobian(self, par, qb, t, f):
        R = np.array([[0.0, -1.0], [1.0, 0.0]])
        out = np.zeros((len(par), 2, 2, 3))
        for e, (p, (qi, qj)) in enumerate(zip(par, qb, strict=True)):
            out[e, :, 0, :2] = np.eye(2)
            out[e, :, 0, 2] = R @ self._A(qi[2]) @ p[:2]
            out[e, :, 1, :2] = -np.eye(2)
            out[e, :, 1, 2] = -R @ self._A(qj[2]) @ p[2:]
        return out

    def gamma(self, par, qb, qdb, t, f):
        return np.array([qdi[2] ** 2 * self._A(qi[2]) @ p[:2] - qdj[2] ** 2 * self._A(qj[2]) @ p[2:]
                         for p, (qi, qj), (qdi, qdj) in zip(par, qb, qdb, strict=True)])


class ThirdParty:
    __version__ = "9.9"

    @hookimpl
    def mbcore_constraint_types(self):
        return [PyRevolute]


class Clash:
    @hookimpl
    def mbcore_constraint_types(self):
        class Revolute2(PyRevolute):
            name = "revolute"
        return [Revolute2]


def fourbar_data(examples, joint_type):
    import yaml
    d = yaml.safe_load((examples / "fourbar_kap.yaml").read_text())
    for j in d["joints"]:
        j["type"] = joint_type
    return d


@pytest.mark.quick
def test_builtin_types_come_from_the_entry_point():
    reg = PluginManager().registry
    for name in ("revolute", "translational", "absolute", "fixed", "absolute_driver",
                 "relative_driver"):
        prov = reg.provider("constraint", name)
        assert prov.plugin == "builtin" and prov.distribution == "mbcore"
        assert prov.version == mbcore.__version__
    assert reg.has("analysis", "kinematic") and reg.has("reporter", "hdf5")


@pytest.mark.core
def test_core_never_imports_mbplugins():
    code = ("import sys, mbcore, mbcore.model, mbcore.system, mbcore.plugins, mbcore.analysis.runner, "
            "mbcore.cli, mbcore.results.result; assert 'mbplugins' not in sys.modules, "
            "sorted(m for m in sys.modules if m.startswith('mb'))")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_runtime_plugin_type_usable_by_name_and_equal_to_builtin(examples, backend):
    pm = PluginManager()
    pm.register(ThirdParty(), name="thirdparty")
    assert str(pm.registry.provider("constraint", "py_revolute")) == "thirdparty (9.9)"
    m_py = Model.from_dict(fourbar_data(examples, "py_revolute"), registry=pm.registry)
    m_bi = Model.from_dict(fourbar_data(examples, "revolute"), registry=pm.registry)
    s_py = m_py.compile(kernels=backend, plugins=pm)
    s_bi = m_bi.compile(kernels=backend, plugins=pm)
    assert not any(g.compiled for g in s_py.groups if g.ctype.name == "py_revolute")
    rng = np.random.default_rng(0)
    for _ in range(10):
        q, qd, t = rng.normal(size=9), rng.normal(size=9), float(rng.uniform())
        np.testing.assert_allclose(s_py.phi(q, t), s_bi.phi(q, t), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(s_py.jacobian_dense(q, t), s_bi.jacobian_dense(q, t),
                                   rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(s_py.gamma(q, qd, t), s_bi.gamma(q, qd, t),
                                   rtol=1e-13, atol=1e-13)
    r_py = mbcore.run(m_py, plugins=pm, kernels=backend)
    r_bi = mbcore.run(m_bi, plugins=pm, kernels=backend)
    np.testing.assert_allclose(r_py["qdd"], r_bi["qdd"], rtol=1e-10, atol=1e-10)


def test_duplicate_type_name_names_both_plugins():
    pm = PluginManager()
    with pytest.raises(PluginError, match=r"constraint type 'revolute' is provided twice: "
                                          r"by plugin builtin \(mbcore .*\).* and by plugin "
                                          r"clashing"):
        pm.register(Clash(), name="clashing")
    assert pm.registry.has("constraint", "revolute")     # registration undone


def test_entry_point_plugin_from_a_temporary_distribution(tmp_path, examples):
    """A throwaway distribution on sys.path with an ``mbcore`` entry point is found
    by a fresh process, its type is usable from a model file, and ``mbcore
    plugins`` attributes it to its distribution and version."""
    pkg = tmp_path / "mbc_throwaway.py"
    pkg.write_text(textwrap.dedent("""
        import numpy as np
        from mbcore import hookimpl
        from mbcore.elements import ConstraintType
        from mbcore.elements.schema import Param

        class Pin(ConstraintType):
            name = "throwaway_pin"
            equations = 2
            params = {"body_i": Param("body"), "body_j": Param("body"),
                      "point_i": Param("vec2"), "point_j": Param("vec2")}
            n_par = 4
            labels = ("x", "y")
            def pack(self, spec, ctx):
                return [*spec["point_i"], *spec["point_j"]], []
            def _S(self, phi, s):
                c, d = np.cos(phi), np.sin(phi)
                return np.stack([c * s[:, 0] - d * s[:, 1], d * s[:, 0] + c * s[:, 1]], -1)
            def phi(self, par, qb, t, f):
                return (qb[:, 0, :2] + self._S(qb[:, 0, 2], par[:, :2])
                        - qb[:, 1, :2] - self._S(qb[:, 1, 2], par[:, 2:]))
            def jacobian(self, par, qb, t, f):
                Si, Sj = self._S(qb[:, 0, 2], par[:, :2]), self._S(qb[:, 1, 2], par[:, 2:])
                J = np.zeros((len(par), 2, 2, 3))
                J[:, 0, 0, 0] = J[:, 1, 0, 1] = 1
                J[:, 0, 1, 0] = J[:, 1, 1, 1] = -1
                J[:, 0, 0, 2], J[:, 1, 0, 2] = -Si[:, 1], Si[:, 0]
                J[:, 0, 1, 2], J[:, 1, 1, 2] = Sj[:, 1], -Sj[:, 0]
                return J
            def gamma(self, par, qb, qdb, t, f):
                return (qdb[:, 0, 2:3] ** 2 * self._S(qb[:, 0, 2], par[:, :2])
                        - qdb[:, 1, 2:3] ** 2 * self._S(qb[:, 1, 2], par[:, 2:]))

        @hookimpl
        def mbcore_constraint_types():
            return [Pin]
    """))
    dist = tmp_path / "mbc_throwaway-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mbc-throwaway\n"
                                   "Version: 1.2.3\n")
    (dist / "entry_points.txt").write_text("[mbcore]\nthrowaway = mbc_throwaway\n")
    model = tmp_path / "m.yaml"
    model.write_text((examples / "fourbar_kap.yaml").read_text()
                     .replace("type: revolute", "type: throwaway_pin"))
    env_code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(tmp_path)!r})
        import mbcore, numpy as np
        from mbcore.cli import main
        res = mbcore.run(mbcore.Model.from_file({str(model)!r}))
        print("P.x", round(float(res["points:P.x"][0]), 3))
        main(["plugins"])
    """)
    out = subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "P.x 2.663" in out.stdout
    line = [ln for ln in out.stdout.splitlines() if "throwaway_pin" in ln][0]
    assert "throwaway (mbc-throwaway 1.2.3)" in line


def test_python_force_group_with_repeated_bodies_accumulates():
    """Two Python-only force elements on the same bodies: the scatter-add keeps
    both contributions (the unbuffered add for repeated indices), equal to the
    compiled linear TSDA pair."""
    def model(kind):
        m = Model("rep")
        m.add_body("a", position=(0.0, 0.0), mass=1.0, inertia=0.1)
        m.add_body("b", position=(1.0, 0.2), mass=1.0, inertia=0.1)
        for k, (pi, pj) in enumerate((((0.1, 0.0), (0.0, 0.1)), ((-0.1, 0.05), (0.2, 0.0)))):
            if kind == "linear":
                m.add_force("tsda", f"s{k}", body_i="a", body_j="b", point_i=pi, point_j=pj,
                            stiffness=50.0 * (k + 1), free_length=0.5)
            else:
                m.add_force("tsda_nonlinear", f"s{k}", body_i="a", body_j="b", point_i=pi,
                            point_j=pj, free_length=0.5,
                            spring={"polynomial": [0.0, 50.0 * (k + 1)]})
        return m.compile()
    lin, non = model("linear"), model("nonlinear")
    assert non._py_force_groups and not non._py_force_groups[0].unique
    rng = np.random.default_rng(2)
    q, qd = rng.normal(size=6), rng.normal(size=6)
    np.testing.assert_allclose(non.forces(q, qd, 0.0), lin.forces(q, qd, 0.0), rtol=1e-12,
                               atol=1e-12)


# ------------------------------------------------------------------ start-up (issue 14)
def test_lazy_catalogue_names_exactly_the_module_classes():
    """The built-in plugin registers LazyType references (nothing imported): the
    catalogue lists exactly the classes of the modules' own lists, in their order,
    with their names and body kinds; resolving them gives those classes."""
    import mbplugins
    from mbplugins.analyses.dynamic import DynamicAnalysis
    from mbplugins.analyses.kinematic import KinematicAnalysis, KinetostaticAnalysis
    from mbplugins.analyses.modes import ModesAnalysis
    from mbplugins.analyses.static import StaticAnalysis
    from mbplugins.contact.spatial import FORCE_TYPES as CONTACT_FORCES
    from mbplugins.contact.spheres import FORCE_TYPES as SPHERE_FORCES
    from mbplugins.formulations import FORMULATIONS
    from mbplugins.integrators import INTEGRATORS
    from mbplugins.planar.constraints import CONSTRAINT_TYPES
    from mbplugins.planar.forces import FORCE_TYPES
    from mbplugins.planar.nonlinear import NonlinearTSDA
    from mbplugins.reporters.hdf5 import HDF5Reporter
    from mbplugins.reporters.memory import MemoryReporter
    from mbplugins.rolling.planar import PLANAR_ROLLING_TYPES
    from mbplugins.rolling.spatial import ROLLING_TYPES
    from mbplugins.spatial.composites import COMPOSITE_TYPES
    from mbplugins.spatial.constraints import CONSTRAINT_TYPES as SPATIAL_CONSTRAINTS
    from mbplugins.spatial.forces import FORCE_TYPES as SPATIAL_FORCES
    eager = {
        "mbcore_constraint_types": [*CONSTRAINT_TYPES, *SPATIAL_CONSTRAINTS,
                                    *COMPOSITE_TYPES, *PLANAR_ROLLING_TYPES,
                                    *ROLLING_TYPES],
        "mbcore_force_types": [*FORCE_TYPES, NonlinearTSDA, *SPATIAL_FORCES,
                               *CONTACT_FORCES, *SPHERE_FORCES],
        "mbcore_formulations": list(FORMULATIONS),
        "mbcore_integrators": list(INTEGRATORS),
        "mbcore_analyses": [KinematicAnalysis, KinetostaticAnalysis, StaticAnalysis,
                            DynamicAnalysis, ModesAnalysis],
        "mbcore_reporters": [HDF5Reporter, MemoryReporter],
    }
    assert set(mbplugins.CATALOGUE) == set(eager)
    for hook, classes in eager.items():
        lazy = getattr(mbplugins, hook)()
        assert [(lt.name, lt.target, lt.body_kind) for lt in lazy] == [
            (c.name, f"{c.__module__}:{c.__qualname__}", getattr(c, "body_kind", "planar"))
            for c in classes], hook
        assert [lt.load() for lt in lazy] == classes
    reg = PluginManager().registry
    assert reg.get("constraint", "revolute", "spatial") is SPATIAL_CONSTRAINTS[2]
    assert reg.get("integrator", "dopri5") is INTEGRATORS[5]


def test_lazy_plugins_register_by_name_and_import_on_first_use():
    """A fresh process: the registry knows every built-in type by name (names, has,
    unknown-type messages) without importing a plugin module; looking one type up
    imports its module only; a kinematic run imports neither SciPy's linalg, sparse,
    optimize, interpolate nor h5py nor importlib.metadata; ``mbcore plugins`` then
    lists every type with its description (importing them all)."""
    code = textwrap.dedent("""
        import sys, io, contextlib, mbcore
        from mbcore.plugins import registry
        from mbcore.cli import main
        reg = registry()
        mods = lambda: sorted(m for m in sys.modules if m.startswith("mbplugins."))
        assert reg.has("constraint", "revolute") and reg.has("analysis", "dynamic")
        assert "cam_roller" in reg.names("constraint", "planar")
        assert "did you mean 'revolute'" in reg.unknown_message("constraint", "revolut")
        assert mods() == [], mods()
        mbcore.run(mbcore.Model.from_file(sys.argv[1]))
        heavy = [m for m in ("scipy.linalg", "scipy.sparse", "scipy.optimize",
                             "scipy.interpolate", "h5py", "importlib.metadata")
                 if m in sys.modules]
        assert heavy == [], heavy
        assert "mbplugins.planar.cams" not in sys.modules
        assert not any(m.startswith("mbplugins.formulations") for m in mods()), mods()
        assert reg.get("formulation", "di").name == "di"
        assert [m for m in mods() if m.startswith("mbplugins.formulations")] == [
            "mbplugins.formulations", "mbplugins.formulations.baumgarte",
            "mbplugins.formulations.drift", "mbplugins.formulations.projector"], mods()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["plugins"])
        print(out.getvalue())
    """)
    from pathlib import Path
    model = Path(__file__).resolve().parents[1] / "examples" / "fourbar_kap.yaml"
    out = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    reg = PluginManager().registry
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1 + len(reg.rows())
    for kind, name, prov, cls in reg.rows():
        desc = (getattr(cls, "description", "") or "").strip()
        assert any(ln.split()[:3] == [kind, name, "builtin"] and ln.rstrip().endswith(desc)
                   for ln in lines), (kind, name)


@pytest.mark.core
def test_entry_point_scan_equals_importlib_metadata():
    """The direct scan of sys.path finds the entry points (name, value, distribution
    name and version) importlib.metadata finds, in the same order."""
    import importlib.metadata as im

    from mbcore.plugins import distribution_version, entry_points
    fast = entry_points("mbcore")
    assert fast is not None
    ref = [(ep.name, ep.value, ep.dist.metadata["name"], ep.dist.version)
           for dist in im.distributions() for ep in dist.entry_points if ep.group == "mbcore"]
    assert [(n, v, d.metadata["name"], d.version) for n, v, d in fast] == ref
    assert ("builtin", "mbplugins", "mbcore", mbcore.__version__) in ref
    names = ("numpy", "pluggy", "h5py", "scipy", "PyYAML")
    for dist in names:
        assert distribution_version(dist) == im.version(dist)
    assert distribution_version("no-such-distribution-here") is None
    from mbcore.plugins.manager import distribution_versions     # one pass for several
    assert distribution_versions(names + ("no-such-distribution-here",)) == {
        **{d: im.version(d) for d in names}, "no-such-distribution-here": None}


@pytest.mark.core
def test_versions_without_importing_h5py_equal_the_modules():
    from importlib import metadata

    import h5py
    import pluggy
    import scipy

    from mbcore.analysis import runner
    runner._VERSIONS.clear()
    v = runner.versions()
    assert (v["h5py"], v["scipy"], v["pluggy"]) == (h5py.__version__, scipy.__version__,
                                                     pluggy.__version__)
    assert v["pluggy"] == metadata.version("pluggy")
    assert runner.versions() == v


def test_lazy_type_whose_class_disagrees_names_the_plugin():
    from mbcore.plugins import LazyType

    class Liar:
        @hookimpl
        def mbcore_constraint_types(self):
            return [LazyType("liar_pin", "mbplugins.planar.constraints:Revolute")]

        @hookimpl
        def mbcore_formulations(self):
            return [LazyType("ghost", "no_such_module_xyz:Ghost")]

    pm = PluginManager()
    pm.register(Liar(), name="liar")
    reg = pm.registry
    assert reg.has("constraint", "liar_pin") and "ghost" in reg.names("formulation")
    with pytest.raises(PluginError, match=r"plugin liar: lazy type "
                                          r"mbplugins.planar.constraints:Revolute is "
                                          r"registered as 'liar_pin'"):
        reg.get("constraint", "liar_pin")
    with pytest.raises(PluginError, match=r"plugin liar failed to import formulation type "
                                          r"no_such_module_xyz:Ghost"):
        reg.get("formulation", "ghost")
    with pytest.raises(PluginError, match=r"constraint type 'revolute' is provided twice: by "
                                          r"plugin builtin .*mbplugins.planar.constraints"
                                          r".Revolute.* and by plugin clash2"):
        pm.register(Clash(), name="clash2")


@pytest.mark.core
def test_numerical_rank_equals_the_pivoted_qr():
    """numerical_rank (SVD when unambiguous, else the pivoted QR) gives the rank of
    rank_revealing on full, deficient, near-threshold, wide, tall and empty
    matrices."""
    from mbcore.solve.linalg import numerical_rank, rank_revealing
    rng = np.random.default_rng(5)
    cases = [np.zeros((0, 3)), np.zeros((3, 0)), np.zeros((4, 4)), np.eye(5)]
    for m, n, r in ((8, 9, 8), (9, 9, 7), (12, 9, 9), (20, 30, 5), (6, 6, 6), (250, 240, 200)):
        A = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
        cases.append(A)
        B = A.copy()
        B[-1] = B[0] + 1e-9 * rng.standard_normal(n)       # near the threshold
        cases.append(B)
    for A in cases:
        assert numerical_rank(A) == (rank_revealing(A)[0] if A.size else 0)


@pytest.mark.core
def test_system_helpers_equal_numpy_and_scipy():
    import scipy.sparse as sp

    from mbcore.system.system import _unique_ints, issparse
    rng = np.random.default_rng(1)
    for a in (np.zeros(0, np.intp), np.array([3]), rng.integers(0, 20, 100)):
        u = _unique_ints(a)
        assert np.array_equal(u, np.unique(a)) and u.dtype == np.unique(a).dtype
    assert issparse(sp.csr_matrix(np.eye(2))) and not issparse(np.eye(2))


def test_every_lazy_module_imports_first_in_a_fresh_interpreter():
    """A model using one type imports only that type's module: each module named by
    the built-in catalogue must import on its own (no import cycle that works only
    when a sibling module was imported first, as tsda_nonlinear's once did)."""
    import subprocess
    import sys

    from mbplugins import CATALOGUE
    modules = sorted({entry[1].partition(":")[0] for entries in CATALOGUE.values()
                      for entry in entries})
    assert len(modules) >= 20
    failed = []
    for m in modules:
        r = subprocess.run([sys.executable, "-c", f"import {m}"], capture_output=True,
                           text=True, timeout=120)
        if r.returncode:
            failed.append((m, r.stderr.strip().splitlines()[-1:]))
    assert not failed, failed
