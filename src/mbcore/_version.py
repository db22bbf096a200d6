"""mbcore's version (a module of its own, so that modules of the package can read it
without importing the package's ``__init__``)."""
__version__ = "0.1.0"
