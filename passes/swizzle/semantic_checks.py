"""What libclang's facts (kxform.frontend.semantic) mean for a block-index remap: a read of
blockIdx.x/.y hidden in a macro of another file, or a function of another file that reads
the index, cannot be rewritten, so the kernel is refused; when libclang could not answer
a question the syntax left open (the file, or a function the kernel reaches, does not
parse), the kernel is refused too (conservatively), naming the error and any header
that was not found."""

from __future__ import annotations

from kxform.engine.pass_api import Blocker
from kxform.frontend.semantic import SemanticInfo
from kxform.passes.swizzle.index_usage import IndexUsage

REMAP_BUILTINS = ("blockIdx", "gridDim")


def semantic_blockers(info: SemanticInfo, usage: IndexUsage) -> list[Blocker]:
    names = {f.name for f in usage.functions}
    why = info.unknown(usage.functions)
    if why is not None:  # the question the syntax left open stays open: refuse
        what = f"'{usage.external_calls[0]}' is defined elsewhere and" if usage.external_calls else \
            "an included header"
        hint = "" if info.build_dir_given else " (pass -p BUILD_DIR with compile_commands.json)"
        return [Blocker("SemanticUnavailable", f"{why}{info.missing_note()}; {what} may read the block index{hint}",
                        usage.kernel.span.start)]
    out = []
    for read in info.hidden_reads:
        if read.builtin in REMAP_BUILTINS and read.function in names and read.axis in ("x", "y") \
                and read.macro not in info.local_macros:
            out.append(Blocker("IndexReadInForeignMacro", f"macro '{read.macro}' (defined in another file) "
                               f"reads blockIdx.{read.axis}; kxform does not rewrite other files", read.offset))
    for callee, where in sorted(info.foreign_readers("blockIdx").items()):
        if callee in usage.external_calls:
            out.append(Blocker("IndexReadInOtherFile", f"'{callee}' (defined in {where}) reads the block index; "
                               "kxform does not rewrite other files", usage.kernel.span.start))
    return out
