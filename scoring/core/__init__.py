"""Pure-Python cores of the scoring package: no Django imports, usable from a notebook."""
