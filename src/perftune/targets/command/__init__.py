"""Tune any program from a TOML task file: ``perftune run task.toml``.

A task file declares the space, an optional build step and a run step (argument-vector templates),
the objective, the correctness check and how to measure. Every step of every candidate runs
sandboxed (see :mod:`perftune.measure`) in the candidate's scratch directory.

Schema (names are stable)::

    name = "matmul"                     # run name (default: the file's directory)
    inputs = ["data/input.txt"]         # {input} is the first; paths relative to the task file
    env = { OMP_NUM_THREADS = "1" }     # for every step (values are templates)
    cwd = "{scratch}"                   # working directory of the steps (default: the scratch dir)
    constraints = ["block * unroll <= 1024"]

    [space]                             # one entry per parameter: type + constructor arguments
    block  = { type = "pow2", min = 16, max = 512, default = 64 }   # min/max = lo/hi
    unroll = { type = "int", min = 1, max = 8 }
    order  = { type = "choice", options = ["ijk", "ikj", "jik"] }
    fast   = { type = "bool", on = "-ffast-math", off = "" }        # rendering of true / false
    passes = { type = "permutation", items = ["a", "b", "c"], sep = "," }
    n      = { type = "int", fidelity = [1000, 10000, 100000] }  # not searched: ASHA promotes each
                                        # candidate up the levels, the last is the full evaluation
                                        # (docs/fidelity.md); optional eta = 3

    [build]                             # optional
    command = ["gcc", "-O2", "{fast}", "-DBLOCK={block}", "{task_dir}/mm.c", "-o", "{scratch}/mm"]
    timeout_s = 120                     # also: env, cwd, shell = true (then command may be a string)

    [run]
    command = ["{scratch}/mm", "{input}"]
    timeout_s = 30                      # upper bound; for a time metric also timeout_factor x best time
    stdin = "{input}"                   # optional

    [objective]
    metric = "wall_time"   # wall_time | cpu_time | max_rss (KiB) | file_size | stdout_regex | stdout_json
    pattern = 'GFLOPS: ([0-9.]+)'       # stdout_regex: the first group of the last match
    key = "result.gflops"               # stdout_json: the last JSON line holding this (dotted) key
    file = "{scratch}/out.bin"          # file_size
    goal = "min"                        # min | max
    deterministic = "auto"              # true: one run per configuration; false: the sequential
                                        # test always; "auto": clock metrics get the test, file_size
                                        # one run, a stdout value one run when the default printed
                                        # the same value twice

    [check]                             # compare with the default configuration's output, every run
    stdout = "exact"                    # exact | numeric | none
    files = ["{scratch}/out.txt"]
    rtol = 1e-6                         # numeric tolerance (implies numeric comparison)
    atol = 0.0
    ignore = "^time:"                   # lines matching this regex are not compared

    [check.expensive]                   # risk-ranked, within budget; the potential winner always
    budget = 0.1                        # fraction of candidates
    build = ["gcc", "-fsanitize=address", "-DBLOCK={block}", "{task_dir}/mm.c", "-o", "{scratch}/mm"]
    inputs = ["data/other.txt"]         # extra inputs, compared with the default's output on them
    repeats = 2                         # extra runs that must print the same output

    [timing]
    min_runs = 3                        # sequential test vs the incumbent
    max_runs = 30
    warmup_runs = 1
    tie = 0.01                          # "the same" within 1% (0 <= tie < 1)
    confidence = 0.95
    futility_confidence = 0.8           # optional: stop hopeless candidates sooner
    repeats = 5                         # instead: exactly this many runs
    timeout_factor = 3.0                # adaptive run limit = 3 x the incumbent's time (default: 3 for
                                        # wall_time/cpu_time to minimise, none for other metrics) ...
    min_timeout_s = 1.0                 # ... but at least this
    pin_cpus = [1]                      # cores this process may use (os.sched_getaffinity)

    [sandbox]
    memory_mb = 2048                    # per step (sanitizer builds get 4x)
    processes = 256
    disk_mb = 1024                      # the scratch directory
    network = false                     # true lets candidates reach the network
    keep_scratch = false

    [tuning]
    budget = 100                        # or "10m", or { evals = 100, seconds = 600 }
    seed = 1
    workers = 1                         # at most 1024
    seeds = [{ block = 64, unroll = 4, order = "ikj", fast = false, passes = ["b", "a", "c"] }]
                                        # every active parameter: defaults are not filled in

Every number and boolean is checked at load time (type, finite, range: ``timeout_s > 0``,
``repeats >= 1``, ``rtol >= 0``, ...), each mistake one line naming the file, key and line; an
unknown key lists the allowed ones and suggests a near one. The file itself must be a regular file
of at most 1 MiB of UTF-8 text (no byte-order mark); an ``env`` value is a string (a number is
written as typed, a boolean is refused); a ``cwd`` without placeholders (or only ``{task_dir}``) must
exist, and a program named by path must be executable, before anything runs. A value
printed as ``nan``, ``inf`` or ``-inf`` is a failed trial ("objective value -inf is not finite").

Placeholders: ``{param}`` for every parameter (an inactive one renders empty), ``{scratch}``,
``{input}``, ``{task_dir}``; ``{{``/``}}`` are literal braces. An argument that renders empty is
dropped. Steps run in ``{scratch}`` unless ``cwd`` says otherwise; a relative ``[check] files`` entry or
``[objective] file`` is relative to the run step's working directory, and a relative program
(``./prog``) is the one in the step's working directory when it is there, else the task folder's.
There is no shell unless ``shell = true``. With it, the command is shell code and every substituted
value is quoted as one shell word (``shlex.quote``; an empty value stays empty): a value cannot inject
commands, and cannot be several words either (do not quote placeholders yourself).
What ``shell`` gives up is the argument vector's guarantee that the command is only what is written:
globbing, variables and redirections of the command line itself apply.

``network = false`` (the default) runs candidates without a network; only ``network = true`` gives
them one. Run as root from a private directory, the task directory (and any input outside it) is
staged once per run as a read-only copy the candidates' users can read, and ``{task_dir}`` and
``{input}`` name that copy (see ``perftune doctor``).

Example:
    >>> from perftune.targets.command import load_task
    >>> task = load_task("examples/python_metric/task.toml")  # doctest: +SKIP
    >>> import perftune
    >>> result = perftune.tune(task.objective, task.space, budget=20, goal=task.goal,
    ...                        metric=task.metric)  # doctest: +SKIP
"""

from __future__ import annotations

from perftune.targets.command._objective import CandidateError, CommandObjective, TimingOptions
from perftune.targets.command._task import Task, load_task

__all__ = ["CandidateError", "CommandObjective", "Task", "TimingOptions", "load_task"]
