"""The views of a call profile and of line timings, each a writer over the same results.

- terminal: the call tree and top functions (``tree_text``, folded by ``display``), the flat
  table (``text``), callers and callees (``callers_text``), line timings (``lines_text``), a
  table comparing two profiles (``profile_diff``); names printed through ``escape``;
- files: the one-file HTML report (``html``), speedscope (``speedscope``), folded stacks
  (``collapsed``), callgrind (``callgrind``);
- ``outputs`` writes what ``run`` and ``view`` ask for, ``source`` finds a profile's call tree,
  ``options`` holds the view options' choices.
"""
