/*
 * mbcore_plugin.h — the C-level contract of mbcore's compiled plugin tier.
 *
 * A third-party extension module provides an element kernel as a static
 * ``mbcore_force_kernel`` struct wrapped in a PyCapsule named
 * MBCORE_FORCE_CAPSULE ("mbcore.force_kernel").  Its Python force type
 * (a subclass of mbcore.elements.ForceType) names the capsule in its class
 * attribute ``c_kernel = "package.module:attribute"``.  mbcore checks the
 * capsule name, ``abi_version`` and the declared sizes against the Python type
 * when a model is compiled, and then calls ``force`` from its compiled assembly,
 * right-hand side and integration loops without the GIL and without Python.
 *
 * Versioning: MBCORE_ABI_VERSION changes whenever a struct or a signature below
 * changes (additions included); ``abi_version`` stays the first member of
 * ``mbcore_force_kernel`` in every version, so mbcore reads it before anything
 * else.  A kernel built against another version is refused with a message naming
 * the plugin, the type and both versions (mbcore.compiled_plugins).  Rebuild the
 * plugin against the installed mbcore (``mbcore.get_include()`` gives this
 * directory).
 *
 * Conventions (docs/plugin-guide.md):
 *   q, qd   coordinates and velocities, indexed by the body offsets ``boff``.
 *           A planar body block is [x, y, phi] (3 doubles), a spatial one
 *           [x, y, z, e0, e1, e2, e3] (7).  The ground block is read-only:
 *           planar zeros, spatial [0, 0, 0, 1, 0, 0, 0].
 *   Q       generalised forces, same indexing: the kernel ADDS each element's
 *           forces (planar [fx, fy, n], n about the body origin; spatial
 *           the Euler-parameter form [f, 2 G(p)^T n] = [f, 2 L(p)^T n'], n the
 *           moment in global axes, n' in body axes, spec/spatial.md §3) into the
 *           body blocks.  Forces landing on the ground block are discarded.
 *   P       NULL, or one double: ADD the power of the non-conservative part of
 *           the forces (what ``ForceType.power_nc`` returns, summed).
 *   fv      time-function jets: function k of element e is the row
 *           fidx[e * nfun + k] of fv, three doubles (c, c', c'') at time t.
 *   par     the floats of ``ForceType.pack``: element e at par + e * npar.
 *   t       the time (the built-in kernels read time only through fv).
 *   return  -1 on success, or the index of the first element that cannot be
 *           evaluated (mbcore then raises an error naming that element, the
 *           time and ``reason``; an index outside [0, ne) is a PluginError).
 *           Never call Python, never allocate per call, never keep pointers
 *           across calls.  The kernel may be called for a sub-range of a group
 *           (``ne`` = 1 and the pointers advanced to element e: the per-element
 *           power of the compiled DAE Jacobians), so elements must be
 *           independent of each other.
 */
#ifndef MBCORE_PLUGIN_H
#define MBCORE_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MBCORE_ABI_VERSION 1
#define MBCORE_FORCE_CAPSULE "mbcore.force_kernel"

#define MBCORE_BODY_PLANAR 0
#define MBCORE_BODY_SPATIAL 1

typedef ptrdiff_t mbcore_index;          /* Py_ssize_t on every CPython platform */

/* One group: the ``ne`` elements of one force type in one model. */
typedef struct mbcore_force_group {
    mbcore_index ne;                     /* elements */
    mbcore_index nb;                     /* bodies per element (= n_bodies) */
    mbcore_index npar;                   /* floats per element (= n_par) */
    mbcore_index nfun;                   /* time functions per element (= n_fun) */
    const mbcore_index *boff;            /* (ne, nb) offsets of the body blocks in q */
    const double *par;                   /* (ne, npar) packed parameters */
    const mbcore_index *fidx;            /* (ne, nfun) rows of fv */
} mbcore_force_group;

/* Q += forces of every element of G; P (if not NULL) += their non-conservative power. */
typedef mbcore_index (*mbcore_force_fn)(const mbcore_force_group *G, const double *q,
                                        const double *qd, double t, const double *fv,
                                        double *Q, double *P);

/* Optional analytic Jacobians: for element e, K and C receive the (nl x nl) blocks
 * d g / d q_b and d g / d qd_b (nl = nb x coordinates per body, row-major, rows and
 * columns in the order of the element's body blocks) at K + e * nl * nl (written,
 * not accumulated; mbcore zeroes the blocks before the call, so a kernel may
 * write only its non-zero entries).  Spatial blocks are in the Euler-parameter
 * form of Q (the derivatives of Q's body blocks by [r, p]), as
 * ``ForceType.force_jacobian``.  NULL: mbcore uses the type's Python
 * ``force_jacobian``, else forward differences (of the Python ``force`` for
 * System.force_jacobians, of the compiled right-hand side in compiled loops). */
typedef mbcore_index (*mbcore_force_jacobian_fn)(const mbcore_force_group *G,
                                                 const double *q, const double *qd,
                                                 double t, const double *fv,
                                                 double *K, double *C);

typedef struct mbcore_force_kernel {
    int abi_version;                     /* MBCORE_ABI_VERSION at build time */
    const char *name;                    /* kernel name (messages) */
    int body_kind;                       /* MBCORE_BODY_PLANAR or MBCORE_BODY_SPATIAL */
    int n_bodies, n_par, n_fun;          /* must equal the Python type's declaration */
    mbcore_force_fn force;               /* required */
    mbcore_force_jacobian_fn jacobian;   /* optional (NULL) */
    const char *reason;                  /* why an element fails (NULL: generic) */
} mbcore_force_kernel;

#ifdef __cplusplus
}
#endif

#endif /* MBCORE_PLUGIN_H */
