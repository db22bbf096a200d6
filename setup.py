"""Build script for the compiled kernels.

The Cython sources live in ``ext/`` and compile into private modules of mbcore
(``mbcore._ext.*``); those of the built-in plugins' compiled twins live in
``ext/plugins/`` and compile into ``mbplugins._ext.*``.  Everything else is declared
in pyproject.toml.
"""
import os
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

if sys.platform == "win32":
    extra_compile_args = ["/O2"]
else:
    extra_compile_args = ["-O3"]
    if os.environ.get("MBCORE_NATIVE") == "1":  # opt-in, never for wheels
        extra_compile_args.append("-march=native")

macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]


def ext(name: str, package: str = "mbcore") -> Extension:
    folder = ("ext",) if package == "mbcore" else ("ext", "plugins")
    return Extension(
        f"{package}._ext.{name}",
        [os.path.join(*folder, f"{name}.pyx")],
        # mbcore_plugin.h: the compiled plugin tier's C contract (_forces and the
        # modules that cimport its FGroup)
        include_dirs=[np.get_include(), os.path.join("src", "mbcore", "include")],
        define_macros=macros,
        extra_compile_args=extra_compile_args,
    )


extensions = [ext("_planar"), ext("_forces"), ext("_functions"), ext("_linalg"),
              ext("_kinematics"), ext("_dynamics"), ext("_sparse"), ext("_steploop"),
              ext("_output_rows"),
              ext("_jcspatial", "mbplugins"), ext("_cp", "mbplugins"),
              ext("_stiffnewton", "mbplugins"), ext("_penalty", "mbplugins"),
              ext("_dae", "mbplugins"), ext("_jc", "mbplugins"), ext("_omega", "mbplugins"),
              ext("_planar_forces", "mbplugins"), ext("_planar_constraints", "mbplugins"),
              ext("_spatial_constraints", "mbplugins"), ext("_spatial_forces", "mbplugins"),
              ext("_rolling", "mbplugins"), ext("_contact", "mbplugins"),
              ext("_sphere_group", "mbplugins")]

#: both stages use every core: the Cython translation (cythonize's nthreads) and the
#: C compilation (build_ext's parallel jobs); MBCORE_BUILD_JOBS overrides
jobs = int(os.environ.get("MBCORE_BUILD_JOBS", 0)) or os.cpu_count() or 1

setup(
    options={"build_ext": {"parallel": jobs}},
    ext_modules=cythonize(
        extensions,
        nthreads=jobs if jobs > 1 else 0,
        # the .pxd interfaces live in src/mbcore/_ext; ext/plugins includes ext/*.pxi
        include_path=["src", "ext"],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    ),
)
