"""Lexical helpers over CUDA source text that need no parse.

Shared by the CPU runtime's source scan and the HIP detection of the build layer.
"""

from __future__ import annotations

__all__ = ["blank_comments_and_strings"]


def blank_comments_and_strings(text: str) -> str:
    """`text` with comments and string/char literals replaced by spaces.

    Offsets and line breaks are kept, so a match in the result is at the same offset and
    line in the original. Literal delimiters stay, so `printf("asm")` scans as `printf("   ")`.
    """
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            _blank(out, i, end)
            i = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            _blank(out, i, end)
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            _blank(out, i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _blank(chars: list[str], start: int, end: int) -> None:
    for k in range(start, end):
        if chars[k] != "\n":
            chars[k] = " "
