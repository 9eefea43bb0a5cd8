/*
 * launch_and_register: what an MPI launcher would do to put its processes under cosched.
 *
 *   launch_and_register [-n COPIES] [-c CLASS] [-s SOCKET] -- COMMAND [ARG...]
 *
 * Starts COPIES copies of COMMAND, registers them as one job before any of them runs a single instruction of
 * COMMAND (each child waits on a pipe until it is in the job), prints the job id and its usage, then waits for the
 * copies and exits with the first non-zero status among them.
 */
#define _GNU_SOURCE
#include <cosched.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_COPIES 1024

static void usage_exit(const char *program) {
    fprintf(stderr, "usage: %s [-n COPIES] [-c CLASS] [-s SOCKET] -- COMMAND [ARG...]\n", program);
    exit(2);
}

/* Fork a child that waits for a byte on a pipe, then runs argv. Returns its pid; *gate is the pipe's write end. */
static pid_t start_held(char **argv, int *gate) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char go;
        close(fds[1]);
        if (read(fds[0], &go, 1) != 1) _exit(127); /* the launcher gave up */
        close(fds[0]);
        execvp(argv[0], argv);
        perror(argv[0]);
        _exit(127);
    }
    close(fds[0]);
    *gate = fds[1];
    return pid;
}

int main(int argc, char **argv) {
    long copies = 1;
    const char *job_class = "batch", *socket_path = NULL;
    int opt;
    while ((opt = getopt(argc, argv, "+n:c:s:")) != -1) {
        if (opt == 'n') copies = strtol(optarg, NULL, 10);
        else if (opt == 'c') job_class = optarg;
        else if (opt == 's') socket_path = optarg;
        else usage_exit(argv[0]);
    }
    if (optind >= argc || copies < 1 || copies > MAX_COPIES) usage_exit(argv[0]);

    char error[512];
    cosched_client *client = cosched_connect(socket_path, error, sizeof error);
    if (client == NULL) {
        fprintf(stderr, "%s\n", error);
        return 1;
    }
    pid_t pids[MAX_COPIES];
    int gates[MAX_COPIES];
    for (long i = 0; i < copies; i++) {
        pids[i] = start_held(argv + optind, &gates[i]);
        if (pids[i] < 0) {
            perror("fork");
            return 1;
        }
    }
    cosched_job_spec spec = {.job_class = job_class, .cpus_per_node = (uint32_t)copies};
    uint64_t job;
    int failed = cosched_register(client, &spec, &job);
    for (long i = 0; i < copies && !failed; i++) failed = cosched_add_pid(client, job, pids[i], NULL);
    if (failed) {
        fprintf(stderr, "cosched: %s\n", cosched_last_error(client));
        for (long i = 0; i < copies; i++) close(gates[i]); /* the children exit without running COMMAND */
        while (wait(NULL) > 0) {}
        return 1;
    }
    for (long i = 0; i < copies; i++) {
        if (write(gates[i], "g", 1) != 1) perror("write");
        close(gates[i]);
    }
    printf("job %llu\n", (unsigned long long)job);
    cosched_job_usage usage;
    if (cosched_usage(client, job, &usage) == 0)
        printf("state %s, %u processes, slice share %.2f\n", usage.state, usage.pids, usage.slice_share);
    fflush(stdout);
    cosched_close(client);

    int result = 0, status;
    while (wait(&status) > 0) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (result == 0) result = code;
    }
    return result;
}
