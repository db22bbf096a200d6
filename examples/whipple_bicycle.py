"""The benchmark (Whipple) bicycle as a nonlinear mbcore model.

Parameters: Meijaard, Papadopoulos, Ruina & Schwab, "Linearized dynamics equations
for the balance and steer of a bicycle: a benchmark and review", Proc. R. Soc. A
463 (2007) 1955-1982 ("MPRS"), Table 1.  Four rigid bodies: the rear frame with
the rider (B), the rear wheel (R), the front fork with the handlebar (H) and the
front wheel (F); revolute joints at the two hubs and the steer axis; each wheel a
knife-edge ``rolling_disc`` (contact height at position level, no slip along and
across at velocity level) on the ground plane z = 0.

Axes.  MPRS: x forward, y to the right, z down, origin at the rear contact point.
mbcore: z up (gravity (0, 0, -g)).  The map is the rotation by pi about x,
``Q = diag(1, -1, -1)``: points ``r = Q r_MPRS`` (x -> x, y -> -y, z -> -z), so
the MPRS centre of mass (xB, zB) = (0.3, -0.9) is at (0.3, 0, 0.9).  Inertia
tensors transform as ``I = Q I_MPRS Q^T``: ``I_ij = Q_ii Q_jj I_MPRS,ij``, so the
diagonal is unchanged, ``I_xz = (+1)(-1) I_MPRS,xz = -I_MPRS,xz`` (and
``I_xy`` would change sign, ``I_yz`` not): IBxz = 2.4 becomes -2.4 and
IHxz = -0.00756 becomes +0.00756.  Every body's axes are parallel to the global
axes in the upright reference configuration.

Angles as in MPRS: the lean (roll) ``phi`` is a rotation about the forward axis
x (the same axis in both frames), positive leaning to the right; the steer
``delta`` is the rotation of the front assembly about the steer axis pointing down
(MPRS: (sin lambda, 0, cos lambda); mbcore: (sin lambda, 0, -cos lambda)),
positive steering to the right.  The lean of the rear frame is therefore
``asin(e_y . z)`` with ``e_y`` the rear frame's body y axis (to the left) in
global components: ``sin(phi) = A(p)[2, 1]``.
"""
from __future__ import annotations

import math
import sys

import numpy as np

import mbcore

# ---------------------------------------------------------------- MPRS Table 1
w = 1.02                      # wheelbase
c = 0.08                      # trail
lam = math.pi / 10            # steer axis tilt (from the vertical, leaning back)
g = 9.81
# rear wheel R
rR, mR = 0.3, 2.0
IRxx, IRyy = 0.0603, 0.12
# rear body and frame assembly B (with the rider); MPRS axes (z down)
xB, zB, mB = 0.3, -0.9, 85.0
IBxx, IByy, IBzz, IBxz = 9.2, 11.0, 2.8, 2.4
# front handlebar and fork assembly H; MPRS axes (z down)
xH, zH, mH = 0.9, -0.7, 4.0
IHxx, IHyy, IHzz, IHxz = 0.05892, 0.06, 0.00708, -0.00756
# front wheel F
rF, mF = 0.35, 3.0
IFxx, IFyy = 0.1405, 0.28

#: MPRS axes -> mbcore axes (rotation by pi about x)
Q = np.diag([1.0, -1.0, -1.0])


def mprs_to_mbcore_inertia(I_mprs) -> np.ndarray:
    """``Q I Q^T``: the products of inertia with x-z and x-y change sign."""
    I_mprs = np.asarray(I_mprs, dtype=float)
    return Q @ I_mprs @ Q.T


I_B = mprs_to_mbcore_inertia([[IBxx, 0, IBxz], [0, IByy, 0], [IBxz, 0, IBzz]])
I_H = mprs_to_mbcore_inertia([[IHxx, 0, IHxz], [0, IHyy, 0], [IHxz, 0, IHzz]])
I_R = np.diag([IRxx, IRyy, IRxx])
I_F = np.diag([IFxx, IFyy, IFxx])

#: steer axis, mbcore components, pointing down (MPRS' positive steer sense)
STEER_AXIS = np.array([math.sin(lam), 0.0, -math.cos(lam)])
#: the steer axis meets the ground the trail ahead of the front contact point
STEER_POINT = np.array([w + c, 0.0, 0.0])

#: reference (upright, straight) centroids, mbcore axes
POS = {"rear": Q @ [xB, 0.0, zB], "rear_wheel": np.array([0.0, 0.0, rR]),
       "fork": Q @ [xH, 0.0, zH], "front_wheel": np.array([w, 0.0, rF])}
MASS = {"rear": mB, "rear_wheel": mR, "fork": mH, "front_wheel": mF}
INERTIA = {"rear": I_B, "rear_wheel": I_R, "fork": I_H, "front_wheel": I_F}

#: the settings of the model file: a 5 s dynamic run
SETTINGS = {"analysis": "dynamic", "t_end": 5.0, "output_step": 0.01,
            "formulation": "cs", "integrator": "dopri5", "rtol": 1e-8,
            "atol": 1e-10}


def _rot(axis, angle) -> np.ndarray:
    """Rotation matrix about a unit axis (Rodrigues)."""
    a = np.asarray(axis, dtype=float)
    a = a / np.linalg.norm(a)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def _clean(x) -> list:
    return [round(float(v), 14) if abs(v) > 1e-15 else 0.0 for v in np.ravel(x)]


def bicycle(speed: float = 5.0, lean: float = 0.0, lean_rate: float = 0.0,
            steer: float = 0.0) -> mbcore.Model:
    """The MPRS benchmark bicycle running straight along +x at ``speed`` (m/s),
    leaned by ``lean`` (rad, positive to the right) with lean rate ``lean_rate``
    (rad/s) and steered by ``steer`` (rad, positive to the right).

    The lean and the lean rate are a rigid rotation of the whole bicycle about the
    x axis, which holds both contact points at zero steer: the initial state is then
    exactly consistent (both wheels on the ground, no slip).  A steer angle moves
    the front contact point: the analyses' assembly then corrects the positions and
    velocities (see ``res.stats["assembly"]``)."""
    m = mbcore.Model("whipple_bicycle",
                     description="benchmark bicycle of Meijaard et al. (2007), Table 1 parameters, "
                                 f"{speed:g} m/s",
                     units={"length": "m", "angle": "rad", "time": "s", "mass": "kg"})
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -g)
    Rlean = _rot([1.0, 0.0, 0.0], lean)
    Rsteer = _rot(STEER_AXIS, steer)
    omega_lean = np.array([lean_rate, 0.0, 0.0])
    for name in ("rear", "rear_wheel", "fork", "front_wheel"):
        front = name in ("fork", "front_wheel")
        r = POS[name]
        R = Rlean
        if front and steer:
            r = STEER_POINT + Rsteer @ (r - STEER_POINT)
            R = Rlean @ Rsteer
        r = Rlean @ r
        v = np.array([speed, 0.0, 0.0]) + np.cross(omega_lean, r)
        om = omega_lean.copy()
        if name == "rear_wheel":
            om = om + R @ [0.0, speed / rR, 0.0]      # spin about the axle (body y)
        elif name == "front_wheel":
            om = om + R @ [0.0, speed / rF, 0.0]
        kw = {}
        if lean or (front and steer):
            kw["orientation"] = {"matrix": [_clean(row) for row in R]}
        if np.any(om):
            kw["angular_velocity"] = _clean(om)
        m.add_body(name, mass=MASS[name], inertia=[_clean(row) for row in INERTIA[name]]
                   if name in ("rear", "fork") else _clean(np.diag(INERTIA[name])),
                   position=_clean(r), velocity=_clean(v), **kw)
    # hubs: the wheel's centroid is its centre, axle along body y
    m.add_joint("revolute", "rear_hub", body_i="rear", body_j="rear_wheel",
                point_i=_clean(POS["rear_wheel"] - POS["rear"]), point_j=[0.0, 0.0, 0.0],
                axis_i=[0.0, 1.0, 0.0], axis_j=[0.0, 1.0, 0.0])
    m.add_joint("revolute", "front_hub", body_i="fork", body_j="front_wheel",
                point_i=_clean(POS["front_wheel"] - POS["fork"]),
                point_j=[0.0, 0.0, 0.0], axis_i=[0.0, 1.0, 0.0], axis_j=[0.0, 1.0, 0.0])
    # the steer axis: its ground point in the reference configuration, on both bodies
    m.add_joint("revolute", "steer", body_i="rear", body_j="fork",
                point_i=_clean(STEER_POINT - POS["rear"]),
                point_j=_clean(STEER_POINT - POS["fork"]),
                axis_i=_clean(STEER_AXIS), axis_j=_clean(STEER_AXIS))
    for name, r in (("rear_wheel", rR), ("front_wheel", rF)):
        m.add_joint("rolling_disc", f"{name}_contact", body=name, radius=r,
                    axis=[0.0, 1.0, 0.0])
    m.settings.update(SETTINGS)
    return m


def mprs_eigenvalues(v: float) -> np.ndarray:
    """The eigenvalues of MPRS' linearised equations at forward speed v: their
    ``M q'' + v C1 q' + (g K0 + v^2 K2) q = 0`` in lean and steer, with M, C1, K0,
    K2 from the Table 1 parameters by their Appendix A (the reference the
    multibody model's linearisation is compared with)."""
    sl, cl = math.sin(lam), math.cos(lam)
    mT = mR + mB + mH + mF
    xT = (xB * mB + xH * mH + w * mF) / mT
    zT = (-rR * mR + zB * mB + zH * mH - rF * mF) / mT
    ITxx = (IRxx + IBxx + IHxx + IFxx + mR * rR ** 2
            + mB * zB ** 2 + mH * zH ** 2 + mF * rF ** 2)
    ITxz = (IBxz + IHxz - mB * xB * zB - mH * xH * zH
            + mF * w * rF)
    ITzz = (IRxx + IBzz + IHzz + IFxx + mB * xB ** 2
            + mH * xH ** 2 + mF * w ** 2)
    mA = mH + mF
    xA = (xH * mH + w * mF) / mA
    zA = (zH * mH - rF * mF) / mA
    IAxx = IHxx + IFxx + mH * (zH - zA) ** 2 + mF * (rF + zA) ** 2
    IAxz = (IHxz - mH * (xH - xA) * (zH - zA)
            + mF * (w - xA) * (rF + zA))
    IAzz = IHzz + IFxx + mH * (xH - xA) ** 2 + mF * (w - xA) ** 2
    uA = (xA - w - c) * cl - zA * sl
    IAll = mA * uA ** 2 + IAxx * sl ** 2 + 2 * IAxz * sl * cl + IAzz * cl ** 2
    IAlx = -mA * uA * zA + IAxx * sl + IAxz * cl
    IAlz = mA * uA * xA + IAxz * sl + IAzz * cl
    mu = c / w * cl
    SR, SF = IRyy / rR, IFyy / rF
    ST = SR + SF
    SA = mA * uA + mu * mT * xT
    M = np.array([[ITxx, IAlx + mu * ITxz],
                  [IAlx + mu * ITxz, IAll + 2 * mu * IAlz + mu ** 2 * ITzz]])
    K0 = np.array([[mT * zT, -SA], [-SA, -SA * sl]])
    K2 = np.array([[0.0, (ST - mT * zT) / w * cl], [0.0, (SA + SF * sl) / w * cl]])
    C1 = np.array([[0.0, mu * ST + SF * cl + ITxz / w * cl - mu * mT * zT],
                   [-(mu * ST + SF * cl), IAlz / w * cl + mu * (SA + ITzz / w * cl)]])
    Mi = np.linalg.inv(M)
    A = np.block([[np.zeros((2, 2)), np.eye(2)],
                  [-Mi @ (g * K0 + v * v * K2), -Mi @ (v * C1)]])
    return np.linalg.eigvals(A)


#: the cyclic coordinates of the running bicycle: position on the ground, heading,
#: the wheels' rotation angles
CYCLIC = ["rear.x", "rear.y", "rear.rz", "rear_wheel.ry", "front_wheel.ry"]


def linear_eigenvalues(v: float) -> tuple[np.ndarray, "mbcore.LinearModel"]:
    """The non-rigid eigenvalues of the model linearised about upright straight
    running at v (``modes`` about the steady motion, the cyclic coordinates
    declared), each of a complex pair listed, and the linear model."""
    lm = mbcore.linearize(bicycle(v), settings={"about": "motion", "cyclic": CYCLIC})
    md = lm.modes()
    out = []
    for z, kd in zip(md.eigenvalue, md.kind):
        if kd != "rigid":
            out += [z] if z.imag == 0 else [z, z.conjugate()]
    return np.array(out), lm


def lean_angle(res, body: str = "rear") -> tuple[np.ndarray, np.ndarray]:
    """(t, lean): the lean of a body, ``asin`` of the z component of its body y axis
    (positive: leaning to the right, as MPRS' phi)."""
    from mbcore.elements.rotations import A
    p = np.stack([np.asarray(res[f"q/{body}.p{i}"]) for i in range(4)], 1)
    return np.asarray(res.t), np.arcsin(np.clip(A(p)[:, 2, 1], -1.0, 1.0))


YAML_HEADER = """\
# The benchmark (Whipple) bicycle of Meijaard, Papadopoulos, Ruina & Schwab (2007),
# Proc. R. Soc. A 463, 1955-1982 ("MPRS"), Table 1 parameters, upright and running
# straight along +x at {speed:g} m/s (written by examples/whipple_bicycle.py, which
# documents the model).  Axes: MPRS' x forward, y right, z down mapped to mbcore's
# z up by the rotation by pi about x (y -> -y, z -> -z): the centres of mass
# (xB, zB) = (0.3, -0.9) and (xH, zH) = (0.9, -0.7) are at z = 0.9 and 0.7, and the
# products of inertia change sign (IBxz = 2.4 -> -2.4, IHxz = -0.00756 -> 0.00756).
# Bodies: rear frame + rider (rear), rear wheel, front fork + handlebar (fork),
# front wheel; revolute hubs and steer axis (tilted back by lambda = pi/10, meeting
# the ground the trail c = 0.08 m ahead of the front contact point); each wheel a
# knife-edge rolling_disc on the ground z = 0.
"""


def write_yaml(path: str, speed: float = 5.0) -> None:
    """Write the model (upright, straight at ``speed``) as a model file."""
    import yaml
    text = yaml.safe_dump(bicycle(speed).to_dict(), sort_keys=False,
                          default_flow_style=None, width=88)
    with open(path, "w") as f:
        f.write(YAML_HEADER.format(speed=speed) + text)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--write-yaml":
        write_yaml(sys.argv[2])
        sys.exit(0)
    res = mbcore.run(bicycle(5.0, lean_rate=0.05), analysis="dynamic",
                     settings={"t_end": 3.0, "output_step": 0.01, "formulation": "cs",
                               "integrator": "dopri5", "rtol": 1e-8, "atol": 1e-10})
    t, phi = lean_angle(res)
    print(f"loop: {res.stats.get('loop')}, wall time {res.stats.get('wall_time')}")
    print(f"assembly: {res.stats.get('assembly')}")
    for k in range(0, len(t), 50):
        print(f"t = {t[k]:5.2f}  lean = {phi[k]: .6e} rad  x = {res['q/rear.x'][k]:.4f}")
