/*
 * cosched.h — C client of the cosched registration API.
 *
 * For programs that start their own processes (MPI launchers, workflow
 * engines, services) and want the cosched controller to schedule them: register
 * a job, add its processes by pid, change its class or resources, read its usage
 * and a node's load. The library speaks the controller's protocol (one JSON
 * object per line) over its Unix socket; the controller identifies the caller
 * by the socket's peer credentials, so the same permission rules apply as for
 * the `cosched` command.
 *
 * Every call returns 0 on success and -1 on failure; cosched_last_error() then
 * says why (the controller's own message, or the system error). A client is
 * one connection and is not thread-safe: use one per thread.
 *
 * Build: `make -C clients/c` (libcosched.a, libcosched.so, cosched.pc);
 * link with -lcosched.
 */
#ifndef COSCHED_H
#define COSCHED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where the controller listens unless told otherwise ($COSCHED_SOCKET wins). */
#define COSCHED_DEFAULT_SOCKET "/run/cosched/cosched.sock"

typedef struct cosched_client cosched_client;

/* What a registered job asks for. Zero-initialise, then set what you need. */
typedef struct {
    const char *job_class; /* "express", "interactive", "batch" (NULL) or "standby" */
    uint32_t cpus_per_node; /* CPUs the job's processes use on their node (at least 1) */
    uint32_t min_cpus; /* the fewest CPUs it can live with (0: as cpus_per_node) */
    uint64_t mem_bytes; /* memory on the node, for admission (0: not counted) */
    const char *node; /* the node its processes live on (NULL: the first agent) */
    int local; /* non-zero: leave it to the Linux scheduler, not gang scheduling */
} cosched_job_spec;

/* A job's state and use of the machine, as the controller last saw it. */
typedef struct {
    char state[16]; /* "queued", "running", "suspended", "done", ... */
    uint64_t cpu_ns; /* CPU time of all its processes so far */
    double slice_share; /* share of the time slices it runs in (0 to 1) */
    uint32_t pids; /* how many processes it has */
} cosched_job_usage;

/* One node's load. */
typedef struct {
    char node[65];
    uint32_t cpus;
    double load_avg; /* the kernel's 1-minute load average */
    uint32_t jobs; /* jobs that hold CPUs there */
} cosched_node_info;

/* Connect to the controller at socket_path (NULL: $COSCHED_SOCKET, else
 * COSCHED_DEFAULT_SOCKET; a set-uid or set-gid program ignores $COSCHED_SOCKET,
 * as secure_getenv does). On failure returns NULL and, if error is not NULL,
 * writes the reason into error[0..error_len). */
cosched_client *cosched_connect(const char *socket_path, char *error, size_t error_len);

/* Close the connection and free the client (NULL is allowed). */
void cosched_close(cosched_client *client);

/* Why the last call on this client failed ("" after a success). */
const char *cosched_last_error(const cosched_client *client);

/* Register a job whose processes already exist; its id goes to *job. */
int cosched_register(cosched_client *client, const cosched_job_spec *spec, uint64_t *job);

/* Put a process (and the children it forks later) in the job / take it out.
 * Returns once the node's agent has moved it (so a launcher may then let it
 * run). node: where the process lives (NULL: the job's first node). A process
 * already in a job cannot be added to another, and only administrators may
 * take a process out of a job: a user's process leaves its job by ending (as
 * in Slurm's cgroups), so no task escapes its job's slices. A registered job
 * ends when no process is left in it, and one that no process ever joined ends
 * after the controller's --empty-job-grace-s (60 s). */
int cosched_add_pid(cosched_client *client, uint64_t job, pid_t pid, const char *node);
int cosched_remove_pid(cosched_client *client, uint64_t job, pid_t pid, const char *node);

/* Change the job's class (users may only lower it; only administrators may
 * raise it or set express). */
int cosched_set_class(cosched_client *client, uint64_t job, const char *job_class);

/* Change the job's resources; a NULL pointer leaves that one as it is. The CPU
 * count can change only while the job is queued. */
int cosched_set_resources(cosched_client *client, uint64_t job, const uint32_t *cpus_per_node,
                          const uint64_t *mem_bytes);

/* Read the job's usage. */
int cosched_usage(cosched_client *client, uint64_t job, cosched_job_usage *usage);

/* Read a node's load (node NULL: the first node the controller knows). */
int cosched_node_load(cosched_client *client, const char *node, cosched_node_info *load);

#ifdef __cplusplus
}
#endif

#endif /* COSCHED_H */
