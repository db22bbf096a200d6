"""The book's coordinate-partitioning variants as options of ``cp`` (Nikravesh (1988),
§13.3.2-13.3.3, App. C): the partition rules by Gaussian elimination (row-wise column
search, full pivoting) reproduce Example 13.1; a fixed partition (CP-1) names the
point where it fails; the periodic re-partition trigger."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore.errors import AnalysisError, ModelError
from mbplugins.formulations.partitioning import lu_partition, pivoted_partition

from test_partitioning import free_slider_crank


def _example_13_1(x2, y2, p2, x3, y3, p3):
    """The Jacobian of Example 13.1 (a pendulum carrying a sliding mass; q = [x1, y1,
    phi1, x2, y2, phi2, x3, y3, phi3]), from its seven constraints: x1 = y1 = phi1 =
    0, x1 - x2 + 0.5 sin phi2 = 0, y1 - y2 - 0.5 cos phi2 = 0, sin phi2 (y3 - y2) +
    cos phi2 (x3 - x2) = 0, phi2 - phi3 = 0."""
    c, s = np.cos(p2), np.sin(p2)
    J = np.zeros((7, 9))
    J[0, 0] = J[1, 1] = J[2, 2] = 1.0
    J[3, [0, 3, 5]] = [1.0, -1.0, 0.5 * c]
    J[4, [1, 4, 5]] = [1.0, -1.0, 0.5 * s]
    J[5, [3, 4, 5, 6, 7]] = [-c, -s, c * (y3 - y2) - s * (x3 - x2), c, s]
    J[6, [5, 8]] = [1.0, -1.0]
    return J


@pytest.mark.parametrize("config, order, v", [
    # the book's configurations (a) and (b) and its printed column orders
    ((0.43, -0.25, 60.0, 0.69, -0.40, 60.0), [1, 2, 3, 4, 5, 8, 6, 7, 9], [7, 9]),
    ((-0.21, -0.45, -25.0, -0.42, -0.91, -25.0), [1, 2, 3, 4, 5, 6, 9, 8, 7], [7, 8])])
def test_book_rules_reproduce_example_13_1(config, order, v):
    x2, y2, p2, x3, y3, p3 = config
    J = _example_13_1(x2, y2, np.radians(p2), x3, y3, np.radians(p3))
    u_r, v_r, cols = lu_partition(J)
    assert [c + 1 for c in cols] == order                # the printed elimination
    assert [c + 1 for c in v_r] == v                     # (a) x3, phi3; (b) x3, y3
    _, v_f, _ = lu_partition(J, full=True)               # App. C: the same v here
    assert [c + 1 for c in v_f] == v
    _, v_q, _ = pivoted_partition(J, np.ones(9))         # and QR with column pivoting
    assert [c + 1 for c in v_q] == v


def test_book_rules_name_a_redundant_row():
    J = _example_13_1(0.43, -0.25, np.radians(60.0), 0.69, -0.40, np.radians(60.0))
    with pytest.raises(Exception, match="zero pivot in row 8"):
        lu_partition(np.vstack([J, J[3]]))


@pytest.mark.parametrize("rule", ["lu_rows", "lu_full"])
def test_book_rules_give_the_same_motion(rule):
    """A run with the book's rules follows the same motion as the default (the
    partition changes where the rules differ; the solution does not): both within
    the integration error of the exact one (observed 4e-12 apart at rtol 1e-10)."""
    st = {"t_end": 1.0, "output_step": 0.05, "formulation": "cp", "rtol": 1e-10,
          "atol": 1e-12, "hold": "crank.phi"}
    a = mbcore.run(free_slider_crank(), settings=st)
    b = mbcore.run(free_slider_crank(), settings={
        **st, "formulation_options": {"partition_rule": rule}})
    assert b.status == "finished"
    np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=1e-7)


def test_a_fixed_partition_names_where_it_fails():
    """CP-1 (``repartition: false``) from the slider's x: the partition fails at the
    dead point, and the run stops there naming the partition and the setting (its
    rows so far kept); the default (CP-2) re-partitions and goes on."""
    st = {"t_end": 1.0, "output_step": 0.01, "formulation": "cp", "rtol": 1e-10,
          "atol": 1e-12, "hold": "crank.phi", "independent": "slider.x"}
    with pytest.raises(AnalysisError, match=r"independent coordinates slider\.x\).*"
                                            r"re-partitioning is off") as exc:
        mbcore.run(free_slider_crank(), settings={
            **st, "formulation_options": {"repartition": False}})
    assert 0.3 < exc.value.t < 0.5                       # the first dead point: 0.46
    ok = mbcore.run(free_slider_crank(), settings=st)
    assert ok.t[-1] == pytest.approx(1.0)
    assert any(e.kind == "repartition" for e in ok.events)


def test_periodic_repartition():
    """``repartition_every: k``: a fresh partition every k accepted steps (taken when
    it differs); the motion is the same."""
    st = {"t_end": 1.0, "output_step": 0.05, "formulation": "cp", "rtol": 1e-10,
          "atol": 1e-12, "hold": "crank.phi", "independent": "slider.x"}
    a = mbcore.run(free_slider_crank(), settings=st)
    b = mbcore.run(free_slider_crank(), settings={
        **st, "formulation_options": {"repartition_every": 5}})
    msgs = [e.message for e in b.events if e.kind == "repartition"]
    assert msgs and msgs[0].startswith("periodic re-partition (every 5 steps)")
    np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=1e-7)


def test_variant_settings_are_checked():
    with pytest.raises(ModelError, match="partition_rule"):
        mbcore.run(free_slider_crank(), settings={
            "t_end": 0.1, "formulation": "cp",
            "formulation_options": {"partition_rule": "svd"}})



def test_taylor_predictor_same_motion_and_its_data():
    """``predictor: taylor`` (the book's u + h ud + h^2 udd / 2 from the last accepted
    step's end) follows the same motion as the default predictor (observed 2e-13
    apart at rtol 1e-10; bound 1e-7); the expansion it keeps at a step's end is
    that state's dependent coordinates, velocities and accelerations: equal to a
    tight DI run's at the same state (observed 1e-10; bound: the Newton tolerance
    amplified by the accelerations, 1e-7)."""
    st = {"t_end": 0.3, "output_step": 0.05, "formulation": "cp", "rtol": 1e-10,
          "atol": 1e-12, "hold": "crank.phi", "independent": "slider.x"}
    a = mbcore.run(free_slider_crank(), settings=st)
    opts = {"formulation_options": {"predictor": "taylor"}}
    b = mbcore.run(free_slider_crank(), settings={**st, **opts})
    np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=1e-7)
    di = mbcore.run(free_slider_crank(), settings={
        **{k: v for k, v in st.items() if k != "independent"}, "formulation": "di",
        "record": "q, qd, qdd"})
    cp = mbcore.Simulation(free_slider_crank(), settings={**st, **opts}).analysis.formulation
    k = 3                                               # the output at t = 0.15
    q, qd, qdd = di["q"][k], di["qd"][k], di["qdd"][k]
    assert cp._taylor is None
    cp.step_end(float(di.t[k]), cp.pack(q, qd))
    tc, u, ud, udd = cp._taylor
    assert tc == di.t[k]
    np.testing.assert_allclose(u, q[cp.u], rtol=0, atol=1e-7)
    np.testing.assert_allclose(ud, qd[cp.u], rtol=0, atol=1e-7)
    np.testing.assert_allclose(udd, qdd[cp.u], rtol=0, atol=1e-7 * (1 + np.max(abs(qdd))))


def test_newton_trigger():
    """``repartition_on_newton``: where Newton's iterations per step rose at two
    successive steps, the step's end takes a fresh partition if it differs (the
    book's trigger); flat or falling counts do not.  (On the free slider-crank the
    pivot test re-partitions before the counts rise: they stay at 1-3 with either
    predictor up to the dead point.)"""
    st = {"t_end": 0.5, "output_step": 0.05, "formulation": "cp", "rtol": 1e-10,
          "atol": 1e-12, "hold": "crank.phi", "independent": "slider.x"}
    di = mbcore.run(free_slider_crank(), settings={
        **{k: v for k, v in st.items() if k != "independent"}, "formulation": "di"})
    k = 9                                               # t = 0.45: near the dead point
    y_bad = None
    for trigger, counts, expect in [(True, [1, 2, 3], True), (True, [2, 2, 3], False),
                                    (True, [3, 2, 1], False), (False, [1, 2, 3], False)]:
        cp = mbcore.Simulation(free_slider_crank(), settings={
            **st, "formulation_options": {"repartition_on_newton": trigger,
                                          "repartition_factor": 1e6}}
        ).analysis.formulation
        assert [cp.system.coordinate_names[j] for j in cp.v] == ["slider.x"]
        y_bad = cp.pack(di["q"][k], di["qd"][k])
        cp._newton = [counts[-1], counts[:-1]]
        got = cp.step_end(float(di.t[k]), y_bad)
        if expect:
            assert got is not None and got[0] == "Newton's iterations rose (1 -> 2 -> 3)"
            np.testing.assert_allclose(got[1], di["q"][k], rtol=0, atol=1e-8)
        else:
            assert got is None
