"""The driver hands `Pass.verify_policy` the file the pass's edits left, as it hands
`check_result`; a pre-edit check that needs the rewritten text of its proposal gets it
from the engine (`edited_file`), once: no pass applies its own edits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kxform.engine.driver import transform_source
from kxform.engine.edits import Edit
from kxform.engine.pass_api import CheckRecord, KernelAnalysis, Outcome, Pass, PassContext, Proposal, RunOptions
from kxform.engine.policy import LaunchBinding, VerifyPolicy
from kxform.engine.rewritten import edited_file
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import SourceModel
from kxform.frontend.source import validate_bytes
from kxform.hw import load_profile

SOURCE = """__global__ void scale(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2; }
__global__ void shift(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
void run(float* x, int n) {
    scale<<<(n + 127) / 128, 128>>>(x, n);
    shift<<<(n + 127) / 128, 128>>>(x, n);
}
"""


@dataclass(frozen=True)
class Block64(Pass):
    """A toy pass: each selected kernel's launch gets a block of 64 (the grid follows)."""

    name = "block64"
    description = "a block of 64 threads"
    edits_made: ClassVar[list[tuple[str, ...]]] = []
    seen: ClassVar[list[tuple[str, bytes, tuple[str, ...]]]] = []

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        return {
            k.name: KernelAnalysis(k, already_applied=launch_configs(ctx.model, k.name)[0].block == ("64",))
            for k in ctx.model.kernels
        }

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        return Proposal.of(self.name, analysis.kernel.name, {"block": 64}, "a block of 64")

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        new = edited_file(ctx, self, [proposal])  # what a resource check compiles
        assert b"64>>>" in new.source.data
        return [CheckRecord("preview", True, "the rewritten text of the proposal alone")]

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        self.edits_made.append(tuple(p.kernel for p in proposals))
        out = []
        for proposal in proposals:
            (launch,) = launch_configs(ctx.model, proposal.kernel)
            start = ctx.model.source.data.index(b"127) / 128, 128", launch.site.span.start)
            out.append(Edit(start, start + len("127) / 128, 128"), "63) / 64, 64", "block64"))
        return out

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        (launch,) = launch_configs(rewritten, proposal.kernel)
        self.seen.append((proposal.kernel, rewritten.source.data, launch.block))
        return VerifyPolicy(LaunchBinding(block=tuple(launch.block)), required=True)


def run(kernels: tuple[str, ...]):  # type: ignore[no-untyped-def]
    Block64.edits_made.clear()
    Block64.seen.clear()
    source = validate_bytes("k.cu", SOURCE.encode())
    return transform_source(source, [Block64()], load_profile("h100"), RunOptions(kernels=kernels))


def test_verify_policy_reads_the_rewritten_file():
    result = run(("scale",))
    (applied,) = [r for r in result.results if r.outcome is Outcome.APPLIED]
    assert result.changed and b"scale<<<(n + 63) / 64, 64>>>" in result.new_data
    (seen,) = Block64.seen
    assert seen == ("scale", result.new_data, ("64",))
    assert applied.policy.launch is not None and applied.policy.launch.block == ("64",)


def test_the_checked_preview_is_the_edit_the_driver_applies():
    """One proposal: the check's preview is reused by the driver (edit computed once)."""
    run(("scale",))
    assert Block64.edits_made == [("scale",)]


def test_every_kernel_of_the_file_sees_the_file_with_all_edits():
    """Two proposals: each is previewed alone, the file is edited once for both, and each
    policy reads that file (both launches rewritten)."""
    result = run(())
    assert Block64.edits_made == [("scale",), ("shift",), ("scale", "shift")]
    assert [k for k, _, _ in Block64.seen] == ["scale", "shift"]
    assert all(data == result.new_data and block == ("64",) for _, data, block in Block64.seen)
    assert result.new_data.count(b"64>>>") == 2
