# cython: language_level=3
"""Compiled kernels of the built-in planar force elements (``mbplugins._ext._planar_forces``;
Nikravesh (1988), §9.2: point force, torque, TSDA, RSDA, drag, point-line contact,
fictitious damping), reaching the core through the compiled plugin tier
(``mbcore_plugin.h``) exactly as a third-party kernel does: one ``mbcore.force_kernel``
capsule per type (``TSDA``, ``RSDA``, ``FORCE``, ``TORQUE``, ``DRAG``, ``CONTACT``,
``DAMPING``), named by the type's ``c_kernel``.  Each has the forces with the power
of their non-conservative part and the analytic Jacobian blocks K = dQ/dq,
C = dQ/dqd per element.  NumPy references with identical packed parameters: the
types in ``mbplugins.planar.forces`` and ``mbplugins.planar.contact``.

Conventions of the ABI: body offsets index the core's extended coordinate buffer
(the ground's zeros after q); forces landing on the ground block are discarded by
the core.
"""
from libc.math cimport sin, cos, sqrt, pow, tanh
from libc.string cimport memset
from cpython.pycapsule cimport PyCapsule_New
from mbcore.plugin cimport (mbcore_force_kernel, mbcore_force_group, mbcore_index,
                            MBCORE_ABI_VERSION, MBCORE_BODY_PLANAR, MBCORE_FORCE_CAPSULE)

cdef enum:
    F_TSDA = 0
    F_RSDA = 1
    F_FORCE = 2
    F_TORQUE = 3
    F_DRAG = 4
    F_CONTACT = 5
    F_DAMPING = 6

#: TSDA lengths below this have no direction (same value as the reference)
cdef double MIN_LENGTH = 1e-10


cdef inline mbcore_index _accumulate(int kind, const mbcore_force_group* G, const double* q, const double* qd, double t,
                            const double* fv, double* Q, double* P) noexcept nogil:
    """Add the group's forces into Q and, when ``P`` is not NULL, the power of their
    non-conservative parts into ``P[0]`` (the ``power_nc`` of the references);
    return -1, or the index of a failing element.  ``t`` reaches only external
    kernels (the built-ins read their time functions from ``fv``)."""
    cdef Py_ssize_t e, bi, bj
    cdef const double* p
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, lx, ly, L, ux, uy, Ld, f, fx, fy, n
    cdef double vx, vy, nx, ny, d, delta, pe, fel, fn, ft, vt, dd, Xix, Xiy, Xjx, Xjy
    cdef double pw = 0.0
    for e in range(G.ne):
        p = G.par + e * G.npar
        bi = G.boff[e * G.nb]
        if kind == F_TSDA:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
            lx = q[bj] + Sjx - q[bi] - Six
            ly = q[bj + 1] + Sjy - q[bi + 1] - Siy
            L = sqrt(lx * lx + ly * ly)
            if not (L >= MIN_LENGTH):
                return e
            ux = lx / L; uy = ly / L
            # l_dot = rd_j + w_j R S_j - rd_i - w_i R S_i,  R S = (-S_y, S_x)
            Ld = (ux * (qd[bj] - qd[bj + 2] * Sjy - qd[bi] + qd[bi + 2] * Siy)
                  + uy * (qd[bj + 1] + qd[bj + 2] * Sjx - qd[bi + 1] - qd[bi + 2] * Six))
            f = p[5] * Ld + fv[3 * G.fidx[e]]
            pw -= f * Ld
            f += p[4] * (L - p[6])
            fx = f * ux; fy = f * uy
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Six * fy - Siy * fx
            Q[bj] -= fx; Q[bj + 1] -= fy; Q[bj + 2] -= Sjx * fy - Sjy * fx
        elif kind == F_RSDA:
            bj = G.boff[e * 2 + 1]
            d = qd[bj + 2] - qd[bi + 2]
            n = p[1] * d + fv[3 * G.fidx[e]]
            pw -= n * d
            n += p[0] * (q[bj + 2] - q[bi + 2] - p[2])
            Q[bi + 2] += n
            Q[bj + 2] -= n
        elif kind == F_FORCE:
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            fx = fv[3 * G.fidx[e * 2]]
            fy = fv[3 * G.fidx[e * 2 + 1]]
            if p[2] > 0.5:          # components in body axes: f = A f'
                f = c * fx - s * fy
                fy = s * fx + c * fy
                fx = f
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Six * fy - Siy * fx
            pw += fx * (qd[bi] - qd[bi + 2] * Siy) + fy * (qd[bi + 1] + qd[bi + 2] * Six)
        elif kind == F_TORQUE:
            bj = G.boff[e * 2 + 1]
            n = fv[3 * G.fidx[e]]
            Q[bi + 2] += n
            Q[bj + 2] -= n
            pw += n * (qd[bi + 2] - qd[bj + 2])
        elif kind == F_DRAG:
            # par = [s'_x, s'_y, 0.5 c_d rho A, c, wind_x, wind_y]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            vx = qd[bi] - qd[bi + 2] * Siy - p[4]
            vy = qd[bi + 1] + qd[bi + 2] * Six - p[5]
            f = -(p[2] * sqrt(vx * vx + vy * vy) + p[3])
            fx = f * vx; fy = f * vy
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Six * fy - Siy * fx
            pw += fx * (qd[bi] - qd[bi + 2] * Siy) + fy * (qd[bi + 1] + qd[bi + 2] * Six)
        elif kind == F_DAMPING:
            # par = [d_x, d_y, d_phi]
            Q[bi] -= p[0] * qd[bi]
            Q[bi + 1] -= p[1] * qd[bi + 1]
            Q[bi + 2] -= p[2] * qd[bi + 2]
            pw -= (p[0] * qd[bi] * qd[bi] + p[1] * qd[bi + 1] * qd[bi + 1]
                   + p[2] * qd[bi + 2] * qd[bi + 2])
        elif kind == F_CONTACT:
            # par = [s'_x, s'_y, radius, l'_x, l'_y, n'_x, n'_y, k, c, e, mu, v_eps,
            #        damping model (0 hunt_crossley, 1 compression, 2 linear),
            #        friction model (0 tanh, 1 linear)];  body i = disc, j = line body
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            nx = cj * p[5] - sj * p[6]; ny = sj * p[5] + cj * p[6]
            # d = n . (r_P - r_L)
            d = (nx * (q[bi] + Six - q[bj] - (cj * p[3] - sj * p[4]))
                 + ny * (q[bi + 1] + Siy - q[bj + 1] - (sj * p[3] + cj * p[4])))
            delta = p[2] - d
            if not (delta > 0.0):
                continue
            # contact point X = r_P - d n, relative to each body's origin
            Xix = Six - d * nx; Xiy = Siy - d * ny
            Xjx = q[bi] + Xix - q[bj]; Xjy = q[bi + 1] + Xiy - q[bj + 1]
            vx = (qd[bi] - qd[bi + 2] * Xiy) - (qd[bj] - qd[bj + 2] * Xjy)
            vy = (qd[bi + 1] + qd[bi + 2] * Xix) - (qd[bj + 1] + qd[bj + 2] * Xjx)
            dd = -(nx * vx + ny * vy)
            vt = ny * vx - nx * vy
            pe = pow(delta, p[9])
            fel = p[7] * pe
            if p[12] < 0.5:
                fn = fel + p[8] * pe * dd
            elif p[12] < 1.5:
                fn = fel + (p[8] * dd if dd > 0.0 else 0.0)
            else:
                fn = fel + p[8] * dd
            if fn < 0.0:
                fn = 0.0
            if p[13] < 0.5:
                ft = -p[10] * fn * tanh(vt / p[11])
            else:
                f = vt / p[11]
                if f > 1.0:
                    f = 1.0
                elif f < -1.0:
                    f = -1.0
                ft = -p[10] * fn * f
            # F = fn n + ft t with t = (n_y, -n_x)
            fx = fn * nx + ft * ny; fy = fn * ny - ft * nx
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Xix * fy - Xiy * fx
            Q[bj] -= fx; Q[bj + 1] -= fy; Q[bj + 2] -= Xjx * fy - Xjy * fx
            pw += -(fn - fel) * dd + ft * vt
    if P != NULL:
        P[0] += pw
    return -1


cdef mbcore_index _contact_jacobian(const mbcore_force_group* G, Py_ssize_t e, const double* q,
                                  const double* qd, double* K, double* C) noexcept nogil:
    """F9 contact (Contact.force_jacobian): the active branch's derivatives, every
    quantity with its 12 derivative columns [q_i, q_j, qd_i, qd_j]."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * 2], bj = G.boff[e * 2 + 1]
    cdef double ci, si, cj, sj, Sx, Sy, nx, ny, rLx, rLy, rpx, rpy, d, delta, Xix, Xiy
    cdef double Xjx, Xjy, vx, vy, dot_, vt, pe, dpe_f, fel, fd, fn, x, th, sat, dsat_f
    cdef double ft, Fx, Fy, tx, ty, wi, wj
    cdef double dd[12]
    cdef double dXi[24]
    cdef double dXj[24]
    cdef double dv[24]
    cdef double ddot[12]
    cdef double dvt[12]
    cdef double dfn[12]
    cdef double dft[12]
    cdef double dF[24]
    cdef double dnx5, dny5, a, b
    cdef int k, act, model
    ci = cos(q[bi + 2]); si = sin(q[bi + 2])
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    Sx = ci * p[0] - si * p[1]; Sy = si * p[0] + ci * p[1]
    nx = cj * p[5] - sj * p[6]; ny = sj * p[5] + cj * p[6]
    rLx = q[bj] + cj * p[3] - sj * p[4]; rLy = q[bj + 1] + sj * p[3] + cj * p[4]
    rpx = q[bi] + Sx - rLx; rpy = q[bi + 1] + Sy - rLy
    d = nx * rpx + ny * rpy
    delta = p[2] - d
    if not (delta > 0.0):
        return -1                         # no contact: K = C = 0
    wi = qd[bi + 2]; wj = qd[bj + 2]
    # dn only in column 5 (phi_j): R n = (-ny, nx)
    dnx5 = -ny; dny5 = nx
    # dd = dn^T rp + n^T (dr_i + dS - dr_L)
    for k in range(12):
        dd[k] = 0.0
    dd[0] = nx; dd[1] = ny
    dd[2] = nx * (-Sy) + ny * Sx
    dd[3] = -nx; dd[4] = -ny
    dd[5] = dnx5 * rpx + dny5 * rpy - (nx * (-(rLy - q[bj + 1])) + ny * (rLx - q[bj]))
    Xix = Sx - d * nx; Xiy = Sy - d * ny
    Xjx = q[bi] + Xix - q[bj]; Xjy = q[bi + 1] + Xiy - q[bj + 1]
    # dXi = dS - n dd - d dn  (rows x: [0:12], y: [12:24])
    for k in range(12):
        dXi[k] = -nx * dd[k]
        dXi[12 + k] = -ny * dd[k]
    dXi[2] += -Sy; dXi[14] += Sx
    dXi[5] -= d * dnx5; dXi[17] -= d * dny5
    for k in range(24):
        dXj[k] = dXi[k]
    dXj[0] += 1.0; dXj[13] += 1.0; dXj[3] -= 1.0; dXj[16] -= 1.0
    vx = (qd[bi] - wi * Xiy) - (qd[bj] - wj * Xjy)
    vy = (qd[bi + 1] + wi * Xix) - (qd[bj + 1] + wj * Xjx)
    for k in range(12):
        dv[k] = -wi * dXi[12 + k] + wj * dXj[12 + k]
        dv[12 + k] = wi * dXi[k] - wj * dXj[k]
    dv[6] = 1.0; dv[19] = 1.0
    dv[8] = -Xiy; dv[20] = Xix
    dv[9] = -1.0; dv[22] = -1.0
    dv[11] = Xjy; dv[23] = -Xjx
    dot_ = -(nx * vx + ny * vy)
    tx = ny; ty = -nx
    vt = tx * vx + ty * vy
    for k in range(12):
        ddot[k] = -(nx * dv[k] + ny * dv[12 + k])
        dvt[k] = tx * dv[k] + ty * dv[12 + k]
    ddot[5] -= dnx5 * vx + dny5 * vy
    dvt[5] += dny5 * vx - dnx5 * vy          # dt = (dn_y, -dn_x)
    pe = pow(delta, p[9])
    dpe_f = -p[9] * pow(delta, p[9] - 1.0)   # d pe = dpe_f * dd
    fel = p[7] * pe
    model = <int> (p[12] + 0.5)
    if model == 0:
        fd = p[8] * pe * dot_
    elif model == 1:
        fd = p[8] * dot_ if dot_ > 0.0 else 0.0
    else:
        fd = p[8] * dot_
    act = fel + fd > 0.0
    fn = fel + fd if act else 0.0
    for k in range(12):
        if not act:
            dfn[k] = 0.0
        elif model == 0:
            dfn[k] = p[7] * dpe_f * dd[k] + p[8] * (dpe_f * dd[k] * dot_ + pe * ddot[k])
        elif model == 1 and not (dot_ > 0.0):
            dfn[k] = p[7] * dpe_f * dd[k]
        else:
            dfn[k] = p[7] * dpe_f * dd[k] + p[8] * ddot[k]
    x = vt / p[11]
    if p[13] < 0.5:
        th = tanh(x)
        sat = th
        dsat_f = (1.0 - th * th) / p[11]
    else:
        sat = 1.0 if x > 1.0 else (-1.0 if x < -1.0 else x)
        dsat_f = 1.0 / p[11] if -1.0 < x < 1.0 else 0.0
    ft = -p[10] * fn * sat
    for k in range(12):
        dft[k] = -p[10] * (dfn[k] * sat + fn * dsat_f * dvt[k])
    Fx = fn * nx + ft * tx; Fy = fn * ny + ft * ty
    for k in range(12):
        dF[k] = nx * dfn[k] + tx * dft[k]
        dF[12 + k] = ny * dfn[k] + ty * dft[k]
    # dn = (dnx5, dny5) at 5, dt = (dny5, -dnx5) at 5
    dF[5] += fn * dnx5 + ft * dny5
    dF[17] += fn * dny5 - ft * dnx5
    for k in range(12):
        a = dXi[k] * Fy - dXi[12 + k] * Fx + Xix * dF[12 + k] - Xiy * dF[k]
        b = dXj[k] * Fy - dXj[12 + k] * Fx + Xjx * dF[12 + k] - Xjy * dF[k]
        if k < 6:
            K[k] = dF[k]; K[6 + k] = dF[12 + k]; K[12 + k] = a
            K[18 + k] = -dF[k]; K[24 + k] = -dF[12 + k]; K[30 + k] = -b
        else:
            C[k - 6] = dF[k]; C[k] = dF[12 + k]; C[6 + k] = a
            C[12 + k] = -dF[k]; C[18 + k] = -dF[12 + k]; C[24 + k] = -b
    return -1


cdef inline mbcore_index _planar_jacobian(int kind, const mbcore_force_group* G, Py_ssize_t e, const double* q,
                                 const double* qd, const double* fv, double* K,
                                 double* C) noexcept nogil:
    """K, C blocks (nl x nl, zeroed by the caller) of planar element e (Nikravesh (1988),
    §9.2: point force, torque, TSDA, RSDA, drag, fictitious damping); returns -1, or e when it cannot be evaluated."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * G.nb], bj
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, lx, ly, L, ux, uy, Ld, f, fx, fy
    cdef double ldx, ldy, vx, vy, sp_, kq, inv, m0, F00, F01, F11, dFx, dFy
    cdef double D[12]          # dl/dq (2 x 6), row-major
    cdef double a[6]
    cdef double Lq[6]
    cdef double FV[6]
    cdef int k, l
    if kind == F_TSDA:
        # Nikravesh (1988), §9.2: g = -D^T (f u); see TSDA.force_jacobian
        bj = G.boff[e * 2 + 1]
        c = cos(q[bi + 2]); s = sin(q[bi + 2])
        cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
        Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
        lx = q[bj] + Sjx - q[bi] - Six
        ly = q[bj + 1] + Sjy - q[bi + 1] - Siy
        L = sqrt(lx * lx + ly * ly)
        if not (L >= MIN_LENGTH):
            return e
        ux = lx / L; uy = ly / L
        for k in range(12):
            D[k] = 0.0
        D[0] = -1.0; D[7] = -1.0; D[2] = Siy; D[8] = -Six
        D[3] = 1.0; D[10] = 1.0; D[5] = -Sjy; D[11] = Sjx
        ldx = 0.0; ldy = 0.0
        for k in range(3):
            ldx += D[k] * qd[bi + k] + D[3 + k] * qd[bj + k]
            ldy += D[6 + k] * qd[bi + k] + D[9 + k] * qd[bj + k]
        Ld = ux * ldx + uy * ldy
        f = p[4] * (L - p[6]) + p[5] * Ld + fv[3 * G.fidx[e]]
        for k in range(6):
            a[k] = ux * D[k] + uy * D[6 + k]
            Lq[k] = (ldx * D[k] + ldy * D[6 + k] - Ld * a[k]) / L
        Lq[2] += qd[bi + 2] * (ux * Six + uy * Siy)
        Lq[5] -= qd[bj + 2] * (ux * Sjx + uy * Sjy)
        for k in range(6):
            for l in range(6):
                K[6 * k + l] = (-(f / L) * (D[k] * D[l] + D[6 + k] * D[6 + l] - a[k] * a[l])
                                - p[4] * a[k] * a[l] - p[5] * a[k] * Lq[l])
                C[6 * k + l] = -p[5] * a[k] * a[l]
        K[14] -= f * (Six * ux + Siy * uy)
        K[35] += f * (Sjx * ux + Sjy * uy)
    elif kind == F_RSDA:
        # Nikravesh (1988), §9.2: phi block k [[-1, 1], [1, -1]], c likewise
        K[14] = -p[0]; K[17] = p[0]; K[32] = p[0]; K[35] = -p[0]
        C[14] = -p[1]; C[17] = p[1]; C[32] = p[1]; C[35] = -p[1]
    elif kind == F_FORCE:
        # Nikravesh (1988), §9.2: global f: d(S x f)/dphi = -S . f; body f = A f': df/dphi = R f
        c = cos(q[bi + 2]); s = sin(q[bi + 2])
        fx = fv[3 * G.fidx[e * 2]]
        fy = fv[3 * G.fidx[e * 2 + 1]]
        if p[2] > 0.5:
            f = c * fx - s * fy
            fy = s * fx + c * fy
            fx = f
            K[2] = -fy
            K[5] = fx
        else:
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            K[8] = -(Six * fx + Siy * fy)
    elif kind == F_TORQUE:
        pass                             # Nikravesh (1988), §9.2: n(t) only
    elif kind == F_DRAG:
        # Nikravesh (1988), §9.2: F_v = -(kq |v| + c) I - kq v v^T / |v|, V = [I, R S]
        c = cos(q[bi + 2]); s = sin(q[bi + 2])
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
        vx = qd[bi] - qd[bi + 2] * Siy - p[4]
        vy = qd[bi + 1] + qd[bi + 2] * Six - p[5]
        sp_ = sqrt(vx * vx + vy * vy)
        kq = p[2]
        m0 = -(kq * sp_ + p[3])
        fx = m0 * vx; fy = m0 * vy
        inv = kq / sp_ if sp_ > 0.0 else 0.0
        F00 = m0 - inv * vx * vx; F01 = -inv * vx * vy; F11 = m0 - inv * vy * vy
        FV[0] = F00; FV[1] = F01; FV[2] = -F00 * Siy + F01 * Six
        FV[3] = F01; FV[4] = F11; FV[5] = -F01 * Siy + F11 * Six
        for k in range(3):
            C[k] = FV[k]
            C[3 + k] = FV[3 + k]
            C[6 + k] = Six * FV[3 + k] - Siy * FV[k]
        dFx = -qd[bi + 2] * (F00 * Six + F01 * Siy)
        dFy = -qd[bi + 2] * (F01 * Six + F11 * Siy)
        K[2] = dFx
        K[5] = dFy
        K[8] = -(Six * fx + Siy * fy) + Six * dFy - Siy * dFx
    elif kind == F_CONTACT:
        return _contact_jacobian(G, e, q, qd, K, C)
    elif kind == F_DAMPING:
        # Nikravesh (1988), §9.2: C = -diag(d)
        C[0] = -p[0]; C[4] = -p[1]; C[8] = -p[2]
    return -1


cdef inline mbcore_index _jacobians(int kind, const mbcore_force_group* G,
                                    const double* q, const double* qd, const double* fv,
                                    double* K, double* C) noexcept nogil:
    """The (nl x nl) K, C blocks of every element (zeroed by the core before the
    call); -1, or the element that cannot be evaluated."""
    cdef mbcore_index e, bad, nl2 = G.nb * 3
    nl2 = nl2 * nl2
    for e in range(G.ne):
        bad = _planar_jacobian(kind, G, e, q, qd, fv, K + e * nl2, C + e * nl2)
        if bad >= 0:
            return bad
    return -1


cdef mbcore_index _tsda_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_TSDA, G, q, qd, t, fv, Q, P)


cdef mbcore_index _tsda_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_TSDA, G, q, qd, fv, K, C)


cdef mbcore_index _rsda_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_RSDA, G, q, qd, t, fv, Q, P)


cdef mbcore_index _rsda_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_RSDA, G, q, qd, fv, K, C)


cdef mbcore_index _force_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_FORCE, G, q, qd, t, fv, Q, P)


cdef mbcore_index _force_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_FORCE, G, q, qd, fv, K, C)


cdef mbcore_index _torque_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_TORQUE, G, q, qd, t, fv, Q, P)


cdef mbcore_index _torque_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_TORQUE, G, q, qd, fv, K, C)


cdef mbcore_index _drag_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_DRAG, G, q, qd, t, fv, Q, P)


cdef mbcore_index _drag_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_DRAG, G, q, qd, fv, K, C)


cdef mbcore_index _contact_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_CONTACT, G, q, qd, t, fv, Q, P)


cdef mbcore_index _contact_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_CONTACT, G, q, qd, fv, K, C)


cdef mbcore_index _damping_f(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _accumulate(F_DAMPING, G, q, qd, t, fv, Q, P)


cdef mbcore_index _damping_j(const mbcore_force_group* G, const double* q, const double* qd,
                         double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(F_DAMPING, G, q, qd, fv, K, C)


cdef mbcore_force_kernel _KERNELS[7]
cdef const char* _TSDA_REASON = (b"the attachment points coincide (length < 1e-10): the "
                                 b"spring-damper direction is undefined")


cdef object _capsule(int k, const char* name, int nb, int npar, int nfun, object force,
                     const char* reason):
    _KERNELS[k].abi_version = MBCORE_ABI_VERSION
    _KERNELS[k].name = name
    _KERNELS[k].body_kind = MBCORE_BODY_PLANAR
    _KERNELS[k].n_bodies = nb
    _KERNELS[k].n_par = npar
    _KERNELS[k].n_fun = nfun
    _KERNELS[k].reason = reason
    return PyCapsule_New(&_KERNELS[k], MBCORE_FORCE_CAPSULE, NULL)


_KERNELS[0].force = _tsda_f
_KERNELS[0].jacobian = _tsda_j
#: the ``tsda`` kernel (a ``mbcore.force_kernel`` capsule)
TSDA = _capsule(0, b"tsda", 2, 7, 1, None, _TSDA_REASON)
_KERNELS[1].force = _rsda_f
_KERNELS[1].jacobian = _rsda_j
#: the ``rsda`` kernel (a ``mbcore.force_kernel`` capsule)
RSDA = _capsule(1, b"rsda", 2, 3, 1, None, NULL)
_KERNELS[2].force = _force_f
_KERNELS[2].jacobian = _force_j
#: the ``force`` kernel (a ``mbcore.force_kernel`` capsule)
FORCE = _capsule(2, b"force", 1, 3, 2, None, NULL)
_KERNELS[3].force = _torque_f
_KERNELS[3].jacobian = _torque_j
#: the ``torque`` kernel (a ``mbcore.force_kernel`` capsule)
TORQUE = _capsule(3, b"torque", 2, 0, 1, None, NULL)
_KERNELS[4].force = _drag_f
_KERNELS[4].jacobian = _drag_j
#: the ``drag`` kernel (a ``mbcore.force_kernel`` capsule)
DRAG = _capsule(4, b"drag", 1, 6, 0, None, NULL)
_KERNELS[5].force = _contact_f
_KERNELS[5].jacobian = _contact_j
#: the ``contact`` kernel (a ``mbcore.force_kernel`` capsule)
CONTACT = _capsule(5, b"contact", 2, 14, 0, None, NULL)
_KERNELS[6].force = _damping_f
_KERNELS[6].jacobian = _damping_j
#: the ``damping`` kernel (a ``mbcore.force_kernel`` capsule)
DAMPING = _capsule(6, b"damping", 1, 3, 0, None, NULL)
