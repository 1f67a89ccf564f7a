#!/usr/bin/env python3
"""Lists AST-guided mutations of Python source files, for `flotilla synth`.

    python3 py_mutate.py ROOT FILE...

Each FILE (relative to ROOT) is parsed with the `ast` module; every mutation found is printed
as one JSON object per line:
    {"file", "kind", "line", "start", "end", "replacement", "description"}
where start/end are byte offsets into the file and replacement is the text that takes their
place. Kinds: flip_compare, flip_boolean, off_by_one, drop_return, drop_branch, swap_args.
Files that do not parse are reported as {"file", "error"} and skipped.
"""
import ast
import json
import sys

COMPARE_FLIP = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">",
                "is": "is not", "is not": "is", "in": "not in", "not in": "in"}
BOOL_FLIP = {"and": "or", "or": "and"}


class Mutations:
    def __init__(self, rel, data):
        self.rel = rel
        self.data = data
        self.line_start = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                self.line_start.append(i + 1)
        self.out = []

    def offset(self, line, col):
        return self.line_start[line - 1] + col

    def span(self, node):
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def add(self, kind, line, start, end, replacement, description):
        self.out.append({"file": self.rel, "kind": kind, "line": line, "start": start, "end": end,
                         "replacement": replacement, "description": description})

    def between(self, left, right, words):
        """Finds the operator text between two nodes: (start, end, text) or None."""
        a = self.span(left)[1]
        b = self.span(right)[0]
        gap = self.data[a:b].decode("utf-8", "replace")
        if "#" in gap or "\\" in gap:
            return None
        core = " ".join(gap.replace("(", " ").replace(")", " ").split())
        if core not in words:
            return None
        i = gap.find(core.split()[0])
        j = gap.rfind(core.split()[-1]) + len(core.split()[-1])
        return a + len(gap[:i].encode()), a + len(gap[:j].encode()), core

    def visit(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and len(node.ops) == 1:
                found = self.between(node.left, node.comparators[0], COMPARE_FLIP)
                if found:
                    s, e, op = found
                    self.add("flip_compare", node.lineno, s, e, COMPARE_FLIP[op],
                             "comparison '%s' flipped to '%s'" % (op, COMPARE_FLIP[op]))
            elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
                found = self.between(node.values[0], node.values[1], BOOL_FLIP)
                if found:
                    s, e, op = found
                    self.add("flip_boolean", node.lineno, s, e, BOOL_FLIP[op],
                             "boolean '%s' flipped to '%s'" % (op, BOOL_FLIP[op]))
            elif (isinstance(node, ast.Constant) and type(node.value) is int and
                  node.lineno == node.end_lineno):
                s, e = self.span(node)
                text = self.data[s:e].decode()
                if text.isdigit():
                    self.add("off_by_one", node.lineno, s, e, str(node.value + 1),
                             "constant %s changed to %d" % (text, node.value + 1))
            elif isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.While)):
                self.statements(node.body)
                if isinstance(node, ast.If) and node.orelse:
                    self.statements(node.orelse)

    def call(self, node):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name == "range" and node.args and not node.keywords:
            stop = node.args[0] if len(node.args) == 1 else node.args[1]
            s, e = self.span(stop)
            text = self.data[s:e].decode()
            self.add("off_by_one", node.lineno, s, e, "(%s) + 1" % text,
                     "range stop '%s' made one larger" % text)
        if (len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2])):
            a, b = node.args[0], node.args[1]
            sa, ea = self.span(a)
            sb, eb = self.span(b)
            ta, tb = self.data[sa:ea], self.data[sb:eb]
            if ta != tb and ea <= sb:
                mid = self.data[ea:sb]
                self.add("swap_args", node.lineno, sa, eb, (tb + mid + ta).decode(),
                         "arguments '%s' and '%s' swapped" % (ta.decode(), tb.decode()))

    def statements(self, body):
        for stmt in body:
            if len(body) < 2 and not isinstance(stmt, ast.Return):
                continue
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                s, e = self.span(stmt)
                self.add("drop_return", stmt.lineno, s, e, "pass",
                         "return statement at line %d dropped" % stmt.lineno)
            elif isinstance(stmt, ast.If) and len(body) >= 2:
                s, e = self.span(stmt)
                indent = self.data[self.line_start[stmt.lineno - 1]:s]
                if indent.strip():
                    continue
                self.add("drop_branch", stmt.lineno, s, e, "pass",
                         "if statement at line %d dropped" % stmt.lineno)


def main():
    root = sys.argv[1]
    for rel in sys.argv[2:]:
        with open(root + "/" + rel, "rb") as f:
            data = f.read()
        try:
            tree = ast.parse(data, rel)
        except (SyntaxError, ValueError) as err:
            print(json.dumps({"file": rel, "error": str(err)}))
            continue
        m = Mutations(rel, data)
        m.visit(tree)
        for item in m.out:
            print(json.dumps(item))


if __name__ == "__main__":
    main()
