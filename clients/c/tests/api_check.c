/*
 * Checks of libcosched against a running controller (started by crates/cosched/tests/runtime/c_client.rs).
 *
 *   api_check SOCKET own PID            register a job, add PID and a child of its own, read the usage, change
 *                                       class and memory, read the node's load, remove the child (the caller is
 *                                       an administrator: only they take a process out of a job); bad calls must
 *                                       fail with the controller's message. Prints "job ID" for the caller's own
 *                                       checks through `cosched status` (PID stays in the job).
 *   api_check SOCKET foreign JOB PID    as a user who does not own JOB: every call on it must be refused.
 *
 * Exit status 0 when every check holds.
 */
#define _POSIX_C_SOURCE 200809L
#include <cosched.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(int condition, const char *what, cosched_client *client) {
    if (!condition) {
        fprintf(stderr, "check failed: %s (last error: %s)\n", what, client ? cosched_last_error(client) : "-");
        failures++;
    }
}

/* The call failed and the controller's message contains `expected`. */
static void check_refused(int result, cosched_client *client, const char *expected, const char *what) {
    int refused = result == -1 && strstr(cosched_last_error(client), expected) != NULL;
    if (!refused) {
        fprintf(stderr, "check failed: %s: expected an error containing \"%s\", got result %d, error \"%s\"\n", what,
                expected, result, cosched_last_error(client));
        failures++;
    }
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The agent reports its jobs' processes every 100 ms: wait until the job shows `count` of them. */
static int wait_for_pids(cosched_client *client, uint64_t job, uint32_t count) {
    cosched_job_usage usage;
    for (int i = 0; i < 100; i++) {
        if (cosched_usage(client, job, &usage) == 0 && usage.pids == count) return 1;
        sleep_ms(50);
    }
    return 0;
}

/* Is the process in the job's cgroup (in any hierarchy)? */
static int in_job(pid_t pid, uint64_t job) {
    char path[64], line[512], needle[40];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    snprintf(needle, sizeof needle, "/job-%llu", (unsigned long long)job);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL) found = strstr(line, needle) != NULL;
    if (f != NULL) fclose(f);
    return found;
}

static void check_own(cosched_client *client, pid_t pid) {
    cosched_job_spec spec = {.job_class = "batch", .cpus_per_node = 1, .mem_bytes = 1 << 20};
    uint64_t job = 0;
    check(cosched_register(client, &spec, &job) == 0 && job > 0, "register", client);
    check(strcmp(cosched_last_error(client), "") == 0, "no error after a success", client);
    pid_t child = fork();
    if (child == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    check(cosched_add_pid(client, job, pid, NULL) == 0, "add_pid", client);
    check(cosched_add_pid(client, job, child, NULL) == 0, "add_pid of a second process", client);
    check(in_job(pid, job) && in_job(child, job), "add_pid returns once the process is in the job", client);
    check(wait_for_pids(client, job, 2), "the job's usage shows the added processes", client);

    cosched_job_usage usage;
    check(cosched_usage(client, job, &usage) == 0 && strcmp(usage.state, "running") == 0, "usage: running", client);
    check(usage.slice_share > 0.0 && usage.slice_share <= 1.0, "usage: a slice share in (0, 1]", client);
    check(cosched_set_class(client, job, "standby") == 0, "set_class standby", client);
    uint64_t mem = 2 << 20;
    check(cosched_set_resources(client, job, NULL, &mem) == 0, "set_resources memory", client);

    cosched_node_info load;
    check(cosched_node_load(client, NULL, &load) == 0 && load.cpus > 0 && load.jobs >= 1, "node_load", client);
    check(cosched_node_load(client, load.node, &load) == 0, "node_load by name", client);

    check_refused(cosched_node_load(client, "no-such-node", &load), client, "unknown node", "node_load of a stranger");
    check_refused(cosched_set_class(client, job, "bogus"), client, "bogus", "set_class to an unknown class");
    check_refused(cosched_usage(client, 987654321, &usage), client, "no job 987654321", "usage of no job");
    check_refused(cosched_add_pid(client, job, -5, NULL), client, "invalid pid", "add_pid of a negative pid");
    uint32_t cpus = 2;
    check_refused(cosched_set_resources(client, job, &cpus, NULL), client, "has started", "cpus of a running job");
    cosched_job_spec too_big = {.cpus_per_node = 100000};
    check_refused(cosched_register(client, &too_big, &job), client, "CPUs", "register more CPUs than the node has");

    check(cosched_remove_pid(client, job, child, NULL) == 0, "remove_pid", client);
    check(!in_job(child, job) && in_job(pid, job), "remove_pid returns once the process has left", client);
    check(wait_for_pids(client, job, 1), "the job's usage no longer shows the removed process", client);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    printf("job %llu\n", (unsigned long long)job);
}

static void check_foreign(cosched_client *client, uint64_t job, pid_t pid) {
    cosched_job_usage usage;
    check_refused(cosched_usage(client, job, &usage), client, "permission denied", "usage of another user's job");
    check_refused(cosched_add_pid(client, job, pid, NULL), client, "permission denied", "add_pid to another's job");
    check_refused(cosched_remove_pid(client, job, pid, NULL), client, "only administrators", "remove_pid by a user");
    check_refused(cosched_set_class(client, job, "standby"), client, "permission denied", "another's class");
    cosched_job_spec express = {.job_class = "express", .cpus_per_node = 1};
    uint64_t id;
    check_refused(cosched_register(client, &express, &id), client, "only administrators", "express by a user");
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s SOCKET own PID | SOCKET foreign JOB PID\n", argv[0]);
        return 2;
    }
    char error[256];
    check(cosched_connect("/nonexistent/cosched.sock", error, sizeof error) == NULL &&
              strstr(error, "cannot connect to the cosched controller at /nonexistent/cosched.sock") != NULL,
          "connecting to a missing socket fails with its path", NULL);
    cosched_client *client = cosched_connect(argv[1], error, sizeof error);
    if (client == NULL) {
        fprintf(stderr, "%s\n", error);
        return 1;
    }
    if (strcmp(argv[2], "own") == 0) check_own(client, (pid_t)atoi(argv[3]));
    else if (strcmp(argv[2], "foreign") == 0 && argc == 5)
        check_foreign(client, strtoull(argv[3], NULL, 10), (pid_t)atoi(argv[4]));
    else return 2;
    cosched_close(client);
    if (failures == 0) fprintf(stderr, "api_check %s: all checks hold\n", argv[2]);
    return failures == 0 ? 0 : 1;
}
