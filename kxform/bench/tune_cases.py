"""The corpus kernels the GPU tuning benchmarks tune, and what they share: loading a
case, requiring a GPU (tools/bench_tune_gpu.py, bench_tune_kt_live.py, bench_tune_multigpu.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.bench.output import fail
from kxform.bench.paths import CORPORA, ROOT

SGEMM_128_REQUIRE = (
    "BM == BN",  # one loop stages both slices: BM * BK == BK * BN elements
    "BM % TM == 0",
    "THREADS == (BM / TM) * (BN / TN)",  # one thread per TM x TN sub-tile, every sub-tile covered
    "(BM * BK) % THREADS == 0",  # every thread loads the same number of elements
    "TM * TN <= 64",  # accumulators in registers (the original's 8 x 8)
    "BM >= 32",
    "THREADS >= 64",
    "BK <= 32",
)
"""What sgemm_128's indexing assumes and the tile pass cannot derive (its derived
constraints are threads per block and shared memory only), plus a sensible region:
the restrictions a Kernel Tuner user would write for it."""


@dataclass(frozen=True)
class Reference:
    """The yardstick for one case's time, from tools/gpu_baselines.py.

    `gemm`: cuBLAS's single-precision GEMM (batched where `batch` is not "1") of the
    shape the kernel computes, each dimension an expression over the spec's size
    variables; the figure is cuBLAS's time over the kernel's. `copy`: the device-to-device
    copy bandwidth; the figure is the kernel's least traffic (each input buffer read once,
    each output written once, inout both) over its time, as a fraction of that bandwidth.
    `note` says what the yardstick is where it is not the kernel's own operation.
    """

    kind: str  # "gemm" | "copy"
    m: str = ""
    n: str = ""
    k: str = ""
    batch: str = "1"
    note: str = ""


GEMM = Reference("gemm", "M", "N", "K")
COPY = Reference("copy")


@dataclass(frozen=True)
class Case:
    """One kernel tuned under one pass pipeline."""

    name: str
    folder: str
    file: str
    kernel: str
    passes: tuple[str, ...]
    size: str
    """The timing size (`--size` syntax) of a full run."""
    quick_size: str
    require: tuple[str, ...] = ()
    reference: Reference | None = None
    """What the tuned time is compared with (a vendor GEMM, the copy bandwidth), if anything."""
    root: Path = CORPORA
    """Where `folder` is (the corpus, or the launch pass's test fixtures)."""

    @property
    def path(self) -> Path:
        return self.root / self.folder / self.file


CASES = (
    Case(
        "sgemm_tiled/tile",
        "sgemm_tiled",
        "sgemm_tiled.cu",
        "sgemm_tiled",
        ("tile",),
        "M=2048,N=2048,K=2048",
        "M=1024,N=1024,K=1024",
        reference=GEMM,
    ),
    Case(
        "sgemm_tiled/tile+swizzle",
        "sgemm_tiled",
        "sgemm_tiled.cu",
        "sgemm_tiled",
        ("tile", "swizzle"),
        "M=2048,N=2048,K=2048",
        "M=1024,N=1024,K=1024",
        reference=GEMM,
    ),
    Case(
        "jacobi5/tile",
        "stencil5",
        "stencil5.cu",
        "jacobi5",
        ("tile",),
        "NX=8192,NY=8192",
        "NX=4096,NY=4096",
        reference=COPY,
    ),
    Case(
        "jacobi5/tile+swizzle",
        "stencil5",
        "stencil5.cu",
        "jacobi5",
        ("tile", "swizzle"),
        "NX=8192,NY=8192",
        "NX=4096,NY=4096",
        reference=COPY,
    ),
    Case(
        "sgemm_128/tile",
        "sgemm_128",
        "sgemm_128.cu",
        "sgemm_128",
        ("tile",),
        "M=2048,N=2048,K=2048",
        "M=1024,N=1024,K=1024",
        SGEMM_128_REQUIRE,
        reference=GEMM,
    ),
    Case(
        "sgemm_tiled/tile+swizzle+unroll",
        "sgemm_tiled",
        "sgemm_tiled.cu",
        "sgemm_tiled",
        ("tile", "swizzle", "unroll"),
        "M=4096,N=4096,K=4096",
        "M=2048,N=2048,K=2048",
        reference=GEMM,
    ),
    Case(
        "sgemm_128/tile+swizzle+unroll",
        "sgemm_128",
        "sgemm_128.cu",
        "sgemm_128",
        ("tile", "swizzle", "unroll"),
        "M=4096,N=4096,K=4096",
        "M=2048,N=2048,K=2048",
        SGEMM_128_REQUIRE,
        reference=GEMM,
    ),
    Case(
        "softmax_rows/tile",
        "softmax",
        "softmax.cu",
        "softmax_rows",
        ("tile",),
        "R=32768,C=2048",
        "R=8192,C=2048",
        reference=COPY,
    ),
    Case(
        "transpose/tile",
        "transpose",
        "transpose.cu",
        "transposeNoBankConflicts",
        ("tile",),
        "W=8192,H=8192",
        "W=4096,H=4096",
        reference=COPY,
    ),
    Case(
        "merge_attn_states/tile",
        "merge_attn_states",
        "merge_attn_states.cu",
        "merge_attn_states_kernel",
        ("tile",),
        "T=16384,NH=32,HD=128",
        "T=4096,NH=32,HD=128",
        reference=COPY,
    ),
    Case(
        "box_blur3x3/tile",
        "device_helper_blur",
        "box_blur.cu",
        "box_blur3x3",
        ("tile",),
        "W=8192,H=8192",
        "W=4096,H=4096",
        reference=COPY,
    ),
    Case(
        "pairwise_sqdist/tile",
        "macro_index_sqdist",
        "pairwise_dist.cu",
        "pairwise_sqdist",
        ("tile",),
        "N=8192,M=8192,DIM=64",
        "N=4096,M=4096,DIM=64",
        reference=Reference("gemm", "N", "M", "DIM", note="cuBLAS GEMM of the same shape (N x DIM by DIM x M)"),
    ),
    Case(
        "batched_qk_scores/tile",
        "batched_scores_3d",
        "batched_scores.cu",
        "batched_qk_scores",
        ("tile",),
        "B=16,SQ=2048,SK=2048,HD=64",
        "B=8,SQ=1024,SK=1024,HD=64",
        reference=Reference("gemm", "SQ", "SK", "HD", batch="B", note="cuBLAS batched GEMM Q K^T"),
    ),
    Case(
        "sw_diagonal/tile",
        "smith_waterman",
        "smith_waterman.cu",
        "sw_diagonal",
        ("tile",),
        "TB=256,M=8192,N=8192,D=8192",
        "TB=256,M=4096,N=4096,D=4096",
    ),
    Case(
        "sgemm_naive/tile",
        "hip_sgemm",
        "sgemm_naive.hip",
        "sgemm_naive",
        ("tile",),
        "M=4096,N=4096,K=4096",
        "M=1024,N=1024,K=1024",
        reference=GEMM,
    ),
)
"""Every corpus kernel the tile pass lifts (corpora/index.toml: tile = "lifts" or
"parameters"), under `tile`; the two first also under `tile,swizzle`, and the two hand-tiled
SGEMMs under every pass that offers them a space (tile, swizzle, unroll: the launch pass
refuses them, their block size follows the tile) at 4096^3 (cuBLAS's yardstick). The smith-waterman
step computes one anti-diagonal per launch (latency-bound): it has no yardstick."""

LAUNCH_FIXTURES = ROOT / "tests" / "fixtures" / "launch"
LAUNCH_CASES = (
    Case(
        "fused_bias_gelu/launch",
        "fused_bias_gelu",
        "fused_bias_gelu.cu",
        "fused_bias_gelu_residual",
        ("launch",),
        "bench",
        "R=8192,H=1024",
        reference=COPY,
    ),
    Case(
        "layernorm/launch",
        "layernorm",
        "layernorm.cu",
        "layernorm_forward_kernel",
        ("launch",),
        "bench",
        "N=16384,C=1024",
        reference=COPY,
    ),
    Case("spmv_csr/launch", "spmv_csr", "spmv_csr.cu", "spmv_csr_scalar_kernel", ("launch",), "bench", "bench"),
    Case(
        "fused_add_rmsnorm/launch",
        "fused_add_rmsnorm",
        "fused_add_rmsnorm.cu",
        "fused_add_rms_norm_kernel",
        ("launch",),
        "bench",
        "bench",
        reference=COPY,
    ),
    Case(
        "silu_and_mul/launch",
        "silu_and_mul",
        "silu_and_mul.cu",
        "silu_and_mul_kernel",
        ("launch",),
        "bench",
        "bench",
        reference=COPY,
    ),
    Case(
        "gelu_forward/launch",
        "gelu",
        "gelu.cu",
        "gelu_forward",
        ("launch",),
        "bench",
        "n=4194304",
        reference=COPY,
        root=LAUNCH_FIXTURES,
    ),
    Case(
        "layernorm_rows/launch",
        "layernorm_rows",
        "layernorm_rows.cu",
        "layernorm_rows",
        ("launch",),
        "bench",
        "N=16384,C=768",
        reference=COPY,
        root=LAUNCH_FIXTURES,
    ),
    Case(
        "gemm_naive/launch",
        "gemm_naive",
        "gemm_naive.cu",
        "gemm_naive",
        ("launch",),
        "bench",
        "M=1024,N=1024,K=1024",
        reference=GEMM,
        root=LAUNCH_FIXTURES,
    ),
    Case(
        "transpose_naive/launch",
        "transpose_naive",
        "transpose_naive.cu",
        "transpose_naive",
        ("launch",),
        "bench",
        "rows=4096,cols=4096",
        reference=COPY,
        root=LAUNCH_FIXTURES,
    ),
    Case(
        "softmax_rows/launch",
        "softmax_rows",
        "softmax_rows.cu",
        "softmax_rows",
        ("launch",),
        "bench",
        "N=16384,C=512",
        reference=COPY,
        root=LAUNCH_FIXTURES,
    ),
    Case(
        "silu_mul/launch",
        "silu_caller",
        "silu_caller.cu",
        "silu_mul",
        ("launch",),
        "bench",
        "n=4194304",
        reference=COPY,
        root=LAUNCH_FIXTURES,
    ),
)
"""The block size alone (`--pass launch`) of every kernel the launch pass lifts and can
verify (tools/corpus.py launch --verify): the corpus's and the launch fixtures' naive kernels.
Run them with `tools/bench_tune_gpu.py --case NAME/launch ...`."""
COARSEN_CASES = (
    Case(
        "jacobi2d_naive/coarsen",
        "naive/jacobi2d",
        "naive.cu",
        "jacobi2d_naive",
        ("coarsen",),
        "N=8192",
        "N=4096",
        reference=COPY,
    ),
    Case(
        "gemm_naive/coarsen",
        "naive/gemm",
        "naive.cu",
        "gemm_naive",
        ("coarsen",),
        "M=2048,N=2048,K=2048",
        "M=1024,N=1024,K=1024",
        reference=GEMM,
    ),
    Case(
        "matvec_naive/coarsen",
        "naive/matvec",
        "naive.cu",
        "matvec_naive",
        ("coarsen",),
        "bench",
        "M=4096,N=4096",
        reference=COPY,
    ),
    Case("syrk_naive/coarsen", "naive/syrk", "naive.cu", "syrk_naive", ("coarsen",), "N=2048,M=2048", "N=1024,M=1024"),
    Case("mm2_kernel1/coarsen", "naive/mm2", "naive.cu", "mm2_kernel1", ("coarsen",), "bench", "bench"),
)
"""coarsen alone on naive kernels where `loads=once` shares loads, swept exhaustively:
every factor, axis and layout, with its loads each time or once, timed in one process
(the stencil's outputs share rows or columns; the GEMMs' and the matrix-vector product's
share a row of A or the vector at each iteration of their loop)."""
CASES = CASES + LAUNCH_CASES + COARSEN_CASES


def pick(names: list[str] | None, default: tuple[str, ...], only_tile: bool = False) -> list[Case]:
    """The cases named (all of `default` when none), refusing unknown names."""
    known = {c.name: c for c in CASES if not only_tile or c.passes == ("tile",)}
    wanted = names or list(default)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        fail(f"unknown case '{unknown[0]}' (cases: {', '.join(known)})")
    return [known[n] for n in wanted]


@dataclass(frozen=True)
class Loaded:
    """A case ready to tune: target, tuning space, valid configurations, timing size."""

    case: Case
    target: Any
    space: Any
    search: Any
    size: Any


def load(case: Case, quick: bool, hw: str) -> Loaded:
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.hw import load_profile
    from kxform.search.kernel_objective import TuneTarget, timing_size
    from kxform.search.kernel_space import kernel_space

    data = case.path.read_bytes()
    spec_path = find_spec_for(str(case.path))
    if spec_path is None:
        fail(f"{case.path}: no harness spec")
    spec = load_spec(spec_path).kernel(case.kernel)
    space = kernel_space(data, case.kernel, case.passes, path=str(case.path), hw=hw, require=case.require)
    search = space.search(load_profile(hw))
    size = timing_size(spec, case.quick_size if quick else case.size)
    return Loaded(case, TuneTarget(str(case.path), data, case.kernel, spec, hw), space, search, size)


def require_gpu(tool: str) -> Any:
    """The GPU runtime, or exit 2 with one line saying why there is none."""
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        fail(f"needs a CUDA GPU (this machine has none usable: {why}); run it on a GPU machine", tool)
    return runtime


def profile_for(runtime: Any, given: str | None) -> str:
    """The hardware profile for the constraints: `given`, else the one matching the device."""
    if given:
        return given
    name = runtime.device_info().name.lower()
    for key, profile in (("h200", "h200"), ("h100", "h100"), ("a100", "a100"), ("l40s", "l40s"), ("4090", "rtx4090")):
        if key in name:
            return profile
    return "h100"
