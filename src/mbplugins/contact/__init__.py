"""Compliant (penalty) contact force types.

``spatial`` holds the 3-D sphere/capsule contact ``spatial:contact`` (the spatial
counterpart of the planar point/disc-to-line ``contact`` of
:mod:`mbplugins.planar.contact`).  The NumPy classes here are the reference; their
compiled twins are ``mbplugins._ext._contact`` (ext/plugins/_contact.pyx), reaching
the core through the compiled plugin tier like any third-party kernel.
"""
