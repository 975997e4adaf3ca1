"""perftune.torch without PyTorch installed: importing works, using it says which extra to install."""

from __future__ import annotations

import sys

import pytest

from perftune.errors import PerftuneError


def _hide_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "torch"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)  # its import now fails as when it is not installed


def test_without_torch_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_torch(monkeypatch)
    import perftune.torch

    expected = r"^perftune.torch needs PyTorch: pip install 'perftune\[torch\]'"
    for call in (lambda: perftune.torch.tune_compile(print, (1,), budget=2),
                 lambda: perftune.torch.compile_space("cpu"),
                 lambda: perftune.torch.mode_options("default", "cpu")):
        with pytest.raises(PerftuneError, match=expected):
            call()


def test_without_torch_placement_sites_run_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_torch(monkeypatch)
    from perftune.choice import DEVICES_ENV_VAR, ChoicesFile, DeviceSite, available_devices, use_choices

    monkeypatch.setenv(DEVICES_ENV_VAR, "cpu,cuda")  # asks for cuda: without torch there is none
    _ = use_choices(ChoicesFile())
    assert available_devices() == frozenset({"cpu"})
    site = DeviceSite("t-extra-place", {"gpu": sorted, "cpu": sorted}, devices={"gpu": "cuda"})
    assert site.default == "cpu" and site([2, 1]) == [1, 2]
