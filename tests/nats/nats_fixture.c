/* nats-server fixture (see nats_fixture.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "nats_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#define START_DEADLINE_MS 10000

int64_t nats_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void poll_pause(void) { /* between checks of a condition, never as synchronisation */
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void die(const char *what) {
    fprintf(stderr, "nats fixture: %s\n", what);
    exit(1);
}

static void skip_or_fail(const char *why) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "nats fixture: %s; CI=true, so this is a failure (CI installs it: "
                        ".ci/packages/nats.txt)\n", why);
        exit(1);
    }
    fprintf(stderr, "SKIP: %s (apt-get install nats-server; Debian puts it in /usr/sbin)\n", why);
    exit(77);
}

static int find_exe(char *out, size_t cap) {
    const char *env = getenv("KVREG_NATS_SERVER");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s:/usr/sbin:/usr/local/sbin", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, cap, "%s/nats-server", d);
        if (access(out, X_OK) == 0) return 1;
    }
    return 0;
}

/* The port from <dir>/nats-server_<pid>.ports: {"nats":["nats://127.0.0.1:PORT"]}. */
static int read_port(const nats_server *s) {
    char path[400];
    snprintf(path, sizeof path, "%s/nats-server_%d.ports", s->dir, (int)s->pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char text[512] = {0};
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strstr(text, "127.0.0.1:");
    if (!p) return 0; /* written but not complete yet */
    return atoi(p + strlen("127.0.0.1:"));
}

static void spawn(nats_server *s, int port) {
    char store[300], log[300], portarg[16];
    snprintf(store, sizeof store, "%s/store", s->dir);
    snprintf(log, sizeof log, "%s/log", s->dir);
    snprintf(portarg, sizeof portarg, "%d", port);
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
        /* A test that crashes (or aborts under a sanitizer) must not leave its server behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) _exit(127);
        if (s->max_payload) {
            char conf[300];
            snprintf(conf, sizeof conf, "%s/server.conf", s->dir);
            execl(s->exe, s->exe, "-c", conf, "-js", "-sd", store, "-a", "127.0.0.1", "-p", portarg,
                  "--ports_file_dir", s->dir, "-l", log, (char *)NULL);
        }
        execl(s->exe, s->exe, "-js", "-sd", store, "-a", "127.0.0.1", "-p", portarg,
              "--ports_file_dir", s->dir, "-l", log, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
}

/* Ready: the ports file names the port, a client connects, and JetStream answers. */
static void wait_ready(nats_server *s) {
    const int64_t deadline = nats_now_ms() + START_DEADLINE_MS;
    while ((s->port = read_port(s)) == 0) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            die("nats-server exited at start (see its log in the test's temporary directory)");
        }
        if (nats_now_ms() > deadline) die("nats-server wrote no ports file in time");
        poll_pause();
    }
    snprintf(s->url, sizeof s->url, "nats://127.0.0.1:%d", s->port);
    for (;;) {
        natsConnection *nc = NULL;
        jsCtx *js = NULL;
        jsAccountInfo *ai = NULL;
        int ok = natsConnection_ConnectTo(&nc, s->url) == NATS_OK &&
                 natsConnection_JetStream(&js, nc, NULL) == NATS_OK &&
                 js_GetAccountInfo(&ai, js, NULL, NULL) == NATS_OK;
        jsAccountInfo_Destroy(ai);
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
        if (ok) return;
        if (nats_now_ms() > deadline) die("nats-server did not answer JetStream requests in time");
        poll_pause();
    }
}

void nats_server_start(nats_server *s) { nats_server_start_max_payload(s, 0); }

void nats_server_start_max_payload(nats_server *s, int max_payload) {
    memset(s, 0, sizeof *s);
    if (!find_exe(s->exe, sizeof s->exe)) skip_or_fail("nats-server not found");
    snprintf(s->dir, sizeof s->dir, "%s/kvreg-nats-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(s->dir)) die("mkdtemp failed");
    s->max_payload = max_payload;
    if (max_payload) {
        char conf[300];
        snprintf(conf, sizeof conf, "%s/server.conf", s->dir);
        FILE *f = fopen(conf, "w");
        if (!f) die("cannot write the server's config file");
        fprintf(f, "max_payload: %d\n", max_payload);
        fclose(f);
    }
    spawn(s, -1);
    wait_ready(s);
}

void nats_server_kill(nats_server *s, int sig) {
    if (!s->pid) return;
    kill(s->pid, sig);
    const int64_t deadline = nats_now_ms() + 10000;
    for (;;) {
        int st;
        pid_t r = waitpid(s->pid, &st, WNOHANG);
        if (r == s->pid || (r < 0 && errno == ECHILD)) break;
        if (nats_now_ms() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        poll_pause();
    }
    /* Its ports file names the old pid: remove it so a restart reads the new one. */
    char path[400];
    snprintf(path, sizeof path, "%s/nats-server_%d.ports", s->dir, (int)s->pid);
    unlink(path);
    s->pid = 0;
}

void nats_server_restart(nats_server *s) {
    spawn(s, s->port);
    const int port = s->port;
    wait_ready(s);
    if (s->port != port) die("restarted nats-server took another port");
}

static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                remove_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

void nats_server_destroy(nats_server *s) {
    nats_server_kill(s, SIGTERM);
    if (s->dir[0]) remove_tree(s->dir);
    s->dir[0] = '\0';
}
