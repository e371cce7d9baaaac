"""Run a notebook in a real Jupyter kernel and write it as one HTML page: what a user sees.

The README's picture of examples/quickstart.ipynb is made with it (from the repository root;
`--png` needs Debian's `chromium`, headless):

    python examples/render_notebook.py examples/quickstart.ipynb /tmp/quickstart.html \\
        --from-cell plan-md --png examples/quickstart.png

Needs nbclient and ipykernel (`pip install -e '.[dev]'`). The notebook in the repository stays
without outputs; this writes the HTML page (and the picture) only.
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Width of the picture (CSS pixels); its height is the page's, found by trimming the blank bottom.
PNG_WIDTH = 1000

STYLE = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; font-size: 13px; max-width: 1040px;
       margin: 16px auto; color: #1f1f1f; }
.cell { margin: 10px 0; }
.prompt { color: #307fc1; font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
.source { background: #f5f5f5; border: 1px solid #e0e0e0; padding: 6px 8px; margin: 2px 0;
          font-family: "DejaVu Sans Mono", monospace; font-size: 12px; white-space: pre-wrap; }
.output { padding: 2px 8px; }
.output pre { margin: 2px 0; font-family: "DejaVu Sans Mono", monospace; font-size: 12px; white-space: pre-wrap; }
.stderr { background: #fdd; }
.md h1 { font-size: 20px; } .md h2 { font-size: 16px; margin: 14px 0 4px; } .md p { margin: 4px 0; }
"""


def _markdown(text: str) -> str:
    """Headings and paragraphs (enough for the example's own markdown cells)."""
    out = []
    for block in text.split("\n\n"):
        level = len(block) - len(block.lstrip("#"))
        body = html.escape(block.lstrip("#").strip())
        body = body.replace("`", "")
        out.append(f"<h{level}>{body}</h{level}>" if level else f"<p>{body}</p>")
    return "".join(out)


def _output(output: dict) -> str:
    kind = output["output_type"]
    if kind == "stream":
        css = " stderr" if output["name"] == "stderr" else ""
        return f'<div class="output{css}"><pre>{html.escape(output["text"])}</pre></div>'
    if kind == "error":
        return f'<div class="output stderr"><pre>{html.escape(output["ename"] + ": " + output["evalue"])}</pre></div>'
    data = output.get("data", {})
    if "image/png" in data:
        return f'<div class="output"><img src="data:image/png;base64,{data["image/png"]}"></div>'
    if "text/html" in data:
        return f'<div class="output">{data["text/html"]}</div>'  # the kernel's own HTML, as Jupyter shows it
    return f'<div class="output"><pre>{html.escape(data.get("text/plain", ""))}</pre></div>'


def render(notebook: dict, from_cell: str | None = None) -> str:
    cells = []
    ids = [cell.get("id") for cell in notebook["cells"]]
    start = ids.index(from_cell) if from_cell else 0
    for cell in notebook["cells"][start:]:
        if cell["cell_type"] == "markdown":
            cells.append(f'<div class="cell md">{_markdown(cell["source"])}</div>')
            continue
        prompt = f'<div class="prompt">[{cell.get("execution_count") or " "}]:</div>'
        outputs = "".join(_output(o) for o in cell.get("outputs", []))
        cells.append(f'<div class="cell">{prompt}<div class="source">{html.escape(cell["source"])}</div>{outputs}</div>')
    return f"<!doctype html><html><head><meta charset='utf-8'><style>{STYLE}</style></head><body>{''.join(cells)}</body></html>"


def screenshot(page: Path, png: Path) -> None:
    """A PNG of the page: headless Chromium, the blank bottom trimmed, 256 colours."""
    from PIL import Image, ImageChops

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("--png needs chromium (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "page.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--hide-scrollbars", f"--window-size={PNG_WIDTH},8000",
                        f"--screenshot={raw}", page.resolve().as_uri()], check=True, capture_output=True)
        image = Image.open(raw).convert("RGB")
    blank = Image.new("RGB", image.size, (255, 255, 255))
    box = ImageChops.difference(image, blank).getbbox()
    if box is not None:
        image = image.crop((0, 0, image.width, min(image.height, box[3] + 16)))
    image.quantize(colors=256).save(png, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("html", type=Path)
    parser.add_argument("--executed", action="store_true", help="the notebook already holds its outputs: only render")
    parser.add_argument("--from-cell", metavar="ID", help="render from this cell on")
    parser.add_argument("--png", type=Path, metavar="FILE", help="also a picture of the page (headless chromium)")
    args = parser.parse_args(argv)
    import nbformat

    notebook = nbformat.read(args.notebook, as_version=4)
    if not args.executed:
        from nbclient import NotebookClient

        NotebookClient(notebook, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(args.notebook.resolve().parent)}}).execute()
    args.html.write_text(render(notebook, args.from_cell), encoding="utf-8")
    if args.png is not None:
        screenshot(args.html, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
