/*
 * The cosched registration API over the controller's Unix socket.
 *
 * Requests and replies are single JSON lines (see crates/cosched-runtime/src/protocol.rs).
 * The library writes its few request shapes by hand and reads replies with a small
 * scanner that only understands what it needs, so it has no dependency beyond libc:
 * a launcher can link it statically.
 */
#define _GNU_SOURCE
#include "cosched.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "json_scan.h"

/* The controller refuses longer lines; so do we. */
#define MAX_LINE_BYTES (1u << 20)
#define ERROR_BYTES 512

struct cosched_client {
    int fd;
    char error[ERROR_BYTES];
    /* Bytes read past the end of the last reply (the controller sends one reply per request, so normally none). */
    char *pending;
    size_t pending_len;
};

static int fail(cosched_client *c, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, args);
    va_end(args);
    return -1;
}

static void copy_error(char *error, size_t error_len, const char *message) {
    if (error != NULL && error_len > 0) snprintf(error, error_len, "%s", message);
}

cosched_client *cosched_connect(const char *socket_path, char *error, size_t error_len) {
    char message[ERROR_BYTES];
    /* secure_getenv: a set-uid or set-gid program linking the library never takes its socket from its caller's
       environment (glibc returns NULL then), so a user cannot point it at a server of theirs. */
    if (socket_path == NULL) socket_path = secure_getenv("COSCHED_SOCKET");
    if (socket_path == NULL || socket_path[0] == '\0') socket_path = COSCHED_DEFAULT_SOCKET;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof address.sun_path) {
        snprintf(message, sizeof message, "socket path %s is longer than %zu bytes", socket_path,
                 sizeof address.sun_path - 1);
        copy_error(error, error_len, message);
        return NULL;
    }
    strcpy(address.sun_path, socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        snprintf(message, sizeof message, "cannot connect to the cosched controller at %s: %s", socket_path,
                 strerror(errno));
        copy_error(error, error_len, message);
        if (fd >= 0) close(fd);
        return NULL;
    }
    cosched_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        copy_error(error, error_len, "out of memory");
        close(fd);
        return NULL;
    }
    c->fd = fd;
    return c;
}

void cosched_close(cosched_client *c) {
    if (c == NULL) return;
    close(c->fd);
    free(c->pending);
    free(c);
}

const char *cosched_last_error(const cosched_client *c) { return c == NULL ? "no client" : c->error; }

/* ---- writing requests ---- */

typedef struct {
    char *bytes;
    size_t len, cap;
    int failed;
} text;

static void append(text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1) cap *= 2;
        char *bytes = realloc(t->bytes, cap);
        if (bytes == NULL) {
            t->failed = 1;
            return;
        }
        t->bytes = bytes;
        t->cap = cap;
    }
    memcpy(t->bytes + t->len, s, n);
    t->len += n;
    t->bytes[t->len] = '\0';
}

static void append_cstr(text *t, const char *s) { append(t, s, strlen(s)); }

static void appendf(text *t, const char *fmt, ...) {
    char buffer[128];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(buffer, sizeof buffer, fmt, args);
    va_end(args);
    if (n < 0 || (size_t)n >= sizeof buffer) {
        t->failed = 1;
        return;
    }
    append(t, buffer, (size_t)n);
}

/* A JSON string, or null for a NULL pointer. */
static void append_string(text *t, const char *s) {
    if (s == NULL) {
        append(t, "null", 4);
        return;
    }
    append(t, "\"", 1);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            char escaped[2] = {'\\', (char)ch};
            append(t, escaped, 2);
        } else if (ch < 0x20) {
            appendf(t, "\\u%04x", ch);
        } else {
            append(t, s, 1);
        }
    }
    append(t, "\"", 1);
}

/* ---- one round trip ---- */

static int send_all(cosched_client *c, const char *bytes, size_t len) {
    while (len > 0) {
        ssize_t n = send(c->fd, bytes, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail(c, "cannot send to the controller: %s", n < 0 ? strerror(errno) : "closed");
        bytes += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read one line into *line (malloc'd, without the newline). */
static int read_line(cosched_client *c, char **line) {
    text t = {0};
    if (c->pending_len > 0) append(&t, c->pending, c->pending_len);
    c->pending_len = 0;
    char buffer[4096];
    char *newline;
    while ((newline = t.bytes ? memchr(t.bytes, '\n', t.len) : NULL) == NULL) {
        if (t.failed || t.len > MAX_LINE_BYTES) {
            free(t.bytes);
            return fail(c, t.failed ? "out of memory" : "reply longer than %u bytes", MAX_LINE_BYTES);
        }
        ssize_t n = recv(c->fd, buffer, sizeof buffer, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            free(t.bytes);
            return fail(c, "the controller closed the connection%s%s", n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
        }
        append(&t, buffer, (size_t)n);
    }
    size_t rest = t.len - (size_t)(newline + 1 - t.bytes);
    if (rest > 0) {
        free(c->pending);
        c->pending = malloc(rest);
        if (c->pending == NULL) {
            free(t.bytes);
            return fail(c, "out of memory");
        }
        memcpy(c->pending, newline + 1, rest);
        c->pending_len = rest;
    }
    *newline = '\0';
    *line = t.bytes;
    return 0;
}

/* Send the request in t (freed here), read the reply; on success *data points at the reply's "data" value inside
 * *reply (NULL if it has none), and the caller frees *reply. */
static int call(cosched_client *c, text *t, char **reply, const char **data) {
    append(t, "\n", 1);
    if (t->failed) {
        free(t->bytes);
        return fail(c, "out of memory or a field too long");
    }
    int sent = send_all(c, t->bytes, t->len);
    free(t->bytes);
    if (sent != 0 || read_line(c, reply) != 0) return -1;
    const char *ok = json_find(*reply, "ok");
    if (ok == NULL) {
        free(*reply);
        return fail(c, "malformed reply from the controller");
    }
    if (json_is_true(ok)) {
        c->error[0] = '\0';
        *data = json_find(*reply, "data");
        return 0;
    }
    const char *error = json_find(*reply, "error");
    if (error == NULL || json_string(error, c->error, sizeof c->error) == NULL)
        snprintf(c->error, sizeof c->error, "the controller refused the request");
    free(*reply);
    return -1;
}

/* A request with no data of interest in its reply. */
static int call_plain(cosched_client *c, text *t) {
    char *reply;
    const char *data;
    if (call(c, t, &reply, &data) != 0) return -1;
    free(reply);
    return 0;
}

static int need_client(cosched_client *c) { return c == NULL ? -1 : 0; }

/* ---- the API ---- */

int cosched_register(cosched_client *c, const cosched_job_spec *spec, uint64_t *job) {
    if (need_client(c) != 0) return -1;
    if (spec == NULL || job == NULL) return fail(c, "cosched_register: spec and job must not be NULL");
    text t = {0};
    append_cstr(&t, "{\"op\":\"register\",\"class\":");
    append_string(&t, spec->job_class ? spec->job_class : "batch");
    appendf(&t, ",\"cpus_per_node\":%u,\"min_cpus\":%u,\"mem_bytes\":%llu,\"local\":%s,\"node\":", spec->cpus_per_node,
            spec->min_cpus, (unsigned long long)spec->mem_bytes, spec->local ? "true" : "false");
    append_string(&t, spec->node);
    append_cstr(&t, "}");
    char *reply;
    const char *data;
    if (call(c, &t, &reply, &data) != 0) return -1;
    const char *id = data ? json_find(data, "job") : NULL;
    int read = id != NULL && json_u64(id, job) != NULL;
    free(reply);
    return read ? 0 : fail(c, "the controller's reply names no job");
}

static int pid_request(cosched_client *c, const char *op, uint64_t job, pid_t pid, const char *node) {
    if (need_client(c) != 0) return -1;
    text t = {0};
    appendf(&t, "{\"op\":\"%s\",\"job\":%llu,\"pid\":%d,\"node\":", op, (unsigned long long)job, (int)pid);
    append_string(&t, node);
    append_cstr(&t, "}");
    return call_plain(c, &t);
}

int cosched_add_pid(cosched_client *c, uint64_t job, pid_t pid, const char *node) {
    return pid_request(c, "add_pid", job, pid, node);
}

int cosched_remove_pid(cosched_client *c, uint64_t job, pid_t pid, const char *node) {
    return pid_request(c, "remove_pid", job, pid, node);
}

int cosched_set_class(cosched_client *c, uint64_t job, const char *job_class) {
    if (need_client(c) != 0) return -1;
    if (job_class == NULL) return fail(c, "cosched_set_class: no class given");
    text t = {0};
    appendf(&t, "{\"op\":\"set_class\",\"job\":%llu,\"class\":", (unsigned long long)job);
    append_string(&t, job_class);
    append_cstr(&t, "}");
    return call_plain(c, &t);
}

int cosched_set_resources(cosched_client *c, uint64_t job, const uint32_t *cpus_per_node, const uint64_t *mem_bytes) {
    if (need_client(c) != 0) return -1;
    text t = {0};
    appendf(&t, "{\"op\":\"set_resources\",\"job\":%llu", (unsigned long long)job);
    if (cpus_per_node != NULL) appendf(&t, ",\"cpus_per_node\":%u", *cpus_per_node);
    if (mem_bytes != NULL) appendf(&t, ",\"mem_bytes\":%llu", (unsigned long long)*mem_bytes);
    append_cstr(&t, "}");
    return call_plain(c, &t);
}

int cosched_usage(cosched_client *c, uint64_t job, cosched_job_usage *usage) {
    if (need_client(c) != 0) return -1;
    if (usage == NULL) return fail(c, "cosched_usage: usage must not be NULL");
    text t = {0};
    appendf(&t, "{\"op\":\"usage\",\"job\":%llu}", (unsigned long long)job);
    char *reply;
    const char *data;
    if (call(c, &t, &reply, &data) != 0) return -1;
    memset(usage, 0, sizeof *usage);
    const char *state = data ? json_find(data, "state") : NULL;
    const char *cpu = data ? json_find(data, "cpu_ns") : NULL;
    const char *share = data ? json_find(data, "slice_share") : NULL;
    const char *pids = data ? json_find(data, "pids") : NULL;
    int read = state && cpu && share && pids && json_string(state, usage->state, sizeof usage->state) &&
               json_u64(cpu, &usage->cpu_ns) && json_double(share, &usage->slice_share) &&
               json_array_length(pids, &usage->pids);
    free(reply);
    return read ? 0 : fail(c, "malformed usage reply from the controller");
}

int cosched_node_load(cosched_client *c, const char *node, cosched_node_info *load) {
    if (need_client(c) != 0) return -1;
    if (load == NULL) return fail(c, "cosched_node_load: load must not be NULL");
    text t = {0};
    append_cstr(&t, "{\"op\":\"node_load\",\"node\":");
    append_string(&t, node);
    append_cstr(&t, "}");
    char *reply;
    const char *data;
    if (call(c, &t, &reply, &data) != 0) return -1;
    memset(load, 0, sizeof *load);
    const char *nodes = data ? json_find(data, "nodes") : NULL;
    const char *first = nodes ? json_array_first(nodes) : NULL;
    const char *name = first ? json_find(first, "node") : NULL;
    const char *cpus = first ? json_find(first, "cpus") : NULL;
    const char *avg = first ? json_find(first, "load_avg") : NULL;
    const char *jobs = first ? json_find(first, "jobs") : NULL;
    uint64_t cpus_value = 0, jobs_value = 0;
    int read = name && cpus && avg && jobs && json_string(name, load->node, sizeof load->node) &&
               json_u64(cpus, &cpus_value) && json_double(avg, &load->load_avg) && json_u64(jobs, &jobs_value);
    load->cpus = (uint32_t)cpus_value;
    load->jobs = (uint32_t)jobs_value;
    free(reply);
    return read ? 0 : fail(c, "malformed node-load reply from the controller");
}
