#!/usr/bin/env python3
"""Fails on a doc reference to a file that is not in the repository.

    check_doc_refs.py [ROOT]

Reads README.md and docs/*.md under ROOT (default: this checkout) and checks
every relative Markdown link target and every `code span` that names a path
under one of the repository's top-level folders (docs/, runtime/, lib/, ...):
each must exist. Spans with placeholders (<...>, *, {...}, NAME-style
capitals after the folder) are patterns, not paths, and are skipped; so are
paths under build trees and ../shared (beside the checkout, not in it).
Prints each missing reference as FILE:LINE: REF and exits 1 if there is one.
"""
import os, re, sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))
tops = {d for d in os.listdir(root)
        if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")
        and not d.startswith("build")}
docs = [os.path.join(root, "README.md")] + sorted(
    os.path.join(root, "docs", f) for f in os.listdir(os.path.join(root, "docs"))
    if f.endswith(".md"))

link = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
span = re.compile(r"`([^`\s]+)`")


def pattern(ref):
    return any(c in ref for c in "<>*{}$|") or re.search(r"/[A-Z][A-Z_]+(?:[./-]|$)", ref)


missing, checked = [], 0
for doc in docs:
    base = os.path.dirname(doc)
    for n, line in enumerate(open(doc, encoding="utf-8"), 1):
        for m in link.finditer(line):
            ref = m.group(1)
            if re.match(r"[a-z]+:", ref) or pattern(ref):
                continue
            checked += 1
            if not os.path.exists(os.path.normpath(os.path.join(base, ref))):
                missing.append(f"{os.path.relpath(doc, root)}:{n}: {ref}")
        for m in span.finditer(line):
            ref = m.group(1).rstrip(".,:;)")
            first = ref.split("/", 1)[0]
            if "/" not in ref or first not in tops or pattern(ref):
                continue
            path = ref.split(":", 1)[0]  # file.cpp:123
            checked += 1
            if not os.path.exists(os.path.join(root, path)):
                missing.append(f"{os.path.relpath(doc, root)}:{n}: {ref}")
for m in missing:
    print(m)
print(f"check_doc_refs: {len(docs)} docs, {checked} references to files, "
      f"{len(missing)} missing")
sys.exit(1 if missing else 0)
