"""A body's reference frame anywhere on the body, the centre of mass given as an
offset (``center_of_mass``; Nikravesh (1988), Problem 9.4; mbcore.system.frames)."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model
from mbcore.elements.rotations import A as rotation
from mbcore.errors import ModelError
from mbcore.plugins.manager import registry as default_registry
from mbcore.solve.dynamics import AccelerationSolver
from mbcore.system import frames


def _rot2(phi: float) -> np.ndarray:
    c, s = math.cos(phi), math.sin(phi)
    return np.array([[c, -s], [s, c]])


def with_frames(data: dict, origins: dict[str, list[float]]) -> dict:
    """The model ``data`` (centroidal frames) written again with body b's reference
    frame at ``origins[b]`` (centroidal coordinates): its centre of mass at
    ``-origins[b]``, its position and velocity the frame origin's, every point on it
    measured from there.  Built here independently of mbcore.system.frames."""
    m = Model.from_dict(data)
    reg = default_registry()
    out = copy.deepcopy(data)
    for k, b in enumerate(m.bodies):
        if b.name not in origins:
            continue
        o = np.asarray(origins[b.name], dtype=float)
        spatial = b.kind == "spatial"
        Ao = (rotation(np.asarray(b.orientation)) if spatial else _rot2(b.angle)) @ o
        w = np.asarray(b.angular_velocity, dtype=float)
        v = np.asarray(b.velocity, dtype=float) + (np.cross(w, Ao) if spatial else
                                                   w * np.array([-Ao[1], Ao[0]]))
        bd = out["bodies"][k]
        bd["position"] = list(np.asarray(b.position) + Ao)
        bd["velocity"] = list(v)
        if spatial:
            bd["angular_velocity"] = list(w)
        bd["center_of_mass"] = list(-o)
        for p in out.get("points", []):
            if p["body"] == b.name:
                p["at"] = list(np.asarray(p["at"], dtype=float) - o)
        for section, kind in (("joints", "constraint"), ("drivers", "constraint"),
                              ("forces", "force")):
            for raw in out.get(section, []):
                cls = reg.get(kind, raw["type"], m.body_kind)
                for key, par in cls.params.items():
                    if par.kind not in ("vec2", "vec3") or raw.get(par.on) != b.name:
                        continue
                    given = raw.get(key, par.default_value())
                    if given is not None:
                        raw[key] = list(np.asarray(given, dtype=float) - o)
    return out


def _run(data: dict, **settings):
    return mbcore.run(Model.from_dict(data), settings=settings)


#: tolerances of the runs compared by :func:`assert_same_motion`
TIGHT = {"rtol": 1e-10, "atol": 1e-12}


def assert_same_motion(q0: np.ndarray, q1: np.ndarray, rtol: float = TIGHT["rtol"]) -> None:
    """Two runs of one mechanism written two ways start from initial states that may
    differ by rounding (r_O + A s_C against the centroid given); an adaptive
    integrator may then accept a step in one run that it rejects in the other, so
    the bound is its error tolerance: 100 rtol (1 + max|q|), ≥ 100× what such a flip
    gives.  A wrong shift moves q by the offsets (1e-2 and more)."""
    assert q0.shape == q1.shape
    assert np.abs(q1 - q0).max() <= 100.0 * rtol * (1.0 + np.abs(q0).max())


def _load(examples, name: str) -> dict:
    return yaml.safe_load((examples / name).read_text())


# -- (a) the same mechanism written twice ---------------------------------------------
def test_planar_slider_crank_frames_at_joints(examples):
    """The free slider-crank with the crank's frame at its pivot A, the rod's at
    the crank pin B and the slider's at an arbitrary point: the same centroidal
    trajectories as the centroidal model, and the frame points follow the joints."""
    data = _load(examples, "slider_crank_dynamic.yaml")
    framed = with_frames(data, {"crank": [0.1, 0.0], "rod": [0.3, 0.0],
                                "slider": [0.02, -0.01]})
    assert framed["bodies"][0]["center_of_mass"] == [-0.1, -0.0]
    r0 = _run(data, t_end=0.5, **TIGHT)
    r1 = _run(framed, t_end=0.5, **TIGHT)
    q0, q1 = np.asarray(r0.series("q")), np.asarray(r1.series("q"))
    # observed max |dq| 0 (the initial estimates may differ by the rounding of
    # r_O + A s_C; assembly brings them to the same numbers)
    assert_same_motion(q0, q1)
    # the crank's frame (its pivot A) stays at the origin up to the joint's drift:
    # observed 6.1e-13 (x) and 5.8e-12 (yd)
    pts = dict(zip(r1.labels("points"), np.asarray(r1.series("points")).T, strict=True))
    assert np.abs(pts["crank.frame.x"]).max() < 1e-9
    assert np.abs(pts["crank.frame.yd"]).max() < 1e-8
    # the rod's frame is the crank pin B: r_crank + A_crank s'_B (centroidal data)
    ix = [r1.labels("q").index(f"crank.{c}") for c in ("x", "y", "phi")]
    xc = q1[:, ix]
    B = xc[:, :2] + np.stack([np.cos(xc[:, 2]) * -0.1, np.sin(xc[:, 2]) * -0.1], axis=1)
    assert np.abs(B[:, 0] - pts["rod.frame.x"]).max() < 1e-9     # observed 6.2e-13
    assert np.abs(B[:, 1] - pts["rod.frame.y"]).max() < 1e-9     # observed 2.8e-13


def test_spatial_slider_crank_frames_at_joints(examples):
    """The spatial slider-crank with the coupler's frame at the spherical pin and
    offsets on the crank and the slider: the same trajectories."""
    data = _load(examples, "spatial_slider_crank_dynamic.yaml")
    framed = with_frames(data, {"coupler": [-0.2, 0.0, 0.0], "crank": [0.03, 0.01, -0.02],
                                "slider": [0.01, 0.02, 0.03]})
    r0 = _run(data, t_end=0.3, **TIGHT)
    r1 = _run(framed, t_end=0.3, **TIGHT)
    q0, q1 = np.asarray(r0.series("q")), np.asarray(r1.series("q"))
    assert_same_motion(q0, q1)                              # observed max |dq| 0
    # the model's own points (A, B) are the same global points in both
    p0 = dict(zip(r0.labels("points"), np.asarray(r0.series("points")).T, strict=True))
    p1 = dict(zip(r1.labels("points"), np.asarray(r1.series("points")).T, strict=True))
    for name in ("A.x", "A.zd", "B.y", "B.xdd"):
        assert np.abs(p0[name] - p1[name]).max() < 1e-9        # observed 0
    assert "coupler.frame.xdd" in p1 and "coupler.frame.x" not in p0


def test_zero_offset_is_bitwise_the_centroidal_model(examples):
    """``center_of_mass: [0, 0]`` moves nothing: the same numbers bit for bit."""
    data = _load(examples, "slider_crank_dynamic.yaml")
    framed = copy.deepcopy(data)
    for b in framed["bodies"]:
        b["center_of_mass"] = [0.0, 0.0]
    q0 = np.asarray(_run(data, t_end=0.2).series("q"))
    q1 = np.asarray(_run(framed, t_end=0.2).series("q"))
    assert np.array_equal(q0, q1)


# -- (b) Nikravesh (1988), Problem 9.4 -------------------------------------------------
def _problem_9_4(m, Jc, s, q, qd, F, p, T, g):
    """The non-centroidal planar equations of a free body (Nikravesh (1988),
    Problem 9.4), coordinates of the reference point O: with B = dA/dphi,

        [ m I       m B s' ] [r_O'']   [ F + m g + m A s' phi'^2 ]
        [ m s'^T B^T   J_O ] [phi'' ] = [ n_O                     ]

    J_O = J_C + m s'^T s'; n_O the moment about O of the force F at the frame
    point p', of the gravity m g at the centroid and of the torque T."""
    phi, w = q[2], qd[2]
    A = _rot2(phi)
    B = np.array([[-math.sin(phi), -math.cos(phi)], [math.cos(phi), -math.sin(phi)]])
    Bs = B @ s
    M = np.zeros((3, 3))
    M[:2, :2] = m * np.eye(2)
    M[:2, 2] = M[2, :2] = m * Bs
    M[2, 2] = Jc + m * float(s @ s)
    cross = lambda a, b: a[0] * b[1] - a[1] * b[0]     # noqa: E731
    rhs = np.zeros(3)
    rhs[:2] = F + m * g + m * (A @ s) * w ** 2
    rhs[2] = cross(A @ p, F) + cross(A @ s, m * g) + T
    return np.linalg.solve(M, rhs)


def test_problem_9_4_reference_point_acceleration(backend):
    """The reference point's acceleration and phi'' from mbcore's shifted model
    equal the non-centroidal equations of Problem 9.4 (derived above in NumPy) at
    random states."""
    rng = np.random.default_rng(94)
    for _ in range(6):
        mass, Jc = rng.uniform(0.5, 3.0), rng.uniform(0.05, 0.5)
        s, p = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
        q, qd = rng.uniform(-2, 2, 3), rng.uniform(-3, 3, 3)
        F, T, g = rng.uniform(-5, 5, 2), rng.uniform(-2, 2), np.array([0.0, -9.81])
        m = Model("free")
        m.set_gravity(*g)
        m.add_body("b", mass=mass, inertia=Jc, position=q[:2], angle=q[2],
                   velocity=qd[:2], angular_velocity=qd[2], center_of_mass=s)
        m.add_force("force", body="b", point=p, fx=F[0], fy=F[1])
        m.add_force("torque", body="b", torque=T)
        sysm = m.compile(kernels=backend)
        st = sysm.initial_state()
        qdd, _ = AccelerationSolver(sysm).solve(st.q, st.qd, 0.0)
        pk = sysm.point_kinematics(st.q, st.qd, qdd)
        k = sysm.point_names.index("b.frame")
        row = np.asarray(pk).reshape(len(sysm.point_names), 6)[k]
        want = _problem_9_4(mass, Jc, s, q, qd, F, p, T, g)
        # the frame point is where the model put it
        np.testing.assert_allclose(row[:2], q[:2], rtol=0, atol=1e-13)   # observed 0 (rounding of r_C - A s_C: ~1e-16)
        np.testing.assert_allclose(row[2:4], qd[:2], rtol=0, atol=1e-13)  # observed 1.1e-16: 900x margin
        # observed max |difference| 1.4e-14 (r_O''), 2.0e-14 (phi''); both backends;
        # accelerations up to 19
        np.testing.assert_allclose(row[4:6], want[:2], rtol=0, atol=1e-11)
        np.testing.assert_allclose(qdd[2], want[2], rtol=0, atol=1e-11)


def _skew(u):
    return np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])


def _spatial_about_o(m, Jc, s, A, w, F, p, T, g):
    """The spatial analogue of Problem 9.4: Newton-Euler equations of a free body
    about a body point O (the Newton-Euler equations of Nikravesh (1988), Ch. 11,
    moved from the centroid), with
    u = A s', J_O = A (J'_C + m (s'ᵀs' I - s's'ᵀ)) Aᵀ:

        m (r_O'' - u~ alpha + w~ w~ u) = F + m g
        J_O alpha + w~ J_O w + m u~ r_O'' = n_O
    """
    u = A @ s
    JO = A @ (Jc + m * (float(s @ s) * np.eye(3) - np.outer(s, s))) @ A.T
    M = np.zeros((6, 6))
    M[:3, :3] = m * np.eye(3)
    M[:3, 3:] = -m * _skew(u)
    M[3:, :3] = m * _skew(u)
    M[3:, 3:] = JO
    nO = np.cross(u, m * g) + np.cross(A @ p, F) + T
    rhs = np.concatenate([F + m * g - m * np.cross(w, np.cross(w, u)),
                          nO - np.cross(w, JO @ w)])
    return np.linalg.solve(M, rhs)


def test_spatial_reference_point_acceleration(backend):
    """The spatial analogue: the frame point's acceleration and the angular
    acceleration from mbcore's shifted model at random states."""
    rng = np.random.default_rng(944)
    g = np.array([0.0, 0.0, -9.81])
    for _ in range(5):
        mass = rng.uniform(0.5, 3.0)
        Jc = np.diag(rng.uniform(0.2, 0.4, 3))
        s, p = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
        e = rng.normal(size=4)
        e /= np.linalg.norm(e)
        w, v = rng.uniform(-3, 3, 3), rng.uniform(-2, 2, 3)
        F, T = rng.uniform(-5, 5, 3), rng.uniform(-2, 2, 3)
        m = Model("free3")
        m.set_dimensions(3)
        m.set_gravity(*g)
        m.add_body("b", mass=mass, inertia=Jc.tolist(), position=rng.uniform(-1, 1, 3),
                   orientation=e.tolist(), velocity=v, angular_velocity=w,
                   center_of_mass=s)
        m.add_force("force", body="b", point=p, fx=F[0], fy=F[1], fz=F[2])
        m.add_force("torque", body="b", tx=T[0], ty=T[1], tz=T[2])
        sysm = m.compile(kernels=backend)
        st = sysm.initial_state()
        qdd, _ = AccelerationSolver(sysm).solve(st.q, st.qd, 0.0)
        pk = np.asarray(sysm.point_kinematics(st.q, st.qd, qdd)).reshape(-1, 9)
        row = pk[sysm.point_names.index("b.frame")]
        ang = np.asarray(sysm.angular_kinematics(st.q, st.qd, qdd))[0]
        want = _spatial_about_o(mass, Jc, s, rotation(e), w, F, p, T, g)
        np.testing.assert_allclose(row[3:6], v, rtol=0, atol=1e-12)    # observed 8.9e-16: 1100x margin
        np.testing.assert_allclose(ang[:3], w, rtol=0, atol=1e-12)     # observed 8.9e-16: 1100x margin
        # observed max |difference| 3.6e-14 (r_O''), 4.3e-14 (alpha); both backends;
        # accelerations up to 27
        np.testing.assert_allclose(row[6:9], want[:3], rtol=0, atol=1e-10)
        np.testing.assert_allclose(ang[3:], want[3:], rtol=0, atol=1e-10)


# -- (c) a pendulum with its frame at the pivot ------------------------------------------
def test_pendulum_frame_at_pivot_period_and_energy():
    """A uniform rod of length l hanging from its end, frame at the pivot, inertia
    about the pivot (m l^2 / 3): period 4 sqrt(J_O / (m g d)) K(sin^2(theta0/2))
    (the exact period of the physical pendulum, d = l/2) and constant energy."""
    from scipy.special import ellipk
    mass, l, g, th0 = 1.5, 0.8, 9.81, 0.9
    m = Model("pendulum")
    m.set_gravity(0.0, -g)
    m.add_body("rod", mass=mass, inertia=mass * l ** 2 / 3, inertia_about="origin",
               center_of_mass=[l / 2, 0.0], angle=-math.pi / 2 + th0)
    m.add_joint("revolute", body_i="ground", body_j="rod", point_i=[0, 0], point_j=[0, 0])
    J_O, d = mass * l ** 2 / 3, l / 2
    period = 4.0 * math.sqrt(J_O / (mass * g * d)) * ellipk(math.sin(th0 / 2) ** 2)
    r = mbcore.run(m, analysis="dynamic",
                   settings={"t_end": 1.2 * period, "output_step": 1e-3,
                             "integrator": "dop853", "rtol": 1e-11, "atol": 1e-13})
    t = np.asarray(r.t)
    Q, QD = np.asarray(r.series("q")), np.asarray(r.series("qd"))
    w = QD[:, 2]
    # released at rest at +theta0: the next turning point (-theta0) is half a period
    k = np.flatnonzero((w[:-1] < 0) & (w[1:] >= 0))
    assert len(k) == 1
    half = t[k[0]] - w[k[0]] * (t[k[0] + 1] - t[k[0]]) / (w[k[0] + 1] - w[k[0]])
    # observed relative error 1.0e-10 (linear interpolation of the zero crossing)
    assert abs(2.0 * half - period) / period < 1e-8
    E = 0.5 * mass * (QD[:, 0] ** 2 + QD[:, 1] ** 2) + 0.5 * (J_O - mass * d * d) * w ** 2 \
        + mass * g * Q[:, 1]
    assert np.ptp(E) < 1e-7 * abs(E[0])                     # observed 6.7e-15 relative
    pts = dict(zip(r.labels("points"), np.asarray(r.series("points")).T, strict=True))
    assert np.abs(pts["rod.frame.x"]).max() < 1e-9          # observed 1.0e-15


# -- (d) inertia_about: origin -----------------------------------------------------------
def test_inertia_about_origin_parallel_axis():
    """The centroidal inertia from the one about the frame origin equals the
    second moments of a cloud of point masses taken about its centroid."""
    rng = np.random.default_rng(7)
    mi, ri = rng.uniform(0.1, 1.0, 40), rng.uniform(-1, 1, (40, 3)) + [0.4, -0.3, 0.2]

    def second(r):
        return sum(w * (float(x @ x) * np.eye(3) - np.outer(x, x)) for w, x in zip(mi, r))
    M, c = mi.sum(), (mi[:, None] * ri).sum(0) / mi.sum()
    m = Model("cloud")
    m.set_dimensions(3)
    m.add_body("b", mass=M, inertia=second(ri).tolist(), inertia_about="origin",
               center_of_mass=c)
    sysm = m.compile()
    # observed max |difference| 7.1e-15 (entries up to 13): bound 1e-12, 140x margin
    np.testing.assert_allclose(sysm.body_inertia[0], second(ri - c), rtol=0, atol=1e-12)
    p = Model("plate")
    p.add_body("b", mass=2.0, inertia=1.0, inertia_about="origin", center_of_mass=[0.3, 0.4])
    assert p.compile().mass_diag[2] == 1.0 - 2.0 * 0.25
    bad = Model("bad")
    with pytest.raises(ModelError, match=r"bodies\[0\]\.inertia: .*not positive"):
        bad.add_body("b", mass=2.0, inertia=0.5, inertia_about="origin",
                     center_of_mass=[0.3, 0.4])
    bad3 = Model("bad3")
    bad3.set_dimensions(3)
    with pytest.raises(ModelError, match=r"bodies\[0\]\.inertia: about the centre of mass"):
        bad3.add_body("b", mass=1.0, inertia=[0.1, 0.1, 0.1], inertia_about="origin",
                      center_of_mass=[0.0, 0.0, 0.5])


# -- (e) bad input ---------------------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    ([0.1], r"bodies\[0\]\.center_of_mass: expected 2 numbers, got 1"),
    ([0.1, "x"], r"bodies\[0\]\.center_of_mass\[1\]: expected a number"),
    ("near", r"bodies\[0\]\.center_of_mass: expected 2 numbers"),
])
def test_bad_center_of_mass(value, message):
    with pytest.raises(ModelError, match=message):
        Model.from_dict({"bodies": [{"name": "b", "center_of_mass": value}]})


def test_center_of_mass_units_and_refusals():
    m = Model.from_dict({"units": {"length": "m"},
                         "bodies": [{"name": "b", "center_of_mass": ["10 mm", 0]}]})
    assert m.bodies[0].center_of_mass == (0.01, 0.0)
    with pytest.raises(ModelError, match=r"bodies\[0\]\.inertia_about: expected"):
        Model.from_dict({"bodies": [{"name": "b", "inertia_about": "corner"}]})
    with pytest.raises(ModelError, match=r"bodies\[0\]\.center_of_mass: a particle"):
        Model.from_dict({"bodies": [{"name": "b", "kind": "particle",
                                     "center_of_mass": [0, 0]}]})
    base = {"bodies": [{"name": "a", "center_of_mass": [0.1, 0]}, {"name": "b"}]}
    cases = [
        ({"forces": [{"name": "uf", "type": "user_force", "body_i": "a",
                      "callable": "math:hypot"}]}, r"forces\[0\]\.callable: user_force"),
        ({"forces": [{"name": "d", "type": "damping", "body": "a", "coefficients": 1.0}]},
         r"forces\[0\]\.coefficients: damping"),
        ({"drivers": [{"name": "r", "type": "relative_driver", "body_i": "b",
                       "body_j": "a", "coordinate": "x", "function": 0.0}]},
         r"drivers\[0\]\.coordinate: relative_driver of x"),
    ]
    for extra, message in cases:
        with pytest.raises(ModelError, match=message):
            Model.from_dict({**base, **extra}).compile()
    # the same elements on the body without an offset compile
    Model.from_dict({**base, "forces": [{"name": "d", "type": "damping", "body": "b",
                                         "coefficients": 1.0}]}).compile()
    with pytest.raises(ModelError, match=r"points: point name 'a\.frame' is reserved"):
        Model.from_dict({**base, "points": [{"name": "a.frame", "body": "b",
                                             "at": [0, 0]}]}).compile()


def test_curves_move_with_the_frame(examples):
    """A cam's curve on a body with a frame offset: the same motion as the
    centroidal model (the curve's centre moves by -s_C; default hook for points)."""
    data = {"name": "cam", "gravity": [0, -9.81],
            "bodies": [{"name": "cam", "mass": 1, "inertia": 0.1, "angular_velocity": 3.0},
                       {"name": "follower", "mass": 0.5, "inertia": 0.01,
                        "position": [0.0, 0.12]}],
            "joints": [{"name": "pivot", "type": "revolute", "body_i": "ground",
                        "body_j": "cam", "point_i": [0, 0], "point_j": [0, 0]},
                       {"name": "guide", "type": "translational", "body_i": "ground",
                        "body_j": "follower", "point_i": [0, 0], "point_j": [0, 0],
                        "axis": [0, 1]},
                       {"name": "contact", "type": "cam_roller", "body_i": "cam",
                        "body_j": "follower", "radius": 0.02, "point_j": [0, -0.0],
                        "curve": {"radius": 0.08, "center": [0.02, 0.0]}}],
            "settings": {"analysis": "dynamic", "t_end": 0.3, "output_step": 0.01}}
    framed = with_frames(data, {"cam": [0.01, -0.02], "follower": [0.0, 0.03]})
    for raw in framed["joints"]:
        if raw["type"] == "cam_roller":
            raw["curve"]["center"] = [0.02 - 0.01, 0.0 + 0.02]
    q0 = np.asarray(_run(data, **TIGHT).series("q"))
    q1 = np.asarray(_run(framed, **TIGHT).series("q"))
    assert np.ptp(q0[:, -1]) > 0.5                         # the contact runs along
    assert_same_motion(q0, q1)                              # observed max |dq| 0


# -- (f) save -> load ------------------------------------------------------------------
def test_save_load_round_trip(tmp_path):
    m = Model.from_dict({
        "name": "rt",
        "bodies": [{"name": "b", "mass": 2.0, "inertia": 1.0, "inertia_about": "origin",
                    "center_of_mass": [0.3, 0.1],
                    "shape": {"box": [0.6, 0.2], "offset": [0.3, 0.1]}}],
        "points": [{"name": "tip", "body": "b", "at": [0.6, 0.0]}],
        "joints": [{"name": "pin", "type": "revolute", "body_i": "ground", "body_j": "b",
                    "point_i": [0, 0], "point_j": [0, 0]}]})
    for name in ("m.yaml", "m.json"):
        m.save(tmp_path / name)
        back = Model.from_file(tmp_path / name)
        assert back.to_dict() == m.to_dict()
        d = back.to_dict()
        assert d["bodies"][0]["center_of_mass"] == [0.3, 0.1]
        assert d["bodies"][0]["inertia_about"] == "origin"
        assert d["points"][0]["at"] == [0.6, 0.0]
        assert d["joints"][0]["point_j"] == [0, 0]
    c = m.compile().model                      # the centroidal equivalent the System uses
    assert c.source_model is m and c.bodies[0].center_of_mass is None
    assert c.points[0].at == pytest.approx((0.3, -0.1), abs=1e-15)
    assert c.bodies[0].shape["offset"] == pytest.approx([0.0, 0.0], abs=1e-15)
    assert m.bodies[0].inertia == 1.0 and c.bodies[0].inertia == pytest.approx(0.8)


# -- (g) models without center_of_mass are untouched ------------------------------------
def test_no_center_of_mass_unchanged(examples, monkeypatch):
    """Without center_of_mass the System compiles the model itself, and the run's
    numbers are main's (d9a6151, stored below) and those of a System built without
    the conversion step."""
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    m.validate()
    assert frames.centroidal_model(m) is m
    assert m.compile().model is m
    q = np.asarray(mbcore.run(m, settings={"t_end": 0.5}).series("q"))[-1]
    main = [0.09560438943104427, -0.02932235873115626, 2.843995752695029,
            -0.10672055329733542, -0.023457886984927356, -0.11756003490385689,
            -0.30534010807028505, -3.768346006055911e-15, -9.215253986571448e-15]
    # bitwise equal on the machine that stored them; 1e-9 leaves room for other
    # builds and platforms while catching any shift (>= 1e-3 here)
    np.testing.assert_allclose(q, main, rtol=0, atol=1e-9)
    import mbcore.system.compiled_model as cm
    monkeypatch.setattr(cm, "centroidal_model", lambda model, registry=None: model)
    q_direct = np.asarray(mbcore.run(m, settings={"t_end": 0.5}).series("q"))[-1]
    assert np.array_equal(q, q_direct)


def test_simulation_refuses_moving_geometry():
    """A Simulation may change a stiffness on a body with an offset, not a point."""
    m = Model("sim")
    m.add_body("b", mass=1.0, inertia=0.1, center_of_mass=[0.1, 0.0], position=[0.0, -1.0])
    m.add_force("tsda", "spring", body_i="ground", body_j="b", point_i=[0, 0],
                point_j=[0, 0], stiffness=10.0, free_length=1.0)
    sim = mbcore.Simulation(m)
    sim.set_parameter("spring.stiffness", 20.0)
    with pytest.raises(mbcore.SimulationError, match="geometry on a body with a "
                                                     "center_of_mass"):
        sim.set_parameter("spring.point_j", [0.0, 0.1])


def test_example_slider_crank_frames(examples):
    """examples/slider_crank_frames.yaml moves as slider_crank_dynamic.yaml."""
    r0 = mbcore.run(examples / "slider_crank_dynamic.yaml", settings={"t_end": 1.0,
                                                                      **TIGHT})
    r1 = mbcore.run(examples / "slider_crank_frames.yaml", settings={
        "t_end": 1.0, "output_step": 0.01, **TIGHT})
    q0, q1 = np.asarray(r0.series("q")), np.asarray(r1.series("q"))
    # the initial estimates differ (0.0267 = 0.0067 + 2 0.1^2 and rounded positions);
    # both assemble
    assert_same_motion(q0, q1)
    pts = dict(zip(r1.labels("points"), np.asarray(r1.series("points")).T, strict=True))
    assert np.abs(pts["crank.frame.x"]).max() < 1e-9        # the pivot; observed 1e-15
    assert r1.labels("points")[0] == "crank.frame.x"


def test_default_points_and_fixed_are_the_reference_frames():
    """Defaults that mean "the body origin" (absolute_driver's point) and held
    positions (fixed) are the reference frame's on a body with center_of_mass."""
    m = Model("drv")
    m.add_body("b", mass=1.0, inertia=0.1, position=[0.5, 0.0], angle=0.4,
               center_of_mass=[0.2, 0.1])
    m.add_driver("absolute_driver", body="b", coordinate="x", function="0.5 + 0.1*t")
    m.add_driver("absolute_driver", body="b", coordinate="y", function=0.0)
    m.add_driver("absolute_driver", body="b", coordinate="phi", function=0.4)
    r = mbcore.run(m, analysis="kinematic", settings={"t_end": 1.0, "output_step": 0.5})
    pts = dict(zip(r.labels("points"), np.asarray(r.series("points")).T, strict=True))
    # the frame origin is driven: observed |error| 1.1e-16 (x) and 0 (y); the driver
    # rows are linear in r: bound 1e-12, ≥ 9000x margin
    np.testing.assert_allclose(pts["b.frame.x"], 0.5 + 0.1 * np.asarray(r.t), rtol=0,
                               atol=1e-12)
    np.testing.assert_allclose(pts["b.frame.y"], 0.0, rtol=0, atol=1e-12)
    f = Model("fix")
    f.add_body("b", mass=1.0, inertia=0.1, position=[0.5, 0.0], angle=0.4,
               center_of_mass=[0.2, 0.1])
    f.add_joint("fixed", body="b", position=[1.0, 2.0], angle=0.3)
    sysm = f.compile()
    from mbcore.solve.assembly import assemble
    st = sysm.initial_state()
    q = assemble(sysm, st.q, st.qd, 0.0).q
    want = np.array([1.0, 2.0]) + _rot2(0.3) @ [0.2, 0.1]     # the centroid's
    np.testing.assert_allclose(q[:2], want, rtol=0, atol=1e-12)  # observed 0 (linear rows)


def test_viewer_and_plots_draw_in_the_centroidal_frames(examples):
    """The 3D viewer and the 2D drawings place body-local data (shape offsets,
    joint points) in the frames of q, the centroids'."""
    from mbcore.results.plotting import geometry
    from mbcore.results.viewer import build_scene
    r = mbcore.run(examples / "slider_crank_frames.yaml", settings={"t_end": 0.1})
    scene = build_scene(r)
    shapes = {b.name: b.shapes[0] for b in scene.bodies}
    # the rod's box at [-0.25, 0] of its frame: 0.05 from its centroid at [-0.3, 0]
    assert shapes["rod"].offset == pytest.approx((0.05, 0.0, 0.0), abs=1e-15)
    assert shapes["crank"].offset == pytest.approx((0.0, 0.0, 0.0), abs=1e-15)
    pts = dict(geometry(r).bodies["crank"].points)
    assert pts["A"] == pytest.approx((0.1, 0.0), abs=1e-15)     # the pivot
    assert pts["B"] == pytest.approx((-0.1, 0.0), abs=1e-15)    # the crank pin
