"""Sphinx extension: the gallery of plot types (docs/plotting.md, "Gallery").

When the build starts, a few shipped examples are run and every kind of figure
that ``mbcore.results.plotting`` draws is written into ``docs/_generated/plots/``
with the call that made it (:data:`FIGURES`): one series, several channels in
stacked panels, many columns with the legend beside the panel, a column selection,
a planar snapshot with labels and element sketches (slots, gear circles), and a
spatial snapshot.  A figure that raises or emits a Python warning fails the build.

Run as a script to write the figures without Sphinx::

    python docs/_ext/mbcore_plots.py [OUTDIR]
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
OUTDIR = DOCS / "_generated" / "plots"

#: a gear pair and a rack driven by the pinion (no shipped example has gears; the
#: wheel's frame origin is 5 mm off its pivot: its pitch circle is drawn about the
#: pivot).  tests/test_animate_shapes.py checks the drawing on these two models.
GEARS = """
name: gear pair and rack
units: {length: mm, angle: rad, time: s}
settings: {analysis: kinematic, t_end: 1.0, output_step: 0.05}
bodies:
  - {name: pinion, position: [0, 0]}
  - {name: wheel, position: [70, 0]}
  - {name: rack, position: [0, -25]}
points:
  - {name: mark, body: wheel, at: [5, 40]}
joints:
  - {name: P, type: revolute, body_i: pinion, body_j: ground, point_i: [0, 0], point_j: [0, 0]}
  - {name: W, type: revolute, body_i: wheel, body_j: ground, point_i: [5, 0], point_j: [75, 0]}
  - {name: mesh, type: gear, body_i: pinion, body_j: wheel, radius_i: 25, radius_j: 50}
  - {name: guide, type: translational, body_i: ground, body_j: rack, point_i: [0, -25],
     axis: [1, 0], angle: 0}
  - {name: rp, type: rack_pinion, body_i: pinion, body_j: rack, radius: 25,
     point_i: [0, 0], point_j: [0, 0], axis: [1, 0], side: left}
drivers:
  - {name: d, type: absolute_driver, body: pinion, coordinate: phi, function: "2*t"}
"""

#: a disc cam (polar Fourier series) and a roller follower on a vertical guide
CAM = """
name: disc cam with roller follower
units: {length: mm, angle: rad, time: s}
settings: {analysis: kinematic, t_end: 1.0, output_step: 0.05}
bodies:
  - {name: cam}
  - {name: follower, position: [0, 60]}
joints:
  - {name: A, type: revolute, body_i: ground, body_j: cam, point_i: [0, 0]}
  - {name: T, type: translational, body_i: ground, body_j: follower, axis: [0, 1]}
  - {name: roll, type: cam_roller, body_i: cam, body_j: follower, radius: 8,
     curve: {polar_series: {polynomial: [40], cosine: [10, 0, 3], sine: [0, 4]}}}
drivers:
  - {name: d, type: absolute_driver, body: cam, coordinate: phi, function: "2*pi*t"}
"""

#: example runs: name -> (a model file of examples/ or model text, settings)
RUNS = {
    "slider": ("slider_crank_dynamic.yaml", {"t_end": 1.0, "output_step": 0.005}),
    "kap": ("fourbar_kap.yaml", {}),
    "geneva": ("geneva_full_cycle.yaml", {}),
    "gears": (GEARS, {}),
    "cam": (CAM, {}),
    "spatial": ("spatial_slider_crank_dynamic.yaml", {"t_end": 0.5}),
}

#: figure file -> (run, the call as the docs show it, the call); ``res`` the result,
#: ``out`` the file, P ``mbcore.results.plotting``
FIGURES = {
    "one_series.png": ("slider", 'plot(res, "q/crank.phi", out)',
                       lambda P, res, out: P.plot(res, "q/crank.phi", out)),
    "panels.png": ("slider", 'plot(res, ["q/crank.phi", "qd/crank.phi", "energy"], out)',
                   lambda P, res, out: P.plot(res, ["q/crank.phi", "qd/crank.phi", "energy"],
                                              out)),
    "legend_beside.png": ("slider", 'plot(res, "reactions", out)',
                          lambda P, res, out: P.plot(res, "reactions", out)),
    "columns.png": ("slider", 'plot(res, ["q", "qd"], out, columns="*.phi")',
                    lambda P, res, out: P.plot(res, ["q", "qd"], out, columns="*.phi")),
    "joints.png": ("spatial", 'plot(res, "joints", out, columns="*.angle,*.disp")',
                   lambda P, res, out: P.plot(res, "joints", out,
                                              columns="*.angle,*.disp")),
    "snapshot_planar.png": ("kap", "snapshot(res, 0.3, out)",
                            lambda P, res, out: P.snapshot(res, 0.3, out)),
    "snapshot_geneva.png": ("geneva", "snapshot(res, 0.3, out)",
                            lambda P, res, out: P.snapshot(res, 0.3, out)),
    "snapshot_gears.png": ("gears", "snapshot(res, 0.5, out)",
                           lambda P, res, out: P.snapshot(res, 0.5, out)),
    "snapshot_cam.png": ("cam", "snapshot(res, 0.3, out)",
                         lambda P, res, out: P.snapshot(res, 0.3, out)),
    "snapshot_spatial.png": ("spatial", "snapshot(res, 0.25, out)",
                             lambda P, res, out: P.snapshot(res, 0.25, out)),
}


def generate(outdir: Path = OUTDIR, log=print) -> list[Path]:
    """Run the examples of :data:`RUNS` and write every figure of :data:`FIGURES`
    into ``outdir`` (a warning is an error)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import mbcore
    from mbcore.results import plotting

    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = {}
        for name, (model, settings) in RUNS.items():
            path = outdir / f"{name}.h5"
            m = (mbcore.Model.from_text(model) if "\n" in model
                 else mbcore.load(ROOT / "examples" / model))
            mbcore.run(m, output=path, settings=settings or None)
            results[name] = mbcore.Result(path)
        try:
            for fig_name, (run, _shown, draw) in FIGURES.items():
                out = outdir / fig_name
                draw(plotting, results[run], out)
                plt.close("all")
                written.append(out)
        finally:
            for res in results.values():
                res.close()
    for old in outdir.iterdir():
        if old.name not in FIGURES:
            old.unlink()
    log(f"plots: {len(written)} figures in {outdir}")
    return written


def setup(app):
    from mbcore_generated import connect
    return connect(app, "plots", generate)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTDIR)
