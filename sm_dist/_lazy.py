"""PEP 562 lazy exports, shared by the packages whose public names pull in heavy imports.

`import sm_dist` must not import torch or boto3, and `sm_dist.runtime` must stay importable
without torch (its PID 1 runs first in the container). Such a package lists its public names
as {"name": "module:attribute"} and resolves each on first access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping

from sm_dist._records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the module-level `__getattr__` and `__dir__` for `package`.

    `table` maps a public name to "module:attribute"; a resolved value is cached in
    `namespace` (the package's globals()) so the import happens once.
    """

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attr = target.split(":")
        value = getattr(importlib.import_module(module_name), attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
