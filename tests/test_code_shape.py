"""The shape of the code: functions of one screen, thin pages, short docstrings, no history in names or text."""

import ast
import re
from pathlib import Path

from retrieval.config import REPO_ROOT

PRODUCTION = ("retrieval", "app_support", "pages")
FUNCTION_LINES = 80  # a production function
APP_FUNCTION_LINES = 60  # a function of a page or of app_support
PAGE_LINES = 250
DOCSTRING_LINES = 3
# an issue number or a round of work, spelt apart so that this file does not match itself
HISTORY = re.compile(r"\bissue" + r"s? ?#?\d+|(?<![a-z])round[ _-]?(?:one|two|three|four|five|\d+)\b", re.IGNORECASE)


def name_of(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else path.name


def production_files() -> list[Path]:
    return [REPO_ROOT / "app.py"] + [p for folder in PRODUCTION for p in sorted((REPO_ROOT / folder).rglob("*.py"))]


def long_functions(path: Path, limit: int) -> list[str]:
    """`file:line name (n lines)` for each function (method, nested function) of `path` over `limit` lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                out.append(f"{name_of(path)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def long_docstrings(path: Path, limit: int) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and len(doc.strip().splitlines()) > limit:
                out.append(f"{name_of(path)}:{getattr(node, 'lineno', 1)} {getattr(node, 'name', 'module')}")
    return out


def test_the_measures_see_what_they_measure(tmp_path):
    sample = tmp_path / "sample.py"
    body = "\n".join(f"    x = {i}" for i in range(5))
    sample.write_text(f'"""One.\n\nTwo.\nThree.\n"""\n\n\ndef f():\n{body}\n')
    assert [line.split(" ")[1] for line in long_functions(sample, 5)] == ["f"]
    assert long_functions(sample, 6) == []
    assert len(long_docstrings(sample, 3)) == 1 and long_docstrings(sample, 4) == []
    assert HISTORY.search("as of Issue" + " 45") and HISTORY.search("test_pages_round" + "_two")
    assert not HISTORY.search("the issue is the timeout") and not HISTORY.search("rounded to 3 places")


def test_no_production_function_runs_over_one_screen():
    too_long = [f for path in production_files() for f in long_functions(path, FUNCTION_LINES)]
    assert too_long == []


def test_pages_and_app_support_are_thin():
    """Pages read widgets, call the core or app_support and render, in functions of at most ~60 lines."""
    app_files = [
        REPO_ROOT / "app.py",
        *sorted((REPO_ROOT / "pages").glob("*.py")),
        *sorted((REPO_ROOT / "app_support").glob("*.py")),
    ]
    assert [f for path in app_files for f in long_functions(path, APP_FUNCTION_LINES)] == []
    pages = sorted((REPO_ROOT / "pages").glob("*.py"))
    assert len(pages) >= 5
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in pages}
    assert {name: n for name, n in lines.items() if n > PAGE_LINES} == {}


def test_docstrings_say_what_in_a_few_lines():
    assert [d for path in production_files() for d in long_docstrings(path, DOCSTRING_LINES)] == []


def test_no_issue_numbers_or_round_names_in_code_or_test_names():
    files = production_files() + sorted((REPO_ROOT / "tests").rglob("*.py")) + sorted((REPO_ROOT / "scripts").glob("*"))
    found = []
    for path in files:
        if path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="ignore").splitlines(), 1):
                if HISTORY.search(line):
                    found.append(f"{name_of(path)}:{number}")
            if HISTORY.search(path.name):
                found.append(name_of(path))
    assert found == []
