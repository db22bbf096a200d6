"""Forward dynamic analysis (Nikravesh (1988), Ch. 10, the DAP
program; §13.3, algorithm DI-4; §13.3.1).

The initial state is corrected to the nearest consistent one (assembly), a
formulation (``di``, ``cs``...) turns the equations of motion into ``y' = f(t, y)``
and an integrator plugin advances it; results are recorded at the output times
(by dense output, independent of the internal steps): q, qd, qdd, lam, reactions,
force-element outputs, energies with the work of the non-conservative forces, and
the constraint violations.
"""
from __future__ import annotations

import difflib
import math
import time
from typing import TYPE_CHECKING

import numpy as np

from mbcore.analysis.base import Analysis, element_channels
from mbcore.analysis.joint_channels import JointChannel, joint_channel
from mbcore.solve.assembly import assemble
from mbcore.solve.drift import drift_bound
from mbcore.errors import AnalysisError, ModelError, SingularJacobianError
from mbcore.integrate.fastloop import compiled_loop_for, run_compiled
from mbcore.integrate.multistep_loop import STEPLOOP_KINDS
from mbcore.solve.formulation import Formulation, RestartRequest
from mbcore.analysis.interrupts import CRITICAL
from mbcore.plugins.manager import registry
from mbcore.results.reporting import Channel, Row
from mbcore.elements.schema import Param, names as _names

from .progress import progress as _progress

if TYPE_CHECKING:
    from mbcore.solve.redundancy import RemovedRows


class DynamicAnalysis(Analysis):
    name = "dynamic"
    #: writes checkpoints and resumes from them (mbcore.analysis.checkpoint)
    checkpoints = True
    description = "forward dynamics: formulation (di, cs, ...) + integrator, streamed output"
    settings_schema = {
        "t_start": Param("number", "initial time", default=0.0, unit="time"),
        "t_end": Param("number", "final time", default=1.0, unit="time"),
        "output_step": Param("number", "output interval", default=0.01, positive=True,
                             unit="time"),
        "integrator": Param("string", "integrator plugin name", default="dopri5"),
        "step": Param("number", "step of fixed-step integrators (default: output_step)",
                      required=False, positive=True, unit="time"),
        "rtol": Param("number", "relative tolerance (adaptive integrators)", default=1e-8,
                      positive=True),
        "atol": Param("number", "absolute tolerance (adaptive integrators)", default=1e-10,
                      positive=True),
        "max_step": Param("number", "largest step (adaptive integrators)", required=False,
                          positive=True, unit="time"),
        "max_steps": Param("count", "step budget: most integrator steps between two "
                           "outputs (as CVODE's mxstep); a run needing more stops with a "
                           "StepBudgetError naming the time; 0: no budget",
                           default=100_000),
        "formulation": Param("string", "formulation plugin name", default="cs"),
        "alpha": Param("number", "Baumgarte alpha (cs)", required=False, unit="1/time"),
        "independent": Param("string", "initial independent coordinates (cp)",
                             required=False),
        "repartition_factor": Param("number", "re-partition threshold (cp)", required=False,
                                    positive=True),
        "impact_resolution": Param("choice", "several contacts at gap 0 at an impact: "
                                   "'simultaneous' (one impact map of all that approach or "
                                   "touch) or 'sequential' (pairwise, the fastest approach "
                                   "first, until none approaches)", default="simultaneous",
                                   choices=("simultaneous", "sequential")),
        "stop_when": Param("string", "stop condition(s) on coordinates or velocities, e.g. "
                           "'ball.y < 0' or 'qd:crank.phi > 10; slider.x >= 0.5'",
                           required=False),
        "rank_deficiency": Param("choice", "a rank-deficient Jacobian during the run: stop "
                                 "(error) or pass with minimum-norm multipliers",
                                 default="error", choices=("error", "least_squares")),
        "beta": Param("number", "Baumgarte beta (cs)", required=False, unit="1/time"),
        "assemble": Param("bool", "correct the initial state to the nearest consistent one",
                          default=True),
        "hold": Param("names", "coordinates kept at their estimates during assembly, "
                                "comma-separated or a list (e.g. 'crank.phi')",
                      required=False),
        "integrator_options": Param("mapping", "further options of the integrator by "
                                    "the names of its options table (e.g. rk2: {a: 0.5}, "
                                    "ab: {order: 3}); step, rtol, atol and max_step are "
                                    "settings of their own", required=False),
        "formulation_options": Param("mapping", "further settings of the formulation, "
                                     "by the names of its settings table (e.g. penalty: "
                                     "{omega: 20, projection: false})", required=False),
        "record": Param("names", "channels to record, comma-separated or a list (default: all): "
                        "q, qd, qdd, lam, reactions, reactions_local, forces, points, "
                        "angular (spatial bodies), joints (relative joint coordinates), energy, "
                        "violation, integrator; fewer channels make each output "
                        "row cheaper", required=False),
        "output_rows": Param("choice", "how the compiled loop's output rows are computed: "
                             "'block' evaluates the channels for many rows at once "
                             "(mbcore.system.output_rows), each row's evaluation at "
                             "its state in one compiled call (stiff, ggl: their "
                             "outputs at the block's hand-over; the row-by-row path: "
                             "its joints channel for blocks of rows); 'block_python' "
                             "the same with that evaluation by Python calls; "
                             "'reference' row by row", default="block",
                             choices=("block", "block_python", "reference")),
        "loop": Param("choice", "integration loop: 'auto' runs explicit Runge-Kutta "
                      "methods, abm, bdf (also with ggl), implicit_euler and trapezoid on "
                      "the compiled right-hand side in compiled code; "
                      "'python' forces the Python driver", default="auto",
                      choices=("auto", "python")),
    }

    #: settings passed on to the formulation (also as settings.formulation_options)
    FORMULATION_KEYS = ("alpha", "beta", "independent", "repartition_factor")

    @classmethod
    def check_settings(cls, s, path):
        if s["t_end"] <= s["t_start"]:
            raise ModelError(f"{path}.t_end", f"t_end ({s['t_end']:g}) must be after t_start "
                                              f"({s['t_start']:g})")
        cls._record_names(s.get("record"), f"{path}.record")

    #: integrator options that are settings of their own (not in integrator_options)
    OWN_INTEGRATOR_KEYS = ("step", "rtol", "atol", "max_step")

    @classmethod
    def _integrator_options(cls, s, icls, path="settings") -> dict:
        """``settings.integrator_options`` checked against the options table of the
        integrator class ``icls`` (ModelError naming
        ``settings.integrator_options.<key>``), converted by the options' checks."""
        given = s.get("integrator_options") or {}
        where = f"{path}.integrator_options"
        spec = getattr(icls, "options", {})
        out = {}
        for k, v in given.items():
            if k in cls.OWN_INTEGRATOR_KEYS:
                raise ModelError(f"{where}.{k}", f"give it as {path}.{k}")
            if k not in spec or k in cls.FORMULATION_OPTIONS:
                valid = sorted(o for o in spec if o not in cls.OWN_INTEGRATOR_KEYS
                               and o not in cls.FORMULATION_OPTIONS)
                close = difflib.get_close_matches(k, valid, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise ModelError(f"{where}.{k}", f"not an option of integrator "
                                 f"'{s['integrator']}'{hint} (its options: "
                                 f"{', '.join(valid) if valid else 'none'})")
            check = spec[k].check
            try:
                out[k] = check(v, 0) if check is not None and v is not None else v
            except ValueError as exc:
                raise ModelError(f"{where}.{k}", f"integrator '{s['integrator']}': "
                                 f"{exc}") from None
        return out

    @classmethod
    def check_plugins(cls, s, reg, path):
        """The integrator and the formulation are installed, the formulation takes
        the settings given to it (its settings table) and a DAE formulation gets an
        integrator with a mass matrix."""
        for kind in ("integrator", "formulation"):
            if not reg.has(kind, s[kind]):
                raise ModelError(f"{path}.{kind}", reg.unknown_message(kind, s[kind]))
        fcls = reg.get("formulation", s["formulation"])
        opts, where = cls._formulation_options(s, fcls, path)
        if hasattr(fcls, "validate_settings"):        # a mbcore.solve.formulation.Formulation
            fcls.validate_settings(opts, where=where)
        icls = reg.get("integrator", s["integrator"])
        cls._integrator_options(s, icls, path)
        if getattr(fcls, "needs_mass", False) and "mass" not in getattr(icls, "options", {}):
            raise ModelError(f"{path}.integrator", f"formulation '{fcls.name}' is a DAE: it "
                             f"needs an integrator with a mass matrix (bdf or radau), not "
                             f"'{s['integrator']}'")
        dae_forms = getattr(icls, "DAE_FORMULATIONS", None)
        if getattr(fcls, "needs_mass", False) and dae_forms is not None \
                and fcls.name not in dae_forms:
            which = (f"the DAE of formulation {' or '.join(dae_forms)} only" if dae_forms
                     else "no DAE formulation (use di, cs, projection or penalty)")
            raise ModelError(f"{path}.integrator", f"integrator '{icls.name}' integrates "
                             f"{which}, not '{fcls.name}'; use bdf with '{fcls.name}'")
        rmin = getattr(icls, "DAE_RTOL_MIN", None)
        if (getattr(fcls, "needs_mass", False) and rmin is not None
                and s.get("rtol") is not None and s["rtol"] < rmin):
            raise ModelError(f"{path}.rtol", f"formulation '{fcls.name}' is a DAE: "
                             f"'{icls.name}' keeps its global error within 10x the "
                             f"tolerance down to rtol = {rmin:g} (below, the Newton "
                             f"iteration on the constraint rows works in round-off); "
                             f"rtol = {s['rtol']:g} would not be met: use rtol >= "
                             f"{rmin:g}, or formulation di, cs or projection (with "
                             f"dop853 for tight tolerances)")

    @classmethod
    def _formulation_options(cls, s, fcls, path="settings") -> tuple[dict, dict]:
        """(options, key path of each) of the formulation ``fcls``: the formulation
        keys of the settings and ``settings.formulation_options``."""
        fopts, where = {}, {}
        for k in cls.FORMULATION_KEYS:
            if s.get(k) is not None:
                if k not in fcls.settings_schema:
                    raise ModelError(f"{path}.{k}", f"not used by formulation "
                                                    f"'{s['formulation']}'")
                fopts[k], where[k] = s[k], f"{path}.{k}"
        for k, v in (s.get("formulation_options") or {}).items():
            if k in fopts:
                raise ModelError(f"{path}.formulation_options.{k}",
                                 f"also given as {path}.{k}: give it once")
            fopts[k], where[k] = v, f"{path}.formulation_options.{k}"
        return fopts, where

    def __init__(self, system, settings=None):
        super().__init__(system, settings)           # + check_plugins
        s = self.settings
        # the System's registry: integrators and formulations of the plugins the run
        # was given (``mbcore.run(..., plugins=pm)``), not only the process-wide ones
        reg = getattr(system, "registry", None) or registry()
        fcls = reg.get("formulation", s["formulation"])
        fopts, _ = self._formulation_options(s, fcls)
        self.formulation = fcls(system, fopts)
        self.formulation.solver.rank_deficiency = s["rank_deficiency"]
        self.icls = reg.get("integrator", s["integrator"])
        opts = {}
        names = getattr(self.icls, "options", {})
        if "step" in names:
            opts["step"] = s["step"] if s.get("step") else s["output_step"]
        for k in ("rtol", "atol", "max_step"):
            if k in names and s.get(k) is not None:
                opts[k] = s[k]
        opts.update(self._integrator_options(s, self.icls))
        # the formulation's margin: it asks the integrator for ``tolerance_factor``
        # times the tolerances (cp, stiff)
        factor = getattr(self.formulation, "tolerance_factor", 1.0)
        for k in ("rtol", "atol"):
            if k in opts and factor != 1.0:
                opts[k] = opts[k] * factor
        self.formulation.set_tolerances(opts.get("rtol"), opts.get("atol"))
        if hasattr(self.formulation, "set_output_step"):     # (di, cs: the drift test)
            self.formulation.set_output_step(float(s["output_step"]))
        if getattr(fcls, "needs_mass", False):
            opts.update(self._dae_options())
        elif ("positions" in names and "positions" not in opts
              and self.formulation.full_state):
            # y = [q, qd, work]: a second-order integrator (verlet, genalpha) is told
            # where the velocities are
            opts["positions"] = system.n
        if ("lie_group" in names and "lie_group" not in opts
                and callable(getattr(self.formulation, "lie_group", None))):
            # a Lie-group integrator (rkmk4) is told which components of y are unit
            # quaternions by the formulations that have them (di_omega)
            layout = self.formulation.lie_group()
            if layout is not None:
                opts["lie_group"] = layout
        if system.model.switching:
            if self.formulation.name not in SWITCHING_FORMULATIONS:
                raise ModelError("settings.formulation", f"switching constraint sets: "
                                 f"formulation '{self.formulation.name}' does not follow a "
                                 f"changing constraint set; use "
                                 f"{' or '.join(SWITCHING_FORMULATIONS)}")
            if system.model.contacts:
                raise ModelError("impacts", "impacts and switching constraint sets in one "
                                            "model are not supported yet")
        if ((system.model.contacts or system.model.switching) and "max_step" in names
                and s.get("max_step") is None):
            # events are checked at step ends: a contact segment (extent) could be
            # entered and left inside one long step of a smooth flight
            opts["max_step"] = s["output_step"]
        self.integrator_options = opts

    #: the analysis follows switching constraint sets (mbcore.solve.switching)
    handles_switching = True

    #: integrator options the formulation sets (a DAE form's mass, error weights,
    #: Newton system and Jacobian refresh), never the model file
    FORMULATION_OPTIONS = ("mass", "h_power", "newton_system", "jacobian_update")

    #: every channel of the dynamic analysis (``settings.record`` picks a subset)
    CHANNELS = ("q", "qd", "qdd", "lam", "reactions", "reactions_local", "forces", "points",
                "angular", "joints", "energy", "violation", "integrator")

    def _recorded(self) -> set[str]:
        return self._record_names(self.settings.get("record"))

    @classmethod
    def _record_names(cls, spec, path: str = "settings.record") -> set[str]:
        """The channels ``settings.record`` names (all when not given)."""
        if not spec:
            return set(cls.CHANNELS)
        names = _names(spec, path)
        for c in names:
            if c not in cls.CHANNELS:
                close = difflib.get_close_matches(c, cls.CHANNELS, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise ModelError(path, f"unknown channel '{c}' ({hint}channels: "
                                       f"{', '.join(cls.CHANNELS)})")
        if not names:
            raise ModelError(path, "no channel named")
        return set(names)

    def expected_rows(self) -> int:
        """The output grid from t_start to t_end (:meth:`_Run.output_times`) and one
        row to spare (an event's)."""
        s = self.settings
        return int(math.floor((s["t_end"] - s["t_start"]) / s["output_step"] + 1e-9)) + 3

    def channels(self):
        want = self._recorded()
        return [c for c in self._all_channels() if c.name in want]

    def _all_channels(self):
        s = self.system
        ch = [Channel("q", list(s.coordinate_names), "coordinates"),
              Channel("qd", list(s.coordinate_names), "velocities"),
              Channel("qdd", list(s.coordinate_names), "accelerations"),
              Channel("lam", list(s.constraint_names),
                      "Lagrange multipliers (reaction = +Phi_q^T lam)"),
              Channel("reactions", list(s.reaction_labels),
                      "generalised reaction of each element on each of its bodies")]
        ch += element_channels(s)
        ch += joint_channel(s)
        ch.append(Channel("energy", ["kinetic", "potential", "total", "work_nc", "balance"],
                          "T, V, T + V, work of non-conservative and constraint forces "
                          "since t_start, and T + V - work_nc (constant for exact solutions)"))
        ch.append(Channel("violation", ["position", "velocity"],
                          "max |Phi| and max |Phi_q qd - nu|"))
        ch.append(Channel("integrator", ["step_size", "order", "steps", "rejected",
                                         "rhs_evaluations"],
                          "last accepted step size and order; cumulative steps, rejected "
                          "steps and right-hand-side evaluations"))
        return ch

    # ------------------------------------------------------------------------
    def run(self, record, event, progress=False):
        """One forward dynamic run, as named stages (see :class:`_Run`, read top to
        bottom): output times -> consistent initial state -> integration segments
        (each: formulation right-hand side -> integrator step -> outputs ->
        reporters) separated by restarts, impacts and stop conditions."""
        _Run(self, record, event, progress).execute()

    def stepper(self, record, event) -> "_Run":
        """The stages of a run without its loop (:class:`_Run`: initial state,
        right-hand side, outputs), for a caller that drives the integration itself
        (:class:`mbcore.Simulation`, docs/embedding.md)."""
        return _Run(self, record, event, False)

    #: partitions or formulation restarts so far (stored in checkpoints)
    restarts = 0

    def _stop_events(self):
        """Terminal events from ``settings.stop_when``: ``<coordinate> <op> <number>``
        conditions separated by ';' (``qd:`` before a name means its velocity).  Parsed
        by a fixed grammar: nothing is evaluated."""
        import re
        spec = self.settings.get("stop_when")
        if not spec:
            return []
        sysm, form = self.system, self.formulation
        names = sysm.coordinate_names
        out = []
        for k, cond in enumerate(c.strip() for c in spec.split(";") if c.strip()):
            m = re.fullmatch(r"(qd:)?([A-Za-z_][\w.]*)\s*(<=|>=|<|>)\s*"
                             r"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)", cond)
            if not m:
                raise ModelError("settings.stop_when", f"cannot read condition {cond!r}: "
                                 f"expected '<coordinate> <|<=|>|>= <number>', e.g. "
                                 f"'ball.y < 0' or 'qd:crank.phi > 10'")
            vel, name, op, value = m.group(1), m.group(2), m.group(3), float(m.group(4))
            if name not in names:
                raise ModelError("settings.stop_when", f"unknown coordinate '{name}' in "
                                 f"{cond!r}")
            j = names.index(name) + (sysm.n if vel else 0)
            if not form.full_state:
                raise ModelError("settings.stop_when", f"stop conditions need a formulation "
                                 f"on all coordinates (di, cs, projection), not "
                                 f"'{form.name}'")
            sign = 1.0 if op in ("<", "<=") else -1.0

            def g(t, y, j=j, value=value, sign=sign):
                return sign * (y[j] - value)          # falls through 0 when met
            g.linear = (j, value, sign)               # for the compiled loop's check
            out.append(_event(g, terminal=True, direction=-1, name=f"stop:{cond}"))
        return out

    #: the rows removed as redundant (mbcore.solve.redundancy), checked at every output
    removed_rows: RemovedRows | None = None

    def _use_independent_rows(self, q, t, event):
        """Redundant constraints: solve with the independent rows (named once, in an
        event and the stats; the removed rows carry no load) and check the removed
        ones at every output (:mod:`mbcore.solve.redundancy`)."""
        from mbcore.solve.linalg import rank_revealing
        sysm = self.system
        rank, ind, dep, _ = rank_revealing(sysm.jacobian_dense(q, t))
        ind = self.set_independent_rows(ind, q, t)
        dep = np.setdiff1d(np.arange(sysm.m), ind)
        names = [sysm.constraint_names[r] for r in dep]
        from mbcore.solve.redundancy import RemovedRows
        self.removed_rows = RemovedRows(sysm, ind, q, t, self.settings["rtol"])
        event(t, "redundant", f"redundant constraint equations removed (consistent at "
              f"t = {t:.9g}; checked at every output): " + ", ".join(names))
        self.stats["redundant_equations"] = ", ".join(names)

    def reselect_rows(self, q, t, reason, event) -> bool:
        """The kept constraint rows degraded (``removed_rows.degraded``): choose the
        independent rows again at (q, t), rank-revealing, through the formulation's
        rule.  True when they changed (the run then restarts from this state), False
        when the same rows came out (looked at again only when they degrade
        further)."""
        from mbcore.solve.linalg import rank_revealing
        sysm, old = self.system, self.removed_rows
        _, ind, _, _ = rank_revealing(sysm.jacobian_dense(q, t))
        kept = self.set_independent_rows(ind, q, t)
        if np.array_equal(np.sort(kept), np.sort(old.kept)):
            old.look_again_below(t, q)
            return False
        from mbcore.solve.redundancy import RemovedRows
        new = RemovedRows(sysm, kept, q, t, self.settings["rtol"])
        new.worst = old.worst
        self.removed_rows = new
        names = ", ".join(new.names)
        event(t, "redundant", f"{reason}: redundant constraint equations chosen again: "
                              f"{names} (before: {', '.join(old.names)})")
        self.stats["redundant_equations"] = names
        return True

    def _dae_options(self) -> dict:
        """The DAE options of the integrator (mass, h powers, Newton hook) for the
        formulation's state + the work of the non-conservative forces (a
        differential component)."""
        form = self.formulation
        dae = form.integrator_options(1) if hasattr(form, "integrator_options") else \
            {"mass": np.concatenate([form.state_mass, [1.0]])}
        names = getattr(self.icls, "options", {})
        if "mass" not in names:
            raise ModelError("settings.integrator", f"formulation '{form.name}' is a DAE: "
                             f"it needs an integrator with a mass matrix (bdf or radau), not "
                             f"'{self.icls.name}'")
        # the options this integrator takes (bdf: the Newton hook and error weights;
        # the generalized-α methods: the layout of the index-3 state)
        return {k: v for k, v in dae.items() if k in names}

    def set_independent_rows(self, rows, q=None, t=None) -> np.ndarray:
        """The formulation uses only independent constraint rows (the others are
        redundant; ``rows``: a rank-revealing choice at (q, t)): the full-state
        formulations through their acceleration solver, the others through their
        own ``use_independent_rows(rows, q, t)``, which may choose other rows of the
        same rank (joint coordinates keep every tree row) and returns them, else a
        named refusal.  Returns the rows used."""
        form = self.formulation
        use = getattr(form, "use_independent_rows", None)
        if use is not None:
            kept = use(rows, q, t)
            if kept is not None:
                rows = np.asarray(kept, dtype=np.intp)
            if getattr(form, "needs_mass", False):      # the DAE's state changed size
                self.integrator_options.update(self._dae_options())
        elif form.full_state:
            form.solver.set_rows(rows)
        else:
            raise ModelError("settings.formulation", f"redundant constraints: formulation "
                             f"'{form.name}' needs independent constraint rows; use di, cs, "
                             f"projection, cp, ggl or stiff")
        return np.asarray(rows, dtype=np.intp)

    def restart(self, last, reason, event):
        """Re-initialise the formulation at the last output state ``last`` (CP chooses
        a new partition; ``event(t, kind, text)`` is told) and return the new (t, y):
        part of the stepper protocol of :meth:`stepper`."""
        form = self.formulation
        t = last["t"]
        old = getattr(form, "v", None)
        old = None if old is None else list(old)
        yf, _ = form.initialize(last["q"], last["qd"], t)
        self.restarts += 1
        self._describe_partition(t, old, reason, event)
        return t, np.concatenate([yf, [last["W"]]])

    def restart_at(self, t, y, reason, event):
        """Re-initialise a partitioning formulation at the accepted step state (t, y)
        (its coordinates of the current partition; the last entry the work integral):
        a new partition there, ``event`` told; returns the new (t, y).  Part of the
        stepper protocol of :meth:`stepper`."""
        form = self.formulation
        q, qd = form.split(np.asarray(y[:form.size], dtype=float), t)
        return t, self.commit_partition(t, np.array(q), np.array(qd), float(y[-1]),
                                        reason, event)

    def commit_partition(self, t, q, qd, W, reason, event):
        """A new partition at a step's end (the formulation's ``step_end``): the
        state in the new coordinates, ``event`` told."""
        form = self.formulation
        old = list(form.v)
        yf, _ = form.initialize(q, qd, t)
        self.restarts += 1
        self._describe_partition(t, old, reason, event)
        return np.concatenate([yf, [W]])

    def _describe_partition(self, t, old, reason, event):
        form = self.formulation
        if not hasattr(form, "independent_names"):
            if old is not None or reason != "initial":
                event(t, "restart", f"formulation restarted: {reason}")
            return
        # the partition's indices: Cartesian coordinates, or the formulation's own
        # (joint coordinates: the entries of nu)
        labels = getattr(form, "coordinate_labels", None)
        names = labels() if labels is not None else self.system.coordinate_names
        new = form.independent_names()
        if old is None:
            event(t, "partition", f"independent coordinates: {', '.join(new)}")
        else:
            event(t, "repartition", f"{reason}; independent coordinates "
                                    f"{', '.join(names[j] for j in old)} -> {', '.join(new)}")

    def _switch(self, switches, k, t, y, event):
        """Switch ``k``'s guard was crossed at (t, y): its band moves; when the
        crossing is in the switch's direction its elements engage and release, the
        state is made consistent with the new constraint set (positions in the mass
        metric, velocities by the plastic impact map: :func:`mbcore.solve.switching.
        engage_state`), the formulation takes the new rows and restarts there.  The
        kinetic energy lost is added to the work of the non-conservative forces."""
        from mbcore.solve.linalg import rank_revealing
        from mbcore.solve.switching import engage_state
        sysm, n, form = self.system, self.system.n, self.formulation
        size = form.size
        q, qd = np.array(y[:n], dtype=float), np.array(y[n:2 * n], dtype=float)
        d = switches.crossing(k, q, t)
        if not switches.fires(k, d):
            return y
        before = set(switches.rows().tolist())
        msg = switches.apply(k, q, t)
        rows = switches.rows()
        J = sysm.jacobian_dense(q, t)[rows]
        rank = rank_revealing(J)[0] if len(rows) else 0
        if rank < len(rows):
            names = [sysm.constraint_names[r] for r in rows]
            raise AnalysisError(f"{msg}: the engaged constraint equations are dependent "
                                f"(rank {rank} of {len(rows)}): {', '.join(names)}", t)
        T0 = sysm.kinetic_energy(qd, q)
        new = [i for i, r in enumerate(rows) if int(r) not in before]
        if new:                          # an engagement: re-assembly and impact map
            q1, qd1, move, lam = engage_state(sysm, q, qd, t, rows)
        else:                            # releases only: the state holds as it is
            q1, qd1, move, lam = q, qd, 0.0, np.zeros(0)
        T1 = sysm.kinetic_energy(qd1, q1)
        imp = float(np.max(np.abs(lam[new]))) if new else 0.0
        self.set_independent_rows(rows, q1, t)
        yf, _ = form.initialize(q1, qd1, t)
        y = np.concatenate([np.asarray(yf, dtype=float), [float(y[size]) + T1 - T0]])
        self.restarts += 1
        event(t, "switch", f"{msg}; positions moved by {move:.3g}, velocities jumped by "
                           f"{float(np.max(np.abs(qd1 - qd), initial=0.0)):.3g} (engagement "
                           f"impulse {imp:.6g}), kinetic energy {T0:.10g} -> {T1:.10g}")
        self.stats["switches"] = self.stats.get("switches", 0) + 1
        return y

    def _impact(self, contacts, t, y, event):
        """Impact map at a located contact event; the kinetic energy lost is added
        to the work of the non-conservative forces (the balance stays constant).
        The map acts on the Cartesian velocities (keeping every joint); a
        formulation on other coordinates (cp, joint coordinates, the DAE forms) then
        takes the new state through ``initialize`` (its velocity transformation
        carries the Cartesian impact equations into its coordinates)."""
        sysm, n, form = self.system, self.system.n, self.formulation
        size = form.size
        full = getattr(form, "full_state", True) and size == 2 * n
        if full:
            q, qd = y[:n], y[n:2 * n]
        else:
            q, qd = (np.array(a, dtype=float)
                     for a in _split(form, np.asarray(y[:size], dtype=float), t))
        T0 = sysm.kinetic_energy(qd, q)
        qd_new, log = contacts.resolve(q, qd, t, self.settings["impact_resolution"])
        if not log:           # e.g. a spurious sign change at the edge of an extent
            return y
        if full:
            y = y.copy()
            y[n:2 * n] = qd_new
        else:
            yf, _ = form.initialize(q, qd_new, t)
            y = np.concatenate([np.asarray(yf, dtype=float), [y[size]]])
            self.restarts += 1
        y[size] += sysm.kinetic_energy(qd_new, q) - T0
        impulses = {}
        for k, v0, v1, lam_n in log:
            impulses[k] = lam_n
            event(t, "impact", f"{contacts.names[k]}: normal velocity {v0:.17g} -> "
                               f"{v1:.17g}, impulse {lam_n:.17g}")
        # resting contact: the rebound is too small to leave the surface for a
        # resolvable time (e = 0, or the end of a Zeno sequence of ever smaller
        # bounces) while the motion presses into the surface
        qq, qqd, qdd, _ = self.formulation.outputs(t, y[:size])
        t_span = self.settings["t_end"] - self.settings["t_start"]
        h = 1e-7 * t_span
        # the rounding of the gap's second difference: an estimate below 10x it is
        # no acceleration (balls of a cradle left at rest side by side)
        noise = 40.0 * np.finfo(float).eps * (1.0 + float(np.max(np.abs(qq)))) / (h * h)
        for k in impulses:
            C = contacts.jacobian_row(k, q)
            vn_new = float(C @ qd_new)
            g2 = contacts.gap(k, qq + h * qqd + 0.5 * h * h * qdd)      # ~ vn h + an h^2/2
            an = 2.0 * (g2 - vn_new * h) / (h * h) if np.isfinite(g2) else 0.0
            if an < -noise and 2.0 * vn_new / -an < 1e-6 * t_span:
                raise AnalysisError(
                    f"contact '{contacts.names[k]}' comes to rest (rebound {vn_new:.3g} too "
                    f"small against the normal acceleration {an:.3g}): resting contact is not "
                    f"modelled by rigid impacts; use a compliant contact force element or a "
                    f"constraint", t)
        return y


#: the formulations that follow a switching constraint set (their solver takes the
#: engaged rows; mbcore.solve.switching)
SWITCHING_FORMULATIONS = ("di", "cs")


class DriftWatch:
    """The honesty check of the constraint violations: where the recorded position
    violation ``max |Phi|`` first exceeds ten times the requested tolerance,
    ``10 (atol + rtol L)`` (:func:`mbcore.solve.drift.drift_bound`; plus the
    violation of the first recorded row: a start off the constraints is the user's
    choice), one warning event names the time and the remedies (the result's global
    error is then no longer within the tolerance promise).  Formulations with
    ``corrects_drift = False`` (di, di_omega; Nikravesh (1988), §13.1) drift with the
    integration error; Baumgarte's stabilisation (cs) damps the drift but can lag a
    fast motion; di and cs project where it passes the bound itself unless
    ``drift: warn`` (:mod:`mbplugins.formulations.drift`).  Watches the
    ``violation`` channel only when it is recorded, and only under an adaptive
    integrator (a fixed step has no tolerance to keep)."""

    def __init__(self, form, settings, system, event, adaptive: bool = True):
        self.bound = None
        self.event = event
        self.first = True
        if not system.m or not adaptive:       # a fixed step has no tolerance to keep
            return
        self.bound = 10.0 * drift_bound(system, settings["rtol"], settings["atol"])
        self.why = ("does not correct the drift" if not getattr(form, "corrects_drift", True)
                    else "did not hold the constraints to the tolerance")
        self.name = form.name

    def check(self, t: np.ndarray, phi: np.ndarray) -> None:
        """``phi``: the position violations recorded at the times ``t``."""
        if self.bound is None or not len(phi):
            return
        if self.first:                          # a start off the constraints (e.g.
            self.first = False                  # ``assemble: false``) is the user's
            self.bound += float(phi[0])
        over = np.flatnonzero(phi > self.bound)
        if over.size:
            k = over[0]
            self.event(float(t[k]), "warning", (
                f"constraint drift: |Phi| = {float(phi[k]):.3g} exceeds 10x the "
                f"tolerance ({self.bound:.3g}); formulation '{self.name}' {self.why}, "
                f"so the result is less accurate than requested from here on: use "
                f"projection or a tighter rtol"))
            self.bound = None                  # once per run


#: formulations whose ``outputs`` are functions of (t, y) alone that change no state
#: the integration reads: their rows on the compiled loops are evaluated in blocks,
#: after the loop has moved on (``_RowBlock(dae=True)``)
DEFERRED_OUTPUTS = frozenset(("stiff", "ggl"))


def _take_rows(block) -> int:
    """The number of rows ``block`` holds (:class:`_RowBlock`, :class:`_JointRows`), the
    block emptied and its wait restarted when it holds any."""
    k = block.k
    if k:
        block.k = 0
        block.since = time.monotonic()
    return k


class _RowBlock:
    """Output rows of the compiled loop collected in a block and handed to the
    reporters together (``record.rows``, Reporter rule 5).

    At an output the loop's callback copies y and the loop statistics into
    preallocated arrays and evaluates what only an evaluation at the row's state
    gives, as :meth:`_Run.output` does there: qdd, lam and Phi_q from the compiled
    right-hand side, Phi and nu (violation channel), the time functions, and the
    per-type quantities of element types that do not declare ``rows_stacked``
    (they may keep state, so they are called at the output, one row at a time).
    Where the compiled right-hand side binds the block's arrays
    (``CompiledRHS.bind_output_rows``), the copies and that evaluation are one
    compiled call per row (``output_row_at``) without per-row argument checks.
    :meth:`flush` (block full, ``SECONDS`` of wall time since the last hand-over,
    the end of a segment, a hand-over to the Python driver, an error) computes
    every channel for the whole block at once (:mod:`mbcore.system.output_rows`),
    packs the columns with the values :meth:`_Run.output` records row by row, and
    updates the run's last output state and statistics.  A row whose evaluation
    fails is not recorded: the rows before it are, then the error propagates.

    ``dae``: the DAE formulations (``stiff``, ``ggl``; :data:`DEFERRED_OUTPUTS`) on
    the compiled loops, whose state is not ``[q, qd]``: an output copies (t, y, the
    loop statistics) only, and :meth:`flush` evaluates the formulation's
    ``outputs`` (q, qd, qdd, lam of the stored y; e.g. the ``stiff`` state
    ``y = [q, s, lam]``, Nikravesh (1988), §13.3.4) row by row, in order, through
    :meth:`_Run._output_state` as the row-by-row path does, then every channel for
    the block as above.  Those ``outputs`` are functions of (t, y) alone and change
    no state the integration reads, so evaluating them later records the same
    rows."""

    #: largest block (rows, bytes of rows) and longest wait before the reporters get
    #: rows (the per-block Python calls of the channels, ~1 ms for a spatial model,
    #: are then spread over up to two thousand rows)
    ROWS, BYTES, SECONDS = 2048, 16 << 20, 0.25
    #: channels that need qdd, lam (the evaluation at the row's state)
    DYNAMIC = frozenset(("qdd", "lam", "reactions", "reactions_local", "points", "angular"))
    #: channels that read the time functions of the row
    TIMED = frozenset(("energy", "forces", "reactions_local"))

    def __init__(self, run: _Run, dae: bool = False):
        self.run = run
        self.dae = dae
        n, m, sysm = run.n, run.sysm.m, run.sysm
        size = run.form.size + 1                    # y = [q; qd; W]
        width = run.row.flat.size
        names = set(run.row)
        self.dynamic = bool(names & self.DYNAMIC)
        # Phi_q's values of each row: for the reactions, the violations and the
        # joint-local reactions of the types that read the generalised reactions
        self.want_jd = bool(names & {"reactions", "violation"}) or (
            "reactions_local" in names and sysm.local_reactions_use_jacobian)
        self.want_pn = "violation" in names and m > 0
        self.share_gen = ({"reactions", "reactions_local"} <= names
                          and sysm.local_reactions_use_jacobian)
        self.want_fv = bool(names & self.TIMED) and sysm.function_count > 0
        forces_stacked, local_stacked = sysm.output_types_stacked()
        # per-type quantities of the types evaluated at the output, one row at a time
        self.row_forces = "forces" in names and not forces_stacked
        self.row_energy = "energy" in names and not forces_stacked
        self.row_local = "reactions_local" in names and not local_stacked
        nf, nl = len(sysm.force_labels), len(sysm.local_reaction_labels)
        per_row = (max(width, size) + n + m + (sysm.jacobian_values.size if self.want_jd
                                              else 0) + 2 * m + 3 * sysm.function_count
                   + nf + nl + 1)
        self.cap = cap = int(max(1, min(self.ROWS, self.BYTES // (8 * per_row))))
        self.Y = Y = np.empty((cap, size))
        self.T = T = np.empty(cap)
        self.S = S = np.empty((cap, 5))
        self.rows = np.empty((cap, width))
        self.QDD = np.zeros((cap, n))
        self.LAM = np.zeros((cap, m))
        self.JD = np.zeros((cap, sysm.jacobian_values.size)) if self.want_jd else None
        self.PHI = np.zeros((cap, m)) if self.want_pn else None
        self.NU = np.zeros((cap, m)) if self.want_pn else None
        self.FV = (np.zeros((cap, sysm.function_count, 3)) if self.want_fv else None)
        self.FO = np.zeros((cap, nf)) if "forces" in names else None
        self.RL = np.zeros((cap, nl)) if "reactions_local" in names else None
        self.EV = np.zeros(cap)
        self.obuf = np.zeros(size)
        # the work W's column of y, and (dae) q and qd of every row from ``outputs``
        self.wcol = run.form.size
        self.QQ = np.zeros((cap, n)) if dae else None
        self.QQD = np.zeros((cap, n)) if dae else None
        #: (dae) no recorded channel reads qdd, lam or Phi_q: the formulation's
        #: ``output_positions`` (q, qd alone) instead of its ``outputs``
        self.positions_only = dae and not (self.dynamic or self.want_jd or self.want_pn
                                           or self.row_local)
        self.crhs = run.crhs if (run.crhs is not None
                                 and getattr(run.crhs, "cartesian", True)) else None
        self.FV2 = None if self.FV is None else self.FV.reshape(cap, -1)
        # the compiled per-row evaluation (all of it, also for the channels that
        # need only Phi_q)
        self.compiled_row = getattr(self.crhs, "output_row", None)
        if run.s.get("output_rows", "block") != "block" or dae or not (
                self.dynamic or self.want_jd or self.want_pn):
            self.compiled_row = None         # (only the time functions: no evaluation)
        self.cols = []
        off = 0
        for name, w in run.row.layout:
            self.cols.append((name, off, w))
            off += w
        self.k = 0
        self.since = time.monotonic()
        cstat, seconds, clock, flush = run.cstat, self.SECONDS, time.monotonic, self.flush
        due = None if run.ck is None else run.ck.due
        self.n = n
        evaluate = self._evaluate if (self.dynamic or self.want_jd or self.want_pn
                                      or self.want_fv or self.row_forces or self.row_energy
                                      or self.row_local) and not dae else None

        # the common case without Python frames in between: the compiled evaluation
        # at the row's state and no per-type quantities row by row (as _evaluate)
        row = self.compiled_row if not (self.row_forces or self.row_energy
                                        or self.row_local) else None
        args = (self.QDD, self.LAM, self.JD, self.PHI, self.NU, self.FV2)
        # the copies of (t, y, statistics) and that evaluation in one compiled call
        # into the arrays bound once (CompiledRHS.output_row_at; its reference: the
        # copies below and output_row)
        at = None
        if run.s.get("output_rows", "block") == "block" and not dae and (
                row is not None or evaluate is None):
            at = getattr(self.crhs, "output_row_at", None)
        if at is not None:
            bound = ((Y, T, S, cstat) + args if row is not None else (Y, T, S, cstat))

            def bind():
                self.crhs.bind_output_rows(self, *bound)
            bind()
            rowfail = None if evaluate is None else self._evaluate_python

            def on_output(t, y):
                i = self.k
                try:
                    status = at(self, t, y, i)
                    if status < 0:           # another block bound its rows since
                        bind()
                        status = at(self, t, y, i)
                    if status != 0:
                        rowfail(i)           # the row on the Python path
                except BaseException:
                    flush()                  # the rows before this one, in order
                    raise
                self.k = i = i + 1
                if i == cap or clock() - self.since >= seconds or (
                        due is not None and due(t)):
                    flush()                  # (a checkpoint due: its row ends the block)
                return None
            self.on_output = on_output
            return

        def on_output(t, y):
            i = self.k
            Y[i] = y
            T[i] = t
            S[i] = cstat
            if evaluate is not None:
                try:
                    if row is None or row(t, y, i, *args) != 0:
                        evaluate(i)          # (else every quantity of the row is in place)
                except BaseException:
                    flush()                  # the rows before this one, in order
                    raise
            self.k = i = i + 1
            if i == cap or clock() - self.since >= seconds or (due is not None and due(t)):
                flush()                      # (a checkpoint due: its row ends the block)
            return None
        self.on_output = on_output

    def _evaluate(self, i: int) -> None:
        """What row ``i`` needs from an evaluation at its state (at the output): in
        one compiled call (``CompiledRHS.output_row``) where it applies, else (or
        ``settings.output_rows: block_python``, its reference) by the Python calls
        of :meth:`_evaluate_python`; then the per-type quantities of the types
        evaluated one row at a time."""
        if self.compiled_row is None or self.compiled_row(
                float(self.T[i]), self.Y[i], i, self.QDD, self.LAM, self.JD, self.PHI,
                self.NU, self.FV2) != 0:
            self._evaluate_python(i)
        if self.row_forces or self.row_energy or self.row_local:
            self._row_types(i)

    def _evaluate_python(self, i: int) -> None:
        run, n, sysm = self.run, self.n, self.run.sysm
        y, t = self.Y[i], float(self.T[i])
        crhs = self.crhs
        if self.dynamic:
            if crhs is not None and crhs.eval(t, y, self.obuf) == 0:
                crhs.nfev -= 1                       # an output, not an integration cost
                self.QDD[i] = crhs.qdd_view
                self.LAM[i] = crhs.lam_view
            else:
                if crhs is not None:
                    crhs.nfev -= 1
                form = run.form
                _, _, qdd, lam = form.outputs(t, y[:form.size])
                self.QDD[i] = qdd
                self.LAM[i] = lam
                sysm.jacobian(y[:n], t)
        elif self.want_jd:
            sysm.jacobian(y[:n], t)
        if self.want_jd:
            self.JD[i] = sysm.jacobian_values
        if self.want_pn:
            self.PHI[i] = sysm.phi(y[:n], t)
            self.NU[i] = sysm.nu(y[:n], t)
        if self.FV is not None:
            self.FV[i] = sysm.functions_at(t)

    def _row_types(self, i: int) -> None:
        """Row ``i``'s per-type quantities of the types without ``rows_stacked``."""
        sysm = self.run.sysm
        sl = slice(i, i + 1)
        (Q, QD), T = self._states(sl), self.T[sl]
        FV = None if self.FV is None else self.FV[sl]
        if self.row_forces:
            sysm.force_outputs_rows(Q, QD, T, FV, stacked=False, out=self.FO[sl])
        if self.row_energy:
            self.EV[i] = sysm.force_energy_rows(Q, T, FV, stacked=False)[0]
        if self.row_local:
            sysm.reactions_local_rows(Q, T, FV, self.LAM[sl], stacked=False,
                                      out=self.RL[sl],
                                      JD=None if self.JD is None else self.JD[sl])

    def _states(self, sl: slice) -> tuple[np.ndarray, np.ndarray]:
        """(Q, QD) of rows ``sl``: columns of y, or (dae) from ``outputs``."""
        if self.dae:
            return self.QQ[sl], self.QQD[sl]
        n = self.n
        return self.Y[sl, :n], self.Y[sl, n:2 * n]

    def _evaluate_dae(self, i: int) -> None:
        """Row ``i`` of a DAE formulation (``dae``): q, qd, qdd, lam from the
        formulation's ``outputs`` of the stored y (:meth:`_Run._output_state`, as
        :meth:`_Run.output`; with ``positions_only``, q and qd alone from its
        ``output_positions``), then Phi_q's values, Phi, nu, the time functions and
        the per-type quantities of the types evaluated one row at a time."""
        run, sysm = self.run, self.run.sysm
        t = float(self.T[i])
        if self.positions_only:
            form = run.form
            self.QQ[i], self.QQD[i] = form.output_positions(t, self.Y[i, :form.size])
        else:
            qq, qqd, qdd, lam, _ = run._output_state(t, self.Y[i])
            self.QQ[i], self.QQD[i], self.QDD[i], self.LAM[i] = qq, qqd, qdd, lam
        if self.want_jd:                  # (_output_state evaluated Phi_q at (qq, t))
            self.JD[i] = sysm.jacobian_values
        if self.want_pn:
            self.PHI[i] = sysm.phi(qq, t)
            self.NU[i] = sysm.nu(qq, t)
        if self.FV is not None:
            self.FV[i] = sysm.functions_at(t)
        if self.row_forces or self.row_energy or self.row_local:
            self._row_types(i)

    def flush(self) -> None:
        k = _take_rows(self)
        if not k:
            return
        if self.dae:
            # the rows' evaluations in order: a failing row ends the block there
            for j in range(k):
                try:
                    self._evaluate_dae(j)
                except BaseException:
                    if j:
                        self._pack(0, j)
                        self._hand_over(j, checkpoint=False)
                    raise
        try:
            self._pack(0, k)
        except Exception:
            # a per-type quantity of some row cannot be evaluated: the rows one by
            # one, those before the failing row recorded, then its (named) error
            for j in range(k):
                try:
                    self._pack(j, j + 1)
                except Exception:
                    if j:
                        self._hand_over(j, checkpoint=False)
                    raise
            raise                                       # (not reached)
        self._hand_over(k)

    def _pack(self, lo: int, hi: int) -> None:
        """The channel columns of rows ``lo:hi`` of the block."""
        sysm = self.run.sysm
        sl = slice(lo, hi)
        Y, S, rows, T = self.Y[sl], self.S[sl], self.rows[sl], self.T[sl]
        Q, QD = self._states(sl)
        QDD, LAM = self.QDD[sl], self.LAM[sl]
        FV = None if self.FV is None else self.FV[sl]
        JD = None if self.JD is None else self.JD[sl]
        # the generalised reactions once for both reaction channels
        gen = sysm.generalised_rows(LAM, JD) if self.share_gen else None
        for name, off, w in self.cols:
            col = rows[:, off:off + w]
            if name == "q":
                col[:] = Q
            elif name == "qd":
                col[:] = QD
            elif name == "qdd":
                col[:] = QDD
            elif name == "lam":
                col[:] = LAM
            elif name == "reactions":
                col[:] = sysm.reactions_rows(Q, LAM, JD, gen=gen)
            elif name == "reactions_local":
                col[:] = sysm.reactions_local_rows(Q, T, FV, LAM, stacked=True,
                                                   out=self.RL[sl], JD=JD, gen=gen)
            elif name == "forces":
                col[:] = sysm.force_outputs_rows(Q, QD, T, FV, stacked=True,
                                                 out=self.FO[sl])
            elif name == "points":
                col[:] = sysm.point_kinematics_rows(Q, QD, QDD)
            elif name == "angular":
                col[:] = sysm.angular_kinematics_rows(Q, QD, QDD)
            elif name == "joints":
                col[:] = self.run.joints.rows(Q, QD, T)
            elif name == "energy":                  # as output(), row by row
                Tk = sysm.kinetic_energy_rows(Q, QD)
                V = sysm.gravity_potential_rows(Q) + sysm.force_energy_rows(
                    Q, T, FV, stacked=True)
                if self.row_energy:
                    V += self.EV[sl]
                W = Y[:, self.wcol]
                col[:, 0], col[:, 1], col[:, 2] = Tk, V, Tk + V
                col[:, 3], col[:, 4] = W, Tk + V - W
            elif name == "violation":
                if self.want_pn:
                    col[:] = sysm.violation_rows(QD, JD, self.PHI[sl],
                                                 self.NU[sl])
                    self.run.drift.check(T, col[:, 0])
                else:
                    col[:] = 0.0
            else:                                   # integrator: as _output_compiled
                col[:, :2] = S[:, :2]
                np.add(self.run.base, S[:, 2:], out=col[:, 2:5])

    def _hand_over(self, k: int, checkpoint: bool = True) -> None:
        """Rows ``0:k`` (packed) to the reporters, with the run's last output state,
        statistics and (``checkpoint``: the rows end at the loop's current step)
        checkpoint."""
        run = self.run
        Y, S, rows, T = self.Y[:k], self.S[:k], self.rows[:k], self.T[:k]
        Q, QD = self._states(slice(k - 1, k))
        # the state of the last row, as output() leaves it
        run.istat[0], run.istat[1] = S[-1, 0], S[-1, 1]
        run.istat[2:] = run.base + S[-1, 2:]
        run.last.update(t=float(T[-1]), q=np.array(Q[0]), qd=np.array(QD[0]),
                        W=float(Y[-1, self.wcol]))
        with CRITICAL:                      # rows and their checkpoint state: atomic
            if run.record_rows is not None:
                run.record_rows(T, rows, run.row.layout)
            else:                                   # a plain record(t, data) callable
                flat = run.row.flat
                for i in range(k):
                    flat[:] = rows[i]
                    run.record(float(T[i]), run.row)
            if run.ck is not None and checkpoint:
                run.ck.offer(run.snapshot(float(T[-1]), Y[-1], float(S[-1, 2])))
        run.bar.update(k)


class _JointRows:
    """The rows of the row-by-row path (:meth:`_Run.output`: the Python driver,
    projection, cp, the DAE formulations where :class:`_RowBlock` does not apply)
    with the ``joints`` channel evaluated for blocks of rows, as the kinematic
    analyses' :class:`mbcore.analysis.joint_channels.BlockRecorder` does: each row
    is copied with every other channel filled, with (q, qd, t) and, with
    checkpoints, the row's checkpoint state made at the row (:meth:`_Run.snapshot`);
    :meth:`flush` (``ROWS`` rows, ``SECONDS`` of wall time, a checkpoint due at the
    row, a row after which the loop stops, the end of every segment, also on errors)
    computes the block's ``joints`` columns in one :meth:`JointChannel.rows` call
    and hands the rows to the reporters, then offers the last row's checkpoint
    state.  The channel is row-wise and keeps its whole turns from row to row, so the
    values are those of the row-by-row evaluation, bit for bit."""

    ROWS, SECONDS = 256, 0.25

    def __init__(self, run: _Run):
        self.run = run
        n, width = run.n, run.row.flat.size
        cap = self.ROWS
        self.rows = np.empty((cap, width))
        self.Q, self.QD, self.T = np.empty((cap, n)), np.empty((cap, n)), np.empty(cap)
        off = 0
        for name, w in run.row.layout:
            if name == "joints":
                self.jcols = slice(off, off + w)
            off += w
        self.k = 0
        self.snap = None                     # the last row's checkpoint state
        self.since = time.monotonic()

    def add(self, t: float, row, q, qd, snap, stop: bool) -> None:
        """Row ``row`` (a :class:`Row`, ``joints`` not yet filled) at ``t`` with its
        ``q``, ``qd`` and checkpoint state ``snap``; ``stop``: the loop stops after
        it (the rows so far are handed over now)."""
        i = self.k
        self.rows[i] = row.flat
        self.Q[i], self.QD[i], self.T[i] = q, qd, t
        self.snap = snap
        self.k = i + 1
        ck = self.run.ck
        if (stop or self.k == self.ROWS or time.monotonic() - self.since >= self.SECONDS
                or (ck is not None and ck.due(t))):
            self.flush()

    def flush(self) -> None:
        k = _take_rows(self)
        if not k:
            return
        run = self.run
        try:
            self.rows[:k, self.jcols] = run.joints.rows(self.Q[:k], self.QD[:k], self.T[:k])
        except Exception:
            # some row's channel cannot be evaluated: the rows one by one (the
            # channel starts again from the block's first row), those before the
            # failing row recorded, then its error
            for j in range(k):
                try:
                    self.rows[j, self.jcols] = run.joints.rows(
                        self.Q[j:j + 1], self.QD[j:j + 1], self.T[j:j + 1])[0]
                except Exception:
                    self._hand_over(j, None)
                    raise
            raise                                       # (not reached)
        self._hand_over(k, self.snap)

    def _hand_over(self, k: int, snap) -> None:
        if not k:
            return
        run = self.run
        T, rows = self.T[:k], self.rows[:k]
        with CRITICAL:                      # rows and their checkpoint state: atomic
            if run.record_rows is not None:
                run.record_rows(T.copy(), rows.copy(), run.row.layout)
            else:                                   # a plain record(t, data) callable
                flat = run.row.flat
                for i in range(k):
                    flat[:] = rows[i]
                    run.record(float(T[i]), run.row)
            if run.ck is not None and snap is not None:
                run.ck.offer(snap)
        run.bar.update(k)


def _split(form, y, t):
    """``(q, qd)`` of a formulation's state (a partitioning formulation's ``split``
    takes the time too)."""
    return _splitter(form)(y, t)


def _splitter(form):
    import inspect
    if "t" in inspect.signature(form.split).parameters:
        return form.split
    return lambda y, t: form.split(y)


def _gap_event(contacts, k, n, form=None):
    """The gap of contact k as an event function of the state: y[:n] are the
    coordinates of a formulation on all of them, else the formulation's ``split``
    gives them (cp, joint coordinates)."""
    if form is None:
        def g(t, y):
            v = contacts.gap(k, y[:n])
            return 1.0 if not np.isfinite(v) else v
        return g
    size = form.size
    split = _splitter(form)

    def g(t, y):
        q = split(np.asarray(y[:size], dtype=float), t)[0]
        v = contacts.gap(k, np.asarray(q, dtype=float))
        return 1.0 if not np.isfinite(v) else v
    return g


def _event(fun, **options):
    """An :class:`mbcore.integrate.events.Event` (imported on first use: a run
    without contacts and stop conditions does not need the module)."""
    from mbcore.integrate.events import Event
    return Event(fun, **options)


class _Run:
    """The state of one dynamic run and its stages.

    * :meth:`output_times` and :meth:`initial_state`: t_out, then the assembled
      (q, qd) -> the formulation's y0 (+ the work of the non-conservative forces).
    * :meth:`rhs`: one evaluation y' = f(t, y): the formulation's right-hand side
      (compiled in one call where the System allows) and the power of the
      non-conservative and constraint forces for the work channel.
    * :meth:`output`: at an output time, the consistent state, qdd and lam, every
      recorded channel, then the reporters (``record``).
    * :meth:`segment`: the integrator from (t_a, y_a) over the remaining output
      times, on the compiled loop or the Python driver.
    * :meth:`execute`: segments until t_end; between them CP re-partitions, a
      formulation restarts, an impact map is applied or a stop condition ends it.
    """

    def __init__(self, analysis: DynamicAnalysis, record, event, progress):
        self.a = analysis
        self.sysm = analysis.system
        self.form = analysis.formulation
        self.s = analysis.settings
        self.record, self.event = record, event
        self.progress_enabled = progress
        self.n = self.sysm.n
        self.t0, self.t1 = self.s["t_start"], self.s["t_end"]
        # the compiled right-hand side serves while every constraint row is used
        self.crhs = self.form.compiled if self.form.solver.rows is None else None
        self.projects = hasattr(self.form, "project")       # projection, penalty
        # a formulation that changes its coordinates at a step's end (cp: a new
        # partition where the current one degrades, after the step's outputs): the
        # loops' ``on_commit`` (also :class:`mbcore.Simulation`'s)
        self.commit = self.commit_step if callable(getattr(self.form, "step_end", None)) \
            else None
        self._acc = None                     # the last accepted step (t, y)
        self.row = Row(analysis.channels())
        self.joints = JointChannel(self.sysm) if "joints" in self.row else None
        # the joints channel of the row-by-row path in blocks (not on the reference)
        self.jrows = (_JointRows(self) if self.joints is not None
                      and self.s.get("output_rows", "block") != "reference" else None)
        # a hint to formulations whose multipliers cost extra at outputs (joint
        # coordinates: the tree joints' least squares): only when a channel uses them
        self.form.multipliers_wanted = bool(
            {c.name for c in analysis.channels()} & {"lam", "reactions", "reactions_local"})
        self.last: dict = {}                 # the last output state (restarts)
        self.istat = np.zeros(5)             # step size, order, steps, rejected, nfev
        self.base = np.zeros(3)              # totals of earlier segments (restarts)
        self.cstat = np.zeros(5)             # statistics of the compiled loop
        self.totals: dict[str, float] = {}
        self._ydot = self._obuf = np.zeros(0)     # sized once the state is known
        self.bar = _progress(0, False)
        self.record_rows = getattr(record, "rows", None)    # reporters' block hand-over
        self.batch = None                    # _RowBlock of the compiled loop, if any
        # checkpoints and resume (mbcore.analysis.checkpoint): set by the runner
        self.ck = getattr(analysis, "checkpointer", None)
        self.resume = getattr(analysis, "resume_from", None)
        self.seg_t0 = self.t0                # start of the current segment (its grid)
        self.seg_compiled = False
        self._start = None                   # resume: first step / grid of the loop
        self.ystep = None                    # the last step with outputs and the loop's
        self.mshist = None                   # state at its start (checkpoints)
        self._seg = None                     # (t, y, counts, formulation state) at
                                             # the segment's start
        self._fs = None                      # formulation state: after the last row,
        self._fs_top = None                  # ... at the start of the current step,
        self._fs_key = None                  # ... and the step's start time
        self._py = None                      # Python driver: (state before the step, base)
        self._py_stepped = False             # ... a step was taken in this segment
        self._src = None                     # where the current step's state lives
        self.t_out = np.zeros(0)             # outputs (compiled fixed-step loop)
        self.drift = DriftWatch(self.form, self.s, self.sysm, self.event,
                                adaptive=bool(getattr(analysis.icls, "adaptive", True)))
        self.switches = None                 # switching constraint sets
        if self.sysm.model.switching:
            from mbcore.solve.switching import SwitchSet
            self.switches = SwitchSet(self.sysm, self.sysm.model.switching)

    # -- stage 1: output times and the initial state ---------------------------------
    def output_times(self) -> np.ndarray:
        h = self.s["output_step"]
        t0, t1 = self.t0, self.t1
        nout = int(math.floor((t1 - t0) / h + 1e-9))
        t_out = np.minimum(t0 + h * np.arange(nout + 1), t1)   # no rounding past t_end
        if t_out[-1] < t1 - 1e-9 * h:
            t_out = np.append(t_out, t1)
        t_out[-1] = min(t_out[-1], t1)
        return t_out[np.concatenate([[True], np.diff(t_out) > 0])]

    def snapshot(self, t: float, y, steps: float):
        """The checkpoint state of the row just recorded at ``t``
        (:class:`mbcore.analysis.checkpoint.Snapshot`; ``y`` the integrated state,
        ``steps`` the loop's steps in this segment)."""
        form = self.form
        v = getattr(form, "v", None)
        v = None if v is None else np.array(v)
        istat = self.istat.copy()
        seg_t0, compiled, restarts = self.seg_t0, self.seg_compiled, self.a.restarts
        switching = None if self.switches is None else self.switches.state()
        joints = None if self.joints is None else self.joints.state()

        def state() -> dict:
            partition = None
            if v is not None and hasattr(form, "independent_names"):
                labels = getattr(form, "coordinate_labels", None)
                names = labels() if labels is not None else self.sysm.coordinate_names
                partition = [names[j] for j in v]
            rows = form.solver.rows
            return {"counts": [float(x) for x in istat[2:]], "h": float(istat[0]),
                    "order": float(istat[1]), "restarts": int(restarts),
                    "grid0": float(seg_t0), "steps": int(steps), "compiled": bool(compiled),
                    "partition": partition,
                    "rows": None if rows is None else [int(r) for r in rows],
                    "switching": switching, "joints": joints,
                    "integrator": self.a.icls.name, "formulation": form.name}
        from mbcore.analysis.checkpoint import Snapshot
        return Snapshot(float(t), np.array(y, dtype=float), self.last.get("q"),
                        self.last.get("qd"), state, self.resume_state())

    def size_buffers(self) -> None:
        """Work buffers of the right-hand side and the outputs, sized for the
        formulation's state (after :meth:`initial_state`)."""
        self._ydot = np.zeros(self.form.size + 1)
        self._obuf = np.zeros(self.form.size + 1)

    def initial_state(self) -> np.ndarray:
        """Nearest consistent state (assembly) -> y0 = [formulation
        state; work of the non-conservative forces = 0]."""
        sysm, s, a, t0 = self.sysm, self.s, self.a, self.t0
        st = sysm.initial_state(t0)
        q, qd = st.q, st.qd
        rows = None if self.switches is None else self.switches.rows()
        if s["assemble"] and sysm.m:
            hold = list(_names(s["hold"], "settings.hold")) if s.get("hold") else []
            for c in hold:
                if c not in sysm.coordinate_names:
                    raise ModelError("settings.hold", f"unknown coordinate '{c}'")
            rep = assemble(sysm, q, qd, t0, hold=hold, rows=rows)
            q, qd = rep.q, rep.qd
            self.event(t0, "assembly", rep.summary())
            a.stats["assembly"] = rep.summary()
            if rep.redundant and rows is not None:
                raise ModelError("switching.released", f"the constraint equations engaged "
                                 f"at the start are redundant ({', '.join(rep.redundant)}): "
                                 f"switching constraint sets need independent equations")
            if rep.redundant:
                a._use_independent_rows(q, t0, self.event)
                self._rows_changed()
        if rows is not None:                 # switching: the engaged rows from the start
            a.set_independent_rows(rows, q, t0)
            self._rows_changed()
            self.switches.start(q, t0)
            self.event(t0, "switch", "engaged at the start: all constraint elements but "
                       + (", ".join(self.switches.released()) or "none"))
        for w in self.form.warnings(a.integrator_options.get("step")):
            self.event(t0, "warning", w)
        yf, _ = self.form.initialize(q, qd, t0)
        a._describe_partition(t0, None, "initial", self.event)
        return np.concatenate([yf, [0.0]])

    def _rows_changed(self) -> None:
        """The formulation now uses a subset of the constraint rows: its compiled
        right-hand side serves only where it follows them (``compiled_follows_rows``:
        ggl, stiff, cp, di, cs, projection), else the Python path."""
        self.crhs = self.form.compiled if self.form.compiled_follows_rows else None

    # -- stage 2: one evaluation ---------------------------------------------------
    def rhs(self, t, y):
        """y' = [formulation right-hand side; power of the non-conservative and
        constraint forces] (the work channel)."""
        form, sysm = self.form, self.sysm
        size = form.size
        ydot = self._ydot
        if ydot.size != size + 1:
            ydot = self._ydot = np.zeros(size + 1)
        if self.crhs is not None and self.crhs.eval(t, y, ydot) == 0:
            form.nfev += 1      # compiled [qd; qdd; W'] in one call (else the Python
            return ydot         # path below repeats it and raises the named error)
        ydot[:size] = form.rhs(t, y[:size])
        rate = getattr(form, "work_rate", None)
        if rate is not None:     # the formulation's own power (joint coordinates)
            ydot[size] = rate(t)
            return ydot
        qq, qqd = form.q_cur, form.qd_cur
        lam = form.solver.lam
        if sysm.dense:
            # the formulation just evaluated Phi_q at (qq, t): the System's buffer
            wc = float(lam @ (sysm.last_jacobian @ qqd))
        else:
            # lam . (Phi_q qd) = qd . (M qdd - Q) (equations of motion): no sparse
            # product (scipy's overhead is ~13 us per call) -- for the index-1 forms,
            # whose lam and qdd solve them at this evaluation; the DAE forms (ggl,
            # stiff) carry lam in their state and leave the solver's qdd stale
            dae = getattr(form, "needs_mass", False)
            wc = (float(qqd @ (sysm.mass_diag * form.solver.qdd - sysm.last_forces))
                  if sysm.mass_diag is not None and not dae
                  else float(lam @ (sysm.last_jacobian @ qqd)))
        # the compiled force kernels' power where the System has them (equal to the
        # NumPy references to 1e-12; kernels: numpy keeps the references)
        ydot[size] = sysm.nonconservative_power(qq, qqd, t, compiled=True) + wc
        return ydot

    def dae_jacobian(self, t, y):
        """df/dy of y = [state, W] for the DAE formulations (ggl, stiff): theirs,
        and the work row by differences (in C by ``CompiledGGL.work_row``, the same
        formula, when the compiled GGL right-hand side applies); zeros for an
        integrator that does not read it (``DAE_JACOBIAN_WORK_ROW = False``)."""
        form = self.form
        size = form.size
        Jf = form.jacobian(t, y[:size])
        out = np.zeros((size + 1, size + 1))
        out[:size, :size] = Jf
        if not getattr(self, "_work_row", True):
            return out
        work_row = getattr(self.crhs, "work_row", None)      # CompiledGGL: in one C call
        if work_row is not None and work_row(t, y, out[size]) == 0:
            return out
        if self._direct_work_row(t, y, out[size]):
            return out
        h = 1e-7
        w0 = self.rhs(t, y)[size]
        yp = y.copy()
        for j in range(size):
            d = h * (1.0 + abs(y[j]))
            yp[j] = y[j] + d
            out[size, j] = (self.rhs(t, yp)[size] - w0) / d
            yp[j] = y[j]
        return out

    def _direct_work_row(self, t, y, row) -> bool:
        """The work row of :meth:`dae_jacobian` without the formulation's rhs, for
        planar bodies with a dense Jacobian (ggl, stiff): ``w = P_nc(q, v) +
        lam . (Phi_q v)``, so ``dw/dlam = Phi_q v`` and ``dw/dv = dP_nc/dv +
        Phi_q^T lam`` exactly, forward differences of ``P_nc`` (compiled power of
        the compiled groups) and of ``lam . Phi_q v`` in q, and ``dP_nc/dv`` (no
        force evaluation); Phi_q of the formulation's rows (the independent ones of
        a redundant set).  False where it does not apply."""
        form, sysm = self.form, self.sysm
        if (getattr(form, "name", None) not in ("ggl", "stiff") or getattr(form, "spatial", True)
                or not sysm.dense or sysm.padded or not sysm.all_holonomic):
            return False
        rows = form.system                  # the System, or the kept rows of it
        n, m = sysm.n, rows.m
        q = np.array(y[:n], dtype=float)
        v = np.array(y[n:2 * n], dtype=float)
        lam = y[2 * n:2 * n + m]
        P0 = rows.jacobian_dense(q, t)
        Pv = P0 @ v
        w0 = sysm.nonconservative_power(q, v, t, compiled=True)
        c0 = float(lam @ Pv)
        row[2 * n:2 * n + m] = Pv
        row[n:2 * n] = P0.T @ lam
        h = 1e-7
        for j in range(n):
            d = h * (1.0 + abs(y[j]))
            q[j] = y[j] + d
            wc = float(lam @ (rows.jacobian(q, t) @ v)) if m else 0.0
            row[j] = (sysm.nonconservative_power(q, v, t, compiled=True) - w0 + wc - c0) / d
            q[j] = y[j]
            d = h * (1.0 + abs(y[n + j]))
            v[j] = y[n + j] + d
            row[n + j] += (sysm.nonconservative_power(q, v, t, compiled=True) - w0) / d
            v[j] = y[n + j]
        self.rhs(t, y)                   # leave the buffers at y
        return True

    def post_step(self, t, y):
        """Projection formulations: positions and velocities after every step."""
        size = self.form.size
        yp = self.form.project(t, y[:size])
        if yp is None:
            return None
        return np.concatenate([yp, y[size:]])

    # -- stage 3: outputs -> reporters ---------------------------------------------
    def _output_state(self, t, y):
        """(q, qd, qdd, lam, Phi_q) at an output: from the compiled evaluation's
        buffers where it applies, else from the formulation (which projects or
        solves its dependent coordinates)."""
        form, sysm, n = self.form, self.sysm, self.n
        # (a compiled right-hand side of another state, e.g. joint coordinates, leaves
        # the outputs to the formulation)
        if self.crhs is not None and getattr(self.crhs, "cartesian", True):
            ok = self.crhs.eval(t, y, self._obuf) == 0
            self.crhs.nfev -= 1                # an output, not an integration cost
            if ok:
                qq, qqd = np.array(y[:n]), np.array(y[n:2 * n])
                J = sysm.last_jacobian
                return qq, qqd, self.crhs.qdd_view.copy(), self.crhs.lam_view.copy(), J
        qq, qqd, qdd, lam = (np.array(x) for x in form.outputs(t, y[:form.size]))
        return qq, qqd, qdd, lam, sysm.jacobian(qq, t)

    def output(self, t, y):
        """Record one output row; True asks the loop to stop here (CP wants a new
        partition)."""
        form, sysm = self.form, self.sysm
        if self._fs is not None and self._src not in (None, "python"):
            # a stateful formulation on a compiled loop: its Python state changes at
            # outputs only, so at a step's start it is the state after the last row
            key = self._step_start()
            if key != self._fs_key:
                self._fs_key, self._fs_top = key, self._fs
        size = form.size
        y_state = y
        if self.projects:                      # report consistent states (TAM 674 (2003), lecture of 7 April)
            yp = form.project(t, y[:size], count=False)
            if yp is not None:
                y = np.concatenate([yp, y[size:]])
        qq, qqd, qdd, lam, J = self._output_state(t, y)
        rows_moved = None
        if self.a.removed_rows is not None:        # they must hold here too
            self.a.removed_rows.check(t, qq, qqd, qdd)     # (J: same values)
            why = self.a.removed_rows.degraded(t, qq)
            if why is not None and self.a.reselect_rows(qq, t, why, self.event):
                rows_moved = why
                self._rows_changed()
        W = float(y[size])
        self.last.update(t=t, q=qq, qd=qqd, W=W)
        data = self.row                      # views of one flat row (reporting.Row)
        if "q" in data:
            data["q"][:] = qq
        if "qd" in data:
            data["qd"][:] = qqd
        if "qdd" in data:
            data["qdd"][:] = qdd
        if "lam" in data:
            data["lam"][:] = lam
        if "reactions" in data:
            data["reactions"][:] = sysm.reactions(qq, t, lam)
        if "energy" in data:
            T, V = sysm.kinetic_energy(qqd, qq), sysm.potential_energy(qq, t)
            e = data["energy"]
            e[0], e[1], e[2], e[3], e[4] = T, V, T + V, W, T + V - W
        if "violation" in data:
            vres = J.dot(qqd) - sysm.nu(qq, t)
            phi = sysm.phi(qq, t)
            if self.switches is not None:    # the engaged equations only
                rows = self.switches.rows()
                vres, phi = vres[rows], phi[rows]
            v = data["violation"]
            v[0] = np.max(np.abs(phi)) if phi.size else 0.0
            v[1] = np.max(np.abs(vres)) if vres.size else 0.0
            self.drift.check(np.array([t]), v[:1])
        if "integrator" in data:
            data["integrator"][:] = self.istat
        if "reactions_local" in data:
            data["reactions_local"][:] = sysm.reactions_local(qq, t, lam)
        if "forces" in data:
            data["forces"][:] = sysm.force_outputs(qq, qqd, t)
        if "points" in data:
            data["points"][:] = sysm.point_kinematics(qq, qqd, qdd).ravel()
        if "angular" in data:
            data["angular"][:] = sysm.angular_kinematics(qq, qqd, qdd).ravel()
        if self.jrows is not None:           # joints: for a block of rows (_JointRows)
            snap = None if self.ck is None else self.snapshot(t, y_state,
                                                              float(self.cstat[2]))
            reason = None if rows_moved is not None else form.wants_repartition()
            self.jrows.add(t, data, qq, qqd, snap, stop=rows_moved is not None
                           or bool(reason and self.commit is None))
        else:
            if "joints" in data:
                data["joints"][:] = self.joints.rows(qq[None], qqd[None], np.array([t]))[0]
            with CRITICAL:                   # the row and its checkpoint state: atomic
                self.record(t, data)
                if self.ck is not None:
                    self.ck.offer(self.snapshot(t, y_state, float(self.cstat[2])))
            self.bar.update(1)
            reason = None if rows_moved is not None else form.wants_repartition()
        if rows_moved is not None:       # the formulation has new rows: restart here
            self.last["reason"] = rows_moved
            return True
        if self._fs is not None:
            self._fs = form.resume_state()
        if reason and self.commit is None:
            self.last["reason"] = reason
            return True          # stop here; the loop re-partitions and restarts
        return None

    def _output_compiled(self, t, y):
        self.istat[0], self.istat[1] = self.cstat[0], self.cstat[1]
        self.istat[2:] = self.base + self.cstat[2:]
        return self.output(t, y)

    # -- batched rows of the compiled loop ---------------------------------
    def _row_block(self):
        """A :class:`_RowBlock` when nothing but the row happens at an output: the
        compiled loop on the base-class right-hand side of DI/CS (no state of its
        own, so evaluating it later, at the block's hand-over, changes nothing), all
        coordinates in y, every constraint row used, no projection, no
        re-partitioning, and ``settings.output_rows`` is 'block'.  Else None (the
        row-by-row :meth:`output`, the reference)."""
        form = self.form
        if (self.s.get("output_rows", "block") == "reference" or self.loop is None
                or self.projects or self.a.removed_rows is not None
                or self.switches is not None
                or type(form).wants_repartition is not Formulation.wants_repartition):
            return None
        if (getattr(form, "name", None) in DEFERRED_OUTPUTS and self._fs is None
                and self.commit is None):
            return _RowBlock(self, dae=True)
        if (not form.full_state or form.size != 2 * self.n
                or form.compiled_stabilisation() is None):
            return None
        return _RowBlock(self)

    def commit_step(self, t, y):
        """At every accepted step's end, after its outputs (the loops' ``on_commit``):
        the formulation may change its coordinates here (``step_end``: cp takes a
        new partition where the current one has degraded, or where the test at an
        output found a much better one) — an exact state, not an interpolated
        output; di and cs project onto the constraints here where the drift passes
        the tolerance (a reason of None: the same coordinates).  Returns the state
        in the new coordinates, or None."""
        form = self.form
        got = form.step_end(t, y[:form.size])
        if got is None:
            self._accepted(t, y)
            return None
        reason, q, qd = got
        if reason is None:               # the same coordinates projected (di's drift)
            y_new = np.concatenate([form.pack(q, qd), y[form.size:]])
        else:
            y_new = self.a.commit_partition(t, q, qd, float(y[-1]), reason, self.event)
        self._accepted(t, y_new)
        return y_new

    def _accepted(self, t, y) -> None:
        """Keep the accepted step (t, y) (the restart point of a failing step) in a
        buffer of the run: ``y`` may be a loop's buffer."""
        acc = self._acc
        if acc is None or acc[1].shape != np.shape(y):
            self._acc = (float(t), np.array(y, dtype=float))
        else:
            acc[1][:] = y
            self._acc = (float(t), acc[1])

    def on_step(self, integ):
        self._py_stepped = True
        st_ = integ.stats
        self.istat[0] = integ.step_size or 0.0
        self.istat[1] = getattr(integ, "order", 0)
        self.istat[2:] = self.base + (st_.nsteps, st_.nrejected, st_.nfev)

    # -- stage 4: integration segments ---------------------------------------------
    def _setup_segments(self, y0):
        """Events (contacts, stop conditions) and the loop: compiled for explicit
        Runge-Kutta methods on a compiled right-hand side, else the Python driver."""
        a, sysm, form = self.a, self.sysm, self.form
        self.contacts = None
        if sysm.model.contacts:
            from mbcore.solve.impacts import ContactSet
            self.contacts = ContactSet(sysm, sysm.model.contacts)
        events = []
        if self.contacts is not None:
            for k in range(len(self.contacts)):
                full = getattr(form, "full_state", True) and form.size == 2 * self.n
                events.append(_event(_gap_event(self.contacts, k, self.n,
                                                None if full else form),
                                     terminal=True, direction=-1,
                                     name=self.contacts.names[k]))
        if self.switches is not None:
            sw, n = self.switches, self.n
            for k in range(len(sw)):
                def g(t, y, k=k):
                    return sw.gap(k, y[:n], t)
                events.append(_event(g, terminal=True, direction=-1,
                                     name=f"switch:{sw.names[k]}"))
        self.stops = a._stop_events()
        self.events = events + self.stops
        self.jac = self.dae_jacobian if hasattr(form, "jacobian") else None
        #: the integrator reads the work row of the DAE Jacobian (generalized-α does not)
        self._work_row = bool(getattr(a.icls, "DAE_JACOBIAN_WORK_ROW", True))
        self.post = self.post_step if self.projects else None
        self.loop, self.stop_specs = None, None
        if a.settings["loop"] == "auto":
            # stop conditions are checked in C at every step end; the step where one
            # is met is redone by the Python driver, which locates the crossing
            linear = [e.fun.linear for e in self.events if hasattr(e.fun, "linear")]
            self.loop = compiled_loop_for(a.icls, form, post_step=self.post, jac=self.jac,
                                          events=[e for e in self.events
                                                  if not hasattr(e.fun, "linear")])
            if self.loop:
                self.stop_specs = np.array(linear, dtype=float).reshape(-1, 3)
            if self.loop and getattr(form, "step_end_in_compiled_loop", False):
                self.commit = None       # the loop applies the step-end gate in C
        a.stats["loop"] = "compiled" if self.loop else "python"

    def python_segment(self, t_a, y_a, outs, state=None):
        """The Python driver from (t_a, y_a); ``state``: a checkpoint's driver state
        at (t_a, y_a) (exact resume)."""
        from mbcore.integrate import integrate
        jac = self.jac
        if (jac is None and getattr(self.crhs, "analytic_jac", False)
                and getattr(self.a.icls, "implicit", False)):
            jac = self.rhs_jacobian        # the compiled loops' Jacobian (same steps)
        self._src, self._py, self._py_stepped = "python", None, False
        self._accepted(t_a, y_a)
        return integrate(self.a.icls, self.rhs, (t_a, self.t1), y_a, t_out=outs,
                         store=False, on_output=self.output, events=self.events,
                         post_step=self.post, on_step=self.on_step, jac=jac,
                         on_commit=self.commit,
                         max_steps_per_output=self.a.settings["max_steps"],
                         state=state,
                         step_state=self._python_state if self.ck is not None else None,
                         problem_state=(None if self._fs is None else
                                        (self._problem_state, self._set_problem_state)),
                         **self.a.integrator_options)

    def _python_state(self, state):
        self._py = (state, self.base.copy())

    def _problem_state(self):
        """The formulation's own state now (Python part and the compiled
        right-hand side's warm start), or None when it has none."""
        if self._fs is None:
            return None
        c = self.form.compiled
        return {"python": self.form.resume_state(),
                "rhs": None if c is None else c.warm_state()}

    def _set_problem_state(self, state):
        if state is None:
            return
        self.form.set_resume_state(state["python"])
        if state["rhs"] is not None:
            self.form.compiled.load_state(state["rhs"])

    def _step_start(self):
        """Start time of the compiled loop's current step with outputs (None: none
        yet)."""
        if self._src in STEPLOOP_KINDS:
            return self.mshist.get("t")
        t = float(self.ystep[self.form.size + 3])
        return None if t != t else t

    def rhs_jacobian(self, t, y):
        """df/dy of :meth:`rhs` for an implicit integrator on the Python driver when the
        compiled DI/CS right-hand side has its semi-analytic Jacobian
        (``CompiledRHS.jacobian``, the matrix of the compiled bdf / θ loops: spec
        Nikravesh (1988), §12.4, §13.3, algorithm DI-4; NumPy reference ``mbcore.solve.dijac.di_jacobian``), so
        that both loops take the same steps.  Where it fails (a singular or failing
        evaluation) or no longer applies: forward differences of :meth:`rhs`, whose
        Python path raises the named error (or uses least-squares multipliers)."""
        N = y.size
        out = np.empty((N, N))
        if (self.crhs is not None and self.form.compiled_ready()
                and self.crhs.jacobian(t, np.ascontiguousarray(y, dtype=float), out) == 0):
            return out
        from mbcore.integrate.common import num_jac
        return num_jac(self.rhs, t, np.array(y, dtype=float), self.rhs(t, y).copy())

    def _segment_rows(self, t_a, y_a, outs):
        """:meth:`segment`, then the rows :class:`_JointRows` holds (also on errors:
        a failed run keeps its rows)."""
        try:
            return self.segment(t_a, y_a, outs)
        finally:
            if self.jrows is not None:
                self.jrows.flush()

    def _handover(self, t_a, y_a, outs, why=None):
        # the compiled loop stopped (``why``: a failing evaluation, a start it cannot
        # take, or a stop condition met in the next step, which the Python driver
        # locates): the Python driver continues the segment; the integrator channel
        # keeps counting from the compiled part.  But for a stop condition,
        # stats.loop says that both ran (stats.loop_handover_t: the first time)
        if self.batch is not None:
            self.batch.flush()               # the rows so far, in order
        self.base[:] = self.base + self.cstat[2:]
        if why != "stop_condition":
            self.a.stats["loop"] = "compiled+python"
            self.a.stats.setdefault("loop_handover_t", float(t_a))
        return self.python_segment(t_a, y_a, outs)

    def segment(self, t_a, y_a, outs):
        self.seg_t0 = t_a
        start, self._start = self._start, None
        self.seg_compiled = False
        if self.ystep is not None:
            self.ystep[:] = np.nan           # no step state of this segment yet
            self.mshist.clear()
            self._seg = (float(t_a), np.array(y_a, dtype=float), self.base.copy(),
                         self._problem_state())
            self._fs_key, self._fs_top = None, None
            if self._fs is not None:
                self._fs = self._seg[3]["python"]
        if start and "python" in start:      # resume inside a Python driver segment
            return self.python_segment(t_a, y_a, outs, state=start["python"])
        self._accepted(t_a, y_a)
        compiled = self.loop is not None and self.form.compiled_ready()
        if start and start.get("kind") not in (None, "python") and not (
                compiled and start["kind"] == ("rk" if self.loop in ("fixed", "embedded")
                                               else self.loop)):
            raise AnalysisError(f"checkpoint: its step state is of the compiled "
                                f"'{start['kind']}' loop; this run uses "
                                f"{self.loop if compiled else 'the Python driver'}", t_a)
        if not compiled:
            return self.python_segment(t_a, y_a, outs)
        self._src = self.loop
        self.seg_compiled = True
        self.cstat[:] = 0.0
        if start and start.get("grid0") is not None:
            self.seg_t0 = start["grid0"]         # the grid continues (fixed steps)
        if self.batch is None:
            return run_compiled(self.loop, self.a.icls, self.form, t_a, self.t1, y_a, outs,
                                self.a.integrator_options, self._output_compiled,
                                self.cstat, self._handover, stops=self.stop_specs,
                                jac=self.jac, start=start, ystep=self.ystep,
                                hist=self.mshist, max_steps=self.a.settings["max_steps"],
                                on_commit=self.commit)
        try:
            return run_compiled(self.loop, self.a.icls, self.form, t_a, self.t1, y_a, outs,
                                self.a.integrator_options, self.batch.on_output,
                                self.cstat, self._handover, stops=self.stop_specs,
                                jac=self.jac, start=start, ystep=self.ystep,
                                hist=self.mshist, max_steps=self.a.settings["max_steps"],
                                on_commit=self.commit)
        finally:
            self.batch.flush()               # also on errors: a failed run keeps its rows

    # -- resume from a checkpoint (mbcore.analysis.checkpoint) -----------------------------------
    def resume_state(self) -> dict | None:
        """The state from which a resume redoes the step whose outputs are being
        recorded (mbcore.analysis.checkpoint: ``state.step``): ``loop`` ('segment': the start
        of the segment, no step with outputs yet; 'rk', 'abm', 'bdf', 'theta',
        'genalpha', 'fixedgrid', 'lie': the
        compiled loop's state at the step's start; 'python': the Python driver's),
        ``t``, ``y``, ``counts`` (steps, rejected steps, evaluations before it) and
        the loop's own state.  None: not available (a Python-driver integrator
        without ``state_fields``)."""
        if self._seg is None:
            return None
        t_seg, y_seg, c_seg, f_seg = self._seg
        segment = {"loop": "segment", "t": t_seg, "y": y_seg, "counts": c_seg,
                   "formulation": f_seg}
        if self._src == "python":
            if self._py is None:
                return None if self._py_stepped else segment
            state, base = self._py
            return {"loop": "python", "t": state["integrator"]["t"],
                    "y": state["integrator"]["y"],
                    "counts": base + np.asarray(state["counts"], dtype=float),
                    "driver": state}
        if self._src in STEPLOOP_KINDS:
            h = self.mshist
            if "t" not in h:
                return segment
            if h["t"] is None:
                return None
            rec = {"loop": self._src, "t": h["t"], "y": h["y"],
                   "counts": self.base + h["counts"], "history": dict(h)}
        elif self._src is None:
            return None
        else:
            ys = self.ystep
            N = self.form.size + 1
            if np.isnan(ys[N + 2]):
                return segment
            rec = {"loop": "rk", "t": float(ys[N + 2]), "y": ys[N + 5:2 * N + 5].copy(),
                   "f": ys[2 * N + 5:3 * N + 5].copy(), "h": float(ys[4 * N + 5]),
                   "grid0": float(ys[4 * N + 6]), "istep": int(ys[N + 4]) - 1,
                   "counts": self.base + ys[4 * N + 7:4 * N + 10]}
        if self._fs is not None:             # the formulation's at the step's start
            c = self.form.compiled
            rec["formulation"] = {"python": self._fs_top,
                                  "rhs": None if c is None else c.saved_state()}
        return rec

    def _restore_step(self, rec: dict, t_row: float):
        """Resume from a step record (:meth:`resume_state`): the loop starts at the
        step's start and redoes it (mbcore.analysis.checkpoint.resume has cut the file's rows
        after that start: they are recorded again)."""
        loop = rec["loop"]
        if loop not in ("segment", "python", "rk") + STEPLOOP_KINDS:
            raise AnalysisError(f"checkpoint: unknown loop '{loop}'", t_row)
        self.base[:] = rec["counts"]
        self.istat[2:] = self.base
        fstate = rec.get("formulation")
        if fstate is not None:
            if loop == "segment":            # its state before the segment's start-up
                self._set_problem_state(fstate)
            elif fstate["python"] is not None:
                self.form.set_resume_state(fstate["python"])
        if loop == "rk":
            self._start = {"h_abs": float(rec["h"]), "exact": True, "f0": rec["f"],
                           "grid0": float(rec["grid0"]), "istep0": int(rec["istep"])}
        elif loop == "python":
            self._start = {"python": rec["driver"]}
        elif loop != "segment":
            self._start = {"history": rec["history"]}
        if self._start is not None:
            self._start["kind"] = loop
            if fstate is not None and loop != "python":
                self._start["rhs_state"] = fstate["rhs"]   # after the loop's start-up
        return float(rec["t"]), np.array(rec["y"], dtype=float)

    def _restore(self, ck: dict):
        """The state of checkpoint ``ck`` (mbcore.analysis.checkpoint.Checkpoint.state):
        formulation (partition, used rows) re-initialised at its (q, qd), y exactly
        as stored, statistics continued; the first segment continues the fixed-step
        grid, starts with the stored step size or (compiled multistep loops) restores
        the stored integrator history."""
        a, form, t = self.a, self.form, float(ck["t"])
        q, qd = np.array(ck["q"], dtype=float), np.array(ck["qd"], dtype=float)
        st = ck["state"]
        if self.joints is not None:          # the joints channel's whole turns
            self.joints.set_state(st.get("joints"))
        if self.switches is not None and st.get("switching") is not None:
            self.switches.set_state(st["switching"])
            a.set_independent_rows(self.switches.rows(), q, t)
            self._rows_changed()
        elif st.get("rows") is not None:
            a.set_independent_rows(np.array(st["rows"], dtype=int))
            self._rows_changed()
            from mbcore.solve.redundancy import RemovedRows
            a.removed_rows = RemovedRows(self.sysm, st["rows"], q, t, a.settings["rtol"],
                                         t_removed=self.t0)
        if st.get("partition") is not None and hasattr(form, "_user_partition"):
            form.settings["independent"] = ",".join(st["partition"])
            form.v = None
        yf, _ = form.initialize(q, qd, t)
        y = np.array(ck["y"], dtype=float)
        t_row = t
        if y.size != yf.size + 1:
            raise AnalysisError(f"checkpoint state has {y.size} values, the formulation "
                                f"'{form.name}' needs {yf.size + 1}", t)
        a.restarts = int(st.get("restarts", 0))
        self.last.update(t=t_row, q=q, qd=qd, W=float(y[-1]))
        rec = ck.get("step")
        if rec is not None:                  # the step's state: exact
            self.event(t_row, "resume", f"resumed from the checkpoint at t = {t_row!r} "
                       f"(the integrator step from t = {float(rec['t'])!r} redone)")
            return self._restore_step(rec, t_row)
        self.event(t_row, "resume", f"resumed from the checkpoint at t = {t_row!r} (the "
                   f"checkpoint holds no integrator step state: the resumed run agrees "
                   f"with an uninterrupted one to the integration tolerance)")
        # a checkpoint without the step's state (an older file): from the end of the
        # step containing the output (t_state) or the output itself
        if st.get("t_state") is not None:    # the exact end state of the step
            t = float(st["t_state"])
        self.base[:] = st.get("counts", [0, 0, 0])
        self.istat[2:] = self.base
        h = float(st.get("h") or 0.0)
        self._start = {"h_abs": h if h > 0 else None}
        if st.get("t_state") is not None and st.get("h_next"):
            self._start.update(h_abs=float(st["h_next"]), exact=True)
        if st.get("t_state") is not None and ck.get("history"):
            self._start["history"] = ck["history"]     # multistep history (exact)
        step = a.integrator_options.get("step")
        if (st.get("compiled") and step and st.get("grid0") is not None
                and st["grid0"] + st["steps"] * step == t):
            self._start.update(grid0=float(st["grid0"]), istep0=int(st["steps"]))
        return t, y

    # -- stage 5: the run --------------------------------------------------------------
    def execute(self):
        a, form, event = self.a, self.form, self.event
        t_out = self.output_times()
        t_cur = self.t0
        if self.resume is None:
            y0 = self.initial_state()
        else:                                 # mbcore.analysis.checkpoint: from a checkpoint
            t_cur, y0 = self._restore(self.resume)
        self.size_buffers()
        self.t_out = t_out
        if self.ck is not None:              # run_rk's long ystep layout (size + 1 = N)
            self.ystep = np.full(4 * (form.size + 1) + 10, np.nan)
            self.mshist = {}
            c = form.compiled
            if (type(form).resume_state is not Formulation.resume_state
                    or (c is not None and c.warm_state() is not None)):
                self._fs = form.resume_state()       # a stateful formulation
        self._setup_segments(y0)
        self.bar = _progress(len(t_out), self.progress_enabled)
        self.batch = self._row_block()
        for ev_ in self.stops if self.resume is None else ():   # holds at t_start
            if ev_(self.t0, y0) <= 0.0:
                self.output(self.t0, y0)
                if self.jrows is not None:
                    self.jrows.flush()
                event(self.t0, "stop", f"stop condition '{ev_.name[5:]}' met at t_start")
                a.stats["stopped_by"] = ev_.name[5:]
                self.bar.close()
                return
        impacts = 0
        recent: list[float] = []
        y_cur, outs = y0, (t_out if self.resume is None else t_out[t_out > t_cur])
        restarts_here = 0
        rows_again = None                    # the last output the rows were re-chosen at
        last = self.last
        try:
            while True:
                try:
                    res = self._segment_rows(t_cur, y_cur, outs)
                except SingularJacobianError as exc:
                    # redundant rows: the kept ones turned dependent between outputs
                    # (the redundant set moved); choose them again at the last output
                    # and restart there, once per output
                    self.base[:] = self.istat[2:]
                    if (a.removed_rows is None or not last or last["t"] == rows_again
                            or not a.reselect_rows(last["q"], last["t"], str(exc),
                                                   event)):
                        raise
                    rows_again = last["t"]
                    self._rows_changed()
                    t_cur, y_cur = a.restart(last, "redundant rows chosen again", event)
                    outs = t_out[t_out > t_cur]
                    if outs.size == 0:
                        break
                    continue
                except RestartRequest as exc:
                    self.base[:] = self.istat[2:]
                    # the formulation cannot continue: restart from the last accepted
                    # step (a formulation with a step-end hook) or the last output
                    t_r = last.get("t", t_cur)
                    if self.commit is not None and self._acc is not None:
                        t_r = self._acc[0]
                    if not last or (t_r == t_cur and restarts_here >= 2):
                        explain = getattr(form, "explain_failure", None)
                        if explain is not None:
                            explain()        # a named cause it foresaw (cp: a singularity)
                        raise AnalysisError(f"formulation '{form.name}' cannot continue: "
                                            f"{exc.reason}", t_r) from None
                    restarts_here = restarts_here + 1 if t_r == t_cur else 1
                    if self.commit is not None and self._acc is not None:
                        try:
                            t_cur, y_cur = a.restart_at(self._acc[0], self._acc[1].copy(),
                                                        exc.reason, event)
                        except RestartRequest as again:
                            # the accepted step is itself where the formulation fails
                            # (a multistep method evaluates f at the value it accepts)
                            raise AnalysisError(
                                f"formulation '{form.name}' cannot continue: "
                                f"{exc.reason}; the last accepted step fails as well "
                                f"({again.reason}): '{a.icls.name}' accepted a state "
                                f"where the formulation's coordinates break down; a "
                                f"Runge-Kutta integrator (dopri5, dop853) stops at the "
                                f"failing stage instead", t_r) from None
                    else:
                        t_cur, y_cur = a.restart(last, exc.reason, event)
                    # (outputs already recorded after a restart point are not redone)
                    outs = t_out[t_out > max(t_cur, last.get("t", t_cur))]
                    if outs.size == 0:
                        break
                    continue
                self.base[:] = self.istat[2:]
                st_ = res.stats.as_dict() if hasattr(res.stats, "as_dict") else {}
                for k, v in st_.items():
                    if isinstance(v, (int, float)) and v is not None and k.startswith("n"):
                        self.totals[k] = self.totals.get(k, 0) + v
                if res.status == 2:          # the formulation asked to re-partition
                    t_cur, y_cur = a.restart(last, last.pop("reason", ""), event)
                    outs = t_out[t_out > t_cur]
                    if outs.size == 0:
                        break
                    continue
                if res.status == 1 and res.events[-1].name.startswith("stop:"):
                    rec = res.events[-1]
                    event(float(rec.t), "stop", f"stop condition '{rec.name[5:]}' met")
                    a.stats["stopped_by"] = rec.name[5:]
                    break
                if res.status == 1 and res.events[-1].name.startswith("switch:"):
                    rec = res.events[-1]
                    t_cur, y_cur = float(rec.t), np.array(rec.y, dtype=float)
                    y_cur = a._switch(self.switches, self.switches.names.index(
                        rec.name[7:]), t_cur, y_cur, event)
                    self._rows_changed()
                    outs = t_out[t_out > t_cur]
                    if t_cur >= self.t1 or outs.size == 0:
                        break
                    continue
                if res.status != 1 or self.contacts is None:
                    break
                # a contact closed: apply the impact map and restart (TAM 674 (2003), lectures of 5 and 17 February)
                rec = res.events[-1]
                t_cur, y_cur = float(rec.t), np.array(rec.y, dtype=float)
                y_cur = a._impact(self.contacts, t_cur, y_cur, event)
                impacts += 1
                span = 1e-6 * (self.t1 - self.t0)
                recent = [x for x in recent if x > t_cur - span] + [t_cur]
                if len(recent) > 20:
                    raise AnalysisError(f"impact chattering: {len(recent)} impacts within "
                                        f"{span:.3g} s (a contact comes to rest); "
                                        f"model resting contact with a compliant contact force "
                                        f"or a constraint", t_cur)
                outs = t_out[t_out > t_cur]
                if t_cur >= self.t1 or outs.size == 0:
                    break
        finally:
            self.bar.close()
        st = a.stats
        st.update({f"integrator_{k}": v for k, v in self.totals.items()})
        st["impacts"] = impacts
        st["integrator"] = a.icls.name
        st["formulation"] = form.name
        st["restarts"] = a.restarts
        st["rank_deficient_evaluations"] = form.solver.rank_deficient_events
        if a.removed_rows is not None:
            st["redundant_check"] = a.removed_rows.worst
        if hasattr(form, "projections"):
            st["projections"] = form.projections
        if getattr(form, "drift_gate", None) is not None:
            k = st["drift_projections"] = form.drift_projections
            if k:
                event(float(last.get("t", t_cur)), "info", (
                    f"constraint drift: the state was projected onto the constraints "
                    f"after {k} step(s) whose position violation passed "
                    f"{form.drift_gate:.3g} (formulation '{form.name}', drift: project)"))
