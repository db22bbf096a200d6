"""Helpers for testing planar element types (used by this package's tests; copy
them into your own plugin's tests).

* :func:`fd_force_jacobian`, :func:`fd_constraint_jacobian`: central differences;
* :func:`compiled_force`, :func:`compiled_force_jacobian`: run a force-kernel
  capsule (``mbcore_plugin.h``) on the group arrays ``par``, ``qb``, ``qdb`` the
  Python reference receives, through the extended coordinate buffer mbcore hands
  to kernels (one 3-float block per body, the ground block of zeros last);
* :func:`compiled_constraint`: the same for one stage of a constraint-kernel
  capsule, in the shapes of the Python methods.
"""
from __future__ import annotations

import numpy as np

NC = 3          # coordinates per planar body


def fd_force_jacobian(cls, par, qb, qdb, t=0.0, f=None, h=1e-6):
    """Central differences of ``cls.force`` (an instance): (K, C), each (ne, nb, 3, nb, 3)."""
    f = np.zeros((len(par), 0, 3)) if f is None else f
    ne, nb, _ = qb.shape
    K = np.empty((ne, nb, NC, nb, NC))
    C = np.empty((ne, nb, NC, nb, NC))
    for b in range(nb):
        for c in range(NC):
            for M, x, other, first in ((K, qb, qdb, True), (C, qdb, qb, False)):
                xp, xm = x.copy(), x.copy()
                xp[:, b, c] += h
                xm[:, b, c] -= h
                gp = cls.force(par, xp, other, t, f) if first else cls.force(par, other, xp, t, f)
                gm = cls.force(par, xm, other, t, f) if first else cls.force(par, other, xm, t, f)
                M[:, :, :, b, c] = (gp - gm) / (2 * h)
    return K, C


def fd_constraint_jacobian(cls, par, qb, t, f, h=1e-6):
    """Central differences of ``cls.phi``: (ne, m, nb, 3)."""
    ne, nb, _ = qb.shape
    J = np.empty((ne, cls.equations, nb, NC))
    for b in range(nb):
        for c in range(NC):
            qp, qm = qb.copy(), qb.copy()
            qp[:, b, c] += h
            qm[:, b, c] -= h
            J[:, :, b, c] = (cls.phi(par, qp, t, f) - cls.phi(par, qm, t, f)) / (2 * h)
    return J


def layout(qb, ground=None):
    """The extended buffer of ``qb`` (ne, nb, 3): body (e, b) at offset 3 (e nb + b),
    or at the ground block (the last 3 floats, zeros) where ``ground[e, b]``.
    Returns ``(offsets (ne, nb) intp, length)``."""
    ne, nb, _ = qb.shape
    boff = (NC * np.arange(ne * nb, dtype=np.intp)).reshape(ne, nb)
    length = NC * ne * nb + NC
    if ground is not None:
        boff[np.asarray(ground, dtype=bool)] = length - NC
    return boff, length


def extended_buffers(qb, qdb, ground=None):
    """``(boff, q, qd)``: the blocks of ``qb``, ``qdb`` in extended buffers (:func:`layout`)."""
    boff, length = layout(qb, ground)
    q, qd = np.zeros(length), np.zeros(length)
    for buf, blocks in ((q, qb), (qd, qdb)):
        buf[boff.ravel()[:, None] + np.arange(NC)] = blocks.reshape(-1, NC)
        buf[length - NC:] = 0.0                    # the ground block stays zero
    return boff, q, qd


def kernel_arrays(par, f, n_fun):
    """``(par, fv, fidx)`` as a kernel reads them; ``f`` the (ne, n_fun, 3) jets."""
    ne = len(par)
    fv = np.ascontiguousarray(np.asarray(f, dtype=float).reshape(ne * n_fun, 3)) \
        if n_fun else np.zeros((0, 3))
    fidx = np.arange(ne * n_fun, dtype=np.intp).reshape(ne, n_fun)
    return np.ascontiguousarray(par, dtype=float), fv, fidx


def compiled_force(capsule, par, qb, qdb, t=0.0, f=None, n_fun=0, ground=None):
    """``(g (ne, nb, 3), power, Q)`` from the kernel: Q the accumulated buffer, g
    gathered back from it (each (e, b) has its own block except ground bodies,
    which share the last block: mbcore discards what lands there), power = P."""
    from ._kernel import call_force
    boff, q, qd = extended_buffers(qb, qdb, ground)
    par, fv, fidx = kernel_arrays(par, f, n_fun)
    Q, P = np.zeros_like(q), np.zeros(1)
    r = call_force(capsule, par, boff, q, qd, float(t), fv, fidx, Q, P)
    if r != -1:
        raise RuntimeError(f"kernel failed at element {r}")
    g = Q[boff.ravel()[:, None] + np.arange(NC)].reshape(qb.shape)
    return g, float(P[0]), Q


def compiled_force_jacobian(capsule, par, qb, qdb, t=0.0, f=None, n_fun=0, ground=None):
    """``(K, C)`` (ne, nb, 3, nb, 3) from the kernel's ``jacobian``."""
    from ._kernel import call_jacobian
    boff, q, qd = extended_buffers(qb, qdb, ground)
    par, fv, fidx = kernel_arrays(par, f, n_fun)
    ne, nb, _ = qb.shape
    nl = nb * NC
    K, C = np.full((ne, nl, nl), np.nan), np.full((ne, nl, nl), np.nan)
    r = call_jacobian(capsule, par, boff, q, qd, float(t), fv, fidx, K, C)
    if r != -1:
        raise RuntimeError(f"kernel failed at element {r}")
    return K.reshape(ne, nb, NC, nb, NC), C.reshape(ne, nb, NC, nb, NC)


def compiled_constraint(capsule, stage, par, qb, qdb, t=0.0, f=None, n_fun=0, m=1,
                        ground=None):
    """One stage (``"phi"``, ``"jacobian"``, ``"nu"``, ``"gamma"``) of a planar
    constraint-kernel capsule on the arrays the Python method receives: (ne, m), or
    (ne, m, nb, 3) for the Jacobian.  Raises RuntimeError naming the element the
    kernel refused."""
    from ._kernel import call_constraint
    boff, q, qd = extended_buffers(qb, qdb, ground)
    par, fv, fidx = kernel_arrays(par, f, n_fun)
    ne, nb, _ = qb.shape
    shape = (ne, m, nb, NC) if stage == "jacobian" else (ne, m)
    out = np.full(int(np.prod(shape)), np.nan)
    r = call_constraint(capsule, stage, par, boff, q, qd, float(t), fv, fidx, out)
    if r != -1:
        raise RuntimeError(f"kernel refused element {r}")
    return out.reshape(shape)
