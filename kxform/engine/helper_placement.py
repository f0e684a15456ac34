"""Where and how a pass's helper is emitted, so that the rewrite compiles whatever the
include graph: the helper sits inside an include guard of its own (a translation unit
that includes two rewritten files defines it once), compiled only by CUDA/HIP compilers,
and at the top level of the file (never inside a namespace, a class, an `extern "C"`
block or a conditional block), after a UTF-8 byte order mark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kxform.frontend.model import SourceModel


@dataclass(frozen=True)
class Helper:
    """A file-scope definition a rewrite calls: its (unique) name and its full source,
    ending with a newline."""

    name: str
    source: str

    @property
    def guard(self) -> str:
        return self.name.upper() + "_DEFINED"


def guarded(helper: Helper, newline: str = "\n") -> str:
    """The helper inside its own include guard, so a translation unit that includes two
    rewritten files (or one twice) defines it once; compiled only by CUDA/HIP compilers,
    so a header whose kernels sit behind `#ifdef __CUDACC__` stays valid host C++."""
    return (
        f"#if !defined({helper.guard}) && (defined(__CUDACC__) || defined(__HIPCC__)){newline}"
        f"#define {helper.guard}{newline}{helper.source}#endif{newline}"
    )


def helper_offset(model: SourceModel, offset: int) -> int:
    """Where the helper for a function starting at `offset` goes: at the start of the line
    of its outermost enclosing top-level item, so never inside a namespace, a class, an
    `extern "C"` block or a conditional block (a file-wide include guard is not one: the
    helper goes inside it, after the file's includes), and after a UTF-8 byte order mark."""
    root = model.tree.root_node
    node = root.descendant_for_byte_range(offset, offset)
    top = node
    while node is not None and node.parent is not None:
        if node.parent.type == "translation_unit" or _is_file_guard(node.parent):
            top = node
            break
        node = node.parent
    return model.source.insertion_point(top.start_byte if top is not None else offset)


def _is_file_guard(node: Any) -> bool:
    """`#ifndef X` / `#define X` ... `#endif` around everything else of the file."""
    if node.type != "preproc_ifdef" or node.parent is None or node.parent.type != "translation_unit":
        return False
    if node.children[0].type != "#ifndef":
        return False
    name = node.child_by_field_name("name")
    define = next((c for c in node.named_children if c.type == "preproc_def"), None)
    if (
        name is None
        or define is None
        or define.child_by_field_name("name") is None
        or define.child_by_field_name("name").text != name.text
    ):
        return False
    siblings = [c for c in node.parent.named_children if c.type not in ("comment", "preproc_call")]
    return siblings == [node]  # `#pragma once` beside the guard is fine
