"""Optimization remarks (kept importable here; defined in kxform.engine.remarks, below the
log, so that the engine emits them without importing the log)."""

from kxform.engine.remarks import SHORT_LINE, Remark, RemarkFilter, RemarkKind, RemarkSink, shorten

__all__ = ["SHORT_LINE", "Remark", "RemarkFilter", "RemarkKind", "RemarkSink", "shorten"]
