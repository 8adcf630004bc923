"""API access: one HTTP client per manager, raw JSON in and out, mapped errors, retries.

One module per concern, as client-go keeps ``rest/``, ``tools/clientcmd/`` and
``tools/watch/`` apart:

=====================  =================================================================
``rest``               :class:`KubeClient` and :class:`ClientOptions`: the requests
``retry``              when a request may go again, and the wait before it
``request``            what a request is made of: bodies, paths, queries
``answers``            what an answer means: decoded objects, mapped errors
``wire``               HTTP/1.1 on a socket: sending whole, a minimal answer parser,
                       connections that ask the write fence before each piece
``session``            :class:`WriteSession`: many writes on one held connection, pipelined
``watch``              :class:`WatchStream`: a watch's decoded events
``kubeconfig``         where the server is and how to authenticate (clientcmd, in-cluster)
=====================  =================================================================


The concept is client-go's ``rest`` package (``RESTClient``, ``Request``, ``with_retry.go``,
the ``rest_client_*`` metrics) together with its ``dynamic`` client: requests address a
:class:`~manager.resources.Resource` plus namespace and name, and objects are plain
``dict`` values decoded with ``orjson`` from the response bytes. No model classes of the
official client are ever built, and the ``kubernetes`` package is not imported at all
(its import alone costs a replica about 20 MiB): where the server is and how to
authenticate come from :mod:`manager.client.kubeconfig`, connections from urllib3.

Contract:

* Every non-2xx answer raises the narrowest :class:`~manager.errors.ApiError` subclass
  (``NotFound``, ``AlreadyExists``, ``Conflict``, ``Invalid``, ...), built from the
  ``Status`` body when there is one. A server that cannot be reached (refused, reset,
  timed out, TLS failure) raises :class:`~manager.errors.Unavailable` with ``status=0``
  and the host in the message.
* Retries happen here and nowhere else below the workqueue, by client-go's rules
  (``rest/with_retry.go``, ``net/http``'s ``shouldRetryRequest``) made exact for writes:

  - a request that never reached the server is sent again, whatever its verb: a
    connection that could not be opened, or one found closed before the first byte of
    the request went out (a kept-alive connection the server had closed while idle);
  - a 429, or a 5xx that carries ``Retry-After``, is retried for every verb: the server
    says it did not do it, and when to come back (client-go's ``checkWait``);
  - anything else that went wrong after bytes of the request may have reached the
    server (a connection reset or closed before the answer, an answer that timed out, a
    5xx without ``Retry-After``) is retried only when a replay cannot apply the request
    twice (:func:`is_replayable`): a GET; a PUT or PATCH carrying a resourceVersion
    precondition (``metadata.resourceVersion``, or a JSON patch that tests it); a DELETE
    with a uid or resourceVersion precondition. A replay the server had already applied
    then fails that precondition (409, 404): never applied twice. A create, a blind
    update or patch, a blind delete are never sent again: they raise
    :class:`~manager.errors.OutcomeUnknown` (the server may or may not have applied
    them; the reconcile is requeued and reads what happened).

  ``Retry-After`` is honoured; otherwise the wait is exponential with jitter. Attempts
  are bounded by ``ClientOptions.max_retries`` and each wait by ``retry_max_wait``.
* Every attempt passes the client-side :class:`~manager.flowcontrol.TokenBucket` first
  (``qps``/``burst``), shared by all requests of one client; a watch counts once, when it
  connects.
* Writes (POST, PUT, PATCH, DELETE) of a client with a fence (:meth:`KubeClient.with_fence`,
  the manager's client) ask the fence that applies (:mod:`manager.fencing`) before the
  rate limiter and again in the HTTP connection right before the first byte is sent; a
  closed fence raises :class:`~manager.errors.WriteFenced` and nothing is sent. The
  permission's remaining seconds cap the write's timeout.
* Between retries the client waits with ``retry_sleep``; :class:`StopAwareSleep` is the one
  a stopping process wants (Retry-After honoured within the shutdown budget). A wait that
  raises :class:`RetryAbandoned` ends the retries with the error being retried.
* A watch is a :class:`WatchStream` of decoded events. It ends cleanly when the server
  closes the stream (``timeoutSeconds`` elapsed) or when :meth:`WatchStream.close` is
  called. A read timeout (no byte for ``read_timeout`` seconds, i.e. a dead connection)
  or a connection broken mid-stream raises :class:`~manager.errors.Unavailable`
  (``status=0``). Either way the caller re-watches from its last resourceVersion.
  ``ERROR`` events (such as the 410 ``Expired`` a real API server sends for a too old
  resourceVersion) are passed through as events; interpreting them is the reflector's job.

Thread-safety: a :class:`KubeClient` is meant to be shared by every informer and worker
of a manager (the urllib3 pool is sized by ``ClientOptions.pool_size``). A
:class:`WatchStream` is iterated by one thread; :meth:`WatchStream.close` may be called
from any thread and unblocks a read in progress.
"""

from __future__ import annotations

from manager.client.request import JsonDict, PatchType
from manager.client.rest import REQUEST_DURATION, REQUESTS_TOTAL, ClientOptions, KubeClient
from manager.client.retry import RetryAbandoned, StopAwareSleep
from manager.client.session import Write, WriteSession
from manager.client.watch import WatchStream

__all__ = [
    "REQUESTS_TOTAL",
    "REQUEST_DURATION",
    "ClientOptions",
    "JsonDict",
    "KubeClient",
    "PatchType",
    "RetryAbandoned",
    "StopAwareSleep",
    "WatchStream",
    "Write",
    "WriteSession",
]
