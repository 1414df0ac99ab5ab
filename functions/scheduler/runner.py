"""The runner's former module, kept for the imports of local mode: the fan-out loop is in
``scheduler.fanout`` and the dispatch pipelines in ``scheduler.dispatch``."""

from __future__ import annotations

from scheduler.dispatch import InProcessDispatch, LambdaDispatch
from scheduler.fanout import FanoutReport, drain_limit, fanout_deadline, run_fanout

# The names local mode imports (``scheduler.local``).
LocalInvoker = InProcessDispatch
LambdaInvoker = LambdaDispatch

__all__ = ["FanoutReport", "LambdaInvoker", "LocalInvoker", "drain_limit", "fanout_deadline", "run_fanout"]
