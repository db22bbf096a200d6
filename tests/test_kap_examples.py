"""Worked examples of 004 Ch.5 reproduced by the kinematic analysis.

* KAP four-bar, 004 §5.2.1 — printed table (spec/planar.md §6.4).  The book prints
  three decimals (F8.3/F9.3); tolerance 1.5e-3 (half a unit of the last digit plus
  rounding of the estimates).  OCR sign fixes of the spec are applied.
* Slider-crank, 004 §4.4.1 / §5.2.2 — the book prints only a plot; the reference
  values are those computed independently in spec/planar.md §6.5 (printed to
  3 decimals, tolerance 1.5e-3 in mm).
"""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import Model, run

KAP = {  # t -> body -> (q, qd, qdd), spec/planar.md §6.4 (bold = OCR fix)
    0.0: {
        "crank": ([.500, .866, 1.047], [-5.441, 3.142, 6.283], [-19.739, -34.190, .000]),
        "coupler": ([2.824, 2.553, .423], [-11.085, 6.732, .246], [-52.441, -39.898, 15.646]),
        "follower": ([3.574, 1.687, 1.004], [-5.644, 3.590, 3.344], [-32.702, -5.709, 12.264]),
        "P": ([2.663, 4.126], [-11.472, 6.692], [-77.042, -42.500]),
    },
    0.025: {
        "crank": ([.358, .934, 1.204], [-5.866, 2.252, 6.283], [-14.148, -36.856, .000]),
        "coupler": ([2.531, 2.708, .434], [-12.220, 5.558, .581], [-38.613, -53.046, 11.545]),
        "follower": ([3.423, 1.774, 1.091], [-6.354, 3.306, 3.581], [-24.465, -16.189, 7.116]),
        "P": ([2.355, 4.279], [-13.133, 5.455], [-56.693, -55.617]),
    },
}


@pytest.fixture(scope="module")
def fourbar(request):
    return Model.from_file(request.config.rootpath / "examples" / "fourbar_kap.yaml")


def test_kap_fourbar_printed_table(fourbar, backend):
    res = run(fourbar, kernels=backend)
    assert len(res.t) == 41 and res.t[-1] == pytest.approx(1.0)
    for t, bodies in KAP.items():
        k = int(np.argmin(abs(res.t - t)))
        assert res.t[k] == pytest.approx(t, abs=1e-12)
        for body, (q, qd, qdd) in bodies.items():
            if body == "P":
                got = [res[f"points:P.{c}"][k] for c in ("x", "y")]
                gotd = [res[f"points:P.{c}"][k] for c in ("xd", "yd")]
                gotdd = [res[f"points:P.{c}"][k] for c in ("xdd", "ydd")]
            else:
                got = [res[f"q:{body}.{c}"][k] for c in ("x", "y", "phi")]
                gotd = [res[f"qd:{body}.{c}"][k] for c in ("x", "y", "phi")]
                gotdd = [res[f"qdd:{body}.{c}"][k] for c in ("x", "y", "phi")]
            np.testing.assert_allclose(got, q, atol=1.5e-3, err_msg=f"{body} q at t={t}")
            np.testing.assert_allclose(gotd, qd, atol=1.5e-3, err_msg=f"{body} qd at t={t}")
            np.testing.assert_allclose(gotdd, qdd, atol=1.5e-3, err_msg=f"{body} qdd t={t}")


def test_kap_fourbar_full_revolution_consistency(fourbar):
    """After one revolution (t = 1 s, omega = 6.2832) the state repeats that at t = 0
    (to the driver's rounding of 2 pi), and the constraints hold at every output."""
    res = run(fourbar, settings={"output_step": 1e-3})
    assert len(res.t) == 1001
    q0, q1 = res["q"][0], res["q"][-1]
    np.testing.assert_allclose(q1[[0, 1, 3, 4, 6, 7]], q0[[0, 1, 3, 4, 6, 7]], atol=1e-3)
    # every row met the Newton test |Phi| <= 1e-10 (1 + |q|) (observed 1.5e-10 at the
    # assembly, 1.6e-15 after); 100x it
    assert np.all(res["solver:phi_norm"] < 100 * 1e-10 * (1 + np.abs(res["q"]).max()))
    # velocities / accelerations are the time derivatives of positions / velocities
    # (fourth-order central differences, error ~ h^4 / 30 times the fifth derivative:
    # observed 2.6e-7 and 9.5e-6 of the largest entry; >= 200x)
    h = 1e-3
    q, qd, qdd = res["q"], res["qd"], res["qdd"]

    def d4(x):
        return (-x[4:] + 8 * x[3:-1] - 8 * x[1:-3] + x[:-4]) / (12 * h)
    np.testing.assert_allclose(d4(q), qd[2:-2], atol=1e-4 * np.abs(qd).max())
    np.testing.assert_allclose(d4(qd), qdd[2:-2], atol=2e-3 * np.abs(qdd).max())


SLIDER = {  # spec/planar.md §6.5 (computed reference; both models identical)
    0.0: {"crank": ([-86.623, 49.964, 5.760], [59.957, 103.948, -1.2], [124.737, -71.948, 0]),
          "rod": ([-467.194, 39.971, 0.201], [145.357, 83.158, 0.424],
                  [286.999, -57.559, -0.257]),
          "slider_x": (-663.159, 162.319, 312.015)},
    1.0: {"crank": ([15.180, 98.841, 4.560], None, None),
          "rod": ([-245.197, 79.073, 0.406], None, None),
          "slider_x": (-428.902, 221.537, -162.821)},
    2.0: {"crank": ([97.624, 21.668, 3.360], None, None),
          "rod": ([-103.622, 17.334, 0.087], None, None),
          "slider_x": (-302.870, 31.619, -175.547)},
}


def _slider_model2(path):
    """Model 2 of 004 §5.2.2: the translational joint replaced by absolute
    constraints on y and phi of the slider."""
    m = Model.from_file(path)
    data = m.to_dict()
    data["joints"] = [j for j in data["joints"] if j["type"] != "translational"]
    data["joints"] += [
        {"name": "slider_y", "type": "absolute", "body": "slider", "coordinate": "y",
         "value": 0.0},
        {"name": "slider_phi", "type": "absolute", "body": "slider", "coordinate": "phi",
         "value": 0.0}]
    return Model.from_dict(data)


@pytest.mark.parametrize("variant", ["translational", "absolute"])
def test_slider_crank_reference_values(examples, backend, variant):
    path = examples / "slider_crank.yaml"
    model = Model.from_file(path) if variant == "translational" else _slider_model2(path)
    res = run(model, kernels=backend)
    assert len(res.t) == 54
    for t, ref in SLIDER.items():
        k = int(np.argmin(abs(res.t - t)))
        for body in ("crank", "rod"):
            q, qd, qdd = ref[body]
            cols = [f"{body}.{c}" for c in ("x", "y", "phi")]
            np.testing.assert_allclose([res[f"q:{c}"][k] for c in cols], q, atol=1.5e-3)
            if qd is not None:
                np.testing.assert_allclose([res[f"qd:{c}"][k] for c in cols], qd, atol=1.5e-3)
                np.testing.assert_allclose([res[f"qdd:{c}"][k] for c in cols], qdd,
                                           atol=1.5e-3)
        x, xd, xdd = ref["slider_x"]
        assert res["q:slider.x"][k] == pytest.approx(x, abs=1.5e-3)
        assert res["qd:slider.x"][k] == pytest.approx(xd, abs=1.5e-3)
        assert res["qdd:slider.x"][k] == pytest.approx(xdd, abs=1.5e-3)
    # the slider stays on the x axis
    assert np.max(np.abs(res["q:slider.y"])) < 1e-9


def test_redundant_but_consistent_constraints_run_and_are_reported(fourbar):
    """The four-bar with the crank pin modelled twice (a duplicate revolute) has
    m = 11 > n = 9 equations of rank 9: the dependent rows are removed, named in an
    event, and the motion equals that of the plain model (spec §4.1)."""
    import copy
    m = copy.deepcopy(fourbar)
    m.add_joint("revolute", "O2_twin", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-1, 0))
    res = run(m)
    ref = run(fourbar)
    np.testing.assert_allclose(res["q"], ref["q"], atol=1e-10)
    np.testing.assert_allclose(res["qdd"], ref["qdd"], atol=1e-8)
    ev = [e for e in res.events if e.kind == "redundant"]
    assert len(ev) == 1 and ev[0].message.count("O2") == 2
    assert res.stats["redundant_equations"]


def test_conflicting_constraints_are_rejected_naming_them(fourbar):
    import copy
    from mbcore import AssemblyError
    m = copy.deepcopy(fourbar)
    # a second crank pin at a different place: dependent in form, conflicting in value
    m.add_joint("revolute", "O2_bad", body_i="ground", body_j="crank", point_i=(0, 0.3),
                point_j=(-1, 0))
    with pytest.raises(AssemblyError, match="(conflicting|largest residuals).*O2"):
        run(m)


@pytest.mark.skipif(not __import__("mbcore.system").system.compiled_available(),
                    reason="compiled kernels not built")
def test_point_kinematics_compiled_equals_reference(fourbar):
    a, b = fourbar.compile(kernels="compiled"), fourbar.compile(kernels="numpy")
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, qd, qdd = (rng.normal(scale=3, size=9) for _ in range(3))
        np.testing.assert_allclose(a.point_kinematics(q, qd, qdd),
                                   b.point_kinematics(q, qd, qdd), rtol=1e-13, atol=1e-13)
