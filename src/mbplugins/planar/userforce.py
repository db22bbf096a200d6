"""User-defined force law: a Python callable (Nikravesh (1988), §9.2; the DAP USRFRC
user routine, Nikravesh (1988), Prob. 10.8).

A model file can only *name* importable code, never contain it (nothing is
evaluated): ``callable: "package.module:function"`` is resolved with
:func:`importlib.import_module` and ``getattr`` (dotted attributes allowed after
the colon).  A name without a colon refers to a function registered in this
process with :func:`register_user_function`.  From Python, pass
``callable=user_function(fn)``: it stores ``"module:qualname"`` when ``fn`` is
importable under that name, and otherwise registers ``fn`` under a process-local
name; either way the model stays plain data (savable, recorded with results).

Contract (``vectorized: false``, the default) — one call per element::

    fn(t, q, qd, **parameters) -> g

``q``, ``qd``: arrays (2, 3), rows ``[x, y, phi]`` of ``body_i`` and ``body_j``
(zeros for the ground); ``g``: array-like (2, 3), the generalised forces
``[f_x, f_y, n]`` on ``body_i`` and ``body_j`` (global components, moment about
each body origin, Nikravesh (1988), Eq. 9.8), or (3,) for a force on ``body_i`` only.
``parameters`` are the element's ``parameters`` mapping (numbers).

``vectorized: true`` — one call per group of elements sharing the function and
the parameters: ``q``, ``qd`` of shape (ne, 2, 3), returning (ne, 2, 3) or (ne, 3).

The element is non-conservative as a whole (no potential; its power
``sum_b g_b . qd_b`` counts as non-conservative work).  There is no compiled kernel:
it runs through the reference path on both kernel settings.  An exception raised
by the function, a wrong shape or a non-finite value stops the analysis with an
error naming the element and the time.
"""
from __future__ import annotations

import importlib
import os
import math
import threading
from typing import Any, Callable, Mapping

import numpy as np

from mbcore.elements.base import ForceType
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.elements.schema import Param

_REGISTRY: dict[str, Callable] = {}
#: resolved (function, spec, parameters, vectorized) per handle; par[:, 0] indexes it
_HANDLES: list[tuple[Callable, str, dict, bool]] = []
_HANDLE_INDEX: dict[tuple, int] = {}
_HANDLE_LOCK = threading.Lock()


def register_user_function(name: str, fn: Callable) -> str:
    """Make ``fn`` available to models as ``callable: name`` (this process only).
    Re-registering a name replaces the function for models compiled afterwards."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"a user function name is a non-empty string without ':' "
                         f"(got {name!r})")
    if not callable(fn):
        raise TypeError(f"register_user_function({name!r}, ...): {fn!r} is not callable")
    _REGISTRY[name] = fn
    return name


def unregister_user_function(name: str) -> None:
    _REGISTRY.pop(name, None)


class UserFunction:
    """What :func:`user_function` returns: a model value whose data form
    (``to_spec``) is the ``callable`` string."""

    def __init__(self, fn: Callable, spec: str):
        self.fn = fn
        self.spec = spec

    def to_spec(self) -> str:
        return self.spec

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"user_function({self.spec!r})"


def user_function(fn: Callable, name: str | None = None) -> UserFunction:
    """Wrap a Python callable for ``model.add_force("user_force", callable=...)``.

    With ``name``, ``fn`` is registered under it.  Without, ``fn`` is named
    ``"module:qualname"`` if importing that gives back ``fn`` (then a saved model
    reloads in another process), else it is registered under a unique
    process-local name."""
    if not callable(fn):
        raise TypeError(f"user_function: {fn!r} is not callable")
    if name is not None:
        return UserFunction(fn, register_user_function(name, fn))
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if mod and qual and "<" not in qual:
        spec = f"{mod}:{qual}"
        try:
            if _import(spec) is fn:
                return UserFunction(fn, spec)
        except (ImportError, AttributeError):
            pass
    auto = f"{qual or type(fn).__name__}@{id(fn):x}"
    return UserFunction(fn, register_user_function(auto, fn))


def _import(spec: str) -> Any:
    mod, _, attr = spec.partition(":")
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def resolve(spec: str, path: str) -> Callable:
    """The callable named by ``spec`` (``module:function`` or a registered name)."""
    if ":" not in spec:
        if spec not in _REGISTRY:
            known = ", ".join(sorted(_REGISTRY)) or "none"
            raise ModelError(path, f"no user function registered as {spec!r} (registered: "
                                   f"{known}); name importable code as "
                                   f"'package.module:function'")
        return _REGISTRY[spec]
    mod, _, attr = spec.partition(":")
    if not mod or not attr or not all(p.isidentifier() for p in mod.split(".") + attr.split(".")):
        raise ModelError(path, f"expected 'package.module:function', got {spec!r}")
    # Model files are data: naming a module must not run its code unless the user
    # opted in (or the program imported it already).
    import sys
    if mod not in sys.modules and os.environ.get("MBCORE_ALLOW_IMPORTS", "") != "1":
        raise ModelError(path, f"module '{mod}' is not imported: a model file may only name "
                               f"code the program has already imported or registered "
                               f"(register_user_function), unless MBCORE_ALLOW_IMPORTS=1 "
                               f"is set for trusted model files")
    try:
        module = importlib.import_module(mod)
    except Exception as exc:   # ImportError, or an error while importing
        raise ModelError(path, f"cannot import module '{mod}' ({type(exc).__name__}: "
                               f"{exc})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ModelError(path, f"module '{mod}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ModelError(path, f"'{spec}' is not callable ({type(obj).__name__})")
    return obj


class _CallableParam(Param):
    """``package.module:function`` or a registered name (strings only: model data)."""

    def validate(self, value, path, ctx):
        if isinstance(value, UserFunction):
            value = value.spec
        if not isinstance(value, str) or not value:
            hint = (" (wrap a Python function: callable=user_function(fn), from "
                    "mbplugins.planar.userforce)") if callable(value) else ""
            raise ModelError(path, f"expected 'package.module:function' or a registered "
                                   f"name, got {type(value).__name__}{hint}")
        resolve(value, path)
        return value


class _ParametersParam(Param):
    """A mapping of identifier -> number, passed as keyword arguments."""

    def validate(self, value, path, ctx):
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ModelError(path, f"expected a mapping of names to numbers, got "
                                   f"{type(value).__name__}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k.isidentifier():
                raise ModelError(f"{path}.{k}", "parameter names must be identifiers")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ModelError(f"{path}.{k}", f"expected a finite number, got {v!r}")
            out[k] = float(v)
        return out


class _BoolParam(Param):
    def validate(self, value, path, ctx):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ModelError(path, f"expected true or false, got {value!r}")


def _handle(fn: Callable, spec: str, params: dict, vectorized: bool) -> int:
    key = (spec, fn, tuple(sorted(params.items())), vectorized)
    with _HANDLE_LOCK:            # two threads compiling models get distinct handles
        k = _HANDLE_INDEX.get(key)
        if k is None:
            k = len(_HANDLES)
            _HANDLES.append((fn, spec, dict(params), vectorized))
            _HANDLE_INDEX[key] = k
    return k


class UserForce(ForceType):
    """Force law given by a Python callable (F7; DAP USRFRC, Nikravesh (1988), Prob. 10.8).
    par = ``[handle]`` (index into this module's table of resolved callables)."""
    #: a user expression may read ``t`` itself: one call per output row
    rows_stacked = False

    name = "user_force"
    description = "force law given by a Python callable (DAP USRFRC)"
    bodies = ("body_i", "body_j")
    #: the callable sees the centroids' coordinates: refused on a body with
    #: ``center_of_mass`` (mbcore.elements.base.frame_points)
    frame_fixed = {"callable": ("body_i", "body_j")}
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body (default: ground)", default="ground"),
        "callable": _CallableParam("string", "'package.module:function' or a name "
                                             "registered with register_user_function"),
        "parameters": _ParametersParam("string", "numbers passed as keyword arguments",
                                       default={}),
        "vectorized": _BoolParam("string", "one call per group with (ne, 2, 3) arrays",
                                 default=False),
    }
    n_par = 1
    n_fun = 0
    kernel = None
    labels = ("fx_i", "fy_i", "n_i", "fx_j", "fy_j", "n_j")

    def pack(self, spec, ctx):
        path = f"{ctx.path}.callable"
        fn = resolve(spec["callable"], path)
        return [float(_handle(fn, spec["callable"], spec["parameters"] or {},
                              bool(spec["vectorized"])))], []

    def force(self, par, qb, qdb, t, f):
        return load_blocks(par, qb, qdb, t, 3)

    def outputs(self, par, qb, qdb, t, f):
        return self.force(par, qb, qdb, t, f).reshape(par.shape[0], 6)


def load_blocks(par, qb, qdb, t, width: int) -> np.ndarray:
    """The loads of a group of user-force elements, (ne, 2, width): one call per
    element, or one per group for ``vectorized`` callables; ``width`` is 3 for
    planar ``[fx, fy, n]`` and 6 for spatial ``[f, n]`` (mbplugins.spatial.forces)."""
    ne = par.shape[0]
    out = np.zeros((ne, 2, width))
    h = par[:, 0].astype(np.intp)
    for k in np.unique(h):
        fn, spec, kw, vec = _HANDLES[k]
        idx = np.nonzero(h == k)[0]
        if vec:
            out[idx] = _call(fn, spec, kw, t, qb[idx].copy(), qdb[idx].copy(),
                             int(idx[0]), len(idx), width)
        else:
            for e in idx:
                out[e] = _call(fn, spec, kw, t, qb[e].copy(), qdb[e].copy(), int(e), None,
                               width)[0]
    return out


def _call(fn, spec, kw, t, q, qd, e, n, width):
    """One call of a user function: loads on body_i only ``(width,)`` or on both
    ``(2, width)`` (with a leading ``n`` when vectorised), checked finite."""
    try:
        out = np.asarray(fn(t, q, qd, **kw), dtype=float)
    except Exception as exc:
        raise ElementEvaluationError(e, f"user function '{spec}' raised "
                                        f"{type(exc).__name__}: {exc}") from exc
    m = 1 if n is None else n
    if out.shape == ((width,) if n is None else (n, width)):
        full = np.zeros((m, 2, width))
        full[:, 0, :] = out.reshape(m, width)
        out = full
    elif out.shape == ((2, width) if n is None else (n, 2, width)):
        out = out.reshape(m, 2, width)
    else:
        want = (f"({width},) or (2, {width})" if n is None
                else f"({n}, {width}) or ({n}, 2, {width})")
        raise ElementEvaluationError(e, f"user function '{spec}' returned shape "
                                        f"{out.shape}, expected {want}")
    if not np.all(np.isfinite(out)):
        raise ElementEvaluationError(e, f"user function '{spec}' returned a non-finite "
                                        f"force")
    return out
