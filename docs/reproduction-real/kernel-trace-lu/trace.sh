#!/bin/bash
# Four copies of mpi_lu on plain Linux (no cosched, no cgroups), every context switch, move and fork traced
# with ftrace: the kernel's side of "What a program does between its exchanges" in docs/reproduction-real.md.
# Usage (root): trace.sh APPS_DIR OUT_DIR [N]   then: python3 analyze.py OUT_DIR/trace.txt
# (trace-K.txt.gz beside it are the three runs kernel-K.txt reports; gunzip one to analyse it again)
set -euo pipefail
apps=$1 out=$2 n=${3:-5000}
T=/sys/kernel/tracing
[ -e $T/trace ] || mount -t tracefs nodev $T
mkdir -p "$out"
events="sched_switch sched_migrate_task sched_process_fork"
echo 0 > $T/tracing_on; echo > $T/trace; echo 8192 > $T/buffer_size_kb
for e in $events; do echo 1 > $T/events/sched/$e/enable; done
echo 1 > $T/tracing_on
cd "$apps"
for i in 1 2 3 4; do
    mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -x OPENBLAS_NUM_THREADS=1 \
        -np 2 ./mpi_lu --n "$n" --grid 2x1 --wait spin > "$out/out.$i" 2>&1 &
done
wait
echo 0 > $T/tracing_on
cat $T/trace > "$out/trace.txt"
for e in $events; do echo 0 > $T/events/sched/$e/enable; done
