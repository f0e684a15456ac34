"""Search strategies, one per module; each module exposes `STRATEGY`, its class."""
