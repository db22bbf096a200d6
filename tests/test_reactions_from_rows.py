"""Joint-local reactions from the generalised reactions the output rows already have
(``reaction_local_gen``, :meth:`mbcore.System.reactions_local_rows` with ``JD``)
against each type's own ``reaction_local`` (its Jacobian rebuilt from the jets):

* every built-in spatial type whose local reactions read the Jacobian declares
  ``reaction_local_gen``, and its ``reaction_local(..., gen=...)`` equals the
  reference on groups of several elements (ground as body i and as body j) at
  random states whose Euler parameters are off the unit sphere (the conversion
  ``n' = L(p) n* / (2 p^T p)`` is exact for any scale of p);
* through the System: the rows' path from each row's Jacobian values equals
  :meth:`~mbcore.System.reactions_local` row by row (compiled and NumPy kernels);
* a dynamic run's ``reactions_local`` channel (block path, from the rows' Jacobian
  values) equals the reference evaluated at its recorded q, t and lam;
* a type that declares the attribute but overrides ``reaction_local`` without
  ``gen``, and a type without the attribute, keep their own method.

Bound: 1e-12 of the largest magnitude of each element's components (the same
products summed in another order, and ``L(p) n*/(2 p^T p)`` in place of the jets'
``-A s~`` columns; observed <= 9e-16, a margin > 1000x).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.system import compiled_available
from mbcore.system.output_rows import takes_gen
from mbplugins.spatial import constraints as SC
from test_spatial_compiled import ALL_TYPES, group_model, random_state

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BOUND = 1e-12

#: the built-in spatial types whose local reactions come from the Jacobian
JACOBIAN_LOCAL = {"spherical", "universal", "revolute", "cylindrical", "translational",
                  "planar", "fixed", "screw", "revolute_cylindrical", "point_on_line",
                  "orientation_lock"}
KERNELS = ["numpy"] + (["compiled"] if compiled_available() else [])


def _err(got, ref):
    """max |got - ref| per element relative to the element's largest component."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape
    scale = np.maximum(np.max(np.abs(ref), axis=-1, keepdims=True), 1e-300)
    return float(np.max(np.abs(got - ref) / scale))


def _off_unit(sysm, q, rng):
    """q with every body's Euler parameters scaled off the unit sphere (by 0.9-1.1)."""
    q = q.copy()
    for o in sysm.body_offsets:
        q[o + 3:o + 7] *= rng.uniform(0.9, 1.1)
    return q


def test_the_types_that_read_the_jacobian_declare_it():
    declared = {c.name for c in ALL_TYPES if getattr(c, "reaction_local_gen", False)}
    assert declared == JACOBIAN_LOCAL
    for c in ALL_TYPES:
        assert takes_gen(c()) == (c.name in JACOBIAN_LOCAL), c.name
        if c.name in JACOBIAN_LOCAL:
            assert c.local_labels, c.name


@pytest.mark.parametrize("tname", sorted(JACOBIAN_LOCAL))
def test_type_gen_equals_reference(tname):
    """reaction_local with ``gen`` = the type's own Euler-parameter Jacobian^T lam
    equals the reference, also with p off the unit sphere; the moments are not
    vacuous (a wrong p-to-omega' conversion changes them)."""
    sysm = group_model(tname, seed=len(tname) * 31).compile(kernels="numpy")
    g = next(g for g in sysm.groups if g.ctype.name == tname)
    ct = g.ctype
    rng = np.random.default_rng(7)
    fv = sysm.functions_at(0.4)
    worst = 0.0
    for k in range(4):
        q, _ = random_state(sysm, rng)
        if k % 2:
            q = _off_unit(sysm, q, rng)
        qb = sysm.extended_rows(q[None])[0][g.gather_all]
        lam = rng.normal(size=(g.ne, g.m))
        J = ct.jacobian(g.par, qb, 0.4, fv[g.fidx])            # (ne, m, nb, 7)
        gen = np.einsum("em,embc->ebc", lam, J)
        ref = ct.reaction_local(g.par, qb, 0.4, fv[g.fidx], lam)
        got = ct.reaction_local(g.par, qb, 0.4, fv[g.fidx], lam, gen=gen)
        assert np.max(np.abs(ref)) > 1e-3
        worst = max(worst, _err(got, ref))
        # the conversion matters: the p columns read as if p were unit differ
        if k % 2 and ct.local_labels[-1] in ("nz", "ny"):
            p = qb[:, 0, 3:7]
            wrong = gen.copy()
            wrong[:, 0, 3:] *= np.sum(p * p, axis=1)[:, None]
            bad = ct.reaction_local(g.par, qb, 0.4, fv[g.fidx], lam, gen=wrong)
            assert _err(bad, ref) > 1e-6
    assert worst <= BOUND, worst


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("tname", sorted(JACOBIAN_LOCAL))
def test_rows_from_jacobian_values_equal_row_by_row(tname, kernels):
    """``reactions_local_rows(..., JD=)`` from each row's Jacobian values (the
    System's compiled or NumPy kernels, ground slots included) against
    ``System.reactions_local`` row by row; a row's value does not depend on the
    other rows of its block."""
    sysm = group_model(tname, seed=len(tname) * 7919).compile(kernels=kernels)
    rng = np.random.default_rng(len(tname))
    R = 6
    T = np.linspace(0.0, 1.3, R)
    Q = np.stack([_off_unit(sysm, random_state(sysm, rng)[0], rng) if i % 2 else
                  random_state(sysm, rng)[0] for i in range(R)])
    LAM = rng.normal(size=(R, sysm.m))
    FV = (np.stack([sysm.functions_at(float(t)).copy() for t in T])
          if sysm.function_count else None)
    JD = np.stack([(sysm.jacobian(Q[i], float(T[i])), sysm.jacobian_values.copy())[1]
                   for i in range(R)])
    ref = np.stack([sysm.reactions_local(Q[i], float(T[i]), LAM[i]).copy()
                    for i in range(R)])
    got = sysm.reactions_local_rows(Q, T, FV, LAM, JD=JD)
    assert np.max(np.abs(ref)) > 1e-3
    nl = len(next(g for g in sysm.groups if g.ctype.name == tname).ctype.local_labels)
    err = _err(got.reshape(R, -1, nl), ref.reshape(R, -1, nl))
    assert err <= BOUND, err
    part = sysm.reactions_local_rows(Q[2:5], T[2:5], None if FV is None else FV[2:5],
                                     LAM[2:5], JD=JD[2:5])
    assert np.array_equal(part, got[2:5])


@pytest.mark.parametrize("name", ["spatial_slider_crank_dynamic.yaml", "spatial_rssr.yaml",
                                  "spatial_boom_actuators.yaml"])
def test_run_channel_equals_reference_at_recorded_rows(name):
    """The dynamic run's reactions_local channel (block path: the rows' Jacobian
    values) against the types' own reaction_local at the recorded q, t, lam."""
    res = mbcore.run(EXAMPLES / name, analysis="dynamic",
                     settings={"t_end": 0.3, "output_step": 0.01, "output_rows": "block",
                               "record": "q, lam, reactions_local"})
    s = res.system
    assert any(takes_gen(g.ctype) for g in s.groups if g.ctype.local_labels)
    Q, LAM, T = np.asarray(res["q"]), np.asarray(res["lam"]), np.asarray(res.t)
    got = np.asarray(res["reactions_local"])
    ref = np.stack([s.reactions_local(Q[i], float(T[i]), LAM[i]).copy()
                    for i in range(len(T))])
    assert got.shape == ref.shape and len(T) > 10
    scale = np.max(np.abs(ref))
    assert scale > 1e-3
    assert np.max(np.abs(got - ref)) <= BOUND * scale


class NoGenRevolute(SC.Revolute):
    """Inherits ``reaction_local_gen`` but overrides ``reaction_local`` without
    ``gen``: called without it (its own values)."""
    name = "nogen_revolute"
    calls: list = []

    def reaction_local(self, par, qb, t, f, lam):
        NoGenRevolute.calls.append(par.shape[0])
        return 2.0 * super().reaction_local(par, qb, t, f, lam)


class PlainRevolute(SC.Revolute):
    """No ``reaction_local_gen``: the reference path."""
    name = "plain_revolute"
    reaction_local_gen = False


def test_types_without_gen_keep_their_method():
    assert not takes_gen(NoGenRevolute()) and not takes_gen(PlainRevolute())
    sysm = group_model("revolute", seed=5).compile(kernels="numpy")
    g = next(g for g in sysm.groups if g.ctype.name == "revolute")
    rng = np.random.default_rng(3)
    q, _ = random_state(sysm, rng)
    qb = sysm.extended_rows(q[None])[0][g.gather_all]
    lam = rng.normal(size=(g.ne, g.m))
    f = sysm.functions_at(0.0)[g.fidx]
    ref = SC.Revolute().reaction_local(g.par, qb, 0.0, f, lam)
    assert np.array_equal(PlainRevolute().reaction_local(g.par, qb, 0.0, f, lam), ref)
    assert np.array_equal(NoGenRevolute().reaction_local(g.par, qb, 0.0, f, lam), 2.0 * ref)
