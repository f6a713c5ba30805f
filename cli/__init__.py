"""tcompile.cli: parse, call a job, render (main.py, options.py, args.py, render.py)."""
