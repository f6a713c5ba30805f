"""tcompile.repro."""
