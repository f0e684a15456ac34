from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kxform.engine.edits import Edit, apply_edits, unified_diff
from kxform.errors import EditConflict
from kxform.workspace.files import walk_sources, write_atomic
from kxform.errors import InputError
from kxform.frontend.source import validate_bytes


def test_overlapping_edits_name_both_origins() -> None:
    src = validate_bytes("a.cu", b"int blockIdx_x;\n")
    with pytest.raises(EditConflict) as info:
        apply_edits(src, [Edit(0, 5, "long", "first pass"), Edit(3, 8, "x", "second pass")])
    assert "first pass" in str(info.value) and "second pass" in str(info.value)
    assert str(info.value).startswith("a.cu:1:4:")


def test_insertions_at_one_offset_keep_their_order() -> None:
    src = validate_bytes("a.cu", b"ab")
    out = apply_edits(src, [Edit(1, 1, "1"), Edit(1, 1, "2"), Edit(0, 1, "A")])
    assert out.data == b"A12b"


def test_line_map_points_inserted_lines_at_their_anchor() -> None:
    src = validate_bytes("a.cu", b"l1\nl2\nl3\n")
    out = apply_edits(src, [Edit(3, 3, "new1\nnew2\n")])
    assert out.data == b"l1\nnew1\nnew2\nl2\nl3\n"
    assert out.line_map[:5] == (1, 2, 2, 2, 3)


@given(
    st.binary(min_size=1, max_size=200).filter(lambda b: b"\x00" not in b),
    st.lists(st.tuples(st.integers(0, 199), st.integers(0, 5), st.text(max_size=5)), max_size=6),
)
def test_bytes_outside_edits_are_untouched(raw: bytes, specs: list[tuple[int, int, str]]) -> None:
    data = raw.decode("latin-1").encode("utf-8")
    src = validate_bytes("f.cu", data) if data.strip() else None
    if src is None:
        return
    edits, last_end = [], 0
    for start, length, text in sorted(specs):
        start = max(start, last_end)
        if start > len(data):
            break
        end = min(start + length, len(data))
        edits.append(Edit(start, end, text, f"e{start}"))
        last_end = end + 1
    out = apply_edits(src, edits).data
    pos_in, pos_out = 0, 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        kept = data[pos_in : edit.start]
        assert out[pos_out : pos_out + len(kept)] == kept
        pos_out += len(kept) + len(edit.text.encode())
        pos_in = edit.end
    assert out[pos_out:] == data[pos_in:]


def test_unified_diff_headers_and_empty_when_equal() -> None:
    assert unified_diff("k.cu", b"a\n", b"a\n") == ""
    diff = unified_diff("k.cu", b"a\nb\n", b"a\nc\n")
    assert diff.startswith("--- a/k.cu\n+++ b/k.cu\n") and "-b\n+c\n" in diff


def test_write_atomic_keeps_mode_and_leaves_no_temp(tmp_path) -> None:
    target = tmp_path / "k.cu"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["k.cu"]


def test_write_atomic_failure_keeps_original(tmp_path, monkeypatch) -> None:
    target = tmp_path / "k.cu"
    target.write_bytes(b"original")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_atomic(target, b"partial")
    assert target.read_bytes() == b"original"
    assert os.listdir(tmp_path) == ["k.cu"]


def test_walk_sources_filters_suffixes_and_reports_loops(tmp_path) -> None:
    (tmp_path / "a.cu").write_text("x")
    (tmp_path / "b.py").write_text("x")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "c.cuh").write_text("x")
    os.symlink(tmp_path, sub / "back")  # a loop through a directory link is walked once
    assert [p.name for p in walk_sources([str(tmp_path)])] == ["a.cu", "c.cuh"]
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    with pytest.raises(InputError, match="symlink loop"):
        list(walk_sources([str(loop)]))
    with pytest.raises(InputError, match="no such file"):
        list(walk_sources([str(tmp_path / "nope")]))
