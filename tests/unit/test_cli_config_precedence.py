"""``--config`` against the command line, through real CLI invocations: a value of the file is kept
when its flag is not given (the flag's default never overrides it), and a flag given on the command
line overrides it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from routerag.cli.app import app
from routerag.cli.main import _load
from routerag.errors import RouteragError

_load()
runner = CliRunner()


@pytest.fixture
def served(monkeypatch) -> list:
    """The settings each serving command would serve with (nothing is served)."""
    seen: list = []
    monkeypatch.setattr("routerag.api.serve", lambda params, settings, **_: seen.append(settings))
    monkeypatch.setattr("routerag.api.serve_retrieval", lambda params, settings, **_: seen.append(settings))
    return seen


@pytest.mark.parametrize("command", ["serve", "serve-retrieval"])
def test_a_server_keeps_the_config_port_unless_the_flag_is_given(command, served, tmp_path):
    config = tmp_path / "settings.yaml"
    config.write_text("port: 9123\nhost: '::1'\n")
    result = runner.invoke(app, [command, str(tmp_path), "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert (served[-1].port, served[-1].host) == (9123, "::1")  # not the flags' defaults

    result = runner.invoke(app, [command, str(tmp_path), "--config", str(config), "--port", "9200"])
    assert result.exit_code == 0, result.output
    assert (served[-1].port, served[-1].host) == (9200, "::1")

    result = runner.invoke(app, [command, str(tmp_path), "--config", str(config), "--host", "localhost"])
    assert result.exit_code == 0, result.output
    assert (served[-1].port, served[-1].host) == (9123, "localhost")


class Stop(RouteragError):
    pass


@pytest.fixture
def asked(monkeypatch) -> list:
    """The parameters ``routerag ask`` would answer with (it stops before building anything)."""
    seen: list = []

    def open_asker(params):
        seen.append(params)
        raise Stop("stopped before building the asker")

    monkeypatch.setattr("routerag.api.open_asker", open_asker)
    return seen


def test_ask_keeps_the_config_strategy_unless_the_flag_is_given(asked, tmp_path):
    config = tmp_path / "eval.yaml"
    config.write_text("strategy: vanilla\n")
    result = runner.invoke(app, ["ask", "Who?", "--config", str(config)])
    assert "stopped before" in result.output, result.output
    assert asked[-1].config.strategy == "vanilla"  # not --strategy's default

    runner.invoke(app, ["ask", "Who?", "--config", str(config), "--strategy", "ircot"])
    assert asked[-1].config.strategy == "ircot"

    runner.invoke(app, ["ask", "Who?"])  # no file: the flag's default applies
    assert asked[-1].config.strategy == "routerag"
