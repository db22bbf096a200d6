"""Compiled twins of the built-in formulations (Cython, built from ext/plugins/):
``_cp`` (coordinate partitioning), ``_jcspatial`` (spatial joint coordinates) and
``_stiffnewton`` (the reduced Newton hook of the stiff DAE form).  They build on the
core's compiled evaluators through its ``.pxd`` interfaces (src/mbcore/_ext)."""
from __future__ import annotations

import mbcore._ext  # noqa: F401  (loads LAPACK's Cython module without scipy.linalg)
