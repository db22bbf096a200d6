"""The Python tier's evaluation paths (issue 16 item 5): the per-stage plans of
System (gather from q or from the loaded extended buffer, scatter by result-shaped
indices, the four ways a Python force group is added into Q) give the built-in
compiled types' numbers, and a type's arrays never alias the System's buffers."""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import Model, hookimpl
from mbcore.elements import ConstraintType
from mbcore.plugins import PluginManager
from mbcore.elements.schema import Param
from mbplugins.planar.constraints import Revolute
from mbplugins.planar.forces import RSDA, TSDA, PointForce, Torque

TOL = dict(rtol=1e-12, atol=1e-12)


def twin(cls):
    """The built-in type ``cls`` as a Python-only type (its NumPy reference methods,
    no kernel) named ``py_<name>``."""
    return type(f"Py{cls.__name__}", (cls,), {"name": f"py_{cls.name}", "kernel": None})


class Twins:
    @hookimpl
    def mbcore_constraint_types(self):
        return [twin(Revolute)]

    @hookimpl
    def mbcore_force_types(self):
        return [twin(c) for c in (TSDA, RSDA, PointForce, Torque)]


def plugins(*extra) -> PluginManager:
    pm = PluginManager()
    pm.register(Twins(), name="twins")
    for k, p in enumerate(extra):
        pm.register(p, name=f"extra{k}")
    return pm


def chain(prefix: str, ground: bool) -> dict:
    """Three bodies a, b, c joined a-b and b-c (and ground-a when ``ground``), with
    force elements whose Python twins take each of the four scatter modes."""
    bodies = [{"name": n, "mass": 1.0 + k, "inertia": 0.2 + 0.1 * k,
               "position": [1.0 * k, 0.3 * k], "angle": 0.2 * k}
              for k, n in enumerate("abc")]
    joints = [{"name": "ab", "type": prefix + "revolute", "body_i": "a", "body_j": "b",
               "point_i": [0.5, 0.15], "point_j": [-0.5, -0.15]},
              {"name": "bc", "type": prefix + "revolute", "body_i": "b", "body_j": "c",
               "point_i": [0.5, 0.15], "point_j": [-0.5, -0.15]}]
    if ground:
        joints.insert(0, {"name": "ga", "type": prefix + "revolute", "body_i": "ground",
                          "body_j": "a", "point_i": [0.0, 0.0], "point_j": [0.0, 0.0]})
    forces = [  # one body: a view of Q; bodies a and c: a fancy scatter
        {"name": "fb", "type": prefix + "force", "body": "b", "point": [0.1, 0.2],
         "fx": "sin(t)", "fy": 2.0, "frame": "body"},
        {"name": "sac", "type": prefix + "tsda", "body_i": "a", "body_j": "c",
         "point_i": [0.1, 0.0], "point_j": [0.0, 0.1], "stiffness": 30.0, "damping": 2.0,
         "free_length": 1.0},
        # the ground: the extended buffer; a-b twice: the unbuffered add
        {"name": "tb", "type": prefix + "torque", "body": "b", "torque": "0.5*t"},
        {"name": "r1", "type": prefix + "rsda", "body_i": "a", "body_j": "b",
         "stiffness": 3.0, "damping": 0.2},
        {"name": "r2", "type": prefix + "rsda", "body_i": "b", "body_j": "a",
         "stiffness": 5.0, "damping": 0.1}]
    return {"name": "chain", "bodies": bodies, "joints": joints, "forces": forces}


def pair(ground: bool, pm: PluginManager, backend: str = "compiled"):
    py = Model.from_dict(chain("py_", ground), registry=pm.registry).compile(
        plugins=pm, kernels=backend)
    bi = Model.from_dict(chain("", ground), registry=pm.registry).compile(plugins=pm)
    return py, bi


@pytest.mark.parametrize("ground", [False, True])
def test_python_twins_equal_the_builtin_on_every_gather_and_scatter_path(ground, backend):
    pm = plugins()
    py, bi = pair(ground, pm, backend)
    assert py._py_direct is not ground        # q itself / the loaded extended buffer
    assert sorted(p[6] for p in py._py_force_plan) == ["add", "at", "ext", "scatter"]
    rng = np.random.default_rng(7)
    for k in range(6):
        q, qd, t = rng.normal(size=9), rng.normal(size=9), float(rng.uniform(0.1, 2.0))
        # float64 arrays (the fast path), then (NumPy backend: nothing compiled reads
        # them) lists and integer arrays, converted
        qa, qda = (q, qd) if k < 4 or backend == "compiled" else (
            (list(q), list(qd)) if k == 4 else (np.round(q).astype(int),
                                                np.round(qd).astype(int)))
        qr, qdr = np.asarray(qa, float), np.asarray(qda, float)
        np.testing.assert_allclose(py.phi(qa, t), bi.phi(qr, t), **TOL)
        np.testing.assert_allclose(py.jacobian_dense(qa, t), bi.jacobian_dense(qr, t), **TOL)
        np.testing.assert_allclose(py.nu(qa, t), bi.nu(qr, t), **TOL)
        np.testing.assert_allclose(py.gamma(qa, qda, t), bi.gamma(qr, qdr, t), **TOL)
        np.testing.assert_allclose(py.forces(qa, qda, t), bi.forces(qr, qdr, t), **TOL)


def test_wrong_lengths_are_refused_on_the_fast_path(backend):
    """A float64 vector of the wrong length must not pass the fast path's check (a
    gather from it would read past the system's coordinates or broadcast)."""
    py, _ = pair(False, plugins(), backend)
    stages = {"phi": lambda q, qd: py.phi(q, 0.0), "jacobian": lambda q, qd: py.jacobian(q, 0.0),
              "gamma": lambda q, qd: py.gamma(q, qd, 0.0),
              "forces": lambda q, qd: py.forces(q, qd, 0.0)}
    for name, stage in stages.items():
        with pytest.raises(ValueError, match=r"\bq\b.* (8|9)\b"):
            stage(np.zeros(8), np.zeros(9))
        if name in ("gamma", "forces"):
            with pytest.raises(ValueError, match=r"\bqd\b.* (10|9)\b"):
                stage(np.zeros(9), np.zeros(10))


class Scribbler(ConstraintType):
    """Returns the same arrays at every call and overwrites its inputs afterwards:
    the System must copy the results and hand it copies of the coordinates."""

    name = "scribbler"
    equations = 1
    bodies = ("body_i", "body_j")
    params = {"body_i": Param("body"), "body_j": Param("body")}
    n_par = 0
    out = {}

    def pack(self, spec, ctx):
        return [], []

    def _keep(self, key, value, *inputs):
        a = self.out.setdefault(key, np.zeros(value.shape))
        a[...] = value
        for x in inputs:
            x[...] = np.nan                   # a careless type scribbling on its inputs
        return a

    def phi(self, par, qb, t, f):             # x_i - x_j
        return self._keep("phi", qb[:, 0, 0:1] - qb[:, 1, 0:1], qb)

    def jacobian(self, par, qb, t, f):
        J = np.zeros((len(par), 1, 2, 3))
        J[:, 0, 0, 0], J[:, 0, 1, 0] = 1.0, -1.0
        return self._keep("jacobian", J, qb)

    def gamma(self, par, qb, qdb, t, f):
        return self._keep("gamma", 0.0 * qdb[:, 0, 0:1], qb, qdb)


class ScribblerPlugin:
    @hookimpl
    def mbcore_constraint_types(self):
        return [Scribbler]


def test_a_type_returning_and_scribbling_on_the_same_arrays_never_aliases_the_system():
    pm = plugins(ScribblerPlugin())
    d = chain("py_", False)
    d["joints"].append({"name": "s", "type": "scribbler", "body_i": "a", "body_j": "c"})
    s = Model.from_dict(d, registry=pm.registry).compile(plugins=pm)
    assert s._py_direct
    rng = np.random.default_rng(3)
    q1, q2, qd = rng.normal(size=9), rng.normal(size=9), rng.normal(size=9)
    keep = q1.copy(), qd.copy()
    r1 = s.phi(q1, 0.0)[-1]
    J = s.jacobian_dense(q1, 0.0)
    assert r1 == q1[0] - q1[6] and J[-1, 0] == 1.0 and J[-1, 6] == -1.0
    assert s.gamma(q1, qd, 0.0)[-1] == 0.0
    np.testing.assert_array_equal(q1, keep[0])        # the caller's q and qd untouched
    np.testing.assert_array_equal(qd, keep[1])
    phi = s.phi(q2, 0.0)
    assert phi[-1] == q2[0] - q2[6]
    Scribbler.out["phi"][...] = 99.0                  # the type reuses its array ...
    assert phi[-1] == q2[0] - q2[6]                   # ... the System's buffer is its own
    assert not np.shares_memory(phi, Scribbler.out["phi"])
