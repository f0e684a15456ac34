"""The copies of one operand's slice from global into shared memory, as text.

A slice of operand n is `extent x BK` elements (extent: BM for an operand of the row, BN
for one of the column), loaded VEC at a time: work item `kx_e` covers VEC consecutive
elements along the operand's contiguous axis, items are shared out over the block's
threads (`kx_e = kx_tid + kx_l * kx_threads`). Elements outside the matrix (ragged M, N
or K) are stored as zeros and never summed. Three ways, one per route (layout.Staged):

* direct: load and store in one step (one stage);
* registers: `fetch` loads this thread's items into `kx_r<n>` before the current slice
  is computed, `put` stores them after it (the loads' latency hides behind the work);
* async: `__pipeline_memcpy_async` copies each item straight into the stage, 16 bytes
  where the four elements are whole and aligned, element by element otherwise.

A vector load is made only where its four elements are inside the matrix and its address
is 16-byte aligned, checked at run time (a row of odd length makes every other row
misaligned); otherwise the elements are loaded one by one with their own guards.
"""

from __future__ import annotations

from kxform.passes.smem_tile.layout import Shape, Staged


def count(shape: Shape, s: Staged) -> str:
    """Work items of one slice of operand `s`, as an expression over the macros."""
    extent = shape.macro("BM" if s.row else "BN")
    return f"{extent} * {shape.macro('BK')} / {shape.macro('VEC')}"


def per_thread(shape: Shape, s: Staged) -> str:
    return f"({count(shape, s)} + kx_threads - 1) / kx_threads"


def register_declaration(shape: Shape, s: Staged) -> str:
    kind = "float4" if s.vector else s.operand.access.element
    vec = "" if s.vector else f"[{shape.macro('VEC')}]"
    return f"{kind} kx_r{s.n}[{per_thread(shape, s)}]{vec};  // this thread's share of the next slice of {s.operand.access.text}"


def _items(shape: Shape, s: Staged, body: list[str]) -> list[str]:
    """A loop over this thread's work items of the slice starting at `kx_k0` (the last
    round may have fewer than one per thread), with `kx_m` and `kx_kk`, the item's first
    element in the slice."""
    bk, vec = shape.macro("BK"), shape.macro("VEC")
    extent = shape.macro("BM" if s.row else "BN")
    if s.along_k:
        split = f"kx_m = kx_e / ({bk} / {vec}), kx_kk = (kx_e % ({bk} / {vec})) * {vec}"
    else:
        split = f"kx_m = (kx_e % ({extent} / {vec})) * {vec}, kx_kk = kx_e / ({extent} / {vec})"
    return [
        "#pragma unroll",
        f"for (int kx_l = 0; kx_l < {per_thread(shape, s)}; kx_l++) {{",
        "    const int kx_e = kx_tid + kx_l * kx_threads;",
        f"    if (kx_e < {count(shape, s)}) {{",
        f"        const int {split};",
        *["        " + line for line in body],
        "    }",
        "}",
    ]


def _names(shape: Shape, s: Staged, lane: str = "") -> list[str]:
    """The coordinate and the reduction index of element `lane` (text; "" for the first) of the item."""
    nest = shape.nest
    coord, base = (nest.row, "kx_row0") if s.row else (nest.col, "kx_col0")
    along_m = "" if s.along_k or not lane else f" + {lane}"
    along_k = f" + {lane}" if s.along_k and lane else ""
    return [
        f"const {nest.coord_type} {coord} = {base} + kx_m{along_m};",
        f"const int {nest.loop.var} = kx_k0 + kx_kk{along_k};",
    ]


def _inside(shape: Shape, s: Staged) -> str:
    """The guard of one element: inside the matrix along its coordinate and along k."""
    nest = shape.nest
    coord, bound = (nest.row, nest.row_bound) if s.row else (nest.col, nest.col_bound)
    return f"{coord} < {bound} && {nest.loop.var} < {nest.k_bound}"


def _whole(shape: Shape, s: Staged) -> str:
    """The test of a vector item: inside, its last element too, and 16-byte aligned."""
    nest = shape.nest
    coord, bound = (nest.row, nest.row_bound) if s.row else (nest.col, nest.col_bound)
    last = f"{nest.loop.var} + 3 < {nest.k_bound}" if s.along_k else f"{coord} + 3 < {bound}"
    first = f"{coord} < {bound}" if s.along_k else f"{nest.loop.var} < {nest.k_bound}"
    return f"{first} && {last} && ((size_t)&{s.operand.access.text} & 15) == 0"


def _target(s: Staged, stage: str, lane: str) -> str:
    """The shared element that element `lane` of the item goes to."""
    if s.along_k:
        return f"kx_s{s.n}[{stage}][kx_kk + {lane}][kx_m]"
    return f"kx_s{s.n}[{stage}][kx_kk][kx_m + {lane}]"


def _zero(s: Staged) -> str:
    return f"({s.operand.access.element})0"


def direct(shape: Shape, s: Staged, stage: str) -> list[str]:
    """Load this thread's items of the slice and store them in `stage`."""
    text = s.operand.access.text
    body: list[str] = []
    scalar = [
        f"for (int kx_v = 0; kx_v < {shape.macro('VEC')}; kx_v++) {{",
        *["    " + line for line in _names(shape, s, "kx_v")],
        f"    {_target(s, stage, 'kx_v')} = ({_inside(shape, s)}) ? {text} : {_zero(s)};",
        "}",
    ]
    if s.vector:
        body += [
            *_names(shape, s),
            f"if ({_whole(shape, s)}) {{",
            f"    const float4 kx_v4 = __ldg(reinterpret_cast<const float4*>(&{text}));",
            *[f"    {_target(s, stage, str(i))} = kx_v4.{c};" for i, c in enumerate("xyzw")],
            "} else",
            *["    " + line for line in scalar],
        ]
    else:
        body += scalar
    return _items(shape, s, body)


def fetch(shape: Shape, s: Staged) -> list[str]:
    """Load this thread's items of the slice starting at `kx_k0` into `kx_r<n>`."""
    text = s.operand.access.text
    if not s.vector:
        return _items(
            shape,
            s,
            [
                f"for (int kx_v = 0; kx_v < {shape.macro('VEC')}; kx_v++) {{",
                *["    " + line for line in _names(shape, s, "kx_v")],
                f"    kx_r{s.n}[kx_l][kx_v] = ({_inside(shape, s)}) ? {text} : {_zero(s)};",
                "}",
            ],
        )
    return _items(
        shape,
        s,
        [
            *_names(shape, s),
            f"if ({_whole(shape, s)})",
            f"    kx_r{s.n}[kx_l] = __ldg(reinterpret_cast<const float4*>(&{text}));",
            "else {",
            "    float kx_x[4];",
            "    for (int kx_v = 0; kx_v < 4; kx_v++) {",
            *["        " + line for line in _names(shape, s, "kx_v")],
            f"        kx_x[kx_v] = ({_inside(shape, s)}) ? {text} : 0.0f;",
            "    }",
            f"    kx_r{s.n}[kx_l] = make_float4(kx_x[0], kx_x[1], kx_x[2], kx_x[3]);",
            "}",
        ],
    )


def put(shape: Shape, s: Staged, stage: str) -> list[str]:
    """Store `kx_r<n>` (fetched for the slice starting at `kx_k0`) into `stage`."""
    if not s.vector:
        store = [
            "#pragma unroll",
            f"for (int kx_v = 0; kx_v < {shape.macro('VEC')}; kx_v++)",
            f"    {_target(s, stage, 'kx_v')} = kx_r{s.n}[kx_l][kx_v];",
        ]
    elif s.vector_rows:  # the four stay together: one 128-bit store (the row pitch is a multiple of 4)
        store = [f"*reinterpret_cast<float4*>(&{_target(s, stage, '0')}) = kx_r{s.n}[kx_l];"]
    else:
        store = [f"{_target(s, stage, str(i))} = kx_r{s.n}[kx_l].{c};" for i, c in enumerate("xyzw")]
    return _items(shape, s, store)


def asynchronous(shape: Shape, s: Staged, stage: str) -> list[str]:
    """Copy this thread's items of the slice starting at `kx_k0` into `stage` with cp.async
    (the copies land when this thread waits for their group)."""
    text, element = s.operand.access.text, s.operand.access.element
    scalar = [
        f"for (int kx_v = 0; kx_v < {shape.macro('VEC')}; kx_v++) {{",
        *["    " + line for line in _names(shape, s, "kx_v")],
        f"    if ({_inside(shape, s)})",
        f"        __pipeline_memcpy_async(&{_target(s, stage, 'kx_v')}, &{text}, sizeof({element}));",
        "    else",
        f"        {_target(s, stage, 'kx_v')} = {_zero(s)};",
        "}",
    ]
    if not s.vector_rows:  # element by element: the stage's rows do not keep 16 bytes aligned
        return _items(shape, s, scalar)
    return _items(
        shape,
        s,
        [
            *_names(shape, s),
            f"if ({_whole(shape, s)})",
            f"    __pipeline_memcpy_async(&{_target(s, stage, '0')}, &{text}, 16);",
            "else",
            *["    " + line for line in scalar],
        ],
    )
