"""What the tools under `tools/` share: corpus runs, benchmark cases, yardsticks, output.

A tool is a script that parses its arguments, calls these modules and the library
entries (`kxform.api`), and prints; anything two tools need lives here, so a tool never
imports another tool and never patches `sys.path` (tests/corpus/test_tools.py).
"""
