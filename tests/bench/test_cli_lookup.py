"""The bench's CLI figures with real processes: a standing server's keeper answers, and without one it does not."""

from __future__ import annotations

import pytest

from retrieval.bench.cli_lookup import cli_lookup_figures, timed_lookup


@pytest.mark.slow
def test_without_a_standing_server_the_keeper_does_not_answer(cli_env):
    took, keeper = timed_lookup("Vault is sealed", cli_env)
    assert keeper is False and took > 0


@pytest.mark.slow
def test_the_bench_says_the_keeper_answered_its_warm_lookups(base_settings, tmp_path):
    figures = cli_lookup_figures(base_settings, tmp_path, log=lambda _: None, runs=2)
    assert figures["keeper_answered"] is True
    assert len(figures["warm_all_s"]) == 2
