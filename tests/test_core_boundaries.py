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
