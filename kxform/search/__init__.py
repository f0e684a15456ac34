"""Search: tuning a kernel's typed parameter space against an objective.

`space` enumerates (or samples) the valid configurations of a ParamSpace; `recorded`
reads measured spaces (Kernel Tuner cache files) into a space plus a replay objective;
`strategies` propose configurations (exhaustive, random, and the model-guided default);
`db` keeps every evaluation; `pipeline` overlaps preparing candidates with measuring
them; `tuner` runs the loop. Beyond one GPU: `workers` (what a timing worker runs),
`pool` (the driver's side), `local_pool` (one process per GPU of this host),
`ray_pool` (Ray actors), `spread` (a directory's kernels as jobs over a Ray cluster).
"""
