"""The accumulation over one staged slice: per step of k, each operand's values for the
thread's rows (columns) are read from shared memory into registers (a fragment, one
vector load per group of G), then every output of the thread adds its term, the
original statement with the operands replaced by fragment entries. The order over k of
each output's terms is the original's; a ragged last slice runs only its `kx_kn` steps.
"""

from __future__ import annotations

from kxform.passes.smem_tile.layout import Shape, Staged


def slice_loop(shape: Shape, stage: str) -> list[str]:
    """The statements that accumulate the slice held in stage `stage` (an index text)."""
    P = {k: shape.macro(k) for k in shape.config}  # noqa: N806 - the parameters read like the macros they are
    step = _step(shape, stage)
    return [
        f"const int kx_kn = {shape.nest.k_bound} - kx_k < {P['BK']} ? {shape.nest.k_bound} - kx_k : {P['BK']};",
        f"if (kx_kn == {P['BK']}) {{",
        "#pragma unroll",
        f"    for (int kx_kk = 0; kx_kk < {P['BK']}; kx_kk++) {{",
        *["        " + line for line in step],
        "    }",
        "} else {",
        "    for (int kx_kk = 0; kx_kk < kx_kn; kx_kk++) {",
        *["        " + line for line in step],
        "    }",
        "}",
    ]


def _step(shape: Shape, stage: str) -> list[str]:
    out: list[str] = []
    for s in shape.staged:
        out += _fragment(shape, s, stage)
    reads = [f"kx_f{s.n}[kx_{'a' if s.row else 'b'}]" for s in shape.staged]
    term = shape.nest.term.format(*reads, acc="kx_acc[kx_a][kx_b]").strip()
    return out + per_output(shape, [term if term.endswith(";") else term + ";"])


def _fragment(shape: Shape, s: Staged, stage: str) -> list[str]:
    """`kx_f<n>`: operand n's values at step kx_kk for the thread's TM rows (TN columns)."""
    size = shape.macro("TM" if s.row else "TN")
    first, lanes = ("kx_tm0", "kx_lanes_m") if s.row else ("kx_tn0", "kx_lanes_n")
    element = s.operand.access.element
    out = [
        f"{element} kx_f{s.n}[{size}];  // {s.operand.access.text} for this thread's {'rows' if s.row else 'columns'}"
    ]
    g = s.group
    if s.read_type is None:
        at = _position(first, lanes, "kx_v", g)
        return out + [
            "#pragma unroll",
            f"for (int kx_v = 0; kx_v < {size}; kx_v++)",
            f"    kx_f{s.n}[kx_v] = kx_s{s.n}[{stage}][kx_kk][{at}];",
        ]
    where = f"{first} + kx_g * ({g} * {lanes})" if g < shape.config["TM" if s.row else "TN"] else first
    lanes_of = "xyzw"[:g]
    return out + [
        "#pragma unroll",
        f"for (int kx_g = 0; kx_g < {size} / {g}; kx_g++) {{",
        f"    const {s.read_type} kx_v = *reinterpret_cast<const {s.read_type}*>(&kx_s{s.n}[{stage}][kx_kk][{where}]);",
        *[f"    kx_f{s.n}[{g} * kx_g + {i}] = kx_v.{c};" for i, c in enumerate(lanes_of)],
        "}",
    ]


def _position(first: str, lanes: str, var: str, group: int) -> str:
    """The block offset of a thread's output `var` along one axis (groups of `group`)."""
    if group == 1:
        return f"{first} + {var} * {lanes}"
    return f"{first} + {var} / {group} * ({group} * {lanes}) + {var} % {group}"


def row_of(shape: Shape) -> str:
    return "kx_row0 + " + _position("kx_tm0", "kx_lanes_m", "kx_a", shape.group(True))


def col_of(shape: Shape) -> str:
    return "kx_col0 + " + _position("kx_tn0", "kx_lanes_n", "kx_b", shape.group(False))


def per_output(shape: Shape, lines: list[str]) -> list[str]:
    return [
        "#pragma unroll",
        f"for (int kx_a = 0; kx_a < {shape.macro('TM')}; kx_a++)",
        "#pragma unroll",
        f"    for (int kx_b = 0; kx_b < {shape.macro('TN')}; kx_b++) {{",
        *["        " + line for line in lines],
        "    }",
    ]
