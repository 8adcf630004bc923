"""Work queues and rate limiters: a port of client-go ``util/workqueue``.

* :mod:`~manager.workqueue.queue`: :class:`Queue`, a de-duplicating FIFO that never
  hands one item to two workers at once (``queue.go``);
* :mod:`~manager.workqueue.delaying`: :class:`DelayingQueue`, plus ``add_after``
  (``delaying_queue.go``);
* :mod:`~manager.workqueue.rate_limiting`: :class:`RateLimitingQueue`, plus
  ``add_rate_limited``/``forget``/``num_requeues`` (``rate_limiting_queue.go``);
* :mod:`~manager.workqueue.limiters`: the rate limiters (``default_rate_limiters.go``);
* :mod:`~manager.workqueue.metrics`: the ``workqueue_*`` Prometheus metrics
  (``metrics.go``).

Constructors return the Protocol types. Everything here is safe to share between
threads.
"""

from __future__ import annotations

from manager.workqueue.delaying import DelayingQueue, new_delaying_queue
from manager.workqueue.limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from manager.workqueue.queue import Queue, new_queue
from manager.workqueue.rate_limiting import RateLimitingQueue, new_rate_limiting_queue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "new_delaying_queue",
    "new_queue",
    "new_rate_limiting_queue",
]
