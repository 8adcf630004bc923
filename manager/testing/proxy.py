"""A TCP proxy between one client and the API server that can cut the path, as a network
partition does: for chaos tests of what a replica does when it cannot reach the server.

:class:`TcpProxy` forwards every connection made to its port to the target address.
:meth:`TcpProxy.block` cuts the path without closing anything: bytes sent either way are
held (a partition drops packets and TCP sends them again later), connections opened
meanwhile are accepted but not connected onwards, a close is held like data.
:meth:`TcpProxy.unblock` delivers everything held, in order, and forwarding resumes — so
a request that was "on the wire" during the partition reaches the server afterwards, the
close of a client that gave up right behind it. That is the case write fencing must be
safe in.

Rules act on chosen requests only, the rest passing as usual (plain HTTP only: the
patterns are matched against the bytes on the wire):

* :meth:`TcpProxy.delay_requests` — a slow path: a request whose bytes match is held for
  a while before it goes on (and what follows it on that connection behind it); if the
  client closes meanwhile, the close is delivered right behind the request, as it would
  arrive — or, with ``close_after``, that many seconds after it (a path that delivers the
  data and the close in two pieces: the server may commit the request in between).
* :meth:`TcpProxy.hold_responses` — a stalled stream: on a connection whose request
  matches (a watch, say), what the server sends back is held from the first chunk that
  matches ``after`` (or at once) until :meth:`Rule.release`; the connection stays open
  and every other connection passes.
* :meth:`TcpProxy.reset_after_answer` — a server (or a load balancer) that dies after
  committing a write and before answering it: the request goes through, the server
  handles it, and its answer is thrown away while the client's connection is reset.

Works in front of any server (the local one or a real API server: TLS passes through
untouched, and rules then match nothing).

Thread-safe: one accept thread (``proxy/<port>/accept``) and two pump threads per
connection, all joined by :meth:`TcpProxy.stop`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import struct
import threading
import time
from types import TracebackType
from typing import Self

__all__ = ["Rule", "TcpProxy"]

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024


class Rule:
    """One rule of a :class:`TcpProxy`: which requests it acts on, and what it does."""

    def __init__(
        self,
        request: bytes,
        *,
        delay: float = 0.0,
        hold_after: bytes | None = None,
        hold: bool = False,
        reset: int = 0,
        close_after: float = 0.0,
    ) -> None:
        self.request = re.compile(request)
        self.delay = delay
        self.close_after = close_after  # seconds between a delayed request and its close
        self.hold = hold
        self.reset = reset  # connections still to reset once answered (reset_after_answer)
        self.hold_after = re.compile(hold_after) if hold_after is not None else None
        self.matched = 0  # requests that matched
        self.holding = threading.Event()  # set once a response stream is being held
        self._released = threading.Event()

    def release(self) -> None:
        """Let everything this rule holds go on, and hold nothing more."""
        self._released.set()

    @property
    def released(self) -> bool:
        return self._released.is_set()


class _Conn:
    """What the rules know of one proxied connection."""

    __slots__ = ("close_after", "held", "request", "reset", "triggered")

    def __init__(self) -> None:
        self.close_after = 0.0  # a delay_requests rule's: the client's close comes this late
        self.held: Rule | None = None  # a hold_responses rule its request matched
        self.reset = False  # a reset_after_answer rule took it: its next answer resets it
        self.triggered = False
        self.request = b""  # the last chunk the client sent (its latest request)


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; can block the path for a while.

    Args:
        target: (host, port) of the server.
        port: the local port to listen on (0: a free one).
    """

    def __init__(self, target: tuple[str, int], *, port: int = 0) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.1)
        self._cond = threading.Condition()
        self._blocked = False
        self._stopping = False
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._accepter: threading.Thread | None = None
        self._count = 0
        self._rules: list[Rule] = []
        self._conns: set[_Conn] = set()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, for a kubeconfig (use https for a TLS target)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        self._accepter = threading.Thread(target=self._accept, name=f"proxy/{self.port}/accept")
        self._accepter.start()
        return self

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def block(self) -> None:
        """Cut the path: nothing passes (and nothing is lost) until :meth:`unblock`."""
        with self._cond:
            self._blocked = True

    def unblock(self) -> None:
        """Deliver what was held, in order, and forward again."""
        with self._cond:
            self._blocked = False
            self._cond.notify_all()

    def delay_requests(self, request: bytes, seconds: float, *, close_after: float = 0.0) -> Rule:
        """Hold every request whose bytes match the regex ``request`` for ``seconds``
        before forwarding it (until the rule is released). A close of the client that
        follows it is delivered ``close_after`` seconds after the request (0: with it)."""
        rule = Rule(request, delay=seconds, close_after=close_after)
        with self._cond:
            self._rules.append(rule)
        return rule

    def hold_responses(self, request: bytes, *, after: bytes | None = None) -> Rule:
        """On connections whose request matches the regex ``request``, hold what the
        server sends from the first chunk matching ``after`` (None: at once) until
        :meth:`Rule.release`."""
        rule = Rule(request, hold=True, hold_after=after)
        with self._cond:
            self._rules.append(rule)
            for conn in self._conns:  # a stream already open (a watch) is held too
                if conn.held is None and rule.request.search(conn.request):
                    rule.matched += 1
                    conn.held = rule
        return rule

    def reset_after_answer(self, request: bytes, *, times: int = 1) -> Rule:
        """The next ``times`` requests whose bytes match the regex ``request`` reach the
        server, which handles them; the first bytes of each answer are thrown away and
        the client's connection is reset (RST) instead, as when the server, or a load
        balancer in front of it, dies between committing a write and answering it.
        ``Rule.matched`` counts the connections reset."""
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times}")
        rule = Rule(request, reset=times)
        with self._cond:
            self._rules.append(rule)
        return rule

    def clear_rules(self) -> None:
        """Release and forget every rule."""
        with self._cond:
            rules, self._rules = self._rules, []
        for rule in rules:
            rule.release()

    @property
    def blocked(self) -> bool:
        with self._cond:
            return self._blocked

    def stop(self) -> None:
        """Close every connection and the listener; join every thread."""
        with self._cond:
            self._stopping = True
            self._blocked = False
            self._cond.notify_all()
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._accepter is not None:
            self._accepter.join(5)
        with contextlib.suppress(OSError):
            self._listener.close()
        for t in list(self._threads):
            t.join(5)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    # -- internals ------------------------------------------------------------------------

    def _pass(self) -> bool:
        """Wait while blocked; False once stopping."""
        with self._cond:
            while self._blocked and not self._stopping:
                self._cond.wait(0.5)
            return not self._stopping

    def _accept(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._count += 1
            t = threading.Thread(
                target=self._connect,
                args=(client,),
                name=f"proxy/{self.port}/conn-{self._count}",
            )
            self._threads.append(t)
            t.start()

    def _connect(self, client: socket.socket) -> None:
        with self._cond:
            self._sockets.add(client)
        upstream: socket.socket | None = None
        try:
            if not self._pass():  # a partition: the connection does not go through yet
                return
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                return  # refused (the server is down): the client sees its connection close
            upstream.settimeout(None)
            with self._cond:
                self._sockets.add(upstream)
            conn = _Conn()
            with self._cond:
                self._conns.add(conn)
            back = threading.Thread(
                target=self._pump,
                args=(upstream, client, conn, False),
                name=f"{threading.current_thread().name}/back",
            )
            back.start()
            self._pump(client, upstream, conn, True)
            back.join()
            with self._cond:
                self._conns.discard(conn)
        finally:
            for sock in (client, upstream):
                if sock is None:
                    continue
                with self._cond:
                    self._sockets.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()

    def _rules_wait(self, data: bytes, conn: _Conn, up: bool) -> bool:
        """Apply the rules to a chunk about to be forwarded; False once stopping."""
        with self._cond:
            rules = list(self._rules)
        if up:
            conn.request = data[:4096]
            for rule in rules:
                if rule.released or not rule.request.search(data):
                    continue
                if rule.reset:
                    with self._cond:
                        if rule.reset <= 0:
                            continue
                        rule.reset -= 1
                        rule.matched += 1
                        conn.reset = True
                    continue
                rule.matched += 1
                if rule.hold:
                    conn.held = rule
                elif rule.delay > 0:
                    conn.close_after = max(conn.close_after, rule.close_after)
                    deadline = time.monotonic() + rule.delay
                    while not rule._released.wait(min(0.05, max(deadline - time.monotonic(), 0))):
                        if time.monotonic() >= deadline or self._stopping:
                            break
            return not self._stopping
        if conn.reset:
            return False  # the answer is dropped; _pump resets the client
        held = conn.held
        if held is None or held.released:
            return True
        if not conn.triggered and held.hold_after is not None and not held.hold_after.search(data):
            return True
        conn.triggered = True
        held.holding.set()
        while not held._released.wait(0.05):
            if self._stopping:
                return False
        return True

    def _pump(self, src: socket.socket, dst: socket.socket, conn: _Conn, up: bool) -> None:
        while True:
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = b""
            if data and not self._rules_wait(data, conn, up):
                if conn.reset and not up:
                    _reset(dst)  # dst is the client: it sees its connection reset
                    with contextlib.suppress(OSError):
                        src.shutdown(socket.SHUT_RDWR)
                return
            if not self._pass():
                return
            closed = not data or _eof_waiting(src)  # a close held during a partition
            try:
                if closed and data and up and conn.close_after > 0:
                    dst.sendall(data)  # the data now, the close a little later
                    time.sleep(conn.close_after)
                    data = b""
                if closed and data and hasattr(socket, "TCP_CORK"):
                    # The close travels in the data's last segment, as one held through a
                    # partition arrives once it heals: the server sees both at once.
                    dst.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
                if data:
                    dst.sendall(data)
                if closed:
                    dst.shutdown(socket.SHUT_WR)  # the close, held and delivered like data
                    return
            except OSError:
                with contextlib.suppress(OSError):
                    src.shutdown(socket.SHUT_RD)
                return


def _reset(sock: socket.socket) -> None:
    """Abort a connection: its close (by ``_connect``, once both pumps end) sends an RST
    instead of a FIN (SO_LINGER 0); the pump reading it is woken now (a shutdown of the
    read side sends nothing to the peer)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)


def _eof_waiting(sock: socket.socket) -> bool:
    """Whether the peer's close is already waiting behind the data read so far."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
