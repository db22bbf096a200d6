"""Every module path of mbcore before its layer packages still imports — as the very
module that now holds the code, with a DeprecationWarning naming the new path — and
the packages that kept an old module's name re-export what that module exported."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from mbcore._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module(old):
    new = importlib.import_module(MOVED[old])
    # a fresh interpreter: the first import of the old path is the one that warns
    code = (f"import warnings, importlib, sys\n"
            f"warnings.simplefilter('error', DeprecationWarning)\n"
            f"import mbcore\n"
            f"try:\n    importlib.import_module({old!r})\n"
            f"except DeprecationWarning as e:\n    print('W', e)\n"
            f"warnings.simplefilter('ignore')\n"
            f"m = importlib.import_module({old!r})\n"
            f"print('S', m is sys.modules[{MOVED[old]!r}], m.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert f"W {old} moved to {MOVED[old]}" in out
    assert f"S True {new.__name__}" in out


def test_the_alias_is_one_module_object():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("mbcore.schema")
    assert old is importlib.import_module("mbcore.elements.schema")


@pytest.mark.parametrize("package,module", [
    ("mbcore.plugins", "mbcore.plugins.manager"), ("mbcore.elements", "mbcore.elements.base"),
    ("mbcore.system", "mbcore.system.system"), ("mbcore.model", "mbcore.model.model"),
    ("mbcore.analysis", "mbcore.analysis.base"), ("mbcore.cli", "mbcore.cli.app")])
def test_a_package_with_an_old_name_exports_the_old_names(package, module):
    pkg, mod = importlib.import_module(package), importlib.import_module(module)
    assert pkg.__all__
    for name in pkg.__all__:
        assert getattr(pkg, name) is getattr(mod, name), name


def test_unknown_modules_still_fail():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("mbcore.no_such_module")
