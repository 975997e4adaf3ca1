"""Reading a small JSON file that someone else may have written: a tuned-choices or dispatcher file.

Only a regular file is read (a FIFO or ``/dev/zero`` is refused before a byte is read), at most
:data:`MAX_FILE_BYTES`, strictly UTF-8, and nested at most :data:`MAX_NESTING` deep; every refusal is
one line of the caller's error class naming the file. It imports nothing of perftune (the caller gives
its error class), so that any layer may use it.

Example:
    >>> read_json_file("/nowhere/x.json", "dispatcher", ValueError)
    Traceback (most recent call last):
    ...
    ValueError: /nowhere/x.json: dispatcher file not found
"""

from __future__ import annotations

import gzip
import json
import math
import os
import stat
import zlib
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_INPUT_MAX_MB", "INPUT_LIMIT_ENV", "MAX_FILE_BYTES", "MAX_NESTING", "input_limit_bytes",
           "read_input_text", "read_json_file", "shown"]

INPUT_LIMIT_ENV = "PERFTUNE_INPUT_MAX_MB"
"""Environment variable: the most MiB a T1, T4, Kernel Tuner or warm-start file may hold (decompressed)."""
DEFAULT_INPUT_MAX_MB = 512
_MiB = 1024 * 1024

#: The largest tuned-choices (or dispatcher) file read, in bytes: a larger one is corrupt, not read.
MAX_FILE_BYTES = 8 << 20
#: The deepest nesting of JSON arrays and objects such a file may have (a real one has about ten).
MAX_NESTING = 64

def _read_bytes(p: Path, what: str, error: type[Exception], max_bytes: int) -> bytes:
    """At most ``max_bytes`` of the regular file ``p``; raises ``error`` (one line) otherwise.

    The file is opened without blocking (a FIFO with no writer would block ``open``), and anything but
    a regular file (a FIFO, ``/dev/zero``, a folder) is refused before a byte is read.
    """
    flags = os.O_RDONLY
    for name in ("O_NONBLOCK", "O_NOCTTY", "O_BINARY"):  # not every system has each
        flags |= getattr(os, name, 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise error(f"{p}: {what} file not found") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise error(f"{p}: cannot read {what} file: {getattr(e, 'strerror', None) or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, a device ...)"
            raise error(f"{p}: {what} file is {kind}")
        if info.st_size > max_bytes:
            raise error(f"{p}: {what} file is larger than the {max_bytes >> 20} MB perftune reads")
        chunks: list[bytes] = []
        n = 0
        while n <= max_bytes:  # the size may lie (it grew since, or a /proc file): never read more
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - n))
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
        if n > max_bytes:
            raise error(f"{p}: {what} file is larger than the {max_bytes >> 20} MB perftune reads")
        return b"".join(chunks)
    except OSError as e:
        raise error(f"{p}: cannot read {what} file: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _nesting_deeper_than(doc: Any, limit: int) -> bool:
    """Whether JSON arrays and objects in ``doc`` nest more than ``limit`` deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(doc, 1)] if isinstance(doc, dict | list) else []
    while stack:
        value, depth = stack.pop()
        items = value.values() if isinstance(value, dict) else value
        if depth > limit:
            return True
        stack.extend((v, depth + 1) for v in items if isinstance(v, dict | list))
    return False


def read_json_file(
    path: str | os.PathLike[str],
    what: str,
    error: type[Exception],
    *,
    max_bytes: int = MAX_FILE_BYTES,
    max_nesting: int = MAX_NESTING,
) -> Any:
    """The JSON document in ``path``, read defensively; raises ``error`` with one line naming the file.

    Refused: a missing file, anything but a regular file, more than ``max_bytes``, bytes that are not
    UTF-8 (a byte-order mark included), text that is not JSON, and arrays or objects nested more than
    ``max_nesting`` deep. ``NaN`` and ``Infinity`` are parsed: the caller validates the values.

    Example:
        >>> read_json_file("/nowhere/x.json", "tuned-choices", ValueError)
        Traceback (most recent call last):
        ...
        ValueError: /nowhere/x.json: tuned-choices file not found
    """
    p = Path(path)
    data = _read_bytes(p, what, error, max_bytes)
    if data.startswith(b"\xef\xbb\xbf"):
        raise error(f"{p}: {what} file starts with a byte-order mark (JSON is UTF-8 without one)")
    try:
        text = data.decode("utf-8")  # strict: a byte that is not UTF-8 makes the file corrupt
    except UnicodeDecodeError as e:
        bad = f"byte 0x{data[e.start]:02x} at offset {e.start}"
        raise error(f"{p}: {what} file is not UTF-8 text ({bad})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise error(f"{p}: {what} file nests arrays or objects more than {max_nesting} deep") from None
    except (ValueError, MemoryError) as e:  # an integer of more digits than Python converts
        raise error(f"{p}: not valid JSON: {e}") from None
    if _nesting_deeper_than(doc, max_nesting):
        raise error(f"{p}: {what} file nests arrays or objects more than {max_nesting} deep")
    return doc


def input_limit_bytes(error: type[Exception]) -> int:
    """The most bytes an input file may hold once decompressed: ``$PERFTUNE_INPUT_MAX_MB`` (512) MiB.

    Files received from others (T1/T4 files, Kernel Tuner caches, warm-start files) are read through
    this cap: a 600 KB gzip file can expand to gigabytes. A bad value of the variable raises ``error``.
    """
    text = os.environ.get(INPUT_LIMIT_ENV, str(DEFAULT_INPUT_MAX_MB))
    try:
        mb = float(text)
    except ValueError:
        mb = math.nan
    if not (mb > 0 and math.isfinite(mb)):
        raise error(f"{INPUT_LIMIT_ENV}: expected a positive number of MiB, got {text!r}")
    return int(mb * _MiB)


def read_input_text(path: str | os.PathLike[str], what: str, error: type[Exception]) -> str:
    """The UTF-8 text of a file, gunzipped when its name ends in ``.gz``, read through a size cap.

    The file is read in chunks and refused as soon as it holds more than :func:`input_limit_bytes`
    (decompressed), so a gzip bomb never gets into memory.

    Raises:
        error: the file is missing, not a regular file, unreadable, not UTF-8, or larger than the cap
            (one line naming the file, and the cap and how to raise it).
    """
    p = Path(path)
    limit = input_limit_bytes(error)
    packed = p.name.endswith(".gz")
    too_large = error(
        f"{p}: {what} file is larger than {limit / _MiB:g} MiB{' once decompressed' if packed else ''}; "
        f"set {INPUT_LIMIT_ENV} to read larger files"
    )
    try:
        info = os.stat(p)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, /dev/zero never ends
            raise error(f"{p}: {what} file is not a regular file")
        if info.st_size > limit:
            raise too_large
        data = bytearray()
        with gzip.open(p, "rb") if packed else open(p, "rb") as f:
            while chunk := f.read(min(_MiB, limit + 1 - len(data))):
                data += chunk
                if len(data) > limit:
                    raise too_large
    except FileNotFoundError:
        raise error(f"{p}: {what} file not found") from None
    except (OSError, EOFError, zlib.error) as e:
        raise error(f"{p}: cannot read the {what} file ({e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{p}: not a valid {what} JSON file ({e})") from None


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to about ``limit`` characters: a value from such a file in a one-line message."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than Python prints
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
