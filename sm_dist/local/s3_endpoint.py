"""A local S3 endpoint: moto's server on 127.0.0.1, optionally behind a fault-injecting proxy.

Local mode points AWS_ENDPOINT_URL at :attr:`S3Endpoint.url` so the S3 checkpoint storage talks
real HTTP to it; ``--chaos s3-faults`` and the checkpoint tests switch faults on and off while
a run goes on — from this process (:meth:`S3Endpoint.set_faults`) or from any other one
(:func:`set_faults` with the URL: a POST to the proxy's control path). Faults:

* ``"500"`` — 500 InternalError; ``"503"`` — 503 SlowDown (S3's throttling answer);
* ``"drop"`` — the request is read and the connection closed without any response;

each for the next ``count`` requests or for ``seconds`` (both: whichever ends first), optionally
only for some HTTP methods (e.g. PUT and POST: uploads fail, reads work). Standard
library + moto only; listens on loopback only; bounded threads, bodies and timeouts.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sm_dist.errors import ConfigError, MissingDependencyError

_log = logging.getLogger(__name__)

#: Path on the proxy that controls faults (never forwarded to moto).
CONTROL_PATH = "/__sm_dist_faults__"
FAULT_KINDS = ("500", "503", "drop")
_LOOPBACK = "127.0.0.1"
#: Largest request body the proxy buffers (a checkpoint part is 8 MiB; S3's max part is 5 GiB
#: but nothing local needs that).
MAX_BODY_BYTES = 512 << 20
#: Requests handled at once; more wait (keeps a runaway client from spawning unbounded threads).
MAX_CONCURRENT = 64
#: Seconds a proxied socket may stay idle before it is closed.
SOCKET_TIMEOUT_S = 120
#: How often the proxy's loop looks for a stop (socketserver's default, 0.5 s, made each stop that late).
STOP_POLL_S = 0.05
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}
_ERROR_BODY = {
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "SlowDown", "Please reduce your request rate."),
}


class FaultPlan:
    """Which fault the proxy injects now; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kind: str | None = None
        self._count: int | None = None
        self._until: float | None = None
        self._methods: frozenset[str] | None = None
        self.requests = 0
        self.injected = 0

    def set(self, kind: str | None, count: int | None = None, seconds: float | None = None,
            methods: list[str] | None = None) -> None:
        if kind is not None and kind not in FAULT_KINDS:
            raise ConfigError("fault kind", kind, f"expected one of {', '.join(FAULT_KINDS)}")
        if kind is not None and count is None and seconds is None:
            raise ConfigError("fault count/seconds", None, "give count=N requests or seconds=T (or both)")
        with self._lock:
            self._kind, self._count = kind, count
            self._until = None if seconds is None else time.monotonic() + float(seconds)
            self._methods = frozenset(m.upper() for m in methods) if methods else None

    def next(self, method: str = "GET") -> str | None:
        """The fault for a `method` request arriving now (consumes one of `count`)."""
        with self._lock:
            self.requests += 1
            if self._kind is None or (self._until is not None and time.monotonic() > self._until):
                self._kind = None
                return None
            if self._methods is not None and method not in self._methods:
                return None
            if self._count is not None:
                if self._count <= 0:
                    self._kind = None
                    return None
                self._count -= 1
            self.injected += 1
            return self._kind

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"kind": self._kind, "remaining": self._count, "requests": self.requests,
                    "injected": self.injected, "methods": sorted(self._methods) if self._methods else None}


class _ProxyHandler(BaseHTTPRequestHandler):
    """Forwards to moto, or answers with the fault the plan says; subclassed per endpoint."""

    protocol_version = "HTTP/1.1"  # keep-alive, as boto3 expects
    timeout = SOCKET_TIMEOUT_S
    upstream: tuple[str, int] = ("127.0.0.1", 0)
    plan: FaultPlan
    slots: threading.BoundedSemaphore

    def log_message(self, fmt: str, *args: Any) -> None:
        _log.debug("s3 proxy: " + fmt, *args)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks, total = [], 0
            while (size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)) > 0:
                total += size
                if total > MAX_BODY_BYTES:
                    raise ValueError("request body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _control(self, body: bytes) -> None:
        if self.command == "POST":
            try:
                order = json.loads(body or b"{}")
                self.plan.set(order.get("kind"), order.get("count"), order.get("seconds"), order.get("methods"))
            except (ConfigError, ValueError, AttributeError) as exc:
                self._reply(400, str(exc).encode())
                return
        self._reply(200, json.dumps(self.plan.stats()).encode(), [("Content-Type", "application/json")])

    def _forward(self, body: bytes) -> None:
        conn = http.client.HTTPConnection(*self.upstream, timeout=SOCKET_TIMEOUT_S)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP | {"content-length"}]
            if self.command == "HEAD":
                kept.append(("Content-Length", resp.getheader("Content-Length", "0")))
                self.send_response(resp.status)
                for name, value in kept:
                    self.send_header(name, value)
                self.end_headers()
                return
            self._reply(resp.status, data, kept)
        finally:
            conn.close()

    def _handle(self) -> None:
        with self.slots:
            try:
                body = self._read_body()
            except ValueError as exc:
                self.close_connection = True
                self._reply(413, str(exc).encode())
                return
            if self.path.split("?")[0] == CONTROL_PATH:
                self._control(body)
                return
            fault = self.plan.next(self.command)
            if fault == "drop":
                self.close_connection = True  # no response at all: the client sees a dropped connection
                return
            if fault is not None:
                status, code, message = _ERROR_BODY[fault]
                xml = (f"<?xml version='1.0' encoding='UTF-8'?>"
                       f"<Error><Code>{code}</Code><Message>{message}</Message></Error>")
                self._reply(status, xml.encode(), [("Content-Type", "application/xml")])
                return
            try:
                self._forward(body)
            except (OSError, http.client.HTTPException) as exc:  # moto stopped or broke the connection
                self.close_connection = True
                self._reply(502, f"upstream S3 endpoint failed: {exc}".encode())

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class S3Endpoint:
    """moto's S3 on 127.0.0.1 (port chosen by the OS), optionally behind the fault proxy."""

    def __init__(self, *, faults: bool = False) -> None:
        self._with_proxy = faults
        self._moto: Any = None
        self._proxy: ThreadingHTTPServer | None = None
        self._proxy_thread: threading.Thread | None = None
        self.plan = FaultPlan()
        self.moto_url = ""
        self.url = ""

    def start(self) -> S3Endpoint:
        """Start moto (and the proxy); returns self. `url` is what clients use."""
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise MissingDependencyError("local mode's S3 endpoint", "moto[server,s3]", "local") from None

        self._moto = ThreadedMotoServer(ip_address=_LOOPBACK, port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.moto_url = self.url = f"http://{host}:{port}"
        if self._with_proxy:
            handler = type("Handler", (_ProxyHandler,), {"upstream": (host, port), "plan": self.plan,
                                                         "slots": threading.BoundedSemaphore(MAX_CONCURRENT)})
            self._proxy = ThreadingHTTPServer((_LOOPBACK, 0), handler)
            self._proxy.daemon_threads = True
            self._proxy_thread = threading.Thread(target=self._proxy.serve_forever, name="sm_dist-s3-proxy",
                                                  kwargs={"poll_interval": STOP_POLL_S}, daemon=True)
            self._proxy_thread.start()
            self.url = f"http://{_LOOPBACK}:{self._proxy.server_address[1]}"
        _log.info("local S3 endpoint at %s", self.url)
        return self

    def stop(self) -> None:
        """Stop the proxy and moto (idempotent)."""
        if self._proxy is not None:
            self._proxy.shutdown()
            self._proxy.server_close()
            self._proxy = None
        if self._moto is not None:
            _stop_promptly(self._moto)
            self._moto = None

    def set_faults(self, kind: str | None, *, count: int | None = None, seconds: float | None = None,
                   methods: list[str] | None = None) -> None:
        """Inject `kind` for the next `count` requests and/or `seconds` (only `methods` if given);
        kind=None clears."""
        if not self._with_proxy:
            raise ConfigError("faults", False, "create S3Endpoint(faults=True) to inject faults")
        self.plan.set(kind, count, seconds, methods)

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_promptly(moto: Any) -> None:
    """moto's `stop()`, without the half second its server's loop sleeps before it sees the stop
    (werkzeug's serve_forever looks every 0.5 s): connections to it wake the loop until it ended."""
    stopper = threading.Thread(target=moto.stop, name="sm_dist-s3-stop", daemon=True)
    stopper.start()
    address = moto.get_host_and_port()
    while stopper.is_alive():
        try:
            socket.create_connection(address, timeout=0.1).close()
        except OSError:  # the loop has closed: nothing left to wake
            pass
        stopper.join(0.02)


def set_faults(url: str, kind: str | None, *, count: int | None = None, seconds: float | None = None,
               methods: list[str] | None = None) -> dict:
    """Switch faults of a running proxy at `url` from any process; returns its counters."""
    if not url.startswith(f"http://{_LOOPBACK}:"):
        raise ConfigError("url", url, f"expected the proxy's http://{_LOOPBACK}:PORT URL")
    body = json.dumps({"kind": kind, "count": count, "seconds": seconds, "methods": methods}).encode()
    request = urllib.request.Request(url + CONTROL_PATH, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def fault_stats(url: str) -> dict:
    """Counters of a running proxy: requests seen, faults injected, the current fault."""
    with urllib.request.urlopen(url + CONTROL_PATH, timeout=10) as response:
        return json.loads(response.read())


__all__ = ["CONTROL_PATH", "FAULT_KINDS", "FaultPlan", "S3Endpoint", "fault_stats", "set_faults"]
