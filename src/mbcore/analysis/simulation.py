"""``mbcore.Simulation``: a dynamic analysis driven from outside, for control loops,
co-simulation and model-predictive use (docs/embedding.md).

::

    sim = mbcore.Simulation("examples/slider_crank_dynamic.yaml", {"integrator": "rk4",
                                                                    "step": 1e-3})
    while sim.t < 1.0:
        sim["crank.torque"] = controller(sim["qd/crank.phi"])
        sim.advance_to(sim.t + 1e-3)

The model is compiled once (its own copy: simulations never share a System, a
function table or a compiled object, so several live in one process and in
threads); the dynamic analysis' stages (assembly of the initial state, the
formulation's right-hand side, the output channels) are those of
:func:`mbcore.run`, found through the plugin registry.  Integration:
:mod:`mbcore.integrate.simulation_loop` (the run's compiled loops with exact
continuation across calls: the Runge-Kutta loop target by target, the multistep and
implicit loops as one loop call kept running; else one Python integrator object).

Inputs (set between steps; a changed value is a jump: the integrator restarts at
the current time from the current state, multistep methods at order 1; setting
the same value changes nothing): generalised forces ``<body>.fx|fy|torque``
(planar), ``<body>.fx|fy|fz`` (spatial), named as the linearisation's inputs
(:mod:`mbcore.elements.inputs`), moments ``<body>.nx|ny|nz`` of the spatial bodies declared
with ``moments=`` (a hidden torque element, :func:`_add_moment_inputs`), and the
``input`` time functions of the model (``{input: NAME}`` in any function spec: a
force element's force or a driver's value; a driver's jump re-assembles the
state).  Element parameters (:meth:`Simulation.set_parameter`,
:mod:`mbcore.analysis.simulation_params`) change in place, a jump too.  Outputs: any column of the
dynamic analysis by its result label (``q/crank.phi``, ``energy/kinetic``,
``reactions/...``; :meth:`mbcore.Result.columns`), at the current time.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import AnalysisError, MbcoreError, ModelError
from ..solve.formulation import RestartRequest
from ..integrate.base import StepBudgetError
from ..integrate.loop_result import LoopFallback
from ..integrate.simulation_loop import CompiledLoop, CompiledRK, PythonStepper

__all__ = ["Simulation", "SimulationState", "SimulationError"]


class SimulationError(MbcoreError, ValueError):
    """A call of a :class:`Simulation` that cannot be honoured: an unknown input or
    output name, a time before the current one, a non-finite input value.  The
    message names the key and the simulation time."""


@dataclass
class SimulationState:
    """A snapshot of a :class:`Simulation` (:meth:`Simulation.get_state`).

    ``t``, ``q``, ``qd`` (all coordinates), ``W`` (work of the non-conservative
    forces since the start), ``y`` (the formulation's integrated state + W),
    ``inputs`` (values by name), ``integrator``: the continuation data of the
    integrator (step-end state, next step size, grid position, last step;
    opaque): :meth:`Simulation.set_state` continues bit-identically from it on the
    compiled loops (the multistep and implicit ones from the history at the start
    of the step holding the last call's end) and restarts the Python-driver
    integrators from (t, y)."""

    t: float
    q: np.ndarray
    qd: np.ndarray
    W: float
    y: np.ndarray
    inputs: dict[str, float] = field(default_factory=dict)
    integrator: dict | None = None
    extra: dict = field(default_factory=dict)


def _model_copy(model, registry):
    """A private copy of ``model`` (a Model, a mapping or a file path)."""
    from ..model.model import Model
    if isinstance(model, Model):
        import copy                    # exact (a to_dict round trip may round angles)
        return copy.deepcopy(model)
    if isinstance(model, Mapping):
        return Model.from_dict(model, registry=registry)
    if isinstance(model, (str, os.PathLike)):
        return Model.from_file(model, registry=registry)
    raise TypeError(f"Simulation: model must be a mbcore.Model, a mapping or a path, "
                    f"got {type(model).__name__}")


#: the name of the hidden torque element that applies the moment inputs of a body
MOMENT_ELEMENT = "__moment_{}"


def _add_moment_inputs(model, names: Sequence[str], registry) -> None:
    """A global-frame ``torque`` element per body named in ``names``
    (``<body>.nx|ny|nz``) whose components are the input functions of those names
    (0 until set): a moment on a spatial body acts on the Euler parameters as
    ``2 G(p)^T n`` (Nikravesh (1988), Eqs. 11.1-11.4), which changes with p, so it is an element
    evaluated with the others (compiled kernel), not a constant generalised force."""
    if isinstance(names, str):
        names = [names]
    bodies: list[str] = []
    for name in names:
        body, _, axis = str(name).rpartition(".")
        kind = getattr(model.body(body), "kind", None) if model.body_index(body) >= 0 \
            else None
        if axis not in ("nx", "ny", "nz") or kind != "spatial":
            raise ModelError("moments", f"'{name}': expected '<spatial body>.nx', '.ny' "
                                        f"or '.nz'")
        if body not in bodies:
            bodies.append(body)
    for body in bodies:
        if any(e.name == MOMENT_ELEMENT.format(body) for e in model.force_elements()):
            continue                      # a copy of a simulation's model has it
        model.add_force("torque", MOMENT_ELEMENT.format(body), body=body, frame="global",
                        **{f"t{a}": {"input": {"name": f"{body}.n{a}", "value": 0.0}}
                           for a in "xyz"})


class Simulation:
    """A dynamic simulation advanced in calls (module docstring; docs/embedding.md).

    ``settings`` are those of the dynamic analysis (``mbcore.run``), merged over the
    model's; ``t_end`` is the horizon the integrator's steps are clipped at, as in a
    run (the simulation may continue past it).  ``record``: None, ``"memory"``
    (:meth:`result` returns the rows), an HDF5 path, a reporter object or a list of
    them: one row per :meth:`advance_to` / :meth:`step` (and the initial one);
    :meth:`close` (or ``with``) finishes the file."""

    def __init__(self, model, settings: Mapping[str, Any] | None = None, *, plugins=None,
                 kernels: str | None = None, record: Any = None,
                 moments: Sequence[str] = ()):
        from ..plugins.manager import get_plugin_manager
        pm = plugins or get_plugin_manager()
        reg = pm.registry
        self._args = (settings, plugins, kernels)
        self.model = _model_copy(model, reg)
        _add_moment_inputs(self.model, moments, reg)
        acls = reg.get("analysis", "dynamic")
        own = dict(self.model.settings)
        if own.get("analysis", "dynamic") != "dynamic":
            known = set(getattr(acls, "settings_schema", {})) | {"kernels"}
            own = {k: v for k, v in own.items() if k in known}
        merged = {**own, **dict(settings or {}), "analysis": "dynamic"}
        merged.pop("reporters", None)
        self.system = sysm = self.model.compile(
            kernels=kernels or merged.get("kernels"), plugins=pm,
            dense_limit=None if "MBCORE_DENSE_LIMIT" in os.environ
            else getattr(acls, "dense_limit", None))
        self.analysis = job = acls(sysm, merged)
        if self.model.contacts:
            raise ModelError("impacts", "a Simulation does not handle impacts (contacts) "
                                        "yet: use mbcore.run")
        if self.model.switching:
            raise ModelError("switching", "a Simulation does not follow switching "
                                          "constraint sets yet: use mbcore.run")
        if job.settings.get("stop_when"):
            raise ModelError("settings.stop_when", "a Simulation stops where its caller "
                                                   "stops: remove stop_when")
        self.events: list[tuple[float, str, str]] = []
        self._run = run = job.stepper(self._no_record, self._event)
        self.settings = dict(job.settings)
        self._lock = threading.Lock()
        self._acc_solver = None          # accelerations(): built on first use
        self._inputs_setup()
        y0 = run.initial_state()
        form = run.form
        run.size_buffers()
        self.t = float(run.t0)
        self._y = np.array(y0, dtype=float)
        self._stepper = self._make_stepper(self.t, self._y)
        self.restarts = 0
        self._acc = None                      # the last accepted step before a failure
        #: a partitioning formulation (cp; joint coordinates with loop partitioning)
        #: re-partitions between calls as the dynamic analysis does at its outputs
        self._partitions = hasattr(form, "independent_names")
        self._snap_t = math.nan               # time of run.last (the restart point)
        self._row_t = math.nan                 # time of the evaluated output row
        self._labels = self._column_index()
        self._reporters = self._start_reporters(record, reg)
        self._closed = False
        if self._reporters:
            self._record_row()

    # -- set-up ----------------------------------------------------------------------
    def _make_stepper(self, t: float, y: np.ndarray, python: bool = False):
        """The integrator (:mod:`mbcore.integrate.simulation_loop`): the run's compiled
        loop where it has one (``loop: auto``), else (or ``python``) the Python
        driver's integrator object."""
        run, a = self._run, self.analysis
        form = run.form
        from ..integrate.fastloop import compiled_loop_for
        post = run.post_step if run.projects else None
        jac = run.dae_jacobian if hasattr(form, "jacobian") else None
        kind = None
        if (not python and self.settings.get("loop", "auto") == "auto"
                and run.crhs is not None):
            kind = compiled_loop_for(a.icls, form, post_step=post, jac=jac)
        horizon = float(self.settings["t_end"])
        if horizon <= t:
            horizon = math.inf
        commit = (None if getattr(form, "step_end_in_compiled_loop", False)
                  else self._commit_hook())
        self.loop_kind = "python"
        if kind is not None and kind not in ("fixed", "embedded") and post is None:
            # the compiled multistep / implicit loops (as the run's), kept running
            self.loop = self.loop_kind = "compiled"
            self.loop_kind = kind
            return CompiledLoop(kind, a.icls, form, t, y, horizon, a.integrator_options,
                                jac=jac, max_steps=a.settings["max_steps"],
                                on_commit=commit)
        if kind in ("fixed", "embedded") and post is None:
            # a failing first evaluation (LoopFallback): the Python path names the error
            # (or continues)
            with contextlib.suppress(LoopFallback):
                self.loop, self.loop_kind = "compiled", "rk"
                # (a formulation whose step-end work the compiled loop does in C,
                # di's drift gate, needs no call-back there)
                return CompiledRK(kind, a.icls, form, t, y, horizon, a.integrator_options,
                                  max_steps=a.settings["max_steps"],
                                  on_commit=commit)
        if (jac is None and getattr(run.crhs, "analytic_jac", False)
                and getattr(a.icls, "implicit", False)):
            jac = run.rhs_jacobian
        self.loop = "python"
        return PythonStepper(a.icls, run.rhs, t, y, horizon, a.integrator_options,
                             jac=jac, post_step=post, max_steps=a.settings["max_steps"],
                             on_commit=self._commit_hook())

    def _to_python(self) -> bool:
        """After a compiled loop that could not start (its first call failed before a
        step, :attr:`CompiledLoop.unsupported`): the Python driver from here on, as a
        run hands over; True if so."""
        if not getattr(self._stepper, "unsupported", False):
            return False
        self._stepper = self._make_stepper(self.t, self._y, python=True)
        return True

    def _commit_hook(self):
        """The run's step-end hook (``on_commit``; cp's new partitions at step ends),
        counting the integrator restarts it causes, or None."""
        commit = self._run.commit
        if commit is None:
            return None

        def on_commit(t, y):
            y_c = commit(t, y)
            if y_c is not None:
                self.restarts += 1
            return y_c
        return on_commit

    def _no_record(self, t, data) -> None:
        """The run's ``record``: the row stays in ``run.row`` (read by outputs)."""

    def _event(self, t, kind, message) -> None:
        self.events.append((float(t), kind, message))
        for r in getattr(self, "_reporters", ()):
            r.event(t, kind, message)

    def _column_index(self) -> dict[str, int]:
        """Result column label -> position in the run's flat output row."""
        out, off = {}, 0
        for ch in self.analysis.channels():
            labels = list(ch.labels)
            for k in range(ch.width):
                lab = labels[k] if k < len(labels) else ""
                if not lab or labels.count(lab) > 1:
                    lab = str(k)
                out[f"{ch.name}/{lab}"] = off + k
            off += ch.width
        return out

    def _start_reporters(self, record, reg) -> list:
        if record is None or record is False:
            return []
        from .runner import run_info
        items = record if isinstance(record, (list, tuple)) else [record]
        reps = []
        for r in items:
            if r == "memory" or r is True:
                r = reg.get("reporter", "memory")()
                self._memory = r
            elif isinstance(r, (str, os.PathLike)):
                p = Path(r)
                if not p.parent.exists():
                    raise ModelError("record", f"directory '{p.parent}' does not exist")
                r = reg.get("reporter", "hdf5")(p)
            reps.append(r)
        info = run_info(self.model, "dynamic", self.analysis, self.system)
        for r in reps:
            r.start(info)
        return reps

    # -- inputs ------------------------------------------------------------------------
    def _inputs_setup(self) -> None:
        sysm = self.system
        #: the constant generalised forces of the System (gravity) without inputs
        self._q_const = sysm.constant_forces.copy()
        self._q_input = np.zeros(sysm.n)
        self._inputs: dict[str, float] = {}
        self._input_kind: dict[str, tuple] = {}
        for name, ks in sysm.ftable.input_index.items():
            self._input_kind[name] = ("function", ks)
            self._inputs[name] = float(sysm.functions[ks[0]].value)
        self._parameters: dict[str, Any] = {}     # parameters set so far (raw values)
        self._dirty = False
        self._reassemble = False
        self._w_inputs = 0.0                 # work of the body-force inputs so far
        self._q_mark = None                  # q where the body forces last changed

    @property
    def input_names(self) -> list[str]:
        """The inputs that can be set: the model's ``input`` functions (body
        forces ``<body>.fx``... are accepted too, by name, when first set)."""
        return sorted(self._inputs)

    def _input_spec(self, name: str) -> tuple:
        kind = self._input_kind.get(name)
        if kind is None:
            from ..elements.inputs import parse_input
            try:
                spec = parse_input(self.system, name, f"inputs.{name}",
                                   extra=sorted(self._inputs))
            except ModelError as exc:
                from .simulation_params import find_parameter
                try:
                    find_parameter(self.system, self.model, name)
                except ValueError:
                    raise SimulationError(f"t = {self.t:.9g}: {exc}") from None
                raise SimulationError(f"t = {self.t:.9g}: '{name}' is an element "
                                      f"parameter, not an input: use set_parameter/"
                                      f"get_parameter") from None
            if spec.kind != "force":
                raise SimulationError(
                    f"t = {self.t:.9g}: input '{name}': "
                    + ("a moment on a spatial body depends on its orientation, so it is "
                       "applied by a torque element: declare it when the simulation is "
                       f"made (Simulation(..., moments=['{name}']))"
                       if spec.kind == "moment" else
                       "force-element scales are inputs of the linearisation only (the "
                       "scale multiplies the element's function values after the "
                       "function table, which the compiled loop has no place for); make "
                       "the element's function an input ({input: NAME})"))
            kind = self._input_kind[name] = ("force", spec.index)
            self._inputs[name] = 0.0
        return kind

    def set_input(self, name: str, value: float) -> None:
        """Set input ``name`` from the current time on (a jump if the value changes:
        module docstring)."""
        kind = self._input_spec(name)
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise SimulationError(f"t = {self.t:.9g}: input '{name}': expected a number, "
                                  f"got {value!r}") from None
        if not math.isfinite(v):
            raise SimulationError(f"t = {self.t:.9g}: input '{name}' = {v}: not finite")
        if v == self._inputs[name]:
            return
        self._inputs[name] = v
        if kind[0] == "force":
            self._mark_input_work()
            self._q_input[kind[1]] = v
            self.system.constant_forces[:] = self._q_const + self._q_input
        else:
            self.system.set_input(name, v)
            self._reassemble = self._reassemble or self._drives_constraint(kind[1])
        self._dirty = True
        self._row_t = math.nan

    def set_inputs(self, values: Mapping[str, float]) -> None:
        """:meth:`set_input` for each item."""
        for k, v in values.items():
            self.set_input(k, v)

    def get_input(self, name: str) -> float:
        self._input_spec(name)
        return self._inputs[name]

    # -- parameters ----------------------------------------------------------------------
    def _parameter(self, name: str):
        from .simulation_params import check_formulation, find_parameter
        try:
            slot = find_parameter(self.system, self.model, name)
            check_formulation(slot, self._run.form)
        except ValueError as exc:
            raise SimulationError(f"t = {self.t:.9g}: {exc}") from None
        return slot

    def set_parameter(self, name: str, value: Any) -> None:
        """Set parameter ``name`` = ``<element>.<key>`` of a force or constraint
        element (``"spring.stiffness"``; the key as in the model file) from the
        current time on: validated with the element type's schema, packed again
        and written in place into the compiled evaluators' parameters
        (:mod:`mbcore.analysis.simulation_params`).  A change is a jump (the integrator
        restarts; a constraint's change re-assembles the state); the same packed
        value changes nothing.  :class:`SimulationError` names the parameter and
        the reason for keys that cannot change (bodies, time functions)."""
        from .simulation_params import repack
        slot = self._parameter(name)
        try:
            v, idx, new = repack(slot, value, self.model)
        except (ModelError, ValueError) as exc:
            raise SimulationError(f"t = {self.t:.9g}: parameter '{name}': {exc}") from None
        if new.size and not np.all(np.isfinite(new)):
            raise SimulationError(f"t = {self.t:.9g}: parameter '{name}' = {value!r}: the "
                                  f"packed parameters are not finite")
        el = slot.element
        el.values[slot.key] = v
        el.raw[slot.key] = value            # copy() and the stored model see it
        self._parameters[name] = value
        if not idx.size:
            return
        with self._lock:
            slot.par[slot.row, idx] = new   # in place: the evaluators hold this array
            self._dirty = True
            self._reassemble = self._reassemble or slot.constraint
            self._row_t = math.nan

    def get_parameter(self, name: str) -> Any:
        """The current (validated) value of parameter ``name`` (:meth:`set_parameter`)."""
        slot = self._parameter(name)
        return slot.element.values[slot.key]

    def _drives_constraint(self, ks) -> bool:
        """Whether function rows ``ks`` feed a constraint (a driver)."""
        used = getattr(self, "_constraint_functions", None)
        if used is None:
            used = set()
            for g in getattr(self.system, "groups", ()):
                fidx = getattr(g, "fidx", None)
                if fidx is not None:
                    used.update(int(x) for x in np.asarray(fidx).ravel())
            self._constraint_functions = used
        return any(k in used for k in ks)

    def _mark_input_work(self) -> None:
        """Close the interval of constant body-force inputs: its work b . (q - q_mark)
        (exact for a constant generalised force)."""
        q = self._q()
        if self._q_mark is not None:
            self._w_inputs += float(self._q_input @ (q - self._q_mark))
        self._q_mark = q.copy()

    def _input_work(self, q: np.ndarray) -> float:
        if self._q_mark is None:
            return 0.0
        return self._w_inputs + float(self._q_input @ (q - self._q_mark))

    # -- time ----------------------------------------------------------------------------
    def _apply_jump(self) -> None:
        """Restart the integrator at the current time from the current state."""
        form, sysm, t = self._run.form, self.system, self.t
        if self._reassemble:                 # a driver moved: nearest consistent state
            from ..solve.assembly import assemble
            q, qd = self._q(), self._qd()
            rep = assemble(sysm, q, qd, t)
            yf, _ = form.initialize(rep.q, rep.qd, t)
            self._y = np.concatenate([yf, [self._y[-1]]])
            self._event(t, "assembly", f"input jump: {rep.summary()}")
        self._restart_stepper()
        self._dirty = self._reassemble = False
        self._snap_t = math.nan

    def _restart_stepper(self) -> None:
        """The integrator starts again from the current (t, y)."""
        self._restart_stepper_at(self.t, self._y)

    def _restart_stepper_at(self, t: float, y: np.ndarray) -> None:
        """The integrator starts again from (t, y) (the current state, or a step's
        end ahead of it)."""
        run = self._run
        f = np.zeros(y.size)
        crhs = run.crhs
        if crhs is None or crhs.eval(t, y, f) != 0:
            f = np.array(run.rhs(t, y))          # the named error, or its value
        self._stepper.restart(t, y, f)
        if isinstance(self._stepper, CompiledRK):
            self._stepper.counts[2] += 1
        self.restarts += 1
        self._row_t = math.nan

    # -- re-partitioning and removed rows (as the dynamic analysis) ------------------------
    def _snapshot(self) -> tuple:
        """(q, qd, qdd) at the current time from the formulation; for a partitioning
        formulation also the restart point of the dynamic analysis (``run.last``)."""
        run, form = self._run, self._run.form
        q, qd, qdd, _ = (np.array(x) for x in form.outputs(self.t, self._y[:form.size]))
        if self._partitions:
            run.last.update(t=self.t, q=q, qd=qd, W=float(self._y[-1]))
            self._snap_t = self.t
        return q, qd, qdd

    def _settle(self) -> None:
        """At the end of a call, what the dynamic analysis does at an output: the
        constraint rows removed as redundant must hold (:mod:`mbcore.solve.redundancy`),
        and a partitioning formulation takes a new partition when a fresh one is
        much better than its current one (``wants_repartition``)."""
        removed = self.analysis.removed_rows
        if not self._partitions and removed is None:
            return
        q, qd, qdd = self._snapshot()
        if removed is not None:
            removed.check(self.t, q, qd, qdd)
            why = removed.degraded(self.t, q)
            if why is not None and self.analysis.reselect_rows(q, self.t, why, self._event):
                # the kept rows turned nearly dependent: new rows, restart here
                self._run.last.update(t=self.t, q=q, qd=qd, W=float(self._y[-1]))
                self._repartition("redundant rows chosen again")
                return
        if self._partitions:
            reason = self._run.form.wants_repartition()
            # a formulation with a step-end hook (cp) takes its new partition at the
            # end of the step containing this time, when the integration goes on
            # (the steppers' on_commit, as the run's loops)
            if reason and self._run.commit is None:
                self._repartition(reason)

    def _repartition(self, reason: str) -> None:
        """A new partition at ``run.last`` (the current time) and the integrator
        restarted there (the dynamic analysis' restart; a ``repartition`` event)."""
        run = self._run
        t, y = self.analysis.restart(run.last, reason, self._event)
        self.t, self._y = float(t), np.array(y, dtype=float)
        self._restart_stepper()
        self._snap_t = math.nan

    def _advance(self, go):
        """``go()`` (the integrator's advance); when the formulation cannot continue
        (:class:`~mbcore.solve.formulation.RestartRequest`: a partition became singular)
        re-partition at the current time and try again, at most twice at one time
        (as the dynamic analysis), else :class:`~mbcore.errors.AnalysisError`."""
        for attempt in range(3):
            if self._partitions and self._snap_t != self.t:
                self._snapshot()              # the restart point, while it is good
            self._acc = None
            try:
                return go()
            except RestartRequest as exc:
                if attempt == 2 or not self._partitions:
                    explain = getattr(self._run.form, "explain_failure", None)
                    if explain is not None and self._partitions:
                        explain()             # a named cause it foresaw (as the run)
                    raise AnalysisError(f"formulation '{self._run.form.name}' cannot "
                                        f"continue: {exc.reason}", self.t) from None
                if self._run.commit is not None:
                    # as the run: a new partition at the last accepted step
                    acc = self._acc if self._acc is not None else self._stepper.accepted()
                    t, y = self.analysis.restart_at(*acc, exc.reason, self._event)
                    self._restart_stepper_at(float(t), np.array(y, dtype=float))
                else:
                    self._repartition(exc.reason)
        raise AssertionError("unreachable")    # pragma: no cover

    def _check_time(self, t: float, what: str) -> float:
        try:
            t = float(t)
        except (TypeError, ValueError):
            raise SimulationError(f"{what}: expected a time, got {t!r}") from None
        if not math.isfinite(t):
            raise SimulationError(f"{what}: time {t} is not finite (t = {self.t:.9g})")
        if t < self.t:
            raise SimulationError(f"{what}: t = {t!r} is before the current time "
                                  f"t = {self.t!r}; a simulation only goes forward (use "
                                  f"get_state/set_state or copy() to go back)")
        return t

    def advance_to(self, t: float) -> "Simulation":
        """Integrate to time ``t`` (>= :attr:`t`); the state at ``t`` comes from the
        dense output of the integrator step containing it."""
        target = self._check_time(t, "advance_to")
        if target == self.t:
            return self
        with self._lock:
            if self._dirty:
                self._apply_jump()

            def go():
                try:
                    out = self._stepper.advance(target)
                except StepBudgetError as exc:   # it stays where the budget ran out
                    self._stop_at(*exc.state)
                    raise
                if isinstance(out, tuple) and self._to_python():
                    out = self._stepper.advance(target)   # the loop could not start
                if isinstance(out, tuple):       # the compiled loop met a failing evaluation
                    self._acc = out               # (the last accepted step)
                    out = self._python_to(*out, target)
                return out
            out = self._advance(go)
            self._y = np.asarray(out, dtype=float)
            self.t = target
            self._row_t = math.nan
            self._settle()
            if self._reporters:
                self._record_row()
            self._raise_held()
        return self

    def _raise_held(self) -> None:
        """A signal the compiled loop's call held until it was done (its state is the
        simulation's now): raised here."""
        held = getattr(self._stepper, "pending", None)
        if held is not None:
            self._stepper.pending = None
            raise held

    def _stop_at(self, t: float, y: np.ndarray) -> None:
        """After a StepBudgetError: the simulation is at the last accepted step (t, y);
        the compiled loop restarts there (a Python integrator object is there)."""
        if isinstance(self._stepper, (CompiledRK, CompiledLoop)):
            self._stepper.restart(t, y, np.array(self._run.rhs(t, y)))
            self.restarts += 1
        self._y, self.t = np.array(y, dtype=float), float(t)
        self._row_t = math.nan
        if self._reporters:
            self._record_row()

    def step(self) -> "Simulation":
        """Advance by one integrator step: to the end of the current step (if the
        current time is inside it), else by a new step."""
        with self._lock:
            if self._dirty:
                self._apply_jump()

            def go():
                st = self._stepper
                if st.ts > self.t:
                    return st.ts, np.array(st.ys if isinstance(st, (CompiledRK,
                                                                    CompiledLoop))
                                           else st.integ.y)
                t, y, ok = st.step_end()
                if not ok and self._to_python():   # the compiled loop cannot start
                    t, y, ok = self._stepper.step_end()
                if not ok:                   # the compiled loop met a failing evaluation
                    self._acc = (t, y)
                    t = np.nextafter(t, math.inf)
                    y = self._python_to(t, y, t)
                return t, y
            t, y = self._advance(go)
            self._y, self.t = np.asarray(y, dtype=float), float(t)
            self._row_t = math.nan
            self._settle()
            if self._reporters:
                self._record_row()
            self._raise_held()
        return self

    def _python_to(self, t0: float, y0: np.ndarray, target: float) -> np.ndarray:
        """From (t0, y0) to ``target`` on the Python driver (after a failing
        compiled evaluation: it raises the named error, or continues, e.g. with
        least-squares multipliers), then restart there."""
        from ..integrate import integrate
        a = self.analysis
        res = integrate(a.icls, self._run.rhs, (t0, target), y0, t_out=[target],
                        store=True, max_steps_per_output=a.settings["max_steps"],
                        on_commit=self._commit_hook(), **a.integrator_options)
        y = np.array(res.y[-1])
        self._stepper.restart(target, y, np.array(self._run.rhs(target, y)))
        self.restarts += 1
        return y

    # -- outputs ---------------------------------------------------------------------------
    def _q(self) -> np.ndarray:
        form, n = self._run.form, self.system.n
        if form.full_state and form.size == 2 * n:
            return self._y[:n]
        return np.array(form.outputs(self.t, self._y[:form.size])[0])

    def _qd(self) -> np.ndarray:
        form, n = self._run.form, self.system.n
        if form.full_state and form.size == 2 * n:
            return self._y[n:2 * n]
        return np.array(form.outputs(self.t, self._y[:form.size])[1])

    def _row(self) -> np.ndarray:
        """The output row at the current time (every recorded channel), evaluated
        once per time and input change."""
        run = self._run
        if self._row_t != self.t:
            st = self._stepper.statistics()
            run.istat[:] = st
            run.base[:] = 0.0
            run.output(self.t, self._y)
            row = run.row
            if "energy" in row and self._q_mark is not None:
                # body-force inputs sit in the System's constant forces: their
                # "potential" -b.q is taken out and their work added
                q = np.array(row["q"]) if "q" in row else self._q()
                e = row["energy"]
                e[1] += float(self._q_input @ q)
                e[2] = e[0] + e[1]
                e[3] += self._input_work(q)
                e[4] = e[2] - e[3]
            self._row_t = self.t
        return run.row.flat

    def _index(self, name: str) -> int:
        i = self._labels.get(name)
        if i is None:
            import difflib
            close = difflib.get_close_matches(name, list(self._labels), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            chans = ", ".join(c.name for c in self.analysis.channels())
            raise SimulationError(f"t = {self.t:.9g}: unknown output '{name}'{hint}: "
                                  f"expected '<channel>/<label>' of the channels "
                                  f"{chans} (e.g. 'q/{self.system.coordinate_names[0]}')")
        return i

    def outputs(self, names: Sequence[str] | str) -> np.ndarray | float:
        """The values of the result columns ``names`` at the current time (one name:
        a float).  ``q/...`` and ``qd/...`` of the full-state formulations (di, cs)
        on the compiled right-hand side are read from the state without evaluating
        the other channels."""
        single = isinstance(names, str)
        keys = [names] if single else list(names)
        idx = [self._index(k) for k in keys]
        n = self.system.n
        if (self._row_t != self.t and self._direct and all(i < 2 * n for i in idx)):
            vals = self._y[idx]
        else:
            vals = self._row()[idx]
        return float(vals[0]) if single else np.array(vals)

    @property
    def _direct(self) -> bool:
        """Whether the row's q and qd are y's first 2n values, as the run records
        them: q then qd the first channels, a full-state formulation whose outputs
        the compiled right-hand side gives from y unchanged (no projection, no
        normalisation by the formulation's own outputs)."""
        d = getattr(self, "_direct_flag", None)
        if d is None:
            run, n = self._run, self.system.n
            lay = run.row.layout
            d = self._direct_flag = bool(
                len(lay) >= 2 and lay[0][0] == "q" and lay[1][0] == "qd"
                and run.form.full_state and run.form.size == 2 * n and not run.projects
                and run.crhs is not None and getattr(run.crhs, "cartesian", True))
        return d

    def __getitem__(self, name: str) -> float:
        """An output column (``"q/crank.phi"``) or, for a name without ``/``, an
        input's current value."""
        if name in self._labels:
            return self.outputs(name)
        if name in self._inputs or "/" not in name:    # inputs have no channel part
            return self.get_input(name)
        return self.outputs(name)            # raises the unknown-output error

    def __setitem__(self, name: str, value: float) -> None:
        self.set_input(name, value)

    @property
    def columns(self) -> list[str]:
        """Every output label (as :meth:`mbcore.Result.columns`)."""
        return list(self._labels)

    @property
    def stats(self) -> dict[str, float]:
        """Integrator statistics: steps, rejected steps and right-hand-side
        evaluations of the integration (as a run counts them), restarts (input
        jumps, set_state), and the evaluations spent redoing a step for a target
        inside it (compiled loop)."""
        h, order, steps, rej, nfev = self._stepper.statistics()
        out = {"steps": int(steps), "rejected": int(rej), "rhs_evaluations": int(nfev),
               "restarts": self.restarts, "step_size": float(h), "order": float(order),
               "loop": self.loop, "loop_kind": self.loop_kind}
        if isinstance(self._stepper, CompiledRK):
            out["replay_steps"] = int(self._stepper.counts[3])
            out["replay_evaluations"] = int(self._stepper.counts[4])
        return out

    # -- state -------------------------------------------------------------------------
    def get_state(self) -> SimulationState:
        """A snapshot (copies): :class:`SimulationState`."""
        q, qd = np.array(self._q()), np.array(self._qd())
        st = self._stepper
        return SimulationState(
            t=self.t, q=q, qd=qd, W=float(self._y[-1]) + self._input_work(q),
            y=self._y.copy(), inputs=dict(self._inputs),
            integrator=st.get() if isinstance(st, (CompiledRK, CompiledLoop)) else None,
            extra={"w_inputs": self._w_inputs, "parameters": dict(self._parameters),
                   "q_mark": None if self._q_mark is None else self._q_mark.copy(),
                   "restarts": self.restarts, "dirty": self._dirty})

    def set_state(self, state: SimulationState) -> None:
        """Continue from ``state`` (of this simulation or of one of the same model):
        inputs, state and the integrator's continuation (module docstring)."""
        if state.y.shape != self._y.shape:
            raise SimulationError(f"t = {self.t:.9g}: set_state: the state has "
                                  f"{state.y.size} values, this simulation "
                                  f"{self._y.size}")
        for k, v in state.extra.get("parameters", {}).items():
            self.set_parameter(k, v)
        with self._lock:
            for k, v in state.inputs.items():
                self.set_input(k, v)
            self.t, self._y = float(state.t), state.y.copy()
            self._w_inputs = float(state.extra.get("w_inputs", 0.0))
            qm = state.extra.get("q_mark")
            self._q_mark = None if qm is None else np.array(qm)
            st = self._stepper
            if isinstance(st, CompiledRK) and state.integrator is not None \
                    and "loop" not in state.integrator:
                st.set(state.integrator)
                self._dirty = bool(state.extra.get("dirty", False))
                self.restarts = int(state.extra.get("restarts", self.restarts))
            elif (isinstance(st, CompiledLoop) and state.integrator is not None
                  and st.set(state.integrator)):
                self._dirty = bool(state.extra.get("dirty", False))
                self.restarts = int(state.extra.get("restarts", self.restarts))
            else:
                self._dirty = True
            self._reassemble = False
            self._row_t = math.nan
            self._snap_t = math.nan

    def set_coordinates(self, q: Iterable[float] | None = None,
                        qd: Iterable[float] | None = None, *, project: bool = True,
                        hold: Sequence[str] = (), tol: float = 1e-8) -> None:
        """Set positions and/or velocities at the current time (the integrator
        restarts).  ``project=True``: the nearest consistent state (assembly, the
        coordinates in ``hold`` kept); ``False``: they must satisfy the constraints
        (``max abs(Phi)`` and ``max abs(Phi_q qd - nu)`` at most ``tol``, else
        :class:`SimulationError` naming the worst equation)."""
        from ..solve.assembly import assemble
        sysm, t, form = self.system, self.t, self._run.form
        q = np.array(self._q() if q is None else q, dtype=float)
        qd = np.array(self._qd() if qd is None else qd, dtype=float)
        if q.shape != (sysm.n,) or qd.shape != (sysm.n,):
            raise SimulationError(f"t = {t:.9g}: set_coordinates: q and qd need "
                                  f"{sysm.n} values ({', '.join(sysm.coordinate_names)})")
        if project and sysm.m:
            rep = assemble(sysm, q, qd, t, hold=list(hold))
            q, qd = rep.q, rep.qd
        elif sysm.m:
            res = np.concatenate([sysm.phi(q, t), sysm.jacobian(q, t) @ qd - sysm.nu(q, t)])
            k = int(np.argmax(np.abs(res)))
            if abs(res[k]) > tol:
                names = list(sysm.constraint_names)
                which = ("position " if k < sysm.m else "velocity ") + names[k % sysm.m]
                raise SimulationError(f"t = {t:.9g}: set_coordinates: the state violates "
                                      f"the {which} equation by {res[k]:.3g} (use "
                                      f"project=True)")
        with self._lock:
            self._mark_input_work()
            yf, _ = form.initialize(q, qd, t)
            self._y = np.concatenate([yf, [self._y[-1]]])
            self._q_mark = q.copy() if self._q_mark is not None else None
            self._dirty = True
            self._row_t = math.nan
            self._snap_t = math.nan

    def accelerations(self, q: Iterable[float] | None = None,
                      qd: Iterable[float] | None = None, t: float | None = None):
        """The accelerations and Lagrange multipliers at the current state, or at a
        given ``q``/``qd``/``t`` (each defaults to the current one), with the inputs
        and parameters set now: a :class:`mbcore.State` (copies; ``qdd`` and ``lam``
        by the coordinate and constraint names of :attr:`system`).  Evaluates only:
        the simulation's state and integrator are not changed.  Every formulation
        gives the same accelerations at a consistent state, so this is the
        reference for checks and for controllers (Nikravesh (1988), Eqs. 9.49-9.55)."""
        from ..solve.dynamics import AccelerationSolver, accelerations
        from ..errors import AnalysisError
        if self._acc_solver is None:
            self._acc_solver = AccelerationSolver(self.system)
        with self._lock:
            q = np.array(self._q() if q is None else q, dtype=float)
            qd = np.array(self._qd() if qd is None else qd, dtype=float)
            t = self.t if t is None else t
            try:
                return accelerations(self.system, q, qd, t, solver=self._acc_solver)
            except AnalysisError as exc:
                raise SimulationError(f"t = {float(t):.9g}: {exc}") from None

    def copy(self) -> "Simulation":
        """An independent simulation (its own compiled System) at the same state,
        inputs and integrator continuation (model-predictive use)."""
        settings, plugins, kernels = self._args
        # the model copy has the parameters set so far and the moment elements
        other = Simulation(self.model, settings, plugins=plugins, kernels=kernels)
        other.set_state(self.get_state())
        return other

    # -- records ---------------------------------------------------------------------
    def _record_row(self) -> None:
        self._row()
        for r in self._reporters:
            r.record(self.t, self._run.row)

    def result(self):
        """The rows recorded in memory (``record="memory"``) so far."""
        mem = getattr(self, "_memory", None)
        if mem is None:
            raise SimulationError("result(): nothing recorded in memory (record='memory')")
        return mem.result()

    def close(self, status: str = "finished", reason: str = "") -> None:
        """Finish the recording (the HDF5 file is complete); idempotent."""
        if self._closed:
            return
        self._closed = True
        stats = {k: v for k, v in self.stats.items() if isinstance(v, (int, float))}
        for r in self._reporters:
            r.finish(status, reason, stats)

    def __enter__(self) -> "Simulation":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
        else:
            self.close("failed", f"{type(exc).__name__}: {exc}")

    def __repr__(self) -> str:
        return (f"<Simulation '{self.model.name}' t={self.t:.6g} loop={self.loop} "
                f"integrator={self.analysis.icls.name}>")
