"""The rooms' include rule: every #include "x.h" of a production source
goes to its own room or to a room below it in the room order, which is
written once, in DESIGN.md's ```rooms block (each line `room: rooms it may
use directly`; a room may also use everything those rooms may use). The
planner may include only the C standard library's headers. Prints each
violation as FILE:LINE: ROOM includes HEADER of ROOM2, exits 1 on any.

  check_rooms.py SRC_ROOT [FILE ...]     FILEs: check these alone (the
                                         planted-include test uses it)"""
import os
import re
import sys

C_STD = {"assert.h", "complex.h", "ctype.h", "errno.h", "fenv.h", "float.h", "inttypes.h",
         "iso646.h", "limits.h", "locale.h", "math.h", "setjmp.h", "signal.h", "stdalign.h",
         "stdarg.h", "stdatomic.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h",
         "stdnoreturn.h", "string.h", "tgmath.h", "threads.h", "time.h", "uchar.h", "wchar.h",
         "wctype.h"}
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def read_rooms(root):
    text = open(os.path.join(root, "DESIGN.md"), encoding="utf-8").read()
    m = re.search(r"```rooms\n(.*?)```", text, re.S)
    if not m:
        sys.exit("check_rooms: DESIGN.md has no ```rooms block")
    direct = {}
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        room, _, below = line.partition(":")
        direct[room.strip()] = below.split()
    for r, below in direct.items():
        for b in below:
            if b not in direct:
                sys.exit("check_rooms: room %s uses %s, which the block does not define" % (r, b))
    allowed = {}

    def closure(r, seen):
        if r in allowed:
            return allowed[r]
        if r in seen:
            sys.exit("check_rooms: the room order has a cycle through %s" % r)
        out = set(direct[r])
        for b in direct[r]:
            out |= closure(b, seen | {r})
        allowed[r] = out
        return out

    for r in direct:
        closure(r, set())
    return direct, allowed


def room_of(rel, rooms):
    """The room of a path: the longest room that is a folder prefix of it
    (cuda/, nocuda/ and deeper folders belong to the room above them)."""
    best = None
    for r in rooms:
        if rel == r or rel.startswith(r + "/"):
            if best is None or len(r) > len(best):
                best = r
    return best


def walk(root, rooms):
    for r in sorted(rooms):
        top = os.path.join(root, r)
        for d, _, files in os.walk(top):
            for f in files:
                if f.endswith(SOURCES):
                    rel = os.path.relpath(os.path.join(d, f), root)
                    if room_of(rel, rooms) == r:
                        yield rel


def main():
    root = sys.argv[1]
    direct, allowed = read_rooms(root)
    files = list(walk(root, direct))
    headers = {}
    for rel in files:
        headers.setdefault(os.path.basename(rel), set()).add(room_of(rel, direct))
    check = sys.argv[2:] or files
    bad = 0
    for rel in check:
        room = room_of(rel, direct)
        for n, line in enumerate(open(os.path.join(root, rel), encoding="utf-8", errors="replace"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            if kind == "<":
                if room == "planner" and name not in C_STD:
                    print("%s:%d: planner includes <%s>: the planner uses the C library only"
                          % (rel, n, name))
                    bad += 1
                continue
            owners = headers.get(os.path.basename(name))
            if not owners:
                continue  # a third-party header spelled with quotes
            if room in owners:
                continue
            ok = [o for o in owners if o in allowed[room]]
            if not ok:
                print("%s:%d: %s includes %s of %s (%s may use: %s)"
                      % (rel, n, room, name, "/".join(sorted(owners)), room,
                         " ".join(sorted(allowed[room])) or "nothing"))
                bad += 1
    print("check_rooms: %d files, %d includes against the room order" % (len(check), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
