#!/usr/bin/env python3
"""Fails when the public API of a library product breaks against the last release and the
changelog does not declare it.

    python3 Scripts/check-api.py [--swift swift] [--baseline-dir DIR]

The last release is the newest `## X.Y.Z` section of CHANGELOG.md; its `Revision `HASH`.` line
names the commit. `swift package diagnose-api-breaking-changes HASH` compares every library
product of Package.swift with that commit (the baseline's API is kept in --baseline-dir, by
default Scripts/api-baseline/HASH, committed, so a run builds only the tree it checks; a release
whose digests are not there yet is built once and its digests written there, to commit).
Every breakage it reports must be declared in the changelog's *Unreleased* section, under its
"### Breaking" heading, by the changed symbol's name in backticks (`SyncEvent.foo`, or the type
`SyncEvent` for a change to the type itself). A declared break means the next release is a
major one (Docs/Versioning.md).
"""
import argparse, json, os, re, subprocess, sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CHANGELOG = os.path.join(ROOT, "CHANGELOG.md")
# The digests of each release's public API (swift-api-digester's JSON, one file per module, in a
# folder named after the release's revision), written by the first run against that release and
# committed, so a run needs to build only the tree it checks, not the release too.
BASELINES = os.path.join(ROOT, "Scripts", "api-baseline")


def fail(message):
    print("check-api: " + message, file=sys.stderr)
    sys.exit(1)


def changelog():
    """(the newest release's version and revision, the Unreleased section's Breaking text)."""
    with open(CHANGELOG, encoding="utf-8") as f:
        text = f.read()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    unreleased = next((s for s in sections if s.startswith("Unreleased")), None)
    if unreleased is None:
        fail("CHANGELOG.md has no '## Unreleased' section")
    breaking = re.search(r"^### Breaking\s*$(.*?)(?=^### |\Z)", unreleased, flags=re.M | re.S)
    if breaking is None:
        fail("CHANGELOG.md's Unreleased section has no '### Breaking' heading (write 'None.' under it when nothing breaks)")
    for section in sections:
        release = re.match(r"(\d+\.\d+\.\d+)\b", section)
        if release:
            revision = re.search(r"^Revision `([0-9a-f]{40})`", section, flags=re.M)
            if revision is None:
                fail("release %s in CHANGELOG.md names no revision (a line 'Revision `<40 hex digits>`.')" % release.group(1))
            return release.group(1), revision.group(1), breaking.group(1)
    fail("CHANGELOG.md names no release")


def products(swift):
    """The library products of Package.swift."""
    dump = subprocess.run([swift, "package", "dump-package"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return sorted(p["name"] for p in json.loads(dump)["products"] if "library" in p["type"])


def symbol(breakage):
    """The changed declaration's name in a breakage line ('func SyncContext.foo(_:) has been
    removed' → 'SyncContext.foo'), or None when the line names none."""
    match = re.match(r"\s*(?:[A-Za-z]+\s+)+?([A-Za-z_][\w.]*)(?:\([^)]*\))?(?:\s|$)", breakage)
    return match.group(1) if match else None


def package_only(baseline):
    """The qualified names of declarations the baseline's digests mark internal: `package`
    declarations (the digester lists them, though no app can use them). A breakage of one, or
    of a member of one, is not a break of the public API."""
    names = set()

    def walk(node, prefix):
        if not isinstance(node, dict):
            return
        qualified = prefix
        if node.get("kind") in ("TypeDecl", "Function", "Var", "Constructor", "TypeAlias", "Subscript") and node.get("name"):
            qualified = prefix + [node["name"]]
            if node.get("isInternal"):
                names.add(".".join(qualified))
        for child in node.get("children", []):
            walk(child, qualified)

    for directory, _, files in os.walk(baseline):
        for name in files:
            if name.endswith(".json"):
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    walk(json.load(f).get("ABIRoot", {}), [])
    return names


def declared(name, breaking):
    """Whether the Breaking text names `name`, or a type it is a member of, in backticks."""
    names = set(re.findall(r"`([A-Za-z_][\w.]*)(?:\([^`]*\))?`", breaking))
    parts = name.split(".")
    return any(".".join(parts[:i]) in names for i in range(1, len(parts) + 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swift", default=os.environ.get("SWIFT", "swift"))
    parser.add_argument("--baseline-dir")
    args = parser.parse_args()
    version, revision, breaking = changelog()
    if subprocess.run(["git", "cat-file", "-e", revision + "^{commit}"], cwd=ROOT).returncode != 0:
        fail("release %s's revision %s is not in this repository's history" % (version, revision))
    baseline = args.baseline_dir or BASELINES
    os.makedirs(baseline, exist_ok=True)
    names = products(args.swift)
    command = [args.swift, "package", "diagnose-api-breaking-changes", revision, "--baseline-dir", baseline, "--products"] + names
    process = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, errors="replace")
    output = process.stdout + process.stderr
    breakages = [line.split("API breakage:", 1)[1].strip() for line in output.splitlines() if "API breakage:" in line]
    if process.returncode != 0 and not breakages:
        print(output[-4000:], file=sys.stderr)
        fail("diagnose-api-breaking-changes failed (exit %d) without naming a breakage" % process.returncode)
    internal = package_only(baseline)

    def public(breakage):
        parts = (symbol(breakage) or "").split(".")
        return not any(".".join(parts[:i]) in internal for i in range(1, len(parts) + 1))

    breakages = [b for b in breakages if public(b)]
    undeclared = [b for b in breakages if not (symbol(b) and declared(symbol(b), breaking))]
    for b in undeclared:
        print("check-api: undeclared API breakage against %s (%s): %s" % (version, revision[:7], b), file=sys.stderr)
    if undeclared:
        fail("%d breakage(s) of the public API are not declared under '### Breaking' in CHANGELOG.md's Unreleased "
             "section (name each changed symbol in backticks), or undo them" % len(undeclared))
    print("check-api: the %d library products' public API against %s (%s): %d breakage(s), all declared in CHANGELOG.md"
          % (len(names), version, revision[:7], len(breakages)))


if __name__ == "__main__":
    main()
