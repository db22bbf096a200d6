# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Compiled evaluator of mbcore time functions (``mbcore._ext._functions``).

:class:`Evaluator` holds the flat arrays packed by ``mbcore.elements.functions.FunctionTable``
and evaluates every function's jet (value, d/dt, d²/dt²) in one call, without
allocating.  The arithmetic mirrors the reference implementation in
``mbcore/functions.py`` and ``mbcore/expressions.py`` operation by operation; the
opcode, kind and error numbers below must match those modules (a test checks).

Packed layout for function k (``fp = fdata + foff[k]``, ``ip = idata + ioff[k]``):

* constant:   fp = [c]
* polynomial: fp = [c0, c1, ..., cn]           (fcnt = n + 1)
* harmonic:   fp = [amplitude, frequency, phase, offset]
* table:      fp = [tol, x0..xn, then per piece i: c3, c2, c1, c0];  ip = [n, mode]
* expression: fp = constants;  ip = postfix program (opcodes with inline operands)
"""
cimport numpy as cnp
from libc.math cimport (sin, cos, tan, asin, acos, atan, atan2, sinh, cosh, tanh,
                        exp, log, log10, sqrt, pow, fmod, floor, isfinite)

cnp.import_array()

ABI_VERSION = 1

cdef enum:
    K_CONSTANT = 0
    K_POLYNOMIAL = 1
    K_HARMONIC = 2
    K_TABLE = 3
    K_EXPRESSION = 4

cdef enum:
    X_ERROR = 0
    X_LINEAR = 1
    X_HOLD = 2
    X_SPLINE = 3
    X_PERIODIC = 4

cdef enum:
    ERR_OK = 0
    ERR_TIME = 1
    ERR_RANGE = 2
    ERR_DOMAIN = 3
    ERR_NONFINITE = 4

cdef enum:
    OP_CONST = 1
    OP_T = 2
    OP_NEG = 3
    OP_ADD = 4
    OP_SUB = 5
    OP_MUL = 6
    OP_DIV = 7
    OP_POW = 8
    OP_POWI = 9
    OP_POWK = 10
    OP_SIN = 20
    OP_COS = 21
    OP_TAN = 22
    OP_ASIN = 23
    OP_ACOS = 24
    OP_ATAN = 25
    OP_SINH = 26
    OP_COSH = 27
    OP_TANH = 28
    OP_EXP = 29
    OP_LOG = 30
    OP_LOG10 = 31
    OP_SQRT = 32
    OP_ABS = 33
    OP_ATAN2 = 40
    OP_MIN = 41
    OP_MAX = 42

OPCODES = {
    "CONST": OP_CONST, "T": OP_T, "NEG": OP_NEG, "ADD": OP_ADD, "SUB": OP_SUB,
    "MUL": OP_MUL, "DIV": OP_DIV, "POW": OP_POW, "POWI": OP_POWI, "POWK": OP_POWK,
    "SIN": OP_SIN, "COS": OP_COS, "TAN": OP_TAN, "ASIN": OP_ASIN, "ACOS": OP_ACOS,
    "ATAN": OP_ATAN, "SINH": OP_SINH, "COSH": OP_COSH, "TANH": OP_TANH,
    "EXP": OP_EXP, "LOG": OP_LOG, "LOG10": OP_LOG10, "SQRT": OP_SQRT, "ABS": OP_ABS,
    "ATAN2": OP_ATAN2, "MIN": OP_MIN, "MAX": OP_MAX,
}
KIND_CODES = {"constant": K_CONSTANT, "polynomial": K_POLYNOMIAL,
              "harmonic": K_HARMONIC, "table": K_TABLE, "expression": K_EXPRESSION}
ERROR_CODES = {"OK": ERR_OK, "TIME": ERR_TIME, "RANGE": ERR_RANGE,
               "DOMAIN": ERR_DOMAIN, "NONFINITE": ERR_NONFINITE}
EXTRAPOLATION_CODES = {"error": X_ERROR, "linear": X_LINEAR, "hold": X_HOLD,
                       "spline": X_SPLINE, "periodic": X_PERIODIC}

cdef double LN10 = 2.302585092994045684




# --- jets --------------------------------------------------------------------------

cdef inline void chain(double* a, double f0, double f1, double f2) noexcept nogil:
    """a <- f(a) given f, f', f'' at a[0]."""
    cdef double d = a[1], dd = a[2]
    a[0] = f0
    a[1] = f1 * d
    a[2] = f2 * d * d + f1 * dd


cdef inline bint lex_le(const double* a, const double* b) noexcept nogil:
    """Jet order of min/max/abs: value, then d/dt, then d²/dt²."""
    if a[0] != b[0]:
        return a[0] < b[0]
    if a[1] != b[1]:
        return a[1] < b[1]
    return a[2] <= b[2]


cdef inline int fault(ErrInfo* err, int op, double value) noexcept nogil:
    err.code = ERR_DOMAIN
    err.op = op
    err.value = value
    return ERR_DOMAIN


cdef int unary(int op, double* a, ErrInfo* err) noexcept nogil:
    cdef double x = a[0], s, c, r, q, f1
    if op == OP_SIN:
        s = sin(x)
        c = cos(x)
        chain(a, s, c, -s)
    elif op == OP_COS:
        s = sin(x)
        c = cos(x)
        chain(a, c, -s, -c)
    elif op == OP_TAN:
        if cos(x) == 0.0:
            return fault(err, op, x)
        s = tan(x)
        c = 1.0 + s * s
        chain(a, s, c, 2.0 * s * c)
    elif op == OP_ASIN or op == OP_ACOS:
        if not (-1.0 < x < 1.0):
            return fault(err, op, x)
        r = 1.0 - x * x
        q = 1.0 / sqrt(r)
        if op == OP_ASIN:
            chain(a, asin(x), q, x * q / r)
        else:
            chain(a, acos(x), -q, -(x * q / r))
    elif op == OP_ATAN:
        r = 1.0 / (1.0 + x * x)
        chain(a, atan(x), r, -2.0 * x * r * r)
    elif op == OP_SINH:
        s = sinh(x)
        c = cosh(x)
        chain(a, s, c, s)
    elif op == OP_COSH:
        s = sinh(x)
        c = cosh(x)
        chain(a, c, s, c)
    elif op == OP_TANH:
        q = tanh(x)
        s = 1.0 - q * q
        chain(a, q, s, -2.0 * q * s)
    elif op == OP_EXP:
        q = exp(x)
        chain(a, q, q, q)
    elif op == OP_LOG:
        if not x > 0.0:
            return fault(err, op, x)
        r = 1.0 / x
        chain(a, log(x), r, -r * r)
    elif op == OP_LOG10:
        if not x > 0.0:
            return fault(err, op, x)
        r = 1.0 / (x * LN10)
        chain(a, log10(x), r, -r / x)
    elif op == OP_SQRT:
        if not x > 0.0:
            return fault(err, op, x)
        s = sqrt(x)
        f1 = 0.5 / s
        chain(a, s, f1, -0.5 * f1 / x)
    return ERR_OK


cdef int binary(int op, double* a, const double* b, ErrInfo* err) noexcept nogil:
    """a <- a (op) b."""
    cdef double a0 = a[0], a1 = a[1], a2 = a[2], b0 = b[0], b1 = b[1], b2 = b[2]
    cdef double q, q1, lg, u, g1, g2, v, r2, dr2
    if op == OP_ADD:
        a[0] = a0 + b0
        a[1] = a1 + b1
        a[2] = a2 + b2
    elif op == OP_SUB:
        a[0] = a0 - b0
        a[1] = a1 - b1
        a[2] = a2 - b2
    elif op == OP_MUL:
        a[0] = a0 * b0
        a[1] = a1 * b0 + a0 * b1
        a[2] = a2 * b0 + 2.0 * a1 * b1 + a0 * b2
    elif op == OP_DIV:
        if b0 == 0.0:
            return fault(err, op, b0)
        q = a0 / b0
        q1 = (a1 - q * b1) / b0
        a[0] = q
        a[1] = q1
        a[2] = (a2 - 2.0 * q1 * b1 - q * b2) / b0
    elif op == OP_POW:
        if not a0 > 0.0:
            return fault(err, op, a0)
        lg = log(a0)
        u = a1 / a0
        g1 = b1 * lg + b0 * u
        g2 = b2 * lg + 2.0 * b1 * u + b0 * (a2 / a0 - u * u)
        v = pow(a0, b0)
        a[0] = v
        a[1] = v * g1
        a[2] = v * (g2 + g1 * g1)
    elif op == OP_ATAN2:            # atan2(y = a, x = b)
        r2 = b0 * b0 + a0 * a0
        if r2 == 0.0:
            return fault(err, op, 0.0)
        q1 = (b0 * a1 - a0 * b1) / r2
        dr2 = 2.0 * (b0 * b1 + a0 * a1)
        a[0] = atan2(a0, b0)
        a[1] = q1
        a[2] = ((b0 * a2 - a0 * b2) - q1 * dr2) / r2
    elif op == OP_MIN:
        if not lex_le(a, b):
            a[0] = b0
            a[1] = b1
            a[2] = b2
    elif op == OP_MAX:
        if lex_le(a, b):
            a[0] = b0
            a[1] = b1
            a[2] = b2
    return ERR_OK


cdef int powi(int n, double* a, ErrInfo* err) noexcept nogil:
    cdef double x = a[0], p2, p1
    if n == 0:
        chain(a, 1.0, 0.0, 0.0)
    elif n == 1:
        pass
    elif n == 2:
        chain(a, x * x, 2.0 * x, 2.0)
    else:
        if x == 0.0 and n < 0:
            return fault(err, OP_POWI, x)
        p2 = pow(x, <double>(n - 2))
        p1 = p2 * x
        chain(a, p1 * x, n * p1, <double>n * (n - 1) * p2)
    return ERR_OK


cdef int powk(double p, double* a, ErrInfo* err) noexcept nogil:
    cdef double x = a[0], v, f1
    if x > 0.0:
        v = pow(x, p)
        f1 = p * v / x
        chain(a, v, f1, (p - 1.0) * f1 / x)
    elif x == 0.0 and p > 2.0:
        chain(a, 0.0, 0.0, 0.0)
    else:
        return fault(err, OP_POWK, x)
    return ERR_OK


cdef int run_program(const int* code, Py_ssize_t n, const double* cst, double t,
                     double* st, double* res, ErrInfo* err) noexcept nogil:
    """Execute a postfix program on the jet stack ``st``; result into ``res``."""
    cdef Py_ssize_t pc = 0
    cdef double* top = st - 3           # top of stack (st[0..2] is the first entry)
    cdef int op, rc
    while pc < n:
        op = code[pc]
        pc += 1
        if op == OP_CONST:
            top += 3
            top[0] = cst[code[pc]]
            top[1] = 0.0
            top[2] = 0.0
            pc += 1
        elif op == OP_T:
            top += 3
            top[0] = t
            top[1] = 1.0
            top[2] = 0.0
        elif op == OP_NEG:
            top[0] = -top[0]
            top[1] = -top[1]
            top[2] = -top[2]
        elif op == OP_ABS:
            if (top[0] < 0.0 or (top[0] == 0.0 and (top[1] < 0.0 or
                                                    (top[1] == 0.0 and top[2] < 0.0)))):
                top[0] = -top[0]
                top[1] = -top[1]
                top[2] = -top[2]
        elif op == OP_POWI:
            rc = powi(code[pc], top, err)
            pc += 1
            if rc:
                return rc
        elif op == OP_POWK:
            rc = powk(cst[code[pc]], top, err)
            pc += 1
            if rc:
                return rc
        elif OP_SIN <= op <= OP_SQRT:
            rc = unary(op, top, err)
            if rc:
                return rc
        else:
            top -= 3
            rc = binary(op, top, top + 3, err)
            if rc:
                return rc
    res[0] = st[0]
    res[1] = st[1]
    res[2] = st[2]
    return ERR_OK


# --- tables ------------------------------------------------------------------------

cdef inline void piece_jet(const double* c, double dt, double* o) noexcept nogil:
    cdef double a3 = c[0], a2 = c[1], a1 = c[2], a0 = c[3]
    o[0] = ((a3 * dt + a2) * dt + a1) * dt + a0
    o[1] = (3.0 * a3 * dt + 2.0 * a2) * dt + a1
    o[2] = 6.0 * a3 * dt + 2.0 * a2


cdef inline Py_ssize_t find_piece(const double* x, Py_ssize_t n, double t,
                                  Py_ssize_t* cache) noexcept nogil:
    """Index i of the piece with x[i] <= t < x[i+1] (last piece includes x[n]);
    x[0] <= t <= x[n] is assumed.  Tries the cached piece and its successor first."""
    cdef Py_ssize_t i = cache[0], lo, hi, mid
    if 0 <= i < n and x[i] <= t:
        if t < x[i + 1] or i == n - 1:
            return i
        if i + 2 <= n and t < x[i + 2]:
            cache[0] = i + 1
            return i + 1
    lo = 0
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if x[mid] <= t:
            lo = mid
        else:
            hi = mid
    cache[0] = lo
    return lo


cdef int spline_jet(const double* fp, const int* ip, double t, Py_ssize_t* cache,
                    double* o, ErrInfo* err) noexcept nogil:
    cdef Py_ssize_t n = ip[0], i
    cdef int mode = ip[1]
    cdef double tol = fp[0]
    cdef const double* x = fp + 1
    cdef const double* c = fp + 2 + n
    cdef double x0 = x[0], xn = x[n], span, w, te
    cdef bint low
    if mode == X_PERIODIC:
        span = xn - x0
        w = fmod(t - x0, span)
        if w < 0.0:
            w += span
        t = x0 + w
        if t > xn:
            t = xn
    if t < x0 or t > xn:
        low = t < x0
        i = 0 if low else n - 1
        if mode == X_ERROR:
            if (low and t < x0 - tol) or ((not low) and t > xn + tol):
                err.code = ERR_RANGE
                err.op = 0
                err.value = t
                return ERR_RANGE
            mode = X_SPLINE
        if mode == X_SPLINE:
            piece_jet(c + 4 * i, t - x[i], o)
            return ERR_OK
        te = x0 if low else xn
        piece_jet(c + 4 * i, te - x[i], o)
        if mode == X_HOLD:
            o[1] = 0.0
            o[2] = 0.0
        else:                                   # X_LINEAR
            o[0] = o[0] + o[1] * (t - te)
            o[2] = 0.0
        return ERR_OK
    i = find_piece(x, n, t, cache)
    piece_jet(c + 4 * i, t - x[i], o)
    return ERR_OK


# --- the evaluator -----------------------------------------------------------------

cdef class Evaluator:
    """Evaluates packed time functions; see ``mbcore.elements.functions.FunctionTable``.

    ``Evaluator(kinds, foff, fcnt, ioff, icnt, fdata, idata, depth, on_error)``;
    ``on_error(k, code, op, value, t)`` must raise the error for a failed evaluation
    (k = -1 for a non-finite time).  Programs are trusted: they must have been
    checked (``mbcore.elements.expressions.check_program``) with stack depth <= ``depth``.
    """


    def __cinit__(self, kinds, foff, fcnt, ioff, icnt, fdata, idata, Py_ssize_t depth,
                  on_error):
        import numpy as np
        cdef cnp.ndarray a_kinds = np.ascontiguousarray(kinds, dtype=np.intc)
        cdef cnp.ndarray a_foff = np.ascontiguousarray(foff, dtype=np.intp)
        cdef cnp.ndarray a_fcnt = np.ascontiguousarray(fcnt, dtype=np.intp)
        cdef cnp.ndarray a_ioff = np.ascontiguousarray(ioff, dtype=np.intp)
        cdef cnp.ndarray a_icnt = np.ascontiguousarray(icnt, dtype=np.intp)
        # a trailing pad keeps the data pointers valid when there is no data
        cdef cnp.ndarray a_fdata = np.ascontiguousarray(
            np.concatenate([np.asarray(fdata, dtype=np.float64).ravel(), [0.0]]))
        cdef cnp.ndarray a_idata = np.ascontiguousarray(
            np.concatenate([np.asarray(idata, dtype=np.intc).ravel(),
                            np.zeros(1, np.intc)]))
        cdef Py_ssize_t nf = a_kinds.shape[0], k
        if not (a_foff.shape[0] == a_fcnt.shape[0] == a_ioff.shape[0]
                == a_icnt.shape[0] == nf):
            raise ValueError("packed arrays have inconsistent lengths")
        for k in range(nf):
            if (a_foff[k] < 0 or a_fcnt[k] < 0 or a_foff[k] + a_fcnt[k] > a_fdata.shape[0] - 1
                    or a_ioff[k] < 0 or a_icnt[k] < 0
                    or a_ioff[k] + a_icnt[k] > a_idata.shape[0] - 1
                    or not 0 <= a_kinds[k] <= K_EXPRESSION):
                raise ValueError(f"packed function {k} is out of bounds")
        cdef cnp.ndarray a_cache = np.zeros(max(nf, 1), dtype=np.intp)
        cdef cnp.ndarray a_stack = np.zeros(3 * max(depth, 1), dtype=np.float64)
        self._keep = (a_kinds, a_foff, a_fcnt, a_ioff, a_icnt, a_fdata, a_idata,
                      a_cache, a_stack)
        self._on_error = on_error
        self.size = nf
        self.kinds = <const int*> cnp.PyArray_DATA(a_kinds)
        self.foff = <const Py_ssize_t*> cnp.PyArray_DATA(a_foff)
        self.fcnt = <const Py_ssize_t*> cnp.PyArray_DATA(a_fcnt)
        self.ioff = <const Py_ssize_t*> cnp.PyArray_DATA(a_ioff)
        self.icnt = <const Py_ssize_t*> cnp.PyArray_DATA(a_icnt)
        self.fdata = <const double*> cnp.PyArray_DATA(a_fdata)
        self.idata = <const int*> cnp.PyArray_DATA(a_idata)
        self.cache = <Py_ssize_t*> cnp.PyArray_DATA(a_cache)
        self.stack = <double*> cnp.PyArray_DATA(a_stack)

    def data(self):
        """The packed float data this evaluator reads (a writable NumPy array, one
        trailing pad): ``FunctionTable.set_input`` writes the value of an ``input``
        function (a constant) there between evaluations."""
        return self._keep[5]

    cdef int run(self, double t, double* out, ErrInfo* err) noexcept nogil:
        cdef Py_ssize_t k, j, m
        cdef int rc = ERR_OK, kind
        cdef const double* fp
        cdef const int* ip
        cdef double* o
        cdef double v, d, dd, arg, s, aw
        if not isfinite(t):
            err.index = -1
            err.code = ERR_TIME
            err.op = 0
            err.value = t
            return ERR_TIME
        for k in range(self.size):
            fp = self.fdata + self.foff[k]
            ip = self.idata + self.ioff[k]
            o = out + 3 * k
            kind = self.kinds[k]
            if kind == K_CONSTANT:
                o[0] = fp[0]
                o[1] = 0.0
                o[2] = 0.0
            elif kind == K_POLYNOMIAL:
                m = self.fcnt[k]
                v = fp[m - 1]
                d = 0.0
                dd = 0.0
                for j in range(m - 2, -1, -1):
                    dd = dd * t + 2.0 * d
                    d = d * t + v
                    v = v * t + fp[j]
                o[0] = v
                o[1] = d
                o[2] = dd
            elif kind == K_HARMONIC:
                arg = fp[1] * t + fp[2]
                s = sin(arg)
                aw = fp[0] * fp[1]
                o[0] = fp[3] + fp[0] * s
                o[1] = aw * cos(arg)
                o[2] = -(aw * fp[1]) * s
            elif kind == K_TABLE:
                rc = spline_jet(fp, ip, t, self.cache + k, o, err)
            else:
                rc = run_program(ip, self.icnt[k], fp, t, self.stack, o, err)
            if rc == ERR_OK and not (isfinite(o[0]) and isfinite(o[1]) and isfinite(o[2])):
                err.code = ERR_NONFINITE
                err.op = 0
                err.value = o[0]
                rc = ERR_NONFINITE
            if rc != ERR_OK:
                err.index = k
                return rc
        return ERR_OK

    def evaluate(self, double t, cnp.ndarray out not None):
        """Fill ``out[k] = (c_k(t), c_k'(t), c_k''(t))``; ``out`` is a writeable
        C-contiguous float64 array of shape (size, 3).  On failure calls
        ``on_error`` (which raises)."""
        cdef ErrInfo err
        cdef int rc
        if (cnp.PyArray_NDIM(out) != 2 or cnp.PyArray_DIMS(out)[0] != self.size
                or cnp.PyArray_DIMS(out)[1] != 3 or cnp.PyArray_TYPE(out) != cnp.NPY_DOUBLE
                or not cnp.PyArray_IS_C_CONTIGUOUS(out) or not cnp.PyArray_ISWRITEABLE(out)):
            raise ValueError(f"out must be a writeable C-contiguous float64 array of "
                             f"shape ({self.size}, 3) (got {(<object> out).dtype} "
                             f"{(<object> out).shape})")
        rc = self.run(t, <double*> cnp.PyArray_DATA(out), &err)
        if rc != ERR_OK:
            self._on_error(err.index, err.code, err.op, err.value, t)
            raise RuntimeError(f"time function evaluation failed (code {rc})")
