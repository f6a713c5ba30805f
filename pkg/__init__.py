"""tcompile: find, classify and shrink bugs in PyTorch's torch.compile stack.

The import package is assembled from the repository's top-level folders
(``tcompile.cli`` from ``cli/``, ``tcompile.compiler`` from ``compiler/``, ...);
see ``package-dir`` in pyproject.toml.
"""

__version__ = "0.1.0"
