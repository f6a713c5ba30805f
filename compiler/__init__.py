"""tcompile.compiler."""
