# Which path of the kernel moved the ranks in a traced run (trace.sh), between 1.5 s and 14 s after the first
# event: the context each sched_migrate_task of a rank was recorded in. A move made in a softirq on a CPU that was
# running something is the periodic (busy) balance, sched_balance_domains; one in a softirq on an idle CPU is the
# idle balance; one by migration/N is an active balance (the stopper moving a running task); one in a task's own
# context is a wake's placement or a new-idle balance. Then, per move, the ranks on each CPU just before it.
# Usage: python3 moves.py trace-K.txt (gunzip the trace first).
import collections, re, sys
exec(open(__file__.replace('moves.py', 'analyze.py')).read().split('print("copies"')[0])
line_re = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S{5})\s+([\d.]+): sched_(\w+): (.*)')
T0 = None
where = {}
paths = collections.Counter()
for l in lines:
    m = line_re.search(l)
    if not m:
        continue
    t, c, kind = float(m.group(5)), int(m.group(3)), m.group(6)
    T0 = T0 if T0 is not None else t
    if kind == 'switch':
        s = sw.search(l)
        prev, nxt = int(s.group(4)), int(s.group(7))
        for p in (prev, nxt):
            if p in copy_of:
                where[p] = c
        continue
    if kind != 'migrate_task':
        continue
    mm = mig.search(l)
    pid, orig, dest = int(mm.group(3)), int(mm.group(4)), int(mm.group(5))
    if pid in copy_of and T0 + 1.5 < t < T0 + 14:
        who, flags = m.group(1), m.group(4)
        if who.startswith('migration/'):
            path = 'active balance (stopper)'
        elif flags[2] == 's':
            path = 'softirq balance on ' + ('an idle' if who == '<idle>' else 'a busy') + ' CPU'
        else:
            path = 'task context (wake placement or new-idle balance)'
        paths[path] += 1
        before = collections.Counter(where.get(r) for r in copy_of)
        print("%7.3f s copy %d %d->%d, ranks per CPU before: %s, by %s" % (
            t - T0, copy_of[pid], orig, dest, dict(sorted(before.items())), path))
    if pid in copy_of:
        where[pid] = dest
for path, n in paths.most_common():
    print(n, "moves of ranks:", path)
