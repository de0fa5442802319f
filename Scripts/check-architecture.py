#!/usr/bin/env python3
"""Checks that the tree keeps the shape Docs/Architecture.md describes.

1. The module table of Docs/Architecture.md (between the `modules: begin` and `modules: end`
   markers) names exactly the library and executable targets of Package.swift, each with
   exactly its dependencies inside the package.
2. Every module a Swift file imports is declared as a dependency of its target (or is the
   toolchain's: Foundation, Dispatch, the C library, Synchronization, Observation, Testing).
3. No file in Sources/ or Adapters/ has more than 500 code lines (doc comments, comments and
   blank lines do not count) and no function, initialiser, closure-free accessor or subscript
   body has more than 80 code lines. Offenders that predate the rule are listed in
   Scripts/size-allowlist.txt with their size then; they may shrink but never grow, and a
   listed entry that now fits must be removed from the list.

Run from the repository root: `python3 Scripts/check-architecture.py`. Exit status 1 on any
finding, each printed on its own line.
"""
import json
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
TOOLCHAIN_MODULES = {
    "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Glibc", "Darwin", "Musl", "Synchronization",
    "Observation", "Testing", "XCTest", "PackageDescription",
}
ALLOWLIST = "Scripts/size-allowlist.txt"


def package():
    output = subprocess.run(["swift", "package", "dump-package"], check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def dependency_names(target):
    names = []
    for dependency in target.get("dependencies", []):
        for kind in ("byName", "target", "product"):
            if kind in dependency:
                entry = dependency[kind]
                names.append((entry[0], kind == "product" and entry[1] is not None))
    return names


def check_table(manifest, findings):
    text = open("Docs/Architecture.md", encoding="utf-8").read()
    match = re.search(r"<!-- modules: begin.*?-->(.*?)<!-- modules: end -->", text, re.S)
    if not match:
        findings.append("Docs/Architecture.md: no `modules: begin` / `modules: end` table")
        return
    documented = {}
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        deps = set(re.findall(r"`([^`]+)`", cells[1]))
        documented[cells[0].strip("`")] = deps
    targets = {t["name"]: t for t in manifest["targets"] if t["type"] in ("regular", "executable")}
    internal = {t["name"] for t in manifest["targets"]}
    for name, target in targets.items():
        actual = {n for n, is_product in dependency_names(target) if not is_product and n in internal}
        if name not in documented:
            findings.append(f"Docs/Architecture.md: target {name} is missing from the module table")
        elif documented[name] != actual:
            findings.append(f"Docs/Architecture.md: {name} depends on {sorted(actual)} in Package.swift, "
                            f"the table says {sorted(documented[name])}")
    for name in documented:
        if name not in targets:
            findings.append(f"Docs/Architecture.md: the module table names {name}, which Package.swift does not declare")


def check_imports(manifest, findings):
    for target in manifest["targets"]:
        if target["type"] == "system":
            continue
        path = target.get("path") or os.path.join("Tests" if target["type"] == "test" else "Sources", target["name"])
        declared = {n for n, _ in dependency_names(target)} | {target["name"]}
        for root, _, files in os.walk(path):
            for file in files:
                if not file.endswith(".swift"):
                    continue
                full = os.path.join(root, file)
                for number, line in enumerate(open(full, encoding="utf-8"), 1):
                    m = re.match(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?"
                                 r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", line)
                    if m and m.group(1) not in declared and m.group(1) not in TOOLCHAIN_MODULES:
                        findings.append(f"{full}:{number}: imports {m.group(1)}, which Package.swift does not declare "
                                        f"for {target['name']}")


def code_lines(path):
    """The file's lines with comments, string contents and blank lines marked, as
    (line number, code text) for every line that holds code."""
    text = open(path, encoding="utf-8").read()
    out = []
    i, n, line, current = 0, len(text), 1, []
    block_depth = 0
    in_string = None  # '"' or '"""'
    while i < n:
        c = text[i]
        if c == "\n":
            code = "".join(current).strip()
            if code:
                out.append((line, code))
            current = []
            line += 1
            i += 1
            continue
        if block_depth:
            if text.startswith("/*", i):
                block_depth += 1
                i += 2
            elif text.startswith("*/", i):
                block_depth -= 1
                i += 2
            else:
                i += 1
            continue
        if in_string:
            if c == "\\":
                current.append("s")
                i += 2
                continue
            if text.startswith(in_string, i):
                current.append(in_string)
                i += len(in_string)
                in_string = None
                continue
            current.append("s")
            i += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            block_depth = 1
            i += 2
            continue
        if text.startswith('"""', i):
            in_string = '"""'
            current.append('"""')
            i += 3
            continue
        if c == '"':
            in_string = '"'
            current.append('"')
            i += 1
            continue
        current.append(c)
        i += 1
    code = "".join(current).strip()
    if code:
        out.append((line, code))
    return out


# `init(` after a dot is a call (`self.init(…)`, `Foo.init(…)`), not a declaration.
DECLARATION = re.compile(r"\b(func\s+[^\s(<]+|(?<!\.)init[?!]?\s*[(<]|deinit\b|subscript\s*[(<])")


def long_functions(lines):
    """(name, first line, code lines) of every function-like body longer than the limit."""
    found = []
    stack = []  # (name or None, start index, depth at open)
    depth = 0
    pending = None
    for index, (number, code) in enumerate(lines):
        m = DECLARATION.search(code)
        if m:
            pending = (m.group(1).strip(), index, number)
        for ch in code:
            if ch == "{":
                if pending is not None:
                    stack.append((pending, depth))
                    pending = None
                depth += 1
            elif ch == "}":
                depth -= 1
                if stack and stack[-1][1] == depth:
                    (name, start, first), _ = stack.pop()
                    size = index - start + 1
                    if size > MAX_FUNCTION_LINES:
                        found.append((name, first, size))
    return found


def check_sizes(findings):
    allowed = {}
    if os.path.exists(ALLOWLIST):
        for raw in open(ALLOWLIST, encoding="utf-8"):
            raw = raw.split("#", 1)[0].strip()
            if raw:
                key, limit = raw.rsplit(" ", 1)
                allowed[key] = int(limit)
    seen = set()
    for root in ("Sources", "Adapters"):
        for directory, _, files in os.walk(root):
            for file in sorted(files):
                if not file.endswith(".swift"):
                    continue
                path = os.path.join(directory, file)
                lines = code_lines(path)
                measured = [(path, len(lines), MAX_FILE_LINES)]
                for name, first, size in long_functions(lines):
                    measured.append((f"{path}:{name}", size, MAX_FUNCTION_LINES))
                for key, size, limit in measured:
                    if size <= limit:
                        continue
                    seen.add(key)
                    if key not in allowed:
                        findings.append(f"{key}: {size} code lines, over the limit of {limit}")
                    elif size > allowed[key]:
                        findings.append(f"{key}: {size} code lines, grown past its allowance of {allowed[key]} "
                                        f"(limit {limit}; split it instead)")
    for key in allowed:
        if key not in seen:
            findings.append(f"{ALLOWLIST}: {key} is within the limits now: remove it from the list")


def main():
    findings = []
    manifest = package()
    check_table(manifest, findings)
    check_imports(manifest, findings)
    check_sizes(findings)
    for finding in findings:
        print(finding)
    if findings:
        print(f"check-architecture: {len(findings)} finding(s)")
        return 1
    print("check-architecture: the module table, the imports and the size limits hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
