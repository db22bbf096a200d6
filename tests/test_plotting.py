"""``mbcore plot`` / ``mbcore animate`` and the :mod:`mbcore.results.plotting` API: files
written, images not blank, GIF frames that move, drawn joints where the kinematics
put them, clear errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")
PIL = pytest.importorskip("PIL")
from PIL import Image, ImageSequence  # noqa: E402

from mbcore.cli import EXIT_BAD_INPUT, main  # noqa: E402
from mbcore.results import plotting  # noqa: E402
from mbcore.results.result import Result  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(examples, tmp_path, name, **over):
    out = tmp_path / (name + ".h5")
    argv = ["run", str(examples / f"{name}.yaml"), "-o", str(out), "-q"]
    if "t_end" in over:
        argv += ["--t-end", str(over["t_end"])]
    if "step" in over:
        argv += ["--step", str(over["step"])]
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("plot_runs")
    return {
        "fourbar": _run(EXAMPLES, d, "fourbar_kap", t_end=0.5, step=0.05),
        "slider": _run(EXAMPLES, d, "slider_crank", t_end=2.0, step=0.2),
        "slider_dyn": _run(EXAMPLES, d, "slider_crank_dynamic", t_end=0.3, step=0.05),
        "spatial": _run(EXAMPLES, d, "spatial_slider_crank", t_end=0.4, step=0.1),
    }


def _not_blank(img: Image.Image) -> None:
    a = np.asarray(img.convert("RGB"), dtype=float)
    assert a.std() > 5.0                                        # not a flat image
    colours = np.unique(a.reshape(-1, 3).astype(np.uint8), axis=0)
    assert len(colours) >= 4


@pytest.mark.parametrize("which,series", [
    ("fourbar", ["q/crank.phi", "q/follower.phi"]),
    ("slider", ["q/slider.x", "qd"]),
    ("slider_dyn", ["energy"]),
])
def test_cli_plot_png(runs, tmp_path, which, series, capsys):
    out = tmp_path / f"{which}.png"
    assert main(["plot", str(runs[which]), *series, "-o", str(out), "--dpi", "50"]) == 0
    assert out.is_file()
    with Image.open(out) as img:
        assert img.format == "PNG"
        _not_blank(img)


@pytest.mark.parametrize("ext,magic", [(".pdf", b"%PDF"), (".svg", b"<?xml")])
def test_cli_plot_pdf_svg(runs, tmp_path, ext, magic):
    out = tmp_path / ("p" + ext)
    assert main(["plot", str(runs["fourbar"]), "crank.phi", "-o", str(out),
                 "--t0", "0.1", "--t1", "0.3"]) == 0
    assert out.read_bytes().startswith(magic)


def test_plot_time_window_and_whole_channel(runs):
    with Result(runs["fourbar"]) as res:
        fig = plotting.plot(res, ["q"], t0=0.1, t1=0.3)
        lines = [ln for ax in fig.axes for ln in ax.get_lines()]
        assert len(lines) == len(res.labels("q"))            # a channel: all columns
        t = lines[0].get_xdata()
        assert t.min() >= 0.1 - 1e-9 and t.max() <= 0.3 + 1e-9 and len(t) == 5
        import matplotlib.pyplot as plt
        plt.close(fig)


@pytest.mark.parametrize("which,frames", [("fourbar", 11), ("slider", 6)])
def test_cli_animate_gif(runs, tmp_path, which, frames):
    out = tmp_path / f"{which}.gif"
    every = 2 if which == "slider" else 1
    assert main(["animate", str(runs[which]), "-o", str(out), "--fps", "10",
                 "--every", str(every), "--dpi", "40"]) == 0
    with Image.open(out) as img:
        assert img.format == "GIF"
        got = [np.asarray(f.convert("RGB"), dtype=float) for f in ImageSequence.Iterator(img)]
    assert len(got) == frames
    _not_blank(Image.fromarray(got[0].astype(np.uint8)))
    assert np.abs(got[0] - got[-1]).mean() > 0.5              # the mechanism moved


def test_cli_animate_dynamic_with_energy_overlay(runs, tmp_path):
    out = tmp_path / "dyn.gif"
    assert main(["animate", str(runs["slider_dyn"]), "-o", str(out), "--dpi", "40"]) == 0
    with Image.open(out) as img:
        assert img.n_frames == 7
    with Result(runs["slider_dyn"]) as res:
        fig = plotting.snapshot(res, 0.1, tmp_path / "dyn.png")
        e = res["energy/total"][2]
    art = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
    text = art["overlay"].get_text()
    assert "t = 0.1 s" in text and f"E = {e:.5g}" in text
    # no energy channel (kinematic run), or no overlays: no energy line
    fig = plotting.snapshot(runs["fourbar"], 0.1, overlays=("time",))
    art = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
    assert art["overlay"].get_text() == "t = 0.1 s"
    import matplotlib.pyplot as plt
    plt.close("all")


def test_slider_guide_and_spatial_links_in_geometry(runs):
    geo = plotting.geometry(runs["slider"])
    assert "slide" in [n for n, *_ in geo.joint_links]
    fig = plotting.snapshot(runs["slider"], 1.0)
    gids = {a.get_gid() for ax in fig.axes for a in ax.get_children()}
    assert "jlink:slide" in gids                              # the slider's guide line
    assert "jlink:A" not in gids and "jlink:B" not in gids     # pins: no line
    import matplotlib.pyplot as plt
    plt.close(fig)
    geo = plotting.geometry(runs["spatial"])
    assert geo.dimensions == 3
    # point B coincides with the hooke joint: drawn once
    assert [lab for lab, _ in geo.bodies["coupler"].points] == ["pin", "hooke"]
    assert [lab for lab, _ in geo.anchors] == ["pivot", "guide"]


@pytest.mark.skipif(__import__("shutil").which("ffmpeg") is None, reason="no ffmpeg")
def test_cli_animate_mp4(runs, tmp_path):
    out = tmp_path / "a.mp4"
    assert main(["animate", str(runs["fourbar"]), "-o", str(out), "--dpi", "40"]) == 0
    assert out.stat().st_size > 1000


def test_spatial_animates(runs, tmp_path):
    out = tmp_path / "spatial.gif"
    assert main(["animate", str(runs["spatial"]), "-o", str(out), "--dpi", "40"]) == 0
    with Image.open(out) as img:
        assert img.n_frames == 5
        first = np.asarray(img.convert("RGB"), dtype=float)
        _not_blank(img)
        img.seek(img.n_frames - 1)
        last = np.asarray(img.convert("RGB"), dtype=float)
    assert np.abs(first - last).mean() > 0.1


def test_snapshot_crank_pin_matches_kinematics(runs, tmp_path):
    """The drawn crank pin (joint A of the four-bar, point_i = (1, 0) on the crank,
    crank length 2 from the ground pivot O2 at the origin) is where the driver
    puts it: (2 cos phi, 2 sin phi), phi = 1.0472 + 6.2832 t; and the coupler's
    drawn end A coincides with it."""
    out = tmp_path / "snap.png"
    with Result(runs["fourbar"]) as res:
        fig = plotting.snapshot(res, 0.2, out, dpi=40)
        geo = plotting.geometry(res)
    crank = [lab for lab, _ in geo.bodies["crank"].points]
    coupler = [lab for lab, _ in geo.bodies["coupler"].points]
    art = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
    xy_c = np.asarray(art["joints:crank"].get_xydata())
    xy_k = np.asarray(art["joints:coupler"].get_xydata())
    phi = 1.0472 + 6.2832 * 0.2
    pin = np.array([2 * np.cos(phi), 2 * np.sin(phi)])
    np.testing.assert_allclose(xy_c[crank.index("A")], pin, atol=1e-6)
    np.testing.assert_allclose(xy_k[coupler.index("A")], pin, atol=1e-6)
    np.testing.assert_allclose(xy_c[crank.index("O2")], [0.0, 0.0], atol=1e-6)
    assert "P" in coupler                       # named points are drawn too
    # ground anchors at O2 (0, 0) and O4 (2.5, 0)
    np.testing.assert_allclose(sorted(p for _, p in geo.anchors), [(0, 0), (2.5, 0)])
    with Image.open(out) as img:
        _not_blank(img)


def test_memory_result_snapshot(examples):
    import mbcore
    from mbcore import Model
    res = mbcore.run(Model.from_file(examples / "slider_crank.yaml"),
                     settings={"t_end": 0.2, "output_step": 0.1})
    fig = plotting.snapshot(res, 0.1)
    art = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
    # the slider's joints C and slide coincide: one point, drawn as a block
    geo = plotting.geometry(res)
    assert len(geo.bodies["slider"].points) == 1
    xy = np.asarray(art["joints:slider"].get_xydata())
    np.testing.assert_allclose(xy[0], [res["q/slider.x"][1], 0.0], atol=1e-6)
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_unknown_series_is_bad_input_with_close_matches(runs, tmp_path, capsys):
    out = tmp_path / "x.png"
    assert main(["plot", str(runs["fourbar"]), "q/crank.ph", "-o", str(out)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "crank.ph" in err and "q/crank.phi" in err
    assert not out.exists()
    with Result(runs["fourbar"]) as res, pytest.raises(KeyError, match="did you mean"):
        plotting.plot(res, "crank.ph")


@pytest.mark.parametrize("cmd,out", [("plot", "x.jpg"), ("animate", "x.avi"),
                                     ("animate", "x.png")])
def test_unsupported_extension(runs, tmp_path, capsys, cmd, out):
    argv = [cmd, str(runs["fourbar"])] + (["q"] if cmd == "plot" else [])
    assert main(argv + ["-o", str(tmp_path / out)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "unsupported" in err
    assert not (tmp_path / out).exists()
    with pytest.raises(plotting.PlotError, match="unsupported"):
        plotting.animate(runs["fourbar"], tmp_path / "y.webm")


def test_mp4_without_ffmpeg_suggests_gif(runs, tmp_path, monkeypatch):
    from matplotlib import animation
    monkeypatch.setattr(animation.writers, "is_available", lambda name: False)
    with pytest.raises(plotting.PlotError, match=r"ffmpeg.*\.gif"):
        plotting.animate(runs["fourbar"], tmp_path / "a.mp4")


def test_missing_result_and_empty_window(runs, tmp_path, capsys):
    assert main(["plot", str(tmp_path / "nope.h5"), "q", "-o",
                 str(tmp_path / "a.png")]) == EXIT_BAD_INPUT
    assert main(["plot", str(runs["fourbar"]), "q", "--t0", "5", "-o",
                 str(tmp_path / "a.png")]) == EXIT_BAD_INPUT
    assert "no output time" in capsys.readouterr().err


def test_help_has_examples(capsys):
    for cmd in ("plot", "animate"):
        assert main([cmd, "--help"]) == 0           # argparse's exit, returned
        out = capsys.readouterr().out
        assert "examples:" in out and "--quiet" in out


def test_missing_matplotlib_names_the_extra(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(plotting.PlotError, match=r"pip install 'mbcore\[plot\]'"):
        plotting._mpl()


def test_quiet_prints_nothing_on_success(runs, tmp_path, capsys):
    out = tmp_path / "q.png"
    assert main(["plot", str(runs["fourbar"]), "q", "-o", str(out), "-q"]) == 0
    assert out.is_file() and capsys.readouterr().out == ""


# ------------------------------------------------------------------ readable panels
def _fig_of(res, series, **kw):
    fig = plotting.plot(res, series, **kw)
    fig.canvas.draw()                   # lay out (constrained) before measuring
    return fig


def test_single_series_panel_names_it_and_wide_legends_fit(runs):
    import matplotlib.pyplot as plt
    with Result(runs["spatial"]) as res:
        fig = _fig_of(res, ["qd/crank.p1", "q"])
        one, many = fig.axes[:2]
        assert one.get_ylabel() == "qd/crank.p1 [1/s]" and one.get_legend() is None
        assert many.get_ylabel() == "q"
        leg = many.get_legend()
        n = len(res.labels("q"))
        assert [t.get_text() for t in leg.get_texts()] == res.labels("q")
        r = fig.canvas.get_renderer()
        cols = {round(tx.get_window_extent(r).x0) for tx in leg.get_texts()}
        assert len(cols) == -(-n // plotting.LEGEND_ROWS) >= 2    # 21 entries, 2 columns
        lb, ab = leg.get_window_extent(r), many.get_window_extent(r)
        fb = fig.bbox
        assert lb.x0 >= ab.x1                                # beside the axes
        assert lb.x1 <= fb.x1 + 1 and lb.y0 >= fb.y0 - 1     # inside the figure
        styles = [ln.get_linestyle() for ln in many.get_lines()]
        assert styles[:10] == ["-"] * 10 and styles[10:20] == ["--"] * 10
        plt.close(fig)


def test_columns_filter(runs, tmp_path, capsys):
    import matplotlib.pyplot as plt
    with Result(runs["slider_dyn"]) as res:
        fig = _fig_of(res, ["q", "qd"], columns="*.phi")
        gids = [ln.get_gid() for ax in fig.axes for ln in ax.get_lines()]
        phis = [c for c in res.labels("q") if c.endswith(".phi")]
        assert gids == [f"series:q/{c}" for c in phis] + [f"series:qd/{c}" for c in phis]
        plt.close(fig)
        with pytest.raises(plotting.PlotError, match=r"no column of q matches"):
            plotting.plot(res, "q", columns=["nothing.*"])
    out = tmp_path / "c.png"
    assert main(["plot", str(runs["slider_dyn"]), "reactions", "-c", "A.*,B.i.*",
                 "-o", str(out), "-q"]) == 0 and out.is_file()
    assert main(["plot", str(runs["slider_dyn"]), "q", "-c", "zz*", "-o", str(out)]) \
        == EXIT_BAD_INPUT
    assert "matches --columns zz*" in capsys.readouterr().err


# ------------------------------------------------------------------ animation playback
def test_playback_is_real_time_by_default():
    t = np.arange(0.0, 3.0 + 1e-9, 0.01)            # 301 rows, dt = 0.01 s
    pb = plotting.playback(t)
    assert (pb.every, pb.fps, pb.frames) == (2, 50.0, 151)
    assert pb.speed == pytest.approx(1.0, rel=1e-12)
    pb = plotting.playback(np.arange(0.0, 1.0 + 1e-9, 0.05))
    assert (pb.every, pb.fps) == (1, 20.0) and pb.speed == pytest.approx(1.0, rel=1e-12)
    pb = plotting.playback(t, fps=10)                  # given: kept, speed stated
    assert (pb.every, pb.fps, pb.frames) == (1, 10.0, 301)
    assert pb.speed == pytest.approx(0.1)
    pb = plotting.playback(t, every=5, t0=1.0, t1=2.0)
    assert pb.every == 5 and pb.fps == pytest.approx(20.0) and pb.frames == 21


def test_gif_plays_at_the_stated_rate(runs, tmp_path, capsys):
    out = tmp_path / "rt.gif"
    assert main(["animate", str(runs["slider_dyn"]), "-o", str(out), "--dpi", "40"]) == 0
    msg = capsys.readouterr().out
    assert "7 frames at 20 frames/s: real time" in msg        # output step 0.05 s
    with Image.open(out) as img:
        assert img.n_frames == 7 and img.info["duration"] == 50


def test_blitted_frames_equal_full_redraws(runs):
    """Each frame drawn on the cached background equals the same scene drawn in full
    (the same artists rasterised by the same Agg renderer)."""
    with Result(runs["fourbar"]) as res:
        geo = plotting.geometry(res)
        tt, q, energy = plotting._scene_data(res)
        fig = plotting._new_figure((5.0, 4.0), 60, to_file=True)
        scene = plotting._Scene(fig, geo, res.labels("q"), q, tt, energy, ("time",))
        blitted = list(plotting._blit_frames(fig, scene, [0, 3, 7]))
        for a in fig.axes[0].get_children():        # back to one full draw per frame
            a.set_animated(False)
        for k, i in enumerate((0, 3, 7)):
            scene.update(i)
            fig.canvas.draw()
            full = np.asarray(fig.canvas.buffer_rgba())[..., :3]
            assert np.array_equal(blitted[k], full), i


def test_labels_at_bodies_and_overlay_above_the_axes(runs):
    import matplotlib.pyplot as plt
    with Result(runs["fourbar"]) as res:
        fig = plotting.snapshot(res, 0.2)
        fig.canvas.draw()
        art = {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}
        geo = plotting.geometry(res)
        tt, q, _ = plotting._scene_data(res)
        i = int(np.argmin(np.abs(tt - 0.2)))
        pos = geo.positions(res.labels("q"), q[i:i + 1])
        for name in geo.bodies:
            np.testing.assert_allclose(art[f"label:{name}"].xybox, pos[name][0].mean(axis=0))
        ax = fig.axes[0]
        r = fig.canvas.get_renderer()
        assert art["overlay"].get_window_extent(r).y0 >= ax.get_window_extent(r).y1 - 1
        plt.close(fig)
