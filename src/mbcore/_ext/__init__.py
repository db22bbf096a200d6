"""Compiled kernels (Cython, built from ext/).

Several kernels ``cimport`` BLAS and LAPACK from ``scipy.linalg.cython_blas`` and
``scipy.linalg.cython_lapack``; at module initialisation Cython imports those
modules, and through them the whole ``scipy.linalg`` package (whose ``__init__``
clones the NumPy namespace for the array API, importing numpy.testing, numpy.f2py,
inspect, email, unittest...: 0.1-0.25 s, most of the start-up of a small run).  The
kernels need only the C function pointers of these modules, so the extension
modules themselves are loaded here, under their own names, without running the
package's ``__init__``.  A later ``import scipy.linalg`` imports the package as
usual and finds them.  Any surprise (a SciPy without the file, a loader error)
leaves everything to the normal import.
"""
from __future__ import annotations


def _preload(module: str) -> None:
    """Load the extension module ``scipy.linalg.<module>`` without the package."""
    import sys
    name = "scipy.linalg." + module
    if name in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        import importlib.machinery
        import importlib.util
        import os

        import scipy
        folder = os.path.join(scipy.__path__[0], "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, module + suffix)
            if os.path.isfile(path):
                break
        else:
            return
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        if spec is None:
            return
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    except Exception:   # pragma: no cover - the normal import takes over
        return


_preload("cython_blas")
_preload("cython_lapack")
