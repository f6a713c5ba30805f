"""The text of a generated minifier_launcher.py (a script: it may print and exit)."""

TEMPLATE = '''\
#!/usr/bin/env python3
"""minifier_launcher.py, written by tcompile {tcompile} on {written}.

  failure:  {signature}
  command:  {command}

  python {name}          minify the failing graph again (needs tcompile installed)
  python {name} run      only check that the failure reproduces
The full graph and its inputs are in {name_graph} and {name_inputs} beside this file.
"""
import sys

{marker}{meta}

if __name__ == "__main__":
    try:
        from tcompile.cli.launch import launch_main
    except ImportError:
        sys.exit("minifier_launcher.py needs tcompile: pip install tcompile (then run it again)")
    sys.exit(launch_main(__file__, TCOMPILE_LAUNCHER, sys.argv[1:]))
'''
