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
    """retrieval.lookup and everything it imports, transitively, stay clear of retrieval.lab."""
    seen, reached_lab = _walk("retrieval.lookup")
    assert "retrieval.invocations" in seen and "retrieval.hints" in seen  # the walk follows the tool's imports
    assert reached_lab == []
    assert _walk("retrieval.cli")[1]  # and it sees the lab where it is imported: the CLI's commands
