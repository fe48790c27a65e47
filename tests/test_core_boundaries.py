import ast

from retrieval.config import REPO_ROOT


def test_retrieval_never_imports_streamlit():
    offenders = []
    for path in sorted((REPO_ROOT / "retrieval").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "streamlit" or n.startswith("streamlit.") for n in names):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert offenders == []


MACHINE_PATHS = ("/" + "work/", "/" + "root/")  # spelt apart so that this file does not match itself


def test_no_machine_paths_in_tracked_text():
    bad = []
    for path in REPO_ROOT.rglob("*"):
        if path.is_file() and ".git" not in path.parts and path.suffix in {".py", ".md", ".sh", ".yaml", ".txt", ".ini"}:
            text = path.read_text(encoding="utf-8", errors="ignore")
            if any(p in text for p in MACHINE_PATHS):
                bad.append(str(path.relative_to(REPO_ROOT)))
    assert bad == []


def _retrieval_imports(path, module: str) -> set[str]:
    """The retrieval.* modules one file imports (anywhere in it, function-level imports included)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "retrieval")
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if target.split(".")[0] != "retrieval":
                continue
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)  # `from . import x` may name a module
    return found


def _walk(start: str) -> tuple[set[str], list[str]]:
    """The retrieval modules `start` reaches through its imports, transitively, and the imports of retrieval.lab on the way."""

    def file_of(module: str):
        parts = module.split(".")
        for candidate in (REPO_ROOT.joinpath(*parts).with_suffix(".py"), REPO_ROOT.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
        return None

    seen: set[str] = set()
    todo, reached_lab = [start], []
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = file_of(module)
        if path is None:
            continue  # a name imported from a module, not a module
        for imported in _retrieval_imports(path, module):
            if imported == "retrieval.lab" or imported.startswith("retrieval.lab."):
                reached_lab.append(f"{module} imports {imported}")
            todo.append(imported)
    return seen, reached_lab


def test_the_tool_never_imports_the_lab():
    """The tool (the Python API the CLI, the app and the MCP server open) and everything it imports, transitively,
    stay clear of retrieval.lab."""
    seen, reached_lab = _walk("retrieval.serve.api")
    assert "retrieval.records.invocations" in seen and "retrieval.core.hints" in seen  # the walk follows the tool's imports
    assert reached_lab == []
    assert _walk("retrieval.cli")[1]  # and it sees the lab where it is imported: the CLI's commands


def _module_of(path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(module: str) -> bool:
    parts = module.split(".")
    return REPO_ROOT.joinpath(*parts).with_suffix(".py").is_file() or REPO_ROOT.joinpath(*parts, "__init__.py").is_file()


def _runtime_imports(path, module: str) -> set[str]:
    """The retrieval modules one file imports when it runs: module-level and function-level imports both,
    those under `if TYPE_CHECKING:` not (its `else:` branch does run). `from pkg import name` counts as
    importing the module pkg.name when there is one, else pkg."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "retrieval")
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if target.split(".")[0] == "retrieval":
                for alias in node.names:
                    found.add(f"{target}.{alias.name}" if _is_module(f"{target}.{alias.name}") else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found - {module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in `graph` (module -> modules it imports), first module repeated at the end; None if none."""
    state: dict[str, str] = {}  # module -> "open" while on the path, "done" once all it reaches is explored
    path: list[str] = []

    def dfs(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == "open":
                return [*path[path.index(imported) :], imported]
            if imported not in state and (found := dfs(imported)):
                return found
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := dfs(module)):
            return found
    return None


def test_runtime_imports_count_function_level_ones_and_leave_out_type_checking(tmp_path):
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"
        "from .store import indexing\n"
        "from .core.corpus import Corpus\n"
        "if TYPE_CHECKING:\n"
        "    from .store.weaviate_store import KnowledgeStore\n"
        "else:\n"
        "    from .errors import L1Error\n"
        "def f():\n"
        "    from .lab import runs\n"
        "    import retrieval.core.hints\n",
        encoding="utf-8",
    )
    assert _runtime_imports(source, "retrieval.example") == {
        "retrieval.store.indexing",
        "retrieval.core.corpus",
        "retrieval.errors",
        "retrieval.lab.runs",
        "retrieval.core.hints",
    }


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_retrieval_has_no_import_cycles():
    """No module of retrieval/ imports, directly or through others, one that imports it back when run."""
    graph = {_module_of(p): _runtime_imports(p, _module_of(p)) for p in sorted((REPO_ROOT / "retrieval").rglob("*.py"))}
    assert "retrieval.bench.app" in graph["retrieval.bench.runner"]  # the graph is built from the real files
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# What each package of retrieval/ may import when it runs (besides itself and the ground floor: types, errors, and
# config, which stands on them alone): the core needs no service's implementation, the store reaches Weaviate's
# process through the engine, the tool's packages never reach the lab, the benches or serving.
ALLOWED = {
    "types": set(),
    "core": set(),
    "engine": set(),
    "store": {"core", "engine"},
    "records": {"core"},
    "evals": {"core", "store", "records"},
    "serve": {"core", "store", "engine", "records", "services"},
    "lab": {"core", "store", "engine", "records", "evals", "services", "progress"},
    "bench": {"core", "store", "engine", "records", "evals", "serve", "services", "traffic"},
    # the command line sits on top: it may import every package, and none imports it (see below)
    "cli": {"core", "store", "engine", "records", "evals", "serve", "lab", "bench", "traffic", "services", "progress"},
}
SHARED = {"config", "errors", "types"}
GROUND = {"retrieval.errors": set(), "retrieval.types": {"types", "errors"}, "retrieval.config": {"types", "errors"}}
SERVICES = ("duckdb", "weaviate", "onnxruntime", "streamlit")  # what the core must not load, through any module


def _package_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else ""


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, imports in sorted(graph.items()):
        package = _package_of(module)
        if package not in ALLOWED:
            continue  # the top-level modules (cli, services, config) wire the packages together
        allowed = ALLOWED[package] | SHARED | {package}
        bad += [f"{module} imports {i}" for i in sorted(imports) if _package_of(i) not in allowed]
    return bad


def _graph(type_only: bool = False) -> dict[str, set[str]]:
    """module -> the retrieval modules it imports when run (with `type_only`, also those under TYPE_CHECKING)."""
    read = _all_imports if type_only else _runtime_imports
    return {_module_of(p): read(p, _module_of(p)) for p in sorted((REPO_ROOT / "retrieval").rglob("*.py"))}


def _all_imports(path, module: str) -> set[str]:
    """Every retrieval module a file names in an import, runtime or type-only (a reader follows both)."""
    found = {m for m in _retrieval_imports(path, module) if _is_module(m)}
    return found - {module}


def _third_party(path) -> set[str]:
    """The top-level names of the modules outside the project that one file imports (anywhere in it)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - {"retrieval", "__future__"}


def _reached(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_layer_rule_finds_a_violation():
    graph = {"retrieval.core.lookup": {"retrieval.store.weaviate_store", "retrieval.core.hints", "retrieval.config"}}
    assert _layer_violations(graph) == ["retrieval.core.lookup imports retrieval.store.weaviate_store"]


def test_packages_import_only_the_layers_below():
    """core imports no store, records, lab or serving internals; nothing of the tool imports the lab or the benches."""
    graph = _graph()
    assert set(ALLOWED) <= {_package_of(m) for m in graph}  # every package named is a real one
    assert _layer_violations(graph) == []


def _imports_of_the_cli(graph: dict[str, set[str]]) -> list[str]:
    """`module imports retrieval.cli...` for each module outside the command line that imports it (`python -m
    retrieval`, retrieval/__main__.py, starts it)."""
    bad = []
    for module, imports in sorted(graph.items()):
        if _package_of(module) != "cli" and module != "retrieval.__main__":
            bad += [f"{module} imports {i}" for i in sorted(imports) if _package_of(i) == "cli"]
    return bad


def test_nothing_in_retrieval_imports_the_command_line():
    """The command line is the top layer: no package of retrieval imports retrieval.cli, not even for a type."""
    graph = _graph(type_only=True)
    assert "retrieval.cli.commands" in graph["retrieval.cli"] and "retrieval.cli" in graph["retrieval.__main__"]
    assert _imports_of_the_cli(graph) == []
    assert _imports_of_the_cli({"retrieval.lab.runs": {"retrieval.cli.runs", "retrieval.config"}}) == [
        "retrieval.lab.runs imports retrieval.cli.runs"
    ]


def _ground_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, imports in sorted(graph.items()):
        floor = next((g for g in GROUND if module == g or module.startswith(g + ".")), None)
        if floor is not None:
            bad += [f"{module} imports {i}" for i in sorted(imports) if _package_of(i) not in GROUND[floor]]
    return bad


def test_the_ground_floor_stands_on_nothing_but_itself():
    """types and errors import nothing of the project but the ground floor, and config only the ground floor: every
    layer may stand on them without loading another layer (through config either)."""
    graph = _graph(type_only=True)
    assert graph["retrieval.config"] and _ground_violations(graph) == []
    # the rule sees a config that reaches the store
    assert _ground_violations({"retrieval.config": {"retrieval.store.models", "retrieval.types.models"}}) == [
        "retrieval.config imports retrieval.store.models"
    ]


def _services_reached(module: str, graph: dict[str, set[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for reached in sorted(_reached(module, graph)):
        path = REPO_ROOT.joinpath(*reached.split(".")).with_suffix(".py")
        if not path.is_file():
            path = REPO_ROOT.joinpath(*reached.split("."), "__init__.py")
        for name in sorted(_third_party(path) & set(SERVICES)):
            out.setdefault(name, []).append(reached)
    return out


def test_the_core_reaches_no_service_through_any_import():
    """Followed through every retrieval module it imports (type-only imports included), no core module reaches a file
    that imports DuckDB, Weaviate, onnxruntime or Streamlit."""
    graph = _graph(type_only=True)
    core = [m for m in graph if _package_of(m) == "core"]
    assert "retrieval.core.lookup" in core and "retrieval.types.options" in _reached("retrieval.core.lookup", graph)
    assert {m: found for m in core if (found := _services_reached(m, graph))} == {}
    # the walk does see a service where one is reached: the store's
    assert "weaviate" in _services_reached("retrieval.store.weaviate_store", graph)


def test_the_core_reads_options_never_the_settings_file():
    """The core takes LookupOptions, built at the edge by Settings.options(): no core module reaches retrieval.config."""
    graph = _graph(type_only=True)
    reaching = sorted(m for m in graph if _package_of(m) == "core" and "retrieval.config" in _reached(m, graph))
    assert reaching == []
    assert "retrieval.config" in _reached("retrieval.evals.evaluation", graph)  # the walk sees config where it is read


def test_importing_the_lookup_loads_no_service():
    """A fresh interpreter that imports the lookup (python -X importtime -c "import retrieval.core.lookup") holds no
    DuckDB, Weaviate, onnxruntime or Streamlit module afterwards."""
    import subprocess
    import sys

    code = "import sys, retrieval.core.lookup; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "retrieval" in loaded and "numpy" in loaded  # the probe reads the modules the import loaded
    assert loaded & set(SERVICES) == set()


def test_no_import_cycles_counting_type_only_imports():
    """Nor when the imports under TYPE_CHECKING count: a reader follows those too."""
    graph = _graph(type_only=True)
    assert graph["retrieval.store.partition"] is not None
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# What the app's folders may import of retrieval/: pages reach the store and Weaviate's process only through
# app_support, and neither reaches the benches, serving or the command line.
APP_ALLOWED = {
    "pages": {"core", "evals", "lab", "records", "traffic", "types", "errors", "config"},
    "app_support": {"core", "store", "engine", "evals", "lab", "records", "traffic", "services", "types", "errors", "config"},
}


def _app_violations(files: dict[str, set[str]]) -> list[str]:
    """`folder/file imports retrieval.x` for each import of a package its folder may not import."""
    bad = []
    for name, imports in sorted(files.items()):
        allowed = APP_ALLOWED[name.split("/")[0]]
        bad += [f"{name} imports {i}" for i in sorted(imports) if i.split(".")[1] not in allowed]
    return bad


def _app_imports() -> dict[str, set[str]]:
    files = {}
    for folder in APP_ALLOWED:
        for path in sorted((REPO_ROOT / folder).glob("*.py")):
            found = _retrieval_imports(path, f"{folder}.{path.stem}")
            files[f"{folder}/{path.name}"] = {m for m in found if _is_module(m) and m.count(".") >= 1}
    return files


def test_app_layer_rule_finds_a_violation():
    files = {"pages/corpus.py": {"retrieval.store.corpus_status", "retrieval.evals.sets"}}
    assert _app_violations(files) == ["pages/corpus.py imports retrieval.store.corpus_status"]


def test_pages_reach_the_store_only_through_app_support():
    """Pages import no store or engine module; app_support imports no bench, serving or command line."""
    files = _app_imports()
    assert "retrieval.store.corpus_status" in files["app_support/corpus_view.py"]  # the walk reads the real files
    assert any(name.startswith("pages/") for name in files)
    assert _app_violations(files) == []


def test_app_support_never_imports_a_page():
    bad = []
    for path in sorted((REPO_ROOT / "app_support").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pages":
                bad.append(f"app_support/{path.name}:{node.lineno}")
    assert bad == []
