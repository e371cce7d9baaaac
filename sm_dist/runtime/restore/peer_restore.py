"""A restarted host's checkpoint folder made whole from the other hosts' folders: network isolation.

Under EnableNetworkIsolation the container reaches no S3 and has no AWS credentials, but it does
reach its peers (docs/PLATFORM.md §1.7). When torchrun restarts the workers of a running job, every
host's folder still holds what it wrote, and together the folders hold what SageMaker's sync
uploaded. So `folder_restore --peers`, on each host's local rank 0, instead of listing the URI:

1. lists the folder — every file SageMaker's uploader would upload, sm_dist's step folders included
  (its checkpointer cannot fetch another host's shards from S3 here either) — each file "written"
  (changed since PID 1 started), "restored" (unchanged since the job started: SageMaker
  copied the same URI into every host) or a "copy" (fetched by an earlier restore of this job);
2. serves the folder, read-only, over HTTP on this host's cluster address under a random token;
3. meets the other hosts on algo-1's rendezvous store, each leaving its listing and address; every
  host then computes the same answer (`answer`): what S3 would hold. The newest written copy of a
  name (S3's last upload wins); a name no host wrote only while every host still has it as restored
  (a host that lacks one deleted it, and SageMaker mirrors a delete to S3); a step folder only while
  its manifest is in the answer (sm_dist's retention deleted it otherwise);
4. fetches what this host lacks or holds older, deletes what it holds without having written it
  and the answer lacks, and remembers what it fetched (`COPIES_FILE` in PID 1's state folder);
5. says it is done and serves until every peer is done.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sm_dist.container.worker import NOT_RESTORING
from sm_dist.contract.checkpoint import MANIFEST_NAME, parse_step
from sm_dist.contract.container import SYNC_IGNORE_SUFFIX, synced_files

WRITTEN, RESTORED, COPY = "written", "restored", "copy"
#: In PID 1's state folder (it lives as long as the job's PID 1): rel -> [size, mtime_ns]
#: of each file a restore fetched, so that a later restore knows it did not write it.
COPIES_FILE = "peer-copies.json"
#: Written by PID 1 into its state folder at start (`sm_dist.container.worker.STARTED_FILE`).
STARTED_FILE = "started"
#: Clock slack between hosts when comparing file times.
CLOCK_SLACK_S = 2.0
#: Seconds a read from a peer may stall before the fetch fails (and the worker tries again).
FETCH_TIMEOUT_S = 60.0
_CHUNK = 1 << 20
_log = logging.getLogger("sm_dist.folder_restore")


class PeerRestoreFailed(Exception):
    """A peer did not answer or sent another file than it listed; the message is the reason."""


@dataclass(frozen=True)
class Held:
    """A file in a host's folder: its size, its time (Unix seconds) and how it got there."""

    size: int
    modified: float
    kind: str  # WRITTEN | RESTORED | COPY


@dataclass(frozen=True)
class Share:
    """What a host leaves at the meeting."""

    address: str  # host:port of its file server
    token: str
    files: dict[str, Held]
    outside: list[str] = field(default_factory=list)  # checkpoint-like files outside the folder (split resume)

    def to_json(self) -> str:
        return json.dumps({"address": self.address, "token": self.token, "outside": sorted(self.outside),
                           "files": {rel: [h.size, h.modified, h.kind] for rel, h in sorted(self.files.items())}})

    @classmethod
    def from_json(cls, text: str) -> Share:
        data = json.loads(text)
        return cls(address=data["address"], token=data["token"], outside=list(data.get("outside", [])),
                   files={rel: Held(int(s), float(m), str(k)) for rel, (s, m, k) in data["files"].items()})


def read_copies(state: Path | None) -> dict[str, tuple[int, int]]:
    """The files earlier restores of this job fetched into this host's folder: rel -> (size, mtime_ns)."""
    if state is None:
        return {}
    try:
        data = json.loads((state / COPIES_FILE).read_text(encoding="utf-8"))
        return {rel: (int(size), int(mtime_ns)) for rel, (size, mtime_ns) in data.items()}
    except (OSError, ValueError, TypeError):
        return {}


def started(state: Path | None) -> float | None:
    """When this host's PID 1 started (files older than that are the job's restored ones)."""
    try:
        return float((state / STARTED_FILE).read_text(encoding="utf-8")) if state is not None else None
    except (OSError, ValueError):
        return None


def listing(folder: Path, since: float | None, copies: Mapping[str, tuple[int, int]]) -> dict[str, Held]:
    """This host's files, each written, restored or a copy."""
    out = {}
    for rel, st in synced_files(folder).items():
        if copies.get(rel) == (st.st_size, st.st_mtime_ns):
            kind = COPY
        elif since is not None and st.st_mtime < since:
            kind = RESTORED
        else:
            kind = WRITTEN
        out[rel] = Held(st.st_size, st.st_mtime, kind)
    return out


def answer(shares: Mapping[str, Mapping[str, Held]], order: Sequence[str]) -> dict[str, tuple[str, Held]]:
    """What S3 would hold, from every restoring host's listing: rel -> (the host whose copy it is, that copy).
    The same on every host: it depends on the listings and the host order only."""
    hosts = [h for h in order if h in shares]
    out: dict[str, tuple[str, Held]] = {}
    for host in hosts:
        for rel, held in shares[host].items():
            if held.kind == WRITTEN and (rel not in out or held.modified > out[rel][1].modified):
                out[rel] = (host, held)
    if hosts:
        kept = set.intersection(*({rel for rel, h in shares[host].items() if h.kind == RESTORED} for host in hosts))
        for rel in sorted(kept - set(out)):
            out[rel] = (hosts[0], shares[hosts[0]][rel])
    return {rel: v for rel, v in out.items() if _manifest_kept(rel, out)}


def _manifest_kept(rel: str, found: Mapping[str, object]) -> bool:
    top = rel.split("/", 1)[0]
    return parse_step(top) is None or f"{top}/{MANIFEST_NAME}" in found


@dataclass
class Decision:
    """What this host does: fetch (rel -> the host and its copy), delete, and which of its own
    written files another host's newer copy replaces (conflicts, reported)."""

    fetch: dict[str, tuple[str, Held]] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def decide(me: str, shares: Mapping[str, Mapping[str, Held]], order: Sequence[str]) -> Decision:
    """This host's part of `answer`."""
    truth = answer(shares, order)
    mine = shares.get(me, {})
    out = Decision()
    for rel, (host, held) in sorted(truth.items()):
        have = mine.get(rel)
        if host == me or (have is not None and have.size == held.size and (
                have.kind == held.kind == RESTORED or held.modified <= have.modified + CLOCK_SLACK_S)):
            continue  # this host's own, the same restored file, or as new here
        out.fetch[rel] = (host, held)
        if have is not None and have.kind == WRITTEN:
            out.conflicts.append(rel)
    out.delete = sorted(rel for rel, held in mine.items() if held.kind != WRITTEN and rel not in truth)
    return out


def serve(folder: Path, names: set[str], address: str) -> tuple[ThreadingHTTPServer, str, str]:
    """Serve `names` of `folder` read-only on `address` (any free port) in a thread; (the server,
    "host:port" for the peers, the token every path starts with)."""
    token = secrets.token_urlsafe(16)
    prefix = f"/{token}/"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            rel = urllib.parse.unquote(self.path[len(prefix):]) if self.path.startswith(prefix) else ""
            try:
                f = open(folder / rel, "rb") if rel in names else None  # noqa: SIM115 - closed below
            except OSError:
                f = None
            if f is None:
                self.send_error(404)
                return
            with f:
                self.send_response(200)
                self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
                self.end_headers()
                shutil.copyfileobj(f, self.wfile, _CHUNK)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
            pass

    try:
        server = ThreadingHTTPServer((address, 0), Handler)
    except OSError:  # a name this host cannot bind (it resolves elsewhere): every interface
        server = ThreadingHTTPServer(("", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="sm_dist-peer-restore", daemon=True).start()
    host = f"[{address}]" if ":" in address else address
    return server, f"{host}:{server.server_address[1]}", token


def fetch(share: Share, rel: str, held: Held, dest: Path) -> None:
    """`rel` from the peer of `share` into `dest`, with its time; never half a file under its name."""
    url = f"http://{share.address}/{share.token}/{urllib.parse.quote(rel)}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # peers directly, never a proxy
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".sm-dist-restore" + SYNC_IGNORE_SUFFIX)  # the uploader skips it
    try:
        with opener.open(url, timeout=FETCH_TIMEOUT_S) as resp, open(tmp, "wb") as out:
            shutil.copyfileobj(resp, out, _CHUNK)
        size = tmp.stat().st_size
        if size != held.size:
            raise PeerRestoreFailed(f"{rel} from {share.address}: {size} bytes, listed {held.size}")
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise PeerRestoreFailed(f"cannot fetch {rel} from {share.address}: {exc}") from None
    except PeerRestoreFailed:
        tmp.unlink(missing_ok=True)
        raise
    os.utime(tmp, (held.modified, held.modified))  # as old as the peer's: not "newer here"
    os.replace(tmp, dest)


def apply(folder: Path, decision: Decision, shares: Mapping[str, Share], state: Path | None,
          copies: Mapping[str, tuple[int, int]]) -> None:
    """Fetch and delete what `decision` says; record the copies this host now holds."""
    for rel, (host, held) in decision.fetch.items():
        fetch(shares[host], rel, held, folder / rel)
    for rel in decision.delete:
        (folder / rel).unlink(missing_ok=True)
    if state is None:
        return
    held_now = {rel: c for rel, c in copies.items() if rel not in decision.delete and rel not in decision.fetch}
    for rel in decision.fetch:
        st = (folder / rel).stat()
        held_now[rel] = (st.st_size, st.st_mtime_ns)
    with contextlib.suppress(OSError):  # PID 1's folder is gone: it is ending
        tmp = state / f".{COPIES_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps({rel: list(c) for rel, c in sorted(held_now.items())}), encoding="utf-8")
        os.replace(tmp, state / COPIES_FILE)


#: The meeting on the job's store, bound to it by `folder_restore`: (key suffix, what this host shares,
#: the hosts to wait for — None: every host of the job —, timeout) -> (hosts missing, host -> its share).
Meet = Callable[[str, str, "Sequence[str] | None", float], "tuple[list[str], dict[str, str]]"]


def restore(folder: Path, me: str, order: Sequence[str], address: str, state: Path | None, outside: Sequence[str],
            meet: Meet, timeouts: tuple[float, float]) -> tuple[dict[str, str], Decision]:
    """Steps 1 to 5 of the module's doc; (what every host shared, what this host did). `timeouts`: for
    the meeting, and for the peers' fetches (how long this host serves them at most)."""
    copies = read_copies(state)
    files = listing(folder, started(state), copies)
    server, where, token = serve(folder, set(files), address)
    try:
        missing, shared = meet("", Share(where, token, files, list(outside)).to_json(), None, timeouts[0])
        if missing:
            raise PeerRestoreFailed(f"{', '.join(missing)} did not reach the restore in {timeouts[0]:.0f} s")
        shares = {host: Share.from_json(text) for host, text in shared.items() if text != NOT_RESTORING}
        decision = decide(me, {host: share.files for host, share in shares.items()}, order)
        apply(folder, decision, shares, state, copies)
        late, _ = meet("/done", "", sorted(shares), timeouts[1])  # serve until every peer has what it needs
        if late:
            _log.warning("%s: %s did not finish fetching in %.0f s; no longer serving this host's checkpoint folder",
                         me, ", ".join(late), timeouts[1])
    finally:
        server.shutdown()
        server.server_close()
    return shared, decision


__all__ = ["COPY", "RESTORED", "WRITTEN", "Decision", "Held", "PeerRestoreFailed", "Share", "answer", "apply",
           "decide", "fetch", "listing", "read_copies", "restore", "serve", "started"]
