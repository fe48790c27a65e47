"""Every session-state key of the app, in one place. A key in URL_KEYS is also its widget's query parameter,
so a URL such as `/?q=disk+full&k=3&mode=hybrid` reopens a view."""

# Shared settings (sidebar, every page)
TOP_K = "k"
L1_ON = "l1"
MODE = "mode"
ALPHA = "alpha"
CORPUS = "corpus"
MODEL = "model"  # the embedding model (each has its own collection)
# the ranking settings a sweep varies, in the sidebar's "Fusion weights, depth and support" expander
VECTOR_WEIGHT = "vw"
LEXICAL_WEIGHT = "lw"
L0_WEIGHT = "l0w"
NAME_WEIGHT = "nw"
CANDIDATE_DEPTH = "depth"
MISSING_SCORE = "missing"
SUPPORT = "support"
RANKING_KEYS = (VECTOR_WEIGHT, LEXICAL_WEIGHT, L0_WEIGHT, NAME_WEIGHT, CANDIDATE_DEPTH, MISSING_SCORE, SUPPORT)
CONTEXT = "_context"  # the AppContext app.py opened for this run (the page takes it)
FRAME_RETRY = "_frame_retry"  # a page ran without app.py once: see resources.page_context

# Lookup
QUERY = "q"
LAST_LOOKUP = "_lookup_last"  # (view key, LookupResult, recorded): a rerun of the same view does not run again
RUN_LOOKUP = "_lookup_run"  # set by Enter in the query box or Run again: this run records an invocation
# Why not this entry? (under Lookup's results). `why` is a plain query parameter, not a bound widget: the picker shows
# "title — id" and a bound box would write that into the URL, where links (Evaluate's misses) put the entry id.
WHY = "why"  # /?q=...&why=<entry id> opens Lookup with that entry explained
WHY_PICK = "why_pick"  # the picker's widget key
WHY_SEEN = "_why_seen"  # the `why` of the URL the picker last followed: a new one (a link) moves the picker
WHY_TRACE = "_why_trace"  # (view key, EntryTrace or error text): a rerun of the same view does not explain again
WHY_TAKE = "_why_take"  # (view key, Remedies or error text): what it would take, once asked for

# Filter comparison
COMPARE_QUERY = "cq"
COMPARE_KIND = "ck"  # which L1 query the filter comparison runs
EVAL_SET = "eval"
LAST_EVAL_SET = "_last_eval_set"  # (corpus folder, label): the user's last eval set, preselected on every page
SET_COMPARISON = "_set_comparison"  # (view key, list[CaseFilterDelta])

# Evaluate
EVAL_RUN_SET = "es"
EVAL_CONFIGS = "eval_configs"
EVAL_RECORD = "eval_record"
EVAL_REPORT = "_eval_report"  # (view key, EvalReport, saved run_id or None)
EVAL_SCROLL = "_eval_scroll"  # set by a finished run: the page brings its results into view once

# Traffic
TRAFFIC_RANGE = "traffic_range"
TRAFFIC_DATES = "traffic_dates"
TRAFFIC_SESSIONS = "traffic_sessions"
TRAFFIC_COLLECTION = "traffic_collection"

# Invocations
INV_RANGE = "inv_range"
INV_DATES = "inv_dates"
INV_LAYERS = "inv_layers"
INV_DOMAINS = "inv_domains"
INV_STATUSES = "inv_statuses"
INV_SESSIONS = "inv_sessions"
INV_FALLBACK = "inv_fallback"
INV_TEXT = "inv_text"
INV_TABLE = "inv_table"
INV_LIVE = "inv_live"  # follow live traffic: the dashboard reloads itself
INV_SINGLE_WORDS = "inv_single_words"  # the top L0 keywords chart counts single title words too
QUEUE_FIRST = "_queue_first"  # invocation ids the judging queue shows first (the calls a replay moved most)
QUEUE_STRATEGY = "queue_strategy"
QUEUE_TARGET = "queue_target"
QUEUE_TABLE = "queue_table"
SQL_EXAMPLE = "sql_example"
SQL_TEXT = "sql_text"
SQL_ROWS = "sql_rows"
SQL_TIMEOUT = "sql_timeout_ms"
SQL_RUN = "sql_run"

# Corpus
CORPUS_ENTRY = "entry"  # the entry the Corpus page opens: /corpus?entry=kubernetes/KubePodCrashLooping
CORPUS_TABLE = "corpus_table"  # the entries table: a clicked row opens that entry
INGEST_RESULT = "_ingest_result"
ADD_FOLDER_PATH = "add_folder_path"  # the folder typed under "Add a folder"
ADD_FOLDER_CHECKED = "_add_folder_checked"  # (path typed, Corpus or CorpusError): the last check of a folder
CORPUS_SWITCH = "_corpus_switch"  # a corpus label the sidebar's Corpus choice takes on the next run (a folder just added)

URL_KEYS = (
    TOP_K,
    L1_ON,
    MODE,
    ALPHA,
    CORPUS,
    MODEL,
    *RANKING_KEYS,
    QUERY,
    COMPARE_QUERY,
    COMPARE_KIND,
    EVAL_SET,
    EVAL_RUN_SET,
    CORPUS_ENTRY,
)
TRAFFIC_SETS = "traffic_sets"
