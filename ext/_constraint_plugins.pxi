# The compiled plugin tier of the constraint kernels (include/mbcore_plugin.h, ABI v1),
# included by _planar.pyx: calling a plugin's kernel for an external group (into the
# group's scratch, then scattered by ``row`` / ``jpos``), reading a kernel capsule,
# and self-test capsules that wrap built-in kernels in the external ABI
# (tests/test_compiled_constraint_plugins.py, benchmarks/run.py).
# mbcore.plugins.compiled validates a capsule (with :func:`constraint_kernel_info`)
# before a System packs it; the checks here only guard the evaluator against misuse.

#: the C ABI version of this build (MBCORE_ABI_VERSION; also _forces.ABI_VERSION)
ABI_VERSION = MBCORE_ABI_VERSION


cdef const mbcore_constraint_kernel* _constraint_kernel_ptr(object capsule) except NULL:
    """The kernel of a ``mbcore.constraint_kernel`` capsule of this ABI version."""
    if not PyCapsule_IsValid(capsule, MBCORE_CONSTRAINT_CAPSULE):
        raise ValueError("not a 'mbcore.constraint_kernel' capsule")
    cdef const mbcore_constraint_kernel* K = <const mbcore_constraint_kernel*> \
        PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE)
    if K.abi_version != MBCORE_ABI_VERSION:
        raise ValueError(f"constraint kernel capsule of ABI version {K.abi_version}, "
                         f"mbcore implements {MBCORE_ABI_VERSION}")
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


cdef inline void _abi_cgroup(const Group* G, mbcore_constraint_group* A) noexcept nogil:
    A.ne = G.ne
    A.m = G.m
    A.nb = G.nb
    A.npar = G.npar
    A.nfun = G.nfun
    A.boff = G.boff
    A.par = G.par
    A.fidx = G.fidx


cdef Py_ssize_t _ext_rows(Group* G, int stage, const double* q, const double* qd, double t,
                          const double* fv, double* out) noexcept nogil:
    """out[row[e] + k] = the plugin's phi / nu / gamma (``stage``) of an external
    group; -1, or the element it refused (any negative return counts as -1).  A
    kernel without ``nu`` is scleronomic: zeros."""
    cdef mbcore_constraint_group A
    cdef mbcore_index r = -1
    cdef Py_ssize_t e, k, o, m = G.m
    cdef const double* src
    _abi_cgroup(G, &A)
    if stage == ST_PHI:
        r = G.ext.phi(&A, q, t, fv, G.rows)
    elif stage == ST_GAMMA:
        r = G.ext.gamma(&A, q, qd, t, fv, G.rows)
    elif G.ext.nu != NULL:
        r = G.ext.nu(&A, q, t, fv, G.rows)
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


cdef Py_ssize_t _ext_jacobian(Group* G, const double* q, double t, const double* fv,
                              double* J) noexcept nogil:
    """J[jpos] = the plugin's Jacobian blocks (zeroed before the call; entries of
    ground columns land in their own slots after the matrix: dropped)."""
    cdef mbcore_constraint_group A
    cdef Py_ssize_t i, size = G.ne * G.njac
    cdef mbcore_index r
    _abi_cgroup(G, &A)
    memset(G.jblk, 0, size * sizeof(double))
    r = G.ext.jacobian(&A, q, t, fv, G.jblk)
    if r >= 0:
        return r
    for i in range(size):
        J[G.jpos[i]] = G.jblk[i]
    return -1


def constraint_kernel_info(object capsule):
    """What a capsule declares: ``None`` when it is no PyCapsule, else a dict with
    ``capsule_name`` (None for an unnamed capsule) and, for a
    ``mbcore.constraint_kernel`` capsule, ``abi_version``; when that is this build's
    version also ``name``, ``body_kind`` (0 planar, 1 spatial), ``n_equations``,
    ``n_bodies``, ``n_par``, ``n_fun``, ``holonomic``, ``phi``, ``jacobian``,
    ``nu``, ``gamma`` (whether the function pointers are set) and ``reason`` (None
    when unset).  ``abi_version`` is the first member in every version of the
    struct, so it is read before anything else."""
    if not PyCapsule_CheckExact(capsule):
        return None
    cdef const char* cname = PyCapsule_GetName(capsule)
    info = {"capsule_name": None if cname == NULL else cname.decode("utf-8", "replace")}
    if not PyCapsule_IsValid(capsule, MBCORE_CONSTRAINT_CAPSULE):
        return info
    cdef const mbcore_constraint_kernel* K = <const mbcore_constraint_kernel*> \
        PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE)
    info["abi_version"] = K.abi_version
    if K.abi_version != MBCORE_ABI_VERSION:
        return info
    info.update(name=None if K.name == NULL else K.name.decode("utf-8", "replace"),
                body_kind=K.body_kind, n_equations=K.n_equations, n_bodies=K.n_bodies,
                n_par=K.n_par, n_fun=K.n_fun, holonomic=bool(K.holonomic),
                phi=K.phi != NULL, jacobian=K.jacobian != NULL, nu=K.nu != NULL,
                gamma=K.gamma != NULL,
                reason=None if K.reason == NULL else K.reason.decode("utf-8", "replace"))
    return info


# -- self-test capsules: built-in kernels behind the external ABI ----------------------
# A built-in kernel is run element by element on a one-element Group whose row is 0 and
# whose Jacobian positions are the identity, so that it writes the ABI's (m) rows and
# (m, nb, nc) blocks of that element.
cdef enum:
    _IDENT_SIZE = 128          # >= m * nb * nc of every self-test kernel

cdef Py_ssize_t _IDENT[_IDENT_SIZE]
for _k in range(_IDENT_SIZE):
    _IDENT[_k] = _k


cdef inline void _one_element(Group* G, int kind, const mbcore_constraint_group* A,
                              Py_ssize_t e) noexcept nogil:
    cdef Py_ssize_t ncol = 7 if kind >= K_SPATIAL else 3
    G.kind = kind
    G.ne = 1
    G.nb = A.nb
    G.m = A.m
    G.npar = A.npar
    G.nfun = A.nfun
    G.njac = A.m * A.nb * ncol
    G.nx = 0
    G.ncol = ncol
    G.boff = A.boff + e * A.nb
    G.xoff = NULL
    G.row = _IDENT               # row[0] = 0
    G.par = A.par + e * A.npar
    G.fidx = A.fidx + e * A.nfun
    G.jpos = _IDENT
    G.ext = NULL
    G.rows = NULL
    G.jblk = NULL


cdef mbcore_index _self_stage(int kind, int stage, const mbcore_constraint_group* A,
                              const double* q, const double* qd, const double* fv,
                              double* out) noexcept nogil:
    """The built-in kernel ``kind`` for ``stage`` (ST_*) of every element of A: rows
    (ne, m) or, for ST_JACOBIAN, blocks (ne, m, nb, nc)."""
    cdef Group G
    cdef Py_ssize_t e, size
    for e in range(A.ne):
        _one_element(&G, kind, A, e)
        if stage == ST_JACOBIAN:
            _jac(&G, q, out + e * G.njac)
        elif stage == ST_PHI:
            _phi(&G, q, fv, out + e * A.m)
        elif stage == ST_NU:
            _nu(&G, fv, out + e * A.m)
        else:
            _gamma(&G, q, qd, fv, out + e * A.m)
    return -1


# the trampolines of the wrapped kernels (the ABI passes no kernel identity)
cdef mbcore_index _rev_phi(const mbcore_constraint_group* A, const double* q, double t,
                           const double* fv, double* out) noexcept nogil:
    return _self_stage(K_REVOLUTE, ST_PHI, A, q, NULL, fv, out)


cdef mbcore_index _rev_jac(const mbcore_constraint_group* A, const double* q, double t,
                           const double* fv, double* J) noexcept nogil:
    return _self_stage(K_REVOLUTE, ST_JACOBIAN, A, q, NULL, fv, J)


cdef mbcore_index _rev_nu(const mbcore_constraint_group* A, const double* q, double t,
                          const double* fv, double* out) noexcept nogil:
    return _self_stage(K_REVOLUTE, ST_NU, A, q, NULL, fv, out)


cdef mbcore_index _rev_gamma(const mbcore_constraint_group* A, const double* q,
                             const double* qd, double t, const double* fv,
                             double* out) noexcept nogil:
    return _self_stage(K_REVOLUTE, ST_GAMMA, A, q, qd, fv, out)


cdef mbcore_index _dist_phi(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    return _self_stage(K_DISTANCE, ST_PHI, A, q, NULL, fv, out)


cdef mbcore_index _dist_jac(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* J) noexcept nogil:
    return _self_stage(K_DISTANCE, ST_JACOBIAN, A, q, NULL, fv, J)


cdef mbcore_index _dist_nu(const mbcore_constraint_group* A, const double* q, double t,
                           const double* fv, double* out) noexcept nogil:
    return _self_stage(K_DISTANCE, ST_NU, A, q, NULL, fv, out)


cdef mbcore_index _dist_gamma(const mbcore_constraint_group* A, const double* q,
                              const double* qd, double t, const double* fv,
                              double* out) noexcept nogil:
    return _self_stage(K_DISTANCE, ST_GAMMA, A, q, qd, fv, out)


cdef mbcore_index _ssph_phi(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    return _self_stage(K_S_SPHERICAL, ST_PHI, A, q, NULL, fv, out)


cdef mbcore_index _ssph_jac(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* J) noexcept nogil:
    return _self_stage(K_S_SPHERICAL, ST_JACOBIAN, A, q, NULL, fv, J)


cdef mbcore_index _ssph_nu(const mbcore_constraint_group* A, const double* q, double t,
                           const double* fv, double* out) noexcept nogil:
    return _self_stage(K_S_SPHERICAL, ST_NU, A, q, NULL, fv, out)


cdef mbcore_index _ssph_gamma(const mbcore_constraint_group* A, const double* q,
                              const double* qd, double t, const double* fv,
                              double* out) noexcept nogil:
    return _self_stage(K_S_SPHERICAL, ST_GAMMA, A, q, qd, fv, out)


cdef mbcore_index _sdist_phi(const mbcore_constraint_group* A, const double* q, double t,
                             const double* fv, double* out) noexcept nogil:
    return _self_stage(K_S_DISTANCE, ST_PHI, A, q, NULL, fv, out)


cdef mbcore_index _sdist_jac(const mbcore_constraint_group* A, const double* q, double t,
                             const double* fv, double* J) noexcept nogil:
    return _self_stage(K_S_DISTANCE, ST_JACOBIAN, A, q, NULL, fv, J)


cdef mbcore_index _sdist_nu(const mbcore_constraint_group* A, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    return _self_stage(K_S_DISTANCE, ST_NU, A, q, NULL, fv, out)


cdef mbcore_index _sdist_gamma(const mbcore_constraint_group* A, const double* q,
                               const double* qd, double t, const double* fv,
                               double* out) noexcept nogil:
    return _self_stage(K_S_DISTANCE, ST_GAMMA, A, q, qd, fv, out)


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


#: self-test kernels: name -> (body kind, equations, n_bodies, n_par, n_fun, table index)
SELFTEST_CONSTRAINT_KERNELS = {
    "revolute": (MBCORE_BODY_PLANAR, 2, 2, 4, 0, 0),
    "distance": (MBCORE_BODY_PLANAR, 1, 2, 4, 1, 1),
    "spatial_spherical": (MBCORE_BODY_SPATIAL, 3, 2, 6, 0, 2),
    "spatial_distance": (MBCORE_BODY_SPATIAL, 1, 2, 6, 1, 3),
    "clock": (MBCORE_BODY_PLANAR, 1, 1, 0, 0, 4),
    "null": (MBCORE_BODY_PLANAR, 1, 1, 0, 0, 5),
}
#: why a self-test kernel refuses an element (the capsule's ``reason``)
CONSTRAINT_REASONS = {"clock": "the clock constraint is defined for t >= 0 only"}
cdef mbcore_constraint_fn _SC_PHI[6]
cdef mbcore_constraint_jacobian_fn _SC_JAC[6]
cdef mbcore_constraint_fn _SC_NU[6]
cdef mbcore_constraint_gamma_fn _SC_GAMMA[6]
_SC_PHI[0] = _rev_phi
_SC_PHI[1] = _dist_phi
_SC_PHI[2] = _ssph_phi
_SC_PHI[3] = _sdist_phi
_SC_PHI[4] = _clock_phi
_SC_PHI[5] = _null_rows
_SC_JAC[0] = _rev_jac
_SC_JAC[1] = _dist_jac
_SC_JAC[2] = _ssph_jac
_SC_JAC[3] = _sdist_jac
_SC_JAC[4] = _clock_jac
_SC_JAC[5] = _null_jac
_SC_NU[0] = _rev_nu
_SC_NU[1] = _dist_nu
_SC_NU[2] = _ssph_nu
_SC_NU[3] = _sdist_nu
_SC_NU[4] = _clock_nu
_SC_NU[5] = _null_rows
_SC_GAMMA[0] = _rev_gamma
_SC_GAMMA[1] = _dist_gamma
_SC_GAMMA[2] = _ssph_gamma
_SC_GAMMA[3] = _sdist_gamma
_SC_GAMMA[4] = _null_gamma
_SC_GAMMA[5] = _null_gamma

ctypedef struct _OwnedConstraintKernel:
    mbcore_constraint_kernel k     # first: the capsule's pointer is the struct's
    char name[64]
    char reason[512]


cdef void _free_owned_constraint(object capsule) noexcept:
    free(PyCapsule_GetPointer(capsule, MBCORE_CONSTRAINT_CAPSULE))


def builtin_constraint_capsule(str kernel, *, abi_version=None, body_kind=None,
                               n_equations=None, n_bodies=None, n_par=None, n_fun=None,
                               holonomic=True, bint phi=True, bint jacobian=True,
                               bint nu=True, bint gamma=True):
    """A ``mbcore.constraint_kernel`` capsule whose functions are the built-in
    ``kernel`` (one of :data:`SELFTEST_CONSTRAINT_KERNELS`) behind the external
    ABI: what a compiled plugin provides, without a compiler.  The keywords override
    the declared fields (tests of the loader's checks: a wrong version, size, body
    kind or holonomic flag, missing functions; ``nu=False``: a scleronomic kernel
    without ``nu``)."""
    if kernel not in SELFTEST_CONSTRAINT_KERNELS:
        raise ValueError(f"no self-test constraint kernel {kernel!r}; expected one of "
                         f"{', '.join(SELFTEST_CONSTRAINT_KERNELS)}")
    kind, m, nb, npar, nfun, idx = SELFTEST_CONSTRAINT_KERNELS[kernel]
    cdef _OwnedConstraintKernel* o = <_OwnedConstraintKernel*> malloc(
        sizeof(_OwnedConstraintKernel))
    if o == NULL:
        raise MemoryError()
    memset(o, 0, sizeof(_OwnedConstraintKernel))
    name = f"builtin:{kernel}".encode()[:63]
    memcpy(o.name, <const char*> name, len(name))
    reason = CONSTRAINT_REASONS.get(kernel, "").encode()[:511]
    memcpy(o.reason, <const char*> reason, len(reason))
    o.k.abi_version = MBCORE_ABI_VERSION if abi_version is None else abi_version
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
