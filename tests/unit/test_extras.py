"""The install extras: what the quick start installs runs what the README shows next."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _extras() -> dict[str, list[str]]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def _names(extra: str, extras: dict[str, list[str]]) -> set[str]:
    """The distribution names ``extra`` installs, its ``routerag[...]`` references followed."""
    names: set[str] = set()
    for requirement in extras[extra]:
        name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
        if name == "routerag":
            for inner in re.search(r"\[(.*)\]", requirement).group(1).split(","):
                names |= _names(inner.strip(), extras)
        else:
            names.add(name)
    return names


def test_the_local_extra_installs_what_routerag_serve_needs():
    extras = _extras()
    assert _names("server", extras) <= _names("local", extras)
    assert {"fastapi", "uvicorn", "python-multipart"} <= _names("local", extras)


# the distribution of each module the integrations guide's code imports (a module missing here fails the test below)
GUIDE_MODULES = {
    "openai": "openai",
    "langchain_openai": "langchain-openai",
    "langchain_classic": "langchain-classic",
    "langchain_core": "langchain-core",
    "llama_index.core": "llama-index-core",
    "llama_index.llms.openai_like": "llama-index-llms-openai-like",
    "mcp": "mcp",
    "anyio": "anyio",  # a dependency of the server extra's fastapi
}


def test_the_integrations_extra_installs_what_the_guide_imports():
    guide = (PYPROJECT.parent / "docs" / "guides" / "integrations.md").read_text(encoding="utf-8")
    code = "\n".join(re.findall(r"```python\n(.*?)```", guide, re.S))
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", code, re.M))
    third_party = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "routerag"}
    for client in ("openai", "langchain_openai", "langchain_classic", "llama_index.llms.openai_like"):
        assert any(m == client or m.startswith(client + ".") for m in third_party), client
    installs = _names("integrations", _extras()) | {"anyio"}
    for module in sorted(third_party):
        known = [name for name in GUIDE_MODULES if module == name or module.startswith(name + ".")]
        assert known, f"integrations.md imports {module}: name its distribution in GUIDE_MODULES"
        assert GUIDE_MODULES[known[0]] in installs, f"the integrations extra does not install {GUIDE_MODULES[known[0]]} ({module})"
