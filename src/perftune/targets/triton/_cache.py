"""The persistent cache of kernel tuning: one JSON file per (kernel, key values, dtypes, device, Triton).

Each file holds every configuration measured for that key (time or failure with its reason), the
configurations the last search considered, and the chosen one. A process that finds its key there
launches at once; a configuration the file has not seen is measured on its own. Files of the same
kernel, dtypes, device and Triton version share a name prefix, so neighbouring keys (other shapes)
are found by listing the folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftune._atomic import write_text_atomic
from perftune.errors import PerftuneError

__all__ = ["CACHE_ENV_VAR", "FORMAT", "CacheEntry", "KernelCache", "TuningKey", "default_cache_dir"]

CACHE_ENV_VAR = "PERFTUNE_TRITON_CACHE"
FORMAT = 1


def default_cache_dir() -> Path:
    """``$PERFTUNE_TRITON_CACHE``, else ``$XDG_CACHE_HOME/perftune/triton`` (``~/.cache/...``).

    Example:
        >>> import os
        >>> before = os.environ.get("PERFTUNE_TRITON_CACHE")
        >>> os.environ["PERFTUNE_TRITON_CACHE"] = "/tmp/kernels"
        >>> str(default_cache_dir())
        '/tmp/kernels'
        >>> _ = os.environ.pop("PERFTUNE_TRITON_CACHE") if before is None else os.environ.update(
        ...     PERFTUNE_TRITON_CACHE=before)
    """
    explicit = os.environ.get(CACHE_ENV_VAR)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perftune" / "triton"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class TuningKey:
    """What a tuning result is valid for.

    Args:
        kernel: The kernel's name (for people reading the files).
        kernel_hash: Hash of the kernel's source and what it depends on.
        key: The values of the ``key=`` arguments, by name.
        dtypes: The dtypes of the tensor arguments, in order.
        device: The GPU's name (``torch.cuda.get_device_name``), or ``"interpreter"``.
        triton_version: ``triton.__version__``.

    Example:
        >>> k = TuningKey("mm", "abc", {"M": 16}, ("bf16",), "H200", "3.6.0")
        >>> k.file_name().startswith(k.family())
        True
    """

    kernel: str
    kernel_hash: str
    key: Mapping[str, Any]
    dtypes: tuple[str, ...]
    device: str
    triton_version: str

    def family(self) -> str:
        """The part of the file name shared by every key of this kernel on this device and Triton."""
        return _digest([self.kernel_hash, list(self.dtypes), self.device, self.triton_version])

    def file_name(self) -> str:
        return f"{self.family()}-{_digest(sorted(self.key.items()))}.json"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "kernel_hash": self.kernel_hash,
            "key": dict(self.key),
            "dtypes": list(self.dtypes),
            "device": self.device,
            "triton_version": self.triton_version,
        }

    def distance(self, other: Mapping[str, Any]) -> float:
        """Distance to another key's values: the sum of abs(log ratio) of numbers (inf: not comparable)."""
        if set(other) != set(self.key):
            return math.inf
        total = 0.0
        for name, value in self.key.items():
            theirs = other[name]
            if (
                isinstance(value, int | float)
                and isinstance(theirs, int | float)
                and value > 0
                and theirs > 0
            ):
                total += abs(math.log(value / theirs))
            elif value != theirs:
                return math.inf
        return total


@dataclass
class CacheEntry:
    """The results of one key: ``results[config_id] = {"config", "status", "time_ms", "reason"}``.

    ``considered`` lists the configurations the searches have covered (measured or left out by the
    search on purpose); ``best`` is the chosen configuration's id. ``time_ms`` is the search's median;
    the chosen configuration's record adds ``final_ms``, its median in the final interleaved comparison.

    Example:
        >>> key = TuningKey("mm", "abc", {"M": 16}, ("torch.bfloat16",), "NVIDIA H200", "3.6.0")
        >>> entry = CacheEntry(key, {'{"B":1}': {"config": {"B": 1}, "status": "ok", "time_ms": 0.5}})
        >>> entry.ok_times()
        {'{"B":1}': 0.5}
    """

    key: TuningKey
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    considered: set[str] = field(default_factory=set)
    best: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **self.key.to_dict(),
            "best": self.best,
            "considered": sorted(self.considered),
            "results": self.results,
        }

    def ok_times(self) -> dict[str, float]:
        """Measured time of each configuration that ran correctly."""
        return {cid: r["time_ms"] for cid, r in self.results.items() if r.get("status") == "ok"}


class KernelCache:
    """A folder of :class:`CacheEntry` files, safe for several processes at once.

    Example:
        >>> import tempfile
        >>> cache = KernelCache(tempfile.mkdtemp())
        >>> key = TuningKey("mm", "abc", {"M": 16}, ("bf16",), "H200", "3.6.0")
        >>> with cache.update(key) as entry:
        ...     entry.results['{"B":1}'] = {"config": {"B": 1}, "status": "ok", "time_ms": 0.5}
        ...     entry.best = '{"B":1}'
        >>> cache.load(key).best
        '{"B":1}'
    """

    def __init__(self, folder: str | os.PathLike[str] | None = None) -> None:
        self._folder = Path(folder) if folder is not None else None

    @property
    def folder(self) -> Path:
        """The folder; without one given, ``$PERFTUNE_TRITON_CACHE`` as it is now."""
        return self._folder if self._folder is not None else default_cache_dir()

    def _path(self, key: TuningKey) -> Path:
        return self.folder / key.file_name()

    def load(self, key: TuningKey) -> CacheEntry | None:
        """The entry of ``key``, or None when there is none (an unreadable file counts as none)."""
        return self._read(self._path(key), key)

    def _read(self, path: Path, key: TuningKey | None) -> CacheEntry | None:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # a torn or foreign file: tuning again is the safe answer
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            return None
        if key is None:
            key = TuningKey(
                raw["kernel"],
                raw["kernel_hash"],
                dict(raw["key"]),
                tuple(raw["dtypes"]),
                raw["device"],
                raw["triton_version"],
            )
        return CacheEntry(key, dict(raw.get("results", {})), set(raw.get("considered", [])), raw.get("best"))

    @contextlib.contextmanager
    def update(self, key: TuningKey) -> Iterator[CacheEntry]:
        """Read, change and write back the entry of ``key`` under an exclusive lock (atomic rename)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PerftuneError(
                f"{CACHE_ENV_VAR}: cannot create the cache folder {self.folder}: {exc.strerror}"
            ) from None
        path = self._path(key)
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entry = self._read(path, key) or CacheEntry(key)
            yield entry
            write_text_atomic(path, json.dumps(entry.to_dict(), indent=1, sort_keys=True, default=str))

    def neighbours(self, key: TuningKey, n: int = 3) -> Sequence[CacheEntry]:
        """Entries of other keys of the same kernel, dtypes, device and Triton, nearest first."""
        found = []
        for path in self.folder.glob(f"{key.family()}-*.json"):
            if path.name == key.file_name():
                continue
            entry = self._read(path, None)
            if entry is not None and entry.best is not None:
                d = key.distance(entry.key.key)
                if math.isfinite(d):
                    found.append((d, path.name, entry))
        found.sort(key=lambda t: (t[0], t[1]))
        return [e for _, _, e in found[:n]]
