"""`kxform harness infer`: draft a harness spec from a file's own launch site.

What the file says is used where it can be read: the kernel's parameters (pointers become
buffers, `const` ones inputs), the launch configuration (`dim3 grid(...)` declarations and
`<<<...>>>` arguments, with numeric `#define`s substituted), and scalar parameters as size
variables. What it cannot say (buffer lengths, realistic sizes, output roles) is filled
with a guess marked `# review`. The result is a draft: it says so in its first line.
"""

from __future__ import annotations

import re

from kxform.build.extract import find_kernel, split_spelling
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import LaunchSite, SourceModel
from kxform.harness.dtypes import CTYPE_DTYPES, base_ctype as _base_type
from kxform.frontend.source import SourceText



def _numeric_macros(model: SourceModel) -> dict[str, str]:
    return {m.name: m.body.strip() for m in model.macros
            if not m.is_function_like and re.fullmatch(r"\(?\s*\d+[uUlL]*\s*\)?", m.body.strip())}


def _to_expr(text: str, macros: dict[str, str]) -> str:
    text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text)
    text = re.sub(r"\(\s*(?:unsigned|int|size_t|long)\s*\)", "", text)
    for name, value in macros.items():
        text = re.sub(rf"\b{re.escape(name)}\b", value.strip("() uUlL"), text)
    return " ".join(text.split())


def _dims(text: str, host_body: str, macros: dict[str, str]) -> list[str]:
    """`dim3(a, b)` / `a` / a variable declared `dim3 v(a, b)` or `dim3 v = dim3(a, b)`."""
    text = text.strip()
    match = re.fullmatch(r"dim3\s*\((.*)\)", text, re.S)
    if match is None and re.fullmatch(r"[A-Za-z_]\w*", text):
        decl = re.search(rf"\bdim3\s+{re.escape(text)}\s*(?:\((.*?)\)\s*;|=\s*dim3\s*\((.*?)\)\s*;|\{{(.*?)\}}\s*;)",
                         host_body, re.S)
        if decl:
            inner = next(g for g in decl.groups() if g is not None)
            match = re.fullmatch(r"(.*)", inner, re.S)
    parts = [p for p in (match.group(1) if match else text).split(",") if p.strip()] if match else [text]
    return [_to_expr(p, macros) for p in parts]


def infer_spec(source: SourceText, spelling: str) -> str:
    """A draft TOML spec for `spelling` (kernel name or instantiation)."""
    model = parse_model(source)
    name, _ = split_spelling(spelling)
    kernel = find_kernel(model, name)
    launches = [launch for launch in model.launches if launch.kernel == name]
    macros = _numeric_macros(model)
    launch: LaunchSite | None = launches[0] if launches else None
    host_body = ""
    if launch is not None and launch.function:
        host = next((f for f in model.functions if f.name == launch.function), None)
        if host is not None:
            host_body = source.data[host.body.start:host.body.end].decode("utf-8")
    scalars = [p for p in kernel.params if "*" not in p.ctype and "[" not in p.ctype]
    size_vars = [p.name for p in scalars if _base_type(p.ctype) in ("int", "unsigned", "unsigned int",
                                                                     "int64_t", "size_t", "long long")]
    lines = [
        f"# DRAFT written by `kxform harness infer` from {source.path}: review every line marked 'review'.",
        "version = 1",
        f'file = "{source.path.rsplit("/", 1)[-1]}"',
        "",
        f'[kernel."{spelling}"]',
        f'description = "{spelling} (drafted; describe it)"',
        "seed = 0",
    ]
    if launch is not None:
        grid = _dims(launch.config[0], host_body, macros)
        block = _dims(launch.config[1], host_body, macros)
        smem = _to_expr(launch.config[2], macros) if len(launch.config) > 2 else "0"
        line = source.line_col(launch.span.start)[0]
        lines += [f"grid = {grid!r}  # from the launch at line {line}".replace("'", '"'),
                  f"block = {block!r}".replace("'", '"'), f'shared_bytes = "{smem}"']
    else:
        lines += ['grid = ["1"]  # review: no launch site of this kernel in the file',
                  'block = ["256"]  # review', 'shared_bytes = "0"']
    lines += ['compare = { mode = "ulp", ulps = 2 }  # review: exact for integer outputs', ""]
    count = " * ".join(size_vars) if size_vars else "1024"
    for param in kernel.params:
        base = _base_type(param.ctype)
        dtype = CTYPE_DTYPES.get(base)
        lines.append(f'[[kernel."{spelling}".args]]')
        lines.append(f'name = "{param.name}"')
        if "*" in param.ctype:
            role = "in" if param.ctype.lstrip().startswith("const") or " const" in param.ctype.split("*")[0] \
                else "out"
            lines += ['kind = "buffer"',
                      f'dtype = "{dtype or "float32"}"' + ("" if dtype else f"  # review: C type {base!r}"),
                      f'count = "{count}"  # review: element count',
                      f'role = "{role}"' + ("" if role == "in" else "  # review: out or inout")]
            if role == "in":
                fill = '{ dist = "uniform", low = -1.0, high = 1.0 }' if (dtype or "float").startswith(("float",
                                                                                                       "bfloat")) \
                    else '{ dist = "int", low = 0, high = 100 }'
                lines.append(f"fill = {fill}")
        else:
            lines += ['kind = "scalar"', f'dtype = "{dtype or "int32"}"',
                      f'value = "{param.name}"' if param.name in size_vars else 'value = "1"  # review']
        lines.append("")
    values = "\n".join(f"{v} = 256  # review" for v in size_vars) or "# no size variables"
    lines += [f'[[kernel."{spelling}".sizes]]', 'name = "small"', values, ""]
    if not launches:
        lines.insert(1, f"# note: {spelling} is not launched in {source.path}")
    return "\n".join(lines)

