"""Sparse Schur-complement equations of motion: O(N) per evaluation.

``[M, -J^T; J, 0] [qdd; lam] = [Q; gamma]`` with the diagonal mass matrix of
centroidal planar frames reduces to ``B lam = gamma - J M^-1 Q`` with the sparse
symmetric positive definite ``B = J M^-1 J^T`` and ``qdd = M^-1 (Q + J^T lam)``
(Nikravesh (1988), Prob. 10.9-10.10; docs/linear-solvers.md).

* :class:`SchurTopology` — everything that depends on the sparsity pattern only,
  computed once per System (or per set of independent rows): the pattern of B, a
  fill-reducing ordering (the cheapest of minimum degree, reverse Cuthill–McKee and
  the natural order, judged by the symbolic factorisation), the elimination tree and
  column counts of L, and the *product map* giving every entry of the permuted
  upper triangle of B as ``sum (J M^-1)[a] J[b]`` over the used entries of J.
* :class:`SparseSchurSolver` — the compiled numeric phase
  (``mbcore._ext._sparse.SparseSchur``: assemble B, sparse LDL^T along the
  elimination tree, solves; nothing allocated per call).
* :class:`SparseSchurReference` — the NumPy/SciPy reference of the same function
  (sparse products and SuperLU without pivoting on the same ordering).

Both return 0 or, when a pivot fails the relative test ``D_kk <= 1e-13 max diag B``
(the test of the dense ``SchurSolver``), a positive code; ``failed_row`` then names
the constraint row of the failed pivot.
"""
from __future__ import annotations

import weakref

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

#: relative pivot tolerance, the same as the dense Schur solver's
PIVOT_TOL = 1e-13
ORDERINGS = ("auto", "mmd", "rcm", "natural")


def _etree_counts(m, Bp, Bi, cap=-1.0):
    """Elimination tree and column counts of the permuted upper pattern (compiled;
    a SciPy fallback that only gives the fill when the extension is missing)."""
    try:
        from .._ext._sparse import etree_counts
    except ImportError:                      # pragma: no cover - numpy-only installs
        etree_counts = None
    if etree_counts is not None:
        return etree_counts(m, Bp, Bi, cap)
    A = sp.csc_matrix((np.ones(len(Bi)), Bi, Bp), shape=(m, m))
    A = A + sp.triu(A, 1).T + sp.identity(m) * (m + 1.0)
    lu = spla.splu(A.tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0,
                   options={"SymmetricMode": True})
    L = lu.L.tocsc()
    lnz = np.diff(L.indptr) - 1
    return None, lnz, float(np.sum(lnz.astype(float) ** 2))


def _symbolic_kernels(symbolic: str):
    """The compiled symbolic kernels (schur_pattern, schur_upper, schur_products) for
    ``symbolic`` = "compiled"/"auto" when built, None for "numpy" (or "auto" without
    the extension)."""
    if symbolic not in ("auto", "compiled", "numpy"):
        raise ValueError(f"symbolic={symbolic!r}: expected 'auto', 'compiled' or 'numpy'")
    if symbolic == "numpy":
        return None
    try:
        from .._ext._sparse import schur_pattern, schur_products, schur_upper
    except ImportError:                      # pragma: no cover - numpy-only installs
        if symbolic == "compiled":
            raise
        return None
    return schur_pattern, schur_upper, schur_products


class SchurTopology:
    """Symbolic analysis of ``B = J_r M^-1 J_r^T`` for the rows ``rows`` (default:
    all) of a CSR Jacobian pattern ``(indptr, indices)`` with ``n`` columns.  The
    Jacobian *data* stays in the System's buffer: every index here is a position in
    it.  ``ordering``: ``"auto"`` (least factorisation work among the candidates),
    ``"mmd"``, ``"rcm"``, ``"natural"`` or an explicit permutation of the rows.
    ``entries`` (optional): the data positions to use (the
    others are taken as zero: e.g. the transformed columns of spatial bodies, where
    whole (row, column) pairs vanish identically, ``SpatialMass.nonzero_entries``).
    ``symbolic``: ``"compiled"`` (``mbcore._ext._sparse``: schur_pattern, schur_upper,
    schur_products, linear in the number of products), ``"numpy"`` (the reference:
    sparse products and stable sorts of keys) or ``"auto"`` (compiled when built);
    both give the same arrays."""

    def __init__(self, indptr, indices, n: int, rows=None, ordering="auto", entries=None,
                 symbolic: str = "auto"):
        #: the pattern arrays this topology was computed from (the cache's check)
        self.source, self.source_indices = indptr, indices
        indptr = np.asarray(indptr, dtype=np.intp)
        indices = np.asarray(indices, dtype=np.intp)
        m_full = len(indptr) - 1
        rowid = np.arange(m_full, dtype=np.intp) if rows is None else \
            np.asarray(rows, dtype=np.intp)
        m = len(rowid)
        self.n, self.m, self.m_full = int(n), m, m_full
        self.rowid = rowid
        # ---- the used rows as a CSR over positions in the Jacobian data
        counts = indptr[rowid + 1] - indptr[rowid]
        rp = np.zeros(m + 1, dtype=np.intp)
        np.cumsum(counts, out=rp[1:])
        nz = int(rp[-1])
        jpos = (np.repeat(indptr[rowid] - rp[:-1], counts) + np.arange(nz)).astype(np.intp)
        jcol = indices[jpos].astype(np.intp)
        erow = np.repeat(np.arange(m, dtype=np.intp), counts)
        if entries is not None:              # only the given data positions
            keep = np.zeros(max(int(indptr[-1]), 1), dtype=bool)
            keep[np.asarray(entries, dtype=np.intp)] = True
            sel = keep[jpos]
            jpos, jcol, erow = jpos[sel], jcol[sel], erow[sel]
            nz = len(jpos)
            rp = np.zeros(m + 1, dtype=np.intp)
            np.cumsum(np.bincount(erow, minlength=m), out=rp[1:])
        self.rp, self.jpos, self.jcol = rp, jpos, jcol
        kern = _symbolic_kernels(symbolic)
        self.symbolic = "numpy" if kern is None else "compiled"
        if kern is not None:
            self._compiled_symbolic(kern, ordering)
            return
        # ---- all pairs of entries sharing a column: the products of B
        order = np.argsort(jcol, kind="stable")
        csorted = jcol[order]
        cc = np.bincount(jcol, minlength=n) if nz else np.zeros(n, np.intp)
        cstart = np.concatenate([[0], np.cumsum(cc)]).astype(np.intp)
        reps = cc[csorted]
        total = int(reps.sum())
        starts = (np.cumsum(reps) - reps).astype(np.intp)
        a_s = np.repeat(np.arange(nz, dtype=np.intp), reps)
        b_s = cstart[csorted[a_s]] + (np.arange(total, dtype=np.intp) - np.repeat(starts, reps))
        ea, eb = order[a_s], order[b_s]
        ra, rb = erow[ea], erow[eb]
        self.pattern = sp.csr_matrix((np.ones(total), (ra, rb)), shape=(m, m))
        self.pattern.sum_duplicates()
        self.pattern.data[:] = 1.0
        # ---- ordering
        self.perm, self.ordering, self.candidates = self._choose(ordering)
        pinv = np.empty(m, dtype=np.intp)
        pinv[self.perm] = np.arange(m, dtype=np.intp)
        self.pinv = pinv
        # ---- permuted upper triangle (row <= column), by columns, diagonal included
        Pa, Pb = pinv[ra], pinv[rb]
        up = Pa <= Pb
        key = Pb[up] * m + Pa[up]
        diag = np.arange(m, dtype=np.intp) * (m + 1)
        # one stable sort of the keys gives the distinct entries, every product's
        # entry (inv) and the products grouped by entry in their original order (o)
        allk = np.concatenate([key, diag])
        srt = np.argsort(allk, kind="stable")
        sk = allk[srt]
        first = np.empty(len(sk), dtype=bool)
        first[:1] = True
        np.not_equal(sk[1:], sk[:-1], out=first[1:])
        ukeys = sk[first]
        inv = np.empty(len(allk), dtype=np.intp)
        inv[srt] = np.cumsum(first) - 1
        inv = inv[:len(key)]
        self.Bi = (ukeys % max(m, 1)).astype(np.intp)
        bcol = ukeys // max(m, 1)
        self.Bp = np.zeros(m + 1, dtype=np.intp)
        np.cumsum(np.bincount(bcol, minlength=m), out=self.Bp[1:])
        self.bdiag = np.searchsorted(ukeys, diag).astype(np.intp)
        o = srt[srt < len(key)]
        self.tp = np.zeros(len(ukeys) + 1, dtype=np.intp)
        np.cumsum(np.bincount(inv, minlength=len(ukeys)), out=self.tp[1:])
        # products as pairs of entry numbers of the used rows' CSR (int32: half the
        # memory traffic of the hot loop): B[p] = sum cj[ta] jv[tb], cj = J M^-1
        if nz >= 2 ** 31:                    # pragma: no cover
            raise ValueError("the Jacobian has too many non-zeros for 32-bit indices")
        self.ta = ea[up][o].astype(np.int32)
        self.tb = eb[up][o].astype(np.int32)
        self._factor_counts()

    def _compiled_symbolic(self, kern, ordering):
        """The same arrays from the compiled kernels: B's symmetric pattern, the
        ordering, the permuted upper triangle and the product map."""
        schur_pattern, schur_upper, schur_products = kern
        m, n = self.m, self.n
        ip, ind = schur_pattern(m, n, self.rp, self.jcol)
        self.pattern = sp.csr_matrix((np.ones(len(ind)), ind, ip), shape=(m, m))
        self.perm, self.ordering, self.candidates = self._choose(ordering)
        pinv = np.empty(m, dtype=np.intp)
        pinv[self.perm] = np.arange(m, dtype=np.intp)
        self.pinv = pinv
        self.Bp, self.Bi, self.bdiag = schur_upper(m, ip, ind, self.perm)
        self.tp, self.ta, self.tb = schur_products(m, n, self.rp, self.jcol, self.perm,
                                                   self.Bp, self.Bi)
        self._factor_counts()

    def _factor_counts(self):
        """Elimination tree, column pointers of L and the numeric work."""
        m = self.m
        parent, lnz, flops = _etree_counts(m, self.Bp, self.Bi)
        self.parent = parent
        self.Lp = np.zeros(m + 1, dtype=np.intp)
        np.cumsum(lnz, out=self.Lp[1:])
        self.nnz_L = int(self.Lp[-1])
        self.flops = flops

    # ------------------------------------------------------------------ ordering
    def _upper(self, perm):
        """Permuted upper pattern (Bp, Bi) for a candidate ordering."""
        m = self.m
        kern = _symbolic_kernels(self.symbolic)
        if kern is not None:
            P = self.pattern
            return kern[1](m, P.indptr.astype(np.intp), P.indices.astype(np.intp),
                           np.asarray(perm, dtype=np.intp))[:2]
        pinv = np.empty(m, dtype=np.intp)
        pinv[perm] = np.arange(m, dtype=np.intp)
        P = self.pattern.tocoo()
        r, c = pinv[P.row], pinv[P.col]
        up = r <= c
        U = sp.csc_matrix((np.ones(int(up.sum())), (r[up], c[up])), shape=(m, m))
        U.sort_indices()
        return U.indptr.astype(np.intp), U.indices.astype(np.intp)

    def _mmd(self):
        """Multiple minimum degree on the pattern of B (SuperLU's MMD_AT_PLUS_A,
        on diagonally dominant values with the pattern of B)."""
        A = self.pattern.tocsc(copy=True)
        A.data[:] = 1.0
        A = (A + sp.diags(np.asarray(A.sum(axis=0)).ravel() + 1.0)).tocsc()
        lu = spla.splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                       options={"SymmetricMode": True})
        # Pr A Pc = L U with Pc[i, perm_c[i]] = 1: old column i goes to perm_c[i]
        return np.argsort(lu.perm_c).astype(np.intp)

    def _candidate(self, name):
        m = self.m
        if name == "natural":
            return np.arange(m, dtype=np.intp)
        if name == "rcm":
            from scipy.sparse.csgraph import reverse_cuthill_mckee
            return np.asarray(reverse_cuthill_mckee(self.pattern.tocsr(), symmetric_mode=True),
                              dtype=np.intp)
        if name == "mmd":
            return self._mmd()
        raise ValueError(f"ordering={name!r}: expected one of {', '.join(ORDERINGS)} or a "
                         f"permutation")

    def _choose(self, ordering):
        m = self.m
        if not isinstance(ordering, str):
            perm = np.asarray(ordering, dtype=np.intp)
            if sorted(perm.tolist()) != list(range(m)):
                raise ValueError("ordering: not a permutation of the rows")
            return perm, "given", {}
        if ordering != "auto":
            return self._candidate(ordering), ordering, {}
        if m == 0:
            return np.zeros(0, np.intp), "natural", {}
        # the least numeric work (sum of squared column counts of L); a candidate is
        # abandoned as soon as its fill exceeds twice the best one's
        best, cand = None, {}
        for name in ("mmd", "rcm", "natural"):
            try:
                perm = self._candidate(name)
            except RuntimeError:             # pragma: no cover - SuperLU refused
                continue
            Bp, Bi = self._upper(perm)
            cap = -1.0 if best is None else 2.0 * best[2] + m
            res = _etree_counts(m, Bp, Bi, cap)
            if res is None:
                cand[name] = None
                continue
            _, lnz, flops = res
            cand[name] = (int(lnz.sum()), flops)
            if best is None or flops < best[3]:
                best = (name, perm, int(lnz.sum()), flops)
        return best[1], best[0], cand

    def describe(self) -> str:
        return (f"sparse Schur: m = {self.m} rows, nnz(J) = {len(self.jpos)}, "
                f"nnz(B, upper) = {len(self.Bi)}, nnz(L) = {self.nnz_L}, "
                f"ordering = {self.ordering}")


class SparseSchurSolver:
    """The compiled solver (``mbcore._ext._sparse.SparseSchur``) for a topology."""

    backend = "compiled"

    def __init__(self, topo: SchurTopology, pivot_tol: float = PIVOT_TOL):
        from .._ext._sparse import SparseSchur
        if topo.parent is None:            # pragma: no cover
            raise RuntimeError("the compiled sparse kernel is not available")
        self.topology = topo
        self._k = SparseSchur(topo.n, topo.m_full, topo.rp, topo.jpos, topo.jcol, topo.rowid,
                              topo.perm, topo.Bp, topo.Bi, topo.bdiag, topo.tp, topo.ta,
                              topo.tb, topo.parent, topo.Lp, pivot_tol)
        self.solve = self._k.solve         # the hot path: no Python frame in between

    @property
    def kernel(self):
        """The compiled solver object that compiled right-hand sides call."""
        return self._k

    @property
    def failed_row(self) -> int:
        return int(self._k.failed_row)

    @property
    def info(self) -> int:
        return int(self._k.info)

    def diagonal(self):
        return self._k.diagonal()


class SparseSchurReference:
    """NumPy/SciPy reference of :class:`SparseSchurSolver`: ``B`` by sparse
    products, permuted by the topology's ordering, factored by SuperLU in that order
    without pivoting (U's diagonal = D of LDL^T), the same pivot test."""

    backend = "numpy"

    def __init__(self, topo: SchurTopology, pivot_tol: float = PIVOT_TOL):
        self.topology = topo
        self.pivot_tol = pivot_tol
        self.failed_row = -1
        self.info = 0
        self._d = np.zeros(topo.m)

    def diagonal(self):
        return self._d.copy()

    def solve(self, jdata, minv, Q, gamma, qdd, lam) -> int:
        tp = self.topology
        m, n = tp.m, tp.n
        if len(qdd) != n or len(Q) != n or len(minv) != n or len(lam) != tp.m_full \
                or len(gamma) != tp.m_full:
            raise ValueError("SparseSchurReference.solve: array sizes do not match (n, m)")
        J = sp.csr_matrix((np.asarray(jdata)[tp.jpos], tp.jcol, tp.rp), shape=(m, n))
        C = J @ sp.diags(minv)
        B = (C @ J.T).tocsr()
        rhs = np.asarray(gamma)[tp.rowid] - C @ Q
        x = np.zeros(m)
        if m:
            p = tp.perm
            Bp = B[p][:, p].tocsc()
            tol = self.pivot_tol * max(float(B.diagonal().max()), 0.0)
            try:
                lu = spla.splu(Bp, permc_spec="NATURAL", diag_pivot_thresh=0.0,
                               options={"SymmetricMode": True})
            except RuntimeError:           # an exactly zero pivot
                self.failed_row, self.info = -1, m + 1
                return self.info
            # the factor's column k is column perm_c^-1[k] of Bp
            order = np.argsort(lu.perm_c)
            d = np.empty(m)
            d[order] = lu.U.diagonal()
            self._d[:] = d
            bad = np.nonzero(~(d > tol))[0]
            if len(bad):
                k = int(bad[0])
                self.failed_row = int(tp.rowid[p[k]])
                self.info = k + 1
                return self.info
            x[p] = lu.solve(rhs[p])
        self.failed_row, self.info = -1, 0
        lam[:] = 0.0
        lam[tp.rowid] = x
        qdd[:] = minv * (Q + J.T @ x)
        return 0


def make_solver(topo: SchurTopology, backend: str = "compiled",
                pivot_tol: float = PIVOT_TOL):
    """The solver of the given backend (``"compiled"`` or ``"numpy"``)."""
    if backend == "compiled":
        return SparseSchurSolver(topo, pivot_tol)
    if backend == "numpy":
        return SparseSchurReference(topo, pivot_tol)
    raise ValueError(f"backend={backend!r}: expected 'compiled' or 'numpy'")


#: System -> {(rows, ordering): SchurTopology}: the symbolic analysis depends on the
#: (fixed) CSR pattern only, so the assembly and the equations of motion of one
#: System share it (the solvers keep their own numeric buffers)
_TOPOLOGIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def topology_for(system, rows=None, ordering="auto", entries=None) -> SchurTopology:
    """The :class:`SchurTopology` of a System's CSR Jacobian pattern (optionally only
    the ``rows`` and the data positions ``entries``), computed once per System, rows,
    entries and named ordering (its symbolic phase compiled unless the System's
    backend is "numpy")."""
    indptr, indices = system.csr_pattern()
    # the symbolic phase on the System's backend (the reference's for "numpy")
    symbolic = "numpy" if getattr(system, "backend", None) == "numpy" else "auto"
    if not isinstance(ordering, str):
        return SchurTopology(indptr, indices, system.n, rows=rows, ordering=ordering,
                             entries=entries, symbolic=symbolic)
    key = (None if rows is None else np.asarray(rows, dtype=np.intp).tobytes(), ordering,
           None if entries is None else np.asarray(entries, dtype=np.intp).tobytes())
    try:
        cache = _TOPOLOGIES.setdefault(system, {})
    except TypeError:                        # not weak-referenceable: no cache
        cache = {}
    topo = cache.get(key)
    if topo is None or topo.source is not indptr or topo.source_indices is not indices:
        topo = SchurTopology(indptr, indices, system.n, rows=rows, ordering=ordering,
                             entries=entries, symbolic=symbolic)
        cache[key] = topo
    return topo


def for_system(system, rows=None, backend: str | None = None, ordering="auto",
               entries=None):
    """The sparse Schur solver of a System (its CSR Jacobian pattern; optionally only
    the independent ``rows`` and the data positions ``entries``), on the System's
    backend unless given.  The symbolic analysis is shared by all solvers of the
    System (:func:`topology_for`)."""
    return make_solver(topology_for(system, rows, ordering, entries),
                       backend or system.backend)


__all__ = ["SchurTopology", "SparseSchurSolver", "SparseSchurReference", "make_solver",
           "for_system", "topology_for", "PIVOT_TOL", "ORDERINGS"]
