"""Make a package unimportable (issue 16 item 4): ``block("mbplugins")`` installs a
``sys.meta_path`` finder that raises ImportError for the package and its submodules.
No mbcore import here, so a test can install it before mbcore is imported."""
from __future__ import annotations

import sys


class Blocker:
    """``find_spec`` raises ModuleNotFoundError for ``name`` and ``name.*``."""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise ModuleNotFoundError(f"{fullname} is blocked (testing without it)",
                                      name=fullname)
        return None


def block(name: str) -> Blocker:
    """Block ``name`` for the rest of the process (also drops it from sys.modules)."""
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]
    finder = Blocker(name)
    sys.meta_path.insert(0, finder)
    return finder
