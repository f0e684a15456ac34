"""In-source markers: `// kxform: off` leaves a kernel alone.

Like `# fmt: off` or `// clang-format off`, the marker sits where the code is: on the
line before the kernel's definition (within the comment lines and `template <...>`
line directly above it) or anywhere inside its body. A kernel is then reported as
missed (`DisabledInSource`, with the marker's line) by every pass, and never rewritten.
"""

from __future__ import annotations

import re

from kxform.frontend.model import Function
from kxform.frontend.source import SourceText

_MARKER = re.compile(rb"(?://|/\*)[ \t]*kxform:[ \t]*off\b")
_ABOVE = re.compile(rb"^[ \t]*(?://|/\*|\*|template\b)")


def disabled_at(source: SourceText, kernel: Function) -> int | None:
    """The byte offset of the `kxform: off` marker that disables `kernel`, or None."""
    data = source.data
    inside = _MARKER.search(data, kernel.span.start, kernel.span.end)
    if inside is not None:
        return inside.start()
    end = data.rfind(b"\n", 0, kernel.span.start)  # the newline ending the line above
    while end > 0:
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end]
        if not _ABOVE.match(line):
            return None
        found = _MARKER.search(line)
        if found is not None:
            return start + found.start()
        end = start - 1
    return None
