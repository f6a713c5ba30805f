"""tcompile.minifier."""
