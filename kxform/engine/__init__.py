"""The engine: the pass interface and typed parameter spaces, the registry, proposers,
the driver (analyse -> propose -> check -> edit for one file) and the runner above it."""
