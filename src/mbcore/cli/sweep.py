"""``mbcore sweep MODEL --param PATH=SPEC ...``: a parameter study on local processes
or a Dask cluster (:func:`mbcore.sweep`; docs/sweeps.md, docs/cli.md)."""
from __future__ import annotations

import argparse
import sys

SWEEP_EXAMPLES = """\
examples:
  mbcore sweep model.yaml --param forces.spring.stiffness=1e3:1e5:20:log \\
      --param forces.spring.damping=0,5,10 --metric peak=max(abs(reactions/O2.i.fx))
  mbcore sweep model.yaml --zip --param bodies.crank.mass=1:2:5 \\
      --param settings.t_end=1:3:5 --metric e=last(energy/total) -o study/
  mbcore sweep model.yaml --param parameters.L=0.5:1.5:11 --scheduler tcp://host:8786

PATH: a value of the model by key path, entries by name (forces.spring.stiffness,
bodies.crank.position[0], settings.t_end, parameters.NAME).  SPEC: a:b:n (linear),
a:b:n:log (geometric), v1,v2,... (a list).  --grid (default): every combination;
--zip: the i-th values together.  METRIC: NAME=EXPR reducing result columns: max,
min, mean, rms, std, first, last, integral, argmax, argmin, at(x, t), over abs,
sqrt, window(x, t0, t1)... (docs/sweeps.md).  Writes OUTDIR/case_NNNN.h5, index.h5
and index.csv; a rerun skips the finished cases (--no-resume: start afresh).
exit status: 0 every case ok; 1 some cases failed (recorded in the index); 2 bad
input (model, path, spec, metric, another study in OUTDIR)"""


def add_parser(sub, parents=()) -> None:
    """Add the ``sweep`` subcommand to ``sub``."""
    p = sub.add_parser("sweep", parents=list(parents),
                       help="run a model over a grid of parameter values (local "
                            "processes or Dask), one HDF5 file per case and an index",
                       description="Parameter study: run MODEL for every combination of "
                                   "the swept values; each case writes OUTDIR/case_NNNN.h5, "
                                   "the index OUTDIR/index.h5 and index.csv map cases to "
                                   "values, files, status, errors and metrics.",
                       epilog=SWEEP_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (.yaml, .yml or .json)")
    p.add_argument("-p", "--param", action="append", required=True, metavar="PATH=SPEC",
                   help="a swept parameter (repeat for more)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--grid", dest="mode", action="store_const", const="grid",
                   help="every combination of the values (default)")
    g.add_argument("--zip", dest="mode", action="store_const", const="zip",
                   help="the i-th values of every parameter together")
    p.add_argument("-m", "--metric", action="append", default=[], metavar="NAME=EXPR",
                   help="a summary metric of each case (repeat for more)")
    p.add_argument("-o", "--output", metavar="OUTDIR",
                   help="directory of the study (default: MODEL_sweep beside MODEL)")
    p.add_argument("-j", "--workers", type=int,
                   help="local worker processes (default: the CPUs; 0: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on the dask.distributed scheduler at ADDRESS instead")
    from .export import add_run_options
    add_run_options(p, " of every case", "the case files' series")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="skip the cases finished by an earlier run of this study "
                        "(default); --no-resume replaces the study in OUTDIR")
    p.add_argument("--retry-failed", action=argparse.BooleanOptionalAction, default=True,
                   help="rerun the cases that failed before (default)")


def cmd_sweep(args) -> int:
    """Run the study; print its summary (not with ``--quiet``)."""
    from .export import EXIT_FAILED
    from ..studies import sweep
    settings = {}
    if args.t_end is not None:
        settings["t_end"] = args.t_end
    if args.step is not None:
        settings["output_step"] = args.step
    quiet = bool(getattr(args, "quiet", False))
    try:
        study = sweep(args.model, args.param, mode=args.mode or "grid",
                      metrics=args.metric, out_dir=args.output, workers=args.workers,
                      scheduler=args.scheduler, settings=settings, analysis=args.analysis,
                      kernels=args.kernels, compression=args.compression,
                      resume=args.resume, retry_failed=args.retry_failed,
                      progress=not quiet)
    except KeyboardInterrupt:
        print("mbcore: interrupted; the finished cases are kept and recorded (rerun the "
              "same command to continue)", file=sys.stderr)
        from .export import EXIT_INTERRUPTED
        return EXIT_INTERRUPTED
    if not quiet:
        print(study.summary())
    return EXIT_FAILED if study.failed else 0
