"""The coverage record of a rewrite: the compiler's answer where it can give one, else the
source analysis with everything it cannot see through refused.

Also the libclang refinement for macros: a read libclang attributes to a macro of this
file is rewritten syntactically only if that macro's own expansion (through other macros
of this file) holds a read of the same axis; otherwise the read comes from a macro or
helper of another header reached through the local macro, and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from kxform.engine.pass_api import Blocker, CheckRecord
from kxform.errors import CheckFailed
from kxform.frontend.cuda import WORD_RE, macro_node
from kxform.frontend.model import SourceModel
from kxform.passes.swizzle.index_usage import IndexUsage, index_usage
from kxform.passes.swizzle.opaque import fallback_blockers
from kxform.passes.swizzle.ptx_coverage import confirm


def confirm_coverage(new_model: SourceModel, kernels: Sequence[str], mark: bytes) -> CheckRecord:
    """Raise CheckFailed("coverage", ...) for a read left physical; else the record."""
    confirmed: list[str] = []
    source_only: list[str] = []
    for name in kernels:
        kernel = next(k for k in new_model.kernels if k.name == name)
        verdict = confirm(new_model, kernel, mark)
        if verdict.confirmed:
            if verdict.unmapped:
                raise CheckFailed("coverage", f"'{name}' still reads the physical block index in its compiled code "
                                  f"({', '.join(verdict.unmapped)} of the rewritten file): a read the source analysis "
                                  "did not see (a functor, constructor, default argument, function pointer, token "
                                  "pasting, cooperative-groups call, inline PTX or another header)")
            confirmed.append(name)
            continue
        blockers = fallback_blockers(new_model, index_usage(new_model, kernel))
        if blockers:
            where = new_model.source.location(blockers[0].offset)
            raise CheckFailed("coverage", f"{blockers[0].message} (at {where}), and the compiler could not confirm "
                              f"coverage of '{name}': {verdict.why_not}")
        source_only.append(f"{name} ({verdict.why_not})")
    parts = []
    if confirmed:
        parts.append(f"nvcc confirms no %ctaid.x/.y read in the PTX of {', '.join(confirmed)} with a constant prologue")
    if source_only:
        parts.append("source analysis only, nothing it cannot see through: " + ", ".join(source_only))
    return CheckRecord("coverage", True, "every blockIdx.x/.y read in the kernels' call closures uses the remap; "
                       + "; ".join(parts))


def _local_axes(model: SourceModel, macro: str) -> set[str]:
    """Axes of blockIdx read syntactically by `macro` or the macros of this file it expands."""
    reached = {n[len("<macro "):-1] for n in model.closure(macro_node(macro)) if n.startswith("<macro ")} | {macro}
    return {r.axis for r in model.index_reads if r.macro in reached and r.builtin == "blockIdx"}


def foreign_through_local(model: SourceModel, usage: IndexUsage, semantic: object) -> list[Blocker]:
    """Hidden reads libclang attributes to a local macro that does not itself read that axis."""
    if not getattr(semantic, "ok", False):
        return []
    names = {f.name for f in usage.functions}
    local = getattr(semantic, "local_macros", frozenset())
    reached = {n[len("<macro "):-1] for f in usage.functions for n in model.closure(f.name) if n.startswith("<macro ")}
    words = {w for m in reached if (d := model.macro(m)) is not None for w in WORD_RE.findall(d.body)}
    for callee, where in sorted(getattr(semantic, "foreign_readers", {}).items()):
        if callee in words:
            return [Blocker("IndexReadInOtherFile", f"'{callee}' (defined in {where}) reads the block index and is "
                            "called through a macro of this file; kxform does not rewrite other files",
                            usage.kernel.span.start)]
    for read in getattr(semantic, "hidden_reads", []):
        if read.function in names and read.axis in ("x", "y") and read.macro in local and \
                read.axis not in _local_axes(model, read.macro):
            return [Blocker("IndexReadInForeignMacro", f"macro '{read.macro}' of this file expands a macro or helper "
                            f"from another header that reads blockIdx.{read.axis}; kxform does not rewrite other "
                            "files", read.offset)]
    return []
