"""What a run tells the user: remarks (LLVM-style), the JSON Lines pass log, and the run report (counters, exit codes)."""
