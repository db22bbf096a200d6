"""Andrews' squeezer mechanism (examples/andrews_squeezer.yaml; Hairer & Wanner II
§VII.7, problem "andrews" of the Bari/CWI Test Set for IVP Solvers) against the test
set's published data: the consistent initial values at t = 0 and the reference
solution at t = 0.03 (PSIDE, tolerances 1e-14). Data as carried in the public
repository rforge/bvpsolve, pkg/deTestSet/src/Ex_andrews.f (andfunc, andsoln).

The test set writes the mechanism in seven angles (beta, theta, gamma, phi, delta,
omega, epsilon), body frames at the joints; the model has Cartesian centroid frames
whose angles are the absolute angles of the test set's body lines (file header).

Measured (dop853, rtol 1e-10): the angles at t = 0.03 agree with the reference to
1.4e-9 (beta, theta; the others to 2e-11), velocities to 4e-10, accelerations to
1.0e-7 and multipliers to 7.4e-8 of their largest entry. These residuals are the
reference's own error: an independent integration of the test set's own equations
(angles, SciPy DOP853 at rtol 1e-13) lands on the same numbers (mbcore agrees with it
to 2e-12 in the angles). The t = 0 accelerations and multipliers agree to 1e-14.
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model

from conftest import EXAMPLES

FILE = EXAMPLES / "andrews_squeezer.yaml"

# --- test-set data (andrews.F: andfunc, INITIAL / ex_andrews.R, andsoln) -----------
m1, m2, m3, m4, m5, m6, m7 = .04325, .00365, .02373, .00706, .07050, .00706, .05498
i1, i2, i3, i4, i5, i6, i7 = 2.194e-6, 4.410e-7, 5.255e-6, 5.667e-7, 1.169e-5, 5.667e-7, 1.912e-5
xa, ya, xb, yb, xc, yc = -.06934, -.00227, -.03635, .03273, .014, .072
d, da, e, ea, rr, ra = 28e-3, 115e-4, 2e-2, 1421e-5, 7e-3, 92e-5
ss, sa, sb, sc, sd = 35e-3, 1874e-5, 1043e-5, 18e-3, 2e-2
ta, tb, u, ua, ub = 2308e-5, 916e-5, 4e-2, 1228e-5, 449e-5
zf, zt, fa, mom, c0, l0 = 2e-2, 4e-2, 1421e-5, 33e-3, 4530.0, 7785e-5

#: consistent initial angles (beta, theta, gamma, phi, delta, omega, epsilon), rest
ANGLES0 = np.array([-0.0617138900142764496358948458001, 0.0,
                    0.455279819163070380255912382449, 0.222668390165885884674473185609,
                    0.487364979543842550225598953530, -0.222668390165885884674473185609,
                    1.23054744454982119249735015568])
#: consistent initial accelerations and multipliers
ACC0 = np.array([14222.4439199541138705911625887, -10666.8329399655854029433719415,
                 0, 0, 0, 0, 0])
LAM0 = np.array([98.5668703962410896057654982170, -6.12268834425566265503114393122,
                 0, 0, 0, 0])
#: reference solution at t = 0.03: angles, velocities, accelerations, multipliers
REF = np.array([
    0.1581077119629904e+2, -0.1575637105984298e+2, 0.4082224013073101e-1,
    -0.5347301163226948e+0, 0.5244099658805304e+0, 0.5347301163226948e+0,
    0.1048080741042263e+1,
    0.1139920302151208e+4, -0.1424379294994111e+4, 0.1103291221937134e+2,
    0.1929337464421385e+2, 0.5735699284790808e+0, -0.1929337464421385e+2,
    0.3231791658026955e+0,
    -0.2463176316945196e+5, 0.5185037701610329e+5, 0.3241025686413781e+6,
    0.5667493645176213e+6, 0.1674362929479361e+5, -0.5667493645176222e+6,
    0.9826520791458422e+4,
    0.1991753333731910e+3, -0.2975531228015052e+2, 0.2306654119098399e+2,
    0.3145271365475927e+2, 0.2264249232082739e+2, 0.1161740700019673e+2])
REF_Q, REF_QD, REF_QDD, REF_LAM = REF[:7], REF[7:14], REF[14:21], REF[21:]

BODIES = [f"body{k}" for k in range(1, 8)]
#: the joints at E whose multipliers are the test set's lam1..lam6 (force of body 2
#: on bodies 3, 4, 6: body_i = 3, 4, 6, body_j = 2)
LOOP_ROWS = [f"{j}.{c}" for j in ("E3", "E4", "E6") for c in "xy"]


def ts_angles(p):
    """(beta, theta, gamma, phi, delta, omega, epsilon) from the absolute body angles
    (or their rates): the definitions of the model file's header."""
    p = np.asarray(p, dtype=float)
    return np.array([p[0], p[1] - p[0], p[2], p[3] - p[4], p[4], p[5] - p[6], p[6]])


def body_angles(a):
    be, th, ga, ph, de, om, ep = a
    return np.array([be, be + th, ga, ph + de, de, om + ep, ep])


def centroids(a):
    """Centroids from the test set's geometry (Hairer-Wanner Eqs 7.1-7.3) and the
    centroid offsets given by its mass matrix (file header)."""
    be, th, ga, ph, de, om, ep = a

    def u1(x):
        return np.array([np.cos(x), np.sin(x)])

    def u2(x):                      # (sin x, -cos x), the test set's 'down' direction
        return np.array([np.sin(x), -np.cos(x)])
    A, B = np.array([xa, ya]), np.array([xb, yb])
    F = rr * u1(be)                 # each body placed along its own chain from the
    G = A + zt * u1(de)             # ground (the test set's tree), so that the
    H = A + u * u2(ep)              # loops need not be closed
    return np.array([ra * u1(be), F - da * u1(be + th),
                     B + sb * u1(ga) + sa * u2(ga),
                     G + (e - ea) * u2(ph + de),
                     A + ta * u1(de) - tb * u2(de),
                     H + (zf - fa) * u1(om + ep),
                     A + ub * u1(ep) + ua * u2(ep)])


def ts_mass_matrix(a):
    """M(q) of the test set (andfunc)."""
    siph, siom = np.sin(a[3]), np.sin(a[5])
    M = np.zeros((7, 7))
    M[0, 0] = m1 * ra**2 + m2 * (rr**2 - 2 * da * rr * np.cos(a[1]) + da**2) + i1 + i2
    M[1, 0] = m2 * (da**2 - da * rr * np.cos(a[1])) + i2
    M[1, 1] = m2 * da**2 + i2
    M[2, 2] = m3 * (sa**2 + sb**2) + i3
    M[3, 3] = m4 * (e - ea)**2 + i4
    M[4, 3] = m4 * ((e - ea)**2 + zt * (e - ea) * siph) + i4
    M[4, 4] = (m4 * (zt**2 + 2 * zt * (e - ea) * siph + (e - ea)**2)
               + m5 * (ta**2 + tb**2) + i4 + i5)
    M[5, 5] = m6 * (zf - fa)**2 + i6
    M[6, 5] = m6 * ((zf - fa)**2 - u * (zf - fa) * siom) + i6
    M[6, 6] = (m6 * ((zf - fa)**2 - 2 * u * (zf - fa) * siom + u**2)
               + m7 * (ua**2 + ub**2) + i6 + i7)
    return np.tril(M) + np.tril(M, -1).T


def phis(res, key="q", row=-1):
    return np.array([res[f"{key}/{b}.phi"][row] for b in BODIES])


def loop_lam(res, row=-1):
    return np.array([res[f"lam/{r}"][row] for r in LOOP_ROWS])


@pytest.fixture(scope="module", params=["di", "cs"])
def run(request):
    """The file's run (dop853, rtol 1e-10, atol 1e-12, t_end 0.03) in one Cartesian
    formulation."""
    m = Model.from_file(FILE)
    assert m.settings["t_end"] == 0.03 and m.settings["rtol"] <= 1e-10
    return mbcore.run(m, settings={"formulation": request.param})


# --- (a) the model ------------------------------------------------------------------

def test_model_loads_and_its_initial_state_is_consistent():
    m = Model.from_file(FILE)
    assert [b.name for b in m.bodies] == BODIES
    assert m.settings["analysis"] == "dynamic"
    s = m.compile()
    assert (s.n, s.m) == (21, 20)                            # 1 degree of freedom
    st = s.initial_state()
    assert np.max(np.abs(s.phi(st.q, 0.0))) < 1e-12
    assert not np.any(st.qd)                                   # released from rest
    q = st.q.reshape(7, 3)
    # the file's coordinates are the test set's consistent initial angles (to their
    # 17 digits and one subtraction in ts_angles: ~1 ulp of 0.7 = 1.1e-16; observed
    # 2.8e-17) ...
    np.testing.assert_allclose(ts_angles(q[:, 2]), ANGLES0, rtol=0, atol=1e-14)
    # ... and the centroids of its geometry
    np.testing.assert_allclose(q[:, :2], centroids(ANGLES0), rtol=0, atol=1e-15)
    # spring D-C and drive torque as in the test set
    data = yaml.safe_load(FILE.read_text())
    assert data.get("gravity") in (None, [0, 0])
    f = {x["name"]: x for x in data["forces"]}
    assert f["spring"]["stiffness"] == c0 and f["spring"]["free_length"] == l0
    assert f["mom"]["torque"] == mom and f["mom"]["body"] == "body1"
    pts = {p["name"]: p for p in data["points"]}
    D = q[2, :2] + np.array([[np.cos(q[2, 2]), -np.sin(q[2, 2])],
                             [np.sin(q[2, 2]), np.cos(q[2, 2])]]) @ pts["D"]["at"]
    ga = ANGLES0[2]
    np.testing.assert_allclose(D, [sd * np.cos(ga) + sc * np.sin(ga) + xb,
                                   sd * np.sin(ga) - sc * np.cos(ga) + yb], atol=1e-15)
    assert pts["C"]["at"] == [xc, yc] and pts["C"]["body"] == "ground"


def test_mass_matrix_is_the_test_sets():
    """The Cartesian kinetic energy at a random state of the mechanism equals
    1/2 v^T M(q) v of the test set (the centroid offsets of bodies 2, 4, 6 and the
    pivot distances of 1, 3, 5, 7): velocities by complex-step differentiation of
    the centroid positions."""
    s = Model.from_file(FILE).compile()
    rng = np.random.default_rng(7)
    for _ in range(3):
        a = ANGLES0 + rng.normal(scale=0.5, size=7)
        v = rng.normal(scale=50.0, size=7)
        h = 1e-30
        rd = centroids(a + 1j * h * v).imag / h
        qd = np.column_stack([rd, body_angles(v)]).ravel()
        q = np.column_stack([centroids(a), body_angles(a)]).ravel()
        T = s.kinetic_energy(qd, q)
        np.testing.assert_allclose(T, 0.5 * v @ ts_mass_matrix(a) @ v, rtol=1e-13)


# --- (b) the published solution -----------------------------------------------------

def test_consistent_initial_accelerations_and_multipliers(run):
    """t = 0: the test set's consistent beta'', theta'' and lam1..lam6 (rounding of
    one acceleration solve: eps cond(KKT) = 1.1e-12 of the largest entry with the
    equilibrated condition number 4.9e3; observed 1.4e-14 and 1.6e-15)."""
    np.testing.assert_allclose(ts_angles(phis(run, "qdd", 0)), ACC0,
                               rtol=0, atol=1e-11 * ACC0.max())
    np.testing.assert_allclose(loop_lam(run, 0), LAM0, rtol=0, atol=1e-11 * LAM0.max())


def test_reference_solution_at_t_0_03(run):
    assert run["t"][-1] == pytest.approx(0.03, abs=1e-15)
    assert run.stats["formulation"] in ("di", "cs")
    ang = ts_angles(phis(run))
    # The reference's own error dominates (module docstring): measured 1.43e-9 rad
    # (angles), 3.8e-10, 1.0e-7 and 7.4e-8 of the largest entry (velocities,
    # accelerations, multipliers), the same under every BLAS kernel; the tolerances
    # are >= 100x these.  A 1e-4 relative change of the spring moves q by 9e-4.
    np.testing.assert_allclose(ang, REF_Q, rtol=0, atol=2e-7)
    np.testing.assert_allclose(ts_angles(phis(run, "qd")), REF_QD, rtol=0,
                               atol=5e-8 * np.abs(REF_QD).max())
    np.testing.assert_allclose(ts_angles(phis(run, "qdd")), REF_QDD, rtol=0,
                               atol=2e-5 * np.abs(REF_QDD).max())
    np.testing.assert_allclose(loop_lam(run), REF_LAM, rtol=0,
                               atol=1e-5 * np.abs(REF_LAM).max())
    assert run["violation/position"].max() < 1e-10


# --- (c) joint coordinates ----------------------------------------------------------

def test_joint_coordinates_agree_with_di():
    """Three loops closed through cut joints (Baumgarte on the cut rows): the same
    Cartesian motion as DI (measured 2.8e-9, at rtol 1e-11 with dop853; 4e-11 with
    dopri5) and the same multipliers and reactions (measured 8e-10 relative)."""
    m = Model.from_file(FILE)
    st = {"rtol": 1e-11, "atol": 1e-12}
    a = mbcore.run(m, settings={**st, "formulation": "di"})
    b = mbcore.run(m, settings={**st, "formulation": "joint_coordinates"})
    assert b.stats["formulation"] == "joint_coordinates"
    np.testing.assert_allclose(b["t"], a["t"])
    # Each run carries its global error (dop853 at rtol 1e-11, ~290 steps: up to
    # nsteps (rtol |q| + atol) = 5e-8); observed JC - DI 3.7e-9 and JC - reference
    # 6.0e-9 (native and Sandybridge BLAS kernels): 1e-6 is >= 100x both.  A 1e-4
    # relative change of the spring alone moves q by 9e-4.
    np.testing.assert_allclose(b["q"], a["q"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(b["lam"][-1], a["lam"][-1], rtol=0,
                               atol=1e-6 * np.abs(a["lam"][-1]).max())
    np.testing.assert_allclose(b["reactions"][-1], a["reactions"][-1], rtol=0,
                               atol=1e-6 * np.abs(a["reactions"][-1]).max())
    # the cut joints close to the integration error of the positions (rtol |q|, |q|
    # <= 16: 1.6e-10); observed 2.5e-12
    assert b["violation/position"].max() < 1e-9
    # and through DI, the published angles
    np.testing.assert_allclose(ts_angles(phis(b)), REF_Q, rtol=0, atol=1e-6)
