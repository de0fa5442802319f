#!/usr/bin/env python3
"""Checks that what an app links compiles on every Apple platform Package.swift declares, not
only with glibc.

Scanned: every target a library product reaches (products, targets and their dependencies are
read from Package.swift's text), plus OfflineSyncCommandSupport, OfflineSyncTestSupport and the
`offline-sync` tool, which `swift test` and the tool build on a Mac. A product that names a
target Package.swift does not declare, or an extra target that is gone, fails the check, so the
list cannot go stale silently.

In their Swift and C sources, a spelling only glibc (or only Linux) has must sit where no Apple
platform compiles it: in Swift inside `#if os(Linux)` or `#if canImport(Glibc)` (or a branch
such as the `#else` of `#if canImport(Darwin)`), in C inside `#if defined(__linux__)` or
`defined(__GLIBC__)`. Each `#if`/`#elseif`/`#else`/`#endif` region is evaluated for macOS, iOS,
tvOS, watchOS and visionOS; a condition the script cannot decide (a custom flag, `arch(...)`,
an unknown module or macro) counts as possibly true there. Comments and string contents are
not code.

Run from the repository root (or pass the root): `python3 Scripts/check-portability.py`. Exit
status 1 on any finding, each printed as `file:line: what`.
"""
import os
import re
import sys

# Targets `swift test` and the operator's tool compile beside the products.
EXTRA_TARGETS = ["OfflineSyncCommandSupport", "OfflineSyncTestSupport", "offline-sync", "offline-sync-harness"]
APPLE_PLATFORMS = ["macOS", "iOS", "tvOS", "watchOS", "visionOS"]
SWIFT_EXTENSIONS = (".swift",)
C_EXTENSIONS = (".c", ".h", ".cc", ".cpp", ".m", ".mm")

# What Darwin spells differently or lacks, as regular expressions over code (comments and
# string contents removed), each with why (and what Darwin has instead).
CALLS_DARWIN_LACKS = (r"pipe2|accept4|dup3|sync_file_range|mallopt|malloc_trim|malloc_usable_size|mallinfo2?|"
                      r"sched_[gs]etaffinity|memfd_create|copy_file_range|fallocate|posix_fallocate|posix_fadvise|"
                      r"fdatasync|explicit_bzero|gettid|get_nprocs|prctl|getrandom|__errno_location")
FLAGS_DARWIN_LACKS = (r"O_TMPFILE|O_PATH|O_NOATIME|O_DIRECT|O_LARGEFILE|SOCK_CLOEXEC|SOCK_NONBLOCK|MSG_NOSIGNAL|"
                      r"MAP_POPULATE|CLOCK_BOOTTIME|SYNC_FILE_RANGE_\w+|M_ARENA_MAX")
COMMON = [
    (r"\b\w*addclosefrom_np\b", "glibc 2.34's posix_spawn_file_actions_addclosefrom_np "
                                "(Darwin: the POSIX_SPAWN_CLOEXEC_DEFAULT spawn flag)"),
    (r"\b(?:epoll|inotify|timerfd|signalfd|eventfd)\w*", "a Linux-only kernel interface (Darwin: kqueue, Dispatch)"),
    (rf"\b(?:{CALLS_DARWIN_LACKS})\b", "a call Darwin's C library does not have"),
    (rf"\b(?:{FLAGS_DARWIN_LACKS})\b", "a constant Darwin lacks (MSG_NOSIGNAL: older SDKs; Darwin's sockets take SO_NOSIGPIPE)"),
    (r"\bpthread_setname_np\s*\([^(),]*,", "glibc's two-argument pthread_setname_np (Darwin names only the calling thread)"),
]
SWIFT_SYMBOLS = COMMON + [
    (r"\b_sifields\b", "glibc's siginfo_t layout (Darwin: info.si_pid, info.si_status)"),
    (r"\b(?:SOCK|IPPROTO|RLIMIT|RUSAGE|PRIO|ITIMER|MSG|SHUT|AF|PF)_[A-Z0-9_]+\s*\.\s*rawValue\b",
     "a constant glibc imports as an enum case (Darwin: a plain Int32, no .rawValue)"),
    (r"\b__(?:socket_type|rlimit_resource|rusage_who|priority_which|itimer_which)(?:_t)?\b", "a glibc-internal type"),
    (r"\bimport\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?Glibc\b",
     "import Glibc (Darwin: import Darwin)"),
    (r"\bGlibc\s*\.", "a name qualified with Glibc"),
    (r"\bst_[amc]tim\b", "glibc's stat timestamps (Darwin: st_mtimespec, st_atimespec, st_ctimespec)"),
]
C_SYMBOLS = COMMON + [
    (r"#\s*include\s*<(?:malloc\.h|features\.h|sys/(?:epoll|inotify|eventfd|timerfd|signalfd|prctl|sysinfo)\.h|linux/[^>]*|gnu/[^>]*)>",
     "a header only Linux has"),
]

# Swift's compilation conditions, for one Apple platform. None: cannot tell.
KNOWN_MODULES = {"Darwin": True, "Foundation": True, "Dispatch": True, "Synchronization": True, "ObjectiveC": True,
                 "Glibc": False, "Musl": False, "Bionic": False, "Android": False, "WASILibc": False, "WinSDK": False,
                 "ucrt": False, "CRT": False, "FoundationNetworking": False, "FoundationXML": False}


def swift_atom(platform, name, argument):
    if name == "os":
        return int(argument == platform)
    if name == "canImport":
        module = (argument or "").split(",")[0].strip()
        return int(KNOWN_MODULES[module]) if module in KNOWN_MODULES else None
    if name == "_runtime":
        return int(argument == "_ObjC")
    if name == "true":
        return 1
    if name == "false":
        return 0
    return None  # arch, compiler, swift, targetEnvironment, hasFeature, custom flags


# C's preprocessor on an Apple platform: these macros are defined (1) or not (0); others: unknown.
C_MACROS = {"__APPLE__": 1, "__MACH__": 1, "__linux__": 0, "__linux": 0, "linux": 0, "__gnu_linux__": 0,
            "__GLIBC__": 0, "__GLIBC_MINOR__": 0, "__ANDROID__": 0, "__unix__": 0, "_WIN32": 0, "__FreeBSD__": 0,
            "__MUSL__": 0}


def not3(value):
    return None if value is None else int(not value)


def and3(values):
    values = list(values)
    if any(v == 0 for v in values):
        return 0
    return None if any(v is None for v in values) else 1


def or3(values):
    values = list(values)
    if any(v not in (0, None) for v in values):
        return 1
    return None if any(v is None for v in values) else 0


class Evaluator:
    """A condition's value from its tokens: 1, 0, another integer (C), or None (cannot tell)."""

    def __init__(self, tokens, atom):
        self.tokens, self.position, self.atom = tokens, 0, atom

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self):
        token = self.peek()
        self.position += 1
        return token

    def value(self):
        result = self.disjunction()
        return result if self.peek() is None else None

    def disjunction(self):
        left = self.conjunction()
        while self.peek() == "||":
            self.take()
            left = or3([left, self.conjunction()])
        return left

    def conjunction(self):
        left = self.comparison()
        while self.peek() == "&&":
            self.take()
            left = and3([left, self.comparison()])
        return left

    def comparison(self):
        left = self.unary()
        while self.peek() in ("==", "!=", "<", ">", "<=", ">="):
            operator, right = self.take(), self.unary()
            if left is None or right is None:
                left = None
            else:
                left = int({"==": left == right, "!=": left != right, "<": left < right, ">": left > right,
                            "<=": left <= right, ">=": left >= right}[operator])
        return left

    def unary(self):
        token = self.take()
        if token == "!":
            return not3(self.unary())
        if token == "(":
            inner = self.disjunction()
            return inner if self.take() == ")" else None
        if token is None:
            return None
        if token[0].isdigit():
            try:
                return int(token.rstrip("uUlL"), 0)
            except ValueError:
                return None  # a version, as in compiler(>=6.0)
        argument = None
        if self.peek() == "(":
            self.take()
            depth, parts = 1, []
            while self.peek() is not None:
                part = self.take()
                depth += {"(": 1, ")": -1}.get(part, 0)
                if depth == 0:
                    break
                parts.append(part)
            argument = "".join(parts)
        elif token == "defined":
            argument = self.take()
        return self.atom(token, argument)


def tokens(condition):
    return re.findall(r"&&|\|\||==|!=|<=|>=|[A-Za-z_][A-Za-z0-9_]*|\d[\w.]*|\S", condition)


def swift_condition(condition):
    """The condition's value on each Apple platform."""
    return {p: Evaluator(tokens(condition), lambda name, argument, p=p: swift_atom(p, name, argument)).value()
            for p in APPLE_PLATFORMS}


def c_atom(name, argument):
    if name == "defined":
        return C_MACROS.get((argument or "").strip("() "))
    if argument is not None:
        return None  # a function-like macro: cannot tell
    return C_MACROS.get(name)


def c_condition(condition):
    value = Evaluator(tokens(condition), c_atom).value()
    return {p: value for p in APPLE_PLATFORMS}


def swift_code_lines(text):
    """Each line's code, with comments dropped and string contents blanked (an interpolation's
    code is kept)."""
    lines, current = [], []
    i, n = 0, len(text)
    # What is open, innermost last: ("block", depth), ("string", closing quote, raw hashes),
    # ("interpolation", open parentheses).
    stack = []
    while i < n:
        c = text[i]
        top = stack[-1] if stack else None
        if c == "\n":
            lines.append("".join(current))
            current = []
            i += 1
            if top and top[0] == "string" and top[1] == '"':
                stack.pop()  # an unterminated one-line string ends with its line
            continue
        if top and top[0] == "block":
            if text.startswith("/*", i):
                stack[-1] = ("block", top[1] + 1)
                i += 2
            elif text.startswith("*/", i):
                if top[1] == 1:
                    stack.pop()
                else:
                    stack[-1] = ("block", top[1] - 1)
                i += 2
            else:
                i += 1
            continue
        if top and top[0] == "string":
            _, closing, hashes = top
            escape = "\\" + "#" * hashes
            if text.startswith(escape + "(", i):
                stack.append(("interpolation", 1))
                current.append(" (")
                i += len(escape) + 1
            elif text.startswith(escape, i):
                i += len(escape) + 1
            elif text.startswith(closing + "#" * hashes, i):
                stack.pop()
                current.append('"')
                i += len(closing) + hashes
            else:
                i += 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            stack.append(("block", 1))
            i += 2
            continue
        quote = re.match(r'(#*)("""|")', text[i:i + 64])
        if quote:
            stack.append(("string", quote.group(2), len(quote.group(1))))
            current.append('"')
            i += quote.end()
            continue
        if top and top[0] == "interpolation":
            if c == "(":
                stack[-1] = ("interpolation", top[1] + 1)
            elif c == ")" and top[1] == 1:
                stack.pop()
            elif c == ")":
                stack[-1] = ("interpolation", top[1] - 1)
        current.append(c)
        i += 1
    lines.append("".join(current))
    return list(enumerate(lines, 1))


def c_code_lines(text):
    """(line number, code) of each line, with comments dropped and string and character
    contents blanked; a line continued with a backslash is joined onto the line it continues."""
    lines, current = [], []
    i, n, in_block, quote = 0, len(text), False, None
    while i < n:
        c = text[i]
        if c == "\n":
            lines.append("".join(current))
            current = []
            quote = None
            i += 1
        elif in_block:
            in_block = not text.startswith("*/", i)
            i += 1 if in_block else 2
        elif quote:
            if c == quote:
                quote = None
                current.append(c)
            i += 2 if c == "\\" else 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            in_block = True
            i += 2
        else:
            if c in "\"'":
                quote = c
            current.append(c)
            i += 1
    lines.append("".join(current))
    numbered, continuing = [], None
    for number, line in enumerate(lines, 1):
        if continuing is not None:
            first, code = numbered[continuing]
            numbered[continuing] = (first, code.rstrip()[:-1] + " " + line)
            numbered.append((number, ""))
        else:
            numbered.append((number, line))
            continuing = len(numbered) - 1
        if not numbered[continuing][1].rstrip().endswith("\\"):
            continuing = None
    return numbered


SWIFT_DIRECTIVE = re.compile(r"^\s*#(if|elseif|else|endif)\b(.*)$")
C_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b(.*)$")


def directive(code, is_swift):
    """(kind, condition) of an #if, #elseif, #else or #endif line (C's spellings mapped onto
    Swift's), or None."""
    match = (SWIFT_DIRECTIVE if is_swift else C_DIRECTIVE).match(code)
    if not match:
        return None
    kind, condition = match.group(1), match.group(2).strip()
    if kind in ("ifdef", "elifdef"):
        condition = f"defined({condition})"
    elif kind in ("ifndef", "elifndef"):
        condition = f"!defined({condition})"
    kind = {"ifdef": "if", "ifndef": "if", "elif": "elseif", "elifdef": "elseif", "elifndef": "elseif"}.get(kind, kind)
    return kind, condition


def scan(path, findings):
    """Adds a finding for each glibc-only spelling in `path` that some Apple platform compiles."""
    text = open(path, encoding="utf-8", errors="replace").read()
    is_swift = path.endswith(SWIFT_EXTENSIONS)
    evaluate = swift_condition if is_swift else c_condition
    guard = "#if os(Linux) or #if canImport(Glibc)" if is_swift else "#if defined(__linux__) or defined(__GLIBC__)"
    # One frame per open #if: the per-platform values of its earlier branches' conditions, and
    # of the open branch's own (an #else's is 1).
    frames = []
    for number, code in (swift_code_lines(text) if is_swift else c_code_lines(text)):
        found = directive(code, is_swift)
        if found:
            kind, condition = found
            value = evaluate(condition) if kind in ("if", "elseif") else {p: 1 for p in APPLE_PLATFORMS}
            if kind == "if":
                frames.append(([], value))
            elif not frames:
                findings.append(f"{path}:{number}: #{kind} without #if")
            elif kind == "endif":
                frames.pop()
            else:
                earlier, current = frames[-1]
                frames[-1] = (earlier + [current], value)
            continue
        compiled = [p for p in APPLE_PLATFORMS
                    if and3(and3([not3(e[p]) for e in earlier] + [current[p]]) for earlier, current in frames) != 0]
        if not compiled:
            continue
        for pattern, why in (SWIFT_SYMBOLS if is_swift else C_SYMBOLS):
            for match in re.finditer(pattern, code):
                findings.append(f"{path}:{number}: `{match.group(0).strip()}`: {why}; compiled on {', '.join(compiled)} "
                                f"(keep it inside {guard}, with a Darwin path)")
    if frames:
        findings.append(f"{path}: {len(frames)} #if without #endif")


# Package.swift, read as text.

def without_comments(text):
    """Package.swift without comments; string literals kept whole (they hold the names)."""
    out, i, n, quote, block = [], 0, len(text), False, 0
    while i < n:
        c = text[i]
        if block:
            block += 1 if text.startswith("/*", i) else -1 if text.startswith("*/", i) else 0
            i += 2 if text.startswith(("/*", "*/"), i) else 1
        elif quote:
            out.append(text[i:i + 2] if c == "\\" else c)
            quote = c != '"'
            i += 2 if c == "\\" else 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            block = 1
            i += 2
        else:
            quote = c == '"'
            out.append(c)
            i += 1
    return "".join(out)


def balanced(text, start):
    """The text inside the bracket at `start` and the index of its partner."""
    depth, i, quote = 0, start, False
    while i < len(text):
        c = text[i]
        if quote:
            quote = c != '"'
            i += 2 if c == "\\" else 1
            continue
        if c == '"':
            quote = True
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i
        i += 1
    raise SystemExit(f"check-portability: Package.swift has an unbalanced bracket at offset {start}")


def split_top_level(body):
    """A list's elements or a call's arguments: `body` split at its top-level commas."""
    parts, depth, current, quote = [], 0, [], False
    for c in body:
        if quote:
            quote = c != '"' or (bool(current) and current[-1] == "\\")
        elif c == '"':
            quote = True
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(c)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def labelled_arguments(body):
    arguments = {}
    for part in split_top_level(body):
        match = re.match(r"(\w+)\s*:(.*)$", part, re.S)
        if match:
            arguments[match.group(1)] = match.group(2).strip()
    return arguments


def strings(text):
    return re.findall(r'"([^"]+)"', text)


TARGET_KINDS = {"target": "Sources", "executableTarget": "Sources", "testTarget": "Tests", "systemLibrary": "Sources",
                "binaryTarget": None, "macro": "Sources", "plugin": "Plugins"}


def manifest():
    """({library product: [target]}, {target: (directory, [dependency inside the package])})."""
    text = without_comments(open("Package.swift", encoding="utf-8").read())
    products, targets = {}, {}
    call = re.compile(r"\.(library|executable|" + "|".join(TARGET_KINDS) + r")\s*\(")
    position = 0
    while (match := call.search(text, position)):
        body, end = balanced(text, match.end() - 1)
        position = end + 1  # a declaration's body (its dependencies' `.target(name:)`) is not a declaration
        kind, arguments = match.group(1), labelled_arguments(body)
        name = strings(arguments.get("name", ""))
        if not name:
            continue
        if "targets" in arguments:  # a product
            if kind == "library":
                products[name[0]] = strings(arguments["targets"])
            continue
        if kind not in TARGET_KINDS:
            continue
        dependencies = []
        listed = arguments.get("dependencies", "").strip()
        for element in split_top_level(balanced(listed, 0)[0] if listed.startswith("[") else ""):
            if element.startswith(".product"):
                continue
            when = re.search(r"condition\s*:\s*\.when\s*\((.*)\)", element, re.S)
            if when and "platforms" in when.group(1) and not re.search(
                    r"\.(macOS|iOS|tvOS|watchOS|visionOS|macCatalyst)\b", when.group(1)):
                continue  # linked only where no Apple platform is
            if strings(element):
                dependencies.append(strings(element)[0])
        default = os.path.join(TARGET_KINDS[kind], name[0]) if TARGET_KINDS[kind] else None
        path = strings(arguments["path"])[0] if strings(arguments.get("path", "")) else default
        targets[name[0]] = (path, dependencies)
    return products, targets


def main():
    if len(sys.argv) > 1:
        os.chdir(sys.argv[1])
    findings = []
    products, targets = manifest()
    if not products or not targets:
        print("check-portability: found no library products or no targets in Package.swift; the reader is stale")
        return 1
    roots = []
    for product, names in sorted(products.items()):
        for name in names:
            if name not in targets:
                findings.append(f"Package.swift: product {product} names target {name}, which this script did not find")
            roots.append(name)
    for name in EXTRA_TARGETS:
        if name not in targets:
            findings.append(f"Scripts/check-portability.py: EXTRA_TARGETS names {name}, which Package.swift does not declare")
        roots.append(name)
    scanned, queue = set(), [r for r in roots if r in targets]
    while queue:
        name = queue.pop()
        if name in scanned:
            continue
        scanned.add(name)
        queue.extend(d for d in targets[name][1] if d in targets)
    files = 0
    for name in sorted(scanned):
        path = targets[name][0]
        if path is None:
            continue
        if not os.path.isdir(path):
            findings.append(f"Package.swift: target {name}'s directory {path} does not exist")
            continue
        for directory, subdirectories, names in os.walk(path):
            subdirectories.sort()
            for file in sorted(names):
                if file.endswith(SWIFT_EXTENSIONS + C_EXTENSIONS):
                    files += 1
                    scan(os.path.join(directory, file), findings)
    for finding in findings:
        print(finding)
    if findings:
        print(f"check-portability: {len(findings)} finding(s)")
        return 1
    print(f"check-portability: {files} files of {len(scanned)} targets ({len(products)} library products and "
          f"{', '.join(EXTRA_TARGETS)}) use no glibc-only spelling outside a Linux-only #if")
    return 0


if __name__ == "__main__":
    sys.exit(main())
