#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety) over the code that uses Abseil's lock
# annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...): every source file that
# carries an annotation or includes a header that does is compiled with `clang++ -fsyntax-only`
# and the flags CMake gave it in the build's compile_commands.json (scripts/build.sh makes it;
# so are the generated protobuf headers). A warning fails the step. No objects are written, so
# the cost is the front end of a few files. The same warnings in a whole clang build:
# -DFLOTILLA_THREAD_SAFETY=ON (CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
exec python3 - "$BUILD_DIR" <<'PY'
import json, os, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

build = sys.argv[1]
db = json.load(open(os.path.join(build, "compile_commands.json")))
annotation = re.compile(r"\bABSL_(GUARDED_BY|PT_GUARDED_BY|EXCLUSIVE_LOCKS_REQUIRED|SHARED_LOCKS_REQUIRED|"
                        r"LOCKS_EXCLUDED|LOCK_RETURNED|EXCLUSIVE_LOCK_FUNCTION|UNLOCK_FUNCTION|ACQUIRED_AFTER)\b")
root = os.getcwd()
skip_dirs = {".git", "node_modules", "var"}
annotated = set()
for top in sorted(os.listdir(root)):
    if top in skip_dirs or top.startswith("build") or not os.path.isdir(top):
        continue
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x not in skip_dirs]
        for f in files:
            if f.endswith((".h", ".cc")):
                p = os.path.join(d, f)
                with open(p, errors="replace") as fh:
                    if annotation.search(fh.read()):
                        annotated.add(os.path.relpath(p, root))
headers = {p for p in annotated if p.endswith(".h")}
# How a header is included: "flotilla/x/y.h" for public headers, its file name for private ones.
include_names = {}
for h in headers:
    m = re.search(r"/include/(flotilla/.*)$", h)
    include_names[m.group(1) if m else os.path.basename(h)] = h
include_re = re.compile(r'#include "([^"]+)"')

def wanted(src):
    rel = os.path.relpath(src, root)
    if rel in annotated:
        return True
    with open(src, errors="replace") as fh:
        for inc in include_re.findall(fh.read()):
            if inc in include_names or os.path.basename(inc) in include_names:
                return True
    return False

drop = re.compile(r"^(-Werror.*|-W.*|-o|-c|-MD|-MT|-MF|-fno-semantic-interposition|-fconcepts-diagnostics-depth=.*)$")
jobs = []
for e in db:
    src = e["file"]
    if not src.endswith(".cc") or "/tests/" in src or not src.startswith(root) or "/build" in src[len(root):]:
        continue
    if not wanted(src):
        continue
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    keep, i = [], 1
    while i < len(args):
        a = args[i]
        if a in ("-o", "-MT", "-MF"):
            i += 2
            continue
        if not drop.match(a) and a != src:
            keep.append(a)
        i += 1
    cmd = ["clang++", "-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
           "-Wno-unknown-warning-option"] + keep + [src]
    jobs.append((os.path.relpath(src, root), cmd, e["directory"]))

def run(job):
    rel, cmd, cwd = job
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return rel, r.returncode, r.stderr

failed = 0
with ThreadPoolExecutor(max_workers=int(os.environ.get("JOBS", os.cpu_count() or 2))) as pool:
    for rel, rc, err in pool.map(run, sorted(jobs)):
        if rc != 0:
            failed += 1
            sys.stderr.write(err)
        print(f"thread-safety: {rel}: {'ok' if rc == 0 else 'FAILED'}")
print(f"thread-safety: {len(jobs)} files, {failed} failed")
sys.exit(1 if failed or not jobs else 0)
PY
