"""Safe online tuning: tune a long-running program while it serves requests.

* :class:`Racer` (SiblingRivalry, CGO 2012) runs every request twice in parallel, on two halves of
  the machine: the safe configuration against a candidate of the search. The first correct answer
  returns, the loser is killed. Requests never wait for a candidate; the cost is twice the hardware.
* :class:`Explorer` is for programs that cannot run twice: it tries a candidate on a bounded fraction
  of the requests, with a regression guard that kills a candidate slower than the safe configuration
  by more than a stated factor and answers with the safe one.
* A candidate becomes safe only after a sequential sign test on its wins (:class:`PromotionRule`);
  a wrong or failing one never does. A :class:`ShiftDetector` re-opens exploration when the safe
  configuration's latency shifts (new inputs, a loaded machine).

See docs/online.md.

Example:
    >>> from perftune.online import PromotionRule
    >>> PromotionRule(confidence=0.95, max_races=20).min_wins
    9
"""

from __future__ import annotations

from perftune.online._core import Promotion, RequestError, RequestRecord
from perftune.online._explorer import Explorer
from perftune.online._promotion import PromotionRule
from perftune.online._racer import Racer
from perftune.online._shift import ShiftDetector
from perftune.online._split import Side, Split

__all__ = [
    "Explorer",
    "Promotion",
    "PromotionRule",
    "Racer",
    "RequestError",
    "RequestRecord",
    "ShiftDetector",
    "Side",
    "Split",
]
