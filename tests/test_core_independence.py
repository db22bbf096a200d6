"""The core is independent of its built-in plugins (issue 16 item 4): every module of
``mbcore`` imports with ``mbplugins`` made unimportable; ``MBCORE_DISABLE_PLUGINS`` /
``MBCORE_PLUGINS`` select the plugins of a process; the core's own tests (marker
``core``) pass on the stub plugin set (tests/stub_plugins.py) alone."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import stub_plugins

import mbcore
from mbcore import PluginError
from mbcore.plugins import PluginManager

TESTS = Path(__file__).resolve().parent

#: the test files holding tests marked ``core`` (kept complete by a test below)
CORE_FILES = ("test_core_independence.py", "test_functions.py", "test_rotations.py",
              "test_plugin_contract.py", "test_plugin_isolation.py", "test_plugins.py")


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MBCORE_PLUGINS", "MBCORE_DISABLE_PLUGINS",
                        "MBCORE_TEST_STUB_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(TESTS), env.get("PYTHONPATH"))))
    env.update(extra)
    return env


def test_every_mbcore_module_imports_with_mbplugins_blocked():
    """A fresh process blocks ``mbplugins`` (a sys.meta_path finder raising
    ImportError) before importing mbcore, then imports every module of the package,
    compiled extensions (``mbcore._ext.*``) included."""
    code = textwrap.dedent("""
        import import_blocker
        import_blocker.block("mbplugins")
        import importlib, pkgutil, sys
        import mbcore
        names, failed = [], []
        for info in pkgutil.walk_packages(mbcore.__path__, "mbcore.",
                                          onerror=lambda name: failed.append(name)):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue
            names.append(info.name)
            try:
                importlib.import_module(info.name)
            except Exception as exc:
                failed.append(f"{info.name}: {exc!r}")
        try:
            import mbplugins  # noqa: F401
            failed.append("mbplugins is importable")
        except ImportError:
            pass
        assert not any(m == "mbplugins" or m.startswith("mbplugins.") for m in sys.modules)
        print(len(names), sum(n.startswith("mbcore._ext.") for n in names))
        print(" ".join(names))
        print("\\n".join(failed))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env())
    assert out.returncode == 0, out.stderr
    counts, names, *failed = out.stdout.splitlines()
    n_modules, n_ext = map(int, counts.split())
    assert [f for f in failed if f] == []
    assert n_modules >= 40 and n_ext >= 5, counts
    assert {"mbcore.integrate.fastloop", "mbcore.integrate.rk", "mbcore._ext._dynamics",
            "mbcore.analysis", "mbcore.cli"} <= set(names.split())


def test_disable_plugins_by_name_package_or_distribution(monkeypatch):
    assert PluginManager().registry.has("constraint", "revolute")
    for value in ("mbplugins", "builtin", "mbcore", "other, mbplugins"):
        monkeypatch.setenv("MBCORE_DISABLE_PLUGINS", value)
        pm = PluginManager()
        assert "builtin" not in pm.plugin_names(), value
        assert not pm.registry.has("constraint", "revolute")
    monkeypatch.setenv("MBCORE_DISABLE_PLUGINS", "someone_else")
    assert PluginManager().registry.has("constraint", "revolute")


def test_environment_plugins_are_registered_and_named_when_broken(monkeypatch):
    monkeypatch.setenv("MBCORE_DISABLE_PLUGINS", "mbplugins")
    monkeypatch.setenv("MBCORE_PLUGINS", "stub_plugins:PLUGIN")
    reg = PluginManager().registry
    assert reg.names("constraint") == ["stub_angle_driver", "stub_pin"]
    assert reg.get("reporter", "memory") is stub_plugins.StubMemory
    assert str(reg.provider("force", "stub_spring")) == "stub_plugins:PLUGIN (0.0.1)"
    monkeypatch.setenv("MBCORE_PLUGINS", "stub_plugins:PLUGIN no_such_plugin_module_xyz")
    with pytest.raises(PluginError, match=r"MBCORE_PLUGINS: plugin "
                                          r"'no_such_plugin_module_xyz' cannot be loaded"):
        PluginManager()


@pytest.mark.core
def test_stub_fourbar_runs_through_the_core(stub_pm, examples):
    """Model file -> validation -> System -> analysis -> reporter -> Result with the
    stub types only: the loop closes, the crank follows its driver, and the coupler
    point P starts where the book's KAP run puts it."""
    m = mbcore.Model.from_dict(stub_plugins.fourbar(examples, t_end=0.5, step=0.125),
                               registry=stub_pm.registry)
    res = mbcore.run(m, plugins=stub_pm)
    s = res.system
    assert res.status == "finished" and len(res) == 5
    q, qd, t = res["q"], res["qd"], res.t
    np.testing.assert_allclose(t, np.linspace(0.0, 0.5, 5))
    for k in range(len(t)):
        assert np.max(np.abs(s.phi(q[k], t[k]))) < 1e-10
        np.testing.assert_allclose(s.jacobian_dense(q[k], t[k]) @ qd[k], s.nu(q[k], t[k]),
                                   atol=1e-9)
    crank = s.coordinate_index("crank.phi")
    np.testing.assert_allclose(q[:, crank], 1.0472 + 6.2832 * t, atol=1e-12)
    np.testing.assert_allclose(qd[:, crank], 6.2832, atol=1e-9)
    x, y, phi = (q[0, s.coordinate_index(f"coupler.{c}")] for c in ("x", "y", "phi"))
    px = x + 0.5 * np.cos(phi) - 1.5 * np.sin(phi)
    assert round(float(px), 3) == 2.663


def test_core_tests_pass_with_the_stub_plugin_set():
    """``pytest -m core`` with ``MBCORE_TEST_STUB_PLUGINS=1`` (mbplugins blocked, stub
    plugins loaded) passes, with a meaningful number of tests."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "core", "-p", "no:cacheprovider",
         *[str(TESTS / f) for f in CORE_FILES]],
        capture_output=True, text=True, env=_env(MBCORE_TEST_STUB_PLUGINS="1"),
        cwd=str(TESTS.parent), timeout=120)
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", tail).group(1))
    assert passed >= 20, tail
    assert "failed" not in tail and "error" not in tail, tail


def test_core_file_list_names_every_file_with_core_tests():
    marked = sorted(p.name for p in TESTS.glob("test_*.py")
                    if re.search(r"pytest\.mark\.core\b", p.read_text(encoding="utf-8")))
    assert marked == sorted(CORE_FILES)
