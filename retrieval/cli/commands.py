"""The typer app of `python -m retrieval`: every command group's module adds its commands here."""

from __future__ import annotations

import typer

from retrieval.cli.bench import register as register_bench
from retrieval.cli.calibrate import register as register_calibrate
from retrieval.cli.cluster import register as register_cluster
from retrieval.cli.eval import register as register_eval
from retrieval.cli.explain import register as register_explain
from retrieval.cli.lookup import register as register_lookup
from retrieval.cli.models import register as register_models
from retrieval.cli.replay import register as register_replay
from retrieval.cli.runs import register as register_runs
from retrieval.cli.serve import serve
from retrieval.cli.server import register as register_server
from retrieval.cli.sweep import register as register_sweep
from retrieval.cli.traffic import register as register_traffic

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Lookup Lab: lookup_knowledge from the command line.")

register_lookup(app)  # ingest, lookup, sql
register_eval(app)  # eval: an eval set through the configurations
register_explain(app)  # explain: why not this entry?
register_bench(app)  # bench
app.command(name="serve")(serve)  # `python -m retrieval serve` runs retrieval/cli/serve.py without this module
register_cluster(app)  # cluster start|status|stop
register_server(app)  # server start|status|stop: a standing embedded Weaviate
register_sweep(app)  # sweep and its alias tune
register_replay(app)  # replay: recorded calls rerun under the current settings
register_runs(app)  # runs and compare: saved eval runs
register_models(app)  # models: list, fetch
register_calibrate(app)  # calibrate: fit the support estimate
register_traffic(app)  # traffic: the label-free estimate of the recorded calls
