# Cython declarations of mbcore's compiled plugin contract (include/mbcore_plugin.h).
# A plugin's .pyx does ``from mbcore.plugin cimport *`` and is compiled with
# ``include_dirs=[mbcore.get_include()]``; see docs/plugin-guide.md.
cdef extern from "mbcore_plugin.h":
    enum: MBCORE_ABI_VERSION
    enum: MBCORE_ABI_MIN_VERSION
    enum: MBCORE_SCATTER_BLOCKS
    enum: MBCORE_SCATTER_DIRECT
    enum: MBCORE_BODY_PLANAR
    enum: MBCORE_BODY_SPATIAL
    const char* MBCORE_FORCE_CAPSULE

    ctypedef Py_ssize_t mbcore_index

    ctypedef struct mbcore_force_group:
        mbcore_index ne, nb, npar, nfun
        const mbcore_index* boff
        const double* par
        const mbcore_index* fidx
        double* state                   # v2

    ctypedef mbcore_index (*mbcore_force_fn)(const mbcore_force_group* G, const double* q,
                                             const double* qd, double t, const double* fv,
                                             double* Q, double* P) noexcept nogil
    ctypedef mbcore_index (*mbcore_force_jacobian_fn)(const mbcore_force_group* G,
                                                      const double* q, const double* qd,
                                                      double t, const double* fv,
                                                      double* K, double* C) noexcept nogil

    ctypedef struct mbcore_force_kernel:
        int abi_version
        const char* name
        int body_kind
        int n_bodies, n_par, n_fun
        mbcore_force_fn force
        mbcore_force_jacobian_fn jacobian
        const char* reason
        int stateful                    # v2

    # constraint kernels (capsule MBCORE_CONSTRAINT_CAPSULE)
    const char* MBCORE_CONSTRAINT_CAPSULE

    ctypedef struct mbcore_constraint_group:
        mbcore_index ne, m, nb, npar, nfun
        const mbcore_index* boff
        const double* par
        const mbcore_index* fidx
        const mbcore_index* row         # v2
        const mbcore_index* jpos
        mbcore_index njac, nc, nx
        const mbcore_index* xoff
        double* state

    ctypedef mbcore_index (*mbcore_constraint_fn)(const mbcore_constraint_group* G,
                                                  const double* q, double t,
                                                  const double* fv,
                                                  double* out) noexcept nogil
    ctypedef mbcore_index (*mbcore_constraint_jacobian_fn)(const mbcore_constraint_group* G,
                                                           const double* q, double t,
                                                           const double* fv,
                                                           double* J) noexcept nogil
    ctypedef mbcore_index (*mbcore_constraint_gamma_fn)(const mbcore_constraint_group* G,
                                                        const double* q, const double* qd,
                                                        double t, const double* fv,
                                                        double* out) noexcept nogil

    ctypedef struct mbcore_constraint_kernel:
        int abi_version
        const char* name
        int body_kind
        int n_equations, n_bodies, n_par, n_fun
        int holonomic
        mbcore_constraint_fn phi
        mbcore_constraint_jacobian_fn jacobian
        mbcore_constraint_fn nu
        mbcore_constraint_gamma_fn gamma
        const char* reason
        int scatter                     # v2
        int n_extra
        int stateful
