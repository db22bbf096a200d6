# The compiled plugin tier of the force kernels (include/mbcore_plugin.h, ABI v1-v2),
# included by _forces.pyx: packing a group, calling its kernel, reading a kernel
# capsule, and self-test capsules: copies of a kernel capsule and two kernels of their
# own (tests/test_compiled_plugins.py, benchmarks/run.py).
# mbcore.plugins.compiled validates a capsule (with :func:`kernel_info`) before a
# System packs it; the checks here only guard the evaluators against misuse.

cdef const mbcore_force_kernel* _kernel_ptr(object capsule) except NULL:
    """The kernel of a ``mbcore.force_kernel`` capsule of this ABI version."""
    if not PyCapsule_IsValid(capsule, MBCORE_FORCE_CAPSULE):
        raise ValueError("not a 'mbcore.force_kernel' capsule")
    cdef const mbcore_force_kernel* K = <const mbcore_force_kernel*> PyCapsule_GetPointer(
        capsule, MBCORE_FORCE_CAPSULE)
    if not MBCORE_ABI_MIN_VERSION <= K.abi_version <= MBCORE_ABI_VERSION:
        raise ValueError(f"force kernel capsule of ABI version {K.abi_version}, mbcore "
                         f"implements {MBCORE_ABI_MIN_VERSION} to {MBCORE_ABI_VERSION}")
    if K.force == NULL:
        raise ValueError("force kernel capsule without a force function")
    return K


cdef Py_ssize_t _fill_group(FGroup* G, dict g, list keep, Py_ssize_t n) except -1:
    """G := the packed group ``g`` (``kernel``, its name, ``capsule``, ``boff``,
    ``par``, ``fidx``).  The arrays and the capsule stay alive in ``keep``; ``par`` is
    the caller's own array when it is C-contiguous float64 (state shared with the
    NumPy path: a stateful kernel, e.g. the spatial RSDA's tracked angle)."""
    capsule = g.get("capsule")
    if capsule is None:
        raise ValueError(f"force group {g.get('kernel')!r} has no kernel capsule: the "
                         f"evaluator runs compiled kernels of the plugin tier only "
                         f"(ForceType.c_kernel)")
    cdef const mbcore_force_kernel* K = _kernel_ptr(capsule)
    nb, npar, nfun = K.n_bodies, K.n_par, K.n_fun
    keep.append(capsule)
    boff = np.ascontiguousarray(g["boff"], dtype=np.intp)
    par = np.ascontiguousarray(g["par"], dtype=np.float64)
    fidx = np.ascontiguousarray(g["fidx"], dtype=np.intp)
    ne = boff.shape[0]
    if g.get("body_list") and ne == 1:
        # one element on a variable body list (ForceType.body_list): the kernel
        # declares its fixed bodies and parameter head, the element has more
        if boff.size < nb or par.size < npar:
            raise ValueError(f"force kernel {g['kernel']!r}: a body-list element needs "
                             f"at least {nb} bodies and {npar} parameters")
        nb, npar = boff.size, par.size
    if boff.size != ne * nb or par.size != ne * npar or fidx.size != ne * nfun:
        raise ValueError(f"force kernel {g['kernel']!r}: packed arrays have wrong sizes")
    _extent(boff, 0, n + 4, "boff")          # bodies, or a ground block (n, n + 3)
    need_fv = _extent(fidx, 0, -1, "fidx")
    keep.extend([boff, par, fidx])
    G.ne = ne
    G.nb = nb
    G.npar = npar
    G.nfun = nfun
    G.boff = <const Py_ssize_t*> _ptr_i(boff)
    G.par = <const double*> _ptr_d(par)
    G.fidx = <const Py_ssize_t*> _ptr_i(fidx)
    G.ext = K
    _abi_group(G, &G.abi)
    if K.abi_version >= 2 and K.stateful:
        # the kernel keeps per-element state in its parameters: the group's own array
        if par.size and not (isinstance(g["par"], np.ndarray)
                             and np.shares_memory(par, g["par"])):
            raise ValueError(f"force kernel {g['kernel']!r} updates its parameters in "
                             f"place: pass the group's C-contiguous float64 par array")
        G.abi.state = <double*> G.par
    return need_fv


cdef inline void _abi_group(const FGroup* G, mbcore_force_group* out) noexcept nogil:
    out.ne = G.ne
    out.nb = G.nb
    out.npar = G.npar
    out.nfun = G.nfun
    out.boff = G.boff
    out.par = G.par
    out.fidx = G.fidx
    out.state = NULL


cdef inline Py_ssize_t _external_forces(const FGroup* G, const double* q, const double* qd,
                                        double t, const double* fv, double* Q,
                                        double* P) noexcept nogil:
    """Q += the forces of an external group, P[0] += their non-conservative power;
    -1, or the element the plugin refused (any negative return counts as -1)."""
    cdef mbcore_index r = G.ext.force(&G.abi, q, qd, t, fv, Q, P)
    return -1 if r < 0 else r


cdef inline Py_ssize_t _external_jacobians(const FGroup* G, const double* q,
                                           const double* qd, double t, const double* fv,
                                           double* K, double* C) noexcept nogil:
    """The (nl x nl) K, C blocks of every element of an external group (zeroed by
    the caller); -1, or the element the plugin refused."""
    cdef mbcore_index r = G.ext.jacobian(&G.abi, q, qd, t, fv, K, C)
    return -1 if r < 0 else r


def kernel_info(object capsule):
    """What a capsule declares: ``None`` when it is no PyCapsule, else a dict with
    ``capsule_name`` (None for an unnamed capsule) and, for a ``mbcore.force_kernel``
    capsule, ``abi_version``; when that is this build's version also ``name``,
    ``body_kind`` (0 planar, 1 spatial), ``n_bodies``, ``n_par``, ``n_fun``,
    ``force`` and ``jacobian`` (whether the function pointers are set),
    ``reason`` (None when unset) and ``stateful`` (version 2; version 1: False).
    ``abi_version`` is the first member in every version of the struct, so it is
    read before anything else."""
    if not PyCapsule_CheckExact(capsule):
        return None
    cdef const char* cname = PyCapsule_GetName(capsule)
    info = {"capsule_name": None if cname == NULL else cname.decode("utf-8", "replace")}
    if not PyCapsule_IsValid(capsule, MBCORE_FORCE_CAPSULE):
        return info
    cdef const mbcore_force_kernel* K = <const mbcore_force_kernel*> PyCapsule_GetPointer(
        capsule, MBCORE_FORCE_CAPSULE)
    info["abi_version"] = K.abi_version
    if not MBCORE_ABI_MIN_VERSION <= K.abi_version <= MBCORE_ABI_VERSION:
        return info
    info.update(stateful=K.abi_version >= 2 and K.stateful != 0)
    info.update(name=None if K.name == NULL else K.name.decode("utf-8", "replace"),
                body_kind=K.body_kind, n_bodies=K.n_bodies, n_par=K.n_par,
                n_fun=K.n_fun, force=K.force != NULL, jacobian=K.jacobian != NULL,
                reason=None if K.reason == NULL else K.reason.decode("utf-8", "replace"))
    return info


# -- self-test capsules --------------------------------------------------------------
cdef mbcore_index _abi_null(const mbcore_force_group* A, const double* q, const double* qd,
                            double t, const double* fv, double* Q,
                            double* P) noexcept nogil:
    """A kernel that adds nothing (the benchmark's per-group cost of the tier)."""
    return -1


cdef mbcore_index _abi_clock(const mbcore_force_group* A, const double* q, const double* qd,
                             double t, const double* fv, double* Q,
                             double* P) noexcept nogil:
    """f_x = t on one planar body: the only self-test kernel that reads the ABI's
    ``t`` (the time plumbing of every caller; its Jacobian is zero)."""
    cdef Py_ssize_t e, bi
    for e in range(A.ne):
        bi = A.boff[e]
        Q[bi] += t
        if P != NULL:
            P[0] += t * qd[bi]
    return -1


cdef mbcore_index _abi_null_j(const mbcore_force_group* A, const double* q,
                              const double* qd, double t, const double* fv, double* K,
                              double* C) noexcept nogil:
    memset(K, 0, A.ne * 9 * A.nb * A.nb * sizeof(double))
    memset(C, 0, A.ne * 9 * A.nb * A.nb * sizeof(double))
    return -1


#: self-test kernels: name -> (body kind, n_bodies, n_par, n_fun, index into the tables)
SELFTEST_KERNELS = {
    "null": (MBCORE_BODY_PLANAR, 1, 0, 0, 0),
    "clock": (MBCORE_BODY_PLANAR, 1, 0, 0, 1),
}
cdef mbcore_force_fn _SELF_FORCE[2]
cdef mbcore_force_jacobian_fn _SELF_JAC[2]
_SELF_FORCE[0] = _abi_null
_SELF_FORCE[1] = _abi_clock
_SELF_JAC[0] = _abi_null_j
_SELF_JAC[1] = _abi_null_j


ctypedef struct _OwnedKernel:
    mbcore_force_kernel k          # first: the capsule's pointer is the struct's
    char name[64]
    char reason[512]


cdef void _free_owned(object capsule) noexcept:
    free(PyCapsule_GetPointer(capsule, MBCORE_FORCE_CAPSULE))


def builtin_capsule(object kernel, *, abi_version=None, body_kind=None, n_bodies=None,
                    n_par=None, n_fun=None, bint force=True, bint jacobian=True):
    """A ``mbcore.force_kernel`` capsule of the external ABI: the self-test ``kernel``
    (one of :data:`SELFTEST_KERNELS`), or a copy of the kernel of another such capsule
    (e.g. a built-in type's, ``mbplugins._ext._planar_forces.TSDA``): what a
    compiled plugin provides, without a compiler.  The keywords override the declared
    fields (tests of the loader's checks: a wrong version, size or body kind, no
    force or no Jacobian function)."""
    cdef const mbcore_force_kernel* src = NULL
    if isinstance(kernel, str):
        if kernel not in SELFTEST_KERNELS:
            raise ValueError(f"no self-test kernel {kernel!r}; expected one of "
                             f"{', '.join(SELFTEST_KERNELS)} or a kernel capsule")
        kind, nb, npar, nfun, idx = SELFTEST_KERNELS[kernel]
        label, why = kernel, ""
    else:
        src = _kernel_ptr(kernel)
        kind, nb, npar, nfun = src.body_kind, src.n_bodies, src.n_par, src.n_fun
        label = "copy" if src.name == NULL else src.name.decode("utf-8", "replace")
        why = "" if src.reason == NULL else src.reason.decode("utf-8", "replace")
    cdef _OwnedKernel* o = <_OwnedKernel*> malloc(sizeof(_OwnedKernel))
    if o == NULL:
        raise MemoryError()
    memset(o, 0, sizeof(_OwnedKernel))
    name = f"builtin:{label}".encode()[:63]
    memcpy(o.name, <const char*> name, len(name))
    reason = why.encode()[:511]
    memcpy(o.reason, <const char*> reason, len(reason))
    o.k.abi_version = MBCORE_ABI_VERSION if abi_version is None else abi_version
    o.k.name = o.name
    o.k.body_kind = kind if body_kind is None else body_kind
    o.k.n_bodies = nb if n_bodies is None else n_bodies
    o.k.n_par = npar if n_par is None else n_par
    o.k.n_fun = nfun if n_fun is None else n_fun
    if src != NULL:
        o.k.force = src.force if force else NULL
        o.k.jacobian = src.jacobian if jacobian else NULL
    else:
        o.k.force = _SELF_FORCE[idx] if force else NULL
        o.k.jacobian = _SELF_JAC[idx] if jacobian else NULL
    o.k.reason = o.reason if reason else NULL
    return PyCapsule_New(o, MBCORE_FORCE_CAPSULE, _free_owned)
