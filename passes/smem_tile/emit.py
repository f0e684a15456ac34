"""The tiled kernel body and its launch, as text, for a recognised `Nest`.

Each block computes a BM x BN tile of outputs with (BN/TN) x (BM/TM) threads; thread
(tx, ty) owns rows `row0 + ty + a*(BM/TM)` and columns `col0 + tx + b*(BN/TN)` (strided,
so a warp's stores of one output row stay contiguous). The reduction runs over k-tiles of
BK: every operand's slice is staged in shared memory (stored transposed, `[k][m]`, padded
by PAD against bank conflicts), zero-filled outside the matrix, then a barrier, the
accumulation over the slice, a barrier before the next slice is stored. The
accumulation of each output keeps the original term and the original order over k (the
ragged last slice runs only its `K - k0` steps), and the epilogue runs per output under
the original guard, with the original coordinate names bound to that output.
"""

from __future__ import annotations

from collections.abc import Mapping

from kxform.passes.smem_tile.nest import Nest

PARAMS = ("BM", "BN", "BK", "TM", "TN", "PAD", "VEC")


def macro(nest: Nest, name: str) -> str:
    """The overridable macro of one parameter (`GEMM_NAIVE_BM`)."""
    return f"{nest.kernel.name.upper()}_{name}"


def body(nest: Nest, indent: str, newline: str) -> str:
    """The new kernel body, braces included (the original's first indentation level is `indent`)."""
    P = {p: macro(nest, p) for p in PARAMS}  # noqa: N806 - the parameters read like the macros they are
    rows, cols = f"({P['BM']} / {P['TM']})", f"({P['BN']} / {P['TN']})"
    threads = f"({rows} * {cols})"
    ty, tx = "(int)threadIdx.y", "(int)threadIdx.x"
    out = [
        f"// smem-tile: {P['BM']} x {P['BN']} outputs per block, {P['TM']} x {P['TN']} per thread, operands "
        "staged in shared memory"
    ]
    for n, op in enumerate(nest.operands):
        extent = P["BM"] if op.axis == "row" else P["BN"]
        out.append(
            f"__shared__ {op.access.element} kx_s{n}[{P['BK']}][{extent} + {P['PAD']}];  "
            f"// {op.access.text}, transposed"
        )
    out += list(nest.prelude)  # the kernel's constants, declared before the guard as written
    out += [
        f"const int kx_tid = {ty} * {cols} + {tx};",
        f"const int kx_row0 = (int)blockIdx.y * {P['BM']}, kx_col0 = (int)blockIdx.x * {P['BN']};",
        f"{nest.acc_type} kx_acc[{P['TM']}][{P['TN']}] = {{}};",
    ]
    if nest.below == "col":
        out.append(f"if (kx_col0 > kx_row0 + {P['BM']} - 1)  // every column of the block is past every row")
        out.append("    return;")
    elif nest.below == "row":
        out.append(f"if (kx_row0 > kx_col0 + {P['BN']} - 1)  // every row of the block is past every column")
        out.append("    return;")
    coords = [
        f"{nest.coord_type} {nest.row} = kx_row0 + {ty} + kx_a * {rows};",
        f"{nest.coord_type} {nest.col} = kx_col0 + {tx} + kx_b * {cols};",
    ]
    acc = "kx_acc[kx_a][kx_b]"
    out += _per_output(P, coords + [f"if ({nest.guard})", f"    {acc} = {nest.init};"])
    out.append(f"for (int kx_k0 = 0; kx_k0 < {nest.k_bound}; kx_k0 += {P['BK']}) {{")
    for n in range(len(nest.operands)):
        out += ["    " + line for line in _stage(nest, P, n, threads)]
    out.append("    __syncthreads();")
    out.append(f"    const int kx_kn = {nest.k_bound} - kx_k0 < {P['BK']} ? {nest.k_bound} - kx_k0 : {P['BK']};")
    reads = [
        f"kx_s{n}[kx_kk][{ty if op.axis == 'row' else tx} + kx_{'a' if op.axis == 'row' else 'b'} * "
        f"{rows if op.axis == 'row' else cols}]"
        for n, op in enumerate(nest.operands)
    ]
    term = nest.term.format(*reads, acc=acc).strip()
    term += "" if term.endswith(";") else ";"
    step = ["    " + line for line in _per_output(P, [term])]
    out += [
        "    if (kx_kn == " + P["BK"] + ") {",
        "#pragma unroll",
        f"        for (int kx_kk = 0; kx_kk < {P['BK']}; kx_kk++) {{",
        *["    " + s for s in step],
        "        }",
        "    } else {",
        "        for (int kx_kk = 0; kx_kk < kx_kn; kx_kk++) {",
        *["    " + s for s in step],
        "        }",
        "    }",
        "    __syncthreads();",
        "}",
    ]
    epilogue = _dedent(nest.epilogue.format(acc=acc))
    out += _per_output(P, coords + [f"if ({nest.guard}) {{", *["    " + line for line in epilogue], "}"])
    lines = [line.lstrip() if line.lstrip().startswith("#") else indent + line if line else line for line in out]
    return "{" + newline + newline.join(lines) + newline + "}"


def _stage(nest: Nest, P: Mapping[str, str], n: int, threads: str) -> list[str]:  # noqa: N803
    """The loop that stores operand `n`'s slice, VEC elements per step: one vector load where
    the run is contiguous, whole and aligned (float operands, VEC == 4), scalar loads with
    the edge guards otherwise."""
    op = nest.operands[n]
    coord, bound, extent = (
        (nest.row, nest.row_bound, P["BM"]) if op.axis == "row" else (nest.col, nest.col_bound, P["BN"])
    )
    base = "kx_row0" if op.axis == "row" else "kx_col0"
    vec, k, text, elem = P["VEC"], nest.loop.var, op.access.text, op.access.element
    along_k = op.k_contiguous or not op.m_contiguous
    if along_k:
        split = (f"kx_e / ({P['BK']} / {vec})", f"(kx_e % ({P['BK']} / {vec})) * {vec}")
        store, first, last = "kx_s{n}[kx_kk + {v}][kx_m]", f"{coord} < {bound}", f"{k} + 3 < {nest.k_bound}"
    else:
        split = (f"(kx_e % ({extent} / {vec})) * {vec}", f"kx_e / ({extent} / {vec})")
        store, first, last = "kx_s{n}[kx_kk][kx_m + {v}]", f"{k} < {nest.k_bound}", f"{coord} + 3 < {bound}"
    contiguous = op.k_contiguous if along_k else op.m_contiguous
    lines = [
        f"for (int kx_e = kx_tid; kx_e < {extent} * {P['BK']} / {vec}; kx_e += {threads}) {{",
        f"    const int kx_m = {split[0]}, kx_kk = {split[1]};",
        "    bool kx_vector = false;",
    ]
    if contiguous and elem == "float":
        lines += [
            f"    if ({vec} == 4) {{",
            f"        const {nest.coord_type} {coord} = {base} + kx_m;",
            f"        const int {k} = kx_k0 + kx_kk;",
            f"        kx_vector = {first} && {last} && ((size_t)&{text} & 15) == 0;",
            "        if (kx_vector) {",
            f"            const float4 kx_v = *reinterpret_cast<const float4*>(&{text});",
            *[f"            {store.format(n=n, v=v)} = kx_v.{c};" for v, c in enumerate("xyzw")],
            "        }",
            "    }",
        ]
    index = "kx_kk + kx_v" if along_k else "kx_kk"
    lines += [
        "    if (!kx_vector)",
        f"        for (int kx_v = 0; kx_v < {vec}; kx_v++) {{",
        f"            const {nest.coord_type} {coord} = {base} + kx_m{'' if along_k else ' + kx_v'};",
        f"            const int {k} = kx_k0 + {index};",
        f"            {store.format(n=n, v='kx_v')} = ({coord} < {bound} && {k} < {nest.k_bound}) ? {text} : "
        f"({elem})0;",
        "        }",
        "}",
    ]
    return lines


def _per_output(P: Mapping[str, str], lines: list[str]) -> list[str]:  # noqa: N803
    return [
        "#pragma unroll",
        f"for (int kx_a = 0; kx_a < {P['TM']}; kx_a++)",
        "#pragma unroll",
        f"    for (int kx_b = 0; kx_b < {P['TN']}; kx_b++) {{",
        *["        " + line for line in lines],
        "    }",
    ]


def _dedent(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\r\n").splitlines() if line.strip()]
    common = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    return [line[common:] for line in lines]


def launch_texts(nest: Nest) -> tuple[str, str]:
    """The grid and the block of the host launch, over the host's names for the kernel's parameters."""
    args = dict(zip((p.name for p in nest.kernel.params), (a.strip() for a in nest.launch.site.args)))

    def host(text: str) -> str:
        import re

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
    import re

    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"
