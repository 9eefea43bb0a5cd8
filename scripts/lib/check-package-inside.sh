#!/bin/bash
# The part of scripts/check-package that runs inside the older Debian userland (copied there as
# /root/check-inside.sh). Every step says what it does; the first failure ends the script with its reason.
#
#   check-inside.sh install TARBALL   unpack the package, run its install.sh, check what it installed
#   check-inside.sh daemons           (no systemd) a controller on TCP with MUNGE, an agent that proves itself
#                                     with MUNGE, a user's job through `cosched submit`, a remote user's status
#   check-inside.sh prepare-units     point the agent at 127.0.0.1:780 (a drop-in) and enable the units
#   check-inside.sh units             (systemd is PID 1) start the units, check them active, run a job; then the
#                                     single-machine unit alone, and a job again
set -euo pipefail

say() { echo "check-inside: $*"; }
fail() {
    echo "check-inside: FAILED: $*" >&2
    exit 1
}
# wait_until WHAT SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds, or fail naming WHAT.
wait_until() {
    local what=$1 limit=$2 start=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        [ $((SECONDS - start)) -lt "$limit" ] || fail "$what: not within $limit s"
        sleep 0.2
    done
}
# status_json: `cosched status --json` on one line without blanks (no jq here; strings are not looked into).
status_json() { cosched status --json | tr -d ' \t\n'; }
node_connected() { status_json | grep -q '"connected":true'; }
# job_state ID: the job's state (its fields begin "id":N,"uid":..,"class":..,"mode":..,"state":"...").
job_state() {
    status_json | grep -o "\"id\":$1,[^{}]*\"state\":\"[a-z]*\"" | sed 's/.*"state":"\([a-z]*\)"/\1/'
}
job_ended() { case "$(job_state "$1")" in finished | failed | killed) return 0 ;; *) return 1 ;; esac }

# run_job WHO: submit a one-task job as user WHO, wait for it to finish, check its output and its cgroup.
run_job() {
    local who=$1 reply job state logs
    # shellcheck disable=SC2016 # expanded by the job's shell
    reply=$(runuser -u "$who" -- cosched submit --json -n 1 -- /bin/sh -c \
        'echo "hello from job $COSCHED_JOB_ID on $COSCHED_NODE as $(id -un)"; grep -m1 "cosched/.*/job-" /proc/self/cgroup') ||
        fail "cosched submit as $who: $reply"
    job=$(echo "$reply" | tr -d ' \t\n' | grep -o '"job":[0-9]*' | cut -d: -f2)
    [ -n "$job" ] || fail "cosched submit printed no job id: $reply"
    say "submitted job $job as $who"
    wait_until "job $job to end" 30 job_ended "$job"
    state=$(job_state "$job")
    [ "$state" = finished ] || fail "job $job ended $state: $(cosched status --json)"
    logs=$(cosched logs "$job") || fail "cosched logs $job: $logs"
    printf '%s\n' "$logs" | sed 's/^/    /'
    echo "$logs" | grep -q "hello from job $job on .* as $who" || fail "job $job's log lacks its greeting"
    echo "$logs" | grep -q "cosched/.*job-$job" || fail "job $job's task did not run inside its cgroup"
    say "job $job finished, its output in its log, its task inside its cgroup"
}

install_package() {
    local tarball=$1 dir version
    say "userland: $(grep '^PRETTY_NAME=' /etc/os-release | cut -d'"' -f2), $(ldd --version | head -n 1)"
    dir=/root/unpacked
    rm -rf "$dir" && mkdir -p "$dir"
    tar -xzf "$tarball" -C "$dir" || fail "cannot unpack $tarball"
    local unpacked=("$dir"/cosched-*)
    "${unpacked[0]}/install.sh" || fail "install.sh failed"
    command -v cosched >/dev/null || fail "cosched is not on PATH after install.sh"
    version=$(cosched --version) || fail "cosched --version: $version"
    say "cosched --version: $version"
    for file in /usr/local/share/man/man1/cosched.1 /usr/local/share/man/man1/cosched-submit.1 \
        /usr/local/share/bash-completion/completions/cosched /usr/local/lib/libcosched.so.0 \
        /usr/local/include/cosched.h /usr/local/lib/systemd/system/cosched-agent.service \
        /usr/local/share/cosched/slurm/cosched_spank.c /usr/local/share/cosched/slurm/Makefile; do
        [ -s "$file" ] || fail "install.sh did not install $file"
    done
    ldconfig -p | grep -q 'libcosched.so.0 ' || fail "libcosched.so.0 is not in the loader's cache"
    say "libcosched.so.0 loads: $(ldd /usr/local/lib/libcosched.so.0 | grep -c 'not found') missing libraries"
    ! ldd /usr/local/lib/libcosched.so.0 | grep -q 'not found' || fail "libcosched.so.0: $(ldd /usr/local/lib/libcosched.so.0)"
    id alice >/dev/null 2>&1 || useradd -m alice || fail "useradd alice"
}

daemons() {
    local state=/var/lib/cosched-check address=127.0.0.1:7800 pids=()
    rm -rf "$state"
    mkdir -p "$state/controller" "$state/agent" /run/munge
    chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
    wait_until "munged to answer" 10 sh -c 'munge -n | unmunge'
    say "munged is up (the distribution's munge $(dpkg-query -W -f='${Version}' munge))"
    cosched controller --tcp "$address" --nodes "$(hostname)" --state-dir "$state/controller" --monitor off \
        >"$state/controller.log" 2>&1 &
    pids+=($!)
    wait_until "the controller's socket" 15 test -S /run/cosched/cosched.sock
    cosched agent --controller "$address" --state-dir "$state/agent" >"$state/agent.log" 2>&1 &
    pids+=($!)
    if ! (wait_until "the agent to connect over TCP with MUNGE" 20 node_connected); then
        sed 's/^/    controller: /' "$state/controller.log"
        sed 's/^/    agent: /' "$state/agent.log"
        fail "the agent did not connect"
    fi
    say "controller on $address and agent connected (MUNGE, libmunge loaded at run time); nodes:"
    cosched status | sed 's/^/    /'
    run_job alice
    if [ -x /root/launch_and_register ]; then
        install -m 755 /root/launch_and_register /usr/local/bin/
        local out
        out=$(runuser -u alice -- launch_and_register -n 2 -- /bin/sh -c 'grep -m1 "cosched/.*/job-" /proc/self/cgroup') ||
            fail "the example launcher (libcosched.so) failed: $out"
        printf '%s\n' "$out" | sed 's/^/    /'
        printf '%s\n' "$out" | grep -q '^job [0-9]' || fail "the example launcher registered no job"
        [ "$(printf '%s\n' "$out" | grep -c 'cosched/.*job-')" = 2 ] ||
            fail "the example launcher's processes were not in their job's cgroup"
        say "a program linked against the package's libcosched.so registered its processes as alice"
    fi
    runuser -u alice -- cosched status --controller "$address" >/dev/null ||
        fail "alice's cosched status over TCP with MUNGE was refused"
    say "alice's status over TCP with MUNGE answered"
    kill "${pids[@]}"
    wait "${pids[@]}" || true
    kill "$(cat /run/munge/munged.pid)" || true
}

# main_is_cosched UNIT: the unit's main process is cosched itself (systemd's child has exec'd it).
main_is_cosched() {
    [ "$(ps -o comm= -p "$(systemctl show -p MainPID --value "$1")")" = cosched ]
}
# is_active UNIT: fail with the unit's status and journal unless it is active; print its main process.
is_active() {
    local unit=$1
    if ! systemctl is-active --quiet "$unit"; then
        systemctl status --no-pager "$unit" | sed 's/^/    /' || true
        journalctl --no-pager -n 40 -u "$unit" | sed 's/^/    /' || true
        fail "$unit is $(systemctl is-active "$unit" || true)"
    fi
    case "$unit" in cosched*) wait_until "$unit's main process to be cosched" 10 main_is_cosched "$unit" ;; esac
    say "$unit is active: $(systemctl show -p MainPID --value "$unit" | xargs ps -o args= -p)"
}

# What a site does before it starts the units: point the agent at its controller (a drop-in, as
# `systemctl edit` writes), enable the units and MUNGE.
prepare_units() {
    mkdir -p /etc/systemd/system/cosched-agent.service.d
    cat >/etc/systemd/system/cosched-agent.service.d/controller.conf <<'UNIT'
[Service]
ExecStart=
ExecStart=/usr/local/bin/cosched agent --controller 127.0.0.1:780 --state-dir /var/lib/cosched --job-cgroups service
UNIT
    # The controller's node list from the configuration file, as a site may keep it: its unit's --nodes goes.
    mkdir -p /etc/systemd/system/cosched-controller.service.d /etc/cosched
    cat >/etc/systemd/system/cosched-controller.service.d/nodes.conf <<'UNIT'
[Service]
ExecStart=
ExecStart=/usr/local/bin/cosched controller --tcp 0.0.0.0:780 --state-dir /var/lib/cosched --socket /run/cosched/cosched.sock
UNIT
    printf 'nodes = ["%s"]\n' "$(hostname)" >/etc/cosched/cosched.toml
    chmod 644 /etc/cosched/cosched.toml
    systemctl enable munge.service cosched-controller.service cosched-agent.service 2>&1 | sed 's/^/    /' ||
        fail "systemctl enable"
    say "the drop-ins and /etc/cosched/cosched.toml written; munge, cosched-controller and cosched-agent enabled"
}

# cgroup_of PID: the process's cgroup in the v2 hierarchy ("/system.slice/...").
cgroup_of() { sed -n 's/^0:://p' "/proc/$1/cgroup"; }
# freeze_flags DIR DIR: of two v2 cgroups (paths below the mount), read by one process microseconds apart, what
# the agent asked (`cgroup.freeze`) and what the kernel has done (`frozen` in `cgroup.events`): "0110" is the first
# asked to run and the second to stop, the first running and the second stopped.
freeze_flags() {
    cat "$v2_mount$1/cgroup.freeze" "$v2_mount$2/cgroup.freeze" "$v2_mount$1/cgroup.events" "$v2_mount$2/cgroup.events" |
        sed -n 's/^frozen //p; /^[01]$/p' | tr -d '\n'
}
# job_task JOB: a process of alice's in the cgroup of job JOB.
job_task() {
    local p
    for p in $(pgrep -u alice); do
        grep -qs "/job-$1\$" "/proc/$p/cgroup" && echo "$p" && return 0
    done
    return 1
}

# gang_in_service UNIT: two jobs of every CPU, as alice; each task in UNIT's cgroup under cosched/<node>/job-N,
# the daemon in UNIT's leaf `daemon`, and the two jobs taking turns over 150 samples 20 ms apart: each asked to
# run and to stop, and each seen stopped by the kernel. The kernel's `frozen` lags the request: an outgoing task
# must get a CPU to reach the freezer (running no user code meanwhile), and the incoming gang is started after a
# bounded wait (docs/runtime.md), so both jobs often read unfrozen at once; both asked to run at once should not.
gang_in_service() {
    local unit=$1 jobs=() job pid dirs=() main samples=0 flags asked_a=0 asked_b=0 asked_both=0 stopped_a=0
    local stopped_b=0 unfrozen_both=0
    v2_mount=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
    main=$(systemctl show -p MainPID --value "$unit")
    [ "$(cgroup_of "$main")" = "/system.slice/$unit/daemon" ] ||
        fail "$unit's daemon is in $(cgroup_of "$main"), not its leaf /system.slice/$unit/daemon"
    for _ in 1 2; do
        job=$(runuser -u alice -- cosched submit --json -n "$(nproc)" -- timeout 60 sh -c 'while :; do :; done' |
            tr -d ' \t\n' | grep -o '"job":[0-9]*' | cut -d: -f2)
        [ -n "$job" ] || fail "cosched submit of a spinning job printed no id"
        jobs+=("$job")
    done
    for job in "${jobs[@]}"; do
        wait_until "a task of job $job" 20 job_task "$job"
        pid=$(job_task "$job")
        dirs+=("$(cgroup_of "$pid")")
        [ "${dirs[-1]}" = "/system.slice/$unit/cosched/$(hostname)/job-$job" ] ||
            fail "job $job's task $pid is in ${dirs[-1]}, not inside $unit"
    done
    say "the daemon in /system.slice/$unit/daemon; jobs ${jobs[*]} in ${dirs[*]}"
    while [ $samples -lt 150 ]; do
        flags=$(freeze_flags "${dirs[0]}" "${dirs[1]}")
        [ "${flags:0:1}" = 0 ] && asked_a=$((asked_a + 1))
        [ "${flags:1:1}" = 0 ] && asked_b=$((asked_b + 1))
        [ "${flags:0:2}" = 00 ] && asked_both=$((asked_both + 1))
        [ "${flags:2:1}" = 1 ] && stopped_a=$((stopped_a + 1))
        [ "${flags:3:1}" = 1 ] && stopped_b=$((stopped_b + 1))
        [ "${flags:2:2}" = 00 ] && unfrozen_both=$((unfrozen_both + 1))
        samples=$((samples + 1))
        sleep 0.02
    done
    say "of $samples samples: asked to run, job ${jobs[0]} in $asked_a, job ${jobs[1]} in $asked_b, both in" \
        "$asked_both; stopped by the kernel, job ${jobs[0]} in $stopped_a, job ${jobs[1]} in $stopped_b;" \
        "neither stopped in $unfrozen_both"
    { [ $asked_a -gt 0 ] && [ $asked_b -gt 0 ] && [ $asked_a -lt $samples ] && [ $asked_b -lt $samples ] &&
        [ $stopped_a -gt 0 ] && [ $stopped_b -gt 0 ]; } || fail "the two jobs did not take turns inside $unit"
    cosched kill "${jobs[@]}" >/dev/null || fail "cosched kill ${jobs[*]}"
    for job in "${jobs[@]}"; do wait_until "job $job to end" 30 job_ended "$job"; done
    say "two gangs took turns inside $unit's delegated cgroup"
}

units() {
    say "systemd $(systemctl --version | head -n 1 | cut -d' ' -f2) is PID 1; the system is" \
        "$(systemctl is-system-running || true)"
    systemctl is-enabled --quiet cosched-controller.service || fail "cosched-controller.service is not enabled"
    wait_until "munge.service and the enabled units to start at boot" 30 \
        systemctl is-active --quiet munge.service cosched-controller.service cosched-agent.service
    is_active munge.service
    is_active cosched-controller.service
    is_active cosched-agent.service
    if ! (wait_until "the agent to connect" 20 node_connected); then
        journalctl --no-pager -n 40 -u cosched-agent.service -u cosched-controller.service | sed 's/^/    /'
        fail "the agent did not connect to the controller"
    fi
    cosched status | sed 's/^/    /'
    run_job alice
    gang_in_service cosched-agent.service
    say "restarting both units with systemctl"
    systemctl restart cosched-controller.service cosched-agent.service
    is_active cosched-controller.service
    is_active cosched-agent.service
    wait_until "the agent to connect again" 20 node_connected
    run_job alice
    say "stopping them and starting the single-machine unit (cosched up)"
    systemctl stop cosched-agent.service cosched-controller.service
    systemctl start cosched.service
    is_active cosched.service
    wait_until "cosched up's node" 20 node_connected
    run_job alice
    gang_in_service cosched.service
    systemctl stop cosched.service
    local failed
    failed=$(systemctl list-units --failed --plain --no-legend)
    [ -z "$failed" ] || fail "failed units: $failed"
    say "no unit failed; what systemd and the daemons logged at warning level or above:"
    journalctl -b --no-pager -p warning -u cosched-controller.service -u cosched-agent.service -u cosched.service |
        sed 's/^/    /'
}

# The Python wheel with Debian's own Python (3.9 on bullseye), in a virtual environment, with pandas from the wheels
# the host fetched for it (nothing is downloaded in here): the package imports and simulates.
python_wheel() {
    local wheel=$1
    python3 -m venv /opt/cosched-py || fail "python3 -m venv failed"
    /opt/cosched-py/bin/pip install --quiet --no-index --find-links /root/wheels pandas "$wheel" ||
        fail "pip could not install $wheel with pandas from /root/wheels"
    /opt/cosched-py/bin/python - <<'PY' || fail "the wheel does not import or simulate with $(python3 --version)"
import sys
import cosched
result = cosched.simulate(jobs=5, nodes=4, schemes="Local", runtime_scale=0.02)
assert list(result.summary["scheme"]) == ["Local"], result.summary
print(f"check-inside: cosched {cosched.__version__} on Python {sys.version.split()[0]}: "
      f"{int(result.summary['jobs_completed'][0])} jobs simulated")
PY
}

case "${1:-}" in
    install) install_package "${2:?install needs the tarball}" ;;
    wheel) python_wheel "${2:?wheel needs the wheel}" ;;
    daemons) daemons ;;
    prepare-units) prepare_units ;;
    units) units ;;
    *) fail "usage: check-inside.sh install TARBALL | wheel WHEEL | daemons | prepare-units | units" ;;
esac
say "${1} passed"
