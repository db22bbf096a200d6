"""Formulation contract: how a constrained System becomes ``y' = f(t, y)``.

Formulations are plugins (hook ``mbcore_formulations``): DI (direct integration of
the augmented index-1 system), CS (Baumgarte stabilisation), and later CP
(coordinate partitioning), projection and joint coordinates.  The dynamic
analysis hands ``rhs`` to an integrator and calls ``after_step`` after every
accepted step.  State layout: ``y = [q; qd]`` (Nikravesh (1988), §13.1, algorithm DI-4).
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np

from ..elements import schema as S
from ..plugins.contract import CONTRACT_VERSION
from .dynamics import AccelerationSolver
from ..elements.schema import Param


class RestartRequest(Exception):
    """Raised by a formulation inside an evaluation when its current coordinates can
    no longer be used (e.g. a coordinate partition became singular): the analysis
    restarts from the last output state after ``initialize``."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class Formulation:
    """Base class.  Rules for implementers:

    1. ``name`` and ``settings_schema`` (validated as ``settings.<key>``).
    2. ``rhs(t, y)`` returns ``y'`` (a work buffer) and counts evaluations in
       ``self.nfev``; it never keeps references to ``y``.
    3. ``outputs(t, y)`` returns ``(q, qd, qdd, lam)`` at an output point.
    4. ``after_step(t, y)`` may modify ``y`` in place after an accepted step
       (projection); it returns True when it did (the integrator then restarts
       its history).  Default: no-op.
    5. ``warnings(step)`` returns messages about unsuitable settings for a step size.
    6. ``initialize(q, qd, t)`` returns ``(y0, info)`` for a consistent state (CP
       chooses its partition here); ``wants_repartition()`` may return a reason
       at an output point, and evaluations may raise :class:`RestartRequest`: the
       analysis then calls ``initialize`` again at the last output state.  A
       partitioning formulation names its partition by ``v`` (indices),
       ``independent_names()`` and, when the indices are not the System's
       coordinates, ``coordinate_labels()`` (joint coordinates: the entries of nu).
    7. After ``rhs``, ``q_cur``/``qd_cur`` hold the coordinates of that evaluation
       (Python path only).
    8. ``compiled_stabilisation()`` returns ``(alpha, beta)`` when the formulation's
       right-hand side is the index-1 one with Baumgarte terms (DI: (0, 0)); the
       base class then evaluates it by the compiled :attr:`compiled` kernel
       (``mbcore._ext._dynamics.CompiledRHS``) where the System allows.  Return None
       (the default for formulations that override ``rhs`` or ``gamma_extra``) to
       keep the Python path.
    9. A formulation with another state may set :attr:`compiled` itself to a
       ``_dynamics.CompiledODE`` of ``[its state; W]`` (joint coordinates:
       ``CompiledJC``; ``cartesian`` False, so outputs come from ``outputs``), and
       define ``work_rate(t)``: the rate of the work channel at the last ``rhs``
       (else the dynamic analysis adds ``lam . Phi_q qd`` to the power of the
       non-conservative forces).  A DAE form's compiled object (ggl:
       ``CompiledGGL``) declares ``size`` (its state length with W) and ``dae``
       (stepped only by the bdf loop with the formulation's mass matrix).
    10. Exact resume: a formulation whose evaluations or outputs depend on more than
        their arguments (a Newton warm start, a watch over past outputs) returns
        that state from ``resume_state()`` and takes it back in
        ``set_resume_state(state)`` (CP); its compiled object keeps its own by
        ``c_save``/``saved_state``/``warm_state``/``load_state`` (``CompiledCP``).
        Checkpoints store it with the integrator's step (mbcore.analysis.checkpoint).
    11. ``step_end(t, y)`` (optional) is called at every accepted step's end, after
        its outputs: None, or ``(reason, q, qd)`` from that exact state — new
        coordinates (cp: a new partition; the analysis initialises the formulation
        there and records the reason) or, with ``reason`` None, the same coordinates
        moved (di's drift projection).  ``step_end_in_compiled_loop`` True: the
        compiled loops do it themselves (no call-back there).
    """

    name: ClassVar[str] = ""
    #: plugin contract version this class was built for (mbcore.plugins.contract)
    contract: ClassVar[tuple[int, int]] = CONTRACT_VERSION
    description: ClassVar[str] = ""
    settings_schema: ClassVar[Mapping[str, Param]] = {}
    #: the state is y = [q; qd] (False: a subset, e.g. independent coordinates)
    full_state: ClassVar[bool] = True
    #: ``use_independent_rows`` gives the formulation a compiled object on the kept
    #: rows (ggl, stiff, cp, di, cs, projection); else the compiled object serves
    #: only with every row
    compiled_follows_rows: ClassVar[bool] = False
    #: the formulation keeps the constraint violations bounded (stabilisation,
    #: projection, independent coordinates, penalty); False (DI): they drift with the
    #: integration error (DI projects where it passes the tolerance unless ``drift:
    #: warn``), and the dynamic analysis warns where the recorded drift exceeds ten
    #: times the tolerance
    corrects_drift: ClassVar[bool] = True

    def __init__(self, system, settings: Mapping[str, Any] | None = None):
        self.system = system
        self.settings = self.validate_settings(
            dict(settings or {}), self.settings_schema,
            units=getattr(getattr(system, "model", None), "unit_system", None))
        self.n = system.n
        self.solver = AccelerationSolver(system)
        self._ydot = np.zeros(2 * self.n)
        self.nfev = 0
        self.compiled = _compiled_rhs(system, self.solver, self.compiled_stabilisation())
        self._ywork = np.zeros(2 * self.n + 1) if self.compiled is not None else None

    @classmethod
    def validate_settings(cls, settings: Mapping[str, Any],
                          schema: Mapping[str, Param] | None = None,
                          where: Mapping[str, str] | None = None,
                          units: Any = None) -> dict[str, Any]:
        """``settings`` checked against ``schema`` (default ``settings_schema``), with
        the defaults; ``where``: the key path of each given key (default
        ``settings.<key>``); a key given as null takes its default.  A value given
        with a unit (``omega: "20 1/s"``) where the key declares a dimension converts
        to ``units``, the model's :class:`~mbcore.elements.units.UnitSystem` (default
        SI).  No System needed (``mbcore validate``)."""
        schema = cls.settings_schema if schema is None else schema
        where = where or {}
        S.check_keys(S.mapping(settings, "settings.formulation_options"), schema,
                     "settings.formulation_options", of=f"formulation '{cls.name}'")
        out = {}
        for k, p in schema.items():
            if settings.get(k) is None:
                out[k] = p.default_value()
                continue
            kp = where.get(k, f"settings.{k}")
            value = S.quantities(settings[k], kp, p.unit, units) if p.unit else settings[k]
            out[k] = p.validate(value, kp, None)
        return out

    @property
    def size(self) -> int:
        return 2 * self.n

    def pack(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return np.concatenate([q, qd])

    def split(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return y[:self.n], y[self.n:2 * self.n]

    def initialize(self, q, qd, t):
        return self.pack(q, qd), None

    def wants_repartition(self):
        return None

    def gamma_extra(self, q, qd, t):
        """Extra terms added to gamma (CS); None for DI."""
        return None

    def compiled_stabilisation(self) -> tuple[float, float] | None:
        """(alpha, beta) of the Baumgarte terms when ``rhs`` is the base class's
        index-1 right-hand side, else None (rule 8)."""
        cls = type(self)
        if all(getattr(cls, k) is getattr(Formulation, k)
               for k in ("rhs", "gamma_extra", "split", "outputs")) \
                and cls.size is Formulation.size:
            return 0.0, 0.0
        return None

    def compiled_ready(self) -> bool:
        """The compiled right-hand side applies now (no rows removed since, or it was
        built on the kept rows: :meth:`compiled_on_rows`)."""
        return self.compiled is not None and (self.solver.rows is None
                                              or self.solver.rows is self._compiled_rows)

    #: the constraint rows the compiled right-hand side was built on (None: all)
    _compiled_rows = None

    def compiled_on_rows(self, rows) -> None:
        """Solve with only these constraint rows (the independent ones of a redundant
        set, Nikravesh (1988), App. C; the removed rows carry no load): the
        acceleration solver's rows (``set_rows``) and the compiled right-hand side
        rebuilt on them (``CompiledRHS(rows=...)``; its NumPy reference: the
        solver on the same rows), or None where it does not apply (then the Python
        path)."""
        rows = np.asarray(rows, dtype=np.intp)
        self.solver.set_rows(rows)
        stab = self.compiled_stabilisation()
        self.compiled = _compiled_rhs(self.system, self.solver, stab, rows=rows)
        self._compiled_rows = self.solver.rows if self.compiled is not None else None
        self._ywork = np.zeros(2 * self.n + 1) if self.compiled is not None else None

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        self.nfev += 1
        if self.compiled is not None and (self.solver.rows is None
                                          or self.solver.rows is self._compiled_rows):
            if self.compiled.eval(t, y, self._ywork) == 0:
                self.q_cur, self.qd_cur = self.split(y)
                self._ydot[:] = self._ywork[:2 * self.n]
                return self._ydot
            # singular / failed: the Python path raises the named error (or applies
            # the least-squares multipliers)
        q, qd = self.split(y)
        self.q_cur, self.qd_cur = q, qd
        qdd, _ = self.solver.solve(q, qd, t, self.gamma_extra(q, qd, t))
        self._ydot[:self.n] = qd
        self._ydot[self.n:] = qdd
        return self._ydot

    def outputs(self, t: float, y: np.ndarray):
        q, qd = self.split(y)
        qdd, lam = self.solver.solve(q, qd, t, self.gamma_extra(q, qd, t))
        return q, qd, qdd, lam

    def output_positions(self, t: float, y: np.ndarray):
        """(q, qd) at an output, the values :meth:`outputs` gives, without its
        accelerations and multipliers: for rows whose channels need neither.  A
        formulation whose ``outputs`` solve for more than they return may give
        them more cheaply (``stiff``, ``ggl``)."""
        q, qd = self.outputs(t, y)[:2]
        return q, qd

    def after_step(self, t: float, y: np.ndarray) -> bool:
        return False

    def set_tolerances(self, rtol: float | None, atol: float | None) -> None:
        """The integration tolerances the run gives its integrator (after
        ``tolerance_factor``; None for a fixed-step method), for a formulation whose
        own tests follow them (penalty: no projection while the violations are
        within atol).  Default: not used."""

    def resume_state(self) -> dict[str, Any]:
        """The formulation's own state that later evaluations and outputs depend on
        (warm starts, watches: arrays, tuples of arrays, numbers, booleans, strings,
        None), stored in a checkpoint with the integrator's step so that a resume
        takes the uninterrupted run's steps (mbcore.analysis.checkpoint); {} when the
        right-hand side depends on its arguments only.  The compiled right-hand side
        keeps its own (``saved_state``/``load_state``)."""
        return {}

    def set_resume_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`resume_state` (after :meth:`initialize` with the
        checkpoint's partition)."""

    def warnings(self, step: float | None) -> list[str]:
        return []


class FollowsKeptRows:
    """Mixin of full-state formulations whose compiled right-hand side is the
    :class:`CompiledRHS` of :func:`_compiled_rhs`: with redundant constraints they
    solve with the independent rows only (Nikravesh (1988), App. C), the
    acceleration solver and the compiled right-hand side rebuilt on them
    (:meth:`Formulation.compiled_on_rows`)."""

    #: use_independent_rows builds the compiled right-hand side on the kept rows
    compiled_follows_rows: ClassVar[bool] = True

    def use_independent_rows(self, rows, q=None, t=None) -> None:
        self.compiled_on_rows(rows)


def _compiled_rhs(system, solver, stabilisation, rows=None):
    """The compiled right-hand side (``_dynamics.CompiledRHS``) of a System made only
    of compiled elements with a dense Jacobian and a positive mass matrix, else None.
    ``rows``: on those constraint rows only (the solver's, ``set_rows``)."""
    kernels = system.compiled_kernels()
    if stabilisation is None or kernels is None or solver.augmented:
        return None
    if rows is not None and not 0 < len(rows) <= system.m:
        return None
    # the compiled sparse Schur kernel (on the kept rows: the solver's of those rows)
    sparse = solver.transformed_sparse_kernel if rows is None else solver.rows_sparse_kernel
    if not system.dense and (sparse is None or not system.m):
        return None
    try:
        from .._ext._dynamics import CompiledRHS
    except ImportError:              # pragma: no cover - an old build
        return None
    alpha, beta = stabilisation
    kw = {}
    if solver.spatial is not None:       # Formulation I mass blocks (mbcore.system.mass)
        kw["spatial"] = solver.spatial
    if not system.dense:
        kw.update(sparse_solver=sparse, **kernels.csr())
    if rows is not None:
        kw["rows"] = np.ascontiguousarray(rows, dtype=np.intp)
    crhs = CompiledRHS(*kernels.args, solver.minv, alpha, beta, **kw)
    _enable_jacobian(system, crhs)
    return crhs


def _enable_jacobian(system, crhs) -> bool:
    """Give the compiled right-hand side its semi-analytic Jacobian (``c_jac``, the
    Newton Jacobian of the compiled bdf / θ loops; ``mbcore.solve.dijac``) when every force
    group has a compiled force-Jacobian kernel, the Jacobian is dense and the bodies
    are planar; else it keeps forward differences of its evaluation."""
    enable = getattr(crhs, "enable_jacobian", None)
    if enable is None or not system.dense or system.mass_diag is None or system.padded:
        return False
    kernels = system.force_jacobian_kernels()
    return kernels is not None and bool(enable(*kernels))
