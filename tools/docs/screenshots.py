"""Look at the built site as a person would: serve site/ on 127.0.0.1 and take screenshots with headless Chromium.

    .venv/bin/mkdocs build --strict && .venv/bin/python tools/docs/screenshots.py --out /tmp/sm-dist-shots

writes landing.png, guide.png (Rehearse locally) and api.png (fit, plan and their settings), and prints what each
page logged to the browser console and every request the server answered with an error. The README's picture of
the site is its guide.png (docs/assets/site-guide.png). Needs Debian's chromium
(`apt-get install -y chromium`). tests/docs/test_site_pages.py loads the pages the same way and fails on a
console message or a failed request.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
#: page -> screenshot name: the landing page, one guide, one API page.
PAGES = {"index.html": "landing", "guides/local.html": "guide", "reference/api/launch.html": "api"}
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (?P<message>.*)$")
#: The flags Debian's Chromium needs here: no sandbox as root, no GPU, and none of its own network traffic.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic", "--hide-scrollbars"]


class _Handler(SimpleHTTPRequestHandler):
    failures: list[str]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        """Quiet; keep what failed."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if str(code).isdigit() and int(code) >= 400:
            self.failures.append(f"{code} {self.path}")


@contextlib.contextmanager
def serve(site: Path) -> Iterator[tuple[str, list[str]]]:
    """The site on an HTTP server of this process, 127.0.0.1 and a free port: (base URL, failed requests)."""
    failures: list[str] = []
    handler = type("Handler", (_Handler,), {"failures": failures})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", failures
    finally:
        server.shutdown()
        server.server_close()


def chromium(url: str, *extra: str) -> list[str]:
    """Run headless Chromium on `url` in a fresh profile; the console messages the page logged."""
    with tempfile.TemporaryDirectory(prefix="sm-dist-chromium-") as profile:
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                               "--virtual-time-budget=5000", *extra, url],
                              capture_output=True, text=True, timeout=120, check=True)
    return [m["message"] for line in done.stderr.splitlines() if (m := CONSOLE.search(line))]


def console_messages(url: str) -> list[str]:
    """What the page logged to the console after loading and running its scripts."""
    return chromium(url, "--dump-dom")


def screenshot(url: str, png: Path, width: int = 1280, height: int = 900) -> list[str]:
    """A PNG of the page's first `height` pixels at `width` (256 colours: a tenth of the bytes, for the
    repository); returns its console messages."""
    messages = chromium(url, f"--window-size={width},{height}", f"--screenshot={png}")
    try:
        from PIL import Image
    except ImportError:  # matplotlib brings Pillow with the dev extra; without it the PNG stays as Chromium wrote it
        return messages
    with Image.open(png) as image:
        small = image.convert("RGB").quantize(colors=256)
    small.save(png, optimize=True)
    return messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (mkdocs build)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the PNG files")
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    if not (args.site / "index.html").is_file():
        raise SystemExit(f"{args.site} holds no built site: run .venv/bin/mkdocs build --strict first")
    args.out.mkdir(parents=True, exist_ok=True)
    bad = 0
    with serve(args.site) as (base, failures):
        for page, name in PAGES.items():
            png = args.out / f"{name}.png"
            messages = screenshot(base + page, png, height=args.height)
            print(f"{png}: {page}" + "".join(f"\n  console: {m}" for m in messages))
            bad += len(messages)
    for failure in failures:
        print(f"server: {failure}")
    return 1 if bad or failures else 0


if __name__ == "__main__":
    sys.exit(main())
