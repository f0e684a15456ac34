"""Every input file is read with a bound: a device (`/dev/zero`), a FIFO or an oversized
file is a one-line error naming it, never a read without end (exit 2, not 123)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import run_cli
from kxform.errors import KxformError

ZERO = "/dev/zero"


def _readers() -> list[tuple[str, Callable[[str], object]]]:
    from kxform.harness.spec import load_spec
    from kxform.hw import load_profile
    from kxform.log.reader import read_log
    from kxform.propose.lock import load_decisions
    from kxform.search.recorded import load_recording

    return [
        ("hardware profile", load_profile),
        ("decision record", load_decisions),
        ("recording", load_recording),
        ("pass log", read_log),
        ("harness spec", load_spec),
    ]


@pytest.mark.skipif(not os.path.exists(ZERO), reason="no /dev/zero on this system")
@pytest.mark.parametrize("what, read", _readers(), ids=[w for w, _ in _readers()])
def test_a_device_is_refused_without_reading_it(what: str, read: Callable[[str], object]) -> None:
    with pytest.raises(KxformError, match="not a regular file"):
        read(ZERO)


def test_a_recording_that_inflates_past_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from kxform.search import recorded

    monkeypatch.setattr(recorded, "MAX_BYTES", 1 << 16)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (1 << 20)))  # 1 MiB of spaces in about 1 KiB
    with pytest.raises(KxformError, match="larger than"):
        recorded.load_recording(bomb)


@pytest.mark.skipif(not os.path.exists(ZERO), reason="no /dev/zero on this system")
def test_hw_dev_zero_on_the_command_line_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(float* o) { o[threadIdx.x] = 0; }\n")
    done = run_cli("apply", "--pass", "tile", "--hw", ZERO, "--diff", "k.cu", cwd=tmp_path, timeout=60)
    assert (
        done.returncode == 2
        and done.stderr.strip() == f"kxform: error: {ZERO}: not a regular file (a character device); refused"
    )
