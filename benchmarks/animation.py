"""Animation speed: 301 frames of the KAP four-bar (3 s, output every 0.01 s) written
as a GIF by ``mbcore.results.plotting.animate`` (blitting: the static background
drawn once, the moving artists per frame), against the same frames drawn by a full
redraw of the figure per frame (what matplotlib's writers do), interleaved, medians
of ``--repeat`` rounds.  Prints JSON.

    python benchmarks/animation.py [--repeat 3] [--frames 301]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import mbcore
from mbcore.results import plotting

ROOT = Path(__file__).resolve().parents[1]


def _scene(res):
    """The figure and scene animate() draws (6 x 5 in at 80 dpi, both overlays)."""
    geo = plotting.geometry(res)
    tt, q, energy = plotting._scene_data(res)
    fig = plotting._new_figure((6.0, 5.0), 80, to_file=True)
    return fig, plotting._Scene(fig, geo, res.labels("q"), q, tt, energy,
                                ("time", "energy"))


def _full_redraw_frames(res, n: int) -> float:
    """Seconds to render n frames by full redraws (no file written)."""
    fig, scene = _scene(res)
    t0 = time.perf_counter()
    for i in range(n):
        scene.update(i)
        fig.canvas.draw()
        np.array(np.asarray(fig.canvas.buffer_rgba())[..., :3])
    return time.perf_counter() - t0


def _blit_frames(res, n: int) -> float:
    """Seconds to render n frames by blitting (no file written)."""
    fig, scene = _scene(res)
    t0 = time.perf_counter()
    for _ in plotting._blit_frames(fig, scene, range(n)):
        pass
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frames", type=int, default=301)
    args = ap.parse_args()
    model = mbcore.load(ROOT / "examples" / "fourbar_kap.yaml")
    with tempfile.TemporaryDirectory() as d:
        res = mbcore.run(model, settings={"t_end": (args.frames - 1) * 0.01,
                                          "output_step": 0.01}, output=Path(d) / "kap.h5")
        gif, blit, full = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            plotting.animate(res, Path(d) / "kap.gif", every=1, fps=50)
            gif.append(time.perf_counter() - t0)
            blit.append(_blit_frames(res, args.frames))
            full.append(_full_redraw_frames(res, args.frames))
        res.close()
    med = statistics.median
    print(json.dumps({
        "frames": args.frames,
        "gif_file_s": med(gif), "gif_per_frame_ms": 1e3 * med(gif) / args.frames,
        "render_blit_s": med(blit), "render_full_redraw_s": med(full),
        "render_ratio_full_over_blit": med(full) / med(blit),
        "rounds": args.repeat}, indent=2))


if __name__ == "__main__":
    main()
