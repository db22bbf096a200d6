"""``mbcore error MODEL``: estimate the global error of a model's dynamic run from a
second run (step halving for fixed-step methods, a tenth of the tolerances for
adaptive ones; :mod:`mbcore.analysis.global_error`, docs/integrators.md "Global error
estimate")."""
from __future__ import annotations

import argparse
import json

ERROR_EXAMPLES = """\
examples:
  mbcore error examples/platform.yaml --integrator rk4 --step 0.01
  mbcore error examples/platform.yaml --integrator dopri5 --rtol 1e-6 --atol 1e-8
  mbcore error model.yaml --json > error.json

exit status: 0 done; 1 a run failed; 2 bad input (model, settings)"""


def add_parser(sub, parents=()) -> None:
    """Add the ``error`` subcommand to ``sub``."""
    p = sub.add_parser("error", parents=list(parents),
                       help="estimate the global error of the dynamic run per coordinate "
                            "(Richardson step halving, or a tenth of the tolerances)",
                       description="Run the model's dynamic analysis twice (step h and h/2 "
                                   "for a fixed-step integrator, rtol and rtol/10 for an "
                                   "adaptive one) and print the estimated global error of "
                                   "the run at the given settings, per coordinate.",
                       epilog=ERROR_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (.yaml, .yml or .json)")
    p.add_argument("--integrator", help="integrator (default: the model's settings)")
    p.add_argument("--step", type=float, help="fixed step h (default: settings.step or "
                                              "the output step)")
    p.add_argument("--rtol", type=float, help="relative tolerance of an adaptive integrator")
    p.add_argument("--atol", type=float, help="absolute tolerance of an adaptive integrator")
    p.add_argument("--t-end", type=float, dest="t_end", help="end time")
    p.add_argument("--json", action="store_true", help="print JSON (per coordinate: the "
                                                       "largest error and the error at the end)")
    p.add_argument("--kernels", choices=("compiled", "numpy"),
                   help="evaluation path (default: $MBCORE_KERNELS or compiled)")


def cmd_error(args) -> int:
    """Estimate and print the global error."""
    from ..analysis.global_error import estimate_global_error
    from ..model.model import Model
    model = Model.from_file(args.model)
    settings = {k: getattr(args, k) for k in ("integrator", "step", "rtol", "atol", "t_end")
                if getattr(args, k) is not None}
    est = estimate_global_error(model, settings, kernels=args.kernels)
    if args.json:
        print(json.dumps({"model": args.model, "integrator": est.integrator,
                          "method": est.method, "order": est.order,
                          "coarse": est.coarse, "fine": est.fine,
                          "max_error": dict(zip(est.names, map(float, est.max_error))),
                          "error_at_end": dict(zip(est.names, map(float, est.error[-1])))},
                         indent=2))
        return 0
    how = (f"step halving, order {est.order}: steps {est.coarse['step']:g} and "
           f"{est.fine['step']:g}" if est.method == "richardson" else
           f"rtol {est.coarse['rtol']:g} and {est.fine['rtol']:g}")
    print(f"{model.name}: estimated global error of the run with integrator "
          f"'{est.integrator}' ({how})\n")
    print(est.table())
    return 0
