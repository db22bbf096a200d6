"""Constraint types C5-C9, D4, D5 (spec/planar.md §1) checked independently of their
derivation, on both backends, plus the joint-local reactions of every built-in type:

* Jacobian against 4th-order central differences of phi (relative error <= 1e-7);
* nu against -dPhi/dt at fixed q;
* gamma against the second time derivative of Phi(q(t), t) along a random smooth
  trajectory, d2Phi/dt2 = Phi_q qdd - gamma (5-point stencil; relative <= 1e-6);
* compiled kernels == NumPy reference to 1e-12 on random and near-singular states;
* ``reaction_local``: the documented physical meaning of every local component
  rebuilds the global reactions +Phi_q^T lam (spec §2);
* validation errors name the key path.
"""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import Model, ModelError
from mbcore.system import compiled_available

NEW_TYPES = {"distance", "distance_driver", "revolute_translational", "translational_002",
             "gear", "rack_pinion", "point_driver"}


def catalogue_model() -> Model:
    """Every new type at least twice (groups with ne > 1), ground on either side."""
    rng = np.random.default_rng(17)
    m = Model("catalogue")
    for k in range(5):
        m.add_body(f"b{k}", position=rng.normal(size=2), angle=rng.normal())
    m.add_point("T1", "b1", (0.4, 0.3))
    # C6 / D4
    m.add_joint("distance", "d1", body_i="b0", body_j="b1", point_i=(0.3, -0.2),
                point_j=(-0.5, 0.4))
    m.add_joint("distance", "d2", body_i="ground", body_j="b2", point_i=(1.0, 0.5),
                point_j=(0.2, 0.1), length=1.7)
    m.add_driver("distance_driver", "dd1", body_i="b1", body_j="b3", point_i="T1",
                 function="1.5 + 0.3*sin(2*t)")
    m.add_driver("distance_driver", "dd2", body_i="b4", body_j="ground", point_j=(-0.5, 0.2),
                 function={"polynomial": [1.2, 0.4, -0.3, 0.1]})
    # C7
    m.add_joint("revolute_translational", "rt1", body_i="b0", body_j="b2", point_i=(0.1, 0.2),
                point_j=(-0.3, 0.5), axis=(0.6, 0.8))
    m.add_joint("revolute_translational", "rt2", body_i="ground", body_j="b3",
                point_i=(0.5, -0.2), axis=(1.0, -0.3))
    m.add_joint("revolute_translational", "rt3", body_i="b4", body_j="ground",
                point_i=(0.2, 0.1), point_j=(0.7, 0.3), axis=(-0.2, 1.0))
    # C5
    m.add_joint("translational_002", "tt1", body_i="b1", body_j="b2", r_ij=(0.0, 0.5),
                r_ji=(0.1, -1.5))
    m.add_joint("translational_002", "tt2", body_i="ground", body_j="b4", r_ij=(0.3, -1.0),
                r_ji=(-0.2, 0.7))
    # C8: fixed centres (carrier = ground), internal on a carrier, sun = ground
    m.add_joint("gear", "g1", body_i="b0", body_j="b1", radius_i=0.3, radius_j=0.7)
    m.add_joint("gear", "g2", body_i="b2", body_j="b3", radius_i=0.2, radius_j=0.9,
                kind="internal", carrier="b4")
    m.add_joint("gear", "g3", body_i="ground", body_j="b1", radius_i=0.5, radius_j=0.25,
                carrier="b2")
    # C9
    m.add_joint("rack_pinion", "rp1", body_i="b0", body_j="b3", radius=0.4,
                point_i=(0.1, -0.2), point_j=(0.3, 0.2), axis=(0.8, -0.6))
    m.add_joint("rack_pinion", "rp2", body_i="b2", body_j="ground", radius=0.25,
                point_j=(0.0, -1.0), axis=(1.0, 0.2), side="right")
    m.add_joint("rack_pinion", "rp3", body_i="b4", body_j="b1", radius=0.6, point_i=(0.2, 0.0))
    # D5
    m.add_driver("point_driver", "pd1", body="b1", direction=(3.0, 4.0), point=(0.2, -0.1),
                 function="0.4 - 0.7*t + 0.2*t**2")
    m.add_driver("point_driver", "pd2", body="b4", direction=(-1.0, 0.2),
                 function={"table": {"t": [0, 0.5, 1.0, 1.5, 2.0],
                                     "y": [0, 0.2, 0.1, 0.4, 0.3]}})
    return m


@pytest.fixture(scope="module")
def model():
    return catalogue_model()


def _rel(a, b, *scales):
    """max |a - b| per row relative to the row's largest magnitude (floor 1e-300)."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    mags = [np.abs(np.atleast_2d(x)).max(axis=1) for x in (a, b, *scales)]
    scale = np.maximum(np.max(mags, axis=0), 1e-300)
    return np.abs(a - b).max(axis=1) / scale


def test_every_new_type_is_exercised_and_compiled(model, backend):
    sysm = model.compile(kernels=backend)
    names = {g.ctype.name for g in sysm.groups}
    assert names == NEW_TYPES
    assert all(g.ne >= 2 for g in sysm.groups)
    if backend == "compiled":
        assert all(g.compiled for g in sysm.groups)


def test_jacobian_matches_finite_differences(model, backend):
    sysm = model.compile(kernels=backend)
    rng = np.random.default_rng(1)
    h = 1e-3
    worst = 0.0
    for _ in range(4):
        q = rng.normal(size=sysm.n)
        t = float(rng.uniform(0.1, 1.9))
        J = sysm.jacobian_dense(q, t)
        Jfd = np.empty_like(J)
        for k in range(sysm.n):
            e = np.zeros(sysm.n)
            e[k] = h
            f = [sysm.phi(q + c * e, t).copy() for c in (-2, -1, 1, 2)]
            Jfd[:, k] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        err = _rel(J, Jfd)
        worst = max(worst, err.max())
        bad = np.nonzero(err > 1e-7)[0]
        assert not len(bad), [sysm.constraint_names[r] for r in bad]
    assert worst < 1e-7


def test_nu_is_minus_phi_t(model, backend):
    sysm = model.compile(kernels=backend)
    rng = np.random.default_rng(2)
    h = 1e-3
    for _ in range(4):
        q = rng.normal(size=sysm.n)
        t = float(rng.uniform(0.2, 1.8))
        f = [sysm.phi(q, t + c * h).copy() for c in (-2, -1, 1, 2)]
        dphidt = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        nu = sysm.nu(q, t).copy()
        err = np.abs(nu + dphidt) / np.maximum(1.0, np.abs(nu))
        bad = np.nonzero(err > 1e-7)[0]
        assert not len(bad), [sysm.constraint_names[r] for r in bad]


def _trajectory(n, rng):
    a, b, c, w = (rng.normal(size=n) for _ in range(4))

    def q(t):
        return a + b * t + 0.5 * c * t ** 2 + 0.3 * np.sin(w * t)

    def qd(t):
        return b + c * t + 0.3 * w * np.cos(w * t)

    def qdd(t):
        return c - 0.3 * w ** 2 * np.sin(w * t)
    return q, qd, qdd


def test_gamma_is_second_time_derivative_along_trajectory(model, backend):
    sysm = model.compile(kernels=backend)
    rng = np.random.default_rng(3)
    q, qd, qdd = _trajectory(sysm.n, rng)
    h = 1e-3
    for t in (0.3, 0.8, 1.4):   # away from the table's knots (0.5, 1.0, 1.5)
        P = [sysm.phi(q(t + c * h), t + c * h).copy() for c in (-2, -1, 0, 1, 2)]
        d2phi = (-P[0] + 16 * P[1] - 30 * P[2] + 16 * P[3] - P[4]) / (12 * h * h)
        dphi = (P[0] - 8 * P[1] + 8 * P[3] - P[4]) / (12 * h)
        J = sysm.jacobian_dense(q(t), t)
        gamma = sysm.gamma(q(t), qd(t), t).copy()
        lhs = J @ qdd(t) - gamma
        err = _rel(lhs[:, None], d2phi[:, None], (J @ qdd(t))[:, None], gamma[:, None])
        bad = np.nonzero(err > 1e-6)[0]
        assert not len(bad), [(sysm.constraint_names[r], err[r]) for r in bad]
        # velocity equation: dPhi/dt = Phi_q qd - nu
        vel = J @ qd(t) - sysm.nu(q(t), t)
        err = _rel(vel[:, None], dphi[:, None], (J @ qd(t))[:, None])
        assert err.max() < 1e-7


def _special_states(n, rng):
    """Random states, and near-singular ones: coincident bodies (coincident link
    points, a_i + a_j ~ 0), tiny and large (accumulated) angles."""
    states = []
    for _ in range(20):
        states.append((rng.normal(scale=3, size=n), rng.normal(scale=3, size=n)))
    same = np.tile([0.3, -0.2, 0.7], n // 3)
    states.append((same, rng.normal(size=n)))
    states.append((same + 1e-10 * rng.normal(size=n), rng.normal(size=n)))
    states.append((np.zeros(n), np.zeros(n)))
    states.append((1e-9 * rng.normal(size=n), 1e-9 * rng.normal(size=n)))
    big = rng.normal(size=n)
    big[2::3] = rng.uniform(-60, 60, size=n // 3)
    states.append((big, rng.normal(scale=5, size=n)))
    return states


@pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")
def test_compiled_equals_numpy_reference(model):
    a = model.compile(kernels="compiled")
    b = model.compile(kernels="numpy")
    rng = np.random.default_rng(4)
    for q, qd in _special_states(a.n, rng):
        t = float(rng.uniform(0.0, 2.0))
        for name, fa, fb in (
                ("phi", a.phi(q, t), b.phi(q, t)),
                ("jacobian", a.jacobian_dense(q, t), b.jacobian_dense(q, t)),
                ("nu", a.nu(q, t), b.nu(q, t)),
                ("gamma", a.gamma(q, qd, t), b.gamma(q, qd, t))):
            np.testing.assert_allclose(fa, fb, rtol=1e-12, atol=1e-12, err_msg=name)


def test_sparsity_and_ground_columns(model, backend):
    """Blocks only in the element's own bodies' columns; a gear's carrier column
    carries -(c_i + c_j)."""
    sysm = model.compile(kernels=backend)
    q = np.random.default_rng(5).normal(size=sysm.n)
    J = sysm.jacobian_dense(q, 0.5)
    for g in sysm.groups:
        for e, name in enumerate(g.names):
            rows = sysm.element_rows[name]
            cols = {int(o) + c for o in g.boff[e] if o < sysm.n for c in range(3)}
            other = [k for k in range(sysm.n) if k not in cols]
            assert np.all(J[rows][:, other] == 0.0), name
    r = sysm.element_rows["g2"].start
    idx = sysm.coordinate_index
    assert J[r, idx("b2.phi")] == pytest.approx(0.2)
    assert J[r, idx("b3.phi")] == pytest.approx(-0.9)       # internal: -rho_j
    assert J[r, idx("b4.phi")] == pytest.approx(0.7)        # -(0.2 - 0.9)


# ---------------------------------------------------------------------------------
# local reactions: every component's documented meaning rebuilds +Phi_q^T lam
# ---------------------------------------------------------------------------------
def local_reactions(sysm, q, t, lam) -> dict[str, np.ndarray]:
    """Element name -> its ``reaction_local`` components."""
    qx = np.concatenate([q, np.zeros(3)])
    fv = sysm.functions_at(t)
    out = {}
    for g in sysm.groups:
        qb = qx[g.boff[:, :, None] + np.arange(3)]
        lam_g = lam[g.row[:, None] + np.arange(g.m)]
        loc = np.asarray(g.ctype.reaction_local(g.par, qb, t, fv[g.fidx], lam_g))
        assert loc.shape == (g.ne, len(g.ctype.local_labels)), g.ctype.name
        for e, name in enumerate(g.names):
            out[name] = loc[e]
    return out


def _A(phi):
    c, s = np.cos(phi), np.sin(phi)
    return np.array([[c, -s], [s, c]])


def _R(v):
    return np.array([-v[1], v[0]])


def _force_at(f, point, origin):
    """Generalised force of a force f applied at point on a body with origin."""
    d = point - origin
    return np.array([f[0], f[1], d[0] * f[1] - d[1] * f[0]])


def rebuild(ctype, vals, loc, body_q, t, sysm):
    """The global reactions [fx, fy, n] per body implied by the documented meaning
    of the local components ``loc`` (docs/constraints.md)."""
    name = ctype.name
    qi = body_q[0]
    ri, Ai = qi[:2], _A(qi[2])
    if name == "revolute":
        f = Ai @ loc
        qj = body_q[1]
        Pi = ri + Ai @ vals["point_i"]
        Pj = qj[:2] + _A(qj[2]) @ vals["point_j"]
        return [_force_at(f, Pi, ri), _force_at(-f, Pj, qj[:2])]
    if name in ("translational", "revolute_translational"):
        qj = body_q[1]
        n = _R(Ai @ (np.asarray(vals["axis"]) / np.hypot(*vals["axis"])))
        Pj = qj[:2] + _A(qj[2]) @ vals["point_j"]
        gi = _force_at(loc[0] * n, Pj, ri)
        gj = _force_at(-loc[0] * n, Pj, qj[:2])
        if name == "translational":
            gi[2] += loc[1]
            gj[2] -= loc[1]
        return [gi, gj]
    if name == "translational_002":
        qj = body_q[1]
        ai, aj = Ai @ vals["r_ij"], _A(qj[2]) @ vals["r_ji"]
        f = loc[0] * ai / np.hypot(*ai)
        p = qj[:2] + aj
        gi = _force_at(f, p, ri)
        gi[2] += loc[1]
        gj = _force_at(-f, p, qj[:2])
        gj[2] -= loc[1]
        return [gi, gj]
    if name == "fixed":
        return [loc]
    if name in ("absolute", "absolute_driver"):
        k = ("x", "y", "phi").index(vals["coordinate"])
        if k == 2:
            return [np.array([0.0, 0.0, loc[0]])]
        f = np.zeros(2)
        f[k] = loc[0]
        return [_force_at(f, ri + Ai @ (vals.get("point") or (0.0, 0.0)), ri)]
    if name == "relative_driver":
        k = ("x", "y", "phi").index(vals["coordinate"])
        g = np.zeros(3)
        g[k] = loc[0]
        return [g, -g]
    if name in ("distance", "distance_driver"):
        qj = body_q[1]
        Pi = ri + Ai @ vals["point_i"]
        Pj = qj[:2] + _A(qj[2]) @ vals["point_j"]
        u = (Pj - Pi) / np.hypot(*(Pj - Pi))       # tension pulls P_i towards P_j
        return [_force_at(loc[0] * u, Pi, ri), _force_at(-loc[0] * u, Pj, qj[:2])]
    if name == "gear":
        s = 1.0 if vals["kind"] == "external" else -1.0
        F = loc[0]
        return [np.array([0, 0, vals["radius_i"] * F]), np.array([0, 0, s * vals["radius_j"] * F]),
                np.array([0, 0, -(vals["radius_i"] + s * vals["radius_j"]) * F])]
    if name == "rack_pinion":
        qj = body_q[1]
        Aj = _A(qj[2])
        u = Aj @ (np.asarray(vals["axis"]) / np.hypot(*vals["axis"]))
        rho = vals["radius"] * (1.0 if vals["side"] == "left" else -1.0)
        K = ri + Ai @ vals["point_i"] - rho * _R(u)          # pitch point
        return [_force_at(loc[0] * u, K, ri), _force_at(-loc[0] * u, K, qj[:2])]
    if name == "point_driver":
        u = np.asarray(vals["direction"]) / np.hypot(*vals["direction"])
        return [_force_at(loc[0] * u, ri + Ai @ vals["point"], ri)]
    raise AssertionError(f"no reconstruction for {name}")


def _check_rebuild(sysm, q, t, lam, skip=()):
    glob = dict(zip(sysm.reaction_labels, sysm.reactions(q, t, lam).copy(), strict=True))
    loc = local_reactions(sysm, q, t, lam)
    qx = np.concatenate([q, np.zeros(3)])
    checked = set()
    for g in sysm.groups:
        if g.ctype.name in skip:
            continue
        for e, name in enumerate(g.names):
            el = next(x for x in sysm.model.constraint_elements() if x.name == name)
            body_q = [qx[o:o + 3] for o in g.boff[e]]
            want = rebuild(g.ctype, el.values, loc[name], body_q, t, sysm)
            for b, key in enumerate(g.ctype.bodies):
                short = key[5:] if key.startswith("body_") else key
                got = [glob[f"{name}.{short}.{c}"] for c in ("fx", "fy", "n")]
                np.testing.assert_allclose(got, want[b], rtol=1e-10, atol=1e-12,
                                           err_msg=f"{name} on {key}")
            checked.add(g.ctype.name)
    return checked


def test_local_reactions_rebuild_global_reactions_new_types(model, backend):
    sysm = model.compile(kernels=backend)
    rng = np.random.default_rng(21)
    for _ in range(3):
        q, lam, t = rng.normal(size=sysm.n), rng.normal(size=sysm.m), 0.7
        # translational_002's normal force is along a_i only once a_i || a_j
        checked = _check_rebuild(sysm, q, t, lam, skip=("translational_002",))
    assert checked == NEW_TYPES - {"translational_002"}


def test_local_reactions_rebuild_global_reactions_existing_types(backend):
    from test_constraints import all_types_model
    sysm = all_types_model().compile(kernels=backend)
    rng = np.random.default_rng(22)
    q, lam = rng.normal(size=sysm.n), rng.normal(size=sysm.m)
    checked = _check_rebuild(sysm, q, 0.4, lam)
    assert checked == {"revolute", "translational", "absolute", "absolute_driver",
                       "relative_driver", "fixed"}


def test_translational_002_local_reaction_when_assembled(backend):
    """At an assembled state (a_i || a_j) the 002 joint's reaction is the normal
    force along a_i / |a_i| plus the torque about p_ji."""
    m = Model("t002")
    u, n = _A(0.4) @ [1.0, 0.0], _A(0.4) @ [0.0, 1.0]     # line through 0 along u
    m.add_body("s", position=n + 0.3 * u, angle=0.4)        # foot point 0.3 u
    m.add_body("g", position=-2.0 * n - 0.5 * u, angle=0.4)  # foot point -0.5 u
    m.add_joint("translational_002", "t", body_i="s", body_j="g", r_ij=(0.0, -1.0),
                r_ji=(0.0, 2.0))
    sysm = m.compile(kernels=backend)
    q = sysm.initial_state().q
    assert np.abs(sysm.phi(q, 0.0)).max() < 1e-12
    lam = np.array([0.7, -1.3])
    _check_rebuild(sysm, q, 0.0, lam)
    loc = local_reactions(sysm, q, 0.0, lam)["t"]
    # normal = lam1 (a_i + a_j).a_i/|a_i| = lam1 * (1 - 2) (a_j = -2 a_i/|a_i|)
    assert loc[0] == pytest.approx(0.7 * (1.0 - 2.0))


# ---------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------
def _compile_one(type_, section="joints", bodies=(("a", (0.0, 0.0), 0.0),
                                                  ("b", (1.0, 0.0), 0.0)), **params):
    m = Model("v")
    for name, pos, ang in bodies:
        m.add_body(name, position=pos, angle=ang)
    (m.add_driver if section == "drivers" else m.add_joint)(type_, "x", **params)
    return m.compile(kernels="numpy")


@pytest.mark.parametrize("type_, section, params, path, msg", [
    ("point_driver", "drivers", dict(body="a", direction=(0, 0), function=0.0),
     "drivers[0].direction", "non-zero direction"),
    ("revolute_translational", "joints", dict(body_i="a", body_j="b", axis=(0.0, 0.0)),
     "joints[0].axis", "non-zero direction"),
    ("rack_pinion", "joints", dict(body_i="a", body_j="b", radius=1.0, axis=(0, 0)),
     "joints[0].axis", "non-zero direction"),
    ("rack_pinion", "joints", dict(body_i="a", body_j="b", radius=-1.0),
     "joints[0].radius", "positive"),
    ("gear", "joints", dict(body_i="a", body_j="b", radius_i=1.0, radius_j=0.0),
     "joints[0].radius_j", "positive"),
    ("gear", "joints", dict(body_i="a", body_j="b", radius_i=1.0, radius_j=1.0,
                            kind="internal"), "joints[0].radius_j", "different"),
    ("gear", "joints", dict(body_i="a", body_j="b", radius_i=1.0, radius_j=2.0,
                            kind="spur"), "joints[0].kind", "external"),
    ("gear", "joints", dict(body_i="a", body_j="b", radius_i=1.0, radius_j=2.0,
                            carrier="a"), "joints[0].carrier", "itself"),
    ("distance", "joints", dict(body_i="a", body_j="b", length=0.0),
     "joints[0].length", "positive"),
    ("distance", "joints", dict(body_i="a", body_j="b", point_j=(-1.0, 0.0)),
     "joints[0].length", "coincide"),
    ("distance_driver", "drivers", dict(body_i="a", body_j="b"),
     "drivers[0].function", "required"),
    ("translational_002", "joints", dict(body_i="a", body_j="b", r_ij=(0, 0), r_ji=(0, 1)),
     "joints[0].r_ij", "non-zero"),
    ("translational_002", "joints", dict(body_i="a", body_j="b", r_ij=(0, 1), r_ji=(0, 0)),
     "joints[0].r_ji", "non-zero"),
    # 002 Table 6.3.1 TRAN 7 and TRAN 8: r'_ij = -r'_ji with equal angles (spec C5)
    ("translational_002", "joints", dict(body_i="a", body_j="b", r_ij=(-1.0, 0.0),
                                         r_ji=(1.0, 0.0)), "joints[0].r_ji", "singular"),
    ("translational_002", "joints", dict(body_i="a", body_j="b", r_ij=(2.5, 0.0),
                                         r_ji=(-2.5, 0.0)), "joints[0].r_ji", "singular"),
])
def test_validation_errors_name_the_key(type_, section, params, path, msg):
    with pytest.raises(ModelError, match=msg) as exc:
        _compile_one(type_, section, **params)
    assert exc.value.path == path


def test_translational_002_opposite_vectors_are_fine_with_relative_angle_pi():
    """r_ij = -r_ji is regular when the bodies are turned by pi (a_i = a_j)."""
    sysm = _compile_one("translational_002", bodies=(("a", (0.0, 0.0), 0.0),
                                                     ("b", (1.0, 0.0), np.pi)),
                        body_i="a", body_j="b", r_ij=(-1.0, 0.0), r_ji=(1.0, 0.0))
    assert np.linalg.matrix_rank(sysm.jacobian_dense(sysm.initial_state().q, 0.0)) == 2


def test_named_points_and_model_file_round_trip(tmp_path):
    """New types load from YAML data (named points, function specs) and survive
    save/load."""
    text = """
name: rt
bodies:
  - {name: yoke, position: [1, 0]}
  - {name: crank, position: [0, 0], angle: 0.3}
points:
  - {name: pin, body: crank, at: [1, 0]}
joints:
  - {name: slot, type: revolute_translational, body_i: yoke, body_j: crank, point_j: pin,
     axis: [0, 1]}
  - {name: mesh, type: gear, body_i: yoke, body_j: crank, radius_i: 1, radius_j: 2, kind: internal}
drivers:
  - {name: push, type: point_driver, body: yoke, direction: [2, 0], function: {kap: [1, 0.5, 0]}}
  - {name: len, type: distance_driver, body_i: ground, body_j: crank, point_j: pin, function: 1.5}
"""
    m = Model.from_text(text)
    sysm = m.compile(kernels="numpy")
    assert sysm.constraint_names == ["slot.n", "mesh.mesh", "push.c", "len.c"]
    p = tmp_path / "m.yaml"
    m.save(p)
    assert Model.from_file(p).compile(kernels="numpy").constraint_names == sysm.constraint_names
    bad = text.replace("axis: [0, 1]}", "axis: [0, 1], pont_i: 0}")
    with pytest.raises(ModelError, match=r"joints\[0\]\.pont_i: unknown key \(did you mean "
                                         r"'point_i'\?\)"):
        Model.from_text(bad)


def test_constraints_doc_covers_every_builtin_type():
    """docs/constraints.md has a section per built-in type listing every parameter
    and every local reaction component."""
    from pathlib import Path

    from mbcore.plugins import PluginManager
    doc = (Path(__file__).resolve().parents[1] / "docs" / "constraints.md").read_text()
    reg = PluginManager().registry
    for name in reg.names("constraint"):
        if reg.provider("constraint", name).plugin != "builtin":
            continue
        assert f"## {name} " in doc, name
        section = doc.split(f"## {name} ", 1)[1].split("\n## ", 1)[0]
        cls = reg.get("constraint", name)
        for key in (*cls.params, *cls.local_labels):
            assert f"`{key}`" in section, f"{name}: {key} undocumented"
