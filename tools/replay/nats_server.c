#include "nats_server.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A cold start writes its ports file within a few hundred ms; 10 s only bounds a broken one. */
#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 5000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Between two looks at a condition (a file, a child's state): never as synchronisation. */
static void pause_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int find_exe(char *out, size_t cap)
{
    const char *env = getenv("KVREG_NATS_SERVER");
    const char *path = getenv("PATH");
    char buf[4096];
    char *save = NULL, *d;
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return access(out, X_OK) == 0;
    }
    snprintf(buf, sizeof buf, "%s:/usr/sbin:/usr/local/sbin", path ? path : "/usr/bin:/bin");
    for (d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (!*d)
            continue;
        snprintf(out, cap, "%s/nats-server", d);
        if (access(out, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* The port from <dir>/nats-server_<pid>.ports ({"nats":["nats://127.0.0.1:PORT"],...}); 0
 * while the file is missing or incomplete. */
static int read_port(const replay_nats_server *s)
{
    char path[400], text[512];
    size_t n;
    const char *p;
    FILE *f;
    snprintf(path, sizeof path, "%s/nats-server_%d.ports", s->dir, (int)s->pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    p = strstr(text, "127.0.0.1:");
    return p && strchr(p, '"') ? atoi(p + strlen("127.0.0.1:")) : 0;
}

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char sub[1024];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            remove_tree(sub);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* The last KiB of the server's log on stderr: the directory goes away with it. */
static void print_log_tail(const char *log)
{
    char text[1025];
    size_t n;
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    if (fseek(f, -1024, SEEK_END) != 0)
        rewind(f);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    fprintf(stderr, "%s\n", text);
}

int nats_server_launch(replay_nats_server *s)
{
    char exe[512], store[300], log[300];
    const char *tmp = getenv("TMPDIR");
    int64_t deadline;
    int port;
    pid_t pid;

    memset(s, 0, sizeof *s);
    if (!find_exe(exe, sizeof exe)) {
        fprintf(stderr, "kvreg-replay: --transport nats: nats-server not found (looked in "
                        "$KVREG_NATS_SERVER, PATH, /usr/sbin and /usr/local/sbin); install it "
                        "(Debian: apt-get install nats-server) or give --nats-url URL\n");
        return -1;
    }
    snprintf(s->dir, sizeof s->dir, "%s/kvreg-replay-nats-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        fprintf(stderr, "kvreg-replay: cannot make a directory for nats-server (%s): %s\n",
                s->dir, strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    snprintf(store, sizeof store, "%s/store", s->dir);
    snprintf(log, sizeof log, "%s/log", s->dir);
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "kvreg-replay: fork: %s\n", strerror(errno));
        nats_server_stop(s);
        return -1;
    }
    if (pid == 0) {
        /* The server must not outlive a kvreg-replay that crashes before stopping it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(127);
        execl(exe, exe, "-js", "-sd", store, "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir",
              s->dir, "-l", log, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    deadline = now_ms() + START_TIMEOUT_MS;
    while ((port = read_port(s)) == 0) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            fprintf(stderr, "kvreg-replay: %s exited at start (status %d); the end of its log:\n",
                    exe, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            print_log_tail(log);
            nats_server_stop(s);
            return -1;
        }
        if (now_ms() > deadline) {
            fprintf(stderr, "kvreg-replay: %s wrote no ports file within %d ms\n", exe,
                    START_TIMEOUT_MS);
            nats_server_stop(s);
            return -1;
        }
        pause_ms(10);
    }
    snprintf(s->url, sizeof s->url, "nats://127.0.0.1:%d", port);
    return 0;
}

void nats_server_stop(replay_nats_server *s)
{
    if (s->pid > 0) {
        const int64_t deadline = now_ms() + STOP_TIMEOUT_MS;
        int st, killed = 0;
        kill(s->pid, SIGTERM);
        for (;;) {
            pid_t r = waitpid(s->pid, &st, WNOHANG);
            if (r == s->pid || (r < 0 && errno == ECHILD))
                break;
            if (!killed && now_ms() > deadline) {
                kill(s->pid, SIGKILL);
                killed = 1;
            }
            pause_ms(5);
        }
        s->pid = 0;
    }
    if (s->dir[0])
        remove_tree(s->dir);
    s->dir[0] = '\0';
}
