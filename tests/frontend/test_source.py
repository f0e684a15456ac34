from __future__ import annotations

import os

import pytest

from kxform.errors import InputError
from kxform.frontend.source import MAX_SOURCE_BYTES, read_source, validate_bytes


def test_line_col_counts_bytes_and_crlf() -> None:
    src = validate_bytes("a.cu", "x\r\n// é\r\nyz".encode())
    assert src.line_col(0) == (1, 1)
    assert src.line_col(3) == (2, 1)
    assert src.line_col(len("x\r\n// é\r\n".encode()) + 1) == (3, 2)
    assert src.newline == "\r\n"
    assert validate_bytes("b.cu", b"a\nb\n").newline == "\n"


@pytest.mark.parametrize(
    ("data", "cause", "line"),
    [
        (b"", "file is empty", 0),
        (b"  \n\t\n", "file is empty", 0),
        (b"int x;\nint\x00y;", "binary file", 2),
        (b"int x;\n// caf\xe9\n", "not valid UTF-8", 2),
    ],
)
def test_bad_bytes_are_one_line_errors_with_location(data: bytes, cause: str, line: int) -> None:
    with pytest.raises(InputError) as info:
        validate_bytes("k.cu", data)
    message = str(info.value)
    assert cause in message and "\n" not in message
    assert message.startswith("k.cu" + (f":{line}:" if line else ":"))


def test_oversized_file_refused_before_reading(tmp_path) -> None:
    big = tmp_path / "big.cu"
    with open(big, "wb") as handle:
        handle.truncate(MAX_SOURCE_BYTES + 1)
    with pytest.raises(InputError, match="MiB limit"):
        read_source(big)


def test_os_errors_become_input_errors(tmp_path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_source(tmp_path / "missing.cu")
    with pytest.raises(InputError, match="is a directory"):
        read_source(tmp_path)
    locked = tmp_path / "locked.cu"
    locked.write_text("__global__ void k() {}\n")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root can read anything
        pytest.skip("running as root: permissions are not enforced")
    with pytest.raises(InputError, match="permission denied"):
        read_source(locked)
