"""The fixed-grid textbook methods on the compiled step loop.

``rk2`` (a per-run tableau) runs on the Runge–Kutta loop's 'fixed' stepper.  It takes the Python driver's steps with the same formulas in the same order, so
the trajectories are identical (bitwise: one process, the same arithmetic), outputs
between step ends included (the same cubic Hermite dense output), and so are the
evaluation counts.
"""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

def _pair(model, **settings):
    """The same run on the compiled loop (``loop: auto``) and the Python driver."""
    runs = [mbcore.run(model, settings={**settings, "loop": loop})
            for loop in ("auto", "python")]
    assert [r.stats["loop"] for r in runs] == ["compiled", "python"]
    return runs


def _assert_identical(a, b, channels=("q", "qd", "qdd")):
    """The states identical; the energy rows, formed from them by the compiled output
    rows (compiled loop) or NumPy (Python driver), to rounding (observed 1.8e-16
    relative; bound 1e-13)."""
    assert len(a) == len(b)
    np.testing.assert_array_equal(np.asarray(a.t), np.asarray(b.t))
    for ch in channels:
        np.testing.assert_array_equal(np.asarray(a[ch]), np.asarray(b[ch]), err_msg=ch)
    e = np.asarray(b["energy"])
    np.testing.assert_allclose(np.asarray(a["energy"]), e, rtol=1e-13, atol=0)
    for k in ("integrator_nfev", "integrator_nsteps"):
        assert a.stats[k] == b.stats[k], k


# ----------------------------------------------------------------------------------
# rk2: the instance's tableau on the 'fixed' Runge–Kutta loop
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0.5, 0.75, 1.0])
def test_rk2_runs_on_the_fixed_loop_with_its_own_tableau(examples, a):
    """Outputs on step ends (h = 2^-10, outputs every 2^-6): identical.  Outputs
    between step ends: the RK loop's Hermite basis is written in another form
    than the Python one, so they agree to rounding (observed 8.9e-16 on q; bound
    1e-13, > 100x)."""
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    st = {"formulation": "di", "integrator": "rk2", "t_end": 0.3,
          "integrator_options": {"a": a}}
    _assert_identical(*_pair(m, **st, step=2.0 ** -10, output_step=2.0 ** -6))
    c, p = _pair(m, **st, step=1e-3, output_step=0.0125)
    assert c.stats["integrator_nfev"] == p.stats["integrator_nfev"] == 601
    assert np.abs(np.asarray(c["q"]) - np.asarray(p["q"])).max() < 1e-13
    # a different a is a different method: the loop does use the instance's tableau
    other = mbcore.run(m, settings={**st, "step": 1e-3, "output_step": 0.0125,
                                    "integrator_options": {"a": a + 0.125}})
    assert np.abs(np.asarray(other["q"]) - np.asarray(c["q"])).max() > 1e-9


def test_a_per_run_tableau_of_a_third_party_class(examples):
    """instance_twin: the class's twin when the object keeps its class's tableau,
    the object's own when it differs, None (Python driver) when it is not an
    explicit tableau."""
    from mbcore.integrate.fastloop import run_compiled   # noqa: F401 (the loop used)
    from mbcore.integrate.rk import compiled_twin, instance_twin
    from mbplugins.integrators.classical import RK2Family, RK3, rk2_tableau

    def fun(t, y):
        return -y

    rk3 = RK3(fun, 0.0, np.ones(2), 1.0, step=0.1)
    twin = compiled_twin(RK3, "fixed")
    assert instance_twin(rk3, twin) is twin
    rk2 = RK2Family(fun, 0.0, np.ones(2), 1.0, step=0.1, a=0.5)
    own = instance_twin(rk2, compiled_twin(RK2Family, "fixed"))
    A, B, C = rk2_tableau(0.5)
    assert np.array_equal(own.A, A) and np.array_equal(own.B, B) and own.order == 2
    rk2.A = np.array([[0.0, 1.0], [1.0, 0.0]])          # implicit: refused
    assert instance_twin(rk2, compiled_twin(RK2Family, "fixed")) is None
    rk2.A, rk2.C = A, np.zeros(3)                        # C of the wrong size
    assert instance_twin(rk2, compiled_twin(RK2Family, "fixed")) is None
