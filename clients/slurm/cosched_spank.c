/*
 * cosched_spank.so: Slurm jobs gang scheduled by cosched at millisecond slices.
 *
 * Slurm keeps allocation, launch, accounting and limits; cosched keeps the matrix, the slices and the classes.
 * This plugin tells cosched what Slurm does, at three points, each as root:
 *
 *   job prolog (slurmd, every node of the job)   cosched slurm begin   the allocation: job, owner, nodes, CPUs
 *   task post-fork (slurmstepd, every step)      cosched slurm attach  the step's tasks on this node, moved into
 *                                                                      the job's cgroup before any of them runs
 *   job epilog (slurmd, every node of the job)   cosched slurm end     the job is over: end what is left of it
 *                                                                      (a command of `cosched rsh`) and forget it
 *
 * It runs the `cosched` binary rather than speaking the protocol itself: a compute node reaches the controller
 * over TCP with a MUNGE credential, which the binary already does, and a call is made once per job step per
 * node, not per task. Everything it passes comes from Slurm (the prolog's environment, slurmstepd's items and
 * environment), never from the job's own environment.
 *
 * If cosched cannot take a job (no controller, a node without an agent, no free matrix row), the job runs as
 * Slurm started it, without gang scheduling, and the reason goes to slurmd's log. With `strict`, the prolog
 * fails instead (Slurm then requeues the job and drains the node). cosched never freezes a process it was not
 * given, so a failure here never leaves a job frozen.
 *
 * plugstack.conf:  required /usr/lib/x86_64-linux-gnu/slurm/cosched_spank.so [cosched=PATH] [socket=PATH]
 *                  [controller=HOST:PORT] [munge_socket=PATH] [timeout_s=N] [strict]
 * See docs/slurm.md.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(cosched, 1);

#define MAX_TASKS 4096
#define OUTPUT_BYTES 2048
#define SETTING_BYTES 512

static struct {
    char cosched[SETTING_BYTES];
    char socket[SETTING_BYTES];
    char controller[SETTING_BYTES];
    char munge_socket[SETTING_BYTES];
    int timeout_s;
    int strict;
} settings = {"/usr/bin/cosched", "", "", "", 30, 0};

/* This step's tasks on this node, gathered until the last one has forked (slurmstepd runs none before). */
static pid_t task_pids[MAX_TASKS];
static uint32_t task_count;

static int copy_setting(char *to, const char *value, const char *arg) {
    if (strlen(value) >= SETTING_BYTES) {
        slurm_error("cosched: plugstack argument too long: %.40s...", arg);
        return -1;
    }
    strcpy(to, value);
    return 0;
}

static int parse_args(int ac, char **av) {
    for (int i = 0; i < ac; i++) {
        const char *arg = av[i];
        const char *eq = strchr(arg, '=');
        const char *value = eq ? eq + 1 : "";
        size_t key_len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (key_len == 7 && !strncmp(arg, "cosched", 7)) {
            if (copy_setting(settings.cosched, value, arg) != 0) return -1;
        } else if (key_len == 6 && !strncmp(arg, "socket", 6)) {
            if (copy_setting(settings.socket, value, arg) != 0) return -1;
        } else if (key_len == 10 && !strncmp(arg, "controller", 10)) {
            if (copy_setting(settings.controller, value, arg) != 0) return -1;
        } else if (key_len == 12 && !strncmp(arg, "munge_socket", 12)) {
            if (copy_setting(settings.munge_socket, value, arg) != 0) return -1;
        } else if (key_len == 9 && !strncmp(arg, "timeout_s", 9)) {
            settings.timeout_s = atoi(value);
            if (settings.timeout_s < 1 || settings.timeout_s > 600) {
                slurm_error("cosched: timeout_s must be 1 to 600 seconds, not '%s'", value);
                return -1;
            }
        } else if (!strcmp(arg, "strict")) {
            settings.strict = 1;
        } else {
            slurm_error("cosched: unknown plugstack argument '%s' (see docs/slurm.md)", arg);
            return -1;
        }
    }
    if (settings.cosched[0] != '/') {
        slurm_error("cosched: cosched=%s must be an absolute path", settings.cosched);
        return -1;
    }
    return 0;
}

/* Slurm calls slurm_spank_init in slurmstepd but not before the prolog and epilog: every entry point reads its
 * arguments, once per process. */
static int settings_read(int ac, char **av) {
    static int outcome = 1;
    if (outcome == 1) outcome = parse_args(ac, av);
    return outcome;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
    (void)sp;
    return settings_read(ac, av);
}

#define ENV_ENTRY_BYTES (SETTING_BYTES + 32)

/* Add NAME=VALUE to the command's environment, if VALUE is set and fits. */
static void add_variable(char env[][ENV_ENTRY_BYTES], char **envp, int *n, const char *name, const char *value) {
    if (value == NULL || value[0] == '\0' || strlen(value) >= SETTING_BYTES) return;
    snprintf(env[*n], ENV_ENTRY_BYTES, "%s=%s", name, value);
    envp[*n] = env[*n];
    (*n)++;
}

/* The fixed environment of the cosched command: how to reach the controller, nothing of the caller's. */
static void command_environment(char env[][ENV_ENTRY_BYTES], char **envp) {
    int n = 0;
    add_variable(env, envp, &n, "PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    add_variable(env, envp, &n, "COSCHED_SOCKET", settings.socket);
    add_variable(env, envp, &n, "COSCHED_CONTROLLER", settings.controller);
    add_variable(env, envp, &n, "COSCHED_MUNGE_SOCKET", settings.munge_socket);
    /* Which slurm.conf `cosched slurm end` asks scontrol about: slurmd's own. */
    add_variable(env, envp, &n, "SLURM_CONF", getenv("SLURM_CONF"));
    envp[n] = NULL;
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Read what the child writes (the first OUTPUT_BYTES of it) until it has exited and closed its output, or the
 * time runs out. */
static int collect(pid_t child, int fd, char *output, int *status) {
    size_t used = 0;
    double deadline = seconds_now() + settings.timeout_s;
    int open_pipe = 1, exited = 0;
    while (open_pipe || !exited) {
        if (open_pipe) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 20) > 0) {
                char chunk[512];
                ssize_t n = read(fd, chunk, sizeof chunk);
                size_t room = OUTPUT_BYTES - 1 - used;
                if (n <= 0) {
                    open_pipe = 0;
                } else {
                    size_t keep = (size_t)n < room ? (size_t)n : room;
                    memcpy(output + used, chunk, keep);
                    used += keep;
                }
            }
        } else {
            usleep(2000);
        }
        if (!exited) {
            pid_t done = waitpid(child, status, WNOHANG);
            if (done < 0 && errno != EINTR) return -1;
            exited = done == child;
        }
        if (!exited && seconds_now() > deadline) {
            kill(child, SIGKILL);
            waitpid(child, status, 0);
            snprintf(output, OUTPUT_BYTES, "no answer within timeout_s=%d", settings.timeout_s);
            return -1;
        }
        if (exited && seconds_now() > deadline) break; /* a grandchild holds the pipe: the status is enough */
    }
    output[used] = '\0';
    return 0;
}

/* Run `cosched slurm ARGS...`; 0 if it succeeded, else -1 with its words in slurmd's log. */
static int run_cosched(const char *what, char *const args[]) {
    char *argv[MAX_TASKS + 16];
    int n = 0;
    argv[n++] = settings.cosched;
    argv[n++] = (char *)"slurm";
    for (int i = 0; args[i] != NULL && n < MAX_TASKS + 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char env[5][ENV_ENTRY_BYTES];
    char *envp[6];
    command_environment(env, envp);

    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        slurm_error("cosched: %s: pipe: %s", what, strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    pid_t child;
    int spawned = posix_spawn(&child, settings.cosched, &actions, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (spawned != 0) {
        close(pipe_fds[0]);
        slurm_error("cosched: %s: cannot run %s: %s", what, settings.cosched, strerror(spawned));
        return -1;
    }
    char output[OUTPUT_BYTES] = "";
    int status = 0;
    int collected = collect(child, pipe_fds[0], output, &status);
    close(pipe_fds[0]);
    for (char *c = output; *c; c++)
        if (*c == '\n' && c[1] != '\0') *c = ' ';
    if (collected != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        slurm_error("cosched: %s failed: %s", what, output);
        return -1;
    }
    slurm_verbose("cosched: %s: %s", what, output);
    return 0;
}

/* A prolog variable that Slurm sets; missing means this is not Slurm's prolog. */
static const char *prolog_value(const char *name) {
    const char *value = getenv(name);
    if (value == NULL || value[0] == '\0' || strlen(value) > 65536) {
        slurm_error("cosched: %s is not set in the prolog's environment", name);
        return NULL;
    }
    return value;
}

/* Slurm's own gang scheduling would suspend and resume jobs by signals while cosched slices them. */
static int slurm_gang_is_on(void) {
    const char *path = getenv("SLURM_CONF");
    FILE *conf = fopen(path && path[0] ? path : "/etc/slurm/slurm.conf", "r");
    if (conf == NULL) return 0;
    char line[1024];
    int on = 0;
    while (!on && fgets(line, sizeof line, conf) != NULL) {
        char *start = line;
        while (isspace((unsigned char)*start)) start++;
        if (strncasecmp(start, "PreemptMode", 11) != 0) continue;
        for (char *c = start; *c && *c != '#'; c++) *c = (char)toupper((unsigned char)*c);
        on = strstr(start, "GANG") != NULL;
    }
    fclose(conf);
    return on;
}

#define GANG_IS_ON                                                                                              \
    "Slurm's own gang scheduling is on (PreemptMode=GANG in slurm.conf): the job is left to it, not gang "      \
    "scheduled by cosched; set PreemptMode=OFF"

static int failed(void) { return settings.strict ? -1 : 0; }

int slurm_spank_job_prolog(spank_t sp, int ac, char **av) {
    (void)sp;
    if (settings_read(ac, av) != 0) return -1;
    if (slurm_gang_is_on()) {
        slurm_error("cosched: " GANG_IS_ON);
        return failed();
    }
    const char *job = prolog_value("SLURM_JOB_ID"), *uid = prolog_value("SLURM_JOB_UID");
    const char *gid = prolog_value("SLURM_JOB_GID"), *node = prolog_value("SLURMD_NODENAME");
    const char *cpus = prolog_value("SLURM_JOB_CPUS_PER_NODE");
    const char *nodes = getenv("SLURM_JOB_NODELIST") ? getenv("SLURM_JOB_NODELIST") : prolog_value("SLURM_NODELIST");
    if (!job || !uid || !gid || !node || !cpus || !nodes) return failed();
    char *const args[] = {"begin",  "--slurm-job", (char *)job,   "--uid",           (char *)uid,
                          "--gid",  (char *)gid,   "--nodelist",  (char *)nodes,     "--cpus-per-node",
                          (char *)cpus, "--node",  (char *)node,  NULL};
    char what[64];
    snprintf(what, sizeof what, "Slurm job %s begin on %s", job, node);
    return run_cosched(what, args) == 0 ? 0 : failed();
}

/* The last local task of the step has forked: move them all into the job, then slurmstepd lets them run. */
static int attach_tasks(uint32_t job) {
    const char *node = getenv("SLURMD_NODENAME"); /* slurmstepd's own environment, set by slurmd */
    if (node == NULL || node[0] == '\0') {
        slurm_error("cosched: SLURMD_NODENAME is not set in slurmstepd; job %u is not gang scheduled", job);
        return failed();
    }
    static char pid_text[MAX_TASKS][16];
    char job_text[16];
    char *args[MAX_TASKS + 8];
    int n = 0;
    snprintf(job_text, sizeof job_text, "%u", job);
    args[n++] = "attach";
    args[n++] = "--slurm-job";
    args[n++] = job_text;
    args[n++] = "--node";
    args[n++] = (char *)node;
    for (uint32_t i = 0; i < task_count; i++) {
        snprintf(pid_text[i], sizeof pid_text[i], "%d", (int)task_pids[i]);
        args[n++] = pid_text[i];
    }
    args[n] = NULL;
    char what[64];
    snprintf(what, sizeof what, "Slurm job %u attach on %s", job, node);
    return run_cosched(what, args) == 0 ? 0 : failed();
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av) {
    if (settings_read(ac, av) != 0) return failed();
    if (slurm_gang_is_on()) {
        /* Said here too: slurmstepd's errors reach the job's output, the prolog's only slurmd's log. */
        if (task_count++ == 0) slurm_error("cosched: " GANG_IS_ON);
        return failed();
    }
    pid_t pid = 0;
    uint32_t job = 0, local_tasks = 0;
    if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_tasks) != ESPANK_SUCCESS) {
        slurm_error("cosched: slurmstepd gave no task pid, job id or task count");
        return failed();
    }
    if (local_tasks > MAX_TASKS) {
        slurm_error("cosched: job %u has %u tasks on this node, more than %d", job, local_tasks, MAX_TASKS);
        return failed();
    }
    task_pids[task_count++] = pid;
    return task_count == local_tasks ? attach_tasks(job) : 0;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
    (void)sp;
    if (settings_read(ac, av) != 0) return 0;
    const char *job = prolog_value("SLURM_JOB_ID"), *node = prolog_value("SLURMD_NODENAME");
    if (!job || !node) return 0;
    const char *exit = getenv("SLURM_JOB_EXIT_CODE2");
    char *const with_exit[] = {"end", "--slurm-job", (char *)job, "--node", (char *)node, "--exit", (char *)exit, NULL};
    char *const without[] = {"end", "--slurm-job", (char *)job, "--node", (char *)node, NULL};
    char what[64];
    snprintf(what, sizeof what, "Slurm job %s end on %s", job, node);
    /* A failed epilog would drain the node: the job is over for Slurm whatever cosched answers. A process of the
     * job that survived SIGKILL is in the answer, which run_cosched puts in slurmd's log; cosched keeps retrying. */
    run_cosched(what, exit && exit[0] ? with_exit : without);
    return 0;
}
