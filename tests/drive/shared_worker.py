"""One worker of a shared run, as the shared-run tests start it (run as a script).

Usage: python shared_worker.py STORE_URL RUN OUTDIR SLEEP_S BUDGET [SEED]

Attaches to RUN (creating it on SPACE with BUDGET trials when it does not exist: the processes race for
that) and works until the run is over. The objective leaves a trace of every execution in OUTDIR:
``start-KEY-PID`` when it starts, and ``done-KEY`` (O_EXCL) when it finishes, so that a configuration
measured to the end twice cannot go unnoticed (``twice-KEY-PID``). The summary goes to
``summary-PID.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from perftune import Tuner
from perftune.space import Int, Space

SPACE = Space({"x": Int(0, 99, default=50), "y": Int(0, 99, default=50)})


def key_of(config) -> str:
    return f"{config['x']}_{config['y']}"


def value_of(config) -> float:
    return float((config["x"] - 30) ** 2 + (config["y"] - 70) ** 2)


def main() -> None:
    url, run, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    sleep_s, budget = float(sys.argv[4]), int(sys.argv[5])
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else None
    pid = os.getpid()

    def objective(config) -> float:
        key = key_of(config)
        (out / f"start-{key}-{pid}").write_text(str(time.time()))
        time.sleep(sleep_s)
        try:
            os.close(os.open(out / f"done-{key}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            (out / f"twice-{key}-{pid}").write_text("")
        return value_of(config)

    worker = Tuner.attach(run, store=url, space=SPACE, budget=budget, heartbeat_s=0.2, timeout_s=3.0,
                          seed=seed)
    summary = worker.work(objective)
    (out / f"summary-{pid}.json").write_text(json.dumps({
        "n_measured": summary.n_measured, "n_reissued": summary.n_reissued,
        "n_discarded": summary.n_discarded, "proposed": summary.proposed, "stop_reason": summary.stop_reason,
    }))


if __name__ == "__main__":
    main()
