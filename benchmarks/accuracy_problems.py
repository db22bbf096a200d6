"""Spatial test problems with reference solutions for ``benchmarks/accuracy3d.py``.

Every problem builds an :class:`mbcore.Model` (``build()``), states its time span and
output step, extracts the compared quantities from a result (``measure(res)``: a dict
``group -> array (n_out, k)``) and gives the reference at the output times
(``reference(t)``), built independently of mbcore where possible:

* ``heavy_top`` — Brüls & Cardona (2010), closed-form free of mbcore: a SciPy DOP853
  quadrature (rtol 1e-13) of Euler's equations about the fixed point and the
  quaternion kinematics written here;
* ``steady_top`` — symmetric top on its exact steady precession (Goldstein, Poole &
  Safko, *Classical Mechanics*, 3rd ed., §5.7): closed form;
* ``torque_free`` — asymmetric free body, Jacobi elliptic functions (Landau & Lifshitz,
  *Mechanics*, 3rd ed., §37): closed form;
* ``conical_rod`` — a uniform rod on a spherical joint in steady conical motion: closed
  form (torque balance of a body turning uniformly about the vertical);
* ``cardan`` — Cardan (Hooke) shaft, input at constant speed through a rotation
  driver, dynamic analysis: closed-form kinematic relation
  tan(phi_out) = tan(phi_in)/cos(beta) (e.g. Shigley & Uicker, *Theory of Machines and
  Mechanisms*, §10 "Hooke's joint");
* ``bricard`` (IFToMM A04) and ``governor`` (IFToMM A05): no closed form; the
  reference is a tight mbcore run (di, dop853, rtol 1e-12) cross-checked against a
  second formulation (``reference_check``) and against energy conservation (A04).

IFToMM multibody benchmark library: M. González, D. Dopico, U. Lugrís, J. Cuadrado,
"A benchmarking system for MBS simulation software: problem standardization and
performance measurement", Multibody System Dynamics 16 (2006) 179–190;
problems A04 and A05 at https://www.iftomm-multibody.org/benchmark/.  The library's
rods are slender (zero axial inertia), which mbcore refuses today; here every rod has
the square cross-section of the open OpenSim implementation of those problems
(Tagliapietra et al., "MBS benchmarks in OpenSim", 2015: 0.1 m for A04, 0.01 m for
A05), which gives a small, positive axial inertia m a²/6, and A05's 5 kg balls are
merged into their rods (a weld).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import ellipj

import mbcore
from mbcore import Model

G = 9.81


# ------------------------------------------------------------------ rotations (own code)
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of Euler parameters ``[e0, e1, e2, e3]`` (scalar first)."""
    a0, av = a[0], a[1:]
    b0, bv = b[0], b[1:]
    return np.r_[a0 * b0 - av @ bv, a0 * bv + b0 * av + np.cross(av, bv)]


def quat_axis_angle(axis, angle: float) -> np.ndarray:
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[np.cos(angle / 2), np.sin(angle / 2) * axis]


def rot(p: np.ndarray) -> np.ndarray:
    """Rotation matrix A(p) of Euler parameters p (Nikravesh (1988), Eq. 6.19)."""
    e0, e1, e2, e3 = p
    return 2.0 * np.array([
        [e0 * e0 + e1 * e1 - 0.5, e1 * e2 - e0 * e3, e1 * e3 + e0 * e2],
        [e1 * e2 + e0 * e3, e0 * e0 + e2 * e2 - 0.5, e2 * e3 - e0 * e1],
        [e1 * e3 - e0 * e2, e2 * e3 + e0 * e1, e0 * e0 + e3 * e3 - 0.5]])


def body_omega(p: np.ndarray, pd: np.ndarray) -> np.ndarray:
    """omega' = 2 L(p) pdot (body components), rows of an (n, 4) array each."""
    p0, p1, p2, p3 = p.T
    L = np.array([[-p1, p0, p3, -p2], [-p2, -p3, p0, p1], [-p3, p2, -p1, p0]])  # 3,4,n
    return 2.0 * np.einsum("ijn,nj->ni", L, pd)


def _quat_of(res, body: str) -> np.ndarray:
    return np.column_stack([res[f"{body}.p{k}"] for k in range(4)])


def _quatd_of(res, body: str) -> np.ndarray:
    return np.column_stack([res[f"qd/{body}.p{k}"] for k in range(4)])


def _pos_of(res, body: str) -> np.ndarray:
    return np.column_stack([res[f"{body}.{c}"] for c in "xyz"])


def _point_of(res, body: str, local) -> np.ndarray:
    r, p = _pos_of(res, body), _quat_of(res, body)
    return np.array([ri + rot(pi) @ np.asarray(local, float) for ri, pi in
                     zip(r, p, strict=True)])


def rigid_rotation_ode(J_O: np.ndarray, m: float, X: np.ndarray, g: np.ndarray):
    """Right-hand side of a rigid body turning about a fixed point: y = [p (4), w' (3)];
    J_O w'dot = -w' x J_O w' + X x (m A^T g) (Euler's equations about the fixed point),
    pdot = 1/2 p (x) (0, w').  Written here, independent of mbcore."""
    Jinv = np.linalg.inv(J_O)

    def f(t, y):
        p, w = y[:4], y[4:]
        A = rot(p / np.linalg.norm(p))
        tau = np.cross(X, m * (A.T @ g))
        wd = Jinv @ (tau - np.cross(w, J_O @ w))
        pd = 0.5 * quat_mul(p, np.r_[0.0, w])
        return np.r_[pd, wd]
    return f


# ------------------------------------------------------------------ problem container
@dataclass
class Problem:
    name: str
    title: str
    source: str
    t_end: float
    output_step: float
    build: Callable[[], Model]
    measure: Callable[[object], dict]
    reference: Callable[[np.ndarray], dict]
    units: dict = field(default_factory=dict)
    #: number of degrees of freedom (for the table)
    dof: int = 0
    #: a second, independent reference for cross-checks (tight runs)
    reference_check: Callable[[np.ndarray], dict] | None = None


# ------------------------------------------------------------------ heavy top (Brüls)
HT_M = 15.0
HT_J = np.array([0.234375, 0.46875, 0.234375])
HT_X = np.array([0.0, 1.0, 0.0])
HT_W0 = np.array([0.0, 150.0, -4.61538])


def heavy_top_model() -> Model:
    """Heavy top of Brüls & Cardona, J. Comput. Nonlinear Dynam. 5 (2010) 031002, §5.2:
    m = 15 kg, J' = diag(0.234375, 0.46875, 0.234375) kg m² about the centre of mass,
    centre of mass X = (0, 1, 0) m from the fixed point in body axes, A(0) = I,
    omega'(0) = (0, 150, -4.61538) rad/s, gravity 9.81 m/s² along -z."""
    m = Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G)
    v0 = np.cross(HT_W0, HT_X)                      # A(0) = I: global = body
    m.add_body("top", mass=HT_M, inertia=HT_J.tolist(), position=HT_X.tolist(),
               velocity=v0.tolist(), angular_velocity_body=HT_W0.tolist())
    m.add_joint("spherical", "pivot", body_i="ground", body_j="top",
                point_i=[0.0, 0.0, 0.0], point_j=(-HT_X).tolist())
    return m


_quad_cache: dict = {}


def heavy_top_quadrature(t: np.ndarray, rtol: float = 1e-13) -> dict:
    """The heavy top's reference at the times ``t`` (cached per times and rtol)."""
    key = (np.asarray(t, float).tobytes(), rtol)
    if key not in _quad_cache:
        _quad_cache[key] = _heavy_top_quadrature(np.asarray(t, float), rtol)
    return _quad_cache[key]


def _heavy_top_quadrature(t: np.ndarray, rtol: float) -> dict:
    J_O = np.diag(HT_J) + HT_M * (HT_X @ HT_X * np.eye(3) - np.outer(HT_X, HT_X))
    f = rigid_rotation_ode(J_O, HT_M, HT_X, np.array([0.0, 0.0, -G]))
    sol = solve_ivp(f, (0.0, float(t[-1])), np.r_[1.0, 0, 0, 0, HT_W0], method="DOP853",
                    rtol=rtol, atol=rtol * 1e-2, t_eval=t, dense_output=False)
    P = sol.y[:4].T
    com = np.array([rot(p / np.linalg.norm(p)) @ HT_X for p in P])
    return {"com": com, "omega": sol.y[4:].T, "_p": P}


heavy_top = Problem(
    name="heavy_top", title="heavy top (Brüls & Cardona 2010)",
    source="Brüls & Cardona, J. Comput. Nonlinear Dynam. 5 (2010); reference: DOP853 "
           "rtol 1e-13 quadrature of Euler's equations (independent of mbcore)",
    t_end=1.0, output_step=0.01, build=heavy_top_model, dof=3,
    measure=lambda r: {"com": _pos_of(r, "top"),
                       "omega": body_omega(_quat_of(r, "top"), _quatd_of(r, "top"))},
    reference=lambda t: {k: v for k, v in heavy_top_quadrature(t).items()
                         if not k.startswith("_")},
    units={"com": "m", "omega": "rad/s"})


# ------------------------------------------------------------------ steady precession
ST_M, ST_L, ST_TH, ST_W3 = 1.0, 0.05, np.radians(30.0), 200.0
ST_J1, ST_J3 = 0.0025, 0.005          # thin disc of radius 0.1 m about its centroid


def steady_precession_rate(m=ST_M, l=ST_L, th=ST_TH, w3=ST_W3, J1=ST_J1, J3=ST_J3,
                           g=G) -> float:
    """Slow root of m g l = Omega J3 w3 - Omega² (J1 + m l²) cos(th) (Goldstein §5.7,
    steady precession with theta' = 0; J1 + m l² the transverse moment about the tip)."""
    a = (J1 + m * l * l) * np.cos(th)
    b = J3 * w3
    return (b - np.sqrt(b * b - 4.0 * a * m * g * l)) / (2.0 * a)


def steady_top_model(Omega: float | None = None) -> Model:
    """A thin disc (m = 1 kg, J' = diag(0.0025, 0.0025, 0.005)) on a fixed tip 0.05 m
    below its centroid, axis 30° from the vertical, spin w3 = 200 rad/s, started on the
    steady precession ``Omega`` (default: the exact root)."""
    W = steady_precession_rate() if Omega is None else Omega
    p0 = quat_axis_angle([1, 0, 0], ST_TH)
    axis = rot(p0) @ np.array([0.0, 0.0, 1.0])
    r0 = ST_L * axis
    m = Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G)
    m.add_body("disc", mass=ST_M, inertia=[ST_J1, ST_J1, ST_J3], position=r0.tolist(),
               orientation=p0.tolist(),
               velocity=np.cross([0.0, 0.0, W], r0).tolist(),
               angular_velocity_body=[0.0, W * np.sin(ST_TH), ST_W3])
    m.add_joint("spherical", "tip", body_i="ground", body_j="disc",
                point_i=[0.0, 0.0, 0.0], point_j=[0.0, 0.0, -ST_L])
    return m


def steady_top_reference(t: np.ndarray, Omega: float | None = None) -> dict:
    """Uniform precession: centroid r(t) = Rz(Omega t) r(0); spin w3 constant."""
    W = steady_precession_rate() if Omega is None else Omega
    r0 = ST_L * (rot(quat_axis_angle([1, 0, 0], ST_TH)) @ np.array([0.0, 0.0, 1.0]))
    c, s = np.cos(W * t), np.sin(W * t)
    com = np.column_stack([c * r0[0] - s * r0[1], s * r0[0] + c * r0[1],
                           np.full_like(t, r0[2])])
    return {"com": com, "spin": np.full((len(t), 1), ST_W3)}


steady_top = Problem(
    name="steady_top", title="symmetric top, steady precession",
    source="Goldstein, Poole & Safko, Classical Mechanics (3rd ed.) §5.7: closed form",
    t_end=2.0, output_step=0.02, build=steady_top_model, dof=3,
    measure=lambda r: {"com": _pos_of(r, "disc"),
                       "spin": body_omega(_quat_of(r, "disc"),
                                          _quatd_of(r, "disc"))[:, 2:3]},
    reference=steady_top_reference, units={"com": "m", "spin": "rad/s"})


# ------------------------------------------------------------------ torque-free body
TF_J = np.array([1.0, 2.0, 3.0])
TF_W0 = np.array([1.0, 0.0, 2.0])


def torque_free_model() -> Model:
    m = Model()
    m.set_dimensions(3)
    m.add_body("body", mass=1.0, inertia=TF_J.tolist(), position=[0.0, 0.0, 0.0],
               angular_velocity_body=TF_W0.tolist())
    return m


def torque_free_reference(t: np.ndarray, J=TF_J, w0=TF_W0) -> dict:
    """omega'(t) of a free asymmetric body (I1 < I2 < I3, M² > 2 E I2, omega'_2(0) = 0,
    omega'_1(0), omega'_3(0) > 0): Landau & Lifshitz, Mechanics, §37, Eqs. (37.10)-(37.11)."""
    I1, I2, I3 = J
    E2 = float(J @ (w0 * w0))                 # 2E
    M2 = float((J * w0) @ (J * w0))           # M²
    assert I1 < I2 < I3 and M2 > E2 * I2 and w0[1] == 0.0
    lam = np.sqrt((I3 - I2) * (M2 - E2 * I1) / (I1 * I2 * I3))
    k2 = (I2 - I1) * (E2 * I3 - M2) / ((I3 - I2) * (M2 - E2 * I1))
    sn, cn, dn, _ = ellipj(lam * t, k2)
    w1 = np.sqrt((E2 * I3 - M2) / (I1 * (I3 - I1))) * cn
    w2 = np.sqrt((E2 * I3 - M2) / (I2 * (I3 - I2))) * sn
    w3 = np.sqrt((M2 - E2 * I1) / (I3 * (I3 - I1))) * dn
    return {"omega": np.column_stack([w1, w2, w3])}


torque_free = Problem(
    name="torque_free", title="torque-free asymmetric body",
    source="Landau & Lifshitz, Mechanics §37: Jacobi elliptic functions (closed form)",
    t_end=10.0, output_step=0.05, build=torque_free_model, dof=6,
    measure=lambda r: {"omega": body_omega(_quat_of(r, "body"), _quatd_of(r, "body"))},
    reference=torque_free_reference, units={"omega": "rad/s"})


# ------------------------------------------------------------------ conical rod
CR_M, CR_L, CR_R, CR_AL = 1.0, 1.0, 0.01, np.radians(30.0)
CR_JT = CR_M * (3 * CR_R ** 2 + CR_L ** 2) / 12.0     # transverse, about the centroid
CR_JA = CR_M * CR_R ** 2 / 2.0                          # axial (solid round rod)


def conical_rate(alpha=CR_AL) -> float:
    """Omega of a rod turning uniformly about the vertical at alpha from the downward
    vertical: Omega² (I1 - J3) cos(alpha) = m g L/2 with I1 the transverse moment about
    the pivot (torque balance tau = Omega z x (I_O Omega z)); point mass: g/(L cos)."""
    I1 = CR_JT + CR_M * (CR_L / 2) ** 2
    return np.sqrt(CR_M * G * CR_L / 2 / ((I1 - CR_JA) * np.cos(alpha)))


def conical_rod_model(Omega: float | None = None) -> Model:
    """A uniform round rod (m = 1 kg, L = 1 m, radius 0.01 m) on a spherical joint at
    its upper end, 30° from the downward vertical, turning about the vertical at the
    steady rate (no spin relative to that rotation)."""
    W = conical_rate() if Omega is None else Omega
    # body z along the rod, from the pivot towards the free end: e = (sin a, 0, -cos a)
    p0 = quat_axis_angle([0, 1, 0], np.pi - CR_AL)
    e = rot(p0) @ np.array([0.0, 0.0, 1.0])
    rc = 0.5 * CR_L * e
    w = np.array([0.0, 0.0, W])
    m = Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G)
    m.add_body("rod", mass=CR_M, inertia=[CR_JT, CR_JT, CR_JA], position=rc.tolist(),
               orientation=p0.tolist(), velocity=np.cross(w, rc).tolist(),
               angular_velocity_body=(rot(p0).T @ w).tolist())
    m.add_joint("spherical", "pivot", body_i="ground", body_j="rod",
                point_i=[0.0, 0.0, 0.0], point_j=[0.0, 0.0, -0.5 * CR_L])
    return m


def conical_rod_reference(t: np.ndarray, Omega: float | None = None) -> dict:
    W = conical_rate() if Omega is None else Omega
    r0 = 0.5 * CR_L * np.array([np.sin(CR_AL), 0.0, -np.cos(CR_AL)])
    return {"com": np.column_stack([r0[0] * np.cos(W * t), r0[0] * np.sin(W * t),
                                    np.full_like(t, r0[2])])}


conical_rod = Problem(
    name="conical_rod", title="conical pendulum (rod on a ball joint)",
    source="closed form: uniform rotation about the vertical, "
           "Omega² (I1 - J3) cos(alpha) = m g L/2",
    t_end=2.0, output_step=0.02, build=conical_rod_model, dof=3,
    measure=lambda r: {"com": _pos_of(r, "rod")},
    reference=conical_rod_reference, units={"com": "m"})


# ------------------------------------------------------------------ Cardan shaft
CD_BETA = np.radians(30.0)
CD_W = 2.0 * np.pi


def cardan_model() -> Model:
    """Two shafts 30° apart joined by a universal joint (examples/spatial_cardan_shaft.yaml
    geometry), the input driven at 2 pi rad/s by a rotation driver, dynamic analysis."""
    cb, sb = np.cos(CD_BETA), np.sin(CD_BETA)
    u = np.array([cb, sb, 0.0])
    m = Model()
    m.set_dimensions(3)
    m.add_body("shaft_in", mass=2.0, inertia=[0.001, 0.06, 0.06], position=[-0.3, 0, 0],
               angular_velocity=[CD_W, 0.0, 0.0])
    w_out = CD_W * cb / (1.0 - sb * sb)          # at phi_in = 0
    m.add_body("shaft_out", mass=2.0, inertia=[0.001, 0.06, 0.06],
               position=(0.3 * u).tolist(),
               orientation=quat_axis_angle([0, 0, 1], CD_BETA).tolist(),
               angular_velocity=(w_out * u).tolist())
    m.add_joint("revolute", "bearing_in", body_i="ground", body_j="shaft_in",
                point_i=[-0.3, 0, 0], point_j=[0, 0, 0], axis_i=[1, 0, 0], axis_j=[1, 0, 0])
    m.add_joint("revolute", "bearing_out", body_i="ground", body_j="shaft_out",
                point_i=(0.3 * u).tolist(), point_j=[0, 0, 0], axis_i=u.tolist(),
                axis_j=[1, 0, 0])
    m.add_joint("universal", "cross", body_i="shaft_in", body_j="shaft_out",
                point_i=[0.3, 0, 0], point_j=[-0.3, 0, 0], axis_i=[0, 1, 0],
                axis_j=[0, 0, 1])
    m.add_driver("rotation_driver", "motor", body_i="ground", body_j="shaft_in",
                 axis_i=[1, 0, 0], reference_i=[0, 1, 0], reference_j=[0, 1, 0],
                 function={"polynomial": [0.0, CD_W]})
    return m


def _cardan_out_angle(res) -> np.ndarray:
    """Output shaft angle from its yoke direction (body z) about u, unwrapped."""
    P = _quat_of(res, "shaft_out")
    u = np.array([np.cos(CD_BETA), np.sin(CD_BETA), 0.0])
    v = np.cross(u, [0.0, 0.0, 1.0])      # u x z: z turned by +90° about u
    ang = []
    for p in P:
        z = rot(p) @ np.array([0.0, 0.0, 1.0])
        ang.append(np.arctan2(z @ v, z[2]))
    return np.unwrap(np.array(ang))


def cardan_reference(t: np.ndarray) -> dict:
    phi_in = CD_W * t
    # tan(phi_out) = tan(phi_in)/cos(beta), same quadrant, unwrapped
    phi_out = np.unwrap(np.arctan2(np.sin(phi_in), np.cos(phi_in) * np.cos(CD_BETA)))
    return {"phi_out": phi_out[:, None]}


cardan = Problem(
    name="cardan", title="Cardan shaft, driven input (3 redundant rows)",
    source="closed form tan(phi_out) = tan(phi_in)/cos(beta) (Hooke's joint)",
    t_end=1.0, output_step=0.01, build=cardan_model, dof=0,
    measure=lambda r: {"phi_out": _cardan_out_angle(r)[:, None]},
    reference=cardan_reference, units={"phi_out": "rad"})


# ------------------------------------------------------------------ IFToMM A04 Bricard
BR_A = 0.1      # square cross-section (OpenSim implementation)


def _rod_inertia(m, L, a, axis):
    ax = m * a * a / 6.0
    tr = m * (L * L + a * a) / 12.0
    J = [tr, tr, tr]
    J[axis] = ax
    return J


def bricard_model() -> Model:
    """IFToMM A04: five rods (1 m, 1 kg) O-A-B-C-D-E: (0,0,0) -> (1,0,0) -> (1,-1,0)
    -> (1,-1,1) -> (0,-1,1) -> (0,0,1), revolutes at the six corners (the ground 'rod'
    E-O along z), each axis normal to both rods it joins; gravity 9.81 along -y; released
    at rest; 1 degree of freedom although Grübler counts 0 (one redundant row)."""
    P = np.array([[0, 0, 0], [1, 0, 0], [1, -1, 0], [1, -1, 1], [0, -1, 1], [0, 0, 1]],
                 float)
    m = Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, -G, 0.0)
    names = [f"rod{k}" for k in range(1, 6)]
    for k, nm in enumerate(names):
        d = P[k + 1] - P[k]
        axis = int(np.argmax(np.abs(d)))
        m.add_body(nm, mass=1.0, inertia=_rod_inertia(1.0, 1.0, BR_A, axis),
                   position=(0.5 * (P[k] + P[k + 1])).tolist())
    axes = [[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]
    bodies = ["ground"] + names + ["ground"]
    for k in range(6):
        bi, bj = bodies[k], bodies[k + 1]
        pt = P[k] if k < 6 else P[0]
        ci = np.zeros(3) if bi == "ground" else 0.5 * (P[k - 1] + P[k])
        cj = np.zeros(3) if bj == "ground" else 0.5 * (P[k] + P[k + 1])
        m.add_joint("revolute", f"J{k + 1}", body_i=bi, body_j=bj,
                    point_i=(pt - ci).tolist(), point_j=(pt - cj).tolist(),
                    axis_i=axes[k], axis_j=axes[k])
    return m


def bricard_measure(res) -> dict:
    # P3 of the library: the far end of the second rod, (1, -1, 0) at t = 0
    return {"P3": _point_of(res, "rod2", [0.0, -0.5, 0.0])}


# ------------------------------------------------------------------ IFToMM A05 governor
GV_RHO = 3000.0


def governor_model() -> Model:
    """IFToMM A05 (stiff flyball governor), after the OpenSim implementation: vertical
    axis (1 x 0.01 x 0.01 m, rho 3000) on a revolute at the origin turning freely at
    2 pi rad/s at t = 0; a slider (0.1 m cube) on it at s = 0.5 m; two rods
    (1 x 0.01 x 0.01 m) pinned at (+-0.05, 0, 1) to the axis top, 30° below the
    horizontal, each with a 5 kg ball at its end (merged into the rod: a weld); springs
    k = 8e5 N/m, c = 4e4 N s/m, L0 = 0.5 m from the slider (+-0.05, 0, 0) to the rods'
    midpoints (at rest length at t = 0); gravity 9.81 along -z."""
    W = 2.0 * np.pi
    m_bar = 1.0 * 0.01 * 0.01 * GV_RHO                    # 0.3 kg
    J_ax = m_bar * (0.005 ** 2 + 0.5 ** 2) / 3.0          # brick 0.01 x 0.01 x 1
    J_ax3 = m_bar * (2 * 0.005 ** 2) / 3.0
    m_base = 0.1 ** 3 * GV_RHO
    J_base = m_base * (2 * 0.05 ** 2) / 3.0
    ball = 5.0
    # rod + ball: along body z from the pivot (z = 0) to the ball (z = 1)
    mr = m_bar + ball
    zc = (m_bar * 0.5 + ball * 1.0) / mr                  # centroid from the pivot
    Jt = J_ax + m_bar * (0.5 - zc) ** 2 + ball * (1.0 - zc) ** 2
    mdl = Model()
    mdl.set_dimensions(3)
    mdl.set_gravity(0.0, 0.0, -G)
    w = np.array([0.0, 0.0, W])
    mdl.add_body("axis", mass=m_bar, inertia=[J_ax, J_ax, J_ax3], position=[0, 0, 0.5],
                 angular_velocity=w.tolist())
    mdl.add_body("base", mass=m_base, inertia=[J_base] * 3, position=[0, 0, 0.5],
                 angular_velocity=w.tolist(), velocity=[0.0, 0.0, 0.0])
    mdl.add_joint("revolute", "axis_pin", body_i="ground", body_j="axis",
                  point_i=[0, 0, 0], point_j=[0, 0, -0.5], axis_i=[0, 0, 1],
                  axis_j=[0, 0, 1])
    mdl.add_joint("translational", "slider", body_i="axis", body_j="base",
                  point_i=[0, 0, 0], point_j=[0, 0, 0], axis_i=[0, 0, 1], axis_j=[0, 0, 1])
    for side, sgn in (("right", 1.0), ("left", -1.0)):
        # body z from the pivot to the ball: (sgn cos 30, 0, -sin 30)
        ang = sgn * (np.pi / 2 + np.radians(30.0))       # rotation about y of z
        p0 = quat_axis_angle([0, 1, 0], ang)
        e = rot(p0) @ np.array([0.0, 0.0, 1.0])
        piv = np.array([sgn * 0.05, 0.0, 1.0])
        rc = piv + zc * e
        mdl.add_body(f"rod_{side}", mass=mr, inertia=[Jt, Jt, J_ax3], position=rc.tolist(),
                     orientation=p0.tolist(), velocity=np.cross(w, rc).tolist(),
                     angular_velocity=w.tolist())
        mdl.add_joint("revolute", f"pin_{side}", body_i="axis", body_j=f"rod_{side}",
                      point_i=[sgn * 0.05, 0.0, 0.5], point_j=[0.0, 0.0, -zc],
                      axis_i=[0, 1, 0], axis_j=(rot(p0).T @ np.array([0, 1.0, 0])).tolist())
        mdl.add_force("tsda", f"spring_{side}", body_i="base", body_j=f"rod_{side}",
                      point_i=[sgn * 0.05, 0.0, 0.0], point_j=[0.0, 0.0, 0.5 - zc],
                      stiffness=8e5, damping=4e4, free_length=0.5)
    return mdl


def governor_measure(res) -> dict:
    return {"s": _pos_of(res, "base")[:, 2:3],
            "balls": np.hstack([_point_of(res, "rod_right", [0, 0, 1.0 - GOV_ZC]),
                                _point_of(res, "rod_left", [0, 0, 1.0 - GOV_ZC])])}


GOV_ZC = (0.3 * 0.5 + 5.0) / 5.3


# ------------------------------------------------------------------ tight-run references
TIGHT = {"rtol": 1e-12, "atol": 1e-14}
_tight_cache: dict = {}


def tight_reference(build, measure, t_end, output_step, formulation="di",
                    integrator="dop853"):
    """A tight mbcore run (rtol 1e-12) of ``formulation``, measured at the outputs."""
    key = (build.__name__, formulation, integrator, t_end, output_step)
    if key not in _tight_cache:
        res = mbcore.run(build(), analysis="dynamic",
                         settings={"t_end": t_end, "output_step": output_step,
                                   "formulation": formulation, "integrator": integrator,
                                   **TIGHT})
        _tight_cache[key] = (np.asarray(res.t), measure(res))
    return _tight_cache[key]


def _tight(build, measure, t_end, step, formulation="di", integrator="dop853"):
    def ref(t):
        tt, m = tight_reference(build, measure, t_end, step, formulation, integrator)
        if len(tt) != len(t) or np.max(np.abs(tt - t)) > 1e-9:
            raise ValueError("reference computed at other output times")
        return m
    return ref


bricard = Problem(
    name="bricard", title="IFToMM A04 Bricard mechanism",
    source="IFToMM benchmark A04 (González et al. 2006); reference: di + dop853 at rtol "
           "1e-12, cross-checked with projection and energy conservation",
    t_end=2.0, output_step=0.02, build=bricard_model, dof=1, measure=bricard_measure,
    reference=_tight(bricard_model, bricard_measure, 2.0, 0.02),
    reference_check=_tight(bricard_model, bricard_measure, 2.0, 0.02,
                           formulation="projection"),
    units={"P3": "m"})

governor = Problem(
    name="governor", title="IFToMM A05 flyball governor (stiff)",
    source="IFToMM benchmark A05 (González et al. 2006); reference: di + dop853 at rtol "
           "1e-12, cross-checked with joint_coordinates",
    t_end=1.0, output_step=0.01, build=governor_model, dof=4, measure=governor_measure,
    reference=_tight(governor_model, governor_measure, 1.0, 0.01),
    reference_check=_tight(governor_model, governor_measure, 1.0, 0.01,
                           formulation="joint_coordinates"),
    units={"s": "m", "balls": "m"})


PROBLEMS: dict[str, Problem] = {p.name: p for p in (
    heavy_top, steady_top, torque_free, conical_rod, cardan, bricard, governor)}


def normalized_error(meas: dict, ref: dict, rtol: float, atol: float) -> tuple[float, dict]:
    """The accuracy measure of every cell: for each group g of compared quantities,
    e_g = max_{t, k} |y - y_ref| / (atol + rtol * S_g) with the group's scale
    S_g = max_{t, k} |y_ref| (stated in the table); the cell's error is max_g e_g and it
    meets the contract when that is <= 10.  Returns (error, {g: max abs error})."""
    worst, absd = 0.0, {}
    for g, r in ref.items():
        y = meas[g]
        if y.shape != r.shape:
            raise ValueError(f"{g}: {y.shape} outputs against {r.shape} reference")
        d = float(np.max(np.abs(y - r)))
        if not np.isfinite(d):
            d = float("inf")
        S = float(np.max(np.abs(r)))
        absd[g] = d
        worst = max(worst, d / (atol + rtol * S))
    return worst, absd
