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
from typing import NoReturn

from kxform.cache import cache_root, content_key, located, portable
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
DRAFT_VERSION = "2"


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
    """A drafted spec of `kernel` (cached by what the draft depends on: draft_key);
    ModelRefused when the draft is incomplete or cannot be measured. `model`: the
    source's parse. A kernel the file never launches is refused before anything is
    drafted.

    An entry is valid wherever its key matches (another checkout, a temporary copy, CI):
    the draft names its source by file name only and is loaded against the file being
    judged, and a refusal stores the source's path as a mark that reads back as the
    current one."""
    if not any(launch.kernel == kernel.split("<", 1)[0] for launch in model.launches):
        raise ModelRefused(f"no spec, and none can be drafted: the file does not launch '{kernel}'")
    from kxform.harness.infer import infer_spec
    from kxform.harness.spec import SPEC_SUFFIX, load_spec
    from kxform.locality.trace import default_runtime

    path = cache_root() / "drafts" / draft_key(source, kernel, flags) / f"{Path(source.path).stem}{SPEC_SUFFIX}"
    refused = path.with_suffix(".refused")
    if refused.is_file():
        raise ModelRefused(located(refused.read_text(encoding="utf-8"), source.path))
    if not path.is_file():
        try:
            draft = infer_spec(source, kernel, default_runtime(), model=model, flags=flags)
        except KxformError as exc:
            _refuse(refused, f"no spec, and none can be drafted: {exc}", source.path)
        if draft.todos:
            _refuse(refused, f"no spec, and the drafted one is incomplete ({draft.todos[0]})", source.path)
        # `file` is the source's name (drafted as if beside it), and so is every mention of it
        _write(path, portable(draft.text, source.path, Path(source.path).name))
    try:
        return load_spec(path, source=Path(source.path).resolve()).kernel(kernel), path
    except KxformError as exc:
        raise ModelRefused(f"no spec, and the drafted one does not load: {exc}") from None


def draft_key(source: SourceText, kernel: str, flags: UnitFlags | None) -> str:
    """What a draft depends on, and nothing of where the file is: its text and name, the
    kernel, the unit's include directories and defines, and the content of every
    project header it reaches through `#include "..."` (a macro there can set the
    launch)."""
    from kxform.build.overlay import walk_includes

    folder = Path(source.path).resolve().parent
    include_dirs = [Path(d).resolve() for d in (flags.for_unit(source.path) if flags else ())]
    headers = [f"{name}:{content_key(data)}" for name, _, data in walk_includes(folder, source.text, include_dirs)]
    return content_key(
        DRAFT_VERSION,
        source.text,
        kernel,
        Path(source.path).name,
        *(() if flags is None else (repr((flags.include_dirs, flags.defines)),)),
        *headers,
    )


def _refuse(path: Path, why: str, source_path: str) -> NoReturn:
    """Store the refusal (kxform.cache.portable: without the source's path) and raise it."""
    _write(path, portable(why, source_path))
    raise ModelRefused(why) from None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode("utf-8"))
