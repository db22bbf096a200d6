/*
 * mbcore_plugin.h — the C-level contract of mbcore's compiled plugin tier.
 *
 * A third-party extension module provides an element kernel as a static struct
 * wrapped in a PyCapsule:
 *
 *   force types       ``mbcore_force_kernel`` in a capsule named
 *                     MBCORE_FORCE_CAPSULE ("mbcore.force_kernel");
 *   constraint types  ``mbcore_constraint_kernel`` in a capsule named
 *                     MBCORE_CONSTRAINT_CAPSULE ("mbcore.constraint_kernel").
 *
 * Its Python type (a subclass of mbcore.elements.ForceType or ConstraintType)
 * names the capsule in its class attribute ``c_kernel =
 * "package.module:attribute"``.  mbcore checks the capsule name, ``abi_version``
 * and the declared sizes against the Python type when a model is compiled, and
 * then calls the kernel from its compiled assembly, right-hand sides, kinematic
 * step and integration loops without the GIL and without Python.
 *
 * Versioning: MBCORE_ABI_VERSION changes whenever a struct or a signature below
 * changes (additions included); ``abi_version`` stays the first member of
 * every kernel struct in every version, so mbcore reads it before anything
 * else.  Versions only append members to the structs, so mbcore loads every
 * version from MBCORE_ABI_MIN_VERSION to MBCORE_ABI_VERSION (it reads the
 * members of the capsule's own version, and hands a kernel only the group
 * members of that version).  A kernel of another version is refused with a
 * message naming the plugin, the type and the versions (mbcore.plugins.compiled).
 * Rebuild the plugin against the installed mbcore (``mbcore.get_include()``
 * gives this directory).
 *
 * Version 2 (this one) adds, for constraint kernels, the direct layout (the
 * kernel writes into mbcore's own vectors and Jacobian through the group's
 * ``row`` and ``jpos``: the layout of mbcore's built-in kernels, no scatter by
 * mbcore), artificial coordinates per element (``n_extra``, ``xoff``), and, for
 * both families, per-element state (``stateful``: the kernel keeps tracking state
 * in its elements' own parameters through ``state``).
 *
 * Force kernels (docs/plugin-guide.md):
 *   q, qd   coordinates and velocities, indexed by the body offsets ``boff``.
 *           A planar body block is [x, y, phi] (3 doubles), a spatial one
 *           [x, y, z, e0, e1, e2, e3] (7).  The ground block is read-only:
 *           planar zeros, spatial [0, 0, 0, 1, 0, 0, 0].
 *   Q       generalised forces, same indexing: the kernel ADDS each element's
 *           forces (planar [fx, fy, n], n about the body origin; spatial
 *           the Euler-parameter form [f, 2 G(p)^T n] = [f, 2 L(p)^T n'], n the
 *           moment in global axes, n' in body axes) into the
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
 *   body list  A type with a variable body list (``ForceType.body_list``, e.g.
 *           spatial:sphere_group) has one element per group, G->nb = its fixed
 *           bodies (the kernel's ``n_bodies``) + the listed bodies, and G->npar >=
 *           the kernel's ``n_par`` (the element's own parameters after the head):
 *           such a kernel reads both from G.  Its Python type opts in; every
 *           other kernel sees G->nb == n_bodies and G->npar == n_par.  (A
 *           semantic addition within ABI version 2: an mbcore without body lists
 *           refuses such a type, its declared sizes differing from the kernel's.)
 */
#ifndef MBCORE_PLUGIN_H
#define MBCORE_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MBCORE_ABI_VERSION 2
#define MBCORE_ABI_MIN_VERSION 1           /* the oldest version mbcore still loads */
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
    /* v2 */
    double *state;                       /* stateful kernels: par itself, writable (the
                                            kernel's per-element state, e.g. a tracked
                                            angle, kept in its own parameters and shared
                                            with the type's Python methods); else NULL */
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
    /* v2 */
    int stateful;                        /* 1: the kernel writes per-element state
                                            through G->state (0: par is read-only) */
} mbcore_force_kernel;

/* ---------------------------------------------------------------------------
 * Constraint kernels (docs/plugin-guide.md; the equations of Nikravesh (1988), §3.2.2:
 * Phi(q, t) = 0, Phi_q qd = nu with nu = -Phi_t, Phi_q qdd = gamma).
 *
 *   q, qd   as for forces: the extended coordinates and velocities, body blocks
 *           at ``boff`` (planar ground zeros, spatial ground [0,0,0,1,0,0,0],
 *           zero velocities; read-only).
 *   out     phi, nu, gamma: (ne, m) row-major, element e's m equations at
 *           out + e * m.  The kernel WRITES every entry (mbcore scatters the rows
 *           into its own vectors).  A non-holonomic type (``holonomic`` 0: a
 *           velocity-level constraint) writes 0 into phi.
 *   J       the Jacobian blocks (ne, m, nb, nc) row-major: J[((e*m + r)*nb + b)*nc
 *           + c] = d phi_r / d q_(body b, coordinate c), nc = 3 planar, 7 spatial
 *           (the Euler-parameter form [Phi_r, 2 Phi_pi' L(p)] of
 *           SpatialConstraintType.jacobian).  mbcore zeroes
 *           J before the call, so a kernel may write only its non-zero entries;
 *           mbcore scatters the blocks into its dense or CSR Jacobian and drops
 *           the entries of ground columns.
 *   fv, par, t, return: as for forces (a returned element index is reported
 *           with the element's name, the time and ``reason``).  The kernels are
 *           always called for a whole group; ``par`` is const (a ``stateful``
 *           kernel writes its per-element state through ``state``, v2).
 *
 * Direct layout (v2, ``scatter`` = MBCORE_SCATTER_DIRECT; the layout of mbcore's
 * own built-in kernels, with no scatter step):
 *   out     phi, nu, gamma: mbcore's vectors; element e's m equations at
 *           out[row[e] + r].
 *   J       mbcore's Jacobian data (dense or CSR): the entry of row r, body b,
 *           coordinate c of element e at J[jpos[e * njac + (r * nb + b) * nc + c]],
 *           then, with artificial coordinates, the entry of row r and extra
 *           coordinate x at J[jpos[e * njac + m * nb * nc + r * nx + x]]
 *           (njac = m (nb nc + nx)).  Entries of ground columns have slots of
 *           their own (write them; mbcore drops them).  The kernel WRITES every
 *           entry of its elements (J is not zeroed).
 *   xoff    (ne, nx) offsets in q of each element's artificial coordinates
 *           (ConstraintType.extra, e.g. a cam's curve parameter); nx = n_extra.
 *
 * ABI v1 (blocks only) has no artificial coordinates: a v1 kernel's type with
 * ``extra`` coordinates is refused with a PluginError.
 * ------------------------------------------------------------------------- */
#define MBCORE_CONSTRAINT_CAPSULE "mbcore.constraint_kernel"

#define MBCORE_SCATTER_BLOCKS 0          /* v1 layout: (ne, m) rows, zeroed blocks */
#define MBCORE_SCATTER_DIRECT 1          /* v2: the kernel writes by row / jpos */

/* One group: the ``ne`` elements of one constraint type in one model. */
typedef struct mbcore_constraint_group {
    mbcore_index ne;                     /* elements */
    mbcore_index m;                      /* equations per element (= n_equations) */
    mbcore_index nb;                     /* bodies per element (= n_bodies) */
    mbcore_index npar;                   /* floats per element (= n_par) */
    mbcore_index nfun;                   /* time functions per element (= n_fun) */
    const mbcore_index *boff;            /* (ne, nb) offsets of the body blocks in q */
    const double *par;                   /* (ne, npar) packed parameters */
    const mbcore_index *fidx;            /* (ne, nfun) rows of fv */
    /* v2 */
    const mbcore_index *row;             /* (ne) first row of each element (direct) */
    const mbcore_index *jpos;            /* (ne, njac) Jacobian data positions (direct) */
    mbcore_index njac;                   /* m (nb nc + nx) */
    mbcore_index nc;                     /* coordinates per body: 3 planar, 7 spatial */
    mbcore_index nx;                     /* artificial coordinates per element */
    const mbcore_index *xoff;            /* (ne, nx) their offsets in q */
    double *state;                       /* stateful kernels: par, writable; else NULL */
} mbcore_constraint_group;

/* out (ne, m) := phi or nu of every element of G. */
typedef mbcore_index (*mbcore_constraint_fn)(const mbcore_constraint_group *G,
                                             const double *q, double t, const double *fv,
                                             double *out);
/* J (ne, m, nb, nc) := the Jacobian blocks (zeroed by mbcore before the call). */
typedef mbcore_index (*mbcore_constraint_jacobian_fn)(const mbcore_constraint_group *G,
                                                      const double *q, double t,
                                                      const double *fv, double *J);
/* out (ne, m) := gamma = -(Phi_q qd)_q qd - 2 Phi_qt qd - Phi_tt. */
typedef mbcore_index (*mbcore_constraint_gamma_fn)(const mbcore_constraint_group *G,
                                                   const double *q, const double *qd,
                                                   double t, const double *fv,
                                                   double *out);

typedef struct mbcore_constraint_kernel {
    int abi_version;                     /* MBCORE_ABI_VERSION at build time */
    const char *name;                    /* kernel name (messages) */
    int body_kind;                       /* MBCORE_BODY_PLANAR or MBCORE_BODY_SPATIAL */
    int n_equations, n_bodies, n_par, n_fun;   /* must equal the Python type's */
    int holonomic;                       /* 1, or 0 for a velocity-level constraint */
    mbcore_constraint_fn phi;            /* required */
    mbcore_constraint_jacobian_fn jacobian;    /* required */
    mbcore_constraint_fn nu;             /* optional: NULL = scleronomic (nu = 0) */
    mbcore_constraint_gamma_fn gamma;    /* required */
    const char *reason;                  /* why an element fails (NULL: generic) */
    /* v2 */
    int scatter;                         /* MBCORE_SCATTER_BLOCKS or _DIRECT */
    int n_extra;                         /* artificial coordinates per element (direct
                                            only; = len(ConstraintType.extra)) */
    int stateful;                        /* 1: writes per-element state via G->state */
} mbcore_constraint_kernel;

#ifdef __cplusplus
}
#endif

#endif /* MBCORE_PLUGIN_H */
