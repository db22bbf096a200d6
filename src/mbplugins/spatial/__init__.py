"""Built-in spatial (3D, Euler-parameter) element types."""
