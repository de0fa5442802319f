#!/usr/bin/env python3
"""Checks the user documents: the README stays short enough to read in a few minutes (under
200 lines), and every relative link in README.md and Docs/*.md resolves — the file or folder
exists, and an `#anchor` names a heading of the target (GitHub's anchors: lowercase, spaces
to hyphens, punctuation dropped).

    python3 Scripts/check-docs.py        (make test runs it)

Exits 1 and names each broken link, with its file and line.
"""
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
README_LIMIT = 200
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """The anchors GitHub makes of a Markdown file's headings (code blocks left out)."""
    found, fenced = set(), False
    with open(path) as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
                continue
            heading = re.match(r"#{1,6} +(.*)", line)
            if heading and not fenced:
                text = re.sub(r"[`*_]", "", heading.group(1).strip().lower())
                slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
                base, n = slug, 1
                while slug in found:
                    slug = "%s-%d" % (base, n)
                    n += 1
                found.add(slug)
    return found


def broken_links(path):
    problems, fenced = [], False
    with open(path) as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):      # https:, mailto: — not checked offline
                continue
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = "%s:%d" % (os.path.relpath(path, ROOT), number)
            if not os.path.exists(resolved):
                problems.append("%s: %s does not exist" % (where, target))
            elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                problems.append("%s: %s names no heading of %s" % (where, target, os.path.relpath(resolved, ROOT)))
    return problems


def main():
    problems = []
    readme = os.path.join(ROOT, "README.md")
    with open(readme) as f:
        count = sum(1 for _ in f)
    if count >= README_LIMIT:
        problems.append("README.md has %d lines; keep it under %d (details belong in Docs/)" % (count, README_LIMIT))
    for path in [readme] + sorted(glob.glob(os.path.join(ROOT, "Docs", "*.md"))):
        problems += broken_links(path)
    for problem in problems:
        print("check-docs: " + problem)
    if problems:
        sys.exit(1)
    print("check-docs: README.md has %d lines; every relative link in README.md and Docs/*.md resolves" % count)


if __name__ == "__main__":
    main()
