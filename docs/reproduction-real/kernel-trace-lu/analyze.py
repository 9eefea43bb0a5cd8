# Per copy of the traced run (trace.sh): how long its two ranks sat on one CPU, how long both ran at once, how
# often they were moved, between 1.5 s and 14 s after the first event (all ranks past MPI start-up); and how long a
# rank held its CPU at a time, and what ended its turns.
import re, sys, collections
lines = open(sys.argv[1]).read().splitlines()
fork = re.compile(r'(\S+)-(\d+)\s+\[(\d+)\].*? ([\d.]+): sched_process_fork: comm=(\S+) pid=(\d+) child_comm=(\S+) child_pid=(\d+)')
sw = re.compile(r'\[(\d+)\].*? ([\d.]+): sched_switch: prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)')
mig = re.compile(r' ([\d.]+): sched_migrate_task: comm=(.*?) pid=(\d+) prio=\d+ orig_cpu=(\d+) dest_cpu=(\d+)')
parent = {}
for l in lines:
    m = fork.search(l)
    if m: parent[int(m.group(8))] = int(m.group(6))
# mpirun pids: children of the script; ranks: processes whose parent is an mpirun and whose comm becomes mpi_lu
comm = {}
for l in lines:
    m = sw.search(l)
    if m:
        comm[int(m.group(4))] = m.group(3); comm[int(m.group(7))] = m.group(6)
ranks = [p for p, c in comm.items() if c == 'mpi_lu' and p in parent and comm.get(parent[p]) == 'mpirun']
copy_of = {}
mpiruns = sorted(set(parent[r] for r in ranks))
for r in ranks: copy_of[r] = mpiruns.index(parent[r])
print("copies", len(mpiruns), "ranks", len(ranks))
running = {}   # cpu -> pid
cpu = {}
last = None
t_first_all = None
both = collections.Counter(); colo = collections.Counter(); total = 0.0
migrations = collections.Counter()
active = set()
start_t = None; end_t = None
events = []
for l in lines:
    m = sw.search(l)
    if m:
        events.append(('sw', float(m.group(2)), int(m.group(1)), int(m.group(4)), m.group(5), int(m.group(7))))
        continue
    m = mig.search(l)
    if m:
        events.append(('mig', float(m.group(1)), int(m.group(5)), int(m.group(3)), int(m.group(4)), 0))
T0 = events[0][1]
pairs = collections.defaultdict(list)
for r in ranks: pairs[copy_of[r]].append(r)
for e in events:
    kind, t, c, a, b, nxt = e
    if last is not None and all(len(v) == 2 for v in pairs.values()) and all(r in cpu for r in ranks):
        dt = t - last
        if dt > 0 and len(active) == len(ranks) and T0 + 1.5 < t < T0 + 14:
            total += dt
            for k, (x, y) in pairs.items():
                if cpu[x] == cpu[y]: colo[k] += dt
                if running.get(cpu[x]) == x and running.get(cpu[y]) == y and cpu[x] != cpu[y]: both[k] += dt
    last = t
    if kind == 'sw':
        prev, nxt = a, nxt
        running[c] = nxt
        if nxt in copy_of: cpu[nxt] = c; active.add(nxt)
        if prev in copy_of:
            cpu[prev] = c
            if b in ('X', 'Z', 'X+'): active.discard(prev)
    else:
        pid, dest = a, c
        if pid in copy_of:
            cpu[pid] = dest
            if len(active) == len(ranks) and T0 + 1.5 < t < T0 + 14: migrations[copy_of[pid]] += 1
print("window with all ranks live: %.2f s" % total)
for k in sorted(pairs):
    print("copy %d: colocated %.1f %%, both running %.1f %%, migrations %d (%.2f/s per rank)" % (k, 100*colo[k]/total, 100*both[k]/total, migrations[k], migrations[k]/total/2))
# on-CPU intervals of ranks, and what took the CPU
on_since = {}
iv = []; by_next = collections.Counter(); short_by_next = collections.Counter(); prev_states = collections.Counter()
for e in events:
    kind, t, c, a, b, nxt = e
    if kind != 'sw': continue
    prev = a
    if prev in copy_of and prev in on_since and T0 + 1.5 < t < T0 + 14:
        d = t - on_since.pop(prev)
        iv.append(d)
        nc = comm.get(nxt, '?')
        key = 'rank' if nxt in copy_of else nc
        by_next[key] += d
        prev_states[b] += 1
        if d < 0.001: short_by_next[key] += 1
    if nxt in copy_of: on_since[nxt] = t
iv.sort()
q = lambda f: iv[int(f * (len(iv) - 1))] * 1e3
print("rank on-CPU intervals: %d; quantiles ms: 10%% %.3f 25%% %.3f 50%% %.3f 75%% %.3f 90%% %.3f; total %.2f s" % (len(iv), q(.1), q(.25), q(.5), q(.75), q(.9), sum(iv)))
print("prev_state of a rank leaving:", prev_states.most_common(6))
print("short (<1 ms) turns ended by:", short_by_next.most_common(8))

# Stretches a copy's two ranks spent on one CPU (within the same window; a stretch still open at its end is not
# counted).
cpu = {}; since = {}; stretches = []
for e in events:
    kind, t, c, a, b, nxt = e
    for pid in ((a, nxt) if kind == 'sw' else (a,)):
        if pid in copy_of: cpu[pid] = c
    if not (T0 + 1.5 < t < T0 + 14): continue
    for k, (x, y) in pairs.items():
        together = x in cpu and y in cpu and cpu[x] == cpu[y]
        if together and k not in since: since[k] = t
        if not together and k in since: stretches.append(t - since.pop(k))
stretches.sort()
if stretches:
    print("stretches on one CPU: %d, median %.3f s, longest %.3f s" % (len(stretches), stretches[len(stretches) // 2], stretches[-1]))
