#!/usr/bin/env python3
"""Lists the functions of Python source files that a model may rewrite, for `flotilla synth`.

    python3 py_functions.py ROOT FILE...

Each FILE (relative to ROOT) is parsed with the `ast` module; every function and method with
at least two lines of body is printed as one JSON object per line:
    {"file", "name", "line", "start", "end", "indent"}
where start/end are byte offsets of the function from its `def` line's first byte to the end of
its last statement, and indent is the `def` line's leading whitespace. Files that do not parse
are reported as {"file", "error"} and skipped.
"""
import ast
import json
import sys


def functions(rel, data):
    tree = ast.parse(data, rel)
    line_start = [0]
    for i, b in enumerate(data):
        if b == 0x0A:
            line_start.append(i + 1)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.end_lineno - node.lineno < 2:
            continue
        start = line_start[node.lineno - 1]
        end = line_start[node.end_lineno - 1] + node.end_col_offset
        out.append({"file": rel, "name": node.name, "line": node.lineno, "start": start, "end": end,
                    "indent": " " * node.col_offset})
    return out


def main():
    root = sys.argv[1]
    for rel in sys.argv[2:]:
        with open(root + "/" + rel, "rb") as f:
            data = f.read()
        try:
            found = functions(rel, data)
        except (SyntaxError, ValueError) as e:
            print(json.dumps({"file": rel, "error": str(e)}))
            continue
        for fn in found:
            print(json.dumps(fn))


if __name__ == "__main__":
    main()
