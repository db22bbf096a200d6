"""The output maps of a compiled model (one job: where each reported quantity comes
from), built once by :class:`mbcore.system.compiled_model.SystemModel`: the
reaction components of every element on every body with their labels and the
gather indices of the joint-local components; the points of interest and the
angular channels of spatial bodies.  ``sm`` is the SystemModel being built."""
from __future__ import annotations

import numpy as np

from .groups import short_label

__all__ = ["reaction_maps", "point_maps"]


def reaction_maps(sm, model) -> None:
    """Reactions: per (element, body) ``[fx, fy, n]`` (planar) or ``[fx, fy, fz,
    nx, ny, nz]`` (spatial, global components, moment about the body origin), in
    element order; and the gather indices of the joint-local components."""
    sm.element_groups = [g for g in sm.groups if not g.internal]
    groups = sm.element_groups
    off = 0
    for g in groups:
        nbk = len(g.ctype.bodies)
        nr = 3 if g.kind == "planar" else 6
        g.nreact = nr
        g.react_pos = off + np.arange(g.ne * nbk * nr).reshape(g.ne, nbk, nr)
        off += g.ne * nbk * nr
    by_name = {}
    for g in groups:
        for e, name in enumerate(g.names):
            by_name[name] = (g, e)
    order_ = np.concatenate([by_name[el.name][0].react_pos[by_name[el.name][1]].ravel()
                             for el in model.constraint_elements()]) \
        if groups else np.zeros(0, np.intp)
    perm = np.empty_like(order_)
    perm[order_] = np.arange(len(order_))
    for g in groups:          # final positions in element order
        g.react_pos = perm[g.react_pos]
    labels = np.empty(off, dtype=object)
    for g in groups:
        comps = ("fx", "fy", "n") if g.nreact == 3 else ("fx", "fy", "fz", "nx", "ny", "nz")
        tails = [f"{short_label(key)}.{lab}" for key in g.ctype.bodies for lab in comps]
        labels[g.react_pos.ravel()] = [f"{el}.{tail}" for el in g.names for tail in tails]
    sm.reaction_labels = labels.tolist()
    sm.local_reaction_labels = [f"{el.name}.{lab}"
                                  for el in model.constraint_elements()
                                  for lab in by_name[el.name][0].ctype.local_labels] \
        if groups else []
    # gather indices of the output stages (reactions, local reactions): once
    pos, start = {}, 0
    for g in sm.groups:
        nbk, nl = len(g.ctype.bodies), len(g.ctype.local_labels)
        g.jac_blocks = g.jpos[:, :g.m * nbk * g.ncol].reshape(g.ne, g.m, nbk, g.ncol)
        g.lam_rows = g.row[:, None] + np.arange(g.m)
        g.gather_all = g.cidx()
        if g.internal:
            continue
        for e, name in enumerate(g.names):
            pos[name] = np.arange(start + e * nl, start + (e + 1) * nl)
        start += g.ne * nl
    sm.local_reaction_order = np.concatenate(
        [pos[el.name] for el in model.constraint_elements()]).astype(np.intp) \
        if groups else np.zeros(0, np.intp)

def point_maps(sm, model) -> None:
    """Points of interest (the "points" of the book's KAP program, Nikravesh (1988),
    §5.1): body offsets and local coordinates."""
    sm.point_names = [p.name for p in model.points]
    sm.point_offsets = np.array([sm.body_offset(p.body) for p in model.points], dtype=np.intp)
    dim = 3 if sm.spatial else 2
    sm.point_local = np.array([p.at for p in model.points], dtype=float).reshape(-1, dim)
    comps = (("x", "y", "xd", "yd", "xdd", "ydd") if dim == 2 else
             ("x", "y", "z", "xd", "yd", "zd", "xdd", "ydd", "zdd"))
    sm.point_labels = [f"{p}.{c}" for p in sm.point_names for c in comps]
    # angular velocity and acceleration of every spatial body (global axes)
    sp = [k for k, kd in enumerate(sm.body_kinds) if kd.name == "spatial"]
    sm.angular_index = (sm.body_offsets[sp][:, None] + 3 + np.arange(4)).astype(np.intp)
    sm.angular_labels = [f"{sm.body_names[k]}.{c}" for k in sp
                           for c in ("wx", "wy", "wz", "wxd", "wyd", "wzd")]
