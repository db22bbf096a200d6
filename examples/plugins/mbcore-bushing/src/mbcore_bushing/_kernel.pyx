# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled kernels of ``bushing_c`` and ``point_on_circle_c`` (mbcore's compiled
plugin tier, ABI of ``mbcore_plugin.h``).

``BUSHING`` is a PyCapsule named ``"mbcore.force_kernel"`` holding a static
``mbcore_force_kernel``: mbcore (``c_kernel = "mbcore_bushing._kernel:BUSHING"``)
checks its ABI version and sizes and calls ``force`` / ``jacobian`` from its
compiled code without the GIL.  The numbers are those of the Python reference
:class:`mbcore_bushing.bushing.Bushing` (same ``par`` layout, equal to 1e-12).

``CIRCLE`` is a PyCapsule named ``"mbcore.constraint_kernel"`` holding a static
``mbcore_constraint_kernel`` (phi, jacobian, nu, gamma of
:class:`mbcore_bushing.constraints.PointOnCircle`, same ``par`` layout).

``kernel_info``, ``call_force`` and ``call_jacobian`` call any force-kernel
capsule, ``call_constraint`` any constraint-kernel capsule, on NumPy arrays: the
package's tests use them to compare the kernels with the Python references without
going through mbcore.
"""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from libc.math cimport cos, sin, sqrt

from mbcore.plugin cimport *

cdef enum:
    NPAR = 11      # s'_i (2), s'_j (2), kx, ky, k_phi, cx, cy, c_phi, theta0


cdef struct Loads:
    double Si0, Si1, Sj0, Sj1      # A s' of both points (global)
    double ddx, ddy, thd           # relative velocity of the points, relative rate
    double F0, F1, n               # bushing force (on body i) and torque


cdef inline void loads(const double* p, const double* qi, const double* qj,
                       const double* vi, const double* vj, Loads* L) noexcept nogil:
    cdef double ci = cos(qi[2]), si = sin(qi[2]), cj = cos(qj[2]), sj = sin(qj[2])
    L.Si0 = ci * p[0] - si * p[1]
    L.Si1 = si * p[0] + ci * p[1]
    L.Sj0 = cj * p[2] - sj * p[3]
    L.Sj1 = sj * p[2] + cj * p[3]
    cdef double dx = qj[0] + L.Sj0 - qi[0] - L.Si0
    cdef double dy = qj[1] + L.Sj1 - qi[1] - L.Si1
    L.ddx = vj[0] - vj[2] * L.Sj1 - vi[0] + vi[2] * L.Si1
    L.ddy = vj[1] + vj[2] * L.Sj0 - vi[1] - vi[2] * L.Si0
    L.thd = vj[2] - vi[2]
    L.F0 = p[4] * dx + p[7] * L.ddx
    L.F1 = p[5] * dy + p[8] * L.ddy
    L.n = p[6] * (qj[2] - qi[2] - p[10]) + p[9] * L.thd


cdef mbcore_index bushing_force(const mbcore_force_group* G, const double* q,
                                const double* qd, double t, const double* fv,
                                double* Q, double* P) noexcept nogil:
    cdef mbcore_index e, oi, oj
    cdef const double* p
    cdef Loads L
    cdef double power = 0.0
    for e in range(G.ne):
        oi = G.boff[e * G.nb]
        oj = G.boff[e * G.nb + 1]
        p = G.par + e * G.npar
        loads(p, q + oi, q + oj, qd + oi, qd + oj, &L)
        Q[oi] += L.F0
        Q[oi + 1] += L.F1
        Q[oi + 2] += L.Si0 * L.F1 - L.Si1 * L.F0 + L.n
        Q[oj] -= L.F0
        Q[oj + 1] -= L.F1
        Q[oj + 2] -= L.Sj0 * L.F1 - L.Sj1 * L.F0 + L.n
        power -= p[7] * L.ddx * L.ddx + p[8] * L.ddy * L.ddy + p[9] * L.thd * L.thd
    if P != NULL:
        P[0] += power
    return -1


cdef mbcore_index bushing_jacobian(const mbcore_force_group* G, const double* q,
                                   const double* qd, double t, const double* fv,
                                   double* K, double* C) noexcept nogil:
    """K = dg/dq, C = dg/dqd (6 x 6 row-major per element), as
    ``Bushing.force_jacobian``: K = -D^T (diag(k) D + diag(c) E) - H - k_phi t t^T,
    C = -D^T diag(c) D - c_phi t t^T."""
    cdef mbcore_index e, oi, oj, r, a, b
    cdef const double* p
    cdef double* Ke
    cdef double* Ce
    cdef Loads L
    cdef double D[2][6]
    cdef double E[2][6]
    cdef double wi, wj, s
    for e in range(G.ne):
        oi = G.boff[e * G.nb]
        oj = G.boff[e * G.nb + 1]
        p = G.par + e * G.npar
        loads(p, q + oi, q + oj, qd + oi, qd + oj, &L)
        wi = qd[oi + 2]
        wj = qd[oj + 2]
        for r in range(2):
            for a in range(6):
                D[r][a] = 0.0
                E[r][a] = 0.0
        D[0][0] = -1.0
        D[1][1] = -1.0
        D[0][3] = 1.0
        D[1][4] = 1.0
        D[0][2] = L.Si1                 # -R S_i
        D[1][2] = -L.Si0
        D[0][5] = -L.Sj1                # R S_j
        D[1][5] = L.Sj0
        E[0][2] = wi * L.Si0
        E[1][2] = wi * L.Si1
        E[0][5] = -wj * L.Sj0
        E[1][5] = -wj * L.Sj1
        Ke = K + e * 36
        Ce = C + e * 36
        for a in range(6):
            for b in range(6):
                s = 0.0
                for r in range(2):
                    s -= D[r][a] * (p[4 + r] * D[r][b] + p[7 + r] * E[r][b])
                Ke[6 * a + b] = s
                s = 0.0
                for r in range(2):
                    s -= D[r][a] * p[7 + r] * D[r][b]
                Ce[6 * a + b] = s
        Ke[14] -= L.Si0 * L.F0 + L.Si1 * L.F1            # [2, 2]
        Ke[35] += L.Sj0 * L.F0 + L.Sj1 * L.F1            # [5, 5]
        Ke[14] -= p[6]
        Ke[35] -= p[6]
        Ke[17] += p[6]                                   # [2, 5]
        Ke[32] += p[6]                                   # [5, 2]
        Ce[14] -= p[9]
        Ce[35] -= p[9]
        Ce[17] += p[9]
        Ce[32] += p[9]
    return -1


cdef mbcore_force_kernel _BUSHING
_BUSHING.abi_version = MBCORE_ABI_VERSION
_BUSHING.name = b"bushing_c"
_BUSHING.body_kind = MBCORE_BODY_PLANAR
_BUSHING.n_bodies = 2
_BUSHING.n_par = NPAR
_BUSHING.n_fun = 0
_BUSHING.force = bushing_force
_BUSHING.jacobian = bushing_jacobian
_BUSHING.reason = NULL

#: the capsule mbcore loads (``CompiledBushing.c_kernel``)
BUSHING = PyCapsule_New(<void*>&_BUSHING, MBCORE_FORCE_CAPSULE, NULL)


# -- test harness: call any force-kernel capsule on NumPy arrays ----------------------
cdef const mbcore_force_kernel* _kernel(object capsule) except NULL:
    return <const mbcore_force_kernel*>PyCapsule_GetPointer(capsule, MBCORE_FORCE_CAPSULE)


def kernel_info(capsule) -> dict:
    """The declarations of a force-kernel capsule (ValueError if the capsule is not
    named ``"mbcore.force_kernel"``)."""
    cdef const mbcore_force_kernel* k = _kernel(capsule)
    return {"abi_version": k.abi_version, "name": k.name.decode(), "body_kind": k.body_kind,
            "n_bodies": k.n_bodies, "n_par": k.n_par, "n_fun": k.n_fun,
            "has_jacobian": k.jacobian != NULL,
            "reason": None if k.reason == NULL else k.reason.decode()}


cdef mbcore_force_group _group(const mbcore_force_kernel* k, double[:, ::1] par,
                               Py_ssize_t[:, ::1] boff, Py_ssize_t[:, ::1] fidx,
                               Py_ssize_t qlen, Py_ssize_t nfv) except *:
    cdef mbcore_force_group G
    cdef Py_ssize_t e, b, nc = 3 if k.body_kind == MBCORE_BODY_PLANAR else 7
    if par.shape[1] != k.n_par or boff.shape[1] != k.n_bodies or fidx.shape[1] != k.n_fun:
        raise ValueError(f"kernel {k.name.decode()!r} needs par (ne, {k.n_par}), boff "
                         f"(ne, {k.n_bodies}), fidx (ne, {k.n_fun})")
    if boff.shape[0] != par.shape[0] or fidx.shape[0] != par.shape[0]:
        raise ValueError("par, boff and fidx need the same number of elements")
    for e in range(boff.shape[0]):
        for b in range(boff.shape[1]):
            if not 0 <= boff[e, b] <= qlen - nc:
                raise ValueError(f"boff[{e}, {b}] = {boff[e, b]} is outside q")
        for b in range(fidx.shape[1]):
            if not 0 <= fidx[e, b] < nfv:
                raise ValueError(f"fidx[{e}, {b}] = {fidx[e, b]} is outside fv")
    G.ne = par.shape[0]
    G.nb = k.n_bodies
    G.npar = k.n_par
    G.nfun = k.n_fun
    G.boff = &boff[0, 0] if boff.shape[0] * boff.shape[1] else NULL
    G.par = &par[0, 0] if par.shape[0] * par.shape[1] else NULL
    G.fidx = &fidx[0, 0] if fidx.shape[0] * fidx.shape[1] else NULL
    return G


def call_force(capsule, double[:, ::1] par, Py_ssize_t[:, ::1] boff, double[::1] q,
               double[::1] qd, double t, double[:, ::1] fv, Py_ssize_t[:, ::1] fidx,
               double[::1] Q, double[::1] P=None) -> int:
    """Run ``kernel.force`` once: Q (and P[0], if given) are accumulated in place;
    returns the kernel's result (-1 or the failing element)."""
    cdef const mbcore_force_kernel* k = _kernel(capsule)
    if q.shape[0] != qd.shape[0] or Q.shape[0] != q.shape[0] or fv.shape[1] != 3:
        raise ValueError("q, qd and Q need the same length; fv is (n, 3)")
    cdef mbcore_force_group G = _group(k, par, boff, fidx, q.shape[0], fv.shape[0])
    cdef double* Pp = NULL if P is None else &P[0]
    cdef const double* fvp = &fv[0, 0] if fv.shape[0] else NULL
    cdef mbcore_index r = -1
    if G.ne == 0:
        return r
    with nogil:
        r = k.force(&G, &q[0], &qd[0], t, fvp, &Q[0], Pp)
    return r


def call_jacobian(capsule, double[:, ::1] par, Py_ssize_t[:, ::1] boff, double[::1] q,
                  double[::1] qd, double t, double[:, ::1] fv, Py_ssize_t[:, ::1] fidx,
                  double[:, :, ::1] K, double[:, :, ::1] C) -> int:
    """Run ``kernel.jacobian`` once into K, C (ne, nl, nl); returns its result."""
    cdef const mbcore_force_kernel* k = _kernel(capsule)
    if k.jacobian == NULL:
        raise ValueError(f"kernel {k.name.decode()!r} has no jacobian")
    cdef Py_ssize_t nl = k.n_bodies * (3 if k.body_kind == MBCORE_BODY_PLANAR else 7)
    if q.shape[0] != qd.shape[0] or fv.shape[1] != 3:
        raise ValueError("q and qd need the same length; fv is (n, 3)")
    if tuple(K.shape)[:3] != (par.shape[0], nl, nl) or tuple(C.shape)[:3] != (par.shape[0], nl, nl):
        raise ValueError(f"K and C must be (ne, {nl}, {nl})")
    cdef mbcore_force_group G = _group(k, par, boff, fidx, q.shape[0], fv.shape[0])
    cdef const double* fvp = &fv[0, 0] if fv.shape[0] else NULL
    cdef mbcore_index r = -1
    if G.ne == 0:
        return r
    with nogil:
        r = k.jacobian(&G, &q[0], &qd[0], t, fvp, &K[0, 0, 0], &C[0, 0, 0])
    return r


# -- point_on_circle_c: a body point on a global circle of radius R(t) ----------------
cdef enum:
    CIRCLE_NPAR = 4  # s' (2), centre (2); one time function R(t)

cdef double MIN_DISTANCE = 1e-10      # mbcore_bushing.constraints.MIN_DISTANCE


cdef struct Radial:
    double Sx, Sy                  # A s' (global)
    double ux, uy, L               # unit radial direction, distance to the centre


cdef inline void radial(const double* p, const double* qb, Radial* R) noexcept nogil:
    cdef double c = cos(qb[2]), s = sin(qb[2])
    R.Sx = c * p[0] - s * p[1]
    R.Sy = s * p[0] + c * p[1]
    cdef double dx = qb[0] + R.Sx - p[2], dy = qb[1] + R.Sy - p[3]
    R.L = sqrt(dx * dx + dy * dy)
    R.ux = dx / R.L if R.L > 0.0 else 0.0
    R.uy = dy / R.L if R.L > 0.0 else 0.0


cdef mbcore_index circle_phi(const mbcore_constraint_group* G, const double* q, double t,
                             const double* fv, double* out) noexcept nogil:
    """Phi = |P - c| - R(t)."""
    cdef mbcore_index e
    cdef Radial R
    for e in range(G.ne):
        radial(G.par + e * G.npar, q + G.boff[e], &R)
        out[e] = R.L - fv[3 * G.fidx[e]]
    return -1


cdef mbcore_index circle_jacobian(const mbcore_constraint_group* G, const double* q,
                                  double t, const double* fv, double* J) noexcept nogil:
    """[u_x, u_y, S x u] per element (one row, one body: 3 entries)."""
    cdef mbcore_index e
    cdef Radial R
    for e in range(G.ne):
        radial(G.par + e * G.npar, q + G.boff[e], &R)
        if R.L < MIN_DISTANCE:
            return e
        J[3 * e] = R.ux
        J[3 * e + 1] = R.uy
        J[3 * e + 2] = R.Sx * R.uy - R.Sy * R.ux
    return -1


cdef mbcore_index circle_nu(const mbcore_constraint_group* G, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    """nu = -Phi_t = R'(t)."""
    cdef mbcore_index e
    for e in range(G.ne):
        out[e] = fv[3 * G.fidx[e] + 1]
    return -1


cdef mbcore_index circle_gamma(const mbcore_constraint_group* G, const double* q,
                               const double* qd, double t, const double* fv,
                               double* out) noexcept nogil:
    """R'' + w^2 u.S - (|Pd|^2 - (u.Pd)^2) / L with Pd = rd + w R S."""
    cdef mbcore_index e, o
    cdef Radial R
    cdef double w, px, py, upd
    for e in range(G.ne):
        o = G.boff[e]
        radial(G.par + e * G.npar, q + o, &R)
        if R.L < MIN_DISTANCE:
            return e
        w = qd[o + 2]
        px = qd[o] - w * R.Sy
        py = qd[o + 1] + w * R.Sx
        upd = R.ux * px + R.uy * py
        out[e] = (fv[3 * G.fidx[e] + 2] + w * w * (R.ux * R.Sx + R.uy * R.Sy)
                  - (px * px + py * py - upd * upd) / R.L)
    return -1


cdef mbcore_constraint_kernel _CIRCLE
_CIRCLE.abi_version = MBCORE_ABI_VERSION
_CIRCLE.name = b"point_on_circle_c"
_CIRCLE.body_kind = MBCORE_BODY_PLANAR
_CIRCLE.n_equations = 1
_CIRCLE.n_bodies = 1
_CIRCLE.n_par = CIRCLE_NPAR
_CIRCLE.n_fun = 1
_CIRCLE.holonomic = 1
_CIRCLE.phi = circle_phi
_CIRCLE.jacobian = circle_jacobian
_CIRCLE.nu = circle_nu
_CIRCLE.gamma = circle_gamma
_CIRCLE.reason = (b"the point is at the circle's centre (distance < 1e-10): the radial "
                  b"direction is undefined")

#: the capsule mbcore loads (``CompiledPointOnCircle.c_kernel``)
CIRCLE = PyCapsule_New(<void*>&_CIRCLE, MBCORE_CONSTRAINT_CAPSULE, NULL)


# -- test harness: call any constraint-kernel capsule on NumPy arrays -----------------
def call_constraint(capsule, str stage, double[:, ::1] par, Py_ssize_t[:, ::1] boff,
                    double[::1] q, double[::1] qd, double t, double[:, ::1] fv,
                    Py_ssize_t[:, ::1] fidx, double[::1] out) -> int:
    """Run one stage (``"phi"``, ``"jacobian"``, ``"nu"``, ``"gamma"``) of a
    constraint-kernel capsule into ``out``: (ne m) rows, or (ne m nb nc) Jacobian
    entries (zeroed first, as mbcore does).  Returns the kernel's result (-1 or
    the failing element); ``nu`` NULL writes zeros."""
    cdef const mbcore_constraint_kernel* k = <const mbcore_constraint_kernel*> \
        PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE)
    cdef Py_ssize_t nc = 3 if k.body_kind == MBCORE_BODY_PLANAR else 7
    cdef Py_ssize_t ne = par.shape[0], e, b
    cdef Py_ssize_t size = ne * k.n_equations * (k.n_bodies * nc if stage == "jacobian" else 1)
    if stage not in ("phi", "jacobian", "nu", "gamma"):
        raise ValueError(f"stage {stage!r}: expected phi, jacobian, nu or gamma")
    if par.shape[1] != k.n_par or boff.shape[1] != k.n_bodies or fidx.shape[1] != k.n_fun \
            or boff.shape[0] != ne or fidx.shape[0] != ne:
        raise ValueError(f"kernel {k.name.decode()!r} needs par (ne, {k.n_par}), boff "
                         f"(ne, {k.n_bodies}), fidx (ne, {k.n_fun})")
    if out.shape[0] != size or q.shape[0] != qd.shape[0] or fv.shape[1] != 3:
        raise ValueError(f"out needs {size} entries, q and qd the same length, fv (n, 3)")
    for e in range(ne):
        for b in range(boff.shape[1]):
            if not 0 <= boff[e, b] <= q.shape[0] - nc:
                raise ValueError(f"boff[{e}, {b}] = {boff[e, b]} is outside q")
        for b in range(fidx.shape[1]):
            if not 0 <= fidx[e, b] < fv.shape[0]:
                raise ValueError(f"fidx[{e}, {b}] = {fidx[e, b]} is outside fv")
    cdef mbcore_constraint_group G
    G.ne, G.m, G.nb, G.npar, G.nfun = ne, k.n_equations, k.n_bodies, k.n_par, k.n_fun
    G.boff = &boff[0, 0] if boff.shape[0] * boff.shape[1] else NULL
    G.par = &par[0, 0] if par.shape[0] * par.shape[1] else NULL
    G.fidx = &fidx[0, 0] if fidx.shape[0] * fidx.shape[1] else NULL
    cdef const double* fvp = &fv[0, 0] if fv.shape[0] else NULL
    cdef mbcore_index r = -1
    if ne == 0:
        return r
    out[:] = 0.0
    if stage == "phi":
        r = k.phi(&G, &q[0], t, fvp, &out[0])
    elif stage == "jacobian":
        r = k.jacobian(&G, &q[0], t, fvp, &out[0])
    elif stage == "nu":
        if k.nu != NULL:
            r = k.nu(&G, &q[0], t, fvp, &out[0])
    else:
        r = k.gamma(&G, &q[0], &qd[0], t, fvp, &out[0])
    return r
