#!/usr/bin/env python3
"""Damage a copy of an LMDB index, reproducibly by seed.

usage: damage.py SRC DST SEED

Copies the index directory SRC (its data.mdb; lock.mdb is left out) to
DST and damages DST/data.mdb one way, chosen by SEED: bit flips (1 to
16), a truncation, a zeroed 4 KB page, a page of random bytes, two pages
swapped, or a page written over with a copy of another.  Seeds cycle
through the kinds, and the place is drawn over the whole file, so that
the meta pages, the B-tree pages and the overflow pages of the values
all get their share.  Prints what it did on one line.
"""

import os
import random
import sys

PAGE = 4096
KINDS = ("flip", "truncate", "zero", "random", "swap", "duplicate")


def damage(data, seed):
    """Return (damaged bytes, description) for this seed."""
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)]
    size = len(data)
    pages = max(1, size // PAGE)
    out = bytearray(data)
    if kind == "flip":
        n = rng.choice((1, 1, 2, 4, 8, 16))
        where = []
        for _ in range(n):
            pos = rng.randrange(size)
            out[pos] ^= 1 << rng.randrange(8)
            where.append(pos)
        return bytes(out), "flip %d bit(s) at %s" % (
            n, ",".join(str(w) for w in where))
    if kind == "truncate":
        # Below the meta pages, at a page boundary, or anywhere.
        how = rng.randrange(3)
        if how == 0:
            cut = rng.randrange(2 * PAGE)
        elif how == 1:
            cut = rng.randrange(2, pages) * PAGE if pages > 2 else PAGE
        else:
            cut = rng.randrange(size)
        return bytes(out[:cut]), "truncate to %d of %d bytes" % (cut, size)
    page = rng.randrange(pages)
    if kind in ("swap", "duplicate"):
        # Another page, a whole LMDB page each: what a misdirected write
        # or a file system's mix-up leaves.
        other = rng.randrange(pages - 1) if pages > 1 else 0
        other += other >= page
        a = out[page * PAGE:(page + 1) * PAGE]
        b = out[other * PAGE:(other + 1) * PAGE]
        out[page * PAGE:(page + 1) * PAGE] = b
        if kind == "swap":
            out[other * PAGE:(other + 1) * PAGE] = a
            return bytes(out[:size]), "swap pages %d and %d of %d" % (
                page, other, pages)
        return bytes(out[:size]), "page %d over page %d of %d" % (
            other, page, pages)
    if kind == "zero":
        fill = bytes(PAGE)
    else:
        fill = bytes(rng.randrange(256) for _ in range(PAGE))
    out[page * PAGE:(page + 1) * PAGE] = fill
    return bytes(out[:size]), "%s page %d of %d" % (kind, page, pages)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(os.path.join(src, "data.mdb"), "rb") as f:
        data = f.read()
    out, what = damage(data, seed)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "data.mdb"), "wb") as f:
        f.write(out)
    print("seed %d: %s" % (seed, what))


if __name__ == "__main__":
    main()
