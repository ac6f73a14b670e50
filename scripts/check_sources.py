#!/usr/bin/env python3
"""Fails on a source file over 800 lines that does not say why, and on a
"zero.<name>" string outside the zero dialect's declarations.

    check_sources.py [ROOT]

Walks the project's own sources under ROOT (default: this checkout):
dialects/, include/, lib/, runtime/ (not runtime/third_party, vendored),
tools/, bench/, scripts/ and test/unit/, files ending in .cpp, .h, .cu,
.cuh, .td, .def, .proto, .py or .sh. A file over 800 lines must carry a
"Size" paragraph in its first 40 lines (a comment line starting "Size:"; no
line count, which would go stale with the next edit) saying why it is one file and what splitting is left
(docs/architecture.md). Prints each file that lacks one as PATH: N lines.

The zero and zrt dialects' discardable attributes are declared once, in
dialects/zero/ZeroDialect.td and dialects/zrt/ZrtOps.td (discardableAttrs);
C++ reaches them through the generated helpers (zero::attrs(op)
.get<Name>AttrHelper(), or ZeroDialect::<Name>AttrHelper::getNameStr()). A
C++ string literal that is exactly "zero.<name>" or "zrt.<name>" spells one
by hand: each is printed as PATH:LINE.
Exits 1 if either check finds something.
"""
import os, re, sys

LIMIT = 800
root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))
folders = ["dialects", "include", "lib", "runtime", "tools", "bench", "scripts",
           os.path.join("test", "unit")]
skip = {os.path.join("runtime", "third_party")}
suffixes = (".cpp", ".h", ".cu", ".cuh", ".td", ".def", ".proto", ".py", ".sh")
reason = re.compile(r"^\s*(//|#)\s*Size:")
spelled = re.compile(r'"(?:zero|zrt)\.[A-Za-z_][A-Za-z_0-9]*"')
cxx = (".cpp", ".h", ".cu", ".cuh")

files, long, unexplained, literals = 0, [], [], []
for folder in folders:
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames
                             if os.path.join(rel, d) not in skip and d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(suffixes):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
            files += 1
            if name.endswith(cxx):
                literals += [f"{os.path.relpath(path, root)}:{n}: {m.group(0)}"
                             for n, l in enumerate(lines, 1) for m in spelled.finditer(l)]
            if len(lines) <= LIMIT:
                continue
            long.append(path)
            if not any(reason.match(l) for l in lines[:40]):
                unexplained.append(f"{os.path.relpath(path, root)}: {len(lines)} lines")
for u in unexplained + literals:
    print(u)
print(f"check_sources: {files} files, {len(long)} over {LIMIT} lines, "
      f"{len(unexplained)} without a reason, {len(literals)} zero.*/zrt.* attribute names spelled by hand")
sys.exit(1 if unexplained or literals else 0)
