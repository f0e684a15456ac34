"""Frontend: CUDA/HIP source -> `SourceModel` (tree-sitter), refined by libclang where needed."""

from kxform.frontend.model import (
    CallSite,
    Function,
    FunctionKind,
    IndexRead,
    LaunchSite,
    MacroDef,
    Param,
    SourceModel,
    Span,
)
from kxform.frontend.cuda import parse_model, parse_tree

__all__ = [
    "CallSite",
    "Function",
    "FunctionKind",
    "IndexRead",
    "LaunchSite",
    "MacroDef",
    "Param",
    "SourceModel",
    "Span",
    "parse_model",
    "parse_tree",
]
