// The smallest autofs (protocol 5) daemon, for tests/automount.rs: it mounts autofs at argv[1] as a direct map and,
// when the kernel asks for that mount, mounts a tmpfs there holding the file argv[2] with the text argv[3].
// Its first line out is "ready", or why autofs could not be mounted; then it serves requests until its standard input
// closes (the test's end, however it ends), and unmounts both: every exit after the autofs mount does.
#include <errno.h>
#include <fcntl.h>
#include <linux/auto_fs.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

static int fail(const char *what) {
    fprintf(stderr, "autofs_daemon: %s: %s\n", what, strerror(errno));
    return 1;
}

// The tmpfs, mounted over the autofs mount, with the file in it.
static int mount_the_tmpfs(const char *at, const char *name, const char *text) {
    char path[4096];
    if (mount("cosched-test", at, "tmpfs", 0, "size=64k,mode=0755") != 0) return fail("mounting the tmpfs");
    snprintf(path, sizeof path, "%s/%s", at, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fail("creating the file");
    int written = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return written ? 0 : fail("writing the file");
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: autofs_daemon MOUNT-POINT FILE-NAME TEXT\n");
        return 2;
    }
    int requests[2];
    char options[128];
    // The kernel never asks the daemon's own process group (it serves it the bare mount point): the test's
    // process must not be in it.
    if (setpgid(0, 0) != 0) return fail("setpgid");
    if (pipe(requests) != 0) return fail("pipe");
    snprintf(options, sizeof options, "fd=%d,pgrp=%d,minproto=5,maxproto=5,direct", requests[1], (int)getpgrp());
    if (mount("cosched-test", argv[1], "autofs", 0, options) != 0) {
        printf("cannot mount autofs: %s\n", strerror(errno));
        return 1;
    }
    close(requests[1]); // the kernel holds its own
    // Answers are ioctls on the autofs mount's root (opened without a request: this is the daemon's process group).
    int control = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (control < 0) {
        umount2(argv[1], MNT_DETACH);
        return fail("opening the autofs mount");
    }
    printf("ready\n");
    fflush(stdout);
    union autofs_v5_packet_union packet;
    struct pollfd watched[2] = {{.fd = requests[0], .events = POLLIN}, {.fd = 0, .events = POLLIN}};
    while (poll(watched, 2, -1) > 0 && watched[1].revents == 0) {
        // One request a read (the kernel makes the pipe a packet pipe).
        if (read(requests[0], &packet, sizeof packet) <= 0) break;
        int mounted = packet.hdr.type == autofs_ptype_missing_direct && mount_the_tmpfs(argv[1], argv[2], argv[3]) == 0;
        if (ioctl(control, mounted ? AUTOFS_IOC_READY : AUTOFS_IOC_FAIL, packet.v5_packet.wait_queue_token) != 0)
            fail("answering the kernel");
    }
    // Catatonic: a request still waiting (a test that gave up on it) fails now, and any later one at once, so that
    // nothing waits on a mount point after this daemon. Its own unmounts never wait: it is the daemon.
    int released = ioctl(control, AUTOFS_IOC_CATATONIC, 0) == 0;
    close(control);
    if (umount2(argv[1], MNT_DETACH) == 0) umount2(argv[1], MNT_DETACH); // the tmpfs, then autofs (or autofs alone)
    return released ? 0 : fail("going catatonic");
}
