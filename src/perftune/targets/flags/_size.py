"""The size of a built program's machine code: what ``--goal time,size`` minimises.

The size is the sum of the ELF sections that hold executable code (``SHF_EXECINSTR``: ``.text``,
``.init``, ``.plt``, ...), read from the section headers without any tool: the symbol table, debug
information and alignment padding of the file do not count, so that the metric moves with what the
flags change. A file that is not ELF (another platform) counts its whole size.

Example:
    >>> import os, tempfile
    >>> with tempfile.NamedTemporaryFile(delete=False) as fh:
    ...     _ = fh.write(b"not an ELF file")
    >>> code_size(fh.name)
    15
    >>> os.unlink(fh.name)
"""

from __future__ import annotations

import os
import struct

__all__ = ["code_size"]

_SHF_EXECINSTR = 0x4


def code_size(path: str | os.PathLike[str]) -> int:
    """Bytes of executable code in the binary at ``path`` (its file size when it is not ELF)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 64 or data[:4] != b"\x7fELF":
        return len(data)
    is64 = data[4] == 2
    endian = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(endian + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(endian + "HH", data, 0x3A)
        flags_fmt, flags_at, size_fmt, size_at = "Q", 8, "Q", 32
    else:
        shoff, = struct.unpack_from(endian + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(endian + "HH", data, 0x2E)
        flags_fmt, flags_at, size_fmt, size_at = "I", 8, "I", 20
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data):
        return len(data)
    total = 0
    for i in range(shnum):
        base = shoff + i * shentsize
        flags, = struct.unpack_from(endian + flags_fmt, data, base + flags_at)
        if flags & _SHF_EXECINSTR:
            size, = struct.unpack_from(endian + size_fmt, data, base + size_at)
            total += size
    return total
