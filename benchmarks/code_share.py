"""How much of the executable code lives in the chapters' notebooks rather than in the package.

Counts non-blank, non-comment code lines of every chapter's code cells (the ``colab-setup`` cell
left out; ``%``/``!`` lines are not code) against the package's non-blank, non-comment lines
outside docstrings, with and without the exercise cells (tagged ``exercise``). Usage::

    python3 benchmarks/code_share.py
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def notebook_lines(source: str) -> int:
    """Code lines of one cell: non-blank lines that are not comments or IPython magics/shell escapes."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith(("#", "%", "!")))


def package_lines(path: Path) -> int:
    """Non-blank, non-comment lines of a module outside its docstrings."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(node):
            first = node.body[0]
            docstrings.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and number not in docstrings)


def main() -> None:
    package = sum(package_lines(path) for path in (ROOT / "gitutor").rglob("*.py"))
    chapters = {"with exercises": 0, "without exercises": 0}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code" or cell.get("id") == "colab-setup":
                continue
            lines = notebook_lines("".join(cell["source"]))
            chapters["with exercises"] += lines
            if "exercise" not in cell["metadata"].get("tags", []):
                chapters["without exercises"] += lines
    print(f"package: {package} lines")
    for name, lines in chapters.items():
        print(f"notebooks {name}: {lines} lines = {lines / (package + lines):.0%} of all executable code")


if __name__ == "__main__":
    main()
