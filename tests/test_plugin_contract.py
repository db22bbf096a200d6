"""Plugin contract versions (issue 16 item 3): the core's version, declarations by a
plugin module/object and by a type, refusal messages naming the plugin, the type and
both versions, lazy types checked when resolved, and an outdated installed plugin
that breaks only the models using it."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mbcore import PluginError, hookimpl

from mbcore.plugins import contract
from mbcore.analysis import Analysis
from mbcore.elements import ConstraintType, ForceType
from mbcore.solve.formulation import Formulation
from mbcore.plugins.hookspecs import CONTRACT_VERSION
from mbcore.integrate import Integrator
from mbcore.plugins import LazyType, PluginManager
from mbcore.results.reporting import Reporter
from mbcore.elements.schema import Param

pytestmark = pytest.mark.core


class GroundSpring(ForceType):
    """A linear spring from a body's origin to the global origin (vectorised)."""

    name = "contract_spring"
    params = {"body": Param("body")}
    n_par = 0

    def pack(self, spec, ctx):
        return [], []

    def force(self, par, qb, qdb, t, f):
        out = np.zeros_like(qb)
        out[:, :, :2] = -qb[:, :, :2]
        return out


class FutureSpring(GroundSpring):
    name = "future_spring"
    contract = (1, CONTRACT_VERSION[1] + 1)


class NextMajorSpring(GroundSpring):
    name = "next_major_spring"
    contract = "2.0" if CONTRACT_VERSION[0] == 1 else "1.0"


def _plugin(*types, declared=None, version="0.3"):
    class Plugin:
        __version__ = version

        @hookimpl
        def mbcore_force_types(self):
            return list(types)
    if declared is not None:
        Plugin.mbcore_contract = declared
    return Plugin()


def test_core_version_is_carried_by_every_contract_base_class():
    assert CONTRACT_VERSION is contract.CONTRACT_VERSION
    assert isinstance(CONTRACT_VERSION, tuple) and len(CONTRACT_VERSION) == 2
    for base in (ConstraintType, ForceType, Integrator, Formulation, Analysis, Reporter):
        assert base.contract == CONTRACT_VERSION, base


@pytest.mark.parametrize("value, parsed", [("1.0", (1, 0)), ("1", (1, 0)), ((1, 2), (1, 2)),
                                           (3, (3, 0)), (" 2.5 ", (2, 5))])
def test_parse_declarations(value, parsed):
    assert contract.parse(value) == parsed


@pytest.mark.parametrize("value", ["1.x", "1.2.3", "", (1,) * 3, True, -1, "1.-1", None])
def test_malformed_declaration_is_refused_naming_where(value):
    with pytest.raises(PluginError, match=r"plugin xyz: contract version .* is not "
                                          r"'major.minor'"):
        contract.parse(value, "plugin xyz")


@pytest.mark.parametrize("declared, ok", [((1, 0), True), ((1, 2), True), ((1, 3), False),
                                          ((2, 0), False), ((0, 9), False)])
def test_compatibility_rule_same_major_minor_not_above(declared, ok):
    assert contract.compatible(declared, (1, 2)) is ok


def test_plugin_declaring_a_newer_contract_is_refused_at_registration():
    pm = PluginManager()
    newer = f"{CONTRACT_VERSION[0]}.{CONTRACT_VERSION[1] + 1}"
    with pytest.raises(PluginError) as err:
        pm.register(_plugin(GroundSpring, declared=newer), name="newplug")
    msg = str(err.value)
    assert "plugin newplug (0.3)" in msg
    assert f"contract {newer}" in msg and contract.format_version(CONTRACT_VERSION) in msg
    assert "needs a newer mbcore" in msg
    assert not pm.registry.has("force", "contract_spring")       # registration undone
    assert "newplug" not in pm.plugin_names()
    pm.register(_plugin(GroundSpring, declared=contract.format_version(CONTRACT_VERSION)),
                name="sameplug")
    assert pm.registry.get("force", "contract_spring") is GroundSpring
    assert pm.registry.contract("force", "contract_spring") == CONTRACT_VERSION


def test_type_declaring_an_incompatible_contract_is_refused_naming_it():
    pm = PluginManager()
    with pytest.raises(PluginError, match=r"plugin typeplug \(0.3\): force type "
                                          r"'next_major_spring' was built for the mbcore "
                                          r"plugin contract 2.0.*implements 1.0.*needs a "
                                          r"newer mbcore"):
        pm.register(_plugin(GroundSpring, NextMajorSpring), name="typeplug")
    assert not pm.registry.has("force", "contract_spring")


def test_installed_outdated_plugin_breaks_only_the_models_using_it(monkeypatch, examples):
    """Registered without the run-time check (as an entry point is): its types stay
    known by name, looking one up raises the refusal, the other types and plugins
    keep working, and ``refused()`` lists it.  The core is pretended to be 1.3: a
    plugin built for 1.2 is accepted (older minor), one built for 1.4 is not."""
    import mbcore
    core = (1, 3)                                  # a later core: its base classes say so
    monkeypatch.setattr(contract, "CONTRACT_VERSION", core)
    monkeypatch.setattr(ForceType, "contract", core)
    pm = PluginManager()
    pm.pluggy.register(_plugin(GroundSpring, declared="1.2"), name="olderminor")
    pm.pluggy.register(_plugin(FutureSpring), name="typelevel")   # declares (1, 1)
    pm.pluggy.register(_plugin(NextMajorSpring, version="4.5"), name="major")
    reg = pm.registry
    assert reg.get("force", "contract_spring") is GroundSpring
    assert reg.contract("force", "contract_spring") == (1, 2)
    assert reg.get("force", "future_spring") is FutureSpring      # 1.1 <= 1.3
    assert reg.has("force", "next_major_spring")
    with pytest.raises(PluginError, match=r"plugin major \(4.5\): force type "
                                          r"'next_major_spring' was built for the mbcore "
                                          r"plugin contract 2.0, this mbcore implements 1.3"):
        reg.get("force", "next_major_spring")
    assert [(k, n, p.plugin) for k, n, p, _ in reg.refused()] == [
        ("force", "next_major_spring", "major")]
    assert "next_major_spring" not in [n for _, n, _, _ in reg.rows()]
    with pytest.raises(PluginError, match="next_major_spring"):
        mbcore.Model.from_dict(_spring_model("next_major_spring"), registry=reg)
    m = mbcore.Model.from_dict(_spring_model("contract_spring"), registry=reg)
    s = m.compile(plugins=pm)
    np.testing.assert_allclose(s.forces(np.array([0.3, -0.2, 0.1]), np.zeros(3), 0.0),
                               [-0.3, 0.2 - 9.81, 0.0])


def _spring_model(force_type: str) -> dict:
    return {"name": "spring", "gravity": [0.0, -9.81],
            "bodies": [{"name": "b", "mass": 1.0, "inertia": 0.1, "position": [0.3, -0.2]}],
            "forces": [{"name": "s", "type": force_type, "body": "b"}],
            "settings": {"analysis": "dynamic", "t_end": 0.1, "step": 0.05}}


OldPin = type("OldPin", (GroundSpring,), {"name": "old_lazy_spring", "contract": (0, 9)})


def test_lazy_type_is_checked_when_resolved():
    class Lazy:
        @hookimpl
        def mbcore_force_types(self):
            return [LazyType("old_lazy_spring", f"{__name__}:OldPin")]

    pm = PluginManager()
    pm.register(Lazy(), name="lazyplug")          # nothing imported, nothing refused yet
    reg = pm.registry
    assert reg.refused() == []
    for _ in range(2):                             # refused again on every look-up
        with pytest.raises(PluginError, match=r"plugin lazyplug: force type "
                                              r"'old_lazy_spring' was built for the mbcore "
                                              r"plugin contract 0.9.*needs an older mbcore"):
            reg.get("force", "old_lazy_spring")
    assert [n for _, n, _, _ in reg.refused()] == ["old_lazy_spring"]
    assert "old_lazy_spring" not in [n for _, n, _, _ in reg.rows()]


def test_refused_type_claims_no_name_over_an_accepted_one():
    class Dup(NextMajorSpring):
        name = "contract_spring"

    pm = PluginManager()
    pm.pluggy.register(_plugin(GroundSpring), name="good")
    pm.pluggy.register(_plugin(Dup), name="stale")
    assert pm.registry.get("force", "contract_spring") is GroundSpring
    assert pm.registry.provider("force", "contract_spring").plugin == "good"


def test_outdated_entry_point_plugin_named_with_its_distribution(tmp_path):
    """A distribution declaring a newer contract: ``mbcore plugins`` lists its type as
    refused with the distribution's name and version, the accepted types with the
    contract they were built for."""
    (tmp_path / "mbc_stale.py").write_text(textwrap.dedent("""
        from mbcore import hookimpl
        from mbcore.elements import ForceType
        mbcore_contract = "99.0"
        class Stale(ForceType):
            name = "stale_force"
        @hookimpl
        def mbcore_force_types():
            return [Stale]
    """))
    dist = tmp_path / "mbc_stale-0.5.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mbc-stale\nVersion: 0.5\n")
    (dist / "entry_points.txt").write_text("[mbcore]\nstale = mbc_stale\n")
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
            "from mbcore.cli import main; main(['plugins'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if "stale_force" in ln][0]
    assert "stale (mbc-stale 0.5)" in line and "refused" in line
    assert "contract 99.0" in line
    from mbcore.plugins import registry
    kind, name, prov, _ = registry().rows()[0]
    first = [ln for ln in out.stdout.splitlines() if ln.split()[:2] == [kind, name]][0]
    assert f"{prov}  {contract.format_version(registry().contract(kind, name))}  " in first
