"""``routerag policies list | install``: the trained policies the package names, where each one's
adapter is, and installing the adapter of one kept outside the package (checked by its sha256)."""

from __future__ import annotations

from pathlib import Path

import typer

from routerag.cli.app import RouteragTyper, app

policies_app = RouteragTyper(help="The trained policies: list them, install one kept outside the package.",
                             no_args_is_help=True)
app.add_typer(policies_app, name="policies")


@policies_app.command("list")
def list_command() -> None:
    """Every policy, the strategy and base that apply it by default, and where its adapter is."""
    from routerag.llm.config import ADAPTER_FILE, PACKED_ADAPTER_FILE, POLICY_PREFIX, installed_adapter, policy_dir, shipped_policy_names
    from routerag.strategies.shipped import SHIPPED_POLICIES

    applied = {policy: f"{strategy} on {base}" for strategy, bases in SHIPPED_POLICIES.items() for base, policy in bases.items()}
    for ref in shipped_policy_names():
        name = ref[len(POLICY_PREFIX):]
        folder = policy_dir(name)
        if (folder / ADAPTER_FILE).is_file() or (folder / PACKED_ADAPTER_FILE).is_file():
            where = "in the package"
        elif installed_adapter(folder).is_file():
            where = f"installed ({installed_adapter(folder)})"
        else:
            where = f"not installed: routerag policies install {name} FILE"
        typer.echo(f"{name}\t{applied.get(name, '-')}\t{where}")


@policies_app.command("install")
def install_command(
    name: str = typer.Argument(..., help="the policy (`routerag policies list`)"),
    source: Path = typer.Argument(..., help="its adapter.gguf, or adapter.gguf.xz; refused unless it is the evaluated adapter (sha256)"),
) -> None:
    """Install the adapter of a policy kept outside the package, after checking that its sha256 is
    the one the policy records (the adapter that was evaluated)."""
    from routerag.llm.policy_install import install_policy

    typer.echo(f"installed {name}: {install_policy(name, source)}")
