"""What the function that launches a kernel says about the launch, beyond its `<<<...>>>`:
constants every call of it passes (a block size from the caller), the template arguments
of its first spelled call (a launch inside a function template), the multiples it
requires of a size (`if (n % 8 != 0) exit(1);`) and the buffers it clears before the
launch (`cudaMemset(d_flags, 0, ...)`). `kxform harness infer` drafts with them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kxform.build.extract import split_spelling
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, LaunchSite, SourceModel
from kxform.frontend.queries import int_value, split_args, template_params


def launching_function(model: SourceModel, kernel: Function) -> tuple[LaunchSite, Function] | None:
    """The kernel's first launch in the file and the function it sits in."""
    configs = launch_configs(model, kernel.name)
    if not configs:
        return None
    host = _host_of(model, configs[0].site)
    return (configs[0].site, host) if host is not None else None


def _host_of(model: SourceModel, site: LaunchSite) -> Function | None:
    return next((f for f in model.functions if f.name == site.function and f.body.contains(site.span)), None)


_MULTIPLE_RES = (
    re.compile(r"\bif\s*\(\s*\(?\s*([A-Za-z_]\w*)\s*%\s*(\d+)\s*\)?\s*(?:!=\s*0\s*)?\)"),
    re.compile(r"\b\w*(?:assert|ASSERT|CHECK)\w*\s*\(\s*\(?\s*([A-Za-z_]\w*)\s*%\s*(\d+)\s*\)?\s*==\s*0"),
)


def required_multiples(model: SourceModel, kernel: Function) -> dict[str, int]:
    """Kernel parameters the launching function requires to be a multiple of a constant
    (`if (head_size % 8 != 0) exit(1);`, `assert(n % 4 == 0)`): the drafted sizes are."""
    found = launching_function(model, kernel)
    if found is None:
        return {}
    site, host = found
    rename = {arg.strip(): param.name for arg, param in zip(site.args, kernel.params)}
    body = model.source.data[host.body.start : host.body.end].decode("utf-8", "replace")
    return {
        rename.get(m.group(1), m.group(1)): int(m.group(2))
        for pattern in _MULTIPLE_RES
        for m in pattern.finditer(body)
        if int(m.group(2)) > 1
    }


def zeroed(model: SourceModel, kernel: Function) -> dict[str, str]:
    """Buffers a launch needs at zero: `volatile` pointers (flags other blocks spin on) and
    the arguments the launching function clears with `cudaMemset(x, 0, ...)`."""
    out = {
        p.name: "volatile: a flag or counter, cleared"
        for p in kernel.params
        if "*" in p.ctype and re.search(r"\bvolatile\b", p.ctype)
    }
    found = launching_function(model, kernel)
    if found is None:
        return out
    site, host = found
    body = model.source.data[host.body.start : site.span.start].decode("utf-8", "replace")
    cleared = set(
        re.findall(r"\b(?:cudaMemset|cudaMemsetAsync|hipMemset|hipMemsetAsync)\s*\(\s*([A-Za-z_]\w*)\s*,\s*0\s*,", body)
    )
    for arg, param in zip(site.args, kernel.params):
        if arg.strip() in cleared and "*" in param.ctype:
            out.setdefault(param.name, f"cleared before the launch (cudaMemset({arg.strip()}, 0, ...))")
    return out


def caller_constants(model: SourceModel, kernel: Function, macros: Mapping[str, str]) -> dict[str, int]:
    """Parameters of the function that launches the kernel which every call of it in the
    file passes the same integer constant (`launch_silu_mul(out, gate, up, n, 512)` for
    `block_size`, a numeric macro of `macros` counting as its value): the launch reads
    them as that constant. Empty where it is not called."""
    found = launching_function(model, kernel)
    calls = [c for c in model.calls if found is not None and c.callee == found[1].name]
    if found is None or not calls:
        return {}
    host = found[1]
    written = [
        split_args(model.source.data[c.args_span.start + 1 : c.args_span.end - 1].decode("utf-8", "replace"))
        for c in calls
    ]
    out = {}
    for index, param in enumerate(host.params):
        values = {
            int_value(macros.get(args[index].strip(), args[index])) if index < len(args) else None for args in written
        }
        if len(values) == 1 and (value := values.pop()) is not None and "*" not in param.ctype:
            out[param.name] = value
    return out


def host_bindings(model: SourceModel, site: LaunchSite) -> dict[str, str]:
    """Template parameters of the function template a launch sits in, bound by the first
    call of it in the file that spells its arguments (`run_matmul<float, 16>(...)`: `T` ->
    `float`, `TILE` -> `16`): the launch `matmul_tiled<T, TILE><<<...>>>` is drafted at that
    instantiation."""
    host = _host_of(model, site)
    if host is None or not host.template_params:
        return {}
    for call in model.calls:
        head = model.source.data[call.span.start : call.args_span.start].decode("utf-8", "replace").strip()
        if call.callee == host.name and head.endswith(">"):
            _, args = split_spelling(head)
            return {p.name: arg for p, arg in zip(template_params(host), args)}
    return {}
