"""The 3D viewer (mbcore.results.viewer, mbcore.model.visual, ``mbcore view``):
the body ``shape`` key and its key-path errors, default shapes from inertia, the
HTML page's objects and animation tracks against the result's poses, and a real
headless browser (Debian's chromium) that renders the page (skipped without one)."""
from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from mbcore.cli import main
from mbcore.errors import ModelError
from mbcore.model import visual as V
from mbcore.model.model import Model
from mbcore.results.result import Result

from mbcore.results import gltf as G
from mbcore.results import viewer as VW

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
needs_bundle = pytest.mark.skipif(
    importlib.util.find_spec("meshcat") is None,
    reason="the viewer bundle comes with meshcat (pip install 'mbcore[view]')")

SHAPES = {
    "crank": {"cylinder": {"radius": 0.02, "length": 0.2, "axis": "x"}},
    "coupler": {"box": [0.4, 0.03, 0.03], "color": "#ff0000"},
}


def _spatial_data(t_end: float = 0.3) -> dict:
    data = yaml.safe_load((EXAMPLES / "spatial_slider_crank_dynamic.yaml").read_text())
    data["settings"].update(t_end=t_end, output_step=0.01)
    for b in data["bodies"]:
        if b["name"] in SHAPES:
            b["shape"] = copy.deepcopy(SHAPES[b["name"]])
    return data


@pytest.fixture(scope="module")
def spatial(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("viewer")
    model = d / "spatial.yaml"
    model.write_text(yaml.safe_dump(_spatial_data(), sort_keys=False))
    out = d / "spatial.h5"
    assert main(["-q", "run", str(model), "-o", str(out)]) == 0
    return out


def _run_example(tmp_path_factory, example: str, t_end: str) -> Path:
    """The result file of ``examples/EXAMPLE`` run to ``t_end``."""
    out = tmp_path_factory.mktemp("viewer_" + Path(example).stem) / "run.h5"
    assert main(["-q", "run", str(EXAMPLES / example), "-o", str(out),
                 "--t-end", t_end]) == 0
    return out


@pytest.fixture(scope="module")
def planar(tmp_path_factory) -> Path:
    return _run_example(tmp_path_factory, "slider_crank_dynamic.yaml", "0.5")


def _commands(html_text: str) -> list[dict]:
    m = re.search(r'<script type="application/json" id="mbcore-scene">(.*?)</script>',
                  html_text, re.S)
    assert m, "no scene data in the page"
    return json.loads(m.group(1))


def _objects(cmds: list[dict]) -> dict[str, dict]:
    return {c["path"]: c["object"] for c in cmds if c["type"] == "set_object"}


def _clips(cmds: list[dict]) -> dict[str, dict]:
    anim = [c for c in cmds if c["type"] == "set_animation"]
    assert len(anim) == 1
    return {a["path"]: {t["name"]: t for t in a["clip"]["tracks"]}
            for a in anim[0]["animations"]}


# ----------------------------------------------------------------- the shape key
def test_shape_key_round_trips_through_the_result_file(spatial):
    with Result(spatial) as r:
        m = Model.from_text(r.model_text, r.model_format)
    assert m.body("coupler").shape == SHAPES["coupler"]
    assert m.body("crank").shape == SHAPES["crank"]
    assert m.body("slider").shape is None
    again = Model.from_dict(m.to_dict())                 # and through to_dict/from_dict
    assert again.body("coupler").shape == SHAPES["coupler"]


@pytest.mark.parametrize("shape,path,words", [
    ({"box": [0.1, 0.2, -0.1]}, "bodies[1].shape.box[2]", "positive"),
    ({"box": [0.1, 0.2]}, "bodies[1].shape.box", "3 numbers"),
    ({"sphere": 0.1, "box": [1, 1, 1]}, "bodies[1].shape", "exactly one"),
    ({"cone": 1}, "bodies[1].shape.cone", "unknown key"),
    ({"cylinder": {"radius": 0.1}}, "bodies[1].shape.cylinder.length", "required"),
    ({"cylinder": {"radius": 0.1, "length": 1, "axis": "w"}},
     "bodies[1].shape.cylinder.axis", "x, y, z"),
    ({"mesh": "part.step"}, "bodies[1].shape.mesh", ".stl or .obj"),
    ({"sphere": 0.1, "color": "red"}, "bodies[1].shape.color", "#rrggbb"),
    ({"sphere": 0.1, "scale": 2}, "bodies[1].shape.scale", "only a mesh"),
    ([{"sphere": 0.1}, {"sphere": "big"}], "bodies[1].shape[1].sphere", "number"),
    ({"sphere": 0.1, "orientation": {"axis": [0, 0, 1], "angle": 1}},
     "bodies[1].shape.orientation.unit", "required"),
])
def test_shape_errors_name_the_key_path(shape, path, words):
    data = _spatial_data()
    data["bodies"][1]["shape"] = shape
    with pytest.raises(ModelError) as exc:
        Model.from_dict(data)
    assert exc.value.path == path
    assert words in str(exc.value)


def test_planar_box_of_two_edges_and_offset():
    [s] = V.parse_shapes({"box": [0.4, 0.1], "offset": [0.1, 0.0]}, "b", dimensions=2)
    assert s.size == (0.4, 0.1, 0.025) and s.offset == (0.1, 0.0, 0.0)


# ------------------------------------------------------------ default shapes
def test_inertia_box_has_the_principal_moments():
    m, J = 2.0, np.diag([0.01, 0.03, 0.035])
    (a, b, c), R = V.inertia_box(m, J)
    got = m / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    # the same moments back to rounding (observed 6.9e-18 absolute; bound 1e-15, 145x)
    assert np.max(np.abs(got - np.diag(J))) < 1e-15
    assert np.array_equal(R, np.eye(3))
    # a full tensor: the box lies along its principal axes (columns of R)
    Q = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    (a2, b2, c2), R2 = V.inertia_box(m, Q @ J @ Q.T + 1e-3 * np.array(
        [[0, 1, 0], [1, 0, 0], [0, 0, 0]]))
    Jp = R2.T @ (Q @ J @ Q.T + 1e-3 * np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])) @ R2
    got2 = m / 12.0 * np.array([b2 * b2 + c2 * c2, a2 * a2 + c2 * c2, a2 * a2 + b2 * b2])
    # eigen-decomposition: observed 4.1e-19 off the diagonal, 6.9e-18 in the moments;
    # bound 1e-14 (> 1000x)
    assert np.max(np.abs(Jp - np.diag(np.diag(Jp)))) < 1e-14
    assert np.max(np.abs(got2 - np.diag(Jp))) < 1e-14
    assert np.linalg.det(R2) > 0.0
    # a thin rod: the zero edge is raised to MIN_EDGE of the longest
    (a3, b3, c3), _ = V.inertia_box(1.0, np.diag([0.0, 1.0 / 12, 1.0 / 12]))
    assert a3 == pytest.approx(1.0) and b3 == c3 == pytest.approx(V.MIN_EDGE)


def test_disc_radius():
    r = V.disc_radius(0.5, 0.002)
    assert 0.5 * 0.5 * r * r == pytest.approx(0.002, rel=1e-14)    # observed 0 (exact)


# ------------------------------------------------------------ meshes
def test_read_mesh_stl_ascii_binary_and_obj(tmp_path):
    tri = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    ascii_stl = "solid t\n" + "".join(
        "facet normal 0 0 0\nouter loop\n" + "".join(
            f"vertex {x} {y} {z}\n" for x, y, z in tri[3 * k:3 * k + 3])
        + "endloop\nendfacet\n" for k in range(2)) + "endsolid t\n"
    (tmp_path / "a.stl").write_text(ascii_stl)
    rec = np.zeros(2, dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["v"] = tri.reshape(2, 3, 3)
    (tmp_path / "b.stl").write_bytes(b"\0" * 80 + np.uint32(2).tobytes() + rec.tobytes())
    (tmp_path / "c.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1/1 2/2 3/3 4/4\n")
    for name in ("a.stl", "b.stl"):
        v, f = V.read_mesh(tmp_path / name)
        assert np.array_equal(v[f].reshape(-1, 3), tri)
    v, f = V.read_mesh(tmp_path / "c.obj")
    assert v.shape == (4, 3) and f.tolist() == [[0, 1, 2], [0, 2, 3]]     # a fan
    (tmp_path / "d.obj").write_text("# nothing\n")
    with pytest.raises(ModelError, match="no vertices"):
        V.read_mesh(tmp_path / "d.obj")


@needs_bundle
def test_mesh_shape_in_the_scene(tmp_path):
    (tmp_path / "part.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    data = _spatial_data(t_end=0.02)
    data["bodies"][2]["shape"] = {"mesh": "part.obj", "scale": 0.1}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "m.h5"
    assert main(["-q", "run", str(tmp_path / "m.yaml"), "-o", str(out)]) == 0
    VW.to_html(out, tmp_path / "m.html")
    obj = _objects(_commands((tmp_path / "m.html").read_text()))
    geom = obj["/mbcore/bodies/slider/shape0"]["geometries"][0]
    assert geom["type"] == "BufferGeometry"
    assert geom["data"]["attributes"]["position"]["array"] == pytest.approx(
        [0, 0, 0, 0.1, 0, 0, 0, 0.1, 0], abs=1e-15)
    assert geom["data"]["index"]["array"] == [0, 1, 2]
    (tmp_path / "part.obj").unlink()
    with pytest.raises(VW.ViewerError, match="part.obj.*not found"):
        VW.to_html(out, tmp_path / "m2.html")


# ------------------------------------------------------------ the page
@needs_bundle
def test_page_holds_the_bundle_objects_and_shapes(spatial, tmp_path):
    page = tmp_path / "s.html"
    scene = VW.to_html(spatial, page)
    text = page.read_text()
    assert VW.viewer_bundle().read_text() in text                    # self-contained
    assert "<script src" not in text
    obj = _objects(_commands(text))
    for body in ("crank", "coupler", "slider"):
        shapes = [p for p in obj if p.startswith(f"/mbcore/bodies/{body}/shape")]
        assert shapes == [f"/mbcore/bodies/{body}/shape0"]
    box = obj["/mbcore/bodies/coupler/shape0"]
    g = box["geometries"][0]
    assert (g["type"], g["width"], g["height"], g["depth"]) == ("BoxGeometry", 0.4, 0.03, 0.03)
    assert box["materials"][0]["color"] == 0xFF0000
    cyl = obj["/mbcore/bodies/crank/shape0"]
    g = cyl["geometries"][0]
    assert (g["type"], g["radiusTop"], g["height"]) == ("CylinderGeometry", 0.02, 0.2)
    # three.js cylinders lie along y; axis x: the intrinsic matrix takes y to x
    M = np.array(cyl["object"]["matrix"]).reshape(4, 4, order="F")
    # cos(pi/2) = 6.1e-17 is the only rounding: bound 1e-12, > 100x
    assert np.allclose(M[:3, :3] @ [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], rtol=0, atol=1e-12)
    # the slider has no shape: the box of its inertia (0.001 each, 2 kg: edge sqrt(0.003))
    g = obj["/mbcore/bodies/slider/shape0"]["geometries"][0]
    assert g["width"] == pytest.approx(math.sqrt(0.003), rel=1e-14)
    # joint spheres: pivot, pin (both ends), hooke (both ends), guide on ground and slider
    markers = [p for p in obj if "/marker" in p]
    assert len(markers) == len(scene.markers) >= 6
    assert any(p.startswith("/mbcore/ground/") for p in markers)


@needs_bundle
def test_animation_tracks_are_the_result_poses(spatial, tmp_path):
    page = tmp_path / "s.html"
    VW.to_html(spatial, page)
    clips = _clips(_commands(page.read_text()))
    with Result(spatial) as r:
        t, q, labels = r.t, r.series("q"), r.labels("q")
    assert len(t) == 31
    for body in ("crank", "coupler", "slider"):
        tracks = clips[f"/mbcore/bodies/{body}"]
        pos = tracks[".position"]["keys"]
        quat = tracks[".quaternion"]["keys"]
        assert len(pos) == len(quat) == len(t)
        assert [k["time"] for k in pos] == [float(x - t[0]) for x in t]
        col = {c: labels.index(f"{body}.{c}") for c in ("x", "y", "z", "p0", "p1", "p2", "p3")}
        # JSON keeps every float exactly: the values are the result's, bit for bit
        assert np.array_equal(np.array([k["value"] for k in pos]),
                              q[:, [col["x"], col["y"], col["z"]]])
        assert np.array_equal(np.array([k["value"] for k in quat]),
                              q[:, [col["p1"], col["p2"], col["p3"], col["p0"]]])


@needs_bundle
def test_frames_are_strided_and_windowed(spatial):
    with Result(spatial) as r:
        s = VW.build_scene(r, max_frames=10)
        assert len(s.t) <= 10 and s.t[0] == r.t[0] and s.t[-1] == r.t[-1]
        assert np.all(np.diff(s.rows) > 0)
        s = VW.build_scene(r, start=0.1, end=0.2)
        assert s.t[0] == pytest.approx(0.1) and s.t[-1] == pytest.approx(0.2)
        assert len(s.t) == 11
        s = VW.build_scene(r, fps=50)                  # output every 0.01 s: every 2nd row
        assert np.all(np.diff(s.rows)[:-1] == 2)
        with pytest.raises(VW.ViewerError, match="no output rows"):
            VW.build_scene(r, start=5.0)


@needs_bundle
def test_planar_poses_lie_in_the_plane(planar, tmp_path):
    page = tmp_path / "p.html"
    scene = VW.to_html(planar, page)
    assert scene.planar
    clips = _clips(_commands(page.read_text()))
    with Result(planar) as r:
        q, labels = r.series("q"), r.labels("q")
    for body in ("crank", "rod", "slider"):
        tr = clips[f"/mbcore/bodies/{body}"]
        pos = np.array([k["value"] for k in tr[".position"]["keys"]])
        quat = np.array([k["value"] for k in tr[".quaternion"]["keys"]])
        phi = q[:, labels.index(f"{body}.phi")]
        assert np.array_equal(pos[:, :2], q[:, [labels.index(f"{body}.x"),
                                                labels.index(f"{body}.y")]])
        assert np.all(pos[:, 2] == 0.0)
        assert np.array_equal(quat[:, 2], np.sin(0.5 * phi))
        assert np.array_equal(quat[:, 3], np.cos(0.5 * phi))
    # the rod has joints 0.5 m apart: a link of that length plus its width
    rod = next(b for b in scene.bodies if b.name == "rod")
    assert rod.shapes[0].size[0] == pytest.approx(0.5 * 1.12, rel=1e-12)


@needs_bundle
def test_cli_view(spatial, tmp_path, capsys):
    out = tmp_path / "v.html"
    assert main(["view", str(spatial), "-o", str(out), "--fps", "20", "--triads"]) == 0
    assert "wrote" in capsys.readouterr().out
    cmds = _commands(out.read_text())
    assert "/mbcore/bodies/crank/triad" in _objects(cmds)
    assert len(_clips(cmds)["/mbcore/bodies/crank"][".position"]["keys"]) == 7     # 0.3 s at 20 per second
    assert main(["view", str(spatial), "-o", str(out), "--start", "9"]) == 1
    assert "no output rows" in capsys.readouterr().err


def test_contact_geometry_draws_a_body_without_shape(tmp_path):
    data = yaml.safe_load((EXAMPLES / "spheres_on_plane.yaml").read_text())
    data["settings"]["t_end"] = 0.01
    data["bodies"][1]["shape"] = {"box": [0.05, 0.05, 0.05]}          # ball2
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "s.h5"
    assert main(["-q", "run", str(tmp_path / "s.yaml"), "-o", str(out)]) == 0
    with Result(out) as r:
        scene = VW.build_scene(r)
    shapes = {b.name: [(s.kind, s.size, s.offset) for s in b.shapes] for b in scene.bodies}
    assert shapes["ball1"] == [("sphere", (0.05,), (0.0, 0.0, 0.0))]
    assert shapes["ball3"] == [("sphere", (0.05,), (0.0, 0.0, 0.0))]     # two contacts, one sphere
    cap = shapes["capsule"]
    assert [k for k, _, _ in cap] == ["sphere", "sphere", "cylinder"]
    assert cap[2][1] == pytest.approx((0.03, 0.4)) and cap[2][2] == pytest.approx((0.05, 0, 0))
    # a body with a shape keeps it; its contact sphere is a translucent marker
    assert shapes["ball2"] == [("box", (0.05, 0.05, 0.05), (0.0, 0.0, 0.0))]
    assert [(m[0], m[2], m[3]) for m in scene.markers] == [
        ("/mbcore/bodies/ball2", 0.05, VW.CONTACT_COLOR)]


# ------------------------------------------------------------ glTF
@pytest.mark.parametrize("shape", [V.Shape("box", (0.1, 0.2, 0.3)), V.Shape("sphere", (0.2,)),
                                   V.Shape("cylinder", (0.1, 0.4))])
def test_gltf_triangles_face_outwards(shape):
    tri = G.triangles(shape, {})
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    big = np.linalg.norm(n, axis=1) > 0.0
    assert np.all(np.einsum("ij,ij->i", n[big], tri[big].mean(axis=1)) > 0.0)
    ext = np.abs(tri.reshape(-1, 3)).max(axis=0)
    want = {"box": (0.05, 0.1, 0.15), "sphere": (0.2,) * 3, "cylinder": (0.1, 0.2, 0.1)}
    assert ext == pytest.approx(want[shape.kind], rel=1e-12)


def test_gltf_file_holds_the_scene_and_its_animation(spatial, tmp_path):
    with Result(spatial) as r:
        scene = VW.build_scene(r)
    out = tmp_path / "s.glb"
    G.to_glb(scene, out)
    gltf, arrays = G.read_glb(out)
    assert gltf["asset"]["version"] == "2.0"
    names = [n["name"] for n in gltf["nodes"]]
    assert {"crank", "coupler", "slider", "coupler/shape0"} <= set(names)
    n_shapes = sum(len(b.shapes) for b in scene.bodies) + len(scene.markers)
    assert [s.name for s in scene.springs] == ["damper"]          # and one spring
    assert len(gltf["meshes"]) == n_shapes + 1
    [anim] = gltf["animations"]
    assert len(anim["channels"]) == 2 * len(scene.bodies) + 3
    for ch in anim["channels"]:
        if names[ch["target"]["node"]].startswith("spring:"):
            continue                   # test_springs_are_coils_between_their_attachment_points
        body = {b.name: b for b in scene.bodies}[names[ch["target"]["node"]]]
        smp = anim["samplers"][ch["sampler"]]
        # the keyframes are the scene's poses and times, as float32 (glTF's type)
        assert np.array_equal(arrays[smp["input"]][:, 0],
                              (scene.t - scene.t[0]).astype(np.float32))
        want = body.position if ch["target"]["path"] == "translation" else body.quaternion
        assert np.array_equal(arrays[smp["output"]], want.astype(np.float32))
    # the coupler's box: its vertices span the given edges
    k = gltf["nodes"][names.index("coupler/shape0")]["mesh"]
    pos = arrays[gltf["meshes"][k]["primitives"][0]["attributes"]["POSITION"]]
    assert np.ptp(pos, axis=0) == pytest.approx([0.4, 0.03, 0.03], rel=1e-6)   # float32


def test_cli_view_gltf_only(spatial, tmp_path, capsys):
    out = tmp_path / "v.glb"
    assert main(["view", str(spatial), "--gltf", str(out), "--max-frames", "5"]) == 0
    gltf, arrays = G.read_glb(out)
    assert arrays[gltf["animations"][0]["samplers"][0]["input"]].shape == (5, 1)
    assert main(["view", str(spatial)]) == 2
    assert "-o FILE.html and/or --gltf" in capsys.readouterr().err


# ------------------------------------------------------------ a real browser
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    return None


def _browser() -> str:
    """The chromium executable, else the test is skipped."""
    exe = _chromium()
    if exe is None:
        # .ci/run sets MBCORE_TEST_BROWSER=1 when it installed chromium: then no skip
        assert not os.environ.get("MBCORE_TEST_BROWSER"), "chromium was installed but is not found"
        pytest.skip("no chromium executable")
    return exe


def _screenshot(exe: str, page: Path, png: Path) -> np.ndarray:
    from PIL import Image
    subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                    "--window-size=800,600", "--virtual-time-budget=5000",
                    f"--screenshot={png}", page.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    with Image.open(png) as img:
        return np.asarray(img.convert("RGB"), dtype=int)


def _browser_shots(result: Path, tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Screenshots of the result's page (not playing) and of the same page, camera
    and grid without the bodies, markers and sketches."""
    exe = _browser()
    page, empty = tmp_path / "scene.html", tmp_path / "empty.html"
    with Result(result) as r:
        scene = VW.build_scene(r)
    cmds = VW.scene_commands(scene, play=False)
    page.write_text(VW.scene_html(cmds))
    empty.write_text(VW.scene_html([c for c in cmds if not c["path"].startswith("/mbcore")
                                    and c["type"] != "set_animation"]))
    return (_screenshot(exe, page, tmp_path / "scene.png"),
            _screenshot(exe, empty, tmp_path / "empty.png"))


@needs_bundle
def test_a_headless_browser_draws_the_scene(spatial, tmp_path):
    a, b = _browser_shots(spatial, tmp_path)
    assert a.shape == (600, 800, 3)
    assert a.std() > 10.0                                  # not a blank or black page

    def red(img):       # the coupler's #ff0000 under the viewer's lights
        return int(np.count_nonzero((img[..., 0] > 120) & (img[..., 1] < 60)
                                    & (img[..., 2] < 60)))

    # observed: 525 red pixels with the scene (it reaches the damper's ground point
    # 1 m away), 8 (meshcat's x axis) without
    assert red(a) > 250 and red(b) < 100
    assert np.count_nonzero(np.abs(a - b).sum(axis=-1) > 60) > 1000   # observed 2055


# ------------------------------------------------- planar bodies drawn by sketches
def _docs_model(name: str) -> str:
    """A model of the docs' plot gallery (docs/_ext/mbcore_plots.py: GEARS, CAM)."""
    spec = importlib.util.spec_from_file_location(
        "mbcore_plots", EXAMPLES.parent / "docs" / "_ext" / "mbcore_plots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


@pytest.fixture(scope="module")
def geneva(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("viewer_geneva")
    out = d / "geneva.h5"
    assert main(["-q", "run", str(EXAMPLES / "geneva_full_cycle.yaml"), "-o", str(out),
                 "--t-end", "0.6"]) == 0           # dwell, then the pin in a slot
    return out


@pytest.fixture(scope="module")
def gears(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("viewer_gears")
    model, out = d / "gears.yaml", d / "gears.h5"
    model.write_text(_docs_model("GEARS"))   # a gear pair and a rack
    assert main(["-q", "run", str(model), "-o", str(out)]) == 0
    return out


def _vertices(obj: dict) -> np.ndarray:
    geo = obj["geometries"][0]
    return np.array(geo["data"]["attributes"]["position"]["array"]).reshape(-1, 3)


def _drawing(path: Path):
    from mbcore.results.plotting import geometry
    with Result(path) as r:
        geo = geometry(r)
        fitted = geo.fitted_sketches(r.labels("q"), r.series("q"))
    return geo.outlines(fitted), fitted


@needs_bundle
def test_geneva_wheel_is_a_plate_of_its_sketch(geneva, tmp_path):
    page = tmp_path / "g.html"
    scene = VW.to_html(geneva, page)
    objs = _objects(_commands(page.read_text()))
    outlines, fitted = _drawing(geneva)
    wheel = outlines["wheel"]                      # the disc through the slots' outer ends
    assert set(outlines) == {"wheel"}
    v = _vertices(objs["/mbcore/bodies/wheel/shape0"])
    n = len(wheel) - 1                             # closed: the first point repeated
    h = VW.PLATE_THICKNESS * float(np.max(np.hypot(*wheel.T)))
    # the top face: the outline's points in order at z = +h/2, then the fan's centre
    assert np.array_equal(v[:n, :2], wheel[:n]) and np.all(v[:n, 2] == 0.5 * h)
    assert np.array_equal(v[n], [0.0, 0.0, 0.5 * h])          # star-shaped about the origin
    assert np.array_equal(v[n + 1:2 * n + 1], v[:n] * [1, 1, -1])   # the bottom face
    # the crank keeps its bar; every sketch is a line in its body's frame
    assert [s.kind for s in scene.bodies[0].shapes] == ["box"]
    lines = {p: o for p, o in objs.items() if "/sketch:" in p}
    # 3 slots, mirrored, 3 locking guides and their 6 locking arcs
    assert len(lines) == len(fitted) == 15
    for k, (name, sk) in enumerate(fitted):
        parent = "/mbcore/ground" if sk.body == "ground" else f"/mbcore/bodies/{sk.body}"
        obj = lines[f"{parent}/sketch:{name}.{k}"]
        assert obj["object"]["type"] == "Line"
        pts = _vertices(obj)
        assert np.array_equal(pts[:, :2], sk.points)
        assert np.all(pts[:, 2] > 0.5 * h) if sk.body == "wheel" else np.all(pts[:, 2] < -0.5 * h)
    slots = [sk for _, sk in fitted if sk.kind == "slot"]
    assert len(slots) == 6 and all(sk.body == "wheel" for sk in slots)


@needs_bundle
def test_gears_are_pitch_discs_and_the_rack_has_its_pitch_line(gears, tmp_path):
    page = tmp_path / "gears.html"
    VW.to_html(gears, page)
    objs = _objects(_commands(page.read_text()))
    # pitch circles about the pivots: the wheel's frame origin is 5 mm off its pivot
    for body, radius, cx in (("pinion", 25.0, 0.0), ("wheel", 50.0, 5.0)):
        v = _vertices(objs[f"/mbcore/bodies/{body}/shape0"])
        top = v[:96]                               # the outline, then the fan's centre
        r = np.hypot(top[:, 0] - cx, top[:, 1])
        assert np.array_equal(v[96], [0.0, 0.0, top[0, 2]]) and np.all(top[:, 2] > 0)
        assert np.all(np.abs(r - radius) < 1e-12 * radius)   # observed 7.1e-15 (wheel)
    # the rack (one joint point) keeps its disc, with its pitch line along x
    assert objs["/mbcore/bodies/rack/shape0"]["geometries"][0]["type"] == "CylinderGeometry"
    pitch = _vertices(objs["/mbcore/bodies/rack/sketch:rp.4"])
    assert np.all(pitch[:, 1] == 0.0) and np.ptp(pitch[:, 0]) > 50.0   # the travel seen


def test_plate_mesh_faces_outwards_and_fans_from_the_centroid_off_the_origin():
    # a square beside the origin (not star-shaped about it), clockwise
    sq = np.array([[10.0, 0.0], [10.0, 2.0], [12.0, 2.0], [12.0, 0.0], [10.0, 0.0]])
    v, f = VW.plate_mesh(sq, 0.5)
    assert np.array_equal(v[4], [11.0, 1.0, 0.25])             # the centroid
    tri = v[f]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    out = tri.mean(axis=1) - [11.0, 1.0, 0.0]
    assert np.all(np.einsum("ij,ij->i", normal, out) > 0)      # every face outwards
    # the enclosed volume (divergence theorem) is area x thickness
    vol = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0
    assert vol == pytest.approx(4.0 * 0.5, rel=1e-12)


def test_spatial_scenes_have_no_sketch_lines(spatial):
    with Result(spatial) as r:
        assert VW.build_scene(r).lines == []


@needs_bundle
def test_a_headless_browser_draws_the_geneva_plate_and_slots(geneva, tmp_path):
    a, b = _browser_shots(geneva, tmp_path)

    def green(img):     # the wheel's #59a14f under the viewer's lights
        return int(np.count_nonzero((img[..., 1] > img[..., 0] + 25)
                                    & (img[..., 1] > img[..., 2] + 25)))

    def white(img):     # the slot lines (#f4f4f4)
        return int(np.count_nonzero(img.min(axis=-1) > 225))

    # observed 17737 and 0 (the plate less its locking arcs' discs)
    assert green(a) > 8000 and green(b) == 0
    assert white(a) - white(b) > 40                # observed 120 - 34


@needs_bundle
def test_a_cam_is_a_plate_of_its_outline(tmp_path):
    model, out = tmp_path / "cam.yaml", tmp_path / "cam.h5"
    model.write_text(_docs_model("CAM"))          # a disc cam and a roller follower
    assert main(["-q", "run", str(model), "-o", str(out)]) == 0
    page = tmp_path / "cam.html"
    VW.to_html(out, page)
    objs = _objects(_commands(page.read_text()))
    outlines, _ = _drawing(out)
    cam = outlines["cam"]
    n = len(cam) - 1
    v = _vertices(objs["/mbcore/bodies/cam/shape0"])
    assert np.array_equal(v[:n, :2], cam[:n])      # the cam's outline, in body coordinates
    assert np.array_equal(v[n, :2], [0.0, 0.0])    # star-shaped about the cam's axis
    assert "/mbcore/bodies/cam/sketch:roll.1" in objs


# ------------------------------------------------------------ springs
def _attachment(r, body: str, s, rows) -> np.ndarray:
    """Global positions (len(rows), 3) of the point ``s`` of ``body`` from the result's
    coordinates (planar: x + R(phi) s; spatial: r + A(p) s, Nikravesh (1988), §6.1.4),
    written out here independently of the viewer's quaternion rotation."""
    from mbcore.elements.rotations import A
    q, labels = r.series("q")[rows], r.labels("q")
    s = np.asarray(s, dtype=float)
    if body == "ground":
        return np.tile(np.r_[s, [0.0] * (3 - len(s))], (len(rows), 1))
    col = {lab: k for k, lab in enumerate(labels)}
    if f"{body}.p0" in col:
        out = []
        for row in q:
            r0 = row[[col[f"{body}.{c}"] for c in ("x", "y", "z")]]
            p = row[[col[f"{body}.{c}"] for c in ("p0", "p1", "p2", "p3")]]
            out.append(r0 + A(p) @ s)
        return np.array(out)
    x, y, phi = (q[:, col[f"{body}.{c}"]] for c in ("x", "y", "phi"))
    return np.column_stack([x + np.cos(phi) * s[0] - np.sin(phi) * s[1],
                            y + np.sin(phi) * s[0] + np.cos(phi) * s[1], np.zeros(len(x))])


def _turn(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v turned by the quaternion (x, y, z, w) as a rotation matrix."""
    from mbcore.elements.rotations import A
    x, y, z, w = quat
    return A(np.array([w, x, y, z])) @ v


@pytest.fixture(scope="module")
def platform(tmp_path_factory) -> Path:
    return _run_example(tmp_path_factory, "platform.yaml", "0.4")


@needs_bundle
@pytest.mark.parametrize("which,name,ends", [
    ("spatial", "damper", (("ground", (-1.0, 0.05, 0.1)), ("slider", (0.0, 0.0, 0.0)))),
    ("platform", "spring", (("ground", (0.25, 0.0)), ("platform", (-0.25, 0.0))))])
def test_springs_are_coils_between_their_attachment_points(which, name, ends, request,
                                                           tmp_path):
    result = request.getfixturevalue(which)
    page = tmp_path / "s.html"
    scene = VW.to_html(result, page)
    cmds = _commands(page.read_text())
    path = f"/mbcore/springs/{name}"
    coil = _vertices(_objects(cmds)[f"{path}/coil"])
    assert np.array_equal(coil[0], [0.0, 0.0, 0.0]) and np.array_equal(coil[-1], [0, 1.0, 0])
    radius = VW.SPRING_RADIUS * scene.size
    helix = coil[1:-1]
    # the helix about the y axis at the coil's radius (observed 1.5e-16 relative;
    # bound 1e-12, > 1000x)
    assert np.max(np.abs(np.hypot(helix[:, 0], helix[:, 2]) - radius)) < 1e-12 * radius
    tracks = _clips(cmds)[path]
    pos = np.array([k["value"] for k in tracks[".position"]["keys"]])
    quat = np.array([k["value"] for k in tracks[".quaternion"]["keys"]])
    scale = np.array([k["value"] for k in tracks[".scale"]["keys"]])
    assert len(pos) == len(quat) == len(scale) == len(scene.t) > 10
    with Result(result) as r:
        rows = [1, len(scene.rows) - 1]                 # two keyframes, the body moved
        (bi, si), (bj, sj) = ends
        start = _attachment(r, bi, si, scene.rows[rows])
        end = _attachment(r, bj, sj, scene.rows[rows])
    assert not np.allclose(end[0], end[1], rtol=0.0, atol=1e-6)    # the spring moved
    for k, row in enumerate(rows):
        # the node's origin is point i, bit for bit where it is a ground point
        assert np.array_equal(pos[row], start[k])
        # the unit coil's end (0, 1, 0), scaled by (1, L, 1) and turned: point j
        # (observed 2.5e-16 relative to the scene size; bound 1e-12, > 1000x)
        tip = pos[row] + _turn(quat[row], np.array([0.0, scale[row, 1], 0.0]))
        assert np.max(np.abs(tip - end[k])) < 1e-12 * scene.size
        assert scale[row, 0] == scale[row, 2] == 1.0
        # the length is the distance of the points (observed 0, the same formula;
        # bound 1e-14)
        assert abs(scale[row, 1] - np.linalg.norm(end[k] - start[k])) < 1e-14 * scene.size
        # a unit quaternion (observed 1.1e-16; bound 1e-13, > 100x)
        assert abs(np.linalg.norm(quat[row]) - 1.0) < 1e-13
    # the same in the glTF file: a LINES node with translation, rotation, scale channels
    out = tmp_path / "s.glb"
    G.to_glb(scene, out)
    gltf, arrays = G.read_glb(out)
    names = [n["name"] for n in gltf["nodes"]]
    node = names.index(f"spring:{name}")
    assert node in gltf["nodes"][0]["children"]               # under the z-up root
    prim = gltf["meshes"][gltf["nodes"][node]["mesh"]]["primitives"][0]
    assert prim["mode"] == G.LINES
    seg = arrays[prim["attributes"]["POSITION"]]
    assert np.array_equal(seg, np.repeat(coil, 2, axis=0)[1:-1].astype(np.float32))
    [anim] = gltf["animations"]
    got = {ch["target"]["path"]: arrays[anim["samplers"][ch["sampler"]]["output"]]
           for ch in anim["channels"] if ch["target"]["node"] == node}
    assert set(got) == {"translation", "rotation", "scale"}
    for k, row in enumerate(rows):
        tip = got["translation"][row] + _turn(got["rotation"][row].astype(float),
                                              np.array([0.0, got["scale"][row, 1], 0.0]))
        # float32 keyframes (glTF's type): within 1e-5 of the scene size (observed
        # 5.5e-8, > 100x)
        assert np.max(np.abs(tip - end[k])) < 1e-5 * scene.size
        assert np.max(np.abs(got["translation"][row] - start[k])) < 1e-5 * scene.size


def test_spring_poses_turn_y_onto_every_direction():
    start = np.zeros((4, 3))
    end = np.array([[0.0, 2.0, 0.0], [0.0, -3.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    pos, quat, scale = VW.spring_poses(start, end)
    assert np.array_equal(quat[0], [0.0, 0.0, 0.0, 1.0])          # along y: no turn
    assert np.array_equal(quat[1], [1.0, 0.0, 0.0, 0.0])          # along -y: half a turn
    assert np.array_equal(scale[:, 1], [2.0, 3.0, math.sqrt(3.0), 0.0])
    for k in range(3):   # observed 8.9e-16; bound 1e-12, > 1000x
        assert np.max(np.abs(_turn(quat[k], [0, scale[k, 1], 0]) - end[k])) < 1e-12


@needs_bundle
def test_gltf_carries_the_sketch_lines_of_the_html_scene(geneva, tmp_path):
    page, out = tmp_path / "g.html", tmp_path / "g.glb"
    scene = VW.to_html(geneva, page)
    objs = _objects(_commands(page.read_text()))
    G.to_glb(scene, out)
    gltf, arrays = G.read_glb(out)
    names = [n["name"] for n in gltf["nodes"]]
    lines = {p: o for p, o in objs.items() if "/sketch:" in p}
    assert len(lines) == len(scene.lines) == 15
    for parent, name, pts, _ in scene.lines:
        node = names.index(f"sketch:{name}")
        holder = 0 if parent == "/mbcore/ground" else names.index(parent.rsplit("/", 1)[1])
        assert node in gltf["nodes"][holder]["children"]        # in its body's frame
        prim = gltf["meshes"][gltf["nodes"][node]["mesh"]]["primitives"][0]
        assert prim["mode"] == G.LINES
        seg = arrays[prim["attributes"]["POSITION"]]
        html_pts = _vertices(lines[f"{parent}/sketch:{name}"])
        # the HTML line's points as segments (a, b), (b, c), ..., in float32
        assert np.array_equal(seg, np.repeat(html_pts, 2, axis=0)[1:-1].astype(np.float32))


def test_a_sphere_group_draws_its_spheres(tmp_path):
    data = yaml.safe_load((EXAMPLES / "spheres_in_box.yaml").read_text())
    data["bodies"] = data["bodies"][:3]
    data["settings"].update(t_end=0.02)
    [group] = data["forces"]
    group["spheres"] = group["spheres"][:3]
    del group["radius"]
    group["radii"] = [0.04, 0.03, 0.02]
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "g.h5"
    assert main(["-q", "run", str(tmp_path / "g.yaml"), "-o", str(out)]) == 0
    with Result(out) as r:
        scene = VW.build_scene(r)
    assert [[(s.kind, s.size, s.offset) for s in b.shapes] for b in scene.bodies] == [
        [("sphere", (radius,), (0.0, 0.0, 0.0))] for radius in (0.04, 0.03, 0.02)]


@needs_bundle
def test_a_headless_browser_draws_the_spring(spatial, tmp_path):
    exe = _browser()
    with Result(spatial) as r:
        cmds = VW.scene_commands(VW.build_scene(r), play=False)
    bare = []                                   # the same page without the damper's coil
    for c in copy.deepcopy(cmds):
        if c["type"] == "set_animation":
            c["animations"] = [a for a in c["animations"]
                               if not a["path"].startswith("/mbcore/springs")]
        elif c["path"].startswith("/mbcore/springs"):
            continue
        bare.append(c)
    assert len(bare) == len(cmds) - 2           # the coil's object and its transform
    (tmp_path / "a.html").write_text(VW.scene_html(cmds))
    (tmp_path / "b.html").write_text(VW.scene_html(bare))
    a = _screenshot(exe, tmp_path / "a.html", tmp_path / "a.png")
    b = _screenshot(exe, tmp_path / "b.html", tmp_path / "b.png")
    changed = np.abs(a - b).sum(axis=-1) > 60
    assert np.count_nonzero(changed) > 40       # observed 126 pixels of the coil
