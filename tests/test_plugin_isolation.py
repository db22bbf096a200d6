"""Plugin isolation (issue 16 item 3): an exception inside a plugin's element names
the plugin, the element, the type, the method and the time; plugin state lives in
the System's own type instances, so two Systems — also in two threads — never share
it.  Runs on the stub plugin set (tests/stub_plugins.py)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import stub_plugins

import mbcore
from mbcore import AnalysisError, ConvergenceError, PluginError, hookimpl
from mbcore.errors import ElementEvaluationError
from mbcore.plugins.errors import PluginElementError

pytestmark = pytest.mark.core


class FaultyPin(stub_plugins.StubPin):
    """gamma fails after t = 0.2: a bug (ZeroDivisionError), an element that cannot be
    evaluated (ElementEvaluationError) or a deliberate mbcore error, by ``mode``."""

    name = "faulty_pin"
    mode = "bug"

    def gamma(self, par, qb, qdb, t, f):
        if t > 0.2:
            if self.mode == "bug":
                return 1.0 / 0.0
            if self.mode == "element":
                raise ElementEvaluationError(1, "the pin is worn out")
            raise ConvergenceError("inner iteration failed", t)
        return super().gamma(par, qb, qdb, t, f)


class FaultySpring(stub_plugins.StubSpring):
    name = "faulty_spring"

    def force(self, par, qb, qdb, t, f):
        if t > 0.2:
            raise ValueError("math domain error")
        return super().force(par, qb, qdb, t, f)


class Faulty:
    __version__ = "2.1"

    @hookimpl
    def mbcore_constraint_types(self):
        return [FaultyPin]

    @hookimpl
    def mbcore_force_types(self):
        return [FaultySpring]


@pytest.fixture
def faulty_pm(stub_pm):
    stub_pm.register(Faulty(), name="faulty")
    return stub_pm


def _system(pm, examples, pin="faulty_pin", spring=None, kernels="numpy"):
    d = stub_plugins.fourbar(examples)
    for j in d["joints"][1:3]:
        j["type"] = pin
    if spring:
        d["forces"] = [{"name": "S", "type": spring, "body_i": "crank", "body_j": "ground",
                        "point_i": [1.0, 0.0], "point_j": [0.0, 2.0], "stiffness": 10.0}]
    return mbcore.Model.from_dict(d, registry=pm.registry).compile(plugins=pm, kernels=kernels)


def test_bug_inside_a_constraint_type_names_plugin_elements_method_and_time(
        faulty_pm, examples):
    s = _system(faulty_pm, examples)
    q, qd = s.initial_state().q, np.ones(s.n)
    s.gamma(q, qd, 0.1)                                  # fine before t = 0.2
    with pytest.raises(PluginElementError) as err:
        s.gamma(q, qd, 0.25)
    e = err.value
    assert str(e).startswith("t = 0.25: plugin faulty (2.1): constraint type "
                             "'faulty_pin'.gamma() raised ZeroDivisionError: float division "
                             "by zero (evaluating the group of 2 elements 'A' (joints[1]), "
                             "'B' (joints[2]))"), str(e)
    assert isinstance(e, PluginError) and isinstance(e.__cause__, ZeroDivisionError)
    assert (e.plugin, e.kind, e.type_name, e.method, e.elements, e.paths, e.t) == (
        "faulty (2.1)", "constraint", "faulty_pin", "gamma", ["A", "B"],
        ["joints[1]", "joints[2]"], 0.25)


def test_element_evaluation_error_of_a_constraint_names_that_element(faulty_pm, examples,
                                                                     monkeypatch):
    monkeypatch.setattr(FaultyPin, "mode", "element")
    s = _system(faulty_pm, examples)
    with pytest.raises(AnalysisError) as err:
        s.gamma(s.initial_state().q, np.ones(s.n), 0.5)
    assert str(err.value) == ("t = 0.5: constraint element 'B' (joints[2], faulty_pin; "
                              "plugin faulty (2.1)): the pin is worn out")
    assert isinstance(err.value.__cause__, ElementEvaluationError)
    assert err.value.t == 0.5


def test_deliberate_mbcore_error_of_a_type_passes_unchanged(faulty_pm, examples,
                                                            monkeypatch):
    monkeypatch.setattr(FaultyPin, "mode", "mbcore")
    s = _system(faulty_pm, examples)
    with pytest.raises(ConvergenceError, match=r"^t = 0.3: inner iteration failed$"):
        s.gamma(s.initial_state().q, np.ones(s.n), 0.3)


def test_bug_inside_a_force_type_names_plugin_element_and_time(faulty_pm, examples):
    s = _system(faulty_pm, examples, pin="stub_pin", spring="faulty_spring")
    q, qd = s.initial_state().q, np.zeros(s.n)
    assert np.any(s.forces(q, qd, 0.0) != 0.0)
    with pytest.raises(PluginElementError,
                       match=r"^t = 0.3: plugin faulty \(2.1\): force type "
                             r"'faulty_spring'.force\(\) raised ValueError: math domain "
                             r"error \(evaluating element 'S' \(forces\[0\]\)\)$") as err:
        s.forces(q, qd, 0.3)
    assert isinstance(err.value.__cause__, ValueError)


def test_error_reaches_the_caller_of_a_run_with_the_plugin_named(faulty_pm, examples):
    """Through the runner and the analysis: the stub kinematic analysis evaluates nu
    and the Jacobian, so a failing ``jacobian`` surfaces from ``mbcore.run``."""
    class Late(stub_plugins.StubPin):
        name = "late_pin"

        def jacobian(self, par, qb, t, f):
            if t > 0.25:
                raise KeyError("no such mode")
            return super().jacobian(par, qb, t, f)

    class P:
        @hookimpl
        def mbcore_constraint_types(self):
            return [Late]

    faulty_pm.register(P(), name="late")
    d = stub_plugins.fourbar(examples)
    d["joints"][0]["type"] = "late_pin"
    m = mbcore.Model.from_dict(d, registry=faulty_pm.registry)
    with pytest.raises(PluginElementError,
                       match=r"^t = 0.3: plugin late: constraint type 'late_pin'.jacobian\(\) "
                             r"raised KeyError: 'no such mode' \(evaluating element 'O2' "
                             r"\(joints\[0\]\)\)$"):
        mbcore.run(m, plugins=faulty_pm, raise_errors=True)


# ------------------------------------------------------------------ state per System
class CountingSpring(stub_plugins.StubSpring):
    """Keeps state on its instance: the stiffnesses read in ``pack`` (one per element,
    used instead of the packed parameter) and the number of evaluations."""

    name = "counting_spring"

    def pack(self, spec, ctx):
        self.k = [*getattr(self, "k", []), float(spec["stiffness"])]
        self.calls = 0
        return super().pack(spec, ctx)

    def force(self, par, qb, qdb, t, f):
        self.calls += 1
        par = par.copy()
        par[:, 4] = self.k
        return super().force(par, qb, qdb, t, f)


class Counting:
    @hookimpl
    def mbcore_force_types(self):
        return [CountingSpring]


def _spring_system(pm, stiffness: float):
    m = mbcore.Model("osc")
    m.set_gravity(0.0, -9.81)
    m.add_body("b", position=(1.0, 0.5), mass=2.0, inertia=0.1)
    for k, share in enumerate((0.25, 0.75)):        # two springs to the same point
        m.add_force("counting_spring", f"S{k}", body_i="b", body_j="ground",
                    point_i=(0.0, 0.0), point_j=(0.0, 0.0), stiffness=share * stiffness)
    return m.compile(plugins=pm, kernels="numpy")


def _spring_force(stiffness: float, q) -> np.ndarray:
    return np.array([-stiffness * q[0], -stiffness * q[1], 0.0])


@pytest.fixture
def counting_pm(stub_pm):
    stub_pm.register(Counting(), name="counting")
    return stub_pm


def test_plugin_state_is_per_system(counting_pm):
    s1, s2 = _spring_system(counting_pm, 10.0), _spring_system(counting_pm, 30.0)
    g = np.zeros(3)
    g[1] = -9.81 * 2.0
    q = np.array([1.0, 0.5, 0.0])
    for _ in range(3):
        np.testing.assert_allclose(s1.forces(q, np.zeros(3), 0.0), _spring_force(10.0, q) + g)
    np.testing.assert_allclose(s2.forces(q, np.zeros(3), 0.0), _spring_force(30.0, q) + g)
    t1, t2 = s1.force_groups[0].ftype, s2.force_groups[0].ftype
    assert t1 is not t2 and type(t1) is type(t2) is CountingSpring
    assert (t1.k, t1.calls, t2.k, t2.calls) == ([2.5, 7.5], 3, [7.5, 22.5], 1)
    assert not hasattr(CountingSpring, "calls") and not hasattr(CountingSpring, "k")


def test_plugin_state_is_per_system_in_two_threads(counting_pm):
    """Two threads, each with its own System of the same plugin type, evaluating
    alternately (a barrier interleaves them): each sees its own stiffness and counts
    its own calls."""
    n_calls = 200
    barrier = threading.Barrier(2)
    out: dict[float, tuple] = {}

    def work(stiffness):
        s = _spring_system(counting_pm, stiffness)
        rng = np.random.default_rng(int(stiffness))
        worst = 0.0
        barrier.wait()
        for k in range(n_calls):
            q = rng.normal(size=3)
            g = s.forces(q, np.zeros(3), 0.0).copy()
            g[1] += 9.81 * 2.0
            worst = max(worst, float(np.max(np.abs(g - _spring_force(stiffness, q)))))
            if k % 20 == 0:
                barrier.wait()
        out[stiffness] = (worst, s.force_groups[0].ftype.calls)

    threads = [threading.Thread(target=work, args=(k,)) for k in (10.0, 30.0)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # the plugin's force vs. the formula here: a few eps of |F| <= ~100 (observed 1.4e-14)
    assert out[10.0] == (pytest.approx(0.0, abs=1e-11), n_calls)
    assert out[30.0] == (pytest.approx(0.0, abs=1e-11), n_calls)

