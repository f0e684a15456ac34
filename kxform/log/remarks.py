"""Optimization remarks (kept importable here; defined in kxform.engine.remarks, below the
engine's driver and pass interface that emit them)."""

from kxform.engine.remarks import Remark, RemarkKind, RemarkSink

__all__ = ["Remark", "RemarkKind", "RemarkSink"]
