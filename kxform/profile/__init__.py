"""Profiler hooks: Nsight Compute's CSV read into records (`ncu_csv`), and the short
summary of one kernel launch a performance engineer looks at first (`nsight`)."""
