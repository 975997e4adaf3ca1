"""The online service example runs, and its racer ends on a configuration that suits the second half."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "perftune" / "examples" / "online"


def test_the_service_example_serves_a_shifting_workload(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        import service
    finally:
        sys.path.remove(str(EXAMPLE))
    service.main(["240", "--size", "400"])
    out = capsys.readouterr().out
    assert "first half: median latency" in out and "240 requests in" in out
    requests = service.workload(4, size=50)
    assert all(service.is_sorted_permutation(r, sorted(r)) for r in requests)
    assert not service.is_sorted_permutation(requests[0], sorted(requests[0])[::-1])
