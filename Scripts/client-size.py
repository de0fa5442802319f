#!/usr/bin/env python3
"""Builds Scripts/client-size's two clients in release, strips them, runs each against a live
server (so the figure is of a client that works), and writes client-size.json and the
"Client binary size" section of Docs/Performance.md.

Usage: Scripts/client-size.py OFFLINE-SYNC-BINARY   (the server: `offline-sync serve`)
"""
import json, os, platform, re, shutil, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "Scripts", "client-size")
SCRATCH = os.path.join(ROOT, ".build", "client-size")
CLIENTS = [("client-urlsession", "OfflineSyncURLSession", "URLSessionRemoteStore"),
           ("client-asynchttpclient", "OfflineSyncHTTP", "HTTPRemoteStore")]
BEGIN, END = "<!-- client-size: begin -->", "<!-- client-size: end -->"


def run(*command, **kwargs):
    return subprocess.run(command, check=True, text=True, capture_output=True, **kwargs).stdout


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    server_binary = sys.argv[1]
    run("swift", "build", "-c", "release", "--package-path", PACKAGE, "--scratch-path", SCRATCH)
    bin_path = run("swift", "build", "-c", "release", "--package-path", PACKAGE, "--scratch-path", SCRATCH,
                   "--show-bin-path").strip()
    work = tempfile.mkdtemp(prefix="client-size-")
    port = free_port()
    server = subprocess.Popen([server_binary, "serve", "--port", str(port), "--data", os.path.join(work, "server")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = []
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                run("curl", "-sf", base + "/health")
                break
            except subprocess.CalledProcessError:
                time.sleep(0.1)
        token = run(server_binary, "token", "--identity", "size", "--data", os.path.join(work, "server")).strip().split()[-1]
        for name, product, remote in CLIENTS:
            stripped = os.path.join(work, name)
            shutil.copy(os.path.join(bin_path, name), stripped)
            run("strip", stripped)
            output = run(stripped, base, token, os.path.join(work, name + ".sqlite"), timeout=120)
            symbols = run("nm", "-D", "--defined-only", os.path.join(bin_path, name)) + run("nm", os.path.join(bin_path, name))
            nio = len(re.findall(r"NIO", symbols))
            libraries = sorted(os.path.basename(line.split("=>")[0].strip()) for line in run("ldd", stripped).splitlines()
                               if "=>" in line)
            results.append({"client": name, "product": product, "remote": remote, "bytes": os.path.getsize(stripped),
                            "nioSymbols": nio, "sharedLibraries": libraries, "ran": output.strip()})
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    swift = run("swift", "--version").splitlines()[0]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {swift}"
    json.dump({"machine": machine, "clients": results}, open(os.path.join(ROOT, "client-size.json"), "w"), indent=2)
    lines = [BEGIN, "", f"Release build, stripped, on {machine} (`make client-size`). Each client is",
             "the same few lines (a SQLite store, a write, a sync, the change channel), run against a live",
             "server before it is measured; Swift's runtime and Foundation are shared libraries, as they",
             "are in the OS on Apple platforms.", "",
             "| client | remote | stripped size | SwiftNIO symbols |", "|---|---|---|---|"]
    for result in results:
        lines.append(f"| `{result['client']}` | `{result['remote']}` ({result['product']}) | "
                     f"{result['bytes'] / (1 << 20):.1f} MiB | {result['nioSymbols']} |")
    lines += ["", END]
    path = os.path.join(ROOT, "Docs", "Performance.md")
    text = open(path).read()
    section = "\n".join(lines)
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n## Client binary size\n\n" + section + "\n"
    open(path, "w").write(text)
    for result in results:
        print(f"{result['client']}: {result['bytes']} bytes, {result['nioSymbols']} NIO symbols; {result['ran']}")


if __name__ == "__main__":
    main()
