#!/usr/bin/env python3
"""Draws loadtest-results.json's latency distributions as an SVG (HdrHistogram's usual plot:
latency against percentile, the percentile axis stretched towards the tail), and writes its
figures as the table between the `loadtest` markers of a Markdown file.

Usage: Scripts/loadtest-plot.py [--merge more.json]... [loadtest-results.json] [Docs/loadtest-latency.svg] [Docs/Performance.md]

--merge adds another run's workloads to the results file first (replacing workloads of the same
name) and rewrites it: a workload that needs a different set-up (hot standbys) runs on its own.
"""
import json
import math
import re
import sys

BEGIN, END = "<!-- loadtest: begin -->", "<!-- loadtest: end -->"


def table(document):
    """The figures as Markdown rows: one per workload, latencies in ms."""
    def cell(figures):
        return "p50 %.1f, p99 %.1f, max %.1f" % (figures["p50Ms"], figures["p99Ms"], figures["maxMs"])
    rows = ["| workload | what was measured | latency (ms) | checks |", "|---|---|---|---|"]
    for w in document["workloads"]:
        checks = "missed %d, to another identity %d" % (w.get("missedDeliveries", 0), w.get("leakedNotices", 0))
        if w.get("skipped"):
            continue
        if w["name"] in ("propagation", "fan-out", "fan-out-postgres", "propagation-two-instances", "notifications-two-instances",
                         "propagation-delayed"):
            what = "%s writes at %s/s, %d receiving client%s, table of %s rows" % (
                format(w["writes"], ","), format(w["ratePerSecond"], ","), w["clients"], "" if w["clients"] == 1 else "s",
                format(w["tableRows"], ","))
            if w.get("receiversOnAnotherInstance"):
                what += ", written through one instance and received through the other (one PostgreSQL); %s notices heard" % (
                    format(w.get("noticesReceived", 0), ","))
            if "deviceDelayMs" in w:
                what += "; devices %d ms each way from the instances, PostgreSQL %d ms each way from them (delaying relays)" % (
                    w["deviceDelayMs"], w["databaseDelayMs"])
            if "serverKiBPerConnection" in w:
                what += "; server memory %.1f KiB per connection (%.0f MiB idle, %.0f MiB with every client listening)" % (
                    w["serverKiBPerConnection"], w["serverRSSIdleMiB"], w["serverRSSConnectedMiB"])
            costs = ["%s %.3f ms" % (key, w[key + "CPUMillisecondsPerDelivery"]) for key in ("server", "database")
                     if w.get(key + "CPUMillisecondsPerDelivery") is not None]
            if costs:
                what += "; CPU a delivered row (its notice and the pull it causes): " + ", ".join(costs)
            rows.append("| %s | write → notice: %s | %s | %s |" % (w["name"], what, cell(w["writeToNotice"]), checks))
            rows.append("| %s | write → row pulled by the receiver | %s | |" % (w["name"], cell(w["writeToPage"])))
        elif w["name"].startswith("fan-out-") and w["name"].endswith("-group"):
            what = ("%s members of one list, each one device on the change channel (a WebSocket that only reads), and %d identities "
                    "outside it; %d writes to the list's todos and %d to a table everyone reads, one a second; the devices do not pull") % (
                format(w["clients"], ","), w["outsiders"], w["writesPerTable"], w["writesPerTable"])
            if w.get("serverCPU") is not None:
                what += "; server pinned to CPU %d, generator on the other" % w["serverCPU"]
            if "serverKiBPerConnection" in w:
                what += "; server memory %.1f KiB per connection" % w["serverKiBPerConnection"]
            if "p99OverSmallest" in w:
                what += "; p99 %.2f× the smallest group's" % w["p99OverSmallest"]
            rows.append("| %s | write → notice: %s | %s | missed %d, list notices outside it %d |" % (
                w["name"], what, cell(w["writeToNotice"]), w["missedNotices"], w["leakedNotices"]))
        elif w["name"] == "slow-consumers":
            what = ("%s writes at %d/s to %d reading clients beside %d channels that never read: %d of them closed by the server "
                    "(the last %.1f s after the last write; channel write timeout and ping interval %d s); "
                    "server memory %+.1f MiB at its peak over %.0f MiB before they opened") % (
                format(w["writes"], ","), w["ratePerSecond"], w["clients"], w["deafChannels"], w["deafChannelsClosed"],
                w["deafClosedSecondsAfterLastWrite"], w["channelTimeoutSeconds"], w["serverRSSPeakOverBeforeMiB"], w["serverRSSBeforeDeafMiB"])
            rows.append("| %s | write → notice: %s | %s | %s |" % (w["name"], what, cell(w["writeToNotice"]), checks))
            if "baselineWriteToNotice" in w:
                rows.append("| %s | write → notice, the same clients without the channels that never read (p99 ratio %.2f×) | %s | |" % (
                    w["name"], w.get("p99OverBaseline", float("nan")), cell(w["baselineWriteToNotice"])))
        elif w["name"] in ("concurrent-writers", "concurrent-writers-postgres", "rolling-restart") or w["name"].startswith("concurrent-writers-postgres-"):
            tables = w.get("tables", 1)
            what = "%d clients%s pushing batches of %d for %.0f s: %s ops/s" % (
                w["writers"], " over %d tables" % tables if tables > 1 else "", w["batch"], w["durationSeconds"],
                format(int(w["operationsPerSecond"]), ","))
            if "ratioToRaw" in w:
                what += ", %.2f× raw multi-row inserts (%s rows/s)" % (w["ratioToRaw"], format(int(w["rawInsertsPerSecond"]), ","))
            if w["name"] == "rolling-restart":
                what += "; two instances over one PostgreSQL behind a balancer, one restarted (%.1f s from SIGTERM to its replacement taking connections)" % (
                    w.get("restartSeconds", float("nan")))
            rows.append("| %s | push latency; %s | %s | lost %d, duplicated %d, not applied %d |" % (
                w["name"], what, cell(w["push"]), w["lost"], w["duplicated"], w["notApplied"]))
            if "pushDuringRestart" in w:
                rows.append("| %s | push latency of the pushes begun during the restart | %s | |" % (w["name"], cell(w["pushDuringRestart"])))
        elif w["name"] == "one-row-clients-postgres":
            for index, run in enumerate(w["runs"]):
                what = "%s clients each pushing one row at a time through %d instance%s (one PostgreSQL, behind the loopback balancer) for %.0f s: %s ops/s" % (
                    format(w["clients"], ","), run["instances"], "" if run["instances"] == 1 else "s", run["durationSeconds"],
                    format(int(run["operationsPerSecond"]), ","))
                if index > 0 and w.get("scalingToFirst"):
                    what += " (%.2f× one instance)" % w["scalingToFirst"][index]
                costs = ["%s %.3f ms (%.2f cores)" % (key, run[key + "CPUMillisecondsPerOperation"], run[key + "CoresBusy"])
                         for key in ("server", "postgres", "generator", "listeningInstance") if run.get(key + "CPUMillisecondsPerOperation") is not None]
                if costs:
                    what += "; CPU an operation: " + ", ".join(costs).replace("listeningInstance", "an instance without devices that hears every notice")
                rows.append("| %s | push latency; %s | %s | lost %d, duplicated %d, not applied %d |" % (
                    run["name"], what, cell(run["push"]), run["lost"], run["duplicated"], run["notApplied"]))
        elif w["name"] == "pulls-postgres-replicas":
            for run in (w["primaryAlone"], w["withReplicas"]):
                what = "%d devices pulling their %s rows from the start, again and again, a push every fourth pull, for %.0f s: %.1f full pulls/s, %s rows/s" % (
                    w["pullers"], format(w["rowsPerIdentity"], ","), run["durationSeconds"], run["pullsPerSecond"],
                    format(int(run["rowsPerSecond"]), ","))
                if run.get("replicas", 0) > 0:
                    what += "; reads served by a replica %s, by the primary %s" % (
                        format(run["readsServedByReplica"], ","), format(run["readsServedByPrimary"], ","))
                else:
                    what += "; the primary alone"
                if run.get("primaryCPUMillisecondsPerPull") is not None:
                    what += "; the primary's CPU %.2f ms a full pull" % run["primaryCPUMillisecondsPerPull"]
                if run is w["withReplicas"]:
                    what += " (%.2f× the pulls a second" % w["ratioToPrimaryAlone"]
                    if w.get("primaryCPUPerPullRatio") is not None:
                        what += " and %.2f× the primary's CPU a pull" % w["primaryCPUPerPullRatio"]
                    what += " of the primary alone)"
                rows.append("| %s | one full pull; %s | %s | short pulls %d |" % (run["name"], what, cell(run["fullPull"]), run.get("shortPulls", 0)))
    return "\n".join(rows)


def write_table(document, path):
    text = open(path).read()
    section = "%s\n\n%s\n\n%s" % (BEGIN, table(document), END)
    if BEGIN not in text:
        raise SystemExit("%s has no %s marker" % (path, BEGIN))
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, text, flags=re.S)
    open(path, "w").write(text)
    print("wrote the table of %s" % path)

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 420, 70, 20, 40, 60
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
TICKS = [0, 50, 90, 99, 99.9, 99.99]


def x_of(percentile, top):
    """Percentile to x: log10(1 / (1 - p)), so 90, 99 and 99.9 are evenly spaced."""
    p = min(percentile, top) / 100.0
    span = math.log10(1 / (1 - top / 100.0))
    return LEFT + (WIDTH - LEFT - RIGHT) * math.log10(1 / (1 - p)) / span


def merge(document, path):
    """Adds the workloads of the results file at `path` to `document`, replacing same-named ones."""
    extra = json.load(open(path))["workloads"]
    names = {w["name"] for w in extra}
    document["workloads"] = [w for w in document["workloads"] if w["name"] not in names] + extra


def main():
    arguments, merges = [], []
    rest = iter(sys.argv[1:])
    for argument in rest:
        if argument == "--merge":
            path = next(rest, None)
            if path is None:
                sys.exit("loadtest-plot: --merge needs a results file")
            merges.append(path)
        else:
            arguments.append(argument)
    source = arguments[0] if len(arguments) > 0 else "loadtest-results.json"
    target = arguments[1] if len(arguments) > 1 else "Docs/loadtest-latency.svg"
    document = json.load(open(source))
    if merges:
        for path in merges:
            merge(document, path)
        # The layout Foundation's JSONSerialization writes (.prettyPrinted, .sortedKeys).
        text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False, separators=(",", " : ")).replace("/", "\\/")
        with open(source, "w") as out:
            out.write(text)
    series = []
    for workload in document["workloads"]:
        keys = (("writeToNotice", "write → notice"), ("writeToPage", "write → pulled"), ("push", "push"))
        if workload["name"] == "rolling-restart":
            keys = (("pushDuringRestart", "push during the restart"),)
        if workload["name"] == "slow-consumers":
            keys = (("writeToNotice", "write → notice"), ("baselineWriteToNotice", "write → notice, none deaf"))
        for key, label in keys:
            if key in workload and workload[key].get("distribution"):
                series.append(("%s: %s" % (workload["name"], label), workload[key]["distribution"]))
    top = 99.99
    highest = max(value for _, points in series for percentile, value in points if percentile <= top)
    y_max = 10 ** math.ceil(math.log10(max(highest, 1)))
    if highest < y_max / 2:
        y_max /= 2

    def y_of(value):
        return HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * min(value, y_max) / y_max

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">Latency by percentile (%s)</text>' % (LEFT, document.get("machine", ""))]
    for tick in TICKS:
        x = x_of(tick, top)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, TOP, x, HEIGHT - BOTTOM))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s%%</text>' % (x, HEIGHT - BOTTOM + 16, ("%g" % tick)))
    for step in range(6):
        value = y_max * step / 5
        y = y_of(value)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (LEFT, y, WIDTH - RIGHT, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g ms</text>' % (LEFT - 6, y + 4, round(value, 3)))
    out.append('<text x="%d" y="%d" text-anchor="middle">percentile</text>' % ((LEFT + WIDTH - RIGHT) // 2, HEIGHT - 18))
    for index, (label, points) in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join("%.1f,%.1f" % (x_of(p, top), y_of(v)) for p, v in points if p <= top)
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (colour, path))
        out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (LEFT + 10, TOP + 16 + 16 * index, colour, label))
    out.append("</svg>")
    open(target, "w").write("\n".join(out) + "\n")
    print("wrote %s (%d series)" % (target, len(series)))
    if len(arguments) > 2:
        write_table(document, arguments[2])


if __name__ == "__main__":
    main()
