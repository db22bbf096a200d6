"""Rolling contact: wheels that roll without slipping on a fixed plane (spatial) or
line (planar).

Each element mixes one position-level row (the contact height) with velocity-level
rows (no slip at the contact point): ``holonomic`` is a tuple per equation
(mbcore.plugins.contract.holonomic_rows).  The NumPy classes here are the
reference; their compiled twins are ``mbplugins._ext._rolling`` (ext/plugins/_rolling.pyx),
reaching the core through the compiled plugin tier like any third-party kernel.
"""
