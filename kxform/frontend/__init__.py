"""Frontend: CUDA/HIP source -> `SourceModel` (tree-sitter), refined by libclang where needed.

The names below load on first use (PEP 562): a module that needs only
`kxform.frontend.source` (file reading, suffixes) does not pay for tree-sitter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kxform.frontend.cuda import parse_model, parse_tree
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

_HOMES = {
    "parse_model": "cuda",
    "parse_tree": "cuda",
    **{
        name: "model"
        for name in (
            "CallSite",
            "Function",
            "FunctionKind",
            "IndexRead",
            "LaunchSite",
            "MacroDef",
            "Param",
            "SourceModel",
            "Span",
        )
    },
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kxform.frontend' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kxform.frontend.{home}"), name)
