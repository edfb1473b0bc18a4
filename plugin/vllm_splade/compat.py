# SPDX-License-Identifier: Apache-2.0
"""A probe of the vLLM internals this package's modules import, run where
they are about to be imported (the release series is checked in every
process: `vllm_splade.refusal_reason`)."""

import ast
import importlib
import importlib.util
from pathlib import Path

PACKAGE = Path(__file__).parent


def vllm_imports(subpackage: str) -> dict[str, set[str]]:
    """The `from vllm... import names` of the .py files of `subpackage`
    (a folder of this package), read from their source."""
    imports: dict[str, set[str]] = {}
    for path in sorted((PACKAGE / subpackage).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and (node.module == "vllm" or node.module.startswith("vllm."))
            ):
                imports.setdefault(node.module, set()).update(
                    alias.name for alias in node.names
                )
    return imports


def missing_internals(subpackage: str) -> list[str]:
    """The names the modules of `subpackage` import from vLLM that the
    installed vLLM does not have."""
    missing = []
    for module, names in sorted(vllm_imports(subpackage).items()):
        try:
            found = importlib.import_module(module)
        except ImportError:
            missing.append(module)
            continue
        missing += [
            f"{module}.{name}"
            for name in sorted(names)
            if not hasattr(found, name)
            and not (
                hasattr(found, "__path__")  # a submodule of a package
                and importlib.util.find_spec(f"{module}.{name}") is not None
            )
        ]
    return missing


def check_internals(subpackage: str) -> None:
    """Raise an ImportError with the reason where the installed vLLM lacks
    what the modules of `subpackage` import."""
    from . import refusal_reason

    reason = refusal_reason(missing_internals(subpackage))
    if reason is not None:
        raise ImportError(reason)
