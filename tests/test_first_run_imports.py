"""The first dynamic run of a process imports only what it uses: scipy.optimize
and scipy.integrate (≈0.1–0.2 s together) load only when a run needs them (an event
is located, a static analysis runs), not for the DOP853 tableau or the event
machinery of every run; scipy.linalg and scipy.sparse (≈0.15 s) not for a DI run
with an explicit integrator on the compiled loop."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).parents[1] / "examples"


def _modules_after(code: str, modules=("scipy.optimize", "scipy.integrate")) -> dict:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                          f"print(json.dumps({{m: m in sys.modules for m in {modules!r}}}))"],
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_dynamic_run_without_events_imports_neither_optimize_nor_integrate():
    code = ("import mbcore\n"
            f"m = mbcore.Model.from_file({str(EXAMPLES / 'platform.yaml')!r})\n"
            "mbcore.run(m, settings={'t_end': 0.05})\n"
            "from mbplugins.integrators.erk import DOP853\n"
            "assert DOP853.A.shape == (12, 12)")
    assert _modules_after(code) == {"scipy.optimize": False, "scipy.integrate": False}


def test_a_dynamic_di_run_imports_neither_scipy_linalg_nor_sparse():
    for name in ("slider_crank_dynamic.yaml", "spatial_slider_crank_dynamic.yaml"):
        code = ("import mbcore\n"
                f"m = mbcore.Model.from_file({str(EXAMPLES / name)!r})\n"
                "r = mbcore.run(m, settings={'t_end': 0.05})\n"
                "assert r.stats['loop'] == 'compiled'")
        assert _modules_after(code, ("scipy.linalg", "scipy.sparse")) == {
            "scipy.linalg": False, "scipy.sparse": False}, name


def test_a_dynamic_di_run_imports_neither_scipy_nor_its_blas_lapack():
    """The compiled kernels bind SciPy's BLAS/LAPACK routines on first use, and these
    small runs call none: SciPy's package and its OpenBLAS are not loaded (nor
    numpy.ma)."""
    # (numpy.ma, ≈ 7 ms, comes with np.median: the model's length, a median, is
    # taken without it)
    mods = ("scipy", "scipy.linalg.cython_blas", "scipy.linalg.cython_lapack", "numpy.ma")
    for name in ("slider_crank_dynamic.yaml", "spatial_slider_crank_dynamic.yaml"):
        code = ("import mbcore\n"
                f"m = mbcore.Model.from_file({str(EXAMPLES / name)!r})\n"
                "r = mbcore.run(m, settings={'t_end': 0.05})\n"
                "assert r.stats['loop'] == 'compiled'")
        assert _modules_after(code, mods) == dict.fromkeys(mods, False), name


def test_lapack_is_bound_on_first_use():
    """A fresh process: importing the kernel modules loads no LAPACK; the first
    factorization binds SciPy's dgetrf/dgetrs (without scipy.linalg's package) and
    solves as scipy.linalg.lu_factor / lu_solve do, bit for bit."""
    code = ("import sys\n"
            "import numpy as np\n"
            "from mbcore._ext._linalg import DenseLU\n"
            "import mbcore._ext._steploop, mbcore._ext._dynamics\n"
            "assert 'scipy.linalg.cython_lapack' not in sys.modules\n"
            "rng = np.random.default_rng(7)\n"
            "A = rng.standard_normal((6, 6)); b = rng.standard_normal(6)\n"
            "lu = DenseLU(6)\n"
            "assert lu.factor(A.ravel()) == 0\n"          # dgetrf of A^T (column-major)
            "x = b.copy(); lu.solve(x)\n"                  # dgetrs 'T': A x = b
            "assert 'scipy.linalg' not in sys.modules\n"
            "import scipy.linalg as sla\n"
            "ref = sla.lu_solve(sla.lu_factor(A.T), b, trans=1)\n"
            "assert np.array_equal(x, ref), (x, ref)")
    mods = ("scipy.linalg.cython_lapack", "scipy.linalg.cython_blas")
    assert _modules_after(code, mods) == dict.fromkeys(mods, True)


def test_the_dop853_tableau_is_scipys():
    """Loaded from scipy's file without its package: the same arrays."""
    import numpy as np
    from scipy.integrate._ivp import dop853_coefficients as c

    from mbplugins.integrators.erk import DOP853
    s = c.N_STAGES
    for mine, ref in ((DOP853.A, c.A[:s, :s]), (DOP853.B, c.B), (DOP853.C, c.C[:s]),
                      (DOP853.E3, c.E3), (DOP853.E5, c.E5), (DOP853.D, c.D),
                      (DOP853.A_EXTRA, c.A[s + 1:]), (DOP853.C_EXTRA, c.C[s + 1:])):
        np.testing.assert_array_equal(mine, ref)


def test_the_platform_string_needs_no_subprocess():
    """On Linux with glibc the run's platform string is platform.platform()'s, built
    from os.uname and os.confstr: no ``uname -p`` subprocess in the first run."""
    import os
    import platform
    import pytest
    from mbcore.analysis.runner import _linux_platform
    got = _linux_platform()
    if got is None:
        pytest.skip("not Linux with glibc")
    if platform.processor() not in ("", os.uname().machine):
        pytest.skip("uname -p names a processor here: platform.platform() keeps it")
    assert got == platform.platform()
    code = ("import subprocess\n"
            "started = []\n"
            "popen = subprocess.Popen.__init__\n"
            "def counted(self, *a, **k):\n"
            "    started.append(a)\n"
            "    return popen(self, *a, **k)\n"
            "subprocess.Popen.__init__ = counted\n"
            "import mbcore\n"
            f"m = mbcore.Model.from_file({str(EXAMPLES / 'slider_crank_dynamic.yaml')!r})\n"
            "r = mbcore.run(m, settings={'t_end': 0.05})\n"
            f"assert r.versions['platform'] == {got!r}, r.versions\n"
            "assert not started, started")
    _modules_after(code)
