"""tcompile.cli."""
