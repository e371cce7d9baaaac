"""The chain stack's Lambda code: the decision module and the supervisor, inlined in the template.

`infra/sm-dist-chain.yaml` carries the function's code in `Code.ZipFile` (CloudFormation writes it
to index.py). That code is `sm_dist/contract/chain.py` followed by `sm_dist/cloud/supervisor.py`
with its import of the first dropped, so the cloud decides with the very function local mode
rehearses. `python -m sm_dist.provision.chain_stack` writes it into the template;
tests/infra/test_chain_stack.py fails when the two drift apart.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sm_dist._resources import resource_dir

TEMPLATE = "sm-dist-chain.yaml"
#: The block scalar's indentation in the template (under `Code:` of the function).
_INDENT = " " * 10
_HEAD = "        ZipFile: |\n"
_FUTURE = "from __future__ import annotations\n"
_IMPORT = re.compile(r"^from sm_dist\.contract\.chain import \((?:\n    [^\n]*)*\n\)\n", re.MULTILINE)


def _source(module: str) -> str:
    package = Path(__file__).resolve().parents[1]
    return (package / module).read_text(encoding="utf-8")


def inline_code() -> str:
    """index.py of the function: the decision module, then the supervisor without its import of it."""
    decision, supervisor = _source("contract/chain.py"), _source("cloud/supervisor.py")
    rest, found = _IMPORT.subn("", supervisor)
    if found != 1 or _FUTURE not in rest or "from sm_dist" in rest or "import sm_dist" in rest:
        raise RuntimeError("sm_dist/cloud/supervisor.py must import sm_dist.contract.chain in one parenthesized "
                           "statement and nothing else of sm_dist")
    return decision + "\n\n# --- sm_dist/cloud/supervisor.py ---\n" + rest.replace(_FUTURE, "", 1)


def render(template: str, code: str) -> str:
    """`template` with its ZipFile block replaced by `code`."""
    start = template.index(_HEAD) + len(_HEAD)
    end = start
    lines = template[start:].splitlines(keepends=True)
    for line in lines:
        if line.strip() and not line.startswith(_INDENT):
            break
        end += len(line)
    block = "".join(_INDENT + line if line.strip() else "\n" for line in code.splitlines(keepends=True))
    return template[:start] + block + "\n" * (not block.endswith("\n")) + template[end:]


def zip_file(template: str) -> str:
    """The code a template's ZipFile block holds, as CloudFormation reads it."""
    from sm_dist.provision.template import parse

    code: str = parse(template)["Resources"]["SupervisorFunction"]["Properties"]["Code"]["ZipFile"]
    return code


def main() -> int:
    """Write the inline code into the shipped template."""
    path = resource_dir("infra") / TEMPLATE
    text = path.read_text(encoding="utf-8")
    updated = render(text, inline_code())
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    print(f"{path}: {'updated' if updated != text else 'up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
