"""The tiled kernel body and its launch, as text, for a recognised `Nest` at one shape.

Each block computes a BM x BN tile of outputs with (BN/TN) x (BM/TM) threads, shared out
in warp tiles (layout.py). The reduction runs over k-slices of BK: every operand's slice
is staged in shared memory (`[stage][k][m]`, padded by PAD), zero-filled outside the
matrix. With one stage a step loads the slice, waits at a barrier, accumulates it and
waits again before the next is stored. With STAGES >= 2 the slices are pipelined:

    for (t = 1 - STAGES; t < slices; t++) {
        wait for this thread's copies of slice t;  __syncthreads();
        start loading slice t + STAGES - 1 into stage (t + STAGES - 1) % STAGES;
        if (t >= 0) accumulate slice t from stage t % STAGES;
        store the registers of slice t + STAGES - 1 into its stage;
    }

One barrier per slice separates every store from the reads of the same stage both ways
round (the stage loaded at step t was last read at step t - 1, and is read at step
t + STAGES - 1). The accumulation of each output keeps the original term and order over
k, and the epilogue runs per output under the original guard, with the original
coordinate names bound to that output.
"""

from __future__ import annotations

import re

from kxform.passes.smem_tile import compute, staging
from kxform.passes.smem_tile.layout import PARAMS, Shape
from kxform.passes.smem_tile.nest import Nest

ASYNC_HEADER = "cuda_pipeline_primitives.h"
"""Declares `__pipeline_memcpy_async`, `__pipeline_commit` and `__pipeline_wait_prior`."""


def macro(nest: Nest, name: str) -> str:
    """The overridable macro of one parameter (`GEMM_NAIVE_BM`)."""
    return f"{nest.kernel.name.upper()}_{name}"


def body(shape: Shape, indent: str, newline: str) -> str:
    """The new kernel body, braces included (the original's first indentation level is `indent`)."""
    nest = shape.nest
    out = _declarations(shape)
    out += list(nest.prelude)  # the kernel's constants, declared before the guard as written
    out += compute.per_output(
        shape, _coordinates(shape) + [f"if ({nest.guard})", f"    kx_acc[kx_a][kx_b] = {nest.init};"]
    )
    out.append(f"const int kx_slices = ({nest.k_bound} + {shape.macro('BK')} - 1) / {shape.macro('BK')};")
    out += _single(shape) if shape.stages == 1 else _pipelined(shape)
    epilogue = _dedent(nest.epilogue.format(acc="kx_acc[kx_a][kx_b]"))
    out += compute.per_output(
        shape, _coordinates(shape) + [f"if ({nest.guard}) {{", *["    " + e for e in epilogue], "}"]
    )
    lines = [line.lstrip() if line.lstrip().startswith("#") else indent + line if line else line for line in out]
    return "{" + newline + newline.join(lines) + newline + "}"


def _declarations(shape: Shape) -> list[str]:
    nest = shape.nest
    P = {p: shape.macro(p) for p in PARAMS}  # noqa: N806 - the parameters read like the macros they are
    how = "cp.async" if shape.asynchronous else "registers"
    pipeline = f"{P['STAGES']} stages ({how})" if shape.stages > 1 else "one stage"
    out = [
        f"// smem-tile: {P['BM']} x {P['BN']} outputs per block, {P['WM']} x {P['WN']} per warp, {P['TM']} x "
        f"{P['TN']} per thread; operand slices of {P['BK']} staged in shared memory, {pipeline}",
    ]
    for s in shape.staged:
        extent = P["BM"] if s.row else P["BN"]
        how = "transposed" if s.along_k else "as stored"
        out.append(
            f"__shared__ __align__(16) {s.operand.access.element} kx_s{s.n}[{P['STAGES']}][{P['BK']}][{extent} + "
            f"{P['PAD']}];  // {s.operand.access.text}, {how}"
        )
    out += [
        f"constexpr int kx_threads = ({P['BM']} / {P['TM']}) * ({P['BN']} / {P['TN']});",
        f"constexpr int kx_lanes_m = {P['WM']} / {P['TM']}, kx_lanes_n = {P['WN']} / {P['TN']};  // a warp's threads "
        "along the rows and the columns",
        "const int kx_tid = (int)threadIdx.y * (" + P["BN"] + " / " + P["TN"] + ") + (int)threadIdx.x;",
        "const int kx_warp = kx_tid / (kx_lanes_m * kx_lanes_n), kx_lane = kx_tid % (kx_lanes_m * kx_lanes_n);",
        "// this thread's first row and column in the block: its warp's tile, then its lane's place in it",
        f"const int kx_tm0 = (kx_warp / ({P['BN']} / {P['WN']})) * {P['WM']} + (kx_lane / kx_lanes_n) * "
        f"{shape.group(True)};",
        f"const int kx_tn0 = (kx_warp % ({P['BN']} / {P['WN']})) * {P['WN']} + (kx_lane % kx_lanes_n) * "
        f"{shape.group(False)};",
        f"const int kx_row0 = (int)blockIdx.y * {P['BM']}, kx_col0 = (int)blockIdx.x * {P['BN']};",
        f"{nest.acc_type} kx_acc[{P['TM']}][{P['TN']}] = {{}};",
    ]
    if nest.below == "col":
        out += [
            f"if (kx_col0 > kx_row0 + {P['BM']} - 1)  // every column of the block is past every row",
            "    return;",
        ]
    elif nest.below == "row":
        out += [
            f"if (kx_row0 > kx_col0 + {P['BN']} - 1)  // every row of the block is past every column",
            "    return;",
        ]
    return out


def _coordinates(shape: Shape) -> list[str]:
    nest = shape.nest
    return [
        f"{nest.coord_type} {nest.row} = {compute.row_of(shape)};",
        f"{nest.coord_type} {nest.col} = {compute.col_of(shape)};",
    ]


def _single(shape: Shape) -> list[str]:
    """One stage: load, barrier, accumulate, barrier."""
    out = ["for (int kx_t = 0; kx_t < kx_slices; kx_t++) {", f"    const int kx_k0 = kx_t * {shape.macro('BK')};"]
    for s in shape.staged:
        out += ["    " + line for line in staging.direct(shape, s, "0")]
    out += ["    __syncthreads();", "    const int kx_k = kx_k0;"]
    out += ["    " + line for line in compute.slice_loop(shape, "0")]
    return out + ["    __syncthreads();", "}"]


def _pipelined(shape: Shape) -> list[str]:
    """STAGES >= 2: slice t + STAGES - 1 is loaded while slice t is accumulated."""
    S, BK = shape.macro("STAGES"), shape.macro("BK")  # noqa: N806
    load, use = f"(kx_t + {S} - 1) % {S}", f"kx_t % {S}"
    registers = [s for s in shape.staged if s.route == "registers"]
    out = [f'static_assert({S} >= 2, "the pipelined loop needs two stages or more");']
    out += [staging.register_declaration(shape, s) for s in registers]
    out += [
        f"for (int kx_t = 1 - {S}; kx_t < kx_slices; kx_t++) {{",
        f"    // slice kx_t is accumulated from stage {use}; slice kx_t + {S} - 1 is loaded into stage {load}",
    ]
    if shape.asynchronous:
        out.append(f"    __pipeline_wait_prior({S} - 2);  // this thread's copies of slice kx_t have landed")
    out += [
        f"    __syncthreads();  // every thread's slice kx_t is stored; stage {load} is no longer read",
        f"    const int kx_k0 = (kx_t + {S} - 1) * {BK};",
        f"    if (kx_k0 < {shape.nest.k_bound}) {{",
    ]
    for s in shape.staged:
        lines = staging.asynchronous(shape, s, load) if s.route == "async" else staging.fetch(shape, s)
        out += ["        " + line for line in lines]
    out.append("    }")
    if shape.asynchronous:
        out.append("    __pipeline_commit();")
    out += ["    if (kx_t >= 0) {", f"        const int kx_k = kx_t * {BK};"]
    out += ["        " + line for line in compute.slice_loop(shape, use)]
    out.append("    }")
    if registers:
        out.append(f"    if (kx_k0 < {shape.nest.k_bound}) {{")
        for s in registers:
            out += ["        " + line for line in staging.put(shape, s, load)]
        out.append("    }")
    return out + ["}"]


def _dedent(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\r\n").splitlines() if line.strip()]
    common = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    return [line[common:] for line in lines]


def launch_texts(nest: Nest) -> tuple[str, str]:
    """The grid and the block of the host launch, over the host's names for the kernel's parameters."""
    args = dict(zip((p.name for p in nest.kernel.params), (a.strip() for a in nest.launch.site.args)))

    def host(text: str) -> str:
        return re.sub(r"[A-Za-z_]\w*", lambda m: _paren(args.get(m.group(0), m.group(0))), text)

    P = {p: macro(nest, p) for p in PARAMS}  # noqa: N806
    grid = (
        f"dim3(({host(nest.col_bound)} + {P['BN']} - 1) / {P['BN']}, ({host(nest.row_bound)} + {P['BM']} - 1) / "
        f"{P['BM']})"
    )
    return grid, f"dim3({P['BN']} / {P['TN']}, {P['BM']} / {P['TM']})"


def binding_exprs(nest: Nest) -> tuple[tuple[str, str], tuple[str, str]]:
    """The grid and the block over the kernel's parameters and the pass's names (for verification)."""
    return (
        (f"ceil_div({nest.col_bound}, {macro(nest, 'BN')})", f"ceil_div({nest.row_bound}, {macro(nest, 'BM')})"),
        (f"{macro(nest, 'BN')} // {macro(nest, 'TN')}", f"{macro(nest, 'BM')} // {macro(nest, 'TM')}"),
    )


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"
