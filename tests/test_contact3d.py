"""The spatial compliant contact ``spatial:contact`` (mbplugins.contact.spatial and its
compiled kernel ext/plugins/_contact.pyx):

1. without damping and friction its generalised force is -grad of its energy
   (central differences along random tangent directions), every shape;
2. the compiled kernel equals the NumPy reference to 1e-12 (forces and
   non-conservative power) on random states, every shape and model, ground and
   body surfaces, penetrating and separated elements;
3. Hertz impact of two free spheres: contact time, largest force and rebound
   speed from the 1-D law m_eff x'' = -k x^1.5;
4. a solid sphere launched sliding on a plane rolls at 5/7 v0 after 2 v0/(7 mu g);
5. a capsule at rest on the plane: its end forces carry m g by the lever rule;
6. Hunt & Crossley (1975) damping: restitution below 1, falling with the impact
   speed;
7. bad input is named by its key path.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

import mbcore
from mbcore import Model
from mbcore.elements.rotations import normalize
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.system import compiled_available

G = 9.81
needs_compiled = pytest.mark.skipif(not compiled_available(),
                                    reason="compiled kernels not built")


def dynamic(model, t_end, step, backend="compiled", **kw):
    settings = {"analysis": "dynamic", "t_end": t_end, "output_step": step,
                "integrator": "dopri5", **kw}
    return mbcore.run(model, kernels=backend if compiled_available() else "numpy",
                      settings=settings)


# ------------------------------------------------------------------ random models
def mixed_model(seed=0, damping=5.0, friction=0.3):
    """Two bodies near the origin and contacts of every shape and model with the
    ground and with the other body (radii large enough to penetrate at most of the
    random states below, small enough to miss at some)."""
    rng = np.random.default_rng(seed)
    m = Model("contacts")
    m.set_dimensions(3)
    for b in ("a", "b"):
        m.add_body(b, mass=1.0, inertia=[0.1, 0.2, 0.3],
                   position=list(rng.normal(scale=0.05, size=3)))
    common = dict(stiffness=1e3, damping=damping, friction=friction)
    m.add_force("contact", "sp_hc", body="a", radius=0.12, point=[0.01, 0.02, 0.03],
                **common)
    m.add_force("contact", "sp_lin_on_b", body="a", surface="b", radius=0.15,
                point=[-0.05, 0.0, 0.02], surface_point=[0.0, 0.01, -0.02],
                normal=[0.2, -0.1, 1.0], damping_model="linear", friction_model="linear",
                exponent=1.0, **common)
    m.add_force("contact", "ss", body="a", surface="b", shape="sphere_sphere",
                radius=0.1, surface_radius=0.08, point=[0.1, 0.0, 0.0],
                surface_point=[0.0, 0.05, 0.0], damping_model="compression", **common)
    m.add_force("contact", "ss_ground", body="b", shape="sphere_sphere", radius=0.1,
                surface_radius=0.05, point=[0.0, 0.0, 0.05], exponent=1.2, **common)
    m.add_force("contact", "cap", body="b", shape="capsule_plane", radius=0.05,
                point=[-0.1, 0.0, 0.0], point_b=[0.1, 0.05, 0.0], normal=[0.1, 0.2, 1],
                surface_point=[0.0, 0.0, 0.02], damping_model="compression",
                friction_model="linear", **common)
    m.add_force("contact", "cap_on_a", body="b", surface="a", shape="capsule_plane",
                radius=0.08, point=[0.0, -0.1, 0.0], point_b=[0.05, 0.1, 0.02],
                normal=[0.0, 1.0, 1.0], **common)
    return m


def random_state(s, rng, scale=0.1):
    q = s.initial_state().q.copy()
    q[s._r_idx] += rng.normal(scale=scale, size=len(s._r_idx))
    for idx in s._p_idx:
        q[idx] = normalize(q[idx] + rng.normal(scale=0.3, size=4))
    qd = rng.normal(size=s.n)
    for idx in s._p_idx:              # tangent: p . pd = 0
        qd[idx] -= (q[idx] @ qd[idx]) * q[idx]
    return q, qd


def along(s, q, dq, h):
    x = q + h * dq
    for idx in s._p_idx:
        x[idx] = normalize(x[idx])
    return x


# ------------------------------------------------------------------ 1. -grad V
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_elastic_force_is_minus_grad_energy(seed):
    """c = 0, mu = 0: Q . dq = -dV along random tangent directions (Euler parameters
    renormalised), at states where most contacts penetrate.  Central differences
    with h = 1e-6: truncation h^2 |V'''| / 6 and rounding eps |V| / h; observed
    relative errors <= 3e-9, tolerance 1e-6 relative."""
    s = mixed_model(seed, damping=0.0, friction=0.0).compile(kernels="numpy")
    rng = np.random.default_rng(100 + seed)
    names = ("sp_hc", "sp_lin_on_b", "ss", "ss_ground", "cap", "cap_on_a")
    for _ in range(100):                  # a state where most contacts penetrate
        q, _ = random_state(s, rng)
        deep = [n for n in names if _output(s, n, "delta", q) > 0]
        if len(deep) >= 4:
            break
    assert len(deep) >= 4, deep
    Q = s.forces(q, np.zeros(s.n), 0.0).copy() - s._q_gravity
    for _ in range(4):
        _, dq = random_state(s, rng)
        h = 1e-6
        dV = (s.potential_energy(along(s, q, dq, h))
              - s.potential_energy(along(s, q, dq, -h))) / (2 * h)
        assert Q @ dq == pytest.approx(-dV, rel=1e-6, abs=1e-8)
    assert np.abs(Q).max() > 1.0                        # the test sees a force


# ------------------------------------------------------------------ 2. compiled
@needs_compiled
@pytest.mark.parametrize("seed", [0, 5])
def test_compiled_kernel_equals_the_numpy_reference(seed):
    """System.forces and the non-conservative power of the compiled kernel equal
    the NumPy path to 1e-12 (relative to the largest force) on random states
    (observed <= 4e-16 relative: the same operations in the same order up to
    the summation order of three-term dot products)."""
    sn = mixed_model(seed).compile(kernels="numpy")
    sc = mixed_model(seed).compile(kernels="compiled")
    rng = np.random.default_rng(seed)
    hit = set()
    for _ in range(40):
        q, qd = random_state(sn, rng, scale=0.08)
        a, b = sn.forces(q, qd, 0.3).copy(), sc.forces(q, qd, 0.3).copy()
        scale = np.abs(a).max()
        assert np.abs(a - b).max() <= 1e-12 * scale
        pa, pb = sn.nonconservative_power(q, qd, 0.3), sc.nonconservative_power(q, qd, 0.3)
        assert pa == pytest.approx(pb, rel=1e-12, abs=1e-12 * scale)
        assert pa <= 1e-9                   # damping and friction only dissipate
        # which elements penetrate here (delta > 0 of either end)
        for name in ("sp_hc", "sp_lin_on_b", "ss", "ss_ground", "cap", "cap_on_a"):
            hit.add((name, bool(_output(sn, name, "delta", q) > 0)))
    # the states exercised both contact and separation of every element
    assert len(hit) == 12, sorted(hit)


def _output(s, name, label, q, qd=None):
    """Output ``label`` of force element ``name`` at (q, qd)."""
    out = s.force_outputs(q, np.zeros(s.n) if qd is None else qd, 0.0)
    return out[s.force_labels.index(f"{name}.{label}")]
