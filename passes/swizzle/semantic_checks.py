"""What libclang's facts (kxform.frontend.semantic) mean for a block-index remap: a read of
blockIdx.x/.y hidden in a macro of another file, or a function of another file that reads
the index, cannot be rewritten, so the kernel is refused; when libclang could not answer
a question the syntax left open (the file, or a function the kernel reaches, does not
parse), the kernel is refused too (conservatively), naming the error and any header
that was not found.

A read libclang attributes to a macro of this file is rewritten syntactically only if
that macro's own expansion (through other macros of this file) holds a read of the same
builtin and axis; otherwise the read comes from a macro or helper of another header
reached through the local macro, and is refused (`foreign_through_local`)."""

from __future__ import annotations

from kxform.engine.pass_api import Blocker
from kxform.frontend.cuda import WORD_RE, macro_node
from kxform.frontend.model import SourceModel
from kxform.frontend.semantic import SemanticInfo
from kxform.passes.swizzle.index_usage import IndexUsage

REMAP_BUILTINS = ("blockIdx", "gridDim")


def semantic_blockers(info: SemanticInfo, usage: IndexUsage) -> list[Blocker]:
    names = {f.name for f in usage.functions}
    why = info.unknown(usage.functions)
    if why is not None:  # the question the syntax left open stays open: refuse
        what = f"'{usage.external_calls[0]}' is defined elsewhere and" if usage.external_calls else "an included header"
        hint = "" if info.build_dir_given else " (pass -p BUILD_DIR with compile_commands.json)"
        return [
            Blocker(
                "SemanticUnavailable",
                f"{why}{info.missing_note()}; {what} may read the block index{hint}",
                usage.kernel.span.start,
            )
        ]
    out = []
    for read in info.hidden_reads:
        if (
            read.builtin in REMAP_BUILTINS
            and read.function in names
            and read.axis in ("x", "y")
            and read.macro not in info.local_macros
        ):
            out.append(
                Blocker(
                    "IndexReadInForeignMacro",
                    f"macro '{read.macro}' (defined in another file) "
                    f"reads blockIdx.{read.axis}; kxform does not rewrite other files",
                    read.offset,
                )
            )
    for callee, where in sorted(info.foreign_readers("blockIdx").items()):
        if callee in usage.external_calls:
            out.append(
                Blocker(
                    "IndexReadInOtherFile",
                    f"'{callee}' (defined in {where}) reads the block index; kxform does not rewrite other files",
                    usage.kernel.span.start,
                )
            )
    return out


def _local_reads(model: SourceModel, macro: str) -> set[tuple[str, str]]:
    """(builtin, axis) read syntactically by `macro` or the macros of this file it expands."""
    reached = {n[len("<macro ") : -1] for n in model.closure(macro_node(macro)) if n.startswith("<macro ")} | {macro}
    return {(r.builtin, r.axis) for r in model.index_reads if r.macro in reached}


def foreign_through_local(model: SourceModel, usage: IndexUsage, info: SemanticInfo) -> list[Blocker]:
    """Hidden reads libclang attributes to a local macro that does not itself read that
    builtin and axis, and functions of other headers that read the block index called
    through a macro of this file."""
    if not info.ok:
        return []  # semantic_blockers refuses already
    names = {f.name for f in usage.functions}
    reached = {
        n[len("<macro ") : -1] for f in usage.functions for n in model.closure(f.name) if n.startswith("<macro ")
    }
    words = {w for m in reached if (d := model.macro(m)) is not None for w in WORD_RE.findall(d.body)}
    for callee, where in sorted(info.foreign_readers("blockIdx").items()):
        if callee in words:
            return [
                Blocker(
                    "IndexReadInOtherFile",
                    f"'{callee}' (defined in {where}) reads the block index and is "
                    "called through a macro of this file; kxform does not rewrite other files",
                    usage.kernel.span.start,
                )
            ]
    for read in info.hidden_reads:
        if (
            read.builtin in REMAP_BUILTINS
            and read.function in names
            and read.axis in ("x", "y")
            and read.macro in info.local_macros
            and (read.builtin, read.axis) not in _local_reads(model, read.macro)
        ):
            return [
                Blocker(
                    "IndexReadInForeignMacro",
                    f"macro '{read.macro}' of this file expands a macro or helper "
                    f"from another header that reads {read.builtin}.{read.axis}; kxform does not rewrite "
                    "other files",
                    read.offset,
                )
            ]
    return []
