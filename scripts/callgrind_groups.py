#!/usr/bin/env python3
"""Instructions per request of a server's callgrind file, by what the code does (issue 35).

    callgrind_groups.py REQUESTS FILE [FILE ...]

FILE: a callgrind output of `wort serve` or of memcached (scripts/serve_callgrind.sh writes
them, callgrind.SERVER.MIX); REQUESTS: the requests counted in it (serve_callgrind.sh's N).
Prints one column per file: the self instructions of every function (callgrind_annotate),
summed by group and divided by REQUESTS. Groups are matched on the function's name (first
match wins, in the order of GROUPS); memcached's binary has no symbols, so its own code is one
group ("memcached itself": parse, hash, items, reply building, its stats) beside libevent and
the C library. Not a test: nothing is asserted.
"""
import re
import subprocess
import sys

GROUPS = [
    ("parse (wort Parser, token memchr)", r"server::Parser::|server::Parse[UI]64|server::ValidKey|__memchr"),
    ("index (wort ART)", r"wort::art::"),
    ("store (Store, allocator, epoch, persist)", r"server::Store::|server::KeyGuard|wort::Allocator|wort::alloc::|wort::sync::|wort::pm::|server::Recency"),
    ("execute + reply (Handler, VALUE/STORED lines)", r"server::Handler::|AppendValue|server::ServerStats|basic_string|_Function_handler|ItemView"),
    ("memcpy/memmove (values in and out)", r"__memcpy|__memmove|memcpy@|memmove@"),
    ("syscall wrappers (recv/read, send/sendmsg, epoll_wait)",
     r"sysv/linux/(recv|send|read|write|epoll_wait|sendmsg|recvmsg)\.c|:(recv|send|read|__libc_read|__libc_sendmsg|sendmsg|epoll_wait)\b|asynccancel|socket_ops::|system_category|__libc_(recv|send)"),
    ("pthread mutexes (wort: asio's scheduler and socket locks; memcached: item, stats, thread locks)", r"pthread_mutex"),
    ("event loop (asio: reactor, ops, handlers, shared_ptr)", r"asio::|Connection<|_Sp_counted|__shared_count|shared_ptr|operator new|operator delete|malloc|free\b|_int_"),
    ("libevent (memcached's event loop)", r"libevent"),
    ("memcached itself (no symbols)", r"/usr/bin/memcached"),
    ("C library strings and numbers (strtol, strcmp, strlen, memcmp)", r"strtol|strtoul|strcmp|strlen|memcmp|ctype|errno-loc"),
    ("clock (clock_gettime, time)", r"clock_gettime|system_clock|__vdso|time\.c"),
]


def groups(path, requests):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True,
                         check=True).stdout
    total = 0
    sums = {g: 0 for g, _ in GROUPS}
    sums["other"] = 0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        name = m.group(2)
        if "PROGRAM TOTALS" in name:
            total = ir
            continue
        for g, pat in GROUPS:
            if re.search(pat, name):
                sums[g] += ir
                break
        else:
            sums["other"] += ir
    return {g: v / requests for g, v in sums.items()}, total / requests


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n = int(sys.argv[1])
    cols = [groups(p, n) for p in sys.argv[2:]]
    names = [p.split("/")[-1].replace("callgrind.", "") for p in sys.argv[2:]]
    print("| instructions per request | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for g in [g for g, _ in GROUPS] + ["other"]:
        if all(c[0][g] < 0.5 for c in cols):
            continue
        print(f"| {g} | " + " | ".join(f"{c[0][g]:,.0f}" for c in cols) + " |")
    print("| **total** | " + " | ".join(f"**{c[1]:,.0f}**" for c in cols) + " |")


if __name__ == "__main__":
    main()
