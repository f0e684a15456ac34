"""The coverage record of a rewrite: the compiler's answer where it can give one, else the
source analysis with everything it cannot see through refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kxform.build.toolchain import Toolchain
from kxform.engine.pass_api import CheckRecord
from kxform.errors import CheckFailed
from kxform.frontend.model import SourceModel
from kxform.passes.swizzle.index_usage import IndexUsage, index_usage
from kxform.passes.swizzle.opaque import fallback_blockers
from kxform.passes.swizzle.ptx_coverage import confirm


def confirm_coverage(
    new_model: SourceModel,
    kernels: Sequence[str],
    mark: bytes,
    toolchain: Toolchain | None = None,
    usages: Mapping[str, IndexUsage] | None = None,
) -> CheckRecord:
    """Raise CheckFailed("coverage", ...) for a read left physical; else the record.
    `toolchain` gives the project's include directories and defines for the compile;
    `usages` the rewritten kernels' index usage where it is already known."""
    confirmed: list[str] = []
    source_only: list[str] = []
    for name in kernels:
        kernel = next(k for k in new_model.kernels if k.name == name)
        verdict = confirm(new_model, kernel, mark, toolchain=toolchain)
        if verdict.confirmed:
            if verdict.unmapped:
                raise CheckFailed(
                    "coverage",
                    f"'{name}' still reads the physical block index in its compiled code "
                    f"({', '.join(verdict.unmapped)} of the rewritten file): a read the source analysis "
                    "did not see (a functor, constructor, default argument, function pointer, token "
                    "pasting, cooperative-groups call, inline PTX or another header)",
                )
            confirmed.append(name)
            continue
        usage = (usages or {}).get(name) or index_usage(new_model, kernel)
        blockers = fallback_blockers(new_model, usage)
        if blockers:
            where = new_model.source.location(blockers[0].offset)
            raise CheckFailed(
                "coverage",
                f"{blockers[0].message} (at {where}), and the compiler could not confirm "
                f"coverage of '{name}': {verdict.why_not}",
            )
        source_only.append(f"{name} ({verdict.why_not})")
    parts = []
    if confirmed:
        parts.append(f"nvcc confirms no %ctaid.x/.y read in the PTX of {', '.join(confirmed)} with a constant prologue")
    if source_only:
        parts.append("source analysis only, nothing it cannot see through: " + ", ".join(source_only))
    return CheckRecord(
        "coverage", True, "every blockIdx.x/.y read in the kernels' call closures uses the remap; " + "; ".join(parts)
    )
