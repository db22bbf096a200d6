"""The example plugin distribution (issue 16, deliverable 1): ``examples/plugins/
mbcore-bushing`` builds with pip into a fresh virtual environment that has mbcore,
and its types work there by name.

One environment per test session (module fixture), made as ``.ci/run`` has it:

* ``MBCORE_WHEEL`` set (CI): a new venv, ``pip install`` of that wheel plus Cython
  and setuptools (from the package index), then the plugin;
* otherwise: a new venv *layered* over this interpreter's environment (a ``.pth``
  adds its site-packages), i.e. mbcore as the test session has it installed
  (``pip install -e .`` of this checkout) without rebuilding its extensions.

Either way the plugin is built by ``pip install --no-build-isolation`` (the venv
already has mbcore, Cython, setuptools and NumPy; the package index is not needed)
from a copy of its directory, so the checkout gets no build artefacts, and is
installed into the new venv only: this session's registry never sees it.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "examples" / "plugins" / "mbcore-bushing"
EXAMPLE = PKG / "examples" / "ring_and_bob.yaml"
PROVIDER = "bushing (mbcore-bushing 0.1.0)"
TYPES = {("constraint", "point_on_circle"), ("constraint", "point_on_circle_c"),
         ("force", "bushing"), ("force", "bushing_c"), ("reporter", "peaks")}


def _missing_toolchain() -> str | None:
    """Why the plugin cannot be built here (None: it can)."""
    if importlib.util.find_spec("Cython") is None and not os.environ.get("MBCORE_WHEEL"):
        return "Cython is not installed (pip install Cython)"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc!r} not found)"
    return None


def _pip(py: Path, *args: str, cwd: Path) -> None:
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *args], capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, f"pip install {' '.join(args)}:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"


class Env:
    """The fresh venv: ``run(args)`` runs its python, ``mbcore(args)`` its mbcore CLI."""

    def __init__(self, root: Path, work: Path, layered: bool):
        self.root, self.work, self.layered = root, work, layered
        self.python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

    def _exec(self, cmd: list[str], check: bool) -> subprocess.CompletedProcess:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=self.work)
        if check:
            assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        return r

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self._exec([str(self.python), *args], check)

    def mbcore(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        if self.layered:       # the console script lives in the host environment
            return self.run("-m", "mbcore.cli", *args, check=check)
        cli = self.root / ("Scripts/mbcore.exe" if os.name == "nt" else "bin/mbcore")
        return self._exec([str(cli), *args], check)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Env:
    if not (PKG / "pyproject.toml").is_file():
        pytest.skip(f"the example package is not here ({PKG}): an sdist of mbcore "
                    "does not ship it")
    why = _missing_toolchain()
    if why:       # the test extra brings Cython; the compiler is the one that built mbcore
        pytest.fail(f"cannot build the example plugin: {why} "
                    "(pip install \".[test]\" installs what the tests need)")
    base = tmp_path_factory.mktemp("plugin_package")
    work = base / "work"
    work.mkdir()
    wheel = os.environ.get("MBCORE_WHEEL")
    layered = not wheel
    root = base / "venv"
    venv.EnvBuilder(with_pip=not layered).create(root)
    e = Env(root, work, layered)
    if layered:
        if importlib.util.find_spec("mbcore") is None or _dist_version("mbcore") is None:
            pytest.fail("mbcore is not installed in this environment (pip install -e .)")
        site = e.run("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        host = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in sorted(host))
        (Path(site.stdout.strip()) / "_mbcore_host.pth").write_text(lines)
    else:
        _pip(e.python, wheel, "Cython>=3", "setuptools>=77", cwd=work)
    src = base / "mbcore-bushing"          # a clean copy: the build happens there
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "*.so", "*.pyd", "*.c", "__pycache__", "*.h5", "*.json"))
    _pip(e.python, "--no-build-isolation", str(src), cwd=work)
    where = e.run("-c", "import mbcore_bushing, mbcore; print(mbcore_bushing.__file__); "
                  "print(mbcore.__file__)").stdout.split()
    assert Path(where[0]).resolve().is_relative_to(root.resolve()), where
    if not layered:
        assert Path(where[1]).resolve().is_relative_to(root.resolve()), where
    return e


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def test_mbcore_plugins_lists_the_types_with_distribution_and_version(env):
    out = env.mbcore("plugins").stdout
    rows = {}
    for line in out.splitlines()[1:]:
        kind, name, rest = line.split(None, 2)
        rows[(kind, name)] = rest
    for key in TYPES:
        assert key in rows, f"{key} not listed:\n{out}"
        assert rows[key].startswith(PROVIDER), rows[key]
    assert rows[("force", "spatial:bushing")].startswith("builtin ")   # no clash
    # the session that runs this test does not see the plugin (installed elsewhere)
    from mbcore.plugins import PluginManager
    assert not PluginManager().registry.has("force", "bushing_c")


def test_mbcore_run_of_the_example_model_writes_hdf5_and_the_peaks(env):
    from mbcore.results.result import Result
    out = env.work / "ring.h5"
    env.mbcore("run", "-q", str(EXAMPLE), "-o", str(out), "--t-end", "0.3")
    with Result(out) as res:
        assert res.status == "finished"
        assert len(res.t) == 31 and res.t[-1] == pytest.approx(0.3)
        q, labels = res.series("q"), res.labels("q")
        ring = q[:, [labels.index("ring.x"), labels.index("ring.y")]]
        np.testing.assert_allclose(np.hypot(ring[:, 0], ring[:, 1]), 1.0, atol=1e-7)
        assert np.ptp(ring[:, 0]) > 0.05
        flabels = res.labels("forces")
        assert "tie.fx" in flabels and "hanger.torque" in flabels
        assert res.labels("lam") == ["on_circle.radial"]
        assert PROVIDER in res.versions["plugins"]
        forces = res.series("forces")
    peaks = json.loads((env.work / "ring_and_bob.peaks.json").read_text())
    assert peaks["status"] == "finished" and peaks["rows"] == 31
    for k, label in enumerate(labels):
        assert peaks["channels"]["q"][label]["max_abs"] == np.abs(q[:, k]).max()
    for k, label in enumerate(flabels):
        assert peaks["channels"]["forces"][label]["max_abs"] == np.abs(forces[:, k]).max()


def test_python_and_compiled_bushing_forces_agree_in_the_fresh_venv(env):
    """A script in the venv: the capsule's force, power and Jacobians equal the Python
    reference to 1e-12 on random groups; with mbcore's compiled tier the whole runs
    are compared by the package's tests (test_runs.py)."""
    script = (
        "import numpy as np\n"
        "from mbcore_bushing import _kernel\n"
        "from mbcore_bushing.bushing import CompiledBushing\n"
        "from mbcore_bushing.testing import compiled_force, compiled_force_jacobian\n"
        "rng = np.random.default_rng(11); ne = 9; nof = np.zeros((ne, 0, 3))\n"
        "par = np.concatenate([rng.uniform(-1, 1, (ne, 4)), rng.uniform(0, 100, (ne, 6)),\n"
        "                      rng.uniform(-1, 1, (ne, 1))], 1)\n"
        "qb, qdb = rng.normal(size=(ne, 2, 3)), rng.normal(size=(ne, 2, 3))\n"
        "b = CompiledBushing()\n"
        "g, p, _ = compiled_force(_kernel.BUSHING, par, qb, qdb)\n"
        "K, C = compiled_force_jacobian(_kernel.BUSHING, par, qb, qdb)\n"
        "Kp, Cp = b.force_jacobian(par, qb, qdb, 0.0, nof)\n"
        "print(abs(g - b.force(par, qb, qdb, 0.0, nof)).max(),\n"
        "      abs(p - b.power_nc(par, qb, qdb, 0.0, nof).sum()), abs(K - Kp).max(),\n"
        "      abs(C - Cp).max(), abs(g).max())\n")
    d_force, d_power, d_k, d_c, scale = map(float, env.run("-c", script).stdout.split())
    assert scale > 10.0
    assert max(d_force, d_power, d_k, d_c) <= 1e-12, (d_force, d_power, d_k, d_c)


def test_the_package_tests_pass_in_the_fresh_venv(env):
    """examples/plugins/mbcore-bushing/tests: finite-difference Jacobians, gamma along
    trajectories, energy balance along runs, the reporter, Python vs compiled."""
    if not env.layered:
        _pip(env.python, "pytest>=7.4", cwd=env.work)
    r = env.run("-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(PKG),
                str(PKG / "tests"), check=False)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-2000:]
    passed = int(r.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 24 and "skipped" not in r.stdout.splitlines()[-1], r.stdout[-500:]
