"""Compiled kernels (Cython, built from ext/).

Several kernels call BLAS and LAPACK routines of ``scipy.linalg.cython_blas`` and
``scipy.linalg.cython_lapack``.  They do not ``cimport`` them: a cimport imports
those modules when the kernel module is imported, and with them SciPy's package
``__init__`` (~10 ms) and its OpenBLAS library (~5 ms), although small systems never
call them.  The kernels bind the routines on first use instead (ext/_lapack.pxi),
through :func:`blas_lapack_capi`, which loads the two extension modules under their
own names without running ``scipy.linalg``'s ``__init__`` (it clones the NumPy
namespace for the array API, importing numpy.testing, numpy.f2py, inspect, email,
unittest...: 0.1-0.25 s).  A later ``import scipy.linalg`` imports the package as
usual and finds them.  Any surprise (a SciPy without the files, a loader error)
leaves everything to the normal import.

Importing this package checks (without loading anything) that the two modules are
installed, so that a SciPy without them fails here, at import, as a cimport would.
"""
from __future__ import annotations

from typing import Any


def _scipy_folder() -> str | None:
    """SciPy's package directory, found without importing SciPy."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("scipy")
    except (ImportError, ValueError):
        return None
    locations = getattr(spec, "submodule_search_locations", None) if spec else None
    return list(locations)[0] if locations else None


def _extension_file(folder: str, module: str) -> str | None:
    import importlib.machinery
    import os
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, module + suffix)
        if os.path.isfile(path):
            return path
    return None


def _preload(module: str) -> Any:
    """The extension module ``scipy.linalg.<module>``, loaded without the package's
    ``__init__`` where possible, else by the normal import."""
    import importlib
    import os
    import sys
    name = "scipy.linalg." + module
    if name in sys.modules or "scipy.linalg" in sys.modules:
        return importlib.import_module(name)
    folder = _scipy_folder()
    path = _extension_file(os.path.join(folder, "linalg"), module) if folder else None
    if path is None:
        return importlib.import_module(name)
    try:
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        if spec is None:
            return importlib.import_module(name)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return mod
    except Exception:   # pragma: no cover - the normal import takes over
        return importlib.import_module(name)


def blas_lapack_capi() -> tuple[dict, dict]:
    """The C-API tables (``__pyx_capi__``: function name -> capsule) of
    ``scipy.linalg.cython_blas`` and ``scipy.linalg.cython_lapack``, from which the
    kernels take the addresses of the routines they call (ext/_lapack.pxi)."""
    return _preload("cython_blas").__pyx_capi__, _preload("cython_lapack").__pyx_capi__


def _check_installed() -> None:
    import os
    folder = _scipy_folder()
    if folder is None:
        raise ImportError("mbcore's compiled kernels need SciPy (scipy.linalg.cython_blas "
                          "and cython_lapack); SciPy is not installed")
    for module in ("cython_blas", "cython_lapack"):
        if _extension_file(os.path.join(folder, "linalg"), module) is None:
            import importlib.util
            if importlib.util.find_spec("scipy.linalg." + module) is None:
                raise ImportError(f"mbcore's compiled kernels need scipy.linalg.{module}, "
                                  f"which this SciPy does not have")


_check_installed()
