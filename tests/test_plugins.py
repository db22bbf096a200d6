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
from mbcore.schema import Param


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
        for p, (qi, qj) in zip(par, qb):
            out.append(qi[:2] + self._A(qi[2]) @ p[:2] - qj[:2] - self._A(qj[2]) @ p[2:])
        return np.array(out)

    def jacobian(self, par, qb, t, f):
        R = np.array([[0.0, -1.0], [1.0, 0.0]])
        out = np.zeros((len(par), 2, 2, 3))
        for e, (p, (qi, qj)) in enumerate(zip(par, qb)):
            out[e, :, 0, :2] = np.eye(2)
            out[e, :, 0, 2] = R @ self._A(qi[2]) @ p[:2]
            out[e, :, 1, :2] = -np.eye(2)
            out[e, :, 1, 2] = -R @ self._A(qj[2]) @ p[2:]
        return out

    def gamma(self, par, qb, qdb, t, f):
        return np.array([qdi[2] ** 2 * self._A(qi[2]) @ p[:2] - qdj[2] ** 2 * self._A(qj[2]) @ p[2:]
                         for p, (qi, qj), (qdi, qdj) in zip(par, qb, qdb)])


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


def test_core_never_imports_mbplugins():
    code = ("import sys, mbcore, mbcore.model, mbcore.system, mbcore.plugins, mbcore.runner, "
            "mbcore.cli, mbcore.result; assert 'mbplugins' not in sys.modules, "
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
        from mbcore.schema import Param

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
    assert non._py_force_groups and not non._py_force_groups[0]._unique
    rng = np.random.default_rng(2)
    q, qd = rng.normal(size=6), rng.normal(size=6)
    np.testing.assert_allclose(non.forces(q, qd, 0.0), lin.forces(q, qd, 0.0), rtol=1e-12,
                               atol=1e-12)
