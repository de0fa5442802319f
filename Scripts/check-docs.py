#!/usr/bin/env python3
"""Checks the user documents: the README stays short enough to read in a few minutes (under
200 lines), every relative link in README.md and Docs/*.md resolves — the file or folder
exists, and an `#anchor` names a heading of the target (GitHub's anchors: lowercase, spaces
to hyphens, punctuation dropped) — and the table of error codes in Docs/Server.md lists
exactly the codes `WireErrorCode` declares (Sources/OfflineSyncWire/WireErrorCode.swift),
each once.

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


ERROR_CODES_SWIFT = os.path.join(ROOT, "Sources", "OfflineSyncWire", "WireErrorCode.swift")
ERROR_CODES_DOC = os.path.join(ROOT, "Docs", "Server.md")
ERROR_TABLE_MARKER = "<!-- error codes:"


def declared_error_codes():
    """The raw values of `WireErrorCode`'s private enum, one `case name = "raw"` per line."""
    with open(ERROR_CODES_SWIFT) as f:
        text = f.read()
    body = re.search(r"private enum Base: String[^{]*\{(.*?)\n    \}", text, re.S)
    if not body:
        return None
    return re.findall(r'^\s*case \w+ = "([^"]+)"\s*$', body.group(1), re.M)


def documented_error_codes():
    """The first column of the table after the marker in Docs/Server.md, or None without one."""
    with open(ERROR_CODES_DOC) as f:
        lines = f.read().split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(ERROR_TABLE_MARKER)), None)
    if start is None:
        return None
    codes = []
    for line in lines[start + 1:]:
        if not line.startswith("|"):
            break
        cell = line.split("|")[1].strip()
        match = re.fullmatch(r"`([^`]+)`", cell)
        if match:
            codes.append(match.group(1))
    return codes


def error_table_problems():
    declared, documented = declared_error_codes(), documented_error_codes()
    if not declared:
        return ["%s: no `private enum Base: String` with `case name = \"raw\"` lines found" % os.path.relpath(ERROR_CODES_SWIFT, ROOT)]
    if documented is None:
        return ["Docs/Server.md: no error code table (a line starting %r, then the table)" % ERROR_TABLE_MARKER]
    problems = []
    for code in sorted(set(declared) - set(documented)):
        problems.append("Docs/Server.md: the error code table lacks `%s`, which WireErrorCode declares" % code)
    for code in sorted(set(documented) - set(declared)):
        problems.append("Docs/Server.md: the error code table lists `%s`, which WireErrorCode does not declare" % code)
    for code in sorted({c for c in documented if documented.count(c) > 1}):
        problems.append("Docs/Server.md: the error code table lists `%s` more than once" % code)
    for code in sorted({c for c in declared if declared.count(c) > 1}):
        problems.append("WireErrorCode.swift: the raw value `%s` is declared more than once" % code)
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
    problems += error_table_problems()
    for problem in problems:
        print("check-docs: " + problem)
    if problems:
        sys.exit(1)
    print("check-docs: README.md has %d lines; every relative link in README.md and Docs/*.md resolves; "
          "Docs/Server.md's error code table lists the %d codes of WireErrorCode" % (count, len(declared_error_codes())))


if __name__ == "__main__":
    main()
