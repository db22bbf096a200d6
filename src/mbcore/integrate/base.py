"""The integrator contract: :class:`Integrator`, its options and its statistics.

Modelled on scipy's ``OdeSolver`` (``scipy/integrate/_ivp/base.py``): one base
class, a template :meth:`Integrator.step` that calls the method's
``_step_impl()``, a template :meth:`Integrator.dense_output` that calls
``_dense_output_impl()``, and counters kept by the base class so that every
integrator reports the same statistics.  The contract is that of the book's
integration arrays and subroutine DIFEQN (Nikravesh (1988), §13.1, §12.2).

An integrator advances ``y' = f(t, y)`` with ``y`` a 1-D float64 array.  The
multibody formulations (DI, CS, CP, projection) present their
equations in exactly this form, so the core here knows no mechanics.
"""
from __future__ import annotations

import difflib
import functools
import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from ..plugins.contract import CONTRACT_VERSION
from ..errors import AnalysisError
from .errors import (IntegrationError, IntegratorOptionError, NewtonFailure,  # noqa: F401
                     NonFiniteError, StepBudgetError, StepSizeError, step_budget_error)

__all__ = ["Integrator", "Statistics", "Option", "IntegrationError", "StepSizeError",
           "StepBudgetError", "NonFiniteError", "IntegratorOptionError", "NewtonFailure",
           "FIXED_STEP_OPTIONS", "ADAPTIVE_OPTIONS", "NEWTON_OPTIONS", "CALIBRATION_OPTIONS",
           "calibrated_tolerances"]

EPS = float(np.finfo(float).eps)


@functools.cache
def _lapack():
    """scipy.linalg.lapack, imported on first use: only the implicit methods' Newton
    matrices need it, and importing scipy.linalg costs ~0.15 s of start-up time."""
    from scipy.linalg import lapack
    return lapack


# ----------------------------------------------------------------------------------
# options
# ----------------------------------------------------------------------------------
class Option:
    """Declaration of one integrator option: default, documentation, check.

    ``check(value, n)`` returns the converted value or raises ``ValueError`` with
    the reason (``n`` is the number of equations, for per-component options).
    ``required=True`` means the user must give it (no default).
    """

    __slots__ = ("default", "doc", "check", "required")

    def __init__(self, default: Any, doc: str, check: Callable[[Any, int], Any] | None = None,
                 required: bool = False):
        self.default = default
        self.doc = doc
        self.check = check
        self.required = required

    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        return f"Option({self.default!r}, {self.doc!r})"


def _real(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"must be finite, got {value!r}")
    return v


def positive(value: Any, n: int = 0) -> float:
    v = _real(value)
    if v <= 0:
        raise ValueError(f"must be > 0, got {value!r}")
    return v


def positive_or_inf(value: Any, n: int = 0) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == math.inf:
        return math.inf
    return positive(value, n)


def positive_or_none(value: Any, n: int = 0) -> float | None:
    return None if value is None else positive(value, n)


def fraction(value: Any, n: int = 0) -> float:
    v = _real(value)
    if not 0 < v < 1:
        raise ValueError(f"must lie in (0, 1), got {value!r}")
    return v


def tolerance(value: Any, n: int) -> float | np.ndarray:
    """A non-negative scalar or an array of n non-negative values."""
    arr = np.asarray(value, dtype=float) if not isinstance(value, bool) else None
    if arr is None or arr.ndim > 1 or (arr.ndim == 1 and arr.shape != (n,)):
        raise ValueError(f"must be a non-negative number or an array of {n} of them, "
                         f"got {value!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"must be finite and >= 0, got {value!r}")
    return float(arr) if arr.ndim == 0 else arr.copy()


def int_range(lo: int, hi: int) -> Callable[[Any, int], int]:
    def check(value: Any, n: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"must be an integer in [{lo}, {hi}], got {value!r}")
        if not lo <= int(value) <= hi:
            raise ValueError(f"must be an integer in [{lo}, {hi}], got {value!r}")
        return int(value)
    check.__doc__ = f"integer in [{lo}, {hi}]"
    return check


def boolean(value: Any, n: int = 0) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"must be True or False, got {value!r}")
    return bool(value)


#: options of every fixed-step method
FIXED_STEP_OPTIONS: dict[str, Option] = {
    "step": Option(None, "step size h > 0 (the book's H); the last step is shortened "
                   "to end exactly on t_bound", positive, required=True),
}

#: options of every adaptive method
ADAPTIVE_OPTIONS: dict[str, Option] = {
    "rtol": Option(1e-3, "relative tolerance (values below 100*eps are raised to it)",
                   tolerance),
    "atol": Option(1e-6, "absolute tolerance, scalar or one per component", tolerance),
    "first_step": Option(None, "initial step size; default: chosen automatically "
                         "(Hairer's heuristic, common.select_initial_step)",
                         positive_or_none),
    "max_step": Option(math.inf, "largest step size allowed", positive_or_inf),
}

#: option of the built-in adaptive methods whose controller is calibrated for the
#: global error (docs/integrators.md, "Tolerance calibration")
CALIBRATION_OPTIONS: dict[str, Option] = {
    "calibrate": Option(True, "True: the controller works with internally tightened "
                        "tolerances so that the global error stays near rtol/atol "
                        "(measured calibration, docs/integrators.md); False: the raw "
                        "local error control of the classic codes (scipy, Hairer)",
                        boolean),
}


def calibrated_tolerances(rtol, atol, scale: float, exponent: float = 1.0,
                          calibrate: bool = True, floor: float = 1e-13):
    """Internal tolerances of a calibrated controller:
    ``rtol_int = scale · rtol^exponent`` (at least ``floor`` = 1e-13, where
    round-off takes over, but never above rtol) and
    ``atol_int = atol · rtol_int / rtol`` (the ratio atol/rtol is kept, as RADAU5
    does for its tolerance transformation).  ``calibrate=False`` returns the
    tolerances unchanged."""
    if not calibrate:
        return rtol, atol
    r = np.asarray(rtol, dtype=float)
    r_int = np.minimum(np.maximum(scale * r ** exponent, floor), r)
    factor = r_int / r
    a_int = np.asarray(atol, dtype=float) * factor
    r_int = float(r_int) if r_int.ndim == 0 else r_int
    a_int = float(a_int) if a_int.ndim == 0 else a_int
    return r_int, a_int


#: options of the Newton iteration of the fixed-step implicit methods
NEWTON_OPTIONS: dict[str, Option] = {
    "newton_rtol": Option(1e-10, "relative tolerance of the Newton corrector", tolerance),
    "newton_atol": Option(1e-12, "absolute tolerance of the Newton corrector", tolerance),
    "newton_maxiter": Option(10, "Newton iterations allowed per step before the "
                             "Jacobian is re-evaluated (once) and then failure",
                             int_range(1, 100)),
}


# ----------------------------------------------------------------------------------
# statistics
# ----------------------------------------------------------------------------------
@dataclass
class Statistics:
    """Counters kept by :class:`Integrator` (every method reports the same ones).

    ``nfev`` counts *every* right-hand-side evaluation, including those spent on
    finite-difference Jacobians (``nfev_jac`` of them) and on choosing the first
    step.  ``nrejected = nerror_test_failures + nnewton_failures``.
    """

    nsteps: int = 0                 #: accepted steps
    nrejected: int = 0              #: rejected step attempts (all causes)
    nerror_test_failures: int = 0   #: attempts rejected by the local error test
    nnewton_failures: int = 0       #: attempts rejected because Newton did not converge
    nfev: int = 0                   #: right-hand-side evaluations (all)
    nfev_jac: int = 0               #: ... of which for finite-difference Jacobians
    njev: int = 0                   #: Jacobian evaluations (callable or finite differences)
    nlu: int = 0                    #: LU factorisations of Newton matrices
    nlu_solves: int = 0             #: solves with those factors
    nnewton_iter: int = 0           #: Newton iterations (all attempts)
    norder_changes: int = 0         #: order changes between consecutive accepted steps
    h_min: float = math.inf         #: smallest accepted step size
    h_max: float = 0.0              #: largest accepted step size
    orders: dict = field(default_factory=dict)  #: accepted steps per order

    def reset(self) -> None:
        """Every counter back to its start value, in place (an integrator object
        restarted for a new run keeps this object: its counting functions hold it)."""
        for f in fields(self):
            setattr(self, f.name, f.default_factory() if f.default_factory is not MISSING
                    else f.default)

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["orders"] = dict(sorted(self.orders.items()))
        if self.nsteps == 0:
            d["h_min"] = d["h_max"] = None
        return d

    def __str__(self) -> str:
        d = self.as_dict()
        return ", ".join(f"{k}={v}" for k, v in d.items() if v not in (0, None, {}))


@functools.lru_cache(maxsize=None)
def _declared_state(cls: type) -> tuple[str, ...] | None:
    """:meth:`Integrator._declared_state` (cached per class)."""
    owner = next((k for k in cls.__mro__ if "state_fields" in vars(k)), None)
    if owner is None or owner.state_fields is None:
        return None
    for name in ("_step_impl", "_restart_impl"):
        impl = next(k for k in cls.__mro__ if name in vars(k))
        if not issubclass(owner, impl):
            return None
    return Integrator._BASE_STATE + tuple(owner.state_fields)


def _copy_state(v: Any) -> Any:
    """A copy of one state value: arrays (also inside tuples) copied, NumPy scalars
    as Python numbers."""
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, tuple):
        return tuple(_copy_state(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v


# ----------------------------------------------------------------------------------
# the contract
# ----------------------------------------------------------------------------------
class Integrator:
    """Base class of every integrator (built-in or third-party).

    An integrator advances ``y' = f(t, y)`` from ``(t0, y0)`` towards ``t_bound``
    one step at a time (:meth:`step`) and can interpolate inside the last step
    (:meth:`dense_output`).  The loop, output times and events belong to
    :func:`mbcore.integrate.integrate`, not to the integrator.

    Rules for implementers (a third-party integrator follows the same rules and
    registers through the hook ``mbcore_integrators``):

    1. Subclass :class:`Integrator` and set the class attributes ``name`` (unique
       registry key, used by ``integrate("name", ...)`` and model files),
       ``description`` (one line, with the source reference), ``order`` (nominal
       order; for variable-order methods the starting order — the instance
       attribute is updated, see rule 7), ``adaptive`` (error control?),
       ``implicit`` (uses ``jac``/Newton?), ``variable_order``, and ``options``:
       a ``dict`` name -> :class:`Option`; reuse :data:`FIXED_STEP_OPTIONS` (a
       fixed-step method takes ``step``) or :data:`ADAPTIVE_OPTIONS` (``rtol``,
       ``atol``, ``first_step``, ``max_step``).
    2. The constructor signature is ``(fun, t0, y0, t_bound, *, jac=None,
       **options)``.  Call ``super().__init__(...)`` first: it checks ``t0``,
       ``t_bound`` and ``y0`` (stored as a private 1-D float64 copy in
       ``self.y``), rejects unknown or invalid options naming the option, and
       puts the resolved values in ``self.opts``.  Then set up the method state
       in ``_restart_impl()`` (the constructor calls it), so that
       :meth:`restart` works after a discontinuity.
    3. Implement ``_step_impl(self) -> (success, message)``: advance one step
       from ``self.t`` towards ``self.t_bound`` (never past it: the last step
       ends exactly on it), then set ``self.t`` and ``self.y``.  Retry
       internally after rejected attempts.  Return ``(True, None)``, or
       ``(False, reason)``; raising :class:`IntegrationError` (e.g. via
       :meth:`_step_too_small`) is equivalent.  The template :meth:`step` then
       sets ``status``/``message``, ``t_old``, ``step_size`` and the step counters.
    4. Implement ``_dense_output_impl(self) -> DenseOutput`` valid on
       ``[t_old, t]`` of the last accepted step (classes in
       :mod:`mbcore.integrate.common`).  It must not share arrays that the next
       step mutates (copy, or rebind instead of mutating).
    5. Evaluate the right-hand side only through ``self.fun(t, y)``, the
       Jacobian only through ``self.jac(t, y, f)``, factorise only through
       ``self.lu_factor(M)`` and solve through ``self.lu_solve(lu, b)``: they
       count ``nfev``, ``njev``, ``nlu``, ``nlu_solves`` and turn a non-finite
       result into :class:`NonFiniteError` naming the time.  The array returned
       by ``self.fun`` is valid only until the next call (a compiled multibody
       right-hand side may return its own buffer): copy what you keep.  The
       problem, in turn, must not modify the ``y`` it is given (a trial state), and
       the integrator never modifies the user's ``y0``.
    6. Report what the base class cannot see: ``self._reject_error_test()`` and
       ``self._reject_newton()`` for each rejected attempt,
       ``self._newton_iterations(k)`` for Newton iterations.
    7. Variable-order methods set ``self.order`` to the order of the step just
       accepted; the template counts ``norder_changes`` and the per-order
       histogram from it.
    8. Do no irreversible bookkeeping inside stages or rejected attempts; only
       on acceptance.
    9. Step-size underflow: when the step falls below
       ``self._min_step(t)`` call ``self._step_too_small(h)`` (raises
       :class:`StepSizeError` naming the time).
    10. Keep per-step Python overhead low: preallocate work arrays in
        ``_restart_impl`` and keep method coefficients as plain NumPy arrays
        (class attributes) that a compiled loop can reuse.
    11. Exact resume (optional): list in the class attribute ``state_fields`` the
        instance attributes that carry the method's state from one step to the next
        (besides ``t``, ``y`` and the template's own; values: arrays, tuples of
        arrays, numbers, booleans, strings or None).  :meth:`get_state` copies
        them and :meth:`set_state` puts them back, so a checkpoint's integrator
        continues with exactly the steps of an uninterrupted run.  The declaration
        counts only for the class that declares it and its subclasses that keep its
        ``_step_impl`` and ``_restart_impl``: a subclass that replaces one of them
        declares its own (else :meth:`get_state` returns None and a resume restarts
        the method, agreeing with the uninterrupted run to the tolerance).

    A later mass-matrix / projection hook (``post_step``) will be an
    extra keyword of the constructor; methods that cannot honour it will say so.

    Attributes
    ----------
    n : number of equations.
    t, y : current time and state (``y`` must not be modified by the caller).
    t_old : time at the start of the last accepted step (None before the first).
    t_bound, direction : end time and integration direction (+1 or -1).
    step_size : size ``|t - t_old|`` of the last accepted step (None before the first).
    status : ``'running'``, ``'finished'`` or ``'failed'``; ``message`` says why.
    error : the exception (:class:`IntegrationError`, or an
        :class:`~mbcore.errors.AnalysisError` raised by the problem) that made the
        integrator fail, or None.
    stats : :class:`Statistics`.
    opts : resolved option values.
    """

    name: ClassVar[str] = ""
    #: plugin contract version this class was built for (mbcore.plugins.contract)
    contract: ClassVar[tuple[int, int]] = CONTRACT_VERSION
    description: ClassVar[str] = ""
    order: int = 1
    adaptive: ClassVar[bool] = False
    implicit: ClassVar[bool] = False
    variable_order: ClassVar[bool] = False
    options: ClassVar[Mapping[str, Option]] = {}
    #: the instance attributes holding the method's state between steps (rule 11);
    #: None: not declared (no exact resume)
    state_fields: ClassVar[tuple[str, ...] | None] = None

    @classmethod
    def compiled_loop_kind(cls) -> str | None:
        """'fixed' or 'embedded' when :mod:`mbcore.integrate.fastloop` can run this class's
        method in compiled code from its tableau (``A``, ``B``, ``C``; embedded
        pairs also ``E``, ``P``, ``error_order`` and the step-size controller
        constants ``SAFETY``, ``MIN_FACTOR``, ``MAX_FACTOR``); 'abm', 'bdf' or
        'theta' for the multistep and implicit one-step methods with a compiled twin
        (:mod:`mbcore.integrate.multistep_loop`, which continues from the state of the Python
        object); None (the default)
        keeps the Python driver.  Declared by the integrator plugins, so the core
        needs no knowledge of them."""
        return None

    def __init__(self, fun: Callable, t0: float, y0, t_bound: float, *,
                 jac: Callable | np.ndarray | None = None, **options: Any):
        cls = type(self)
        self._label = cls.name or cls.__name__
        try:
            t0 = _real(t0)
        except ValueError as exc:
            raise IntegratorOptionError(self._label, "t0", str(exc)) from None
        try:
            t_bound = _real(t_bound)
        except ValueError as exc:
            raise IntegratorOptionError(self._label, "t_bound", str(exc)) from None
        if not callable(fun):
            raise IntegratorOptionError(self._label, "fun", f"must be callable, got {fun!r}")
        try:
            y = np.array(y0, dtype=np.float64)
        except (TypeError, ValueError):
            raise IntegratorOptionError(self._label, "y0",
                                        f"must be a 1-D array of floats, got {y0!r}") from None
        if y.ndim != 1 or y.size == 0:
            raise IntegratorOptionError(self._label, "y0",
                                        f"must be a non-empty 1-D array, got shape {y.shape}")
        if not np.all(np.isfinite(y)):
            bad = int(np.flatnonzero(~np.isfinite(y))[0])
            raise IntegratorOptionError(self._label, "y0", f"component {bad} is {y[bad]}")
        self.n = y.size
        self.t0 = t0
        self.t = t0
        self.y = y
        self.t_bound = t_bound
        self.direction = 1.0 if t_bound >= t0 else -1.0
        self.t_old: float | None = None
        self.step_size: float | None = None
        self.status = "running"
        self.message: str | None = None
        self.error: AnalysisError | None = None
        self.stats = Statistics()
        self.opts = self._resolve_options(options)
        self._user_fun = fun
        self.fun = self._counting_fun(fun)
        self._jac_user = jac
        self._jac_constant: np.ndarray | None = None
        if jac is not None and not callable(jac):
            J = np.array(jac, dtype=np.float64)
            if J.shape != (self.n, self.n):
                raise IntegratorOptionError(self._label, "jac",
                                            f"a constant Jacobian must have shape "
                                            f"({self.n}, {self.n}), got {J.shape}")
            if not np.all(np.isfinite(J)):
                raise IntegratorOptionError(self._label, "jac", "contains NaN/inf")
            self._jac_constant = J
        self._accepted_order: int | None = None
        if t_bound == t0:
            self.status = "finished"
        self._restart_impl()

    # -- options ------------------------------------------------------------------
    def _resolve_options(self, given: dict[str, Any]) -> dict[str, Any]:
        spec = type(self).options
        out: dict[str, Any] = {}
        for key in given:
            if key not in spec:
                close = difflib.get_close_matches(key, list(spec), n=2)
                hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                raise IntegratorOptionError(
                    self._label, key, f"unknown option{hint} (valid options: "
                    f"{', '.join(sorted(spec)) if spec else 'none'})")
        for key, opt in spec.items():
            if key in given and given[key] is not None:
                value = given[key]
                if opt.check is not None:
                    try:
                        value = opt.check(value, self.n)
                    except ValueError as exc:
                        raise IntegratorOptionError(self._label, key, str(exc)) from None
                out[key] = value
            elif opt.required:
                raise IntegratorOptionError(self._label, key, "is required")
            else:
                out[key] = opt.default
        if "rtol" in out:
            rtol = out["rtol"]
            if np.any(np.asarray(rtol) < 100 * EPS):
                out["rtol"] = np.maximum(rtol, 100 * EPS) if np.ndim(rtol) else 100 * EPS
            if self._zero_tolerance(out):
                raise IntegratorOptionError(self._label, "atol",
                                            "rtol and atol are both zero for some component")
        if out.get("first_step") is not None and out["first_step"] > abs(self.t_bound - self.t0) \
                and self.t_bound != self.t0:
            raise IntegratorOptionError(self._label, "first_step",
                                        f"{out['first_step']} exceeds the interval length "
                                        f"{abs(self.t_bound - self.t0)}")
        return out

    @staticmethod
    def _zero_tolerance(out: dict[str, Any]) -> bool:
        if "atol" not in out:
            return False
        return bool(np.any((np.asarray(out["atol"]) + np.asarray(out["rtol"])) <= 0))

    # -- counted evaluations (rule 5) -----------------------------------------------
    def _counting_fun(self, fun: Callable) -> Callable:
        stats = self.stats
        shape = (self.n,)
        isfinite = math.isfinite
        asarray = np.asarray
        f64 = np.float64

        def counted(t, y):
            stats.nfev += 1
            f = fun(t, y)
            if type(f) is not np.ndarray or f.dtype != f64:
                f = asarray(f, dtype=f64)
            if f.shape != shape:
                raise IntegrationError(
                    f"the right-hand side returned shape {f.shape}, expected {shape}", t)
            # the sum is finite unless a component is not finite (or it overflows:
            # then the full test); a reduction without BLAS, whose threaded dot
            # leaves worker threads spinning after the call
            if not isfinite(f.sum()) and not np.all(np.isfinite(f)):
                bad = np.flatnonzero(~np.isfinite(f))
                raise NonFiniteError(
                    f"the right-hand side is not finite (component(s) "
                    f"{', '.join(map(str, bad[:5]))}{'...' if bad.size > 5 else ''} = "
                    f"{f[bad[0]]})", t)
            return f

        return counted

    @property
    def has_jacobian(self) -> bool:
        """True if the user supplied ``jac`` (else finite differences are used)."""
        return self._jac_user is not None

    def jac(self, t: float, y: np.ndarray, f: np.ndarray | None = None,
            scale: np.ndarray | None = None) -> np.ndarray:
        """The Jacobian df/dy at (t, y): the user's ``jac`` (callable or constant
        array) or forward differences (``n`` extra evaluations of ``fun``, counted
        in ``nfev`` and ``nfev_jac``; ``f`` = f(t, y) if known, ``scale`` a
        per-component magnitude floor for the perturbation)."""
        if self._jac_constant is not None:
            return self._jac_constant
        self.stats.njev += 1
        if self._jac_user is not None:
            J = self._jac_user(t, y)
            if hasattr(J, "toarray"):  # scipy.sparse
                J = J.toarray()
            J = np.asarray(J, dtype=np.float64)
            if J.shape != (self.n, self.n):
                raise IntegrationError(f"jac returned shape {J.shape}, expected "
                                       f"({self.n}, {self.n})", t)
            if not np.all(np.isfinite(J)):
                raise NonFiniteError("the Jacobian is not finite", t)
            return J
        from .common import num_jac
        before = self.stats.nfev
        if f is None:
            f = self.fun(t, y).copy()
        J = num_jac(self.fun, t, y, f, scale)
        self.stats.nfev_jac += self.stats.nfev - before
        return J

    def lu_factor(self, M: np.ndarray):
        """LU factors (LAPACK dgetrf, partial pivoting) of a Newton matrix, counted
        in ``nlu``; ``M`` is overwritten.  An exactly singular matrix gives factors
        whose solves return non-finite values: treat that as a Newton failure.  A
        complex ``M`` (the complex system of Radau IIA) is factorised by zgetrf."""
        self.stats.nlu += 1
        getrf = _lapack().zgetrf if M.dtype.kind == "c" else _lapack().dgetrf
        lu, piv, info = getrf(M, overwrite_a=True)
        return lu, piv

    def lu_solve(self, lu, b: np.ndarray) -> np.ndarray:
        """Solve with factors from :meth:`lu_factor` (dgetrs, or zgetrs for complex
        factors and a complex ``b``; counted in ``nlu_solves``).  Calls LAPACK
        directly: scipy.linalg.lu_solve adds ~20 µs of Python per call."""
        self.stats.nlu_solves += 1
        if lu[0].dtype.kind == "c":      # complex factors (zgetrf): a complex solution
            return _lapack().zgetrs(lu[0], lu[1], b)[0]
        return _lapack().dgetrs(lu[0], lu[1], b)[0]

    # -- reporting helpers (rule 6, 9) ----------------------------------------------
    def _reject_error_test(self) -> None:
        self.stats.nrejected += 1
        self.stats.nerror_test_failures += 1

    def _reject_newton(self) -> None:
        self.stats.nrejected += 1
        self.stats.nnewton_failures += 1

    def _newton_iterations(self, k: int) -> None:
        self.stats.nnewton_iter += k

    def _min_step(self, t: float) -> float:
        """Smallest meaningful step at time t: ten units of round-off of t."""
        return 10.0 * EPS * max(abs(t), 1e-300)

    def _step_too_small(self, h: float, why: str = "") -> None:
        raise StepSizeError(
            f"step size {abs(h):.3e} fell below the round-off limit "
            f"{self._min_step(self.t):.3e}{' (' + why + ')' if why else ''}; the problem "
            f"may be stiff or singular here, or the tolerance too tight", self.t)

    def _trial_end(self, t: float, h_abs: float, min_step: float) -> tuple[float, bool]:
        """(t_new, clipped): the end of a trial step of size ``h_abs`` from ``t``
        (StepSizeError below ``min_step``); it is ``t_bound`` (clipped) when the step
        would pass it or stop short of it by less than ``min_step``."""
        if h_abs < min_step:
            self._step_too_small(h_abs)
        t_new = t + self.direction * h_abs
        if self.direction * (t_new - self.t_bound) > 0 or \
                abs(self.t_bound - t_new) < min_step:
            return self.t_bound, True
        return t_new, False

    # -- templates --------------------------------------------------------------------
    def step(self) -> str | None:
        """Advance one accepted step.  Returns None, or the failure message (then
        ``status == 'failed'`` and ``error`` holds the exception)."""
        if self.status != "running":
            raise RuntimeError(f"integrator '{self._label}' is {self.status}; "
                               f"it cannot take another step")
        t = self.t
        try:
            success, message = self._step_impl()
        except AnalysisError as exc:
            # integrator errors, and errors of the problem that name their time (e.g. a
            # formulation's ConvergenceError), keep their type; other exceptions of the
            # right-hand side propagate unchanged
            success, message = False, str(exc)
            if exc.t is None:
                exc.t = t
            self.error = exc
        if not success:
            self.status = "failed"
            if self.error is None:
                self.error = IntegrationError(message or "step failed", t)
                message = str(self.error)
            self.message = message
            return message
        self.t_old = t
        h = abs(self.t - t)
        self.step_size = h
        st = self.stats
        st.nsteps += 1
        if h < st.h_min:
            st.h_min = h
        if h > st.h_max:
            st.h_max = h
        k = self.order
        st.orders[k] = st.orders.get(k, 0) + 1
        if self._accepted_order is not None and k != self._accepted_order:
            st.norder_changes += 1
        self._accepted_order = k
        if self.direction * (self.t - self.t_bound) >= 0:
            self.t = self.t_bound  # exact end point
            self.status = "finished"
            self.message = "reached t_bound"
        return None

    def dense_output(self):
        """Interpolant (:class:`mbcore.integrate.common.DenseOutput`) valid on
        ``[t_old, t]`` of the last accepted step."""
        if self.t_old is None:
            raise RuntimeError("dense output is available only after the first step")
        if self.t == self.t_old:
            from .common import ConstantDenseOutput
            return ConstantDenseOutput(self.t_old, self.t, self.y)
        return self._dense_output_impl()

    def restart(self, t: float | None = None, y=None) -> None:
        """Discard the method's history and continue from ``(t, y)`` (default: the
        current point), e.g. after an impact or a force discontinuity (multistep
        methods restart at order 1 with a small step)."""
        if t is not None:
            self.t = _real(t)
        if y is not None:
            y = np.array(y, dtype=np.float64)
            if y.shape != (self.n,) or not np.all(np.isfinite(y)):
                raise IntegratorOptionError(self._label, "y", f"restart needs {self.n} "
                                            f"finite values")
            self.y = y
        self.t_old = None
        self._accepted_order = None
        self.status = "running" if self.direction * (self.t_bound - self.t) > 0 else "finished"
        self.message = None
        self.error = None
        self._restart_impl()

    # -- state (rule 11: exact resume) ------------------------------------------------
    #: the template's attributes saved with the method's ``state_fields``
    _BASE_STATE = ("t", "y", "t_old", "step_size", "order", "_accepted_order", "status")

    @classmethod
    def _declared_state(cls) -> tuple[str, ...] | None:
        """The attributes :meth:`get_state` copies (``_BASE_STATE`` and
        ``state_fields``) if the class declaring ``state_fields`` also owns (or
        inherits unchanged) ``_step_impl`` and ``_restart_impl``, else None."""
        return _declared_state(cls)

    def get_state(self) -> dict[str, Any] | None:
        """A copy of the method's state between two steps (rule 11), or None when
        the class declares none."""
        names = _declared_state(type(self))
        if names is None:
            return None
        out = {}
        for name in names:
            v = getattr(self, name)
            out[name] = v.copy() if type(v) is np.ndarray else _copy_state(v)
        return out

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (of :meth:`get_state` of an integrator of this
        class with the same options and right-hand side); the statistics start from
        zero.  ``t_bound`` is kept (it may be later than when the state was taken)."""
        names = _declared_state(type(self))
        if names is None:
            raise IntegratorOptionError(self._label, "state", "this integrator declares "
                                        "no state_fields (no exact resume)")
        missing = [k for k in names if k not in state]
        if missing:
            raise IntegratorOptionError(self._label, "state", f"missing {', '.join(missing)}")
        y = np.array(state["y"], dtype=np.float64)
        if y.shape != (self.n,):
            raise IntegratorOptionError(self._label, "state", f"y has shape {y.shape}, "
                                        f"expected ({self.n},)")
        for name in names:
            setattr(self, name, _copy_state(state[name]))
        self.t = float(self.t)
        self.y = y
        if self.status == "finished" and self.direction * (self.t_bound - self.t) > 0:
            self.status = "running"
        self.message = None
        self.error = None
        st = self.stats
        for f in fields(st):
            setattr(st, f.name, f.default_factory() if f.default_factory is not MISSING
                    else f.default)

    # -- compiled loops ------------------------------------------------------------------
    @property
    def constant_jacobian(self) -> np.ndarray | None:
        """The constant Jacobian given with ``jac`` (an array), else None."""
        return self._jac_constant

    def loop_start(self) -> dict[str, Any]:
        """What the compiled loop of this method (``compiled_loop_kind``) starts from,
        by name: the state after the start-up and the resolved step controls.  The
        loop receives these values explicitly; {} for a method without one."""
        return {}

    def restore_loop_history(self, history: Mapping[str, Any]) -> dict[str, Any]:
        """Put a compiled loop's history (from a checkpoint) into this object before
        :meth:`loop_start`; returns the loop's own extra arguments (e.g. a stored
        Jacobian).  ValueError when the history does not fit this integrator."""
        return {}

    # -- to implement ------------------------------------------------------------------
    def _restart_impl(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _step_impl(self) -> tuple[bool, str | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _dense_output_impl(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} '{self._label}' t={self.t:.6g} n={self.n} "
                f"status={self.status}>")
