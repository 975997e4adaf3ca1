"""Generated run names such as ``brisk-heron-042``: easy to say, type and tell apart."""

from __future__ import annotations

import random

__all__ = ["generate_run_name"]

_ADJECTIVES = (
    "amber",
    "bold",
    "brave",
    "brisk",
    "calm",
    "clever",
    "crisp",
    "dapper",
    "eager",
    "fair",
    "fleet",
    "gentle",
    "glad",
    "golden",
    "grand",
    "happy",
    "hardy",
    "keen",
    "kind",
    "lively",
    "lucky",
    "mellow",
    "merry",
    "nimble",
    "noble",
    "plucky",
    "proud",
    "quick",
    "quiet",
    "rapid",
    "sharp",
    "shiny",
    "snappy",
    "steady",
    "sunny",
    "swift",
    "tidy",
    "vivid",
    "witty",
    "zesty",
)
_NOUNS = (
    "badger",
    "beaver",
    "bison",
    "condor",
    "cougar",
    "crane",
    "falcon",
    "ferret",
    "finch",
    "gazelle",
    "gecko",
    "heron",
    "ibex",
    "jackal",
    "koala",
    "lemur",
    "lynx",
    "marten",
    "moose",
    "narwhal",
    "ocelot",
    "otter",
    "owl",
    "panda",
    "puffin",
    "quokka",
    "raven",
    "robin",
    "salmon",
    "seal",
    "sparrow",
    "stoat",
    "swan",
    "tapir",
    "tiger",
    "toucan",
    "walrus",
    "wombat",
    "yak",
    "zebra",
)

# Names only need to differ, not to be reproducible: the OS's generator leaves the user's seeded
# randomness untouched and differs between forked processes.
_rng = random.SystemRandom()


def generate_run_name() -> str:
    """A random ``adjective-noun-NNN`` name; the store retries on the rare collision.

    Example:
        >>> len(generate_run_name().split("-"))
        3
    """
    return f"{_rng.choice(_ADJECTIVES)}-{_rng.choice(_NOUNS)}-{_rng.randrange(1000):03d}"
