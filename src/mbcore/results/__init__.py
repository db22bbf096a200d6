"""Results: reporters and channels, the Result reader of HDF5 files, run summaries and
plots."""
