"""A System is the facade of an immutable compiled model (``System.compiled``) and
a per-run workspace (``System.data``); ``new_data`` gives a second workspace on
the same model, which evaluates independently of the first."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.system.compiled_model import SystemModel
from mbcore.system.data import SystemData

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PKG = ROOT / "src" / "mbcore" / "system"


def _model():
    """The slider-crank with a motor torque that is an ``input`` function."""
    m = mbcore.load(ROOT / "examples" / "slider_crank_dynamic.yaml").to_dict()
    m["forces"] = list(m.get("forces") or []) + [
        {"name": "motor", "type": "torque", "body": "crank",
         "torque": {"input": {"name": "u", "value": 0.25}}}]
    return mbcore.Model.from_dict(m)


def _states(s, k):
    st = s.initial_state()
    rng = np.random.default_rng(k)
    return st.q + 0.01 * rng.standard_normal(s.n), st.qd + rng.standard_normal(s.n)


def _evaluate(s, q, qd, t):
    """Copies of every stage's output."""
    return [s.phi(q, t).copy(), s.jacobian_dense(q, t), s.nu(q, t).copy(),
            s.gamma(q, qd, t).copy(), s.forces(q, qd, t).copy()]


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_the_two_parts(kernels):
    s = _model().compile(kernels=kernels)
    assert isinstance(s.compiled, SystemModel) and isinstance(s.data, SystemData)
    assert s.data.model is s.compiled
    assert (s.n, s.m, s.groups) == (s.compiled.n, s.compiled.m, s.compiled.groups)
    # the workspace owns the live buffers; the model's gravity forces stay unchanged
    assert s.jacobian_data is s.data.jdata and s.constant_forces is s.data.constant_forces
    assert not np.shares_memory(s.constant_forces, s.compiled.gravity_forces)


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_two_workspaces_on_one_model_evaluate_independently(kernels):
    s1 = _model().compile(kernels=kernels)
    s2 = s1.new_data()
    assert s2.compiled is s1.compiled and s2.data is not s1.data
    (qa, qda), (qb, qdb) = _states(s1, 1), _states(s1, 2)
    ref = _model().compile(kernels=kernels)      # one System per state: the reference
    want_a, want_b = _evaluate(ref, qa, qda, 0.1), _evaluate(ref, qb, qdb, 0.2)
    # interleaved: each workspace's returned buffers hold its own state's values
    out_a = [s1.phi(qa, 0.1), s1.nu(qa, 0.1), s1.gamma(qa, qda, 0.1),
             s1.forces(qa, qda, 0.1)]
    out_b = [s2.phi(qb, 0.2), s2.nu(qb, 0.2), s2.gamma(qb, qdb, 0.2),
             s2.forces(qb, qdb, 0.2)]
    for got, want in zip(out_a + out_b, [want_a[k] for k in (0, 2, 3, 4)]
                         + [want_b[k] for k in (0, 2, 3, 4)], strict=True):
        np.testing.assert_array_equal(got, want)     # same code path, same process
    for got, want in zip(_evaluate(s1, qa, qda, 0.1) + _evaluate(s2, qb, qdb, 0.2),
                         want_a + want_b, strict=True):
        np.testing.assert_array_equal(got, want)
    # inputs and constant forces are per workspace
    s2.set_input("u", 5.0)
    s2.constant_forces[0] += 1.0
    np.testing.assert_array_equal(s1.forces(qa, qda, 0.1), want_a[4])
    assert not np.array_equal(s2.forces(qa, qda, 0.1), want_a[4])


def test_no_module_of_the_system_reads_private_fields_of_another_object():
    """``x._name`` only for x = self or cls in mbcore.system (the facade binds what
    its stages read; the parts talk through public names)."""
    bad = []
    for path in sorted(SYSTEM_PKG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                bad.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not bad, bad
