"""The edits of `split-reduce`: the kernel's reduction loop split over the workers of a
column, their partials combined in a fixed order, and every launch of the file given the
workers and a workspace.

In the kernel:

* two parameters after the original's, defaulted to `nullptr` so any other launch (one
  this file does not show) compiles and runs the kernel as written: per reduction a
  buffer of partials (`kx_part_<var>`, one per worker and column), and the arrival
  counters (`kx_arrivals`, one per column, zero between launches);
* at entry, the thread's worker and the number of workers: the launch's y axis
  (`blockIdx.y * blockDim.y + threadIdx.y` of `gridDim.y * blockDim.y`), or one worker
  when no workspace is passed;
* the loop starts at the worker's first iteration and strides by the workers
  (kxform.engine.rewrite.stride_loop); a sum whose initial value is not the identity
  keeps it in worker 0 only;
* after the loop, with several workers: the worker stores its partials, a fence makes
  them visible, and it counts its arrival; every worker but the last to arrive is done
  (`return`: the kernel has no barrier); the last, after a second fence, combines the
  partials of workers 0, 1, ... in that order (deterministic: the order does not depend
  on which worker arrives last), resets the column's counter, and runs the rest of the
  kernel as the original thread did.

At each launch: the statement becomes a block that sets the grid's and block's y to the
workers (`KERNEL_SPLIT_BLOCKS`, `KERNEL_SPLIT_THREADS`, overridable `#ifndef`
definitions), halves the block's y while the block has over 1024 threads, allocates the
workspace on the launch's stream (`cudaMallocAsync`, counters zeroed) and frees it after
the launch; without a workspace (an allocation failed) the kernel runs with one worker,
as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis.records import Loop, Reduction
from kxform.build.hip import is_hip
from kxform.engine import launch_site
from kxform.engine.edits import Edit
from kxform.engine.reorder import combine_text
from kxform.engine.rewrite import RewriteRefused, insert_at_entry, stride_loop
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.passes.split_reduce.plan import SPLIT, Plan

WORKERS = "kx_splits"
ARRIVALS = "kx_arrivals"
_IDENTITY_TEXT = {"0", "0.0", "0.f", "0.0f", "0.0F", "0u", "0.", "0.0L", "0ull", "0ll"}


@dataclass(frozen=True)
class Names:
    threads: str
    blocks: str

    @classmethod
    def of(cls, kernel: str) -> Names:
        return cls(
            launch_site.parameter_name(kernel, "SPLIT_THREADS"), launch_site.parameter_name(kernel, "SPLIT_BLOCKS")
        )


def partial(r: Reduction) -> str:
    return f"kx_part_{r.var}"


def launches(model: SourceModel, kernel: Function) -> tuple[LaunchConfig, ...]:
    """The file's launches of the kernel, each one the pass can give workers; or why not."""
    if is_hip(model.source.data.decode("utf-8", "replace")):
        raise RewriteRefused(
            "a HIP source: the launch's workspace is allocated with the CUDA runtime's cudaMallocAsync"
        )
    configs = launch_configs(model, kernel.name)
    if not configs:
        raise RewriteRefused(f"'{kernel.name}' is not launched in this file: the launch is where workers are set")
    data = model.source.data
    for config in configs:
        line = model.source.line_col(config.site.span.start)[0]
        if config.site.style != "chevron":
            raise RewriteRefused(f"the launch at line {line} is not a `<<<...>>>` launch")
        if any(launch_site.written(model, config, which, 1) is not None for which in (0, 1)):
            raise RewriteRefused(f"the launch at line {line} already sets a y dimension")
        end = data.find(b";", config.site.span.end)
        before = data[: config.site.span.start].rstrip()
        if end < 0 or data[config.site.span.end : end].strip() or not re.search(rb"(?:[;{})]|\belse)$", before):
            raise RewriteRefused(f"the launch at line {line} is not a statement of its own")
    if len(re.findall(rb"\b" + re.escape(kernel.name.encode()) + rb"\s*\([^;{]*\)\s*;", data)) > 0:
        raise RewriteRefused(f"'{kernel.name}' is declared apart from its definition: its parameters would differ")
    return configs


def edits(model: SourceModel, kernel: Function, plan: Plan, threads: int, blocks: int, origin: str) -> list[Edit]:
    loop = plan.loop
    assert loop is not None
    names = Names.of(kernel.name)
    out = _parameters(model, kernel, names, threads, blocks, origin)
    out.append(_workspace(model, kernel, plan.reductions, origin))
    out.append(
        insert_at_entry(
            model,
            kernel,
            [
                f"const unsigned int {SPLIT} = {ARRIVALS} != nullptr ? blockIdx.y * blockDim.y + threadIdx.y : 0u;",
                f"const unsigned int {WORKERS} = {ARRIVALS} != nullptr ? gridDim.y * blockDim.y : 1u;",
            ],
            f"{origin}: worker",
        )
    )
    out += _identity_outside_worker_0(model, loop, plan.reductions, origin)
    out += stride_loop(model, loop, SPLIT, WORKERS, f"{origin}: workers")
    out.append(Edit(loop.span.end, loop.span.end, _combine(model, loop, plan.reductions), f"{origin}: combine"))
    for config in launches(model, kernel):
        out.append(_launch(model, kernel, config, plan.reductions, names, origin))
    return out


def _parameters(
    model: SourceModel, kernel: Function, names: Names, threads: int, blocks: int, origin: str
) -> list[Edit]:
    out = launch_site.define_parameter(model, kernel.span.start, names.threads, threads, f"{origin}: threads")
    out += launch_site.define_parameter(model, kernel.span.start, names.blocks, blocks, f"{origin}: blocks")
    return out


def _workspace(model: SourceModel, kernel: Function, reductions: tuple[Reduction, ...], origin: str) -> Edit:
    """The workspace parameters after the original's, defaulted: a launch that passes none
    runs the kernel as written."""
    data = model.source.data
    close = kernel.params_span.end - 1
    while data[close - 1 : close].isspace():
        close -= 1
    given = bool(kernel.params) and data[kernel.params_span.start + 1 : close].strip() not in (b"", b"void")
    params = [*(f"{r.ctype}* {partial(r)} = nullptr" for r in reductions), f"unsigned int* {ARRIVALS} = nullptr"]
    if not given:
        return Edit(kernel.params_span.start + 1, close, ", ".join(params), f"{origin}: workspace")
    return Edit(close, close, ", " + ", ".join(params), f"{origin}: workspace")


def _identity_outside_worker_0(
    model: SourceModel, loop: Loop, reductions: tuple[Reduction, ...], origin: str
) -> list[Edit]:
    """A sum's initial value counts once: workers other than 0 start from the identity
    (max and min may see it in every worker)."""
    source = model.source
    nl, indent = source.newline, source.indent_at(loop.span.start)
    at = source.line_start(loop.span.start)
    out = []
    for r in reductions:
        if r.op == "+" and r.init.strip() not in _IDENTITY_TEXT:
            text = f"{indent}if ({SPLIT} != 0){nl}{indent}    {r.var} = {r.identity};{nl}"
            out.append(Edit(at, at, text, f"{origin}: {r.var} starts at the identity outside worker 0"))
    return out


def _combine(model: SourceModel, loop: Loop, reductions: tuple[Reduction, ...]) -> str:
    nl, ind = model.source.newline, model.source.indent_at(loop.span.start)
    step = "    "
    slot = "kx_column"
    lines = [
        f"if ({WORKERS} > 1) {{",
        f"{step}const unsigned long long kx_column = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;",
        f"{step}const unsigned long long kx_columns = (unsigned long long)gridDim.x * blockDim.x;",
        *(f"{step}{partial(r)}[{SPLIT} * kx_columns + {slot}] = {r.var};" for r in reductions),
        f"{step}__threadfence();  // the partials are visible before the arrival is counted",
        f"{step}if (atomicAdd(&{ARRIVALS}[{slot}], 1u) != {WORKERS} - 1)",
        f"{step}{step}return;  // the column's last worker to arrive combines; the others are done",
        f"{step}__threadfence();  // every counted worker's partials are visible here",
        *(f"{step}{r.var} = __ldcg(&{partial(r)}[{slot}]);" for r in reductions),
        f"{step}for (unsigned int kx_w = 1; kx_w < {WORKERS}; ++kx_w) {{",
        *(
            f"{step}{step}{r.var} = "
            f"{combine_text(r.op, r.ctype, r.var, f'__ldcg(&{partial(r)}[kx_w * kx_columns + {slot}])')};"
            for r in reductions
        ),
        f"{step}}}",
        f"{step}{ARRIVALS}[{slot}] = 0u;  // as the launch found it, for the next launch",
        "}",
    ]
    return "".join(f"{nl}{ind}{line}" for line in lines)


def _launch(
    model: SourceModel,
    kernel: Function,
    config: LaunchConfig,
    reductions: tuple[Reduction, ...],
    names: Names,
    origin: str,
) -> Edit:
    data = model.source.data
    site = config.site
    nl, ind = model.source.newline, model.source.indent_at(site.span.start)
    end = data.index(b";", site.span.end) + 1
    grid, block = (_x_text(model, config, which) for which in (0, 1))
    stream = site.config[3].strip() if len(site.config) > 3 else "0"
    chevron = ", ".join(["kx_grid", "kx_block", *(c.strip() for c in site.config[2:])])
    head = data[site.span.start : site.span.end].decode("utf-8")
    args_at = head.rindex(")")
    extra = ", ".join([*(partial(r) for r in reductions), ARRIVALS])
    call = head[: head.index("<<<")] + f"<<<{chevron}>>>" + head[head.index(">>>") + 3 : args_at]
    call += (", " if site.args else "") + extra + ")"
    allocs = [
        f"cudaMallocAsync((void**)&{ARRIVALS}, kx_columns * sizeof(unsigned int), {stream}) == cudaSuccess",
        f"cudaMemsetAsync({ARRIVALS}, 0, kx_columns * sizeof(unsigned int), {stream}) == cudaSuccess",
        *(
            f"cudaMallocAsync((void**)&{partial(r)}, kx_columns * kx_workers * sizeof({r.ctype}), {stream}) == "
            "cudaSuccess"
            for r in reductions
        ),
    ]
    buffers = [ARRIVALS, *(partial(r) for r in reductions)]
    s = "    "
    lines = [
        f"{{  // split-reduce: {kernel.name}'s reduction over {names.threads} x {names.blocks} workers per column",
        f"{s}dim3 kx_grid({grid}, {names.blocks});",
        f"{s}dim3 kx_block({block}, {names.threads});",
        f"{s}while (kx_block.y > 1 && kx_block.x * kx_block.y > 1024)",
        f"{s}{s}kx_block.y /= 2;",
        f"{s}const size_t kx_columns = (size_t)kx_grid.x * kx_block.x;",
        f"{s}const size_t kx_workers = (size_t)kx_grid.y * kx_block.y;",
        *(f"{s}{r.ctype}* {partial(r)} = nullptr;" for r in reductions),
        f"{s}unsigned int* {ARRIVALS} = nullptr;",
        f"{s}if (kx_workers > 1 && !({f' &&{nl}{ind}{s}{s}{s}'.join(allocs)})) {{",
        f"{s}{s}(void)cudaGetLastError();  // no workspace: one worker per column, the kernel as written",
        *(f"{s}{s}if ({b}) cudaFreeAsync({b}, {stream});" for b in buffers),
        *(f"{s}{s}{b} = nullptr;" for b in buffers),
        f"{s}{s}kx_grid.y = kx_block.y = 1;",
        f"{s}}}",
        f"{s}{call};",
        *(f"{s}if ({b}) cudaFreeAsync({b}, {stream});" for b in buffers),
        "}",
    ]
    text = lines[0] + "".join(f"{nl}{ind}{line}" for line in lines[1:])
    return Edit(site.span.start, end, text, f"{origin}: launch at line {model.source.line_col(site.span.start)[0]}")


def _x_text(model: SourceModel, config: LaunchConfig, which: int) -> str:
    """The launch's x dimension of the grid (`which` 0) or block (1) as text that can be
    read at the launch: the `dim3` variable's field, or the expression as written."""
    var = config.grid_var if which == 0 else config.block_var
    if var is not None:
        return f"{var.name}.x"
    spans, _ = launch_site.dim_spans(model, config, which)
    span = spans[0]
    return model.source.data[span.start : span.end].decode("utf-8")
