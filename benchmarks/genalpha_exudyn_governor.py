"""Generalized-α against Exudyn's on IFToMM A05, the stiff flyball governor (JSON).

    python benchmarks/genalpha_exudyn_governor.py [--repeat 5] [--quick]

The governor of ``benchmarks/accuracy_problems.py`` (``governor_model``: IFToMM
benchmark A05, González et al., Multibody System Dynamics 16 (2006) 179–190, with the
square rods of the OpenSim implementation and the 5 kg balls merged into their rods;
springs k = 8e5 N/m, c = 4e4 N s/m) is integrated over 1 s with a fixed step h by

* mbcore ``integrator: genalpha``, rho_inf 0.8 (Chung & Hulbert (1993)):
  ``formulation: stiff`` (the index-3 equations, Arnold & Brüls (2007); compiled loop,
  ``run_genalpha`` with the DAE Jacobian called back) with its default Newton
  tolerance and with ``newton_rtol: 1e-8``, and ``formulation: di`` (the ODE,
  compiled loop), defaults;
* Exudyn (``pip install exudyn``; skipped when missing): the same bodies on
  ``NodeRigidBodyEP`` (Euler parameters, their norm an index-3 constraint) with
  ``ObjectRigidBody``, ``ObjectJointRevoluteZ`` (the axis on the ground, the rods on
  the axis), ``ObjectJointPrismaticX`` (the slider on the axis),
  ``ObjectConnectorSpringDamper`` and ``LoadMassProportional`` gravity, the same
  initial positions and velocities; ``SolveDynamic`` with its default solver
  (generalized-α, index 3, modified Newton, its default tolerances), spectral radius
  0.8, the same h, no files; ball and slider positions by in-memory sensors every
  0.01 s.

Model check: Exudyn with a small step (``--check-step``, default 1e-5) against
mbcore's reference (di + dop853, rtol 1e-12, ``accuracy_problems.governor``).

Error: the largest deviation over the outputs t = 0.01, 0.02, ..., 1 s of the slider
height s (the group ``s`` of the accuracy benchmark), and of the two balls' centres
(``balls``), from that reference.  Wall time: the integration alone (mbcore:
``stats['wall_time']`` of ``mbcore.run``, which includes the recording of the 100
output rows of every channel; ``wall_q_outputs_s``: the same run recording the 100
rows of the positions q alone (``record: [q]``, like Exudyn's three position sensors);
``wall_no_outputs_s``: the same run with outputs at
0 and 1 s only, the same steps; ``--output-rows``: mbcore's ``settings.output_rows``,
default ``block``, ``reference`` for the row-by-row path; Exudyn: ``SolveDynamic`` with
its three sensors),
median of ``--repeat`` interleaved rounds.  A variant whose Newton iteration fails at some h is
reported with the failure and not run again at that h.  From the work–precision
curves, the time of each code at the error levels ``--levels`` of s and of the
balls (log-log interpolation between measured steps; no extrapolation) and the
ratios Exudyn/mbcore there.  Prints JSON, asserts nothing."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mbcore  # noqa: E402
from accuracy_problems import (GOV_ZC, GV_RHO, G, governor_measure,  # noqa: E402
                               governor_model, quat_axis_angle, rot, tight_reference)

T_END = 1.0
OUTPUT_STEP = 0.01


# ------------------------------------------------------------------ mbcore
#: mbcore's ``settings.output_rows`` (``--output-rows``)
OUTPUT_ROWS = {"mode": "block"}


def mbcore_run(h: float, formulation: str, **options) -> dict:
    settings = {"t_end": T_END, "output_step": OUTPUT_STEP, "formulation": formulation,
                "integrator": "genalpha", "step": h, "output_rows": OUTPUT_ROWS["mode"],
                "integrator_options": {"rho_inf": 0.8, **options}}
    res = mbcore.run(governor_model(), analysis="dynamic", settings=settings)
    m = governor_measure(res)
    st = res.stats
    # the same steps with outputs at 0 and T_END only (h divides the output step):
    # the integration without the recording of 100 rows of every channel
    quiet = mbcore.run(governor_model(), analysis="dynamic",
                       settings={**settings, "output_step": T_END})
    # like Exudyn's three position sensors: the 100 rows of the positions q alone
    positions = mbcore.run(governor_model(), analysis="dynamic",
                           settings={**settings, "record": ["q"]})
    mq = governor_measure(positions)
    assert np.array_equal(mq["s"][:, 0], m["s"][:, 0])     # the same steps
    return {"wall": float(st["wall_time"]), "wall_quiet": float(quiet.stats["wall_time"]),
            "wall_q": float(positions.stats["wall_time"]),
            "t": np.asarray(res.t), "s": m["s"][:, 0],
            "balls": m["balls"], "loop": st.get("loop"),
            "steps": int(st["integrator_nsteps"]),
            "newton_iter": int(st["integrator_nnewton_iter"]),
            "jacobians": int(st["integrator_njev"]),
            "newton_failures": int(st["integrator_nnewton_failures"])}


# ------------------------------------------------------------------ Exudyn
def _pdot(p: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Euler parameters' rate for the global angular velocity w: 1/2 (0, w) (x) p
    (Nikravesh (1988), §6.4)."""
    return 0.5 * np.r_[-(w @ p[1:]), p[0] * w + np.cross(w, p[1:])]


def exudyn_build(h: float, rho: float = 0.8):
    """The governor of ``accuracy_problems.governor_model`` in Exudyn (same masses,
    inertias, joint points and axes, springs, gravity, initial conditions)."""
    import exudyn as exu
    from exudyn.itemInterface import (LoadMassProportional, MarkerBodyMass,
                                      MarkerBodyPosition, MarkerBodyRigid,
                                      NodeRigidBodyEP, ObjectConnectorSpringDamper,
                                      ObjectGround, ObjectJointPrismaticX,
                                      ObjectJointRevoluteZ, ObjectRigidBody, SensorBody)
    W = 2.0 * np.pi
    m_bar = 1.0 * 0.01 * 0.01 * GV_RHO
    J_ax = m_bar * (0.005 ** 2 + 0.5 ** 2) / 3.0
    J_ax3 = m_bar * (2 * 0.005 ** 2) / 3.0
    m_base = 0.1 ** 3 * GV_RHO
    J_base = m_base * (2 * 0.05 ** 2) / 3.0
    mr = m_bar + 5.0
    zc = GOV_ZC
    Jt = J_ax + m_bar * (0.5 - zc) ** 2 + 5.0 * (1.0 - zc) ** 2
    w = np.array([0.0, 0.0, W])
    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    ground = mbs.AddObject(ObjectGround())

    def body(mass, J, r, p, v):
        p = np.asarray(p, float)
        nd = mbs.AddNode(NodeRigidBodyEP(referenceCoordinates=[*r, *p],
                                         initialVelocities=[*v, *_pdot(p, w)]))
        b = mbs.AddObject(ObjectRigidBody(physicsMass=mass,
                                          physicsInertia=[*J, 0.0, 0.0, 0.0],
                                          nodeNumber=nd))
        mk = mbs.AddMarker(MarkerBodyMass(bodyNumber=b))
        mbs.AddLoad(LoadMassProportional(markerNumber=mk, loadVector=[0.0, 0.0, -G]))
        return b

    ident = [1.0, 0.0, 0.0, 0.0]
    axis = body(m_bar, [J_ax, J_ax, J_ax3], [0.0, 0.0, 0.5], ident, [0.0, 0.0, 0.0])
    base = body(m_base, [J_base] * 3, [0.0, 0.0, 0.5], ident, [0.0, 0.0, 0.0])
    mbs.AddObject(ObjectJointRevoluteZ(markerNumbers=[
        mbs.AddMarker(MarkerBodyRigid(bodyNumber=ground, localPosition=[0.0, 0.0, 0.0])),
        mbs.AddMarker(MarkerBodyRigid(bodyNumber=axis, localPosition=[0.0, 0.0, -0.5]))]))
    x_along_z = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    mbs.AddObject(ObjectJointPrismaticX(
        markerNumbers=[mbs.AddMarker(MarkerBodyRigid(bodyNumber=axis,
                                                     localPosition=[0.0, 0.0, 0.0])),
                       mbs.AddMarker(MarkerBodyRigid(bodyNumber=base,
                                                     localPosition=[0.0, 0.0, 0.0]))],
        rotationMarker0=x_along_z, rotationMarker1=x_along_z))
    z_along_y = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
    sensors = [mbs.AddSensor(SensorBody(bodyNumber=base, localPosition=[0.0, 0.0, 0.0],
                                        outputVariableType=exu.OutputVariableType.Position,
                                        storeInternal=True, writeToFile=False))]
    for sgn in (1.0, -1.0):
        p0 = quat_axis_angle([0, 1, 0], sgn * (np.pi / 2 + np.radians(30.0)))
        rc = np.array([sgn * 0.05, 0.0, 1.0]) + zc * (rot(p0) @ np.array([0.0, 0.0, 1.0]))
        rod = body(mr, [Jt, Jt, J_ax3], rc, p0, np.cross(w, rc))
        pin_i = mbs.AddMarker(MarkerBodyRigid(bodyNumber=axis,
                                              localPosition=[sgn * 0.05, 0.0, 0.5]))
        pin_j = mbs.AddMarker(MarkerBodyRigid(bodyNumber=rod, localPosition=[0.0, 0.0, -zc]))
        mbs.AddObject(ObjectJointRevoluteZ(markerNumbers=[pin_i, pin_j],
                                           rotationMarker0=z_along_y,
                                           rotationMarker1=z_along_y))
        spr_i = mbs.AddMarker(MarkerBodyPosition(bodyNumber=base,
                                                 localPosition=[sgn * 0.05, 0.0, 0.0]))
        spr_j = mbs.AddMarker(MarkerBodyPosition(bodyNumber=rod,
                                                 localPosition=[0.0, 0.0, 0.5 - zc]))
        mbs.AddObject(ObjectConnectorSpringDamper(markerNumbers=[spr_i, spr_j],
                                                  referenceLength=0.5, stiffness=8e5,
                                                  damping=4e4))
        sensors.append(mbs.AddSensor(SensorBody(
            bodyNumber=rod, localPosition=[0.0, 0.0, 1.0 - zc],
            outputVariableType=exu.OutputVariableType.Position, storeInternal=True,
            writeToFile=False)))
    mbs.Assemble()
    s = exu.SimulationSettings()
    s.timeIntegration.numberOfSteps = int(round(T_END / h))
    s.timeIntegration.endTime = T_END
    s.timeIntegration.generalizedAlpha.spectralRadius = rho
    s.timeIntegration.verboseMode = 0
    s.solutionSettings.writeSolutionToFile = False
    s.solutionSettings.writeInitialValues = False
    s.solutionSettings.sensorsWritePeriod = OUTPUT_STEP
    s.displayStatistics = False
    s.displayComputationTime = False
    return mbs, s, sensors


def exudyn_run(h: float) -> dict:
    mbs, s, sensors = exudyn_build(h)
    t0 = time.perf_counter()
    mbs.SolveDynamic(s)
    wall = time.perf_counter() - t0
    d = [np.asarray(mbs.GetSensorStoredData(k)) for k in sensors]
    it = mbs.sys["dynamicSolver"].it
    return {"wall": wall, "wall_quiet": wall, "t": d[0][:, 0], "s": d[0][:, 3],
            "balls": np.hstack([d[1][:, 1:4], d[2][:, 1:4]]), "loop": "C++",
            "steps": int(it.currentStepIndex), "newton_iter": int(it.newtonStepsCount),
            "jacobians": int(it.newtonJacobiCount), "newton_failures": None}


# ------------------------------------------------------------------ errors
def errors(out: dict, t_ref: np.ndarray, ref: dict) -> dict:
    """Max deviation of s and of the balls at the reference's outputs after t = 0
    (Exudyn's sensors start at the first step; t = 0 is the initial state of both)."""
    t = out["t"]
    idx = []
    for tr in t_ref[1:]:
        k = int(np.argmin(np.abs(t - tr)))
        if abs(t[k] - tr) > 1e-9:
            raise ValueError(f"no output at t = {tr}")
        idx.append(k)
    return {"s": float(np.max(np.abs(out["s"][idx] - ref["s"][1:, 0]))),
            "balls": float(np.max(np.abs(out["balls"][idx] - ref["balls"][1:])))}


def time_at(err: list, wall: list, level: float) -> float | None:
    """Wall time at the error ``level`` on a work–precision curve (log-log linear
    interpolation between neighbouring measured steps; None outside the range)."""
    pts = sorted((e, w) for e, w in zip(err, wall) if e is not None and w is not None)
    for (e0, w0), (e1, w1) in zip(pts, pts[1:]):
        if e0 <= level <= e1 and e1 > e0:
            x = np.log(level / e0) / np.log(e1 / e0)
            return float(np.exp(np.log(w0) + x * np.log(w1 / w0)))
    return None


VARIANTS = {
    "exudyn": (exudyn_run, {}),
    "mbcore_stiff": (mbcore_run, {"formulation": "stiff"}),
    "mbcore_stiff_rtol1e-8": (mbcore_run, {"formulation": "stiff", "newton_rtol": 1e-8}),
    "mbcore_di": (mbcore_run, {"formulation": "di"}),
}
SLOW = ("mbcore_stiff", "mbcore_stiff_rtol1e-8")      # --slow-min-step


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=float, nargs="*",
                    default=[2e-3, 1e-3, 5e-4, 2.5e-4, 1.25e-4, 6.25e-5])
    ap.add_argument("--slow-min-step", type=float, default=0.0,
                    help="smallest h for mbcore's stiff runs (default: all)")
    ap.add_argument("--check-step", type=float, default=1e-5)
    ap.add_argument("--levels", type=float, nargs="*", default=[1e-5, 3e-6, 1e-6, 3e-7])
    ap.add_argument("--output-rows", default="block",
                    choices=("block", "block_python", "reference"),
                    help="mbcore's settings.output_rows (default: block)")
    ap.add_argument("--quick", action="store_true",
                    help="steps 2e-3 1e-3 5e-4, one round, check step 1e-4")
    a = ap.parse_args(argv)
    if a.quick:
        a.steps, a.repeat, a.check_step, a.slow_min_step = [2e-3, 1e-3, 5e-4], 1, 1e-4, 5e-4
    warnings.simplefilter("ignore", DeprecationWarning)
    OUTPUT_ROWS["mode"] = a.output_rows
    try:
        import exudyn
        exu_version = exudyn.__version__
    except ImportError:
        exu_version = None
    variants = {k: v for k, v in VARIANTS.items() if k != "exudyn" or exu_version}
    t_ref, ref = tight_reference(governor_model, governor_measure, T_END, OUTPUT_STEP)
    out: dict = {"benchmark": "genalpha_governor_A05", "t_end": T_END, "rho_inf": 0.8,
                 "exudyn": exu_version, "mbcore": getattr(mbcore, "__version__", None),
                 "repeat": a.repeat, "output_rows": a.output_rows, "error_measure": "max over t = 0.01..1 s of |s - s_ref| "
                 "(slider height, m); balls: max over both balls' x, y, z (m)"}
    if exu_version:
        chk = exudyn_run(a.check_step)
        out["model_check"] = {"exudyn_h": a.check_step, **errors(chk, t_ref, ref),
                              "exudyn_wall_s": chk["wall"]}
    rows = []
    for h in a.steps:
        names = [k for k in variants if k not in SLOW or h >= a.slow_min_step * (1 - 1e-9)]
        walls = {k: [] for k in names}
        quiet = {k: [] for k in names}
        only_q = {k: [] for k in names}
        info: dict = {}
        for _ in range(a.repeat):                       # interleaved rounds
            for k in names:
                if k in info and "failed" in info[k]:
                    continue
                fn, kw = variants[k]
                try:
                    r = fn(h, **kw)
                except Exception as e:                  # a Newton failure: reported
                    info[k] = {"failed": f"{type(e).__name__}: {str(e)[:160]}"}
                    continue
                walls[k].append(r["wall"])
                quiet[k].append(r["wall_quiet"])
                only_q[k].append(r.get("wall_q", r["wall"]))
                info[k] = {**errors(r, t_ref, ref), "loop": r["loop"], "steps": r["steps"],
                           "newton_iter_per_step": r["newton_iter"] / r["steps"],
                           "jacobians": r["jacobians"],
                           "newton_failures": r["newton_failures"]}
        row = {"h": h}
        for k in names:
            if walls[k]:
                info[k]["wall_s"] = statistics.median(walls[k])
                info[k]["us_per_step"] = 1e6 * info[k]["wall_s"] / info[k]["steps"]
                info[k]["wall_no_outputs_s"] = statistics.median(quiet[k])
                info[k]["us_per_step_no_outputs"] = (1e6 * info[k]["wall_no_outputs_s"]
                                                     / info[k]["steps"])
                info[k]["wall_q_outputs_s"] = statistics.median(only_q[k])
            row[k] = info[k]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    out["rows"] = rows
    equal = []
    for group, wkey in (("s", "wall_s"), ("balls", "wall_s"),
                        ("s", "wall_q_outputs_s"), ("balls", "wall_q_outputs_s"),
                        ("s", "wall_no_outputs_s"), ("balls", "wall_no_outputs_s")):
        curves = {k: ([r[k][group] for r in rows if k in r and wkey in r[k]],
                      [r[k][wkey] for r in rows if k in r and wkey in r[k]])
                  for k in variants}
        for lev in a.levels:
            e = {"group": group, "error": lev, "wall": wkey}
            for k, (err, wall) in curves.items():
                e[f"{k}_s"] = time_at(err, wall, lev)
            if exu_version:
                for k in variants:
                    if k != "exudyn" and e["exudyn_s"] and e[f"{k}_s"]:
                        e[f"exudyn_over_{k}"] = e["exudyn_s"] / e[f"{k}_s"]
            equal.append(e)
    out["equal_accuracy"] = equal
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
