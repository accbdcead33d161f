"""docs/reference is generated from the code (routerag.cli.reference): the stored pages must be what
the code gives now, and each page must cover everything it documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.cli import reference

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "reference"


@pytest.fixture(scope="module")
def pages(service_defaults: None) -> dict[str, str]:
    return reference.render_pages()


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_a_stored_reference_page_is_what_the_code_gives(pages: dict[str, str], name: str) -> None:
    stored = OUT / name
    assert stored.is_file(), f"{stored} is missing; generate it: {reference.REGENERATE}"
    assert stored.read_text(encoding="utf-8") == pages[name], (
        f"{stored} differs from the code; regenerate it: {reference.REGENERATE}"
    )


def test_the_cli_page_has_every_command_and_option(pages: dict[str, str]) -> None:
    text = pages["cli.md"]
    seen = []

    def walk(cmd, path: list[str]) -> None:
        if getattr(cmd, "hidden", False):
            return
        assert f"`{' '.join(path)}`" in text, path
        seen.append(path)
        if isinstance(getattr(cmd, "commands", None), dict):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
            return
        for param in cmd.params:
            if param.param_type_name == "option" and not param.hidden and param.name != "help":
                assert f"`{param.opts[0]}`" in text, (path, param.opts)

    walk(reference.cli_command(), ["routerag"])
    assert len(seen) > 20
    assert "`routerag docs reference`" in text and "`--check`" in text


def test_the_config_page_has_every_key_of_every_model(pages: dict[str, str]) -> None:
    text = pages["config.md"]
    for title, _, target in reference.CONFIG_MODELS:
        model = reference._resolve(target)
        assert f"## {title}" in text
        for name in model.model_fields:
            assert f"| `{name}` |" in text, (target, name)
    assert "| `dense.ivfpq.nprobe` | int | `32` |" in text  # a nested key (Index section), its type and default
    assert "keys: [Model](#model)" in text
    from routerag.strategies import STRATEGIES

    for name in STRATEGIES.names():  # every registered strategy's params
        assert f"### `{name}`" in text, name
    assert "| `max_turns` | int | `4` |" in text  # a model with its own section is linked, not repeated


def test_the_http_page_has_every_endpoint(pages: dict[str, str]) -> None:
    text = pages["http-api.md"]
    for _, target in reference.HTTP_APPS:
        document = reference._resolve(target)()
        for path, methods in document["paths"].items():
            for method in methods:
                assert f"### `{method.upper()} {path}`" in text
    assert "### `POST /v1/ask`" in text and "### `POST /retrieve`" in text


def test_write_pages_checks_without_writing(tmp_path: Path) -> None:
    (tmp_path / "cli.md").write_text("stale\n", encoding="utf-8")
    changed = reference.write_pages(tmp_path, check=True)
    assert sorted(p.name for p in changed) == sorted(reference.PAGES)
    assert (tmp_path / "cli.md").read_text(encoding="utf-8") == "stale\n" and not (tmp_path / "config.md").exists()
    reference.write_pages(tmp_path)
    assert reference.write_pages(tmp_path, check=True) == []


def test_every_recipe_configuration_has_a_reference_section():
    from routerag.cli.reference import CONFIG_MODELS
    from routerag.train.config import RECIPE_CONFIGS

    listed = {path.split(":")[1] for _, _, path in CONFIG_MODELS}
    assert {cls.__name__ for cls in RECIPE_CONFIGS.values()} <= listed
