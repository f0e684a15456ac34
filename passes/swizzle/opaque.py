"""What the source analysis of block-index reads cannot see through.

The syntactic analysis (`index_usage`) follows calls by name and macros defined in the
file. A read of blockIdx.x/.y reached any other way would stay physical after the
rewrite. Two groups of refusals:

* `structural_blockers`, always: a device function or method that reads the index but
  that no kernel calls by name (reached through a functor's `operator()`, a constructor,
  a function pointer, a template argument); a read outside every function body (a
  default argument, a constructor's initializer list); a carrier whose address is taken;
  cooperative-groups index calls (`group_index()`, `block_index()`, `block_rank()`).
* `fallback_blockers`, when the compiler cannot confirm coverage (`ptx_coverage`): inline
  assembly anywhere in the closure (its PTX may read `%ctaid`), token pasting in a macro
  the closure expands, a macro reading the index that no function uses by name, and
  calls or macros defined outside the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.engine.pass_api import Blocker
from kxform.frontend.cuda import WORD_RE
from kxform.frontend.model import FunctionKind, SourceModel
from kxform.passes.swizzle.index_usage import BUILTIN_CALL_RE, IndexUsage

CG_INDEX_RE = re.compile(
    r"\b(group_index|block_index|block_rank|cluster_index|cluster_rank|dim_blocks|num_blocks)"
    r"\s*\("
)
ASM_RE = re.compile(r"\b(asm|__asm__|__asm)\b")
CALL_IN_MACRO_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
WORD_BYTES_RE = re.compile(rb"(?<!\w)[A-Za-z_]\w*")
MACRO_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
"""Object-like macros are spelled in capitals by convention: one from another header may hide a read."""
CUDA_NAMES = frozenset(
    {
        "__FILE__",
        "__LINE__",
        "__func__",
        "__CUDA_ARCH__",
        "NULL",
        "INFINITY",
        "NAN",
        "FLT_MAX",
        "FLT_MIN",
        "FLT_EPSILON",
        "DBL_MAX",
        "INT_MAX",
        "INT_MIN",
        "UINT_MAX",
        "EXIT_FAILURE",
        "EXIT_SUCCESS",
        "__VA_ARGS__",
        "_",
    }
)
KEYWORDS = frozenset(
    {
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "do",
        "defined",
        "decltype",
        "alignof",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
        "__launch_bounds__",
        "__align__",
    }
)


def _reads_xy(builtin: str, axis: str) -> bool:
    return builtin == "blockIdx" and axis in ("x", "y", "")


@dataclass(frozen=True)
class FileFacts:
    """What `structural_blockers` needs of the whole file, computed once per file (per
    kernel it made the pass quadratic in the number of kernels): the blockers that hold
    for every kernel alike, and where each word of the text occurs."""

    blockers: tuple[Blocker, ...]
    words: dict[bytes, tuple[int, ...]]


def file_facts(model: SourceModel) -> FileFacts:
    """The file-level reads no rewrite could reach, and the word index."""
    scope: set[str] = set()
    for kernel in model.kernels:
        scope |= model.closure(kernel.name)
    blockers: list[Blocker] = []
    for read in model.index_reads:
        if not _reads_xy(read.builtin, read.axis) or read.macro is not None:
            continue
        if read.function is None:
            blockers.append(
                Blocker(
                    "IndexReadOutsideBody",
                    f"{read.spelling} is read outside every function body "
                    "(a default argument, a constructor's initializer list or an initializer): it "
                    "is evaluated where kxform cannot rewrite it",
                    read.span.start,
                )
            )
            break
    for read in model.index_reads:
        if _reads_xy(read.builtin, read.axis) and read.function is not None and read.function not in scope:
            defs = model.functions_named(read.function)
            if defs and all(f.kind is FunctionKind.KERNEL for f in defs):
                continue
            blockers.append(
                Blocker(
                    "IndexReadNotReached",
                    f"'{read.function}' reads {read.spelling} but no kernel "
                    "calls it by name: it may be reached through a functor, a constructor, a function "
                    "pointer or a template argument that kxform cannot follow",
                    read.span.start,
                )
            )
            break
    words: dict[bytes, list[int]] = {}
    for match in WORD_BYTES_RE.finditer(model.source.data):
        words.setdefault(match.group(), []).append(match.start())
    return FileFacts(tuple(blockers), {k: tuple(v) for k, v in words.items()})


def structural_blockers(model: SourceModel, usage: IndexUsage, facts: FileFacts | None = None) -> list[Blocker]:
    """Reads no rewrite of the syntax could reach (refused whether or not nvcc exists).
    `facts`: `file_facts(model)`, computed once for all kernels of the file."""
    facts = facts or file_facts(model)
    blockers = list(facts.blockers)
    blockers += _address_taken(model, usage, facts)
    for function in usage.functions:
        text = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
        found = CG_INDEX_RE.search(text)
        if found:
            blockers.append(
                Blocker(
                    "CooperativeGroupsIndex",
                    f"'{function.name}' calls {found.group(1)}(), a "
                    "cooperative-groups view of the physical block index",
                    function.body.start,
                )
            )
            break
    return blockers


def _address_taken(model: SourceModel, usage: IndexUsage, facts: FileFacts) -> list[Blocker]:
    """A carrier named anywhere but in a call (a function pointer, a template argument)
    would keep its old signature there."""
    names = {c.name for c in usage.carriers}
    if not names:
        return []
    data = model.source.data
    for name in sorted(names):
        encoded = name.encode()
        for start in facts.words.get(encoded, ()):
            end = start + len(encoded)
            after = data[end : end + 64].lstrip()
            if after[:1] in (b"(", b"<") or data[max(0, start - 1) : start] in (b".", b"~"):
                continue  # a call, a declaration, a template call; a member of another name
            if _inside_comment_or_macro(model, start):
                continue
            return [
                Blocker(
                    "AddressOfCarrier",
                    f"'{name}' reads the block index and is named other than in a call "
                    "(its address or a reference is taken): that use would keep the old signature",
                    start,
                )
            ]
    return []


def _inside_comment_or_macro(model: SourceModel, offset: int) -> bool:
    node = model.tree.root_node.descendant_for_byte_range(offset, offset + 1)
    while node is not None:
        if node.type in ("comment", "string_literal", "preproc_def", "preproc_function_def"):
            return True
        node = node.parent
    return False


def _closure_macros(model: SourceModel, usage: IndexUsage) -> list[str]:
    reached: set[str] = set()
    for function in usage.functions:
        reached |= {n[len("<macro ") : -1] for n in model.closure(function.name) if n.startswith("<macro ")}
    return sorted(reached)


def fallback_blockers(model: SourceModel, usage: IndexUsage) -> list[Blocker]:
    """Constructs only the compiler can see through; refused when it could not confirm."""
    blockers: list[Blocker] = []
    macros = _closure_macros(model, usage)
    for function in usage.functions:
        text = model.source.data[function.span.start : function.span.end].decode("utf-8", "replace")
        if ASM_RE.search(text):
            blockers.append(
                Blocker(
                    "InlineAsm",
                    f"'{function.name}' contains inline assembly, which may read %ctaid",
                    function.span.start,
                )
            )
            break
    local_names = {f.name for f in model.functions} | {m.name for m in model.macros}
    for name in macros:
        macro = model.macro(name)
        if macro is None:
            continue
        if ASM_RE.search(macro.body):
            blockers.append(
                Blocker(
                    "InlineAsm", f"macro '{name}' expands to inline assembly, which may read %ctaid", macro.span.start
                )
            )
        if "##" in macro.body:
            blockers.append(
                Blocker(
                    "TokenPasting",
                    f"macro '{name}' pastes tokens (##): the names it forms are not visible to the source analysis",
                    macro.span.start,
                )
            )
        params = (
            set(WORD_RE.findall(model.source.data[macro.span.start : macro.body_span.start].decode("utf-8", "replace")))
            if macro.body_span
            else set()
        )
        foreign = [w for w in CALL_IN_MACRO_RE.findall(macro.body) if not BUILTIN_CALL_RE.match(w)]
        foreign += [w for w in WORD_RE.findall(macro.body) if MACRO_NAME_RE.match(w) and w not in CUDA_NAMES]
        foreign = [w for w in foreign if w not in local_names and w not in params and w not in KEYWORDS]
        if foreign:
            blockers.append(
                Blocker(
                    "ForeignInMacro",
                    f"macro '{name}' expands '{foreign[0]}', which is not defined in this file",
                    macro.span.start,
                )
            )
    used = {u.name for u in model.macro_uses}
    referenced = {w for m in model.macros for w in WORD_RE.findall(m.body)}
    for read in model.index_reads:
        if (
            read.macro
            and _reads_xy(read.builtin, read.axis)
            and read.macro not in used
            and read.macro not in referenced - {read.macro}
        ):
            blockers.append(
                Blocker(
                    "MacroNotReached",
                    f"macro '{read.macro}' reads {read.spelling} but no function uses it by name",
                    read.span.start,
                )
            )
            break
    if usage.external_calls:
        blockers.append(
            Blocker("ExternalCall", f"'{usage.external_calls[0]}' is not defined in this file", usage.kernel.span.start)
        )
    return blockers
