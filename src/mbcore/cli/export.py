"""CLI pieces shared by the subcommands (verbosity through :mod:`logging`, help
epilogs) and the ``mbcore export`` and ``mbcore validate`` commands.

Library code only logs (``logging.getLogger(__name__)``); the CLI configures the
handler here: warnings by default, errors only with ``--quiet``, INFO with
``--verbose`` and DEBUG with ``-vv``, all on stderr.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

log = logging.getLogger("mbcore.cli")

#: loggers the CLI configures (the library's and the built-in plugins')
LOGGERS = ("mbcore", "mbplugins")

#: exit codes: 0 done; 1 the run (or another command) failed; 2 bad input (usage, the
#: model file, settings, plugins, the output path: nothing was computed)
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
#: the run was interrupted (Ctrl-C, SIGTERM): file marked 'interrupted', resumable
EXIT_INTERRUPTED = 130
#: the reader of the output closed the pipe (128 + SIGPIPE, as a shell reports it)
EXIT_BROKEN_PIPE = 141

EPILOGS = {
    "run": """examples:
  mbcore run examples/fourbar_kap.yaml                 # writes examples/fourbar_kap.h5
  mbcore run model.yaml -o out.h5 --t-end 2 --step 1e-3
  mbcore run model.yaml -a dynamic -q                  # no progress bar, no summary
exit status: 0 finished; 1 the run failed (results so far are kept); 2 bad input""",
    "info": """examples:
  mbcore info out.h5
exit status: 0 ok; 2 not a readable result file""",
    "plugins": """examples:
  mbcore plugins""",
    "check": """examples:
  mbcore check model.yaml        # validate, compile and describe the system
exit status: 0 ok; 2 invalid model (the message names the key path)""",
    "validate": """examples:
  mbcore validate model.yaml
  mbcore validate -q model.yaml && echo valid
  mbcore validate -a dynamic model.yaml   # the settings as 'mbcore run -a dynamic' sees them
exit status: 0 valid; 2 invalid (the message names the key path, e.g. joints[1].j)""",
    "export": """examples:
  mbcore export out.h5                          # every channel -> out.csv
  mbcore export out.h5 -o - --channels q,energy # CSV on stdout
  mbcore export out.h5 -o q.csv --channels q --t0 0.5 --t1 1
columns: t, then "<channel>/<label>" for every column of the chosen channels
exit status: 0 ok; 2 bad input (unknown channel, unreadable result, bad path)""",
}


def verbosity_parent() -> argparse.ArgumentParser:
    """``-q/--quiet`` and ``-v/--verbose`` (repeatable), accepted before and after the
    subcommand (``mbcore -v run m.yaml`` = ``mbcore run -v m.yaml``)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="errors only: no progress bar, no summary")
    g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="log what is done (-vv: debug)")
    g.add_argument("--allow-external-data", action="store_true", default=argparse.SUPPRESS,
                   help="let model files read table files outside their directory "
                        "(docs/model-format.md)")
    return p


def subparser_kw(name: str) -> dict:
    return {"epilog": EPILOGS.get(name), "parents": [verbosity_parent()],
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def add_run_options(p: argparse.ArgumentParser, each: str = "",
                    series: str = "the HDF5 series") -> None:
    """The options of a run shared by ``mbcore run`` and ``mbcore sweep``:
    ``-a/--analysis``, ``--t-end``, ``--step``, ``--kernels``, ``--compression``
    (``each``: appended to the t_end help, e.g. " of every case")."""
    p.add_argument("-a", "--analysis", help="analysis to run (default: settings.analysis)")
    p.add_argument("--t-end", type=float, help=f"override settings.t_end{each}")
    p.add_argument("--step", type=float, help="override settings.output_step")
    p.add_argument("--kernels", choices=("compiled", "numpy"),
                   help="evaluation path (default: $MBCORE_KERNELS or compiled)")
    p.add_argument("--compression", choices=("gzip", "lzf"),
                   help=f"compress {series} (default: none)")


def configure_logging(args) -> None:
    """Handler on stderr for the library's loggers at the level the options ask (and
    ``--allow-external-data``: :mod:`mbcore.elements.limits`)."""
    if getattr(args, "allow_external_data", False):
        from ..elements.limits import configure
        configure(allow_external_data=True)
    quiet = bool(getattr(args, "quiet", False))
    verbose = int(getattr(args, "verbose", 0) or 0)
    if quiet:
        level = logging.ERROR
    elif verbose >= 2:
        level = logging.DEBUG
    elif verbose == 1:
        level = logging.INFO
    else:
        level = logging.WARNING
    fmt = "mbcore: %(levelname)s: %(message)s" if verbose < 2 else \
        "%(name)s: %(levelname)s: %(message)s"
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(fmt))
    for name in LOGGERS:
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            if isinstance(h, _StderrHandler):
                lg.removeHandler(h)
        lg.addHandler(handler)
        lg.setLevel(level)
        lg.propagate = False
    logging.captureWarnings(False)   # (re)install: someone may have replaced showwarning
    logging.captureWarnings(True)
    wl = logging.getLogger("py.warnings")
    for h in list(wl.handlers):
        if isinstance(h, _StderrHandler):
            wl.removeHandler(h)
    wl.addHandler(handler)
    wl.setLevel(level)
    wl.propagate = False


class _StderrHandler(logging.StreamHandler):
    """Writes to the *current* ``sys.stderr`` (so that redirections and pytest's
    capture see it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def quiet(args) -> bool:
    return bool(getattr(args, "quiet", False))


# ------------------------------------------------------------------------- commands
def add_parsers(sub) -> None:
    """Add ``validate`` and ``export`` to the subparsers of ``mbcore``."""
    v = sub.add_parser("validate", help="validate a model file (no analysis, no output)",
                       description="Validate a model file and its settings (the checks "
                                   "'mbcore run' makes before it computes anything): exit "
                                   "0 if valid, 2 with a message naming the key path if "
                                   "not.",
                       **subparser_kw("validate"))
    v.add_argument("model", help="model file (.yaml, .yml or .json)")
    v.add_argument("-a", "--analysis",
                   help="validate the settings for this analysis (default: "
                        "settings.analysis), as 'mbcore run -a' would")

    e = sub.add_parser("export", help="export an HDF5 result to CSV",
                       description="Write the time series of a result file as CSV "
                                   "(also a file still being written).",
                       **subparser_kw("export"))
    e.add_argument("result", help="HDF5 result file")
    e.add_argument("-o", "--output",
                   help="CSV file, '-' for stdout (default: RESULT with suffix .csv)")
    e.add_argument("-c", "--channels",
                   help="comma-separated channels (default: all), e.g. q,energy")
    e.add_argument("--t0", type=float, help="first time (inclusive)")
    e.add_argument("--t1", type=float, help="last time (inclusive)")


def validate_model_file(path: str, analysis: str | None = None):
    """The model of file ``path``, validated as ``mbcore run`` validates it before it
    compiles anything: the model, then its settings for ``analysis`` (default
    ``settings.analysis``) by :func:`mbcore.analysis.resolve_settings`, the one
    settings validation of a run.  Raises ModelError naming the key path."""
    from ..analysis.base import resolve_settings
    from ..model.model import Model
    from ..plugins.manager import get_plugin_manager
    reg = get_plugin_manager().registry
    m = Model.from_file(path, registry=reg)
    resolve_settings(m.settings, reg, analysis=analysis)
    return m


def cmd_validate(args) -> int:
    log.info("validating %s", args.model)
    m = validate_model_file(args.model, args.analysis)    # ModelError -> exit 2
    if not quiet(args):
        print(f"{args.model}: valid ({m!r})")
    return 0


def cmd_export(args) -> int:
    from ..errors import ModelError
    from ..results.result import Result, ResultKeyError
    src = Path(args.result)
    if args.t0 is not None and args.t1 is not None and args.t1 < args.t0:
        raise ModelError("--t1", f"{args.t1:g} is before --t0 {args.t0:g}")
    out = args.output or str(src.with_suffix(".csv"))
    if out != "-" and Path(out).resolve() == src.resolve():
        raise ModelError("--output", f"'{out}' is the result file itself")
    with Result(src, live=True) as res:
        if res.status == "running":
            log.warning("%s is still being written (or its run was killed): exporting "
                        "the %d rows flushed so far", src, len(res))
        try:
            chans = res.select_channels(args.channels)
        except ResultKeyError as exc:
            raise ModelError("--channels", str(exc)) from None
        progress = not quiet(args)
        if out == "-":
            n = res.to_csv(sys.stdout, chans, t0=args.t0, t1=args.t1, progress=progress)
            sys.stdout.flush()
        else:
            if not Path(out).parent.exists():
                raise ModelError("--output", f"directory '{Path(out).parent}' does not exist")
            n = res.to_csv(out, chans, t0=args.t0, t1=args.t1, progress=progress)
        ncol = len(res.columns(chans)) + 1
    where = "stdout" if out == "-" else out
    log.info("wrote %d rows x %d columns to %s", n, ncol, where)
    if out != "-" and not quiet(args):
        print(f"{where}: {n} rows, {ncol} columns", file=sys.stderr)
    return 0


EPILOG_MAIN = """mbcore COMMAND --help describes each command, with examples.
options -q/--quiet and -v/--verbose go before or after COMMAND.
exit status: 0 ok; 1 a run (or command) failed; 2 bad input or usage"""
