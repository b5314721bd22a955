#!/usr/bin/env python3
#
# tests/bench/redis-run.py: the timing half of tests/bench/redis.
#
#   redis-run.py one MHFILTER DB BATCH INPUT [SERVER_PID]
#       runs one writer on index DB and prints "wall client_cpu server_cpu
#       trips": seconds, the client's CPU seconds, the server's (from
#       /proc/SERVER_PID/stat before and after; 0 without a pid) and the
#       round trips it reports with --stats.
#   redis-run.py summary RECORDS BYTES RUNS CSV
#       RUNS has a line "LMDB-run REDIS-run" (eight numbers) per round:
#       prints the medians and their ratio, writes CSV.
#   redis-run.py cpu FILE COMMAND...
#       runs COMMAND (its output and status passed on) and appends the CPU
#       seconds it took to FILE, a line.
#   redis-run.py floor PORT SERVER_PID RECORDS BANDS
#       sends RECORDS x BANDS APPENDs of 8 bytes to new keys (what a
#       batch's band entries cost the server, and nothing else) through
#       redis-cli --pipe and prints the server's CPU seconds for them: the
#       documents a second one Redis core can take at best.

import os
import random
import resource
import statistics
import subprocess
import sys
import time


def server_cpu(pid):
    if not pid:
        return 0.0
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(mhfilter, db, batch, inp, pid=""):
    s0 = server_cpu(pid)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([mhfilter, "-f", "jsonl", "-d", db, "--batch", batch,
                        "--stats", inp], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    t1 = time.monotonic()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1 = server_cpu(pid)
    if p.returncode != 0:
        sys.stderr.write(p.stderr.decode())
        sys.exit(1)
    trips = 0
    for line in p.stderr.decode().splitlines():
        if line.startswith("mhfilter: index_roundtrips: "):
            trips = int(line.split()[-1])
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    print("%.4f %.4f %.4f %d" % (t1 - t0, cpu, s1 - s0, trips))


def summary(n, b, runs, csv):
    n, b = int(n), int(b)
    with open(runs) as f:
        rows = [list(map(float, line.split())) for line in f]

    def med(i):
        return statistics.median(r[i] for r in rows)

    lw, lc, rw, rc, rs, rt = med(0), med(1), med(4), med(5), med(6), med(7)
    print("one writer, %d records, median of %d runs each:" % (n, len(rows)))
    print("%-12s %10s %8s %11s %11s %10s" % ("index", "records/s", "MB/s",
                                            "client CPU", "server CPU",
                                            "trips/rec"))
    print("%-12s %10.0f %8.2f %11.2f %11s %10s" % ("--db DIR", n / lw,
                                                  b / lw / 1e6, lc, "-", "-"))
    print("%-12s %10.0f %8.2f %11.2f %11.2f %10.4f" % ("one Redis", n / rw,
                                                      b / rw / 1e6, rc, rs,
                                                      rt / n))
    print("Redis / LMDB: %.2f of the speed (target: 0.50)" % (lw / rw))
    with open(csv, "w") as f:
        f.write("index,records,seconds,records_per_second,client_cpu,"
                "server_cpu,roundtrips_per_record\n")
        f.write("lmdb,%d,%.3f,%.0f,%.2f,,\n" % (n, lw, n / lw, lc))
        f.write("redis,%d,%.3f,%.0f,%.2f,%.2f,%.4f\n" % (n, rw, n / rw, rc,
                                                         rs, rt / n))


def floor(port, pid, n, bands):
    n, bands = int(n), int(bands)
    rnd = random.Random(1)

    def cmd(*a):
        b = b"*%d\r\n" % len(a)
        for x in a:
            b += b"$%d\r\n%s\r\n" % (len(x), x)
        return b

    wire = b"".join(cmd(b"APPEND", b"floor:b:%016x" % rnd.getrandbits(64),
                        b"%08d" % (i % 100000000))
                    for i in range(n * bands))
    s0 = server_cpu(pid)
    p = subprocess.run(["redis-cli", "-p", port, "--pipe"], input=wire,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    s1 = server_cpu(pid)
    if p.returncode != 0:
        sys.stderr.write(p.stdout.decode())
        sys.exit(1)
    cpu = s1 - s0
    print("the bound: %d APPENDs alone (%d records x %d bands) take one "
          "Redis %.2f s of CPU, %.2f us each: at most %.0f records/s a "
          "server core" % (n * bands, n, bands, cpu, cpu / (n * bands) * 1e6,
                           n / cpu if cpu else 0))


def cpu(path, argv):
    p = subprocess.run(argv)
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(path, "a") as f:
        f.write("%.4f\n" % (r.ru_utime + r.ru_stime))
    sys.exit(p.returncode)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "cpu":
        cpu(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 6 and sys.argv[1] == "one":
        one(*sys.argv[2:8])
    elif len(sys.argv) == 6 and sys.argv[1] == "summary":
        summary(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "floor":
        floor(*sys.argv[2:])
    else:
        sys.exit("usage: redis-run.py one|summary ...")
