"""A check shared by the tests of the formulations that project in C (penalty,
projection): a run on the compiled loop against the same run on the Python driver."""
from __future__ import annotations

import numpy as np


def assert_compiled_run_matches_python(a, b) -> None:
    """``a`` ran on the compiled loop, ``b`` on the Python driver: the same projections
    (more than 10), evaluations, steps and rejections, and outputs within 1e-10 of
    each channel's scale (the same steps; the projections' solves differ at
    round-off)."""
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    assert a.stats["projections"] == b.stats["projections"] > 10
    for k in ("integrator_nfev", "integrator_nsteps", "integrator_nrejected"):
        assert a.stats[k] == b.stats[k], k
    assert len(a) == len(b)
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0,
                                   atol=1e-10 * (1.0 + np.max(np.abs(b[ch]))), err_msg=ch)
