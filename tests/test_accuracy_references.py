"""The reference solutions of benchmarks/accuracy_problems.py checked independently of
the code under test: closed forms against SciPy quadratures of Euler's equations
written in the benchmark (not mbcore's), invariants (energy, angular momentum), and
the tight-run references of the IFToMM problems against a second formulation.  Each
check is shown to fail on a deliberately wrong reference."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import accuracy_problems as ap

QUAD = {"method": "DOP853", "rtol": 1e-12, "atol": 1e-14}


def _about_pivot(J, m, X):
    J = np.diag(J) if np.ndim(J) == 1 else np.asarray(J)
    return J + m * (X @ X * np.eye(3) - np.outer(X, X))


def _quadrature(J_O, m, X, g, p0, w0, t):
    f = ap.rigid_rotation_ode(J_O, m, X, g)
    sol = solve_ivp(f, (0.0, float(t[-1])), np.r_[p0, w0], t_eval=t, **QUAD)
    return sol.y[:4].T, sol.y[4:].T


# ------------------------------------------------------------------ heavy top
def _heavy_top_invariants(P, W, J_O):
    """T + V and the vertical angular momentum about the pivot, per output row."""
    E, Hz = [], []
    for p, w in zip(P, W, strict=True):
        A = ap.rot(p / np.linalg.norm(p))
        E.append(0.5 * w @ J_O @ w + ap.HT_M * ap.G * (A @ ap.HT_X)[2])
        Hz.append((A @ J_O @ w)[2])
    return np.array(E), np.array(Hz)


def test_heavy_top_reference_conserves_energy_and_vertical_momentum():
    t = np.linspace(0.0, 1.0, 101)
    ref = ap.heavy_top_quadrature(t)
    J_O = _about_pivot(ap.HT_J, ap.HT_M, ap.HT_X)
    E, Hz = _heavy_top_invariants(ref["_p"], ref["omega"], J_O)
    # DOP853 at rtol 1e-13 over 1 s: observed |dE|/E ~ 1e-13, |dHz| ~ 1e-13; bound 1e-10
    assert np.max(np.abs(E - E[0])) < 1e-10 * abs(E[0])
    assert np.max(np.abs(Hz - Hz[0])) < 1e-10 * np.max(np.abs(J_O @ ap.HT_W0))
    # the centre of mass stays 1 m from the pivot (the quaternion is normalised before
    # use: rounding only, observed 6.7e-16; bound 1e-12, >1000x)
    np.testing.assert_allclose(np.linalg.norm(ref["com"], axis=1), 1.0, atol=1e-12)
    # a reference integrated with the centroidal inertia (no parallel-axis term) is
    # a different motion: its invariants with the true J_O drift by O(1)
    P, W = _quadrature(np.diag(ap.HT_J), ap.HT_M, ap.HT_X, np.array([0, 0, -ap.G]),
                       np.r_[1.0, 0, 0, 0], ap.HT_W0, t)
    E_bad, _ = _heavy_top_invariants(P, W, J_O)
    assert np.max(np.abs(E_bad - E_bad[0])) > 1e3 * 1e-10 * abs(E_bad[0])


def test_heavy_top_reference_is_converged():
    """rtol 1e-13 against 1e-11: the reference's own error is far below the
    tightest tolerance of the table (1e-10 rtol * 1 m)."""
    t = np.linspace(0.0, 1.0, 11)
    a = ap.heavy_top_quadrature(t, rtol=1e-13)["com"]
    b = ap.heavy_top_quadrature(t, rtol=1e-11)["com"]
    assert np.max(np.abs(a - b)) < 1e-9        # observed ~1e-11


def test_heavy_top_model_matches_the_published_data():
    m = ap.heavy_top_model()
    d = m.to_dict()
    body = d["bodies"][0]
    assert body["mass"] == 15.0
    np.testing.assert_allclose(np.diag(body["inertia"]), [0.234375, 0.46875, 0.234375])
    # A(0) = I: global and body angular velocities coincide
    np.testing.assert_allclose(body["orientation"]["euler_parameters"], [1, 0, 0, 0])
    np.testing.assert_allclose(body["angular_velocity"], [0, 150, -4.61538])
    np.testing.assert_allclose(body["position"], [0, 1, 0])
    np.testing.assert_allclose(d["gravity"], [0, 0, -9.81])


# ------------------------------------------------------------------ steady precession
def _steady_top_quadrature(Omega, t):
    th = ap.ST_TH
    p0 = ap.quat_axis_angle([1, 0, 0], th)
    X = np.array([0.0, 0.0, ap.ST_L])
    J_O = _about_pivot([ap.ST_J1, ap.ST_J1, ap.ST_J3], ap.ST_M, X)
    w0 = np.array([0.0, Omega * np.sin(th), ap.ST_W3])
    P, W = _quadrature(J_O, ap.ST_M, X, np.array([0, 0, -ap.G]), p0, w0, t)
    com = np.array([ap.rot(p / np.linalg.norm(p)) @ X for p in P])
    return com, W


def test_steady_precession_closed_form_against_quadrature():
    t = np.linspace(0.0, 2.0, 21)
    W = ap.steady_precession_rate()
    assert W == pytest.approx(0.4915462, abs=1e-7)      # the example file's value
    com, Wb = _steady_top_quadrature(W, t)
    ref = ap.steady_top_reference(t)
    # quadrature error (rtol 1e-12 over 400 spin radians): observed ~1e-12 m;
    # bound 1e-9 m (1e-8 of the 0.05 m arm)
    np.testing.assert_allclose(com, ref["com"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(Wb[:, 2], ap.ST_W3, rtol=1e-10)
    # a precession rate off by 1e-4 relative is not steady: the axis nutates
    # (amplitude ~ (dOmega J3 w3)/(m g l) ...) far beyond the bound
    com_bad, _ = _steady_top_quadrature(W * (1 + 1e-4), t)
    assert np.max(np.abs(com_bad - ap.steady_top_reference(t, W * (1 + 1e-4))["com"])) > 1e-8


# ------------------------------------------------------------------ torque-free body
def _free_quadrature(J, w0, t):
    f = ap.rigid_rotation_ode(np.diag(J), 1.0, np.zeros(3), np.zeros(3))
    sol = solve_ivp(f, (0.0, float(t[-1])), np.r_[1.0, 0, 0, 0, w0], t_eval=t, **QUAD)
    return sol.y[4:].T


def test_torque_free_elliptic_solution_against_quadrature_and_invariants():
    t = np.linspace(0.0, 10.0, 201)
    ref = ap.torque_free_reference(t)["omega"]
    # at t = 0 the elliptic functions are exact (sn 0 = 0, cn 0 = dn 0 = 1): observed 0;
    # the bound allows a few roundings of |w0| <= 2 (eps |w0| = 4.4e-16): 1e-13 is
    # >200x that
    np.testing.assert_allclose(ref[0], ap.TF_W0, atol=1e-13)
    W = _free_quadrature(ap.TF_J, ap.TF_W0, t)
    # quadrature error over 10 s at rtol 1e-12: observed ~1e-13 rad/s; bound 1e-9
    np.testing.assert_allclose(ref, W, rtol=0, atol=1e-9)
    T = 0.5 * np.einsum("ni,i,ni->n", ref, ap.TF_J, ref)
    M2 = np.einsum("ni->n", (ref * ap.TF_J) ** 2)
    # invariants of a closed form: rounding only (observed 1.9e-14 relative over 201
    # points of ellipj); bound 1e-11, >500x
    np.testing.assert_allclose(T, T[0], rtol=1e-11)
    np.testing.assert_allclose(M2, M2[0], rtol=1e-11)
    # the same formulas with I1 and I3 exchanged in the modulus are wrong: caught
    I1, I2, I3 = ap.TF_J
    bad = ap.torque_free_reference(t, J=np.array([I1, I2 * 1.01, I3]))["omega"]
    assert np.max(np.abs(bad - W)) > 1e-3


# ------------------------------------------------------------------ conical rod
def _conical_quadrature(Omega, t):
    p0 = ap.quat_axis_angle([0, 1, 0], np.pi - ap.CR_AL)
    X = np.array([0.0, 0.0, 0.5 * ap.CR_L])
    J_O = _about_pivot([ap.CR_JT, ap.CR_JT, ap.CR_JA], ap.CR_M, X)
    w0 = ap.rot(p0).T @ np.array([0.0, 0.0, Omega])
    P, _ = _quadrature(J_O, ap.CR_M, X, np.array([0, 0, -ap.G]), p0, w0, t)
    return np.array([ap.rot(p / np.linalg.norm(p)) @ X for p in P])


def test_conical_rod_closed_form_against_quadrature():
    t = np.linspace(0.0, 2.0, 21)
    W = ap.conical_rate()
    com = _conical_quadrature(W, t)
    # observed ~1e-13 m; bound 1e-9 m
    np.testing.assert_allclose(com, ap.conical_rod_reference(t)["com"], rtol=0, atol=1e-9)
    # the point-mass rate sqrt(g / (L cos a)) at the centroid is wrong for a rod
    W_pm = np.sqrt(ap.G / (0.5 * ap.CR_L * np.cos(ap.CR_AL)))
    com_bad = _conical_quadrature(W_pm, t)
    assert np.max(np.abs(com_bad - ap.conical_rod_reference(t, W_pm)["com"])) > 1e-3


# ------------------------------------------------------------------ Cardan shaft
def test_cardan_closed_form_speed_ratio():
    """d phi_out / d phi_in = cos b / (1 - sin² b cos² phi_in) (Hooke's joint), and
    the shafts are in step at quarter turns."""
    t = np.linspace(0.0, 1.0, 100001)
    phi = ap.cardan_reference(t)["phi_out"][:, 0]
    rate = np.gradient(phi, t) / ap.CD_W
    b, ph = ap.CD_BETA, ap.CD_W * t
    expected = np.cos(b) / (1 - np.sin(b) ** 2 * np.cos(ph) ** 2)
    # central differences, h = 1e-5 s: error ~ h² phi''' ~ 1e-8; bound 1e-6
    np.testing.assert_allclose(rate[1:-1], expected[1:-1], atol=1e-6)
    q = ap.cardan_reference(np.array([0.25, 0.5, 1.0]))["phi_out"][:, 0]
    # the closed form at quarter turns: arctan and the unwrapping round to a few eps
    # of 2 pi (eps 2 pi = 1.4e-15; observed 0); bound 1e-12, >700x one rounding
    np.testing.assert_allclose(q, [np.pi / 2, np.pi, 2 * np.pi], atol=1e-12)


# ------------------------------------------------------------------ tight references
def test_bricard_reference_cross_checked_and_conserves_energy():
    import mbcore
    p = ap.bricard
    t = np.linspace(0.0, p.t_end, round(p.t_end / p.output_step) + 1)
    a = p.reference(t)["P3"]
    b = p.reference_check(t)["P3"]
    # two formulations at rtol 1e-12 agree: observed ~1e-11 m; bound 1e-8 m
    assert np.max(np.abs(a - b)) < 1e-8
    # the published initial position, reproduced by assembly to its tolerance 1e-12 m
    # (observed 0); bound 1e-10 m
    np.testing.assert_allclose(a[0], [1.0, -1.0, 0.0], atol=1e-10)
    assert np.ptp(a[:, 1]) > 0.1                 # it moves (1 degree of freedom)
    res = mbcore.run(p.build(), analysis="dynamic",
                     settings={"t_end": p.t_end, "output_step": p.output_step,
                               "formulation": "di", "integrator": "dop853",
                               "rtol": 1e-12, "atol": 1e-14})
    e = res["energy"][:, res.labels("energy").index("total")]
    # T + V over 2 s at rtol 1e-12: observed ~1e-11 J (mgh ~ 10 J); bound 1e-8 J
    assert np.max(np.abs(e - e[0])) < 1e-8


def test_governor_reference_cross_checked():
    p = ap.governor
    t = np.linspace(0.0, p.t_end, round(p.t_end / p.output_step) + 1)
    a, b = p.reference(t), p.reference_check(t)
    # di and joint_coordinates at rtol 1e-12: observed 2.5e-13 m (s), 2.3e-12 m
    # (balls); bound 1e-9 m
    for g in a:
        assert np.max(np.abs(a[g] - b[g])) < 1e-9, g
    # the initial slider position, reproduced by assembly to its tolerance 1e-12 m
    # (observed 0); bound 1e-10 m
    np.testing.assert_allclose(a["s"][0], 0.5, atol=1e-10)
    assert np.ptp(a["s"]) > 0.01                 # the slider moves
