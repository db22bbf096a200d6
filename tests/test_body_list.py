"""The core's force elements on a variable list of bodies (``ForceType.body_list``),
with a third-party Python type that knows nothing of contact: ``py_anchor_springs``,
a linear spring from a fixed ``anchor`` body's origin to every listed body's
origin, one stiffness per listed body (per-element parameters after the head).

1. each element is a group of its own with its fixed bodies then the listed ones,
   and its forces and energy equal those of one planar ``tsda`` per listed body;
2. the list is validated with key paths (empty, unknown, repeated, ground, a fixed
   body listed again, the per-body data of the wrong length);
3. a compiled kernel declares the fixed body count (``n_bodies`` = bodies - 1).
"""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import Model, hookimpl
from mbcore.elements import ForceType
from mbcore.elements.schema import Param
from mbcore.errors import ModelError
from mbcore.plugins import PluginManager
from mbcore.plugins.compiled import fixed_bodies


class AnchorSprings(ForceType):
    """k_i (|r_i - r_a|^2) / 2 for every listed body i (zero free length)."""
    name = "py_anchor_springs"
    description = "linear springs from an anchor body to every listed body (tests)"
    bodies = ("anchor", "bodies")
    body_list = "bodies"
    params = {"anchor": Param("body", "the anchor", default="ground"),
              "bodies": Param("bodies", "the pulled bodies"),
              "stiffness": Param("numbers", "one k per listed body")}
    n_par = 1
    conservative = True
    labels = ("energy",)

    def check(self, spec, path):
        if len(spec["stiffness"]) != len(spec["bodies"]):
            raise ModelError(f"{path}.stiffness", f"expected {len(spec['bodies'])} "
                                                  f"numbers, got {len(spec['stiffness'])}")

    def pack(self, spec, ctx):
        return [float(len(spec["bodies"])), *spec["stiffness"]], []

    def force(self, par, qb, qdb, t, f):
        k = par[:, 1:]                                   # (ne, n)
        d = qb[:, 1:, :2] - qb[:, :1, :2]                # (ne, n, 2)
        g = np.zeros_like(qb)
        g[:, 1:, :2] = -k[:, :, None] * d
        g[:, 0, :2] = np.sum(k[:, :, None] * d, axis=1)
        return g

    def energy(self, par, qb, t, f):
        d = qb[:, 1:, :2] - qb[:, :1, :2]
        return 0.5 * np.sum(par[:, 1:] * np.sum(d * d, -1), -1)

    def outputs(self, par, qb, qdb, t, f):
        return self.energy(par, qb, t, f)[:, None]


class Plugin:
    __version__ = "1.0"

    @hookimpl
    def mbcore_force_types(self):
        return [AnchorSprings]


@pytest.fixture(scope="module")
def pm():
    pm = PluginManager()
    pm.register(Plugin(), name="anchorsprings")
    return pm


def _model(pm, lists, ks, anchor="hub"):
    bodies = [{"name": name, "mass": 1.0, "inertia": 0.1,
               "position": [0.3 * k, 0.1 * k * k]}
              for k, name in enumerate(["hub", "a", "b", "c", "d"])]
    forces = [{"name": f"s{e}", "type": "py_anchor_springs", "anchor": anchor,
               "bodies": list(b), "stiffness": list(k)}
              for e, (b, k) in enumerate(zip(lists, ks))]
    return Model.from_dict({"name": "springs", "bodies": bodies, "forces": forces},
                           registry=pm.registry)


@pytest.mark.parametrize("kernels", ["numpy", "compiled"])
def test_each_element_is_a_group_and_equals_one_spring_per_body(pm, kernels):
    """Two elements (3 and 1 listed bodies): two groups of 4 and 2 bodies; forces
    and energy equal planar tsda springs of zero free length to 1e-13 (observed
    3.5e-16 relative for the forces, 1.9e-16 for the energy: margin >= 280x)."""
    lists, ks = (["a", "b", "c"], ["d"]), ([10.0, 20.0, 30.0], [5.0])
    s = _model(pm, lists, ks).compile(kernels=kernels, plugins=pm)
    groups = [g for g in s.force_groups if g.ftype.name == "py_anchor_springs"]
    assert [g.boff.shape for g in groups] == [(1, 4), (1, 2)]
    assert [g.par.shape for g in groups] == [(1, 4), (1, 2)]
    ref = Model("ref")
    for k, name in enumerate(["hub", "a", "b", "c", "d"]):
        ref.add_body(name, mass=1.0, inertia=0.1, position=(0.3 * k, 0.1 * k * k))
    for bodies, kk in zip(lists, ks):
        for b, k in zip(bodies, kk):
            ref.add_force("tsda", f"{b}_spring", body_i="hub", body_j=b, stiffness=k,
                          free_length=0.0)
    r = ref.compile(kernels=kernels)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, qd = rng.normal(size=s.n), rng.normal(size=s.n)
        Qa, Qb = s.forces(q, qd, 0.0), r.forces(q, qd, 0.0)
        assert np.abs(Qa - Qb).max() <= 1e-13 * np.abs(Qb).max()     # observed 3.5e-16
        # observed 1.9e-16 relative: margin >= 500x
        assert s.potential_energy(q) == pytest.approx(r.potential_energy(q), rel=1e-13)
    assert s.force_labels == ["s0.energy", "s1.energy"]


@pytest.mark.parametrize("bodies, extra, key, text", [
    ([], {}, "forces[0].bodies", "at least one body"),
    (["a", "zz"], {}, "forces[0].bodies[1]", "unknown body 'zz'"),
    (["a", "b", "a"], {}, "forces[0].bodies[2]", "listed twice"),
    (["a", "ground"], {}, "forces[0].bodies[1]", "ground"),
    (["hub", "a"], {}, "forces[0].bodies[0]", "also a fixed body"),
    (["a", "b"], {"stiffness": [1.0]}, "forces[0].stiffness", "expected 2 numbers"),
])
def test_bad_lists_are_named(pm, bodies, extra, key, text):
    with pytest.raises(ModelError) as err:
        m = _model(pm, [bodies], [extra.get("stiffness", [1.0] * len(bodies))])
        m.compile(kernels="numpy", plugins=pm)
    assert key in str(err.value) and text in str(err.value), str(err.value)


def test_a_kernel_declares_the_fixed_bodies():
    assert fixed_bodies(AnchorSprings) == 1
    from mbplugins.contact.spheres import SphereGroup
    from mbplugins.contact.spatial import SpatialContact
    assert fixed_bodies(SphereGroup) == 1 and fixed_bodies(SpatialContact) == 2
