"""Memory of real processes, read from /proc (Linux). The benchmarks and the
memory tests put this file's text in front of the code their child
processes run, so every number is measured the same way.

* ``status()``: this process's ``VmRSS`` and ``VmHWM`` (peak RSS), in bytes;
* ``pss(pid)``: a process's proportional set size, in bytes: a page shared
  by k processes counts 1/k in each, so the PSS of a parent and its forked
  DataLoader workers adds up to what they hold together;
* ``held(pid)``: the part of it that is the process's own memory (anonymous
  and shared-memory pages, ``Pss_Anon + Pss_Shmem``), without the pages of
  files it maps, which other programs mapping the same libraries share and
  so change from moment to moment;
* ``children()``: the pids of this process's children (DataLoader workers).
"""

import os


def status():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                found[line.split(":")[0]] = int(line.split()[1]) * 1024
    return found


def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def held(pid):
    found = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Pss:", "Pss_Anon:", "Pss_Shmem:")):
                found[line.split(":")[0]] = int(line.split()[1]) * 1024
    if "Pss_Anon" not in found:  # (before Linux 5.3: all of it)
        return found.get("Pss", 0)
    return found["Pss_Anon"] + found.get("Pss_Shmem", 0)


def children():
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            found += [int(p) for p in f.read().split()]
    return found
