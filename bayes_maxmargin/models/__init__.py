"""Model families, one folder each: ``model.py`` holds the NumPyro program with its hyper-parameter
and data tuples, and one module per inference algorithm holds that algorithm's kernels or updates."""
