# What ends a turn on CPU 0 in trace.txt (ftrace of `cosched bench node --scenario-file late-sleeper.json`,
# events sched_switch, sched_wakeup and timer:hrtimer_expire_entry): for each switch between two of the
# scenario's processes (comm "cosched"), the time since the previous switch and the last event on the CPU before
# it. A switch with no timer and no wake-up before it, after a turn of about 1.4 ms, was asked for by the running
# process's own read of its CPU clock (task_sched_runtime -> update_curr). Turns under 0.2 ms are left out: the
# same trace holds the ctxswitch scenario's yields, microseconds each. Usage: python3 turns.py trace.txt
import collections, re, sys
events = []
for line in open(sys.argv[1]):
    m = re.search(r'\[000\]\s+\S+\s+([\d.]+): (\w+): (.*)', line)
    if m:
        events.append((float(m.group(1)), m.group(2), m.group(3)))
causes = collections.Counter()
turns_ms = []
last_switch = None
for i, (t, kind, rest) in enumerate(events):
    if kind != 'sched_switch':
        continue
    scenario = 'prev_comm=cosched' in rest and 'next_comm=cosched' in rest and 'prev_state=R' in rest
    if scenario and last_switch is not None and t - last_switch >= 0.0002:
        before = events[i - 1]
        cause = 'nothing since the turn began' if before[0] <= last_switch else before[1] + (
            ' (tick)' if 'tick_nohz_handler' in before[2] else ' (sleeper timer)' if 'hrtimer_wakeup' in before[2] else '')
        causes[cause] += 1
        if cause == 'nothing since the turn began':
            turns_ms.append((t - last_switch) * 1e3)
    last_switch = t
for cause, n in causes.most_common():
    print(f"{n:5d} preemptions of a running scenario process; last event on the CPU before it: {cause}")
turns_ms.sort()
if turns_ms:
    print("turns ended with nothing before them, ms: median %.3f, 10%% %.3f, 90%% %.3f" % (
        turns_ms[len(turns_ms) // 2], turns_ms[len(turns_ms) // 10], turns_ms[9 * len(turns_ms) // 10]))
