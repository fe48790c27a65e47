"""Synthetic knowledge bases, queries and invocation rows for the benchmark (retrieval.bench.runner), from a seeded RNG.
Entries look like runbooks: a title "<component> <symptom> on <service>", keywords, entities, a domain, sectioned prose.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import frontmatter
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from retrieval.core.corpus import Corpus, Entry

DOMAINS: dict[str, tuple[str, ...]] = {
    "kubernetes": ("kubelet", "kube apiserver", "pod scheduler", "ingress controller", "coredns"),
    "postgres": ("postgres primary", "pgbouncer", "wal archiver", "autovacuum", "streaming replica"),
    "mysql": ("mysql primary", "innodb buffer pool", "binlog", "group replication"),
    "redis": ("redis master", "redis sentinel", "redis cluster slot", "keyspace"),
    "kafka": ("kafka broker", "consumer group", "topic partition", "kafka connect", "producer"),
    "rabbitmq": ("rabbitmq node", "quorum queue", "shovel", "exchange binding"),
    "elasticsearch": ("elasticsearch shard", "index template", "ingest pipeline", "data node"),
    "mongodb": ("mongodb replica set", "mongos router", "oplog", "wiredtiger cache"),
    "cassandra": ("cassandra ring", "compaction", "hinted handoff", "sstable"),
    "etcd": ("etcd member", "raft leader", "etcd defrag", "watch stream"),
    "prometheus": ("prometheus server", "alertmanager", "remote write", "scrape target", "tsdb head"),
    "nginx": ("nginx worker", "upstream pool", "proxy buffer", "rate limit zone"),
    "haproxy": ("haproxy frontend", "backend server", "stick table", "health checker"),
    "vault": ("vault unseal", "vault token", "secret engine", "audit device"),
    "consul": ("consul agent", "service catalog", "gossip pool", "consul leader"),
    "ceph": ("ceph osd", "placement group", "ceph monitor", "rados gateway"),
    "dns": ("dns resolver", "zone transfer", "recursive lookup", "dnssec signature"),
    "tls": ("tls certificate", "cert manager", "ocsp stapling", "trust bundle"),
    "linux": ("systemd unit", "kernel oom killer", "file descriptor table", "ext4 journal", "conntrack table"),
    "s3": ("s3 bucket", "multipart upload", "lifecycle policy", "object replication"),
}
SYMPTOMS = (
    "high latency",
    "crash loop",
    "disk full",
    "memory pressure",
    "replication lag",
    "connection refused",
    "certificate expired",
    "request timeouts",
    "throttling",
    "leader election churn",
    "split brain",
    "slow queries",
    "queue backlog",
    "error rate spike",
    "out of memory",
    "too many open files",
    "authentication failure",
    "quota exceeded",
    "packet loss",
    "cpu saturation",
    "stuck rollout",
    "data corruption",
    "clock skew",
    "write stall",
    "read only mode",
    "backup failure",
    "snapshot failure",
    "rebalance storm",
    "under replication",
    "evictions",
    "deadlocks",
    "pool exhaustion",
    "gc pauses",
    "config drift",
    "schema mismatch",
    "health check flapping",
)
OPS_TERMS = (
    "failover",
    "rollback",
    "capacity",
    "saturation",
    "retry storm",
    "backpressure",
    "throughput",
    "p99 latency",
    "noisy neighbour",
    "rolling restart",
    "cordon",
    "drain",
    "scale out",
    "upgrade",
    "migration",
    "maintenance window",
    "canary",
    "paging",
    "runbook",
    "postmortem",
    "hotfix",
    "tuning",
)
SERVICES = (
    "orders",
    "billing",
    "checkout",
    "payments",
    "search",
    "catalog",
    "inventory",
    "shipping",
    "auth",
    "profile",
    "ledger",
    "pricing",
    "reports",
    "notifier",
    "gateway",
    "media",
    "ratings",
    "cart",
    "invoice",
    "fraud",
    "session",
    "analytics",
    "feeds",
    "export",
)
ROLES = ("api", "worker", "db", "cache", "stream", "cron", "proxy", "batch")
ROMAN = (
    "north",
    "south",
    "east",
    "west",
    "blue",
    "green",
    "amber",
    "violet",
    "coral",
    "slate",
    "delta",
    "gamma",
    "sigma",
    "omega",
    "lambda",
    "kappa",
    "alpha",
    "bravo",
    "echo",
    "tango",
)
SECTIONS = ("Meaning", "Impact", "Diagnosis", "Mitigation")
SENTENCES = (
    "When {c} reports {s}, the {svc} service degrades within minutes.",
    "Check the {c} logs for messages about {s} and note the first timestamp.",
    "Compare the current {op} figures with last week's baseline before changing anything.",
    "If {s} persists after a {op}, escalate to the {d} on-call engineer.",
    "Most incidents of this kind started with a change to {c}, so review recent deploys of {svc}.",
    "Users of {svc} see slow pages and failed requests while the {c} is affected.",
    "A {op} usually restores service, but it hides the cause: capture metrics first.",
    "Look at the {m} metric and its rate over the last hour.",
    "Do not restart every {c} at once; work through them one at a time and watch {m}.",
    "The alert fires when {m} stays above its threshold for ten minutes.",
    "Record what you changed in the incident channel so the postmortem can follow it.",
    "If the {d} cluster is also short of capacity, plan a {op} during the next maintenance window.",
)
QUERY_TEMPLATES = (
    ("entity", "{s} on {svc}"),
    ("entity", "{svc} {s} since this morning"),
    ("entity", "why does {svc} show {s}"),
    ("component", "{c} {s}"),
    ("component", "{c} {s} after the deploy"),
    ("component", "how to fix {s} in {c}"),
    ("domain", "{d} {s}"),
    ("domain", "{d} cluster {s} during peak traffic"),
    ("free", "users say the {svcword} page is slow and sometimes times out"),
    ("free", "everything went red after yesterday's change and nobody knows why"),
    ("free", "requests to the {svcword} backend fail intermittently with server errors"),
)
ENTRIES_PER_SERVICE = 5
SHORT_WORDS, FULL_WORDS = (40, 80), (200, 800)


@dataclass(frozen=True)
class BodyPolicy:
    """Body length per entry, in words: full bodies (several chunks) or one short chunk."""

    low: int
    high: int

    @property
    def label(self) -> str:
        return f"{self.low}-{self.high}"


FULL, SHORT = BodyPolicy(*FULL_WORDS), BodyPolicy(*SHORT_WORDS)


def _camel(text: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in text.replace("-", " ").split())


def _metric(domain: str, component: str, symptom: str) -> str:
    return f"{domain}_{component.split()[-1]}_{symptom.split()[-1]}_total".replace("-", "_")


def service_name(i: int) -> str:
    """The i-th service instance, e.g. 'orders-api-north', 'orders-api-northb'."""
    k = len(SERVICES) * len(ROLES) * len(ROMAN)
    service, role = SERVICES[i % len(SERVICES)], ROLES[(i // len(SERVICES)) % len(ROLES)]
    base = f"{service}-{role}-{ROMAN[(i // (len(SERVICES) * len(ROLES))) % len(ROMAN)]}"
    return base if i < k else base + _suffix(i // k)


def _suffix(i: int) -> str:
    """Letters, not digits: a number in a title would be an L0 pattern that any number in a query hits."""
    out = ""
    while True:
        out = "abcdefghijklmnopqrstuvwxyz"[i % 26] + out
        i //= 26
        if i == 0:
            return out


def _body(rng: random.Random, words: int, d: str, c: str, s: str, svc: str, m: str) -> str:
    parts: list[str] = []
    count = 0
    section = 0
    while count < words:
        if count >= section * words / len(SECTIONS) and section < len(SECTIONS):
            parts.append(f"\n\n## {SECTIONS[section]}\n\n")
            section += 1
        sentence = rng.choice(SENTENCES).format(c=c, s=s, svc=svc, d=d, m=m, op=rng.choice(OPS_TERMS))
        parts.append(sentence + " ")
        count += len(sentence.split())
    return "".join(parts).strip()


def make_entries(n: int, *, seed: int, body: BodyPolicy = FULL) -> list[Entry]:
    """`n` runbook-like entries over 20 domains, reproducible from `seed`."""
    rng = random.Random(seed)
    domains = list(DOMAINS)
    services = max(1, n // ENTRIES_PER_SERVICE)  # entity terms grow with the knowledge base
    entries = []
    for i in range(n):
        d = domains[i % len(domains)]
        c, s = rng.choice(DOMAINS[d]), rng.choice(SYMPTOMS)
        svc = service_name(rng.randrange(services))
        m = _metric(d, c, s)
        keywords = [c, s, svc, *rng.sample(OPS_TERMS, rng.randint(0, 7))]
        entities = [svc, m] + ([rng.choice(DOMAINS[d])] if rng.random() < 0.5 else [])
        title = f"{c.capitalize()} {s} on {svc}"
        entries.append(
            Entry(
                entry_id=f"{d}/{_camel(c)}{_camel(s)}-{i:06d}",
                title=title,
                domain=d,
                text=_body(rng, rng.randint(body.low, body.high), d, c, s, svc, m),
                keywords=tuple(dict.fromkeys(keywords)),
                entities=tuple(dict.fromkeys(entities)),
                metadata={"severity": rng.choice(("critical", "warning", "info"))},
            )
        )
    return entries


def make_corpus(n: int, *, seed: int, body: BodyPolicy = FULL) -> Corpus:
    return Corpus(root=f"synthetic:{n}:{seed}", entries=tuple(make_entries(n, seed=seed, body=body)))


def write_corpus(entries: list[Entry], root: Path) -> Path:
    """The entries as a corpus folder of markdown files with YAML frontmatter (one folder per domain), as a user's
    knowledge base is: load_corpus reads them back as the same entries."""
    for e in entries:
        path = root / f"{e.entry_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"title": e.title, "domain": e.domain, "keywords": list(e.keywords), "entities": list(e.entities), **e.metadata}
        path.write_text(frontmatter.dumps(frontmatter.Post(e.text, **meta)) + "\n", encoding="utf-8")
    return root


def make_queries(entries: list[Entry], count: int, *, seed: int, exclude: set[str] | None = None) -> list[str]:
    """`count` distinct alert-like queries from the knowledge base's own vocabulary (none in `exclude`)."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out: list[str] = []
    attempts = 0
    while len(out) < count and attempts < count * 50:
        attempts += 1
        e = rng.choice(entries)
        c, s, svc = e.keywords[0], e.keywords[1], e.keywords[2]
        if rng.random() < 0.3:  # a symptom the entry does not have: the query is not a copy of a title
            s = rng.choice(SYMPTOMS)
        _, template = rng.choice(QUERY_TEMPLATES)
        q = template.format(s=s, svc=svc, c=c, d=e.domain, svcword=rng.choice(SERVICES))
        if q not in seen:
            seen.add(q)
            out.append(q)
    return out


def invocation_rows(
    templates: pa.Table, n: int, *, seed: int, start_s: float, span_days: float = 30.0, offset: int = 0
) -> pa.Table:
    """`n` tool_invocation rows: real recorded rows (`templates`) repeated, with new ids, times and tags. Each id
    leads with its call's millisecond, then `offset + i`: unique, and sorted in time as recorded ones (UUIDv7) are."""
    gen = np.random.default_rng(seed)
    picked = templates.take(pa.array(gen.integers(0, templates.num_rows, n)))
    times = np.sort(start_s + gen.random(n) * span_days * 86400.0)
    ids = [f"{int(t * 1000):012x}7{offset + i:019x}" for i, t in enumerate(times)]  # UUIDv7-like: time first
    tags = np.array([f"run-{i:02d}" for i in range(12)] + ["default"])[gen.integers(0, 13, n)]
    latency = np.round(gen.lognormal(np.log(25.0), 0.5, n), 3)
    cols = {
        "id": pa.array(ids),
        "created_at": pa.array((times * 1e6).astype("int64"), pa.timestamp("us", tz="UTC")),
        "tool_name": picked["tool_name"],
        "input": picked["input"],
        "status": picked["status"],
        "layer": picked["layer"],
        "latency_ms": pa.array(latency),
        "result": picked["result"],
        "retrieval_details": picked["retrieval_details"],
        "error": picked["error"],
        "session_tag": pa.array(tags),
        "domain": picked["domain"],
        "l1_status": picked["l1_status"],
        "fallback": picked["fallback"],
        "top_entry_id": picked["top_entry_id"],
    }
    if "support" in templates.column_names:  # the recorded rows' few support values, spread over 0-1 as traffic varies
        cols.update(traffic_parts(gen, picked, n))
    for name in templates.column_names:  # the typed parts a recorder takes with each row (retrieval.records.parts)
        cols.setdefault(name, picked[name])
    return pa.table(cols)


NO_SUPPORT_SHARE = 0.1  # calls that carry no support estimate (support NULL)
COLLECTIONS = ("Runbooks", "Alerts")  # the collections named where a recorded row names none


def traffic_parts(gen: np.random.Generator, picked: pa.Table, n: int) -> dict[str, pa.Array]:
    """The traffic columns of `n` rows: support spread over 0-1 (some NULL) with its claim and fit, and a collection."""
    missing = gen.random(n) < NO_SUPPORT_SHARE
    support = np.round(gen.beta(2.0, 1.5, n), 4)
    collection = pc.coalesce(picked["collection"], pa.array(np.array(COLLECTIONS)[gen.integers(0, len(COLLECTIONS), n)]))
    return {
        "support": pa.array(support, mask=missing),
        "supported": pa.array(support >= 0.5, mask=missing),
        "support_fit": pa.array(np.where(gen.random(n) < 0.8, "self:bench00000001", "self:bench00000002"), mask=missing),
        "collection": collection,
    }
