#!/usr/bin/env python3
"""Check a Prometheus text exposition (format 0.0.4) on stdin, or in the
file given, without promtool: metric and label names, one HELP and one TYPE
per family, given before its samples, the suffixes a type allows, counters
not negative, and histograms whose buckets are cumulative, end with +Inf
and agree with _count.  Prints the problems and exits 1, or exits 0.
"""

import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r"^(%s)(?:\{(.*)\})? (\S+)$" % NAME)
LABEL = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"(,|$)')
SUFFIXES = {"counter": ["_total"], "gauge": [""], "untyped": [""],
            "histogram": ["_bucket", "_sum", "_count"],
            "summary": ["", "_sum", "_count"]}


def labels(text):
    out = []
    while text:
        m = LABEL.match(text)
        if m is None:
            raise ValueError("bad labels at '%s'" % text)
        out.append((m.group(1), m.group(2)))
        text = text[m.end():]
    return out


def check(lines):
    errors, types, helps, seen = [], {}, set(), set()
    buckets = {}
    for n, line in enumerate(lines, 1):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not re.match("^%s$" % NAME, parts[2]):
                errors.append("%d: bad %s line" % (n, parts[1]))
                continue
            fam = parts[2]
            if fam in seen:
                errors.append("%d: %s after its samples" % (n, parts[1]))
            if parts[1] == "TYPE":
                if fam in types or parts[3] not in SUFFIXES:
                    errors.append("%d: TYPE of %s" % (n, fam))
                types[fam] = parts[3]
            elif fam in helps:
                errors.append("%d: second HELP of %s" % (n, fam))
            helps.add(fam)
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if m is None:
            errors.append("%d: not a sample: %s" % (n, line))
            continue
        name, lab, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            lab = labels(lab)
            v = float(value)
        except ValueError as e:
            errors.append("%d: %s" % (n, e))
            continue
        fam = next((f for f in types for s in SUFFIXES[types[f]]
                    if name == f + s or (s == "_total" and name == f)),
                   None)
        if fam is None:
            errors.append("%d: %s has no TYPE before it" % (n, name))
            continue
        if fam not in helps:
            errors.append("%d: %s has no HELP" % (n, name))
        seen.add(fam)
        if types[fam] == "counter" and (v < 0 or not name.endswith("_total")):
            errors.append("%d: counter %s" % (n, name))
        if types[fam] == "histogram":
            h = buckets.setdefault(fam, {"le": [], "count": None})
            if name.endswith("_bucket"):
                le = [val for key, val in lab if key == "le"]
                if len(le) != 1:
                    errors.append("%d: bucket without le" % n)
                    continue
                h["le"].append((float(le[0]), v))
            elif name.endswith("_count"):
                h["count"] = v
    for fam, h in buckets.items():
        les = [le for le, _ in h["le"]]
        counts = [c for _, c in h["le"]]
        if not les or les[-1] != float("inf"):
            errors.append("%s: the last bucket is not +Inf" % fam)
        if les != sorted(les) or counts != sorted(counts):
            errors.append("%s: buckets not cumulative" % fam)
        if counts and counts[-1] != h["count"]:
            errors.append("%s: +Inf bucket is not _count" % fam)
    return errors


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    errors = check(text.split("\n"))
    for e in errors:
        print(e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
