"""``mbcore plot`` and ``mbcore animate``: the command-line side of
:mod:`mbcore.results.plotting` (argument definitions and the two commands)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

PLOT_EXAMPLES = """\
examples:
  mbcore plot kap.h5 q/crank.phi q/follower.phi -o angles.png
  mbcore plot run.h5 energy --t0 0 --t1 2 -o energy.pdf
  mbcore plot run.h5 reactions/A.i.fx qd -o forces.svg
  mbcore plot run.h5 q qd --columns '*.phi' -o angles.png   # a column filter

Series are named as the result names its columns (see `mbcore info RESULT`): a whole
channel (q, energy...), channel/label (q/crank.phi) or a bare label (crank.phi)."""

ANIMATE_EXAMPLES = """\
examples:
  mbcore animate kap.h5 -o kap.gif                        # real time
  mbcore animate run.h5 -o run.mp4 --fps 30 --every 2     # MP4 needs ffmpeg
  mbcore animate run.h5 -o frame.png --at 0.5             # one still frame

The mechanism is drawn from the model stored in the result: planar bodies as the
outline through their joints and points, spatial models as a 3-D stick figure, with
the time and (when recorded) the energies overlaid."""


def _done(args, path) -> None:
    """The success message (none with ``--quiet``)."""
    if not getattr(args, "quiet", False):
        print(f"wrote {path}")


def add_parsers(sub, parents=()) -> None:
    """Add the ``plot`` and ``animate`` subcommands to ``sub`` (``parents``: the
    common options, e.g. ``--quiet``/``--verbose``)."""
    p = sub.add_parser("plot", parents=list(parents), help="plot result series against time (PNG/PDF/SVG)",
                       description="Plot series of a result file against time.",
                       epilog=PLOT_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", help="HDF5 result file")
    p.add_argument("series", nargs="+", help="channels or columns to plot")
    p.add_argument("-o", "--output", required=True, help="image file (.png, .pdf or .svg)")
    p.add_argument("--t0", type=float, help="start of the time window")
    p.add_argument("--t1", type=float, help="end of the time window")
    p.add_argument("-c", "--columns", action="append",
                   help="keep only the columns matching these shell patterns, "
                        "comma-separated (e.g. 'A.*' or '*.phi,*.x'); repeatable")
    p.add_argument("--title", help="figure title (default: the model name)")
    p.add_argument("--dpi", type=int, default=100, help="resolution of PNG output (100)")

    a = sub.add_parser("animate", parents=list(parents), help="animate the mechanism of a result (GIF/MP4)",
                       description="Animate the mechanism recorded in a result file.",
                       epilog=ANIMATE_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("result", help="HDF5 result file")
    a.add_argument("-o", "--output", required=True,
                   help="animation file (.gif or .mp4), or an image (.png/.pdf/.svg) with --at")
    a.add_argument("--fps", type=float, default=None,
                   help="frames per second (default: real-time playback, at most 50 "
                        "frames per second; the rate is shown beside the time)")
    a.add_argument("--every", type=int, default=None,
                   help="use every n-th output row (default: 1, or more to play in real "
                        "time at most 50 frames per second)")
    a.add_argument("--t0", type=float, help="start of the time window")
    a.add_argument("--t1", type=float, help="end of the time window")
    a.add_argument("--at", type=float, help="write one still frame at this time instead")
    a.add_argument("--no-overlays", action="store_true", help="no time/energy text")
    a.add_argument("--title", help="figure title (default: the model name)")
    a.add_argument("--dpi", type=int, default=80, help="resolution (80)")


def _open(path: str):
    from ..results.result import Result
    return Result(path)


def _fail(msg: str, code: int) -> int:
    print(f"mbcore: error: {msg}", file=sys.stderr)
    return code


def _guard(fn, args) -> int:
    from .export import EXIT_BAD_INPUT, EXIT_FAILED
    from ..errors import MbcoreError, ModelError
    from ..results.plotting import PlotError
    from ..results.result import ResultFileError, ResultKeyError
    try:
        return fn(args)
    except (ResultKeyError, PlotError, ResultFileError, FileNotFoundError, ModelError) as exc:
        msg = str(exc) if not isinstance(exc, FileNotFoundError) else \
            f"{exc.filename}: {exc.strerror}"
        return _fail(msg, EXIT_BAD_INPUT)
    except (MbcoreError, OSError, ValueError) as exc:
        return _fail(str(exc), EXIT_FAILED)


def cmd_plot(args) -> int:
    return _guard(_plot, args)


def cmd_animate(args) -> int:
    return _guard(_animate, args)


def _plot(args) -> int:
    from ..results.plotting import PLOT_FORMATS, _check_ext, plot
    _check_ext(args.output, PLOT_FORMATS, "plot")       # before opening anything
    with _open(args.result) as res:
        plot(res, args.series, args.output, t0=args.t0, t1=args.t1, title=args.title,
             dpi=args.dpi, columns=args.columns)
    _done(args, args.output)
    return 0


def _animate(args) -> int:
    from ..results.plotting import ANIMATION_FORMATS, PLOT_FORMATS, _check_ext, animate, snapshot
    overlays = () if args.no_overlays else ("time", "energy")
    if args.at is not None:
        _check_ext(args.output, PLOT_FORMATS, "image")
        with _open(args.result) as res:
            snapshot(res, args.at, args.output, overlays=overlays, title=args.title,
                     dpi=args.dpi)
    else:
        _check_ext(args.output, ANIMATION_FORMATS, "animation")
        from ..results.plotting import playback
        with _open(args.result) as res:
            animate(res, args.output, fps=args.fps, every=args.every, t0=args.t0,
                    t1=args.t1, overlays=overlays, title=args.title, dpi=args.dpi,
                    progress=not getattr(args, "quiet", False))
            pb = playback(res.t, args.fps, args.every, args.t0, args.t1)
        rate = "real time" if abs(pb.speed - 1.0) < 1e-6 else f"{pb.speed:.3g}x real time"
        _done(args, f"{args.output} ({pb.frames} frames at {pb.fps:.3g} frames/s: {rate})")
        return 0
    _done(args, Path(args.output))
    return 0
