import json, time
from retrieval.core.hints import L0Index
from retrieval.core.protocols import LookupServices
from retrieval.core.explain import explain_entry
from retrieval.core.remedies import what_it_would_take
from retrieval.evals.sets import load_eval_set
from retrieval.evals.evaluation import run_eval
from retrieval.evals.causes import cause_table

def test_scratch(base_settings, sample_store, embedder, sample_corpus):
    settings = base_settings.with_(collection="TestSample")
    services = LookupServices(L0Index(sample_corpus.entries), embedder, sample_store)
    opts = settings.options()
    ids = sorted(services.l0.entries)
    print(len(ids), ids[:5])
    for q, e in [("Disk full on the Postgres primary", ids[0]), ("Pod is crash looping.", ids[1])]:
        t0=time.monotonic(); tr = explain_entry(q, e, services, opts); t1=time.monotonic()
        print(tr.verdict, tr.miss, tr.to_dict()["l0"], tr.to_dict()["routing"], tr.to_dict()["vector"]); print("explain s", t1-t0)
        r = what_it_would_take(q, e, services, opts); print("remedy s", time.monotonic()-t1)
        print(r.summary(), r.first, r.into_top_k)
    for path in ["eval_sets/sample-ops-alerts.yaml","eval_sets/sample-ops-issue-titles.yaml","eval_sets/sample-ops-unanswerable.yaml"]:
        rep = run_eval(load_eval_set(path), services, settings)
        print(path, rep.configs, cause_table(rep))
        for c in rep.cases:
            m = c.configs["lookup"].miss
            if m: print(c.id, c.query, m)
