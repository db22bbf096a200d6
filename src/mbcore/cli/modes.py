"""``mbcore modes MODEL``: linearise a model about its static equilibrium and print
its modes (the ``modes`` analysis; docs/analyses.md "Linearisation and modes",
docs/cli.md)."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

MODES_EXAMPLES = """\
examples:
  mbcore modes examples/fourbar_spring_modes.yaml
  mbcore modes model.yaml --inputs crank.torque --outputs crank.phi,P.x -o modes.h5
  mbcore modes model.yaml --equilibrium given --coordinates null_space --matrices
  mbcore modes examples/whipple_bicycle.yaml --about motion \
      --cyclic rear.x,rear.y,rear.rz,rear_wheel.ry,front_wheel.ry

Inputs: <body>.fx, .fy, .torque (spatial: .fx/.fy/.fz/.nx/.ny/.nz), <force element>.scale.
Outputs: coordinates (crank.phi), velocities (crank.phid), accelerations (crank.phidd),
named points (P.x, P.xd) and force element outputs (spring.force).
exit status: 0 done; 1 no equilibrium / singular configuration; 2 bad input (unknown
input or output name, model, settings)"""


def add_parser(sub, parents=()) -> None:
    """Add the ``modes`` subcommand to ``sub``."""
    p = sub.add_parser("modes", parents=list(parents),
                       help="linearise about the static equilibrium or a steady motion: "
                            "frequencies, damping ratios, mode shapes, state space",
                       description="Linearise a model about its static equilibrium (or, "
                                   "with --about motion, about the steady motion through its "
                                   "initial state) and print its modes (analysis 'modes').",
                       epilog=MODES_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (.yaml, .yml or .json)")
    p.add_argument("--inputs", help="comma-separated inputs (columns of B)")
    p.add_argument("--outputs", help="comma-separated outputs (rows of C, D; default: the "
                                     "independent coordinates)")
    p.add_argument("-o", "--output", help="HDF5 result file with the /modes group "
                                          "(default: none, print only)")
    p.add_argument("--about", choices=("equilibrium", "motion"),
                   help="a static equilibrium (default) or the steady motion through the "
                        "initial state (its velocities kept; nonholonomic rows allowed)")
    p.add_argument("--cyclic", help="about a motion: comma-separated cyclic position "
                                    "increments (e.g. frame.x,frame.y,frame.rz)")
    p.add_argument("--independent-speeds", dest="independent_speeds",
                   help="about a motion: comma-separated independent speeds")
    p.add_argument("--equilibrium", choices=("static", "given"),
                   help="solve the static equilibrium (default) or take the initial state")
    p.add_argument("--coordinates", choices=("partition", "null_space"),
                   help="independent coordinates (default: partition)")
    p.add_argument("--linearization", choices=("analytic", "numeric"),
                   help="analytic force Jacobians (default) or differences of the "
                        "equations of motion")
    p.add_argument("--t", type=float, dest="t_start", help="time of loads and constraints")
    p.add_argument("--matrices", action="store_true", help="also print A, B, C and D")
    p.add_argument("--kernels", choices=("compiled", "numpy"),
                   help="evaluation path (default: $MBCORE_KERNELS or compiled)")


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [x.strip() for x in text.split(",") if x.strip()]


def cmd_modes(args) -> int:
    """Run the ``modes`` analysis and print the modes (and the matrices)."""
    from ..analysis.linear import LinearModel
    from ..model.model import Model
    from ..analysis.runner import run
    model = Model.from_file(args.model)
    settings = {}
    for key in ("about", "equilibrium", "coordinates", "linearization", "t_start"):
        if getattr(args, key, None) is not None:
            settings[key] = getattr(args, key)
    for key in ("inputs", "outputs", "cyclic", "independent_speeds"):
        names = _names(getattr(args, key))
        if names is not None:
            settings[key] = names
    out = Path(args.output) if args.output else None
    res = run(model, analysis="modes", settings=settings, output=out, kernels=args.kernels)
    lm = LinearModel.from_result(res)
    if getattr(args, "quiet", False):
        return 0
    print(report(lm, model.name or Path(args.model).stem, matrices=args.matrices))
    if out is not None:
        print(f"wrote {out} (group /modes)")
    return 0


def report(lm, name: str, matrices: bool = False) -> str:
    """The text ``mbcore modes`` prints."""
    modes = lm.modes()
    if lm.info.get("about") == "motion":
        speeds = str(lm.info.get("speeds", ""))
        cyc = str(lm.info.get("cyclic", ""))
        head = (f"{name}: linearised about the steady motion at t = {lm.t:g} (numeric; "
                f"{lm.k} position increment{'s' if lm.k != 1 else ''}: "
                f"{', '.join(lm.independent)}; independent speeds: {speeds.replace(',', ', ')}"
                + (f"; cyclic: {cyc.replace(',', ', ')}" if cyc else "") + ")")
    else:
        head = (f"{name}: linearised about the {lm.info.get('equilibrium', 'static')} "
                f"equilibrium at t = {lm.t:g} ({lm.info.get('linearization', 'analytic')}; "
                f"{lm.k} independent coordinate{'s' if lm.k != 1 else ''}: "
                f"{', '.join(lm.independent)})")
    lines = [head, "", modes.table()]
    if np.any(modes.unstable):
        lines.append(f"unstable: {int(np.sum(modes.unstable))} mode(s) grow")
    lines += ["", f"state space: A {lm.A.shape[0]}x{lm.A.shape[1]}, B {lm.B.shape[0]}x"
                  f"{lm.B.shape[1]}, C {lm.C.shape[0]}x{lm.C.shape[1]}, D {lm.D.shape[0]}x"
                  f"{lm.D.shape[1]}",
              f"  states:  {', '.join(lm.states)}",
              f"  inputs:  {', '.join(lm.inputs) or '(none)'}",
              f"  outputs: {', '.join(lm.outputs)}"]
    if matrices:
        with np.printoptions(precision=9, linewidth=120, suppress=False):
            for key in ("A", "B", "C", "D"):
                lines += ["", f"{key} =", str(getattr(lm, key))]
    return "\n".join(lines)
