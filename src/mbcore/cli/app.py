"""Command line: ``mbcore run MODEL``, ``mbcore info RESULT.h5``, ``mbcore plugins``,
``mbcore check|validate MODEL``, ``mbcore export RESULT.h5``, ``mbcore modes MODEL``,
``mbcore sweep MODEL``, ``mbcore types [TYPE]``, ``mbcore view RESULT.h5``
(see ``mbcore CMD --help``)."""
from __future__ import annotations

import argparse
import contextlib
import os
import logging
import sys
from pathlib import Path

from .export import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED
from ..errors import MbcoreError

__all__ = ["main", "EXIT_FAILED", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]

log = logging.getLogger("mbcore.cli")


def main(argv: list[str] | None = None) -> int:
    """The ``mbcore`` command; returns the exit code (see ``EXIT_*``)."""
    try:
        code = _main(argv)
        if argv is None:
            _exit_if_unclosed(code)
        return code
    except BrokenPipeError:
        # the reader of stdout went away (``mbcore ... | head``): no traceback; stdout
        # is pointed at /dev/null so that the interpreter's final flush stays quiet
        with contextlib.suppress(OSError, ValueError):   # no real stdout: nothing to do
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None = None) -> int:
    from . import export as X
    p = argparse.ArgumentParser(prog="mbcore", description="multibody analysis",
                                parents=[X.verbosity_parent()], epilog=X.EPILOG_MAIN,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    r = sub.add_parser("run", help="run the analysis of a model file, write HDF5",
                       **X.subparser_kw("run"))
    r.add_argument("model", nargs="?", help="model file (.yaml, .yml or .json)")
    r.add_argument("-o", "--output", help="HDF5 result file (default: MODEL.h5); a "
                                          "finished result there is replaced, an "
                                          "unfinished (resumable) run or another file "
                                          "only with --overwrite")
    r.add_argument("--overwrite", action="store_true",
                   help="replace the output file whatever it holds")
    X.add_run_options(r)
    r.add_argument("--resume", metavar="FILE",
                   help="continue the run of result FILE from its last checkpoint "
                        "(to --t-end); MODEL, if given, must be the file's model")

    i = sub.add_parser("info", help="summarise an HDF5 result file", **X.subparser_kw("info"))
    i.add_argument("result")
    i.add_argument("--follow", action="store_true",
                   help="print the rows of a running file as it grows (SWMR)")

    sub.add_parser("plugins", help="list every installed type and its plugin",
                   **X.subparser_kw("plugins"))

    c = sub.add_parser("check", help="validate a model file and describe the system",
                       **X.subparser_kw("check"))
    c.add_argument("model")
    X.add_parsers(sub)      # validate, export

    from .plot import add_parsers as _add_plot_parsers
    _add_plot_parsers(sub, parents=[X.verbosity_parent()])
    from .modes import add_parser as _add_modes_parser
    _add_modes_parser(sub, parents=[X.verbosity_parent()])
    from .sweep import add_parser as _add_sweep_parser
    _add_sweep_parser(sub, parents=[X.verbosity_parent()])
    from .error import add_parser as _add_error_parser
    _add_error_parser(sub, parents=[X.verbosity_parent()])
    from .types import add_parser as _add_types_parser
    _add_types_parser(sub, parents=[X.verbosity_parent()])
    from .view import add_parser as _add_view_parser
    _add_view_parser(sub, parents=[X.verbosity_parent()])

    try:
        args = p.parse_args(argv)
    except SystemExit as exc:       # --help: 0; usage errors: 2
        return int(exc.code or 0)
    X.configure_logging(args)
    if args.version:
        from .._version import __version__
        print(f"mbcore {__version__}")
        return 0
    try:
        if args.cmd == "run" and args.resume:
            return _resume(args)
        if args.cmd == "run":
            if not args.model:
                p.error("run: a model file is needed (or --resume FILE)")
            return _run(args)
        if args.cmd == "info":
            return _info(args)
        if args.cmd == "plugins":
            return _plugins()
        if args.cmd == "check":
            return _check(args)
        if args.cmd == "plot":
            from .plot import cmd_plot
            return cmd_plot(args)
        if args.cmd == "animate":
            from .plot import cmd_animate
            return cmd_animate(args)
        if args.cmd == "validate":
            return X.cmd_validate(args)
        if args.cmd == "export":
            return X.cmd_export(args)
        if args.cmd == "modes":
            from .modes import cmd_modes
            return cmd_modes(args)
        if args.cmd == "sweep":
            from .sweep import cmd_sweep
            return cmd_sweep(args)
        if args.cmd == "error":
            from .error import cmd_error
            return cmd_error(args)
        if args.cmd == "types":
            from .types import cmd_types
            return cmd_types(args)
        if args.cmd == "view":
            from .view import cmd_view
            return cmd_view(args)
    except MbcoreError as exc:
        print(f"mbcore: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if _bad_input(exc) else EXIT_FAILED
    except FileNotFoundError as exc:
        print(f"mbcore: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    p.print_help()
    return EXIT_BAD_INPUT


def _exit_if_unclosed(code: int) -> None:
    """The program (not a call of :func:`main` with arguments) ends at once when a
    result file's HDF5 handle could not be closed after a write failure (disk
    full): the HDF5 library's clean-up at exit may crash on such a handle (h5py
    GitHub issues, https://github.com/h5py/h5py/issues/914 and /1120); the file keeps the rows flushed before the failure."""
    h5 = sys.modules.get("mbplugins.reporters.hdf5")
    if h5 is not None and getattr(h5, "UNCLOSED", None):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):   # a closed stream
                stream.flush()
        os._exit(code)


def _bad_input(exc: BaseException) -> bool:
    from ..errors import ModelError, PluginError
    from ..results.result import ResultFileError
    return isinstance(exc, (ModelError, PluginError, ResultFileError))


def _run(args) -> int:
    from . import export as X
    from ..model.model import Model
    from ..results.result import Result
    from ..analysis.runner import run
    model = Model.from_file(args.model)
    out = Path(args.output) if args.output else Path(args.model).with_suffix(".h5")
    overrides = {}
    if args.t_end is not None:
        overrides["t_end"] = args.t_end
    if args.step is not None:
        overrides["output_step"] = args.step
    _guard_output(out, bool(getattr(args, "overwrite", False)))
    failed = None
    existed = out.exists()
    mtime = out.stat().st_mtime_ns if existed else None
    quiet = X.quiet(args)
    log.info("running %s (analysis %s), writing %s", args.model,
             args.analysis or model.settings.get("analysis") or "kinematic", out)
    try:
        run(model, analysis=args.analysis, settings=overrides, output=out,
            progress=not quiet, kernels=args.kernels,
            compression=getattr(args, "compression", None))
    except MbcoreError as exc:
        failed = exc
    except KeyboardInterrupt:        # Ctrl-C / SIGTERM: rows and a checkpoint are kept
        print(f"mbcore: interrupted; results so far are in {out} "
              f"(continue with: mbcore run --resume {out})", file=sys.stderr)
        return EXIT_INTERRUPTED
    written = out.exists() and (not existed or out.stat().st_mtime_ns != mtime)
    if failed is not None and _bad_input(failed):
        # validation, settings, plugins, the output path: nothing was run
        print(f"mbcore: error: {failed}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if written and not quiet:
        with Result(out) as res:
            print(res.summary())
    if failed is not None:
        print(f"mbcore: run failed: {failed}", file=sys.stderr)
        if written:
            print(f"mbcore: results computed so far are in {out}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _guard_output(out: Path, overwrite: bool) -> None:
    """Refuse to replace a file that a run would lose: an unfinished run that can be
    resumed (status ``running`` after a kill, or ``interrupted``, with a checkpoint),
    or a file that is not an mbcore result; ``--overwrite`` replaces either.  A
    finished or failed result is replaced (as a rerun expects)."""
    if overwrite or not out.exists() or out.is_dir():
        return                          # (a directory: the run names it)
    from ..errors import ModelError
    try:
        import h5py
        try:
            f = h5py.File(out, "r", locking=False)
        except OSError:                 # a running (or killed) SWMR writer's file
            f = h5py.File(out, "r", libver="latest", swmr=True, locking=False)
        with f:
            attrs = f.attrs
            schema = attrs.get("schema", b"")
            status = attrs.get("status", b"")
            ck = f.get("checkpoint")
            n_ck = 0 if ck is None or "t" not in ck else int(ck["t"].shape[0])
            t_ck = float(ck["t"][n_ck - 1]) if n_ck else None
    except (OSError, KeyError, ValueError):
        raise ModelError("--output", f"{out} exists and is not an HDF5 result file; give "
                                     f"--overwrite to replace it") from None
    text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    if text(schema) != "mbcore-result":
        raise ModelError("--output", f"{out} exists and is not an mbcore result file; "
                                     f"give --overwrite to replace it")
    if text(status) in ("running", "interrupted") and n_ck:
        raise ModelError("--output", f"{out} holds an unfinished run (status "
                                     f"'{text(status)}', checkpoint at t = {t_ck:g}): "
                                     f"continue it with 'mbcore run --resume {out}', or "
                                     f"give --overwrite to replace it")


def _resume(args) -> int:
    """``mbcore run --resume FILE [--t-end T] [MODEL]``: exit codes as ``run``."""
    from ..analysis.checkpoint import CheckpointError
    from ..model.model import Model
    from ..results.result import Result
    from ..analysis.runner import resume
    # -q/--quiet is registered with default=SUPPRESS (accepted before and after the
    # command), so the attribute exists only when it was given
    quiet = bool(getattr(args, "quiet", False))
    try:
        model = Model.from_file(args.model) if args.model else None
        failed = None
        try:
            resume(args.resume, args.t_end, model=model, progress=not quiet)
        except CheckpointError:
            raise
        except MbcoreError as exc:
            failed = exc
        except KeyboardInterrupt:
            print(f"mbcore: interrupted; continue with: mbcore run --resume {args.resume}",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
    except CheckpointError as exc:
        print(f"mbcore: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not quiet:
        with Result(args.resume) as res:
            print(res.summary())
    if failed is not None:
        print(f"mbcore: run failed: {failed}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _info(args) -> int:
    from ..results.result import Result
    if args.follow:
        from ..analysis.checkpoint import follow
        follow(args.result)
    with Result(args.result) as res:
        print(res.summary())
    return 0


def _plugins() -> int:
    from ..plugins.contract import format_version
    from ..plugins.manager import get_plugin_manager
    reg = get_plugin_manager().registry
    rows = [(kind, name, str(prov), format_version(reg.contract(kind, name)),
             (getattr(cls, "description", "") or "").strip())
            for kind, name, prov, cls in reg.rows()]
    rows += [(kind, name, str(prov), "refused", message)      # contract versions
             for kind, name, prov, message in reg.refused()]
    w0 = max([4] + [len(r[0]) for r in rows])
    w1 = max([4] + [len(r[1]) for r in rows])
    w2 = max([6] + [len(r[2]) for r in rows])
    w3 = max([8] + [len(r[3]) for r in rows])
    print(f"{'kind':{w0}}  {'type':{w1}}  {'plugin':{w2}}  {'contract':{w3}}  description")
    for r in rows:
        print(f"{r[0]:{w0}}  {r[1]:{w1}}  {r[2]:{w2}}  {r[3]:{w3}}  {r[4]}")
    return 0


def _check(args) -> int:
    from .export import validate_model_file
    m = validate_model_file(args.model)
    s = m.compile()
    print(s.describe())
    return 0

