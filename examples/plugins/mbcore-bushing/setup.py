"""Build script of the compiled kernel (everything else is in pyproject.toml).

The kernel cimports mbcore's C contract (``from mbcore.plugin cimport *``): Cython
finds ``mbcore/plugin.pxd`` next to the installed mbcore package and the C compiler
finds ``mbcore_plugin.h`` in ``mbcore.get_include()``.
"""
import os

import mbcore
from Cython.Build import cythonize
from setuptools import Extension, setup

include = mbcore.get_include()                        # .../mbcore/include
site = os.path.dirname(os.path.dirname(include))      # the directory holding mbcore/

extensions = [Extension("mbcore_bushing._kernel", ["src/mbcore_bushing/_kernel.pyx"],
                        include_dirs=[include],
                        extra_compile_args=["/O2"] if os.name == "nt" else ["-O3"])]

setup(ext_modules=cythonize(extensions, include_path=[site],
                            compiler_directives={"language_level": 3}))
