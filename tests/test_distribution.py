"""Distribution: ``python -m build`` makes an sdist with the Cython sources and
nothing built, and a wheel that installs into a fresh virtual environment and
passes the quick tests.

The sdist check is fast (no compilation).  The wheel round trip compiles the
extensions once (the wheel is built from the sdist) and installs the runtime
dependencies into a new venv: marked ``slow``; set ``MBCORE_SKIP_WHEEL_TEST=1`` to
skip it locally.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _have_build_deps() -> bool:
    """Whether this environment satisfies pyproject.toml's build-system requirements
    (names and versions: a venv's bundled setuptools may be too old for the PEP 639
    ``license`` string), so that the build may skip its isolated environment."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement
    reqs = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for spec in reqs:
        req = Requirement(spec)
        try:
            have = version(req.name)
        except PackageNotFoundError:
            return False
        if not req.specifier.contains(have, prereleases=True):
            return False
    return True


def _build(args, outdir, isolation=True):
    """``python -m build``; an sdist alone may skip the isolated build environment
    (installing numpy, scipy, Cython there takes a minute) when this one has them."""
    pytest.importorskip("build", reason="the 'build' package (test extra) is not installed")
    if not isolation and _have_build_deps():
        args = [*args, "--no-isolation", "--skip-dependency-check"]
    r = subprocess.run([sys.executable, "-m", "build", *args, "--outdir", str(outdir), str(ROOT)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _check_sdist(path: Path) -> None:
    with tarfile.open(path) as tf:
        names = [n.split("/", 1)[1] for n in tf.getnames() if "/" in n]
    # every Cython source and header the build reads (the kernels of mbcore and of
    # the built-in plugins, and the plugin tier's C contract)
    sources = [p.relative_to(ROOT).as_posix() for pattern in (
        "ext/*.pyx", "ext/*.pxi", "ext/plugins/*.pyx", "ext/plugins/*.pxi",
        "src/mbcore/_ext/*.pxd", "src/mbcore/include/*.h") for p in ROOT.glob(pattern)]
    assert any(f.startswith("ext/plugins/") for f in sources)
    for f in sources:
        assert f in names, f
    built = [n for n in names if n.endswith((".so", ".pyd", ".o", ".dll", ".dylib"))
             or (n.startswith("ext/") and n.endswith((".c", ".cpp")))]
    assert not built, built
    for f in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "src/mbcore/py.typed",
              "src/mbcore/cli/app.py", "src/mbcore/cli/export.py"):
        assert f in names, f


def test_sdist_has_cython_sources_and_nothing_built(tmp_path):
    """The sdist ``.ci/run`` built (``MBCORE_SDIST``), else one built here (the
    Cython translation of every kernel: about a minute)."""
    if os.environ.get("MBCORE_SDIST"):
        sdist = Path(os.environ["MBCORE_SDIST"])
        assert sdist.is_file(), sdist
    else:
        _build(["--sdist"], tmp_path, isolation=False)
        (sdist,) = tmp_path.glob("mbcore-*.tar.gz")
    _check_sdist(sdist)


def test_the_test_extra_is_installed():
    """The README's test command installs the ``test`` extra; every test then runs
    (optional imports such as pandas, xarray, Cython for the plugin package or
    cibuildwheel do not turn into silent skips): the environment has each
    requirement at a version the extra allows."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["test"]
    missing = []
    for spec in extra:
        req = Requirement(spec)
        try:
            have = version(req.name)
        except PackageNotFoundError:
            missing.append(f"{req} (not installed)")
            continue
        if not req.specifier.contains(have, prereleases=True):
            missing.append(f"{req} (have {have})")
    assert not missing, "pip install \".[test]\": " + ", ".join(missing)


def test_cibuildwheel_configuration_is_consistent():
    """What can be checked without cibuildwheel: the selectors name supported
    CPythons (requires-python) and the test command runs the quick tests."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    cib = cfg["tool"]["cibuildwheel"]
    req = cfg["project"]["requires-python"]
    assert req.startswith(">=3.")
    minor = int(req.split(".")[1])
    for sel in cib["build"].split():
        assert sel.startswith("cp3") and int(sel[3:].rstrip("-*")) >= minor, sel
    assert "-m quick" in cib["test-command"] and "{project}/tests" in cib["test-command"]
    assert "test" in cib["test-extras"]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MBCORE_SKIP_WHEEL_TEST") == "1",
                    reason="MBCORE_SKIP_WHEEL_TEST=1")
def test_wheel_installs_into_fresh_venv_and_passes_quick_tests(tmp_path):
    """With ``MBCORE_SDIST`` and ``MBCORE_WHEEL`` set (``.ci/run`` builds them once
    with ``python -m build``), those files; else they are built here."""
    if os.environ.get("MBCORE_SDIST") and os.environ.get("MBCORE_WHEEL"):
        sdist, wheel = Path(os.environ["MBCORE_SDIST"]), Path(os.environ["MBCORE_WHEEL"])
        assert sdist.is_file() and wheel.is_file(), (sdist, wheel)
    else:
        dist = tmp_path / "dist"
        _build([], dist)                     # sdist, then the wheel from the sdist
        (sdist,) = dist.glob("mbcore-*.tar.gz")
        (wheel,) = dist.glob("mbcore-*.whl")
    _check_sdist(sdist)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", f"{wheel}[test]"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    work = tmp_path / "elsewhere"            # not the source tree: import the wheel
    work.mkdir()
    r = subprocess.run([str(py), "-c", "import mbcore, mbcore.system as s; "
                        "print(mbcore.__file__); print(s.compiled_available())"],
                       capture_output=True, text=True, cwd=work)
    assert r.returncode == 0, r.stderr
    where, compiled = r.stdout.split()
    assert Path(where).resolve().is_relative_to(env_dir.resolve()), where
    assert compiled == "True"
    cli = env_dir / ("Scripts/mbcore.exe" if os.name == "nt" else "bin/mbcore")
    r = subprocess.run([str(cli), "validate", "-q", str(ROOT / "examples" / "fourbar_kap.yaml")],
                       capture_output=True, text=True, cwd=work)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    r = subprocess.run([str(py), "-m", "pytest", "-q", "-m", "quick", "-p", "no:cacheprovider",
                        str(ROOT / "tests")], capture_output=True, text=True, cwd=work)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    assert " passed" in r.stdout


def test_cibuildwheel_lists_the_intended_build_identifiers():
    """``cibuildwheel --print-build-identifiers`` (offline: it only reads and validates
    the configuration) lists CPython 3.11-3.13 on manylinux x86_64 and aarch64, and
    nothing else (no musllinux, no i686, no PyPy)."""
    import shutil
    exe = shutil.which("cibuildwheel")
    if exe is None:
        pytest.fail("cibuildwheel is not installed (the test extra has it)")
    r = subprocess.run([exe, "--print-build-identifiers", "--platform", "linux"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    ids = set(r.stdout.split())
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    pys = [sel.rstrip("-*") for sel in cfg["build"].split()]
    archs = cfg["linux"]["archs"]
    assert ids == {f"{py}-manylinux_{a}" for py in pys for a in archs}
    assert {"cp311", "cp312", "cp313"} <= set(pys) and set(archs) == {"x86_64", "aarch64"}
