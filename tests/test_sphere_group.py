"""Many colliding spheres, ``spatial:sphere_group`` (mbplugins.contact.spheres, its
broad phase mbplugins.contact.broadphase and the compiled kernel
ext/plugins/_sphere_group.pyx), an element on a variable body list
(``ForceType.body_list``):

1. the broad phase (the C kernel's and the NumPy reference's) finds exactly the
   pairs a brute-force O(N^2) check finds: random piles, polydisperse radii,
   touching and near-touching spheres, centres exactly on cell boundaries, hash
   collisions, far-away and negative coordinates;
2. the compiled kernel equals the NumPy reference to 1e-12 (forces,
   non-conservative power) and the outputs count the brute-force contacts;
3. two spheres of a group collide (oblique, spinning, with friction) exactly as one
   ``spatial:contact`` sphere_sphere pair element; a sphere on a plane of the group
   as one sphere_plane element;
4. a small pile in a box keeps T + V - W; the elastic force is -grad V;
5. bad input is named by its key path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import ModelError
from mbcore.system import compiled_available
from mbplugins.contact.broadphase import brute_pairs, grid_pairs

needs_compiled = pytest.mark.skipif(not compiled_available(),
                                    reason="compiled kernels not built")
KERNELS = ["numpy", pytest.param("compiled", marks=needs_compiled)]
#: the dynamic runs: compiled where built (the NumPy path is ~100x slower here)
KERNEL = "compiled" if compiled_available() else "numpy"
BOX = {"floor": {"normal": [0, 0, 1]},
       "x0": {"point": [0.0, 0, 0], "normal": [1, 0, 0]},
       "x1": {"point": [0.5, 0, 0], "normal": [-1, 0, 0]},
       "y0": {"point": [0, 0.0, 0], "normal": [0, 1, 0]},
       "y1": {"point": [0, 0.5, 0], "normal": [0, -1, 0]}}


def _c_pairs(x, R, h):
    from mbplugins._ext._sphere_group import pairs
    return pairs(x, R, h)


# ------------------------------------------------------------------ 1. broad phase
def _configurations():
    rng = np.random.default_rng(7)
    out = []
    for n, size in ((200, 1.0), (500, 2.0), (60, 0.3)):       # random, dense and sparse
        x = rng.uniform(-size, size, (n, 3))
        R = rng.uniform(0.02, 0.1, n)
        out.append(("random", x, R, 2.0 * R.max()))
    # a lattice of touching spheres (distance exactly 2R: not a contact) and of
    # spheres overlapping by one ulp-scale amount, R = 0.25, centres on cell
    # boundaries (h = 0.5 exactly: every centre is a multiple of h)
    g = np.arange(6) * 0.5
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    out.append(("touching on cell boundaries", x, np.full(len(x), 0.25), 0.5))
    x2 = x.copy()
    x2[::2, 2] -= 2.0 ** -40      # every other sphere 2^-40 down: closer to the one below
    out.append(("near-touching on cell boundaries", x2, np.full(len(x), 0.25), 0.5))
    x3 = x.copy()
    x3[::3] += rng.choice([-1, 1], (len(x3[::3]), 3)) * 2.0 ** -30
    out.append(("just off cell boundaries", x3, np.full(len(x), 0.25), 0.5))
    # a cell size much larger than the spheres (many spheres per cell), negative
    # and far-away coordinates (clamped cells), two coincident-cell clusters
    x = np.concatenate([rng.uniform(-1, 1, (300, 3)) - 5.0,
                        rng.uniform(-1, 1, (50, 3)) * 1e-3 + 1e15,
                        rng.uniform(-1, 1, (50, 3)) * 1e-3 - 3e14])
    R = rng.uniform(0.01, 0.2, len(x))
    out.append(("far away, coarse cells", x, R, 3.0))
    return out


@pytest.mark.parametrize("case", _configurations(), ids=lambda c: c[0])
def test_broad_phase_finds_exactly_the_brute_force_pairs(case):
    """The C broad phase and the NumPy grid return the pairs of the brute-force
    check, no more and no fewer (exact equality of the index sets)."""
    name, x, R, h = case
    ref = brute_pairs(x, R)
    # every case has contacts, but the exactly touching lattice (none by design)
    assert (ref.shape[0] == 0) == name.startswith("touching"), name
    np.testing.assert_array_equal(grid_pairs(x, R, h), ref)
    if compiled_available():
        np.testing.assert_array_equal(_c_pairs(x, R, h), ref)


def test_touching_lattice_has_no_contact_and_near_touching_has():
    """The boundary cases above are what they claim: exactly touching spheres
    (distance = 2R in binary) are no contact; moved 2^-40 closer they are."""
    g = np.arange(3) * 0.5
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    R = np.full(len(x), 0.25)
    assert brute_pairs(x, R).shape[0] == 0
    x[0, 0] -= 2.0 ** -40
    x[1, 2] += 2.0 ** -40              # sphere 1 (0, 0, 0.5) moves towards sphere 2
    pairs = brute_pairs(x, R)
    assert pairs.tolist() == [[1, 2]]
    np.testing.assert_array_equal(grid_pairs(x, R, 0.5), pairs)


# ------------------------------------------------------------------ models
def pile(n, seed=0, spacing=0.095, radii=None, gravity=True, **law):
    """n spheres (R = 0.05 or ``radii``) on a jittered lattice in the 0.5 m box BOX,
    spacing below 2R so that neighbours overlap."""
    rng = np.random.default_rng(seed)
    m = Model(f"pile{n}")
    m.set_dimensions(3)
    m.gravity = (0.0, 0.0, -9.81 if gravity else 0.0)
    side = 4
    names = []
    for k in range(n):
        i, j, l = k % side, (k // side) % side, k // side ** 2
        pos = 0.06 + spacing * np.array([i, j, l]) + rng.uniform(-0.01, 0.01, 3)
        m.add_body(f"s{k}", mass=0.5, inertia=[5e-4] * 3, position=list(pos),
                   velocity=list(rng.normal(scale=0.2, size=3)),
                   angular_velocity=list(rng.normal(scale=2.0, size=3)))
        names.append(f"s{k}")
    kw = dict(stiffness=1e5, damping=2e3, friction=0.3, slip_velocity=0.01)
    kw.update(law)
    if radii is None:
        kw["radius"] = 0.05
    else:
        kw["radii"] = list(radii)
    m.add_force("sphere_group", "pile", spheres=names, planes=BOX, **kw)
    return m


def random_state(s, rng):
    from mbcore.elements.rotations import normalize
    q = s.initial_state().q.copy()
    q[s._r_idx] += rng.normal(scale=0.01, size=len(s._r_idx))
    for idx in s._p_idx:
        q[idx] = normalize(q[idx] + rng.normal(scale=0.3, size=4))
    qd = rng.normal(size=s.n)
    for idx in s._p_idx:
        qd[idx] -= (q[idx] @ qd[idx]) * q[idx]
    return q, qd


def _out(s, q, qd, label):
    out = s.force_outputs(q, qd, 0.0)
    return out[s.force_labels.index(f"pile.{label}")]


# ------------------------------------------------------------------ 2. compiled
@needs_compiled
@pytest.mark.parametrize("seed", [0, 3])
def test_compiled_kernel_equals_the_numpy_reference(seed):
    """Forces and non-conservative power of the compiled kernel equal the NumPy
    reference to 1e-12 relative to the largest force (observed <= 8.3e-16 for the
    forces, 4.2e-16 for the power: the same operations, summed in another order;
    margin >= 1200x), polydisperse radii, every damping and friction model; the outputs
    (reference on both paths) count the brute-force sphere pairs and the spheres
    below each plane."""
    rng = np.random.default_rng(seed)
    n = 40
    radii = rng.uniform(0.04, 0.06, n)
    for dm, fm in (("hunt_crossley", "tanh"), ("compression", "linear"), ("linear", "tanh")):
        m = pile(n, seed, radii=radii, damping_model=dm, friction_model=fm)
        sn, sc = m.compile(kernels="numpy"), m.compile(kernels="compiled")
        for _ in range(4):
            q, qd = random_state(sn, rng)
            a, b = sn.forces(q, qd, 0.1).copy(), sc.forces(q, qd, 0.1).copy()
            scale = np.abs(a - sn._q_gravity).max()
            assert scale > 10.0                          # contacts are there
            assert np.abs(a - b).max() <= 1e-12 * scale      # observed 8.3e-16: 1200x
            pa = sn.nonconservative_power(q, qd, 0.1)
            pb = sc.nonconservative_power(q, qd, 0.1, compiled=True)
            assert pb == pytest.approx(pa, rel=1e-12, abs=1e-12 * scale)  # obs. 4.2e-16
            oa, ob = sn.force_outputs(q, qd, 0.1), sc.force_outputs(q, qd, 0.1)
            np.testing.assert_allclose(ob, oa, rtol=1e-12, atol=0)   # observed: equal
            x = q[sn._r_idx].reshape(-1, 3)
            npairs = brute_pairs(x, radii).shape[0]
            below = sum(int(np.sum(radii - (x - np.array(p.get("point", [0, 0, 0]))) @ np.array(p["normal"]) > 0))
                        for p in BOX.values())
            assert npairs > 10
            assert _out(sn, q, qd, "sphere_contacts") == npairs
            assert _out(sn, q, qd, "plane_contacts") == below
            assert _out(sn, q, qd, "contacts") == npairs + below


# ------------------------------------------------------------------ 3. same as pairs
def _two(kind, kernels, group):
    """Two spheres (R = 0.05 and 0.07) colliding obliquely with spin, no gravity:
    as a sphere_group, or as one spatial:contact sphere_sphere element (body = the
    first sphere, surface = the second); ``kind == 'plane'``: one sphere thrown
    spinning onto the floor plane."""
    m = Model("two")
    m.set_dimensions(3)
    m.gravity = (0.0, 0.0, -9.81 if kind == "plane" else 0.0)
    law = dict(stiffness=1e5, damping=3e3, friction=0.4, slip_velocity=0.01)
    if kind == "pair":
        m.add_body("a", mass=0.5, inertia=[5e-4, 6e-4, 7e-4], position=[0, 0, 0],
                   velocity=[1.0, 0.2, 0.0], angular_velocity=[0, 0, 30.0])
        m.add_body("b", mass=0.9, inertia=[2e-3] * 3, position=[0.2, 0.04, 0.01],
                   velocity=[-0.5, 0.0, 0.1], angular_velocity=[5.0, 0, 0])
        if group:
            m.add_force("sphere_group", "g", spheres=["a", "b"], radii=[0.05, 0.07], **law)
        else:
            m.add_force("contact", "g", body="a", surface="b", shape="sphere_sphere",
                        radius=0.05, surface_radius=0.07, **law)
    else:
        m.add_body("a", mass=0.5, inertia=[5e-4] * 3, position=[0, 0, 0.1],
                   velocity=[1.0, 0.3, -1.0], angular_velocity=[0, 20.0, 0])
        if group:
            m.add_force("sphere_group", "g", spheres=["a"], radius=0.05,
                        planes={"floor": {"point": [0, 0, 0.01], "normal": [0.1, 0, 1]}},
                        **law)
        else:
            m.add_force("contact", "g", body="a", radius=0.05, surface_point=[0, 0, 0.01],
                        normal=[0.1, 0, 1], **law)
    return mbcore.run(m, kernels=kernels, settings={
        "analysis": "dynamic", "t_end": 0.08 if kind == "pair" else 0.07,
        "output_step": 0.002, "integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12})


@pytest.mark.parametrize("kind", ["pair", "plane"])
def test_group_moves_as_the_pair_element(kind):
    """The motion of a two-sphere group (an oblique, spinning, frictional
    collision) equals that of one spatial:contact sphere_sphere element, and a
    one-sphere group on a tilted plane that of a sphere_plane element: every
    coordinate and velocity within 1e-10 (observed: bit for bit on both kernel
    paths, the same law on the same pair; the bound allows a summation order).
    Compiled kernels (the NumPy path takes ~60 s here; it equals the compiled
    forces to 1e-12 above)."""
    kernels = KERNEL
    ra, rb = _two(kind, kernels, True), _two(kind, kernels, False)
    bodies = ("a", "b") if kind == "pair" else ("a",)
    moved = 0.0
    for b in bodies:
        for c in ("x", "y", "z", "p0", "p1", "p2", "p3"):
            for pre in ("", "qd/"):
                x, y = ra[f"{pre}{b}.{c}"], rb[f"{pre}{b}.{c}"]
                # observed 0 (bit for bit); 1e-10 allows another summation order
                assert np.abs(x - y).max() <= 1e-10, (b, c, pre)
                moved = max(moved, float(np.ptp(x)))
    assert moved > 0.05
    # the collision happened: the group's largest normal force equals the pair's
    f_pair = rb["forces/g.normal_force"].max()
    assert f_pair > 10.0
    # observed equal bit for bit; 1e-9: the motion's bound above, relative
    assert ra["forces/g.total_normal_force"].max() == pytest.approx(f_pair, rel=1e-9)


# ------------------------------------------------------------------ 4. energy
def test_pile_in_a_box_keeps_its_energy_balance():
    """16 overlapping spheres released in the box (gravity, damping, friction):
    T + V - W stays constant within 1e-6 J (observed 4.4e-9 J with rtol 1e-9 while
    the kinetic energy varies by 7.7 J: margin 227x); contacts are active
    throughout.  Compiled kernels (the NumPy path takes minutes here)."""
    kernels = KERNEL
    m = pile(16, 2)
    res = mbcore.run(m, kernels=kernels, settings={
        "analysis": "dynamic", "t_end": 0.3 if kernels == "compiled" else 0.02,
        "output_step": 0.01, "integrator": "dopri5", "rtol": 1e-9, "atol": 1e-11})
    bal = res.series("energy/balance")
    assert np.ptp(bal) <= 1e-6, np.ptp(bal)       # observed 4.4e-9 J: 227x
    assert res["forces/pile.contacts"].min() >= 4
    assert np.ptp(res.series("energy/kinetic")) > (0.1 if kernels == "compiled" else 0.01)


def test_elastic_force_is_minus_grad_energy():
    """c = 0, mu = 0: Q . dq = -dV along random tangent directions (central
    differences, h = 1e-6; observed <= 7.2e-9 relative, tolerance 1e-6: 139x)."""
    from mbcore.elements.rotations import normalize
    s = pile(24, 5, damping=0.0, friction=0.0).compile(kernels="numpy")
    rng = np.random.default_rng(5)
    q, _ = random_state(s, rng)
    assert _out(s, q, np.zeros(s.n), "contacts") > 10
    Q = s.forces(q, np.zeros(s.n), 0.0).copy() - s._q_gravity

    def along(dq, h):
        x = q + h * dq
        for idx in s._p_idx:
            x[idx] = normalize(x[idx])
        return x
    for _ in range(3):
        _, dq = random_state(s, rng)
        h = 1e-6
        dV = (s.potential_energy(along(dq, h)) - s.potential_energy(along(dq, -h))) / (2 * h)
        dV += s._q_gravity @ dq                           # gravity's part of V
        assert Q @ dq == pytest.approx(-dV, rel=1e-6)      # observed 7.2e-9: 139x


# ------------------------------------------------------------------ 5. errors
@pytest.mark.parametrize("params, key, text", [
    (dict(spheres=[]), "forces[0].spheres", "at least one body"),
    (dict(spheres=["a", "nobody"]), "forces[0].spheres[1]", "unknown body 'nobody'"),
    (dict(spheres=["a", "b", "a"]), "forces[0].spheres[2]", "listed twice"),
    (dict(spheres=["a", "ground"]), "forces[0].spheres[1]", "ground"),
    (dict(spheres="a"), "forces[0].spheres", "expected a list"),
    (dict(radius=None), "forces[0].radius", "required key is missing"),
    (dict(radius=None, radii=[0.1]), "forces[0].radii", "expected 2 radii"),
    (dict(radius=None, radii=[0.1, -0.1]), "forces[0].radii[1]", "must be > 0"),
    (dict(radii=[0.1, 0.1]), "forces[0].radii", "not both"),
    (dict(cell_size=0.1), "forces[0].cell_size", "largest sphere diameter"),
    (dict(planes={"floor": {"normal": [0, 0, 0]}}), "forces[0].planes.floor.normal",
     "non-zero length"),
    (dict(planes={"floor": {"point": [0, 0, 0]}}), "forces[0].planes.floor.normal",
     "required key is missing"),
    (dict(planes={"floor": {"normal": [0, 0, 1], "nrm": 1}}), "forces[0].planes.floor.nrm",
     "unknown key"),
    (dict(stiffness=-1.0), "forces[0].stiffness", "must be > 0"),
    (dict(surface="a"), "forces[0].spheres[0]", "also a fixed body"),
])
def test_bad_input_is_named(params, key, text):
    m = Model("bad")
    m.set_dimensions(3)
    m.add_body("a", mass=1.0, inertia=[0.01] * 3)
    m.add_body("b", mass=1.0, inertia=[0.01] * 3, position=[1, 0, 0])
    kw = dict(spheres=["a", "b"], radius=0.1, stiffness=1e5)
    kw.update(params)
    kw = {k: v for k, v in kw.items() if v is not None}
    with pytest.raises(ModelError) as err:
        m.add_force("sphere_group", "g", **kw)
        m.compile(kernels="numpy")
    assert key in str(err.value) and text in str(err.value), str(err.value)


@pytest.mark.parametrize("kernels", KERNELS)
def test_coincident_centres_are_an_error_naming_the_element(kernels):
    m = Model("coincident")
    m.set_dimensions(3)
    m.add_body("a", mass=1.0, inertia=[0.004] * 3)
    m.add_body("b", mass=1.0, inertia=[0.004] * 3)
    m.add_force("sphere_group", "heap", spheres=["a", "b"], radius=0.1, stiffness=1e5)
    s = m.compile(kernels=kernels)
    with pytest.raises(Exception) as err:
        s.forces(s.initial_state().q, np.zeros(s.n), 0.0)
    assert "coincide" in str(err.value) and "heap" in str(err.value)


def test_example_spheres_in_box_loads_and_runs_briefly():
    """examples/spheres_in_box.yaml compiles with every sphere in one element
    (the docs gallery runs it whole)."""
    path = Path(__file__).resolve().parents[1] / "examples" / "spheres_in_box.yaml"
    model = Model.from_file(str(path))
    res = mbcore.run(model, kernels="compiled" if compiled_available() else "numpy",
                     settings={"t_end": 0.02})
    assert res["forces/box.contacts"][-1] >= 0
