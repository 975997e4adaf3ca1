"""The README's copies of shipped files say what the shipped files say."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_the_readme_task_file_is_the_shipped_c_matmul_example():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", readme, flags=re.DOTALL)
    [shown] = [b for b in blocks if 'name = "c_matmul"' in b]
    shipped = (ROOT / "src" / "perftune" / "examples" / "c_matmul" / "task.toml").read_text()
    assert tomllib.loads(shown) == tomllib.loads(shipped)
