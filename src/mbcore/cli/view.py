"""``mbcore view RESULT.h5 -o scene.html``: the interactive 3D page of a result
(:mod:`mbcore.results.viewer`, docs/viewer.md)."""
from __future__ import annotations

import argparse

VIEW_EXAMPLES = """\
examples:
  mbcore view run.h5 -o scene.html                 # open scene.html in a browser
  mbcore view run.h5 -o scene.html --start 1 --end 2 --fps 50 --triads
  mbcore view run.h5 --gltf scene.glb              # binary glTF with the animation

Bodies are drawn with the model's shape key (box, cylinder, sphere, mesh), else as
the box (spatial) or disc/link (planar) of their inertia; joints as small spheres,
springs (tsda) as coils between their attachment points.
Open the controls (top right), Animations: play, pause and the time slider; playback
is in real time (--speed to change it)."""


VIEW_HELP = "write an interactive 3D page (HTML) of a result"
VIEW_DESCRIPTION = ("Write a self-contained HTML page that shows the bodies of a result in "
                    "3D, with a time slider and real-time playback (the meshcat viewer: "
                    "pip install 'mbcore[view]').")


def add_parser(sub, parents=()) -> None:
    """Add the ``view`` subcommand to ``sub``."""
    p = sub.add_parser("view", parents=list(parents), help=VIEW_HELP,
                       description=VIEW_DESCRIPTION, epilog=VIEW_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", help="HDF5 result file")
    p.add_argument("-o", "--output", help="HTML file to write")
    p.add_argument("--gltf", metavar="FILE.glb",
                   help="also (or only) write the scene as binary glTF with its animation")
    p.add_argument("--start", type=float, help="first time shown (default: the first row)")
    p.add_argument("--end", type=float, help="last time shown (default: the last row)")
    p.add_argument("--fps", type=float,
                   help="keyframes per second of simulated time (default: every output "
                        "row, at most --max-frames)")
    p.add_argument("--max-frames", dest="max_frames", type=int, default=None,
                   help="most keyframes (default 2000; the rows are strided)")
    p.add_argument("--speed", type=float, default=1.0,
                   help="playback speed (default 1: real time)")
    p.add_argument("--triads", action="store_true", help="draw each body's frame")
    p.add_argument("--no-play", dest="play", action="store_false",
                   help="do not start the animation when the page opens")
    p.add_argument("--mesh-dir", dest="mesh_dir",
                   help="directory of the model's mesh files (default: the model file's "
                        "directory, then the result's)")


def cmd_view(args) -> int:
    """Write the page and/or the glTF file; prints the file names (not with --quiet)."""
    import sys
    from ..results.result import Result
    from ..results.viewer import MAX_FRAMES, build_scene, to_html
    if not (args.output or args.gltf):
        print("mbcore view: error: give -o FILE.html and/or --gltf FILE.glb", file=sys.stderr)
        return 2
    kw = dict(start=args.start, end=args.end, fps=args.fps,
              max_frames=args.max_frames or MAX_FRAMES, mesh_dir=args.mesh_dir)
    with Result(args.result) as res:
        if args.output:
            scene = to_html(res, args.output, triads=args.triads, play=args.play,
                            speed=args.speed, **kw)
        else:
            scene = build_scene(res, **kw)
    written = [f for f in (args.output, args.gltf) if f]
    if args.gltf:
        from ..results.gltf import to_glb
        to_glb(scene, args.gltf)
    if not getattr(args, "quiet", False):
        print(f"wrote {', '.join(written)} ({len(scene.bodies)} bodies, {len(scene.t)} frames)")
    return 0
