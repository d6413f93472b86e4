"""The rooms' include rule: every #include "x.h" of a production source
goes to its own room or to a room below it in the room order, which is
written once, in DESIGN.md's ```rooms block (each line `room: rooms it may
use directly`; a room may also use everything those rooms may use). A
room written `FOLDER/*` stands for each folder in FOLDER (but cuda/ and
nocuda/, which belong to the room above them), each a room of its own:
as a line's room every such folder gets the line's uses (another line may
add to one of them), and among a line's uses it names them all. The
planner may include only the C standard library's headers. Prints each
violation as FILE:LINE: ROOM includes HEADER of ROOM2, exits 1 on any.

The build follows the same order: without FILEs the checker also reads
each room's CMakeLists.txt, and a library (add_library, add_executable)
may link only the libraries of its own room and of the rooms below it
(a library of a folder that holds several rooms, sp_ranks, those of any
of them). Prints each as CMAKEFILE: TARGET links LIB of ROOM.

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


OWN_FOLDERS = ("cuda", "nocuda")


def expand(root, name):
    """The rooms a name stands for: FOLDER/* is each folder in FOLDER."""
    if not name.endswith("/*"):
        return [name]
    top = name[:-2]
    subs = sorted(d for d in os.listdir(os.path.join(root, top))
                  if os.path.isdir(os.path.join(root, top, d)) and d not in OWN_FOLDERS)
    return [top + "/" + d for d in subs]


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
        uses = [r for b in below.split() for r in expand(root, b)]
        for r in expand(root, room.strip()):
            direct.setdefault(r, [])
            direct[r] += [u for u in uses if u not in direct[r]]
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


TARGET = re.compile(r"add_(?:library|executable)\(\s*([A-Za-z0-9_]+)")
LINKS = re.compile(r"target_link_libraries\(\s*([A-Za-z0-9_]+)(.*?)\)", re.S)


def check_links(root, direct, allowed):
    """The libraries each room's CMakeLists.txt links: (files, bad)."""
    rooms_of = {}  # target -> the rooms its folder holds
    found = []
    tops = sorted({r.split("/")[0] for r in direct})
    for top in tops:
        for d, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            rel = os.path.relpath(d, root)
            own = room_of(rel, direct)
            held = {own} if own else {r for r in direct if r.startswith(rel + "/")}
            path = os.path.join(d, "CMakeLists.txt")
            text = open(path, encoding="utf-8").read()
            for t in TARGET.findall(text):
                rooms_of[t] = held
            found.append((os.path.relpath(path, root), text, held))
    bad = 0
    for path, text, held in found:
        may = set(held)
        for r in held:
            may |= allowed[r]
        for target, args in LINKS.findall(text):
            for lib in args.split():
                if lib not in rooms_of or lib == target:
                    continue
                if not rooms_of[lib] & may:
                    print("%s: %s links %s of %s (%s may use: %s)"
                          % (path, target, lib, "/".join(sorted(rooms_of[lib])),
                             "/".join(sorted(held)), " ".join(sorted(may - held)) or "nothing"))
                    bad += 1
    return len(found), bad


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
    if not sys.argv[2:]:
        nfiles, nbad = check_links(root, direct, allowed)
        print("check_rooms: %d CMakeLists.txt, %d links against the room order" % (nfiles, nbad))
        bad += nbad
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
