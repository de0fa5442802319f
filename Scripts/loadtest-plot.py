#!/usr/bin/env python3
"""Draws loadtest-results.json's latency distributions as an SVG (HdrHistogram's usual plot:
latency against percentile, the percentile axis stretched towards the tail).

Usage: Scripts/loadtest-plot.py [loadtest-results.json] [Docs/loadtest-latency.svg]
"""
import json
import math
import sys

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 420, 70, 20, 40, 60
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
TICKS = [0, 50, 90, 99, 99.9, 99.99]


def x_of(percentile, top):
    """Percentile to x: log10(1 / (1 - p)), so 90, 99 and 99.9 are evenly spaced."""
    p = min(percentile, top) / 100.0
    span = math.log10(1 / (1 - top / 100.0))
    return LEFT + (WIDTH - LEFT - RIGHT) * math.log10(1 / (1 - p)) / span


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else "loadtest-results.json"
    target = sys.argv[2] if len(sys.argv) > 2 else "Docs/loadtest-latency.svg"
    document = json.load(open(source))
    series = []
    for workload in document["workloads"]:
        for key, label in (("writeToNotice", "write → notice"), ("writeToPage", "write → pulled"), ("push", "push")):
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


if __name__ == "__main__":
    main()
