"""Orchestration: `apply` over files and trees, above the engine, build, verify and log.

The engine (kxform.engine) is the pure core: source text in, rewritten text and
per-kernel results out. This layer walks the user's paths, takes the tree lock, runs
the pure core per file, hands the changed files to the later stages (compile with the
project's flags, differential verification, measurement) and writes what they kept.
"""
