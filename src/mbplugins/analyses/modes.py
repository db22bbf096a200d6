"""Linearisation and eigen-analysis about a static equilibrium or a steady motion
(docs/analyses.md "Linearisation and modes").

``about: motion`` linearises about the model's assembled initial state with its
velocities, a steady motion (:mod:`.linearize_motion`: nonholonomic rows allowed,
cyclic coordinates removed); the rest of this docstring is the equilibrium case.

The analysis ``modes``: (1) the equilibrium, by the ``static`` analysis (any of its
methods) or, with ``equilibrium: given``, the model's assembled initial state,
which must then be one; (2) the independent coordinates and the linear model
(:mod:`.linearize`): state-space A, B, C, D for the named inputs and outputs, the
reduced M, K, C; (3) its eigen-analysis (:func:`mbcore.analysis.linear.modal_analysis`):
frequencies, damping ratios, mode shapes in the independent and in all
coordinates.  The equilibrium row is recorded as by ``static`` (channels q, lam,
reactions...); the linear model and the modes go to the result group ``modes``
(Reporter rule 6; HDF5 ``/modes``, docs/results.md).
"""
from __future__ import annotations

import numpy as np

from mbcore.analysis.base import Analysis
from mbcore.errors import AnalysisError, ConvergenceError, ModelError
from mbcore.elements.schema import Param

from mbcore.solve.assembly import assemble

from .linearize import Chart, linearize
from .linearize_motion import MotionChart, linearize_motion
from .static import StaticAnalysis

#: the settings passed on to the static analysis
_STATIC_KEYS = ("t_start", "method", "assemble", "tolerance", "max_iterations")


class ModesAnalysis(Analysis):
    name = "modes"
    description = ("linearisation about a static equilibrium or a steady motion: state "
                   "space A, B, C, D, natural frequencies, damping ratios and mode shapes")
    settings_schema = {
        **{key: StaticAnalysis.settings_schema[key] for key in _STATIC_KEYS},
        "about": Param("choice", "'equilibrium': a static equilibrium (below); 'motion': "
                       "the assembled initial state with its velocities, a steady motion "
                       "(nonholonomic constraints allowed)", default="equilibrium",
                       choices=("equilibrium", "motion")),
        "cyclic": Param("strings", "about a motion: position increments that advance "
                        "along it and are removed from the state (e.g. frame.x, "
                        "frame.rz, wheel.ry)", default=()),
        "independent_speeds": Param("strings", "about a motion: the independent speeds "
                                    "(default: automatic)", required=False),
        "equilibrium": Param("choice", "'static': solve the static equilibrium first; "
                             "'given': the (assembled) initial state is the equilibrium",
                             default="static", choices=("static", "given")),
        "coordinates": Param("choice", "independent coordinates: a partition of the "
                             "coordinates (pivoted QR of Phi_q) or the null space of Phi_q",
                             default="partition", choices=("partition", "null_space")),
        "independent": Param("strings", "the independent coordinates (partition; "
                             "default: automatic)", required=False),
        "linearization": Param("choice", "'analytic': force Jacobians and the reduced "
                               "M, K, C; 'numeric': central differences of the "
                               "constrained equations of motion", default="analytic",
                               choices=("analytic", "numeric")),
        "inputs": Param("strings", "inputs (columns of B): <body>.fx, .fy, .torque "
                        "(spatial: .fz, .nx, .ny, .nz), <force element>.scale",
                        default=()),
        "outputs": Param("strings", "outputs (rows of C, D): coordinates, velocities "
                         "(suffix d), accelerations (dd), point and force-element outputs "
                         "(default: the independent coordinates)", default=()),
        "zero_tolerance": Param("number", "eigenvalues below this fraction of the largest "
                                "are rigid-body modes", default=1e-6, positive=True),
    }

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        st = self.settings
        self.motion = st["about"] == "motion"
        if not self.motion:
            if st["cyclic"] or st.get("independent_speeds"):
                raise ModelError("settings.about", "cyclic coordinates and independent "
                                                   "speeds need about: motion")
            from mbcore.solve.nonholonomic import refuse_velocity_rows
            refuse_velocity_rows(system, "settings.about", "linearisation about an "
                                 "equilibrium", "use about: motion (a steady motion with "
                                 "its velocities)")
        static = {key: st[key] for key in _STATIC_KEYS}
        if st["equilibrium"] == "given":
            static["method"] = "given"
        self.static = StaticAnalysis(system, static)
        self.linear_model = None
        self.modes = None

    def channels(self):
        return self.static.channels()

    def run(self, record, event, progress=False):
        if self.motion:
            return self._run_motion(record, event)
        s, st = self.system, self.settings
        t = st["t_start"]
        try:
            self.static.run(record, event, progress)
        except ConvergenceError as exc:
            raise ConvergenceError(f"no static equilibrium found ({exc.reason}); "
                                   f"linearisation needs one", t) from exc
        q, lam = self.static.q, self.static.lam
        self._check_equilibrium(q, t)
        chart = Chart(s, q, t, st["coordinates"], st["independent"] or ())
        info = {"equilibrium": st["equilibrium"], "coordinates": st["coordinates"],
                "linearization": st["linearization"], "zero_tolerance": st["zero_tolerance"]}
        lm = linearize(s, q, lam, t, chart, st["inputs"], st["outputs"],
                       st["linearization"], info)
        modes = lm.modes()
        self.linear_model, self.modes = lm, modes
        group = getattr(record, "group", None)
        if group is not None:
            data, attrs = lm.to_group(modes)
            group("modes", data, attrs)
        osc = [f"{f:.6g} Hz" for f, kd in zip(modes.frequency, modes.kind) if kd != "rigid"]
        event(t, "modes", f"{len(modes)} modes ({modes.n_rigid} rigid); lowest: "
                          f"{', '.join(osc[:3]) or 'none'}")
        if np.any(modes.unstable):
            event(t, "warning", f"the equilibrium is unstable: {int(np.sum(modes.unstable))} "
                                f"mode(s) grow")
        self.stats = {**self.static.stats, "dof": chart.k, "n_modes": len(modes),
                      "n_rigid": modes.n_rigid, "unstable": int(np.sum(modes.unstable)),
                      "independent": ",".join(chart.names)}

    def _check_equilibrium(self, q: np.ndarray, t: float) -> None:
        """Time-independent constraints at t and vanishing reduced forces (the
        ``given`` state, or a static solution within its tolerance)."""
        s = self.system
        if s.m:
            nu = s.nu(q, t)
            if np.max(np.abs(nu)) > 1e-12 * (1.0 + float(np.max(np.abs(q)))):
                r = int(np.argmax(np.abs(nu)))
                raise AnalysisError(f"constraint '{s.constraint_names[r]}' prescribes a "
                                    f"motion at t (nu = {nu[r]:.6g}): there is no "
                                    f"equilibrium to linearise about", t)
        fr = self.static.stats.get("force_residual", 0.0)
        Q = s.forces(q, np.zeros(s.n), t)
        scale = 1.0 + float(np.max(np.abs(Q))) if Q.size else 1.0
        if fr > 1e-8 * scale:
            what = "given state" if self.settings["equilibrium"] == "given" else \
                "static solution"
            raise AnalysisError(f"the {what} is not an equilibrium: the force residual "
                                f"Phi_q^T lam + Q is {fr:.3g} (scale {scale:.3g}); use "
                                f"equilibrium: static", t)

    def _run_motion(self, record, event) -> None:
        """About the assembled initial state with its velocities (a steady motion)."""
        s, st = self.system, self.settings
        t = st["t_start"]
        init = s.initial_state(t)
        q, qd = init.q, init.qd
        if s.m and st["assemble"]:
            rep = assemble(s, q, qd, t)
            q, qd = rep.q, rep.qd
            event(t, "assembly", rep.summary())
        chart = MotionChart(s, q, qd, t, st["independent"] or (),
                            st.get("independent_speeds") or (), st["cyclic"])
        info = {"about": "motion", "coordinates": "partition",
                "linearization": "numeric", "zero_tolerance": st["zero_tolerance"]}
        lm, qdd, lam = linearize_motion(s, q, qd, t, chart, st["inputs"], st["outputs"],
                                        info)
        modes = lm.modes()
        self.linear_model, self.modes = lm, modes
        self._record_reference(record, lm.q, qd, qdd, lam, t)
        group = getattr(record, "group", None)
        if group is not None:
            data, attrs = lm.to_group(modes)
            group("modes", data, attrs)
        event(t, "modes", f"about a steady motion: {len(modes)} modes ({modes.n_rigid} "
                          f"rigid); eigenvalues with the largest real part: "
                          + ", ".join(f"{z:.6g}" for z in sorted(
                              modes.eigenvalue, key=lambda z: -z.real)[:3]))
        if np.any(modes.unstable):
            event(t, "warning", f"the motion is unstable: {int(np.sum(modes.unstable))} "
                                f"mode(s) grow")
        self.stats = {"about": "motion", "dof": chart.kp, "speeds": chart.ku,
                      "n_modes": len(modes), "n_rigid": modes.n_rigid,
                      "unstable": int(np.sum(modes.unstable)),
                      "independent": ",".join(lm.independent),
                      "independent_speeds": ",".join(chart.u_names)}

    def _record_reference(self, record, q, qd, qdd, lam, t) -> None:
        """The reference state's row, in the channels of the static analysis."""
        s = self.system
        phi = s.phi(q, t)[s.holonomic] if s.m else np.zeros(0)
        data = {"q": q, "lam": lam, "reactions": s.reactions(q, t, lam),
                "energy": np.array([s.potential_energy(q, t)]),
                "solver": np.array([0.0, 0.0, float(np.max(np.abs(phi), initial=0.0))])}
        if s.local_reaction_labels:
            data["reactions_local"] = s.reactions_local(q, t, lam)
        if s.force_labels:
            data["forces"] = s.force_outputs(q, qd, t)
        if s.point_names:
            data["points"] = s.point_kinematics(q, qd, qdd).ravel()
        if s.angular_labels:
            data["angular"] = s.angular_kinematics(q, qd, qdd).ravel()
        record(t, data)
