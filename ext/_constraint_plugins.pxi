# The compiled plugin tier of the constraint kernels (include/mbcore_plugin.h), included
# by _planar.pyx: reading a kernel capsule, calling a block-layout (ABI v1) kernel
# (into the group's scratch, then scattered by ``row`` / ``jpos``), nu of a direct
# kernel without one, and self-test capsules: a direct kernel behind the block layout
# and two kernels of their own (tests/test_compiled_constraint_plugins.py,
# benchmarks/run.py).
# mbcore.plugins.compiled validates a capsule (with :func:`constraint_kernel_info`)
# before a System packs it; the checks here only guard the evaluator against misuse.

#: the C ABI version of this build (MBCORE_ABI_VERSION; also _forces.ABI_VERSION)
ABI_VERSION = MBCORE_ABI_VERSION
#: the oldest C ABI version this build still loads
ABI_MIN_VERSION = MBCORE_ABI_MIN_VERSION


cdef const mbcore_constraint_kernel* _constraint_kernel_ptr(object capsule) except NULL:
    """The kernel of a ``mbcore.constraint_kernel`` capsule of this ABI version."""
    if not PyCapsule_IsValid(capsule, MBCORE_CONSTRAINT_CAPSULE):
        raise ValueError("not a 'mbcore.constraint_kernel' capsule")
    cdef const mbcore_constraint_kernel* K = <const mbcore_constraint_kernel*> \
        PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE)
    if not MBCORE_ABI_MIN_VERSION <= K.abi_version <= MBCORE_ABI_VERSION:
        raise ValueError(f"constraint kernel capsule of ABI version {K.abi_version}, "
                         f"mbcore implements {MBCORE_ABI_MIN_VERSION} to "
                         f"{MBCORE_ABI_VERSION}")
    if K.phi == NULL or K.jacobian == NULL or K.gamma == NULL:
        raise ValueError("constraint kernel capsule without phi, jacobian or gamma")
    if K.body_kind != MBCORE_BODY_PLANAR and K.body_kind != MBCORE_BODY_SPATIAL:
        raise ValueError(f"constraint kernel capsule of unknown body kind {K.body_kind}")
    return K


cdef inline Py_ssize_t _failed(PlanarEvaluator ev, Py_ssize_t g, Py_ssize_t e) noexcept nogil:
    ev.failed_group = g
    ev.failed_element = e
    return g


cdef _raise_failed(PlanarEvaluator ev, double t):
    """A plugin kernel refused an element: the System's named error (on_failure)."""
    if ev.on_failure is not None:
        ev.on_failure(ev.failed_group, ev.failed_element, t)
    raise RuntimeError(f"the compiled constraint kernel of group {ev.failed_group} "
                       f"refused element {ev.failed_element} at t = {t:g}")


cdef Py_ssize_t _block_rows(Group* G, int stage, const double* q, const double* qd,
                            double t, const double* fv, double* out) noexcept nogil:
    """out[row[e] + k] = the phi / nu / gamma (``stage``) of a block-layout kernel's
    group; -1, or the element it refused (any negative return counts as -1).  A
    kernel without ``nu`` is scleronomic: zeros."""
    cdef mbcore_index r = -1
    cdef Py_ssize_t e, k, o, m = G.m
    cdef const double* src
    if stage == ST_PHI:
        r = G.ext.phi(&G.abi, q, t, fv, G.rows)
    elif stage == ST_GAMMA:
        r = G.ext.gamma(&G.abi, q, qd, t, fv, G.rows)
    elif G.ext.nu != NULL:
        r = G.ext.nu(&G.abi, q, t, fv, G.rows)
    else:
        for e in range(G.ne):
            o = G.row[e]
            for k in range(m):
                out[o + k] = 0.0
        return -1
    if r >= 0:
        return r
    for e in range(G.ne):
        o = G.row[e]
        src = G.rows + e * m
        for k in range(m):
            out[o + k] = src[k]
    return -1


cdef Py_ssize_t _block_jacobian(Group* G, const double* q, double t, const double* fv,
                                double* J) noexcept nogil:
    """J[jpos] = a block-layout kernel's Jacobian blocks (zeroed before the call;
    entries of ground columns land in their own slots after the matrix: dropped)."""
    cdef Py_ssize_t i, size = G.ne * G.njac
    cdef mbcore_index r
    memset(G.jblk, 0, size * sizeof(double))
    r = G.ext.jacobian(&G.abi, q, t, fv, G.jblk)
    if r >= 0:
        return r
    for i in range(size):
        J[G.jpos[i]] = G.jblk[i]
    return -1


cdef inline Py_ssize_t _direct_nu(Group* G, const double* q, double t, const double* fv,
                                  double* out) noexcept nogil:
    """nu of a direct-layout kernel; without ``nu`` (scleronomic) zeros at its rows."""
    cdef Py_ssize_t e, k, o
    if G.ext.nu != NULL:
        return G.ext.nu(&G.abi, q, t, fv, out)
    for e in range(G.ne):
        o = G.row[e]
        for k in range(G.m):
            out[o + k] = 0.0
    return -1


def constraint_kernel_info(object capsule):
    """What a capsule declares: ``None`` when it is no PyCapsule, else a dict with
    ``capsule_name`` (None for an unnamed capsule) and, for a
    ``mbcore.constraint_kernel`` capsule, ``abi_version``; when that is a version
    this build loads also ``name``, ``body_kind`` (0 planar, 1 spatial),
    ``n_equations``, ``n_bodies``, ``n_par``, ``n_fun``, ``holonomic``, ``phi``,
    ``jacobian``, ``nu``, ``gamma`` (whether the function pointers are set),
    ``reason`` (None when unset) and the members of version 2 (version 1: their
    defaults): ``direct`` (the direct layout), ``n_extra`` and ``stateful``.
    ``abi_version`` is the first member in every version of the struct, so it is
    read before anything else."""
    if not PyCapsule_CheckExact(capsule):
        return None
    cdef const char* cname = PyCapsule_GetName(capsule)
    info = {"capsule_name": None if cname == NULL else cname.decode("utf-8", "replace")}
    if not PyCapsule_IsValid(capsule, MBCORE_CONSTRAINT_CAPSULE):
        return info
    cdef const mbcore_constraint_kernel* K = <const mbcore_constraint_kernel*> \
        PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE)
    info["abi_version"] = K.abi_version
    if not MBCORE_ABI_MIN_VERSION <= K.abi_version <= MBCORE_ABI_VERSION:
        return info
    cdef bint v2 = K.abi_version >= 2
    info.update(direct=v2 and K.scatter == MBCORE_SCATTER_DIRECT,
                n_extra=K.n_extra if v2 else 0, stateful=v2 and K.stateful != 0)
    info.update(name=None if K.name == NULL else K.name.decode("utf-8", "replace"),
                body_kind=K.body_kind, n_equations=K.n_equations, n_bodies=K.n_bodies,
                n_par=K.n_par, n_fun=K.n_fun, holonomic=bool(K.holonomic),
                phi=K.phi != NULL, jacobian=K.jacobian != NULL, nu=K.nu != NULL,
                gamma=K.gamma != NULL,
                reason=None if K.reason == NULL else K.reason.decode("utf-8", "replace"))
    return info


# -- self-test capsules --------------------------------------------------------------
# A direct-layout kernel behind the block layout: run element by element on a
# one-element group whose row is 0 and whose Jacobian positions are the identity, so
# that it writes the (m) rows and (m, nb, nc) blocks of that element.  The ABI passes
# no kernel identity, so each wrapped kernel takes one of a few slots, each with its
# own trampolines.
cdef enum:
    _IDENT_SIZE = 256          # >= m * nb * nc of every wrapped kernel
    _NSLOTS = 6

cdef mbcore_index _IDENT[_IDENT_SIZE]
for _k in range(_IDENT_SIZE):
    _IDENT[_k] = _k
cdef const mbcore_constraint_kernel* _SLOT[_NSLOTS]
for _k in range(_NSLOTS):
    _SLOT[_k] = NULL
_SLOT_CAPSULES = [None] * _NSLOTS      # keeps the wrapped capsules alive


cdef mbcore_index _wrapped_stage(int slot, int stage, const mbcore_constraint_group* A,
                                 const double* q, const double* qd, double t,
                                 const double* fv, double* out) noexcept nogil:
    """The wrapped kernel of ``slot`` for ``stage`` (ST_*) of every element of A: rows
    (ne, m) or, for ST_JACOBIAN, blocks (ne, m, nb, nc)."""
    cdef const mbcore_constraint_kernel* K = _SLOT[slot]
    cdef mbcore_constraint_group G
    cdef Py_ssize_t e, k
    cdef mbcore_index r = -1
    cdef mbcore_index nc = 7 if K.body_kind == MBCORE_BODY_SPATIAL else 3
    G.ne = 1
    G.m = A.m
    G.nb = A.nb
    G.npar = A.npar
    G.nfun = A.nfun
    G.row = _IDENT
    G.jpos = _IDENT
    G.njac = A.m * A.nb * nc
    G.nc = nc
    G.nx = 0
    G.xoff = NULL
    G.state = NULL
    for e in range(A.ne):
        G.boff = A.boff + e * A.nb
        G.par = A.par + e * A.npar
        G.fidx = A.fidx + e * A.nfun
        if stage == ST_JACOBIAN:
            r = K.jacobian(&G, q, t, fv, out + e * G.njac)
        elif stage == ST_PHI:
            r = K.phi(&G, q, t, fv, out + e * A.m)
        elif stage == ST_NU:
            if K.nu == NULL:
                for k in range(A.m):
                    out[e * A.m + k] = 0.0
            else:
                r = K.nu(&G, q, t, fv, out + e * A.m)
        else:
            r = K.gamma(&G, q, qd, t, fv, out + e * A.m)
        if r >= 0:
            return e
    return -1


cdef mbcore_index _w0_phi(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(0, ST_PHI, A, q, NULL, t, fv, out)


cdef mbcore_index _w0_jac(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* J) noexcept nogil:
    return _wrapped_stage(0, ST_JACOBIAN, A, q, NULL, t, fv, J)


cdef mbcore_index _w0_nu(const mbcore_constraint_group* A, const double* q, double t,
                         const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(0, ST_NU, A, q, NULL, t, fv, out)


cdef mbcore_index _w0_gamma(const mbcore_constraint_group* A, const double* q,
                            const double* qd, double t, const double* fv,
                            double* out) noexcept nogil:
    return _wrapped_stage(0, ST_GAMMA, A, q, qd, t, fv, out)


cdef mbcore_index _w1_phi(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(1, ST_PHI, A, q, NULL, t, fv, out)


cdef mbcore_index _w1_jac(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* J) noexcept nogil:
    return _wrapped_stage(1, ST_JACOBIAN, A, q, NULL, t, fv, J)


cdef mbcore_index _w1_nu(const mbcore_constraint_group* A, const double* q, double t,
                         const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(1, ST_NU, A, q, NULL, t, fv, out)


cdef mbcore_index _w1_gamma(const mbcore_constraint_group* A, const double* q,
                            const double* qd, double t, const double* fv,
                            double* out) noexcept nogil:
    return _wrapped_stage(1, ST_GAMMA, A, q, qd, t, fv, out)


cdef mbcore_index _w2_phi(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(2, ST_PHI, A, q, NULL, t, fv, out)


cdef mbcore_index _w2_jac(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* J) noexcept nogil:
    return _wrapped_stage(2, ST_JACOBIAN, A, q, NULL, t, fv, J)


cdef mbcore_index _w2_nu(const mbcore_constraint_group* A, const double* q, double t,
                         const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(2, ST_NU, A, q, NULL, t, fv, out)


cdef mbcore_index _w2_gamma(const mbcore_constraint_group* A, const double* q,
                            const double* qd, double t, const double* fv,
                            double* out) noexcept nogil:
    return _wrapped_stage(2, ST_GAMMA, A, q, qd, t, fv, out)


cdef mbcore_index _w3_phi(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(3, ST_PHI, A, q, NULL, t, fv, out)


cdef mbcore_index _w3_jac(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* J) noexcept nogil:
    return _wrapped_stage(3, ST_JACOBIAN, A, q, NULL, t, fv, J)


cdef mbcore_index _w3_nu(const mbcore_constraint_group* A, const double* q, double t,
                         const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(3, ST_NU, A, q, NULL, t, fv, out)


cdef mbcore_index _w3_gamma(const mbcore_constraint_group* A, const double* q,
                            const double* qd, double t, const double* fv,
                            double* out) noexcept nogil:
    return _wrapped_stage(3, ST_GAMMA, A, q, qd, t, fv, out)


cdef mbcore_index _w4_phi(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(4, ST_PHI, A, q, NULL, t, fv, out)


cdef mbcore_index _w4_jac(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* J) noexcept nogil:
    return _wrapped_stage(4, ST_JACOBIAN, A, q, NULL, t, fv, J)


cdef mbcore_index _w4_nu(const mbcore_constraint_group* A, const double* q, double t,
                         const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(4, ST_NU, A, q, NULL, t, fv, out)


cdef mbcore_index _w4_gamma(const mbcore_constraint_group* A, const double* q,
                            const double* qd, double t, const double* fv,
                            double* out) noexcept nogil:
    return _wrapped_stage(4, ST_GAMMA, A, q, qd, t, fv, out)


cdef mbcore_index _w5_phi(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(5, ST_PHI, A, q, NULL, t, fv, out)


cdef mbcore_index _w5_jac(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* J) noexcept nogil:
    return _wrapped_stage(5, ST_JACOBIAN, A, q, NULL, t, fv, J)


cdef mbcore_index _w5_nu(const mbcore_constraint_group* A, const double* q, double t,
                         const double* fv, double* out) noexcept nogil:
    return _wrapped_stage(5, ST_NU, A, q, NULL, t, fv, out)


cdef mbcore_index _w5_gamma(const mbcore_constraint_group* A, const double* q,
                            const double* qd, double t, const double* fv,
                            double* out) noexcept nogil:
    return _wrapped_stage(5, ST_GAMMA, A, q, qd, t, fv, out)


# "clock": x_body - t = 0 for t >= 0 (the only self-test kernel that reads the ABI's t,
# and the one that refuses elements: every element at t < 0)
cdef mbcore_index _clock_phi(const mbcore_constraint_group* A, const double* q, double t,
                             const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e
    for e in range(A.ne):
        if t < 0.0:
            return e
        out[e] = q[A.boff[e]] - t
    return -1


cdef mbcore_index _clock_jac(const mbcore_constraint_group* A, const double* q, double t,
                             const double* fv, double* J) noexcept nogil:
    cdef Py_ssize_t e
    for e in range(A.ne):
        if t < 0.0:
            return e
        J[3 * e] = 1.0               # the zeroed block: only the non-zero entry
    return -1


cdef mbcore_index _clock_nu(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e
    for e in range(A.ne):
        if t < 0.0:
            return e
        out[e] = 1.0
    return -1


cdef mbcore_index _null_rows(const mbcore_constraint_group* A, const double* q, double t,
                             const double* fv, double* out) noexcept nogil:
    """Zeros (the clock's gamma; the null kernel: the benchmark's floor of the tier)."""
    memset(out, 0, A.ne * A.m * sizeof(double))
    return -1


cdef mbcore_index _null_jac(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* J) noexcept nogil:
    return -1


cdef mbcore_index _null_gamma(const mbcore_constraint_group* A, const double* q,
                              const double* qd, double t, const double* fv,
                              double* out) noexcept nogil:
    return _null_rows(A, q, t, fv, out)


#: self-test kernels of their own: name -> (body kind, equations, n_bodies, n_par,
#: n_fun, table index); table entries 0 .. _NSLOTS - 1 are the wrapping slots
SELFTEST_CONSTRAINT_KERNELS = {
    "clock": (MBCORE_BODY_PLANAR, 1, 1, 0, 0, _NSLOTS),
    "null": (MBCORE_BODY_PLANAR, 1, 1, 0, 0, _NSLOTS + 1),
}
#: why a self-test kernel refuses an element (the capsule's ``reason``)
CONSTRAINT_REASONS = {"clock": "the clock constraint is defined for t >= 0 only"}
cdef mbcore_constraint_fn _SC_PHI[_NSLOTS + 2]
cdef mbcore_constraint_jacobian_fn _SC_JAC[_NSLOTS + 2]
cdef mbcore_constraint_fn _SC_NU[_NSLOTS + 2]
cdef mbcore_constraint_gamma_fn _SC_GAMMA[_NSLOTS + 2]
_SC_PHI[0] = _w0_phi
_SC_JAC[0] = _w0_jac
_SC_NU[0] = _w0_nu
_SC_GAMMA[0] = _w0_gamma
_SC_PHI[1] = _w1_phi
_SC_JAC[1] = _w1_jac
_SC_NU[1] = _w1_nu
_SC_GAMMA[1] = _w1_gamma
_SC_PHI[2] = _w2_phi
_SC_JAC[2] = _w2_jac
_SC_NU[2] = _w2_nu
_SC_GAMMA[2] = _w2_gamma
_SC_PHI[3] = _w3_phi
_SC_JAC[3] = _w3_jac
_SC_NU[3] = _w3_nu
_SC_GAMMA[3] = _w3_gamma
_SC_PHI[4] = _w4_phi
_SC_JAC[4] = _w4_jac
_SC_NU[4] = _w4_nu
_SC_GAMMA[4] = _w4_gamma
_SC_PHI[5] = _w5_phi
_SC_JAC[5] = _w5_jac
_SC_NU[5] = _w5_nu
_SC_GAMMA[5] = _w5_gamma
_SC_PHI[_NSLOTS] = _clock_phi
_SC_JAC[_NSLOTS] = _clock_jac
_SC_NU[_NSLOTS] = _clock_nu
_SC_GAMMA[_NSLOTS] = _null_gamma
_SC_PHI[_NSLOTS + 1] = _null_rows
_SC_JAC[_NSLOTS + 1] = _null_jac
_SC_NU[_NSLOTS + 1] = _null_rows
_SC_GAMMA[_NSLOTS + 1] = _null_gamma

ctypedef struct _OwnedConstraintKernel:
    mbcore_constraint_kernel k     # first: the capsule's pointer is the struct's
    char name[64]
    char reason[512]


cdef void _free_owned_constraint(object capsule) noexcept:
    free(PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE))


cdef int _wrap_slot(object capsule) except -1:
    """The slot of a direct-layout kernel (the same kernel keeps its slot)."""
    cdef const mbcore_constraint_kernel* K = _constraint_kernel_ptr(capsule)
    cdef int k
    if not (K.abi_version >= 2 and K.scatter == MBCORE_SCATTER_DIRECT):
        raise ValueError("only a direct-layout (ABI v2) kernel is wrapped")
    if K.n_extra or K.stateful:
        raise ValueError("a kernel with artificial coordinates or state cannot be wrapped "
                         "in the block layout")
    if K.n_equations * K.n_bodies * 7 > _IDENT_SIZE:
        raise ValueError("the kernel's Jacobian blocks exceed the self-test identity map")
    for k in range(_NSLOTS):
        if _SLOT[k] == K:
            return k
    for k in range(_NSLOTS):
        if _SLOT[k] == NULL:
            _SLOT[k] = K
            _SLOT_CAPSULES[k] = capsule
            return k
    raise ValueError(f"no free self-test slot ({_NSLOTS} kernels wrapped already)")


def builtin_constraint_capsule(object kernel, *, abi_version=None, body_kind=None,
                               n_equations=None, n_bodies=None, n_par=None, n_fun=None,
                               holonomic=True, bint phi=True, bint jacobian=True,
                               bint nu=True, bint gamma=True):
    """A block-layout ``mbcore.constraint_kernel`` capsule (what a compiled plugin of
    ABI version 1 provides, without a compiler): ``kernel`` a direct-layout kernel
    capsule (e.g. a built-in type's, ``mbplugins._ext._planar_constraints.REVOLUTE``)
    run behind the block layout, or the name of a self-test kernel of
    :data:`SELFTEST_CONSTRAINT_KERNELS`.  The keywords override the declared fields
    (tests of the loader's checks: a wrong version, size, body kind or holonomic
    flag, missing functions; ``nu=False``: a scleronomic kernel without ``nu``)."""
    cdef const mbcore_constraint_kernel* W
    cdef const char* wname
    if isinstance(kernel, str):
        if kernel not in SELFTEST_CONSTRAINT_KERNELS:
            raise ValueError(f"no self-test constraint kernel {kernel!r}; expected a "
                             f"kernel capsule or one of "
                             f"{', '.join(SELFTEST_CONSTRAINT_KERNELS)}")
        kind, m, nb, npar, nfun, idx = SELFTEST_CONSTRAINT_KERNELS[kernel]
        label = kernel
    else:
        idx = _wrap_slot(kernel)
        W = _SLOT[idx]
        kind, m, nb, npar, nfun = (W.body_kind, W.n_equations, W.n_bodies, W.n_par,
                                   W.n_fun)
        wname = W.name
        label = "kernel" if wname == NULL else wname.decode("utf-8", "replace")
    cdef _OwnedConstraintKernel* o = <_OwnedConstraintKernel*> malloc(
        sizeof(_OwnedConstraintKernel))
    if o == NULL:
        raise MemoryError()
    memset(o, 0, sizeof(_OwnedConstraintKernel))
    name = f"builtin:{label}".encode()[:63]
    memcpy(o.name, <const char*> name, len(name))
    reason = CONSTRAINT_REASONS.get(label, "").encode()[:511]
    memcpy(o.reason, <const char*> reason, len(reason))
    o.k.abi_version = 1 if abi_version is None else abi_version     # the block layout
    o.k.name = o.name
    o.k.body_kind = kind if body_kind is None else body_kind
    o.k.n_equations = m if n_equations is None else n_equations
    o.k.n_bodies = nb if n_bodies is None else n_bodies
    o.k.n_par = npar if n_par is None else n_par
    o.k.n_fun = nfun if n_fun is None else n_fun
    o.k.holonomic = 1 if holonomic else 0
    o.k.phi = _SC_PHI[idx] if phi else NULL
    o.k.jacobian = _SC_JAC[idx] if jacobian else NULL
    o.k.nu = _SC_NU[idx] if nu else NULL
    o.k.gamma = _SC_GAMMA[idx] if gamma else NULL
    o.k.reason = o.reason if reason else NULL
    return PyCapsule_New(o, MBCORE_CONSTRAINT_CAPSULE, _free_owned_constraint)
