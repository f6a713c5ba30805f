"""tcompile.compiler: the only code that touches torch's private APIs.

Three layers, by the process a line runs in:

* the contract (protocol, signature, failure, accuracy, stack, configs, record_format,
  exitcodes, crash, observer): what tcompile's process and the user's share; imports
  no torch at import time;
* ``child/``: what runs inside the user's interpreter, installed at start-up by
  ``bootstrap/sitecustomize.py`` (the hooks, the wrapping backend, the judge, ...);
* the parent (runner, classify, pool, bisection, replay, explain, debug_artifacts):
  what runs in tcompile's own process, never importing child/.
"""
