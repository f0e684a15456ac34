"""What the model judges a kernel on when nobody wrote a spec, and at which size.

The swizzle pass never writes a remap without evidence, and a kernel without a harness
spec is the common case. `drafted_spec` drafts one as `kxform harness infer` does
(roles and element counts measured on the CPU runtime, the launch read from the file)
and keeps it in the cache, so the model's traces of it are cached too. A draft with
lines left to fill in (a grid computed in host code, counts that match no product of
the sizes) cannot be modelled: the reason is the first such line.

`timing_size` is the size the model judges at. Check sizes are small on purpose (a
ragged edge, a few blocks), and an L2 that holds a whole launch shows no difference
between block orders: so the size is the spec's first bench size when it has one (a
person chose it), else the last check size with every size variable doubled until the
launch has `WAVES` full waves of blocks and its buffers are `L2_MULTIPLE` times the L2.
"""

from __future__ import annotations

import math
from pathlib import Path

from kxform.cache import cache_root, content_key
from kxform.errors import KxformError
from kxform.fileio import write_atomic
from kxform.frontend.model import SourceModel
from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.harness.request import UnitFlags
from kxform.hw import HwProfile
from kxform.locality.trace import ModelRefused

WAVES = 4
"""Full waves of resident blocks (an upper bound of residency: the thread and block limits)."""
L2_MULTIPLE = 4
"""Buffers at least this many times the L2, so the launch streams through it."""
MAX_BYTES = 3 << 30
"""Buffers the CPU runtime allocates for a trace, at most."""
MAX_DOUBLINGS = 16
DRAFT_VERSION = "1"


def timing_size(spec: KernelSpec, hw: HwProfile) -> SizeSpec:
    """The size the model judges `spec` at (see the module docstring); ModelRefused when
    no doubling of the check size reaches it within the CPU runtime's memory."""
    if spec.bench_sizes:
        return spec.bench_sizes[0]
    if not spec.check_sizes:
        raise ModelRefused("the spec has no size to start from")
    base = spec.check_sizes[-1]
    if not base.values:
        raise ModelRefused("the spec has no size variables to scale up to a timing size")
    for doublings in range(1, MAX_DOUBLINGS + 1):
        size = SizeSpec(
            f"timing({base.name} x{1 << doublings})",
            True,
            {name: value << doublings for name, value in base.values.items()},
        )
        try:
            launch = spec.launch(size)
        except KxformError as exc:
            raise ModelRefused(f"no timing size: {exc}") from None
        threads = max(1, math.prod(launch.block))
        resident = max(1, hw.max_threads_per_sm // threads)
        if hw.max_blocks_per_sm:
            resident = min(resident, hw.max_blocks_per_sm)
        waves = math.prod(launch.grid) / (resident * hw.sm_count)
        if launch.total_bytes > MAX_BYTES:
            raise ModelRefused(
                f"no timing size: at {_show(size)} the buffers are {launch.total_bytes >> 20} MiB "
                f"(at most {MAX_BYTES >> 20} on the CPU runtime) with {waves:.1f} waves of blocks"
            )
        if waves >= WAVES and launch.total_bytes >= L2_MULTIPLE * hw.l2_bytes:
            return size
    raise ModelRefused(f"no timing size within {MAX_DOUBLINGS} doublings of size {base.name}")


def _show(size: SizeSpec) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.values.items())


def drafted_spec(
    source: SourceText, kernel: str, model: SourceModel, flags: UnitFlags | None = None
) -> tuple[KernelSpec, Path]:
    """A drafted spec of `kernel` (cached by the source text); ModelRefused when the
    draft is incomplete or cannot be measured. `model`: the source's parse. A kernel
    the file never launches is refused before anything is drafted."""
    if not any(launch.kernel == kernel.split("<", 1)[0] for launch in model.launches):
        raise ModelRefused(f"no spec, and none can be drafted: the file does not launch '{kernel}'")
    from kxform.harness.infer import infer_spec
    from kxform.harness.spec import load_spec
    from kxform.locality.trace import default_runtime

    key = content_key(
        DRAFT_VERSION,
        source.text,
        kernel,
        source.path,
        *(() if flags is None else (repr((flags.include_dirs, flags.defines)),)),
    )
    path = cache_root() / "drafts" / key / f"{Path(source.path).stem}.kxform.toml"
    refused = path.with_suffix(".refused")
    if refused.is_file():
        raise ModelRefused(refused.read_text(encoding="utf-8"))
    if not path.is_file():
        try:
            draft = infer_spec(source, kernel, default_runtime(), model=model, flags=flags)
        except KxformError as exc:
            _write(refused, f"no spec, and none can be drafted: {exc}")
            raise ModelRefused(f"no spec, and none can be drafted: {exc}") from None
        if draft.todos:
            why = f"no spec, and the drafted one is incomplete ({draft.todos[0]})"
            _write(refused, why)
            raise ModelRefused(why)
        _write(path, _point_at(draft.text, str(Path(source.path).resolve())))
    try:
        return load_spec(path).kernel(kernel), path
    except KxformError as exc:
        raise ModelRefused(f"no spec, and the drafted one does not load: {exc}") from None


def _point_at(text: str, absolute: str) -> str:
    """The draft with its `file` naming the source by absolute path (it lives in the cache)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("file = "):
            lines[i] = f"file = {_toml_string(absolute)}"
            break
    return "\n".join(lines)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
