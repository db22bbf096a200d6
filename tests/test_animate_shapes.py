"""The elements' sketches in snapshots and animations (:mod:`mbcore.results.plotting`):
gear pitch circles, cam outlines, rollers, guides and slots where the model puts
them at every frame, a Geneva wheel drawn as a slotted disc, blitting of the new
artists, spatial models without sketches, clear errors for a malformed sketch."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import mbcore  # noqa: E402
from mbcore.model import Model  # noqa: E402
from mbcore.results import plotting  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _gallery_models():
    """The gear-and-rack and cam models of the docs' plot gallery (one text for both)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "mbcore_plots", Path(__file__).resolve().parents[1] / "docs" / "_ext" / "mbcore_plots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.GEARS, mod.CAM


# gear pair with fixed centres (the wheel's frame origin is 5 mm off its centre, so the
# centre must come from its revolute joint) and a rack meshing with the pinion; a disc
# cam (polar series) turning about its origin, roller follower on a vertical guide
GEARS, CAM = _gallery_models()


def _cam_s(theta):
    """The cam's polar radius, written out from the model above."""
    return 40.0 + 10.0 * np.cos(theta) + 3.0 * np.cos(3 * theta) + 4.0 * np.sin(2 * theta)


@pytest.fixture(scope="module")
def runs():
    return {"gears": mbcore.run(Model.from_text(GEARS)),
            "cam": mbcore.run(Model.from_text(CAM)),
            "geneva": mbcore.run(Model.from_file(EXAMPLES / "geneva_wheel.yaml")),
            "geneva_full": mbcore.run(Model.from_file(EXAMPLES / "geneva_full_cycle.yaml"),
                                      settings={"t_end": 1.5}),
            "slider": mbcore.run(Model.from_file(EXAMPLES / "slider_crank.yaml"))}


def _artists(fig) -> dict:
    return {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}


def _xy(artist) -> np.ndarray:
    return np.column_stack([np.asarray(artist.get_xdata(), float),
                            np.asarray(artist.get_ydata(), float)])


def _pose(res, body, i):
    q = res["q"][i]
    lab = res.labels("q")
    return tuple(q[lab.index(f"{body}.{c}")] for c in ("x", "y", "phi"))


def _glob(pose, s):
    x, y, phi = pose
    c, sn = math.cos(phi), math.sin(phi)
    return np.array([x + c * s[0] - sn * s[1], y + sn * s[0] + c * s[1]])


def _close():
    import matplotlib.pyplot as plt
    plt.close("all")


def test_gear_pitch_circles_and_rack_line_where_the_model_puts_them(runs):
    res = runs["gears"]
    geo = plotting.geometry(res)
    assert [(n, sk.body, sk.kind) for n, sk in geo.sketches] == [
        ("mesh", "pinion", "circle"), ("mesh", "wheel", "circle"),
        ("guide", "ground", "segment"), ("rp", "pinion", "circle"), ("rp", "rack", "segment")]
    for i in (0, 7, 20):
        fig = plotting.snapshot(res, res.t[i])
        art = _artists(fig)
        for gid, body, centre, radius in (("sketch:mesh.0", "pinion", (0.0, 0.0), 25.0),
                                          ("sketch:mesh.1", "wheel", (5.0, 0.0), 50.0),
                                          ("sketch:rp.0", "pinion", (0.0, 0.0), 25.0)):
            p = _xy(art[gid])
            c = _glob(_pose(res, body, i), centre)
            # the wheel's centre is its pivot W at (75, 0), not its frame origin
            assert np.allclose(c, (75.0, 0.0) if body == "wheel" else (0.0, 0.0), atol=1e-9)
            # every drawn point at the pitch radius from the centre (observed 2.1e-14)
            assert np.max(np.abs(np.hypot(*(p - c).T) - radius)) < 1e-9
            assert np.allclose(p[:-1].mean(axis=0), c, atol=1e-9)
        # the rack's pitch line: horizontal, through the rack's point, tangent to the
        # pinion's pitch circle (25 below its centre), covering the pinion's travel
        line = _xy(art["sketch:rp.1"])
        assert np.allclose(line[:, 1], -25.0, atol=1e-9)
        rack_x = res["q"][:, res.labels("q").index("rack.x")]
        rel = -rack_x                                   # pinion centre in rack axes
        assert line[:, 0].min() - rack_x[i] <= rel.min() and \
            line[:, 0].max() - rack_x[i] >= rel.max()
        _close()


def test_cam_outline_lies_on_the_curve_and_the_roller_on_the_follower(runs):
    res = runs["cam"]
    for i in (0, 5, 13):
        art = _artists(plotting.snapshot(res, res.t[i]))
        p = _xy(art["sketch:roll.0"])
        assert len(p) > 100
        x, y, phi = _pose(res, "cam", i)
        c, s = math.cos(phi), math.sin(phi)
        loc = np.column_stack([c * (p[:, 0] - x) + s * (p[:, 1] - y),
                               -s * (p[:, 0] - x) + c * (p[:, 1] - y)])
        th = np.arctan2(loc[:, 1], loc[:, 0])
        # every drawn point on the cam curve (observed 1.4e-14)
        assert np.max(np.abs(np.hypot(*loc.T) - _cam_s(th))) < 1e-9
        # the cam body is drawn as its outline (the curve), not as a square: the same
        # points through the same transformation
        assert np.array_equal(_xy(art["body:cam"]), p)
        roller = _xy(art["sketch:roll.1"])
        centre = _glob(_pose(res, "follower", i), (0.0, 0.0))
        assert np.max(np.abs(np.hypot(*(roller - centre).T) - 8.0)) < 1e-9
    _close()


def test_slot_and_guide_segments_lie_along_the_joint_axes(runs):
    res = runs["geneva"]
    geo = plotting.geometry(res)
    span = geo.span(res.labels("q"), res["q"])
    pad = plotting.SKETCH_PAD * span
    for i in (0, 40, 100):
        art = _artists(plotting.snapshot(res, res.t[i]))
        seg = _xy(art["sketch:slot.0"])
        assert seg.shape == (2, 2)
        xw, yw, phw = _pose(res, "wheel", i)
        u = np.array([math.cos(phw), math.sin(phw)])        # the slot axis [1, 0] on the wheel
        d = seg - (xw, yw)
        # both ends on the axis through the wheel's centre (observed 3.6e-15)
        assert np.max(np.abs(d[:, 0] * u[1] - d[:, 1] * u[0])) < 1e-9
        # spanning the pin's travel, 50 .. sqrt(100^2 - 50^2) from the centre, padded
        assert sorted(d @ u) == pytest.approx([50.0 - pad, math.sqrt(7500.0) + pad],
                                              abs=1e-6)
        assert "jlink:slot" not in art                # the slot shows the pin's line
    _close()
    # the slider-crank's guide: the slider's axis on the ground (y = 0), over its travel
    res = runs["slider"]
    art = _artists(plotting.snapshot(res, res.t[3]))
    seg = _xy(art["sketch:slide.0"])
    assert np.allclose(seg[:, 1], 0.0, atol=1e-9)
    x = res["q"][:, res.labels("q").index("slider.x")]
    assert seg[:, 0].min() < x.min() and seg[:, 0].max() > x.max()
    assert seg[:, 0].max() - seg[:, 0].min() < np.ptp(x) + 0.2 * np.ptp(x)
    _close()


def test_geneva_wheel_drawn_as_a_slotted_disc(runs, tmp_path):
    res = runs["geneva_full"]
    fig = plotting.snapshot(res, 0.5, tmp_path / "geneva.png")
    art = _artists(fig)
    slots = sorted(g for g in art if g.startswith("sketch:slot_"))
    # three slot lines, each drawn as its two opposite slots
    assert slots == [f"sketch:slot_{c}.{k}" for c in "abc" for k in (0, 1)]
    i = int(np.argmin(np.abs(res.t - 0.5)))
    xw, yw, phw = _pose(res, "wheel", i)
    ends = []
    for g in slots:
        d = _xy(art[g]) - (xw, yw)
        r = np.hypot(*d.T)
        ends.append(r.max())
        # along a diameter: the ends in line with the centre (observed 1.4e-16 r^2)
        assert abs(d[0, 0] * d[1, 1] - d[0, 1] * d[1, 0]) < 1e-9 * r.max() ** 2
        assert art[g].get_linewidth() > 3.0                # a groove, not a hairline
    # all six slots at the same depth: the pin reaches 50 from the centre (crank at 0,
    # t = 0.5); slot_c is never engaged in 1.5 s (only crossed by the pin while
    # released) and takes the travel seen on the others
    span = plotting.geometry(res).span(res.labels("q"), res["q"])
    inner = [np.hypot(*(_xy(art[g]) - (xw, yw)).T).min() for g in slots]
    assert inner == pytest.approx([50.0 - plotting.SKETCH_PAD * span] * 6, abs=1e-6)
    assert max(ends) - min(ends) < 1e-9 * max(ends)
    # the six slots 60 degrees apart
    ang = sorted(math.degrees(math.atan2(*(_xy(art[g])[1] - _xy(art[g])[0])[::-1])) % 180.0
                 for g in slots[::2])
    assert np.diff(ang) == pytest.approx([60.0, 60.0], abs=1e-6)
    # the wheel is the disc through the slots' outer ends about its pivot, less the
    # discs of its locking arcs: its rim between 50 (the arcs' middles) and those ends
    rim = np.hypot(*(_xy(art["body:wheel"]) - (xw, yw)).T)
    assert rim.max() <= max(ends) + 1e-9 and abs(rim.min() - 50.0) < 1e-9
    assert (tmp_path / "geneva.png").stat().st_size > 5000
    _close()


def test_sketch_artists_are_animated_in_the_blit_loop(runs, tmp_path):
    res = runs["geneva"]
    geo = plotting.geometry(res)
    tt, q, energy = plotting._scene_data(res, every=10)
    fig = plotting._new_figure((4.0, 3.0), 50, to_file=True)
    scene = plotting._Scene(fig, geo, res.labels("q"), q, tt, energy, ("time",))
    moving = {a.get_gid() for a in scene.update(0)}
    assert {"sketch:slot.0", "body:wheel"} <= moving
    frames = list(plotting._blit_frames(fig, scene, range(len(tt))))
    seg0 = _xy(scene.artists["sketch:slot.0"])
    assert len(frames) == len(tt) and not np.array_equal(frames[0], frames[-1])
    assert all(a.get_animated() for g, a in scene.artists.items() if g.startswith("sketch:"))
    # the last frame drawn is the last row's slot
    xw, yw, phw = q[-1, [res.labels("q").index(f"wheel.{c}") for c in ("x", "y", "phi")]]
    d = seg0 - (xw, yw)
    assert np.max(np.abs(d[:, 0] * math.sin(phw) - d[:, 1] * math.cos(phw))) < 1e-9
    out = plotting.animate(res, tmp_path / "g.gif", every=20, dpi=40)
    assert out.stat().st_size > 1000
    _close()


def test_spatial_models_have_no_sketches_and_a_bad_sketch_is_named(runs, monkeypatch):
    spatial = Model.from_file(EXAMPLES / "spatial_slider_crank.yaml")
    assert plotting.geometry(spatial).sketches == []
    from mbcore.elements.base import ConstraintType, Sketch
    from mbplugins.planar.gears import Gear
    assert ConstraintType.sketch(Gear(), {}, None) == []          # the default: nothing
    monkeypatch.setattr(Gear, "sketch",
                        lambda self, spec, ctx: [Sketch("nobody", "circle", np.zeros((3, 2)))])
    with pytest.raises(plotting.PlotError, match=r"mesh.*a body of the model"):
        plotting.geometry(Model.from_text(GEARS))
    monkeypatch.setattr(Gear, "sketch", lambda self, spec, ctx: 1 / 0)
    with pytest.raises(plotting.PlotError, match=r"\(mesh, gear\).*ZeroDivisionError"):
        plotting.geometry(Model.from_text(GEARS))


def test_a_point_crossing_a_line_does_not_stretch_it():
    """A slot's extent is the pin's travel in runs of rows on the line: a single row
    on it (the pin of a released joint crossing the line) is left out."""
    bodies = {n: plotting.BodyShape(n, "planar", [("o", (0.0, 0.0))]) for n in ("w", "p")}
    geo = plotting.Geometry(2, "ground", bodies, [], [], sketches=[
        ("s", plotting.Sketch("w", "slot", np.array([[0.0, 0.0], [1.0, 0.0]]), "slot",
                              follow=("p", (0.0, 0.0))))])
    px = np.r_[np.linspace(10.0, 20.0, 10), 30.0, 40.0, 50.0]
    py = np.r_[np.zeros(10), 5.0, 0.0, -5.0]           # row 11 crosses the line at x = 40
    q = np.column_stack([np.zeros(13), np.zeros(13), np.zeros(13), px, py, np.zeros(13)])
    labels = ["w.x", "w.y", "w.phi", "p.x", "p.y", "p.phi"]
    (_, sk), = geo.fitted_sketches(labels, q)
    pad = plotting.SKETCH_PAD * geo.span(labels, q)
    # (observed 0: the same sums)
    assert sk.points[:, 0] == pytest.approx([10.0 - pad, 20.0 + pad], abs=1e-9)
    assert np.all(sk.points[:, 1] == 0.0)
    # one or two rows: every row on the line counts
    (_, sk), = geo.fitted_sketches(labels, q[10:12])
    half = (0.5 * plotting.SKETCH_MIN + plotting.SKETCH_PAD) * geo.span(labels, q[10:12])
    assert sk.points[:, 0] == pytest.approx([40.0 - half, 40.0 + half], abs=1e-9)  # obs. 0


def test_geneva_locking_arcs_from_the_models_geometry(runs):
    """Each lock joint (a wheel point held on the line of centres) draws the two
    opposite concave arcs of the pin circle (p = 50 about the crank's axis, d = 100
    from the wheel's centre), between the mouths of the slots beside them; in the
    dwell the arc facing the crank is concentric with the crank's axis."""
    res = runs["geneva_full"]
    geo = plotting.geometry(res)
    arcs = [(n, sk) for n, sk in geo.sketches if sk.style == "lock"]
    assert [n for n, _ in arcs] == ["lock_a", "lock_a", "lock_b", "lock_b", "lock_c",
                                    "lock_c"]
    held = {"lock_a": (34.64101615137755, -20.0), "lock_b": (34.64101615137755, 20.0),
            "lock_c": (0.0, 40.0)}
    mouths = []
    for k, (name, sk) in enumerate(arcs):
        assert sk.body == "wheel" and sk.kind == "curve"
        side = 1.0 if k % 2 == 0 else -1.0            # the held point's side, then the other
        c = side * 100.0 * np.asarray(held[name]) / 40.0
        # on the pin circle about its centre (observed 1.4e-14; bound 1e-9)
        assert np.max(np.abs(np.hypot(*(sk.points - c).T) - 50.0)) < 1e-9
        r = np.hypot(*sk.points.T)
        assert abs(r.min() - 50.0) < 1e-9                   # d - p at its middle
        # its ends at the slots' mouths, sqrt(d^2 - p^2) from the centre, on slot lines
        for end in (sk.points[0], sk.points[-1]):
            assert abs(np.hypot(*end) - math.sqrt(7500.0)) < 1e-9
            mouths.append(round(math.degrees(math.atan2(end[1], end[0])) % 360.0, 6) % 360.0)
    # every one of the six slot mouths (0, 60, ..., 300 deg) ends two arcs
    assert sorted(mouths) == [a for a in (0.0, 60.0, 120.0, 180.0, 240.0, 300.0)
                              for _ in range(2)]
    # at t = 0 (mid-dwell, lock_a holding) one of lock_a's arcs is concentric with the
    # crank's axis O = (0, 0): drawn there, every point 50 from it (observed 2.1e-14)
    art = _artists(plotting.snapshot(res, 0.0))
    dist = [np.max(np.abs(np.hypot(*_xy(art[f"sketch:lock_a.{k}"]).T) - 50.0))
            for k in (1, 2)]
    assert min(dist) < 1e-9 and max(dist) > 10.0
    _close()
    # a single-slot wheel without lock joints has no arcs
    assert not [sk for _, sk in plotting.geometry(runs["geneva"]).sketches
                if sk.style == "lock"]
