/*
 * cordon-executor: the resident executor of a Docker sandbox (docs/architecture.md, "Resident
 * executor"). cordon starts it with one attached exec and then speaks frames over its stdin and
 * stdout instead of opening a new exec (50-70 ms of runc) for every command and file operation.
 *
 * It adds no privilege and decides nothing: it runs as the exec's user, starts exactly the argv
 * cordon sends (file scripts, background processes) and relays bytes. A command (`run`) it starts
 * the way the exec wrapper's `run` mode would (src/sandbox/shell/exec-wrapper.sh), doing the
 * wrapper's own work itself: the working-directory checks, the command's shell in a session of its
 * own with the run's marker, the sweep of its process tree through /proc when it exits (and on
 * `kill`), and the OOM mark. The shell is `bash -c` in the sandbox user's login environment, read
 * once by a login shell and read again when a profile file changes (see "The login environment"
 * below), rather than a `bash -lc` per command (Debian's /etc/profile alone forks `id -u`). The wrapper in bash costs three processes and a /proc walk in bash per command
 * (13.6 ms against 2.8 ms for `bash -c true`, issue 17); here it is one fork and a few syscalls.
 * The two must behave alike: the contract suite runs against both. Read, write and stat have a
 * fast path here for the common case only; anything unusual answers "unhandled" and cordon runs
 * the file script, so errors read exactly as they do without the executor.
 *
 * The channel belongs to cordon: children get their own pipes (every other descriptor is
 * close-on-exec), and the process makes itself non-dumpable, so a process of the same uid can
 * neither open /proc/<pid>/fd/0 or /1 (to read requests or forge answers) nor ptrace it. It can
 * kill it; cordon then falls back to plain exec and starts a new one.
 *
 * Forwarded ports (docs/network.md, "No route out"): a sandbox has only loopback. cordon asks the
 * executor to listen on 127.0.0.1:PORT in the sandbox's namespace (L), and each connection a
 * process there makes is carried over this same stream as a channel (N, B, Z, Y, A) to whatever
 * cordon connects it to on its side. The sandbox chooses nothing about where a channel goes: it
 * only connects to a loopback port, the executor announces the connection by the listener id
 * cordon gave, and cordon alone maps that id to a destination it fixed (the sandbox's proxy, the
 * model gateway); the bytes are relayed opaquely and never interpreted here.
 *
 * The other way (`cordon port-forward`): cordon asks the executor to connect to 127.0.0.1:PORT in
 * the sandbox (N), and the connection is a channel like an accepted one, announced with the id of
 * cordon's request. It reaches only the sandbox's own loopback: the sandbox gets no route out.
 *
 * Frame: type (1 byte), id (u32 BE), length (u32 BE), payload. See resident-protocol.ts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL "cordon-executor 6"
#define HEADER 9
#define MAX_FRAME (256u * 1024 * 1024)
#define CHUNK 65536
/* Output bytes in flight per child before cordon acknowledges them: backpressure per command. */
#define WINDOW (1024 * 1024)
#define MAX_CHILDREN 256
#define MAX_LISTENERS 16
#define MAX_CHANNELS 256
/* Channel bytes in flight each way before the other side acknowledges them. */
#define CHANNEL_WINDOW (256 * 1024)
/* Channel ids the executor makes have this bit; cordon's call ids never do. */
#define CHANNEL_BIT 0x80000000u

/* cordon -> executor */
#define REQ_SPAWN 'S'
#define REQ_STDIN 'I'
#define REQ_ACK 'A'
#define REQ_DETACH 'D'
#define REQ_READ 'R'
#define REQ_WRITE 'W'
#define REQ_STAT 'T'
#define REQ_PING 'P'
#define REQ_RUN 'C'
#define REQ_KILL 'K'
#define REQ_LISTEN 'L'
#define REQ_UNLISTEN 'Q'
#define REQ_CHANNEL_DATA 'B'
#define REQ_CHANNEL_END 'Z'
#define REQ_CHANNEL_RESET 'Y'
#define REQ_CONNECT 'N'
#define REQ_QUIET 'G'
/* executor -> cordon */
#define RES_HELLO 'H'
#define RES_STDOUT 'O'
#define RES_STDERR 'E'
#define RES_EXIT 'X'
#define RES_FAILED 'F'
#define RES_UNHANDLED 'U'
#define RES_PONG 'P'
#define RES_CHANNEL_OPEN 'N'
#define RES_CHANNEL_DATA 'B'
#define RES_CHANNEL_END 'Z'
#define RES_CHANNEL_RESET 'Y'
#define RES_CHANNEL_ACK 'A'

struct child {
  uint32_t id;
  uint32_t serial; /* this occupant of the slot (see new_serial) */
  pid_t pid;       /* 0 once reaped */
  int status;      /* shell-style: code, or 128 + signal */
  int out, err;    /* read ends; -1 at end of file */
  int in;          /* write end of its stdin; -1 when closed or never attached */
  char *in_buf;    /* stdin bytes not yet written */
  size_t in_len, in_off;
  int in_eof;      /* cordon sent end-of-file: close once in_buf is written */
  size_t unacked;  /* output bytes sent and not yet acknowledged */
  int detached;
  int used;
  /* A command started by REQ_RUN: its run id (the CORDON_RUN marker), the OOM kill count before
   * it started (-1 unknown), where an OOM kill is marked, and its output pipes' identity. */
  char *run_id;
  long long oom_before;
  char *state_dir;
  dev_t out_dev, err_dev;
  ino_t out_ino, err_ino;
  /* A run's session: its leader's pid, which setsid made the session's id. */
  pid_t session;
  /* A run waiting for the login environment (see below): its pipes are made and its stdin is
   * buffered, but it is forked only once the login shell answered. `ends` are the child's ends
   * of its pipes until then; `cwd`, `root` and `command` what it will run. */
  int waiting;
  int ends[3];
  char *cwd, *root, *command;
  /* The login shell reading the environment (one at a time): its output is the environment,
   * never sent to cordon. */
  int login;
};

static struct child children[MAX_CHILDREN];

/* A loopback port cordon asked for (L): its connections become channels under cordon's id. */
struct listener {
  uint32_t id;
  uint32_t serial;
  int fd;
  int used;
};

/* One accepted connection, carried over the stream. */
struct channel {
  uint32_t id;
  uint32_t serial;
  int fd;
  int used;
  char *buf;       /* bytes from cordon not yet written into the connection */
  size_t len, off;
  int read_done;   /* the connection's side ended (Z sent) */
  int write_done;  /* cordon's side ended (Z received): shut down once buf is written */
  size_t unacked;  /* bytes sent to cordon and not yet acknowledged */
  int connecting;  /* a connect cordon asked for (N), not yet answered */
  uint32_t call;   /* that request's id: the channel is announced with it */
};

static struct listener listeners[MAX_LISTENERS];
static struct channel channels[MAX_CHANNELS];
static uint32_t next_channel = 1;

/*
 * Every child, listener and channel gets a new serial when it takes a slot, and the poll loop
 * applies an event only to the occupant it polled for. A slot freed by one frame and taken by the
 * next of the same batch usually gets the freed descriptor numbers too (first free slot, lowest
 * free fd): comparing descriptors alone handed the old occupant's readiness to the new one.
 */
static uint32_t last_serial;

static uint32_t new_serial(void) {
  if (++last_serial == 0) last_serial = 1;
  return last_serial;
}
static char **base_env;

static void die(const char *what) {
  /* stderr is the exec's stderr: cordon logs it. */
  fprintf(stderr, "cordon-executor: %s: %s\n", what, strerror(errno));
  _exit(70);
}

static void write_all(int fd, const void *data, size_t length) {
  const char *p = data;
  while (length > 0) {
    ssize_t n = write(fd, p, length);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd w = {.fd = fd, .events = POLLOUT};
        poll(&w, 1, -1);
        continue;
      }
      die("write to cordon");
    }
    p += n;
    length -= (size_t)n;
  }
}

static void put_u32(unsigned char *p, uint32_t v) {
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

static uint32_t get_u32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void send_frame(char type, uint32_t id, const void *payload, size_t length) {
  unsigned char header[HEADER];
  header[0] = (unsigned char)type;
  put_u32(header + 1, id);
  put_u32(header + 5, (uint32_t)length);
  write_all(1, header, HEADER);
  if (length > 0) write_all(1, payload, length);
}

static void send_status(char type, uint32_t id, int32_t status) {
  unsigned char p[4];
  put_u32(p, (uint32_t)status);
  send_frame(type, id, p, 4);
}

static struct child *find_child(uint32_t id) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (children[i].used && !children[i].login && children[i].id == id) return &children[i];
  return NULL;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void release(struct child *c) {
  close_fd(&c->out);
  close_fd(&c->err);
  close_fd(&c->in);
  if (c->waiting)
    for (int i = 0; i < 3; i++) close_fd(&c->ends[i]);
  free(c->in_buf);
  free(c->run_id);
  free(c->state_dir);
  free(c->cwd);
  free(c->root);
  free(c->command);
  memset(c, 0, sizeof *c);
}

static void login_finished(struct child *c);

/* Reports the exit once the process is reaped and both output pipes reached end of file. */
static void finish_if_done(struct child *c) {
  if (!c->used || c->waiting || c->pid != 0 || c->out >= 0 || c->err >= 0) return;
  if (c->login) {
    login_finished(c);
    return;
  }
  if (!c->detached) send_status(RES_EXIT, c->id, c->status);
  release(c);
}

/* NUL-separated strings from a payload, into a NULL-terminated array. */
static char **split_strings(char **cursor, char *end, uint32_t count) {
  char **list = calloc(count + 1, sizeof *list);
  if (!list) die("calloc");
  for (uint32_t i = 0; i < count; i++) {
    char *nul = memchr(*cursor, 0, (size_t)(end - *cursor));
    if (!nul) {
      free(list);
      return NULL;
    }
    list[i] = *cursor;
    *cursor = nul + 1;
  }
  return list;
}

/* `base` with the request's NAME=value entries on top, as docker exec does. */
static char **merged_env(char **base, char **extra) {
  size_t n = 0, m = 0;
  while (base[n]) n++;
  while (extra[m]) m++;
  char **env = calloc(n + m + 1, sizeof *env);
  if (!env) die("calloc");
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(base[i], '=');
    size_t name = eq ? (size_t)(eq - base[i]) : strlen(base[i]);
    int replaced = 0;
    for (size_t j = 0; j < m; j++)
      if (strncmp(extra[j], base[i], name) == 0 && extra[j][name] == '=') replaced = 1;
    if (!replaced) env[k++] = base[i];
  }
  for (size_t j = 0; j < m; j++) env[k++] = extra[j];
  return env;
}

static int make_parents(char *dir);

/* A command of REQ_RUN: what the exec wrapper's `run` mode takes as arguments. */
struct run {
  const char *id;
  const char *root;
  const char *state_dir;
};

static int under(const char *path, const char *top) {
  size_t n = strlen(top);
  return strncmp(path, top, n) == 0 && (path[n] == 0 || path[n] == '/');
}

static int kernel_view(const char *path) {
  return under(path, "/proc") || under(path, "/sys") || under(path, "/dev");
}

/* In a REQ_RUN child: the wrapper's refusal line and status (exec-wrapper.ts reads them). */
static void refuse(const struct run *run, const char *reason, const char *cwd) {
  dprintf(2, "cordon-exec[%s]: %s %s\n", run->id, reason, cwd);
  _exit(125);
}

/*
 * In a REQ_RUN child, the wrapper's cordon_enter: CWD must exist and be a directory that can be
 * entered; resolved physically, it must stay under ROOT and out of /proc, /sys and /dev (checked
 * as given too: /proc/self/cwd and friends resolve to innocent-looking places). Fills `pwd`.
 */
static void enter(const struct run *run, const char *cwd, char *pwd, size_t size) {
  struct stat st;
  if (kernel_view(cwd)) refuse(run, "outside_sandbox", cwd);
  if (stat(cwd, &st) < 0) refuse(run, "not_found", cwd);
  if (!S_ISDIR(st.st_mode)) refuse(run, "not_directory", cwd);
  if (chdir(cwd) < 0) refuse(run, "permission_denied", cwd);
  if (!getcwd(pwd, size) || pwd[0] != '/' || kernel_view(pwd)) refuse(run, "outside_sandbox", cwd);
  if (strcmp(run->root, "/") != 0 && !under(pwd, run->root)) refuse(run, "outside_sandbox", cwd);
}

/* The cgroup's OOM kill count (v2 memory.events, v1 memory.oom_control); -1 when unknown. */
static long long oom_kills(void) {
  static const char *files[] = {"/sys/fs/cgroup/memory.events",
                                "/sys/fs/cgroup/memory/memory.oom_control"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    FILE *f = fopen(files[i], "re");
    if (!f) continue;
    char key[64];
    long long value;
    while (fscanf(f, "%63s %lld", key, &value) == 2) {
      if (strcmp(key, "oom_kill") == 0) {
        fclose(f);
        return value;
      }
    }
    fclose(f);
  }
  return -1;
}

/*
 * A child's slot and its own pipes (stdin from cordon when `attach`, else /dev/null); its ends of
 * them wait in `ends` until it is forked. NULL when out of slots or descriptors, answered
 * "unhandled": the call then goes by plain exec, which has its own.
 */
static struct child *prepare_child(uint32_t id, int attach, const char *run_id,
                                   const char *state_dir) {
  struct child *c = NULL;
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (!children[i].used) {
      c = &children[i];
      break;
    }
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  char *id_copy = run_id ? strdup(run_id) : NULL;
  char *dir_copy = state_dir ? strdup(state_dir) : NULL;
  if (!c || (run_id && !id_copy) || (state_dir && !dir_copy) || pipe2(out, O_CLOEXEC) < 0 ||
      pipe2(err, O_CLOEXEC) < 0 || (attach && pipe2(in, O_CLOEXEC) < 0)) {
    for (int i = 0; i < 2; i++) {
      if (out[i] >= 0) close(out[i]);
      if (err[i] >= 0) close(err[i]);
      if (in[i] >= 0) close(in[i]);
    }
    free(id_copy);
    free(dir_copy);
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return NULL;
  }
  memset(c, 0, sizeof *c);
  c->used = 1;
  c->serial = new_serial();
  c->id = id;
  c->out = out[0];
  c->err = err[0];
  /* Read when poll says so, yet never able to block the loop (the child's ends stay blocking). */
  fcntl(c->out, F_SETFL, O_NONBLOCK);
  fcntl(c->err, F_SETFL, O_NONBLOCK);
  c->in = attach ? in[1] : -1;
  if (c->in >= 0) fcntl(c->in, F_SETFL, O_NONBLOCK);
  c->ends[0] = attach ? in[0] : -1;
  c->ends[1] = out[1];
  c->ends[2] = err[1];
  c->run_id = id_copy;
  c->state_dir = dir_copy;
  c->oom_before = -1;
  struct stat st;
  /* A pipe end has its pipe's identity: what a process still writing to the output shows. */
  if (fstat(c->out, &st) == 0) c->out_dev = st.st_dev, c->out_ino = st.st_ino;
  if (fstat(c->err, &st) == 0) c->err_dev = st.st_dev, c->err_ino = st.st_ino;
  return c;
}

/*
 * Forks a prepared child: its pipes on 0/1/2, `base` with `extra` on top as its environment. A
 * plain spawn (`run` NULL) enters `cwd` and runs `argv`; a run does what the exec wrapper's `run`
 * mode does before its shell: enter and check `cwd`, a session of its own, `CORDON_RUN=ID` in its
 * environment. The login shell gets its pipe on 3 and /dev/null on 0, 1 and 2: what a profile
 * prints is not the environment. Returns 0, or -1 when the fork failed (the slot is released; a
 * call is answered, the login shell's caller decides).
 */
static int launch_child(struct child *c, char **argv, char **base, char **extra, const char *cwd,
                        const struct run *run) {
  if (run) c->oom_before = oom_kills();
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: its own pipes, default signal handling, then the program. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (c->login) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      /* dup2 onto itself would keep close-on-exec. */
      if (c->ends[1] == 3) fcntl(3, F_SETFD, 0);
      else dup2(c->ends[1], 3);
    } else {
      dup2(c->ends[0] >= 0 ? c->ends[0] : null, 0);
      dup2(c->ends[1], 1);
      dup2(c->ends[2], 2);
    }
    char **env;
    if (run) {
      /* Before anything can start inside it: every process of the run is in this session
       * unless it leaves, and marked unless it clears its environment (see sweep). */
      setsid();
      char pwd[PATH_MAX], marker[128], pwd_entry[PATH_MAX + 8];
      enter(run, cwd, pwd, sizeof pwd);
      snprintf(marker, sizeof marker, "CORDON_RUN=%s", run->id);
      snprintf(pwd_entry, sizeof pwd_entry, "PWD=%s", pwd);
      size_t m = 0;
      while (extra[m]) m++;
      char **more = calloc(m + 3, sizeof *more);
      if (!more) _exit(126);
      memcpy(more, extra, m * sizeof *more);
      more[m] = marker;
      more[m + 1] = pwd_entry;
      env = merged_env(base, more);
    } else {
      if (chdir(cwd) < 0) {
        dprintf(2, "cordon-executor: cannot enter %s: %s\n", cwd, strerror(errno));
        _exit(126);
      }
      env = merged_env(base, extra);
    }
    execvpe(argv[0], argv, env);
    dprintf(2, "cordon-executor: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  int saved = errno;
  for (int i = 0; i < 3; i++) close_fd(&c->ends[i]);
  c->waiting = 0;
  if (pid < 0) {
    uint32_t id = c->id;
    int login = c->login;
    release(c);
    if (login) return -1;
    /* The pids limit is full (a fork bomb): a Docker exec may still get in (joining the cgroup
     * is not a fork, though the runtime's start sometimes is refused), so cordon runs this one
     * that way, starting a kill again until it gets in (run-command.ts, killTree). */
    if (saved == EAGAIN || saved == ENOMEM) {
      send_frame(RES_UNHANDLED, id, NULL, 0);
      return -1;
    }
    const char *why = strerror(saved);
    send_frame(RES_FAILED, id, why, strlen(why));
    return -1;
  }
  c->pid = pid;
  if (run) c->session = pid;
  return 0;
}

/* S: u32 flags (bit 0: stdin attached), u32 argc, u32 envc, then argv, env and cwd as C strings. */
static void spawn(uint32_t id, char *payload, uint32_t length) {
  if (length < 12 || find_child(id)) {
    send_frame(RES_FAILED, id, "bad spawn request", 17);
    return;
  }
  uint32_t flags = get_u32((unsigned char *)payload);
  uint32_t argc = get_u32((unsigned char *)payload + 4);
  uint32_t envc = get_u32((unsigned char *)payload + 8);
  char *cursor = payload + 12, *end = payload + length;
  char **argv = argc > 0 && argc < 65536 ? split_strings(&cursor, end, argc) : NULL;
  char **extra = argv && envc < 65536 ? split_strings(&cursor, end, envc) : NULL;
  char *nul = extra ? memchr(cursor, 0, (size_t)(end - cursor)) : NULL;
  struct child *c = nul ? prepare_child(id, flags & 1, NULL, NULL) : NULL;
  if (c) launch_child(c, argv, base_env, extra, cursor, NULL);
  else if (!nul) send_frame(RES_FAILED, id, "bad spawn request", 17);
  free(argv);
  free(extra);
}

/* A run id names a marker and a file: letters, digits, '-' and '_' only. */
static int valid_run_id(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > 64) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(id[i] == '-' || id[i] == '_' || (id[i] >= '0' && id[i] <= '9') ||
          (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z')))
      return 0;
  return 1;
}

/*
 * The login environment. A command runs as `bash -c COMMAND` in the environment a login shell
 * of the sandbox's user would have (`bash -l`: /etc/profile, /etc/profile.d, the first of
 * ~/.bash_profile, ~/.bash_login, ~/.profile, and what they source, over the container's own
 * environment). A login shell reads it once (`bash -l -c 'exec env -0 >&3'`), and again before
 * the first command after any of the files below changed, appeared or went: their stat
 * identity, taken before every command, is the stamp the environment was read under. Only
 * exported variables carry over: a profile's functions, aliases, umask, ulimits and shell
 * options do not (a profile that wants them for every command sets BASH_ENV, which `bash -c`
 * reads). While a login shell reads, the runs that arrive wait (their stdin buffered); when it
 * fails or outlasts `LOGIN_TIMEOUT_MS`, runs under that stamp go by `bash -lc` as before.
 */
#define LOGIN_TIMEOUT_MS 10000
#define LOGIN_MAX_BYTES (1024 * 1024)

enum { LOGIN_NONE, LOGIN_READY, LOGIN_FAILED };

static struct {
  int state;
  uint64_t stamp;      /* of the files when the environment (or the failure) was read */
  char **env;          /* the environment when ready */
  char *bytes;         /* what the login shell wrote (env -0) */
  size_t len, cap;
  int overflow;
  struct child *reader;  /* the login shell reading now, if any */
  uint64_t reader_stamp;
  struct timespec deadline;
  unsigned serial;
} login;

static uint64_t fnv(uint64_t hash, const void *data, size_t length) {
  const unsigned char *p = data;
  for (size_t i = 0; i < length; i++) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

static uint64_t stamp_path(uint64_t hash, const char *path) {
  struct stat st;
  hash = fnv(hash, path, strlen(path) + 1);
  if (stat(path, &st) < 0) return fnv(hash, "-", 1);
  long long fields[] = {(long long)st.st_dev,          (long long)st.st_ino,
                        (long long)st.st_mode,         (long long)st.st_size,
                        (long long)st.st_mtim.tv_sec,  (long long)st.st_mtim.tv_nsec,
                        (long long)st.st_ctim.tv_sec,  (long long)st.st_ctim.tv_nsec};
  return fnv(hash, fields, sizeof fields);
}

/*
 * The stamp of what a login shell reads: /etc/profile and every entry of /etc/profile.d, and in
 * HOME the three profile files, ~/.bashrc (Debian's ~/.profile sources it) and the directories a
 * profile puts on PATH only when they exist (~/bin, ~/.local/bin: `pip install --user` makes the
 * latter). A file sourced from elsewhere is not watched: touching ~/.profile re-reads it.
 */
static uint64_t login_stamp(void) {
  uint64_t hash = 1469598103934665603ull;
  hash = stamp_path(hash, "/etc/profile");
  hash = stamp_path(hash, "/etc/profile.d");
  DIR *dir = opendir("/etc/profile.d");
  if (dir) {
    struct dirent *entry;
    char path[PATH_MAX];
    while ((entry = readdir(dir))) {
      if (entry->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "/etc/profile.d/%s", entry->d_name);
      hash = stamp_path(hash, path);
    }
    closedir(dir);
  }
  const char *home = getenv("HOME");
  static const char *files[] = {".bash_profile", ".bash_login", ".profile",
                                ".bashrc",       "bin",         ".local/bin"};
  if (home && home[0] == '/') {
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
      snprintf(path, sizeof path, "%s/%s", home, files[i]);
      hash = stamp_path(hash, path);
    }
  }
  return hash;
}

/* Entries the login shell's `env` shows that are its own, not the login environment. */
static int login_own(const char *entry) {
  static const char *names[] = {"_=", "SHLVL=", "PWD=", "OLDPWD=", "CORDON_RUN="};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strncmp(entry, names[i], strlen(names[i])) == 0) return 1;
  return 0;
}

/* Parses `env -0` output into login.env; 0, or -1 when it is not an environment. */
static int login_parse(void) {
  if (login.overflow || login.len == 0 || login.bytes[login.len - 1] != 0) return -1;
  size_t count = 0;
  for (size_t i = 0; i < login.len; i++)
    if (login.bytes[i] == 0) count++;
  size_t base = 0;
  while (base_env[base]) base++;
  char **env = calloc(count + base + 1, sizeof *env);
  if (!env) die("calloc");
  size_t k = 0;
  for (size_t at = 0; at < login.len;) {
    char *entry = login.bytes + at;
    size_t n = strlen(entry);
    at += n + 1;
    char *eq = strchr(entry, '=');
    if (!eq || eq == entry) {
      free(env);
      return -1;
    }
    if (!login_own(entry)) env[k++] = entry;
  }
  /* SHLVL as the container has it (bash counts it up again). */
  for (size_t i = 0; i < base; i++)
    if (strncmp(base_env[i], "SHLVL=", 6) == 0) env[k++] = base_env[i];
  free(login.env);
  login.env = env;
  return 0;
}

static void launch_waiting(void);

/* The login shell ended (reaped, its pipe at end of file): the environment, or a failure. */
static void login_finished(struct child *c) {
  int ok = c->status == 0 && login_parse() == 0;
  if (!ok && login.env) {
    free(login.env);
    login.env = NULL;
  }
  login.state = ok ? LOGIN_READY : LOGIN_FAILED;
  login.stamp = login.reader_stamp;
  login.reader = NULL;
  if (!ok) fprintf(stderr, "cordon-executor: the login shell did not give an environment (status %d); commands run in bash -lc\n", c->status);
  release(c);
  launch_waiting();
}

/* Starts a login shell reading the environment under `stamp`; -1 when it cannot be started. */
static int login_read(uint64_t stamp) {
  char id[32];
  snprintf(id, sizeof id, "login-%u", ++login.serial);
  struct child *c = prepare_child(0, 0, id, "/tmp");
  if (!c) return -1;
  c->login = 1;
  login.len = 0;
  login.overflow = 0;
  login.reader = c;
  login.reader_stamp = stamp;
  clock_gettime(CLOCK_MONOTONIC, &login.deadline);
  login.deadline.tv_sec += LOGIN_TIMEOUT_MS / 1000;
  struct run run = {.id = id, .root = "/", .state_dir = "/tmp"};
  char *argv[] = {"bash", "-l", "-c", "exec env -0 >&3", NULL};
  char *none[] = {NULL};
  if (launch_child(c, argv, base_env, none, "/", &run) < 0) {
    login.reader = NULL;
    return -1;
  }
  return 0;
}

/*
 * Whether a run can start now: the environment (or the failure to read it) is current. Otherwise
 * a login shell reads it (or already does) and the run waits.
 */
static int login_current(void) {
  if (login.reader) return 0;
  uint64_t stamp = login_stamp();
  if (login.state != LOGIN_NONE && stamp == login.stamp) return 1;
  if (login_read(stamp) == 0) return 0;
  /* No slot or no fork for it: this stamp goes by bash -lc. */
  login.state = LOGIN_FAILED;
  login.stamp = stamp;
  return 1;
}

/* The login shell's output, kept (bounded) rather than relayed. */
static void login_output(struct child *c) {
  char buffer[CHUNK];
  ssize_t n = read(c->out, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_fd(&c->out);
    finish_if_done(c);
    return;
  }
  if (login.len + (size_t)n > LOGIN_MAX_BYTES) {
    login.overflow = 1;
    return;
  }
  if (login.cap < login.len + (size_t)n) {
    login.cap = login.len + (size_t)n + CHUNK;
    login.bytes = realloc(login.bytes, login.cap);
    if (!login.bytes) die("realloc");
  }
  memcpy(login.bytes + login.len, buffer, (size_t)n);
  login.len += (size_t)n;
}

/* Milliseconds until the login shell's deadline (-1: none), for poll. */
static int login_wait_ms(void) {
  if (!login.reader) return -1;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long long ms = (login.deadline.tv_sec - now.tv_sec) * 1000LL +
                 (login.deadline.tv_nsec - now.tv_nsec) / 1000000;
  return ms < 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static void sweep(const struct child *c);

/* Past its deadline: the login shell's tree is killed and its pipe let go of (a process that
 * escaped the sweep may still hold it); it ends as a failure once reaped. */
static void login_expire(void) {
  struct child *c = login.reader;
  if (!c || login_wait_ms() > 0) return;
  login.overflow = 1;
  if (c->pid > 0) kill(c->pid, SIGKILL);
  sweep(c);
  close_fd(&c->out);
  close_fd(&c->err);
  finish_if_done(c);
}

/* Starts a waiting run: `bash -c` in the login environment, or `bash -lc` when it failed. */
static void launch_run(struct child *c, const char *cwd, const char *root, const char *command) {
  struct run run = {.id = c->run_id, .root = root, .state_dir = c->state_dir};
  char *none[] = {NULL};
  int ready = login.state == LOGIN_READY;
  char *argv[] = {"bash", ready ? "-c" : "-lc", (char *)command, NULL};
  launch_child(c, argv, ready ? login.env : base_env, none, cwd, &run);
}

/* The runs that waited for the login environment, in the order they came, while it is current. */
static void launch_waiting(void) {
  for (;;) {
    struct child *next = NULL;
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      /* Call ids count up (and wrap): the oldest is the one the others are after. */
      if (c->used && c->waiting && (!next || (int32_t)(c->id - next->id) < 0)) next = c;
    }
    if (!next || !login_current()) return;
    /* launch_child frees nothing of these: they live in the slot until it is released. */
    char *cwd = next->cwd, *root = next->root, *command = next->command;
    next->cwd = next->root = next->command = NULL;
    launch_run(next, cwd, root, command);
    free(cwd);
    free(root);
    free(command);
  }
}

/*
 * C: u32 flags (bit 0: stdin attached), then run id, cwd, root, state directory and command as C
 * strings: the exec wrapper's `run ID CWD ROOT COMMAND`. The command carries its own environment.
 */
static void run_command(uint32_t id, char *payload, uint32_t length) {
  if (length < 4 || find_child(id)) {
    send_frame(RES_FAILED, id, "bad run request", 15);
    return;
  }
  uint32_t flags = get_u32((unsigned char *)payload);
  char *cursor = payload + 4, *end = payload + length;
  char **fields = split_strings(&cursor, end, 5);
  if (fields && valid_run_id(fields[0]) && fields[2][0] == '/') {
    struct child *c = prepare_child(id, flags & 1, fields[0], fields[3]);
    if (c && login_current()) {
      launch_run(c, fields[1], fields[2], fields[4]);
    } else if (c) {
      c->waiting = 1;
      c->cwd = strdup(fields[1]);
      c->root = strdup(fields[2]);
      c->command = strdup(fields[4]);
      if (!c->cwd || !c->root || !c->command) die("strdup");
    }
  } else {
    send_frame(RES_FAILED, id, "bad run request", 15);
  }
  free(fields);
}

/* A set of pids (small: a container's processes are bounded by its pids limit). */
struct pids {
  pid_t *at;
  size_t n, cap;
};

static int has_pid(const struct pids *set, pid_t pid) {
  for (size_t i = 0; i < set->n; i++)
    if (set->at[i] == pid) return 1;
  return 0;
}

static void add_pid(struct pids *set, pid_t pid) {
  if (has_pid(set, pid)) return;
  if (set->n == set->cap) {
    set->cap = set->cap * 2 + 64;
    set->at = realloc(set->at, set->cap * sizeof *set->at);
    if (!set->at) die("realloc");
  }
  set->at[set->n++] = pid;
}

/* state, ppid, pgrp and session from /proc/PID/stat; 0 when the process is gone. */
static int read_stat(pid_t pid, char *state, pid_t *ppid, pid_t *pgrp, pid_t *session) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n <= 0) return 0;
  line[n] = 0;
  /* After the command name (which may hold spaces and parentheses) come single words only. */
  char *close_paren = strrchr(line, ')');
  int p, g, s;
  if (!close_paren || sscanf(close_paren + 1, " %c %d %d %d", state, &p, &g, &s) != 4) return 0;
  *ppid = p;
  *pgrp = g;
  *session = s;
  return 1;
}

/* Whether /proc/PID/FILE is empty (or unreadable): an exec's new image gets its arguments and
 * environment only after the exec let go of the lock that reading them takes. */
static int proc_file_empty(pid_t pid, const char *file) {
  char path[64], byte;
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  ssize_t n;
  do n = read(fd, &byte, 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  return n <= 0;
}

/* Whether /proc/PID/environ holds exactly the entry `marker`: 1 yes, 0 no, -1 not yet known (the
 * process is in the middle of an exec: no arguments and no environment yet). */
static int has_marker(pid_t pid, const char *marker) {
  static char *buffer;
  static size_t cap;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t len = 0;
  for (;;) {
    if (cap - len < 4096) {
      cap = cap * 2 + 65536;
      buffer = realloc(buffer, cap);
      if (!buffer) die("realloc");
    }
    ssize_t n = read(fd, buffer + len, cap - len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  /* `env -i` leaves an environment empty for good, but never the arguments. */
  if (len == 0) return proc_file_empty(pid, "cmdline") ? -1 : 0;
  buffer[len] = 0;
  size_t want = strlen(marker) + 1;
  for (size_t at = 0; at < len;) {
    size_t entry = strlen(buffer + at) + 1;
    if (entry == want && memcmp(buffer + at, marker, want) == 0) return 1;
    at += entry;
  }
  return 0;
}

/* Whether descriptor `fd` of PID is the pipe (dev, ino). */
static int holds(pid_t pid, int fd, dev_t dev, ino_t ino) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
  return stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* How many more passes (a millisecond apart) a sweep makes for processes caught in an exec. */
enum { sweep_unsure_passes = 200 };

/*
 * The exec wrapper's cordon_sweep: kills every process of run `c`, found four ways because each
 * alone can be escaped: the CORDON_RUN marker in its environment, the session or process group of
 * a marked process (kept across `env -i`), parenthood (a child of a killed process), and the run's
 * output pipes (a daemon that cleared its environment, left the session and was orphaned, but
 * still writes to the call's output). Found processes are stopped before they are killed, so a
 * fork loop cannot outrun the sweep, and it repeats until a pass finds nothing. This process and
 * its ancestors are never part of a tree.
 *
 * A process in the middle of an exec shows no environment for a moment (longer while the new
 * program's loader reads from a busy disk): `bash -c 'echo go; sleep 9'` becomes `sleep` in
 * place, and a kill sent as "go" arrives used to miss it. So the run's session, while its leader
 * lives, is part of the tree from the start (its id cannot be another's then), and a pass that
 * found nothing but met such a process looks again, for a bounded while.
 */
static void sweep(const struct child *c) {
  char marker[128];
  snprintf(marker, sizeof marker, "CORDON_RUN=%s", c->run_id);
  struct pids spare = {0}, hit = {0}, groups = {0}, found = {0};
  char state;
  pid_t ppid, pgrp, session;
  for (pid_t pid = getpid(); pid > 0 && !has_pid(&spare, pid);) {
    add_pid(&spare, pid);
    if (!read_stat(pid, &state, &ppid, &pgrp, &session)) break;
    pid = ppid;
  }
  /* Only while this process holds the read end is the pipe's identity its own; at end of file
   * no process holds a write end any more. */
  int out = c->out >= 0, err = c->err >= 0;
  if (c->pid > 0 && c->session > 0) add_pid(&groups, c->session);
  int unsure_passes = 0;
  for (int rounds = 0; rounds < 100;) {
    int unsure = 0;
    found.n = 0;
    DIR *proc = opendir("/proc");
    if (!proc) break;
    struct dirent *entry;
    while ((entry = readdir(proc))) {
      char *rest;
      long value = strtol(entry->d_name, &rest, 10);
      if (*rest || value <= 0) continue;
      pid_t pid = (pid_t)value;
      if (has_pid(&spare, pid) || !read_stat(pid, &state, &ppid, &pgrp, &session)) continue;
      if (state == 'Z' || state == 'X') continue;
      if (has_pid(&hit, ppid) || has_pid(&groups, pgrp) || has_pid(&groups, session) ||
          (out && holds(pid, 1, c->out_dev, c->out_ino)) ||
          (err && holds(pid, 2, c->err_dev, c->err_ino))) {
        add_pid(&found, pid);
      } else {
        int marked = has_marker(pid, marker);
        if (marked > 0) {
          add_pid(&found, pid);
          add_pid(&groups, pgrp);
          add_pid(&groups, session);
        } else if (marked < 0) {
          unsure = 1;
        }
      }
    }
    closedir(proc);
    if (found.n == 0) {
      if (!unsure || ++unsure_passes > sweep_unsure_passes) break;
      usleep(1000);
      continue;
    }
    rounds++;
    for (size_t i = 0; i < found.n; i++) kill(found.at[i], SIGSTOP);
    for (size_t i = 0; i < found.n; i++) {
      kill(found.at[i], SIGKILL);
      add_pid(&hit, found.at[i]);
    }
  }
  free(spare.at);
  free(hit.at);
  free(groups.at);
  free(found.at);
}

/* After a run ended by SIGKILL with the cgroup's OOM count moved: the wrapper's OOM mark. */
static void mark_oom(const struct child *c) {
  if (c->status != 137 || c->oom_before < 0) return;
  long long now = oom_kills();
  if (now < 0 || now == c->oom_before) return;
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/oom", c->state_dir) >= sizeof path) return;
  if (make_parents(path) < 0) return;
  size_t n = strlen(path);
  snprintf(path + n, sizeof path - n, "/%s", c->run_id);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd >= 0) close(fd);
}

/* K: run id. Kills the tree of a command this executor runs; unhandled when it runs no such one. */
static void kill_run(uint32_t id, char *payload, uint32_t length) {
  if (length < 2 || payload[length - 1] != 0) {
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return;
  }
  for (int i = 0; i < MAX_CHILDREN; i++) {
    struct child *c = &children[i];
    if (c->used && !c->login && c->run_id && strcmp(c->run_id, payload) == 0) {
      if (c->waiting) {
        /* Never started: it ends as a killed command would. */
        send_status(RES_EXIT, c->id, 128 + SIGKILL);
        release(c);
      } else {
        sweep(c);
      }
      send_status(RES_EXIT, id, 0);
      return;
    }
  }
  send_frame(RES_UNHANDLED, id, NULL, 0);
}

static void feed_stdin(struct child *c) {
  while (c->in >= 0 && c->in_off < c->in_len) {
    ssize_t n = write(c->in, c->in_buf + c->in_off, c->in_len - c->in_off);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      /* It stopped reading (exited): the rest is dropped, as a closed exec stdin would. */
      close_fd(&c->in);
      break;
    }
    c->in_off += (size_t)n;
  }
  if (c->in_off == c->in_len) {
    free(c->in_buf);
    c->in_buf = NULL;
    c->in_len = c->in_off = 0;
    if (c->in_eof) close_fd(&c->in);
  }
}

static void queue_stdin(uint32_t id, const char *data, uint32_t length) {
  struct child *c = find_child(id);
  if (!c) return;
  if (length == 0) {
    c->in_eof = 1;
  } else if (c->in >= 0) {
    char *grown = realloc(c->in_buf, c->in_len + length);
    if (!grown) die("realloc");
    memcpy(grown + c->in_len, data, length);
    c->in_buf = grown;
    c->in_len += length;
  }
  feed_stdin(c);
}

/* R: u64 max (BE), path. The file's bytes as stdout frames, then exit 0; else unhandled. */
static void fast_read(uint32_t id, char *payload, uint32_t length) {
  if (length < 9 || payload[length - 1] != 0) {
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return;
  }
  uint64_t max = ((uint64_t)get_u32((unsigned char *)payload) << 32) |
                 get_u32((unsigned char *)payload + 4);
  const char *path = payload + 8;
  /* Non-blocking so a fifo cannot hang the open; anything but a readable regular file within
   * the limit is the script's to explain. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
    if (fd >= 0) close(fd);
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return;
  }
  static char buffer[1024 * 1024];
  /* One byte past the limit tells cordon the file grew past it while being read. */
  uint64_t left = max + 1;
  while (left > 0) {
    ssize_t n = read(fd, buffer, left < sizeof buffer ? (size_t)left : sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      /* Bytes already went out: an I/O error mid-file is a failure, not a retry. */
      const char *why = strerror(errno);
      send_frame(RES_STDERR, id, why, strlen(why));
      send_status(RES_EXIT, id, 1);
      close(fd);
      return;
    }
    if (n == 0) break;
    send_frame(RES_STDOUT, id, buffer, (size_t)n);
    left -= (uint64_t)n;
  }
  close(fd);
  send_status(RES_EXIT, id, 0);
}

static int make_parents(char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : -1;
  if (errno != ENOENT) return -1;
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = 0;
    int parent = make_parents(dir);
    *slash = '/';
    if (parent < 0) return -1;
  }
  return mkdir(dir, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

static int write_whole(int fd, const char *data, size_t length) {
  while (length > 0) {
    ssize_t n = write(fd, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    data += n;
    length -= (size_t)n;
  }
  return 0;
}

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/*
 * Puts the written temporary file `tmp` in the place of `target`. Over an existing file the two
 * are exchanged and the old one, now at `tmp`, unlinked: ext4 starts writing out a file renamed
 * over another (auto_da_alloc, its guard for programs that never fsync), which cost a 1 KiB write
 * 0.5-3 ms on a disk such as a Docker volume's (bench `volumes`), and an exchange is not flushed.
 * A crash of the machine right after may leave the new file empty, as ext4 would without that
 * guard; a sandbox's workspace asks no more. Where the exchange is refused (an older kernel,
 * gVisor) or the target vanished, a plain rename.
 */
static int replace_file(const char *tmp, const char *target, int exists) {
  if (exists && syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, target, RENAME_EXCHANGE) == 0) {
    struct stat old;
    if (lstat(tmp, &old) == 0 && S_ISREG(old.st_mode)) {
      unlink(tmp);
      return 0;
    }
    /* Something else was put at the target meanwhile: exchanged back, left as it was. */
    syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, target, RENAME_EXCHANGE);
    errno = EISDIR;
    return -1;
  }
  return rename(tmp, target);
}

/*
 * W: u32 mode, u32 create-parents, u32 path length, path, content. The file script's steps on
 * the common path: a temporary file beside the target, the target's mode kept (or `mode` for a
 * new file), renamed over it. A symbolic link, a missing parent it may not create, anything in
 * the way: unhandled, nothing changed.
 */
static void fast_write(uint32_t id, char *payload, uint32_t length) {
  if (length < 12) goto unhandled;
  mode_t mode = get_u32((unsigned char *)payload) & 07777;
  int parents = get_u32((unsigned char *)payload + 4) != 0;
  uint32_t path_length = get_u32((unsigned char *)payload + 8);
  if (path_length == 0 || path_length >= PATH_MAX - 32 || path_length > length - 12) goto unhandled;
  char target[PATH_MAX], dir[PATH_MAX], tmp[PATH_MAX];
  memcpy(target, payload + 12, path_length);
  target[path_length] = 0;
  if (target[0] != '/' || strlen(target) != path_length) goto unhandled;
  const char *content = payload + 12 + path_length;
  size_t size = length - 12 - path_length;
  struct stat st;
  int exists = lstat(target, &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) goto unhandled;
  if (!exists && errno != ENOENT) goto unhandled;
  memcpy(dir, target, path_length + 1);
  char *slash = strrchr(dir, '/');
  if (slash == dir) strcpy(dir, "/");
  else *slash = 0;
  struct stat dir_st;
  if (stat(dir, &dir_st) < 0) {
    if (errno != ENOENT || !parents || make_parents(dir) < 0) goto unhandled;
  } else if (!S_ISDIR(dir_st.st_mode)) {
    goto unhandled;
  }
  snprintf(tmp, sizeof tmp, "%s/.cordon-write.XXXXXXXX", strcmp(dir, "/") == 0 ? "" : dir);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) goto unhandled;
  if (write_whole(fd, content, size) < 0 || fchmod(fd, exists ? st.st_mode & 07777 : mode) < 0) {
    close(fd);
    unlink(tmp);
    goto unhandled;
  }
  close(fd);
  if (replace_file(tmp, target, exists) < 0) {
    /* A mount point, a read-only directory, ...: the script handles and explains these. */
    unlink(tmp);
    goto unhandled;
  }
  send_status(RES_EXIT, id, 0);
  return;
unhandled:
  send_frame(RES_UNHANDLED, id, NULL, 0);
}

/* T: path. One line as the file script's stat prints it, or "none"; unusual errors unhandled. */
static void fast_stat(uint32_t id, char *payload, uint32_t length) {
  if (length < 2 || payload[length - 1] != 0) {
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return;
  }
  const char *path = payload;
  struct stat st;
  const char *kind;
  char line[256];
  if (stat(path, &st) == 0) {
    if (S_ISREG(st.st_mode)) kind = st.st_size == 0 ? "regular empty file" : "regular file";
    else if (S_ISDIR(st.st_mode)) kind = "directory";
    else kind = "other";
  } else if (errno == ENOENT && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    kind = "dangling";
  } else if (errno == ENOENT || errno == ENOTDIR) {
    send_frame(RES_STDOUT, id, "none\n", 5);
    send_status(RES_EXIT, id, 0);
    return;
  } else {
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return;
  }
  int n = snprintf(line, sizeof line, "%s|%lld|%o|%lld.%03ld\n", kind, (long long)st.st_size,
                   (unsigned)(st.st_mode & 07777), (long long)st.st_mtim.tv_sec,
                   st.st_mtim.tv_nsec / 1000000);
  send_frame(RES_STDOUT, id, line, (size_t)n);
  send_status(RES_EXIT, id, 0);
}


/* L: u32 port (0: any). Listens on 127.0.0.1:PORT; answers X with the bound port, or F. */
static void listen_port(uint32_t id, const char *payload, uint32_t length) {
  struct listener *l = NULL;
  for (int i = 0; i < MAX_LISTENERS; i++) {
    if (listeners[i].used && listeners[i].id == id) goto refuse;
    if (!l && !listeners[i].used) l = &listeners[i];
  }
  if (length != 4 || !l) goto refuse;
  uint32_t port = get_u32((const unsigned char *)payload);
  if (port > 65535) goto refuse;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) goto failed;
  /* Another cordon process attached to this sandbox listens on the same port beside this one
   * (where the kernel honours SO_REUSEPORT; gVisor's host network does not: then "in use"). */
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 64) < 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &size) < 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    goto failed;
  }
  l->used = 1;
  l->serial = new_serial();
  l->id = id;
  l->fd = fd;
  send_status(RES_EXIT, id, ntohs(addr.sin_port));
  return;
failed: {
  /* "in use": cordon tells a port another listener holds from a real failure (protocol.ts). */
  const char *why = errno == EADDRINUSE ? "in use" : strerror(errno);
  send_frame(RES_FAILED, id, why, strlen(why));
  return;
}
refuse:
  send_frame(RES_FAILED, id, "bad listen request", 18);
}

/* Q: stops listening; channels it opened go on. */
static void unlisten(uint32_t id) {
  for (int i = 0; i < MAX_LISTENERS; i++)
    if (listeners[i].used && listeners[i].id == id) {
      close(listeners[i].fd);
      memset(&listeners[i], 0, sizeof listeners[i]);
    }
}

static struct channel *find_channel(uint32_t id) {
  if (!(id & CHANNEL_BIT)) return NULL;
  for (int i = 0; i < MAX_CHANNELS; i++)
    if (channels[i].used && channels[i].id == id) return &channels[i];
  return NULL;
}

static void drop_channel(struct channel *ch) {
  close(ch->fd);
  free(ch->buf);
  memset(ch, 0, sizeof *ch);
}

/*
 * Y from cordon: its side was reset or dropped, and so is the connection — a reset (RST), not a
 * close, so the process here never takes a cut-off stream for a finished one.
 */
static void abort_channel(struct channel *ch) {
  struct linger hard = {.l_onoff = 1, .l_linger = 0};
  setsockopt(ch->fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  drop_channel(ch);
}

/* Both sides ended and everything cordon sent is written: nothing more can move. */
static void finish_channel_if_done(struct channel *ch) {
  if (ch->read_done && ch->write_done && ch->off == ch->len) drop_channel(ch);
}

/* The connection failed (reset, or writing into it failed): cordon drops its side too. */
static void reset_channel(struct channel *ch) {
  send_frame(RES_CHANNEL_RESET, ch->id, NULL, 0);
  drop_channel(ch);
}

static struct channel *free_channel(void) {
  for (int i = 0; i < MAX_CHANNELS; i++)
    if (!channels[i].used) return &channels[i];
  return NULL;
}

/* A new channel on `fd`, announced to cordon with `owner` (a listener's id or a connect's). */
static void open_channel(struct channel *ch, uint32_t owner) {
  ch->connecting = 0;
  ch->id = CHANNEL_BIT | (next_channel++ & ~CHANNEL_BIT);
  if (next_channel > ~CHANNEL_BIT) next_channel = 1;
  unsigned char p[4];
  put_u32(p, owner);
  send_frame(RES_CHANNEL_OPEN, ch->id, p, 4);
}

/* A connect that did not happen: cordon hears why under its request's id; nothing was announced. */
static void connect_failed(struct channel *ch, int error) {
  const char *why = strerror(error);
  send_frame(RES_FAILED, ch->call, why, strlen(why));
  close(ch->fd);
  memset(ch, 0, sizeof *ch);
}

/* N: u32 port. Connects to 127.0.0.1:PORT; answered by N (the channel) or F (a reason). */
static void connect_port(uint32_t id, const char *payload, uint32_t length) {
  uint32_t port = length == 4 ? get_u32((const unsigned char *)payload) : 0;
  struct channel *ch = free_channel();
  if (port == 0 || port > 65535 || !ch) {
    const char *why = ch ? "bad connect request" : "too many connections";
    send_frame(RES_FAILED, id, why, strlen(why));
    return;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    const char *why = strerror(errno);
    send_frame(RES_FAILED, id, why, strlen(why));
    return;
  }
  memset(ch, 0, sizeof *ch);
  ch->used = 1;
  ch->serial = new_serial();
  ch->fd = fd;
  ch->call = id;
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  /* Non-blocking: a server whose backlog is full must not stall every other call. */
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) open_channel(ch, id);
  else if (errno == EINPROGRESS) ch->connecting = 1;
  else connect_failed(ch, errno);
}

/* The connect finished: a channel, or the reason it failed. */
static void finish_connect(struct channel *ch) {
  int error = 0;
  socklen_t size = sizeof error;
  if (getsockopt(ch->fd, SOL_SOCKET, SO_ERROR, &error, &size) < 0) error = errno;
  if (error) connect_failed(ch, error);
  else open_channel(ch, ch->call);
}

static void accept_connections(struct listener *l) {
  for (;;) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct channel *ch = free_channel();
    if (!ch) {
      /* Out of channels: the client sees a closed connection and may retry. */
      close(fd);
      continue;
    }
    memset(ch, 0, sizeof *ch);
    ch->used = 1;
    ch->serial = new_serial();
    ch->fd = fd;
    open_channel(ch, l->id);
  }
}

static void read_channel(struct channel *ch) {
  static char buffer[CHUNK];
  ssize_t n = read(ch->fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) {
    reset_channel(ch);
    return;
  }
  if (n == 0) {
    ch->read_done = 1;
    send_frame(RES_CHANNEL_END, ch->id, NULL, 0);
    finish_channel_if_done(ch);
    return;
  }
  send_frame(RES_CHANNEL_DATA, ch->id, buffer, (size_t)n);
  ch->unacked += (size_t)n;
}

static void write_channel(struct channel *ch) {
  size_t written = 0;
  while (ch->off < ch->len) {
    ssize_t n = write(ch->fd, ch->buf + ch->off, ch->len - ch->off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {
      reset_channel(ch);
      return;
    }
    ch->off += (size_t)n;
    written += (size_t)n;
  }
  if (written > 0) send_status(RES_CHANNEL_ACK, ch->id, (int32_t)written);
  if (ch->off == ch->len) {
    free(ch->buf);
    ch->buf = NULL;
    ch->len = ch->off = 0;
    if (ch->write_done) shutdown(ch->fd, SHUT_WR);
  }
  finish_channel_if_done(ch);
}

/* B: bytes for the connection. More than cordon's window unwritten is a broken peer: reset. */
static void channel_data(uint32_t id, const char *payload, uint32_t length) {
  struct channel *ch = find_channel(id);
  if (!ch || ch->write_done || length == 0) return;
  if (ch->len - ch->off + length > 2 * CHANNEL_WINDOW) {
    reset_channel(ch);
    return;
  }
  char *grown = realloc(ch->buf, ch->len + length);
  if (!grown) die("realloc");
  memcpy(grown + ch->len, payload, length);
  ch->buf = grown;
  ch->len += length;
  write_channel(ch);
}

/* Z: cordon's side ended; the connection is shut down for writing once buf is written. */
static void channel_end(uint32_t id) {
  struct channel *ch = find_channel(id);
  if (!ch || ch->write_done) return;
  ch->write_done = 1;
  if (ch->off == ch->len) shutdown(ch->fd, SHUT_WR);
  finish_channel_if_done(ch);
}

/*
 * G: what a checkpoint needs to know to record the copy without pausing the sandbox
 * (docker-workspace-checkpoints.ts): "OTHERS LAST BUSY", where OTHERS counts the processes besides
 * init and this one (the container's keep-alive is one of them), LAST is the pid namespace's last
 * pid allocated (/proc/loadavg's last field; 0 where the kernel does not say, as under gVisor),
 * and BUSY counts this executor's children, listeners' channels and waiting runs. LAST is read
 * before the walk, so a process made during the walk moves it: cordon asks again after the
 * record, and an unchanged LAST means no process was made in between. Reads only.
 */
static void quiet(uint32_t id) {
  long long last = 0;
  char text[256];
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n > 0) {
      text[n] = 0;
      char *field = strrchr(text, ' ');
      if (field) last = strtoll(field + 1, NULL, 10);
    }
  }
  long others = 0;
  pid_t self = getpid();
  DIR *proc = opendir("/proc");
  if (!proc) {
    send_frame(RES_UNHANDLED, id, NULL, 0);
    return;
  }
  struct dirent *entry;
  while ((entry = readdir(proc))) {
    char *rest;
    long value = strtol(entry->d_name, &rest, 10);
    if (*rest || value <= 0) continue;
    /* Zombies count: a thread group whose leader exited can still run (and write). */
    if (value != 1 && (pid_t)value != self) others++;
  }
  closedir(proc);
  int busy = 0;
  for (int i = 0; i < MAX_CHILDREN; i++) busy += children[i].used;
  for (int i = 0; i < MAX_CHANNELS; i++) busy += channels[i].used;
  int length = snprintf(text, sizeof text, "%ld %lld %d", others, last, busy);
  send_frame(RES_STDOUT, id, text, (size_t)length);
  send_status(RES_EXIT, id, 0);
}

static void handle_frame(char type, uint32_t id, char *payload, uint32_t length) {
  struct child *c;
  struct channel *ch;
  switch (type) {
    case REQ_SPAWN:
      spawn(id, payload, length);
      break;
    case REQ_STDIN:
      queue_stdin(id, payload, length);
      break;
    case REQ_ACK:
      if ((c = find_child(id)) && length == 4) {
        uint32_t n = get_u32((unsigned char *)payload);
        c->unacked = n > c->unacked ? 0 : c->unacked - n;
      } else if ((ch = find_channel(id)) && length == 4) {
        uint32_t n = get_u32((unsigned char *)payload);
        ch->unacked = n > ch->unacked ? 0 : ch->unacked - n;
      }
      break;
    case REQ_DETACH:
      /* cordon stopped listening: close its side, as a cut exec connection would; the process
       * keeps running and is still reaped. */
      if ((c = find_child(id)) && c->waiting) {
        release(c);
      } else if (c) {
        c->detached = 1;
        close_fd(&c->out);
        close_fd(&c->err);
        close_fd(&c->in);
        finish_if_done(c);
      }
      break;
    case REQ_READ:
      fast_read(id, payload, length);
      break;
    case REQ_WRITE:
      fast_write(id, payload, length);
      break;
    case REQ_STAT:
      fast_stat(id, payload, length);
      break;
    case REQ_PING:
      send_frame(RES_PONG, id, NULL, 0);
      break;
    case REQ_RUN:
      run_command(id, payload, length);
      break;
    case REQ_KILL:
      kill_run(id, payload, length);
      break;
    case REQ_LISTEN:
      listen_port(id, payload, length);
      break;
    case REQ_UNLISTEN:
      unlisten(id);
      break;
    case REQ_CHANNEL_DATA:
      channel_data(id, payload, length);
      break;
    case REQ_CHANNEL_END:
      channel_end(id);
      break;
    case REQ_CHANNEL_RESET:
      if ((ch = find_channel(id))) abort_channel(ch);
      break;
    case REQ_CONNECT:
      connect_port(id, payload, length);
      break;
    case REQ_QUIET:
      quiet(id);
      break;
    default:
      fprintf(stderr, "cordon-executor: unknown frame type %d\n", type);
      _exit(65);
  }
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      if (!c->used || c->pid != pid) continue;
      c->pid = 0;
      c->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      /* A command never outlives its call: what it left behind dies before its exit is told. */
      if (c->run_id) {
        sweep(c);
        if (!c->login) mark_oom(c);
      }
      finish_if_done(c);
    }
  }
}

static void relay_output(struct child *c, int *fd, char type) {
  static char buffer[CHUNK];
  ssize_t n = read(*fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_fd(fd);
    finish_if_done(c);
    return;
  }
  send_frame(type, c->id, buffer, (size_t)n);
  c->unacked += (size_t)n;
}

int main(void) {
  extern char **environ;
  base_env = environ;
  /* Not dumpable: /proc/<pid>/fd, mem and environ become root's, and ptrace is refused, to
   * every process of the same uid (the container holds no CAP_SYS_PTRACE). */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) die("prctl");
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) die("signalfd");
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  fcntl(2, F_SETFD, FD_CLOEXEC);

  /* The id of the greeting is this process's pid: cordon kills it by that if it stops answering. */
  send_frame(RES_HELLO, (uint32_t)getpid(), PROTOCOL, strlen(PROTOCOL));

  unsigned char *in = NULL;
  size_t in_len = 0, in_cap = 0;
#define MAX_POLL (2 + 3 * MAX_CHILDREN + MAX_LISTENERS + MAX_CHANNELS)
  struct pollfd fds[MAX_POLL];
  struct child *owner[MAX_POLL];
  int kind[MAX_POLL];
  int slot[MAX_POLL];
  uint32_t serial[MAX_POLL];
  for (;;) {
    int n = 0;
    fds[n] = (struct pollfd){.fd = 0, .events = POLLIN};
    owner[n] = NULL;
    kind[n++] = 0;
    fds[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
    owner[n] = NULL;
    kind[n++] = 1;
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *c = &children[i];
      if (!c->used) continue;
      int open_for_output = c->unacked < WINDOW;
      if (c->out >= 0 && open_for_output) {
        fds[n] = (struct pollfd){.fd = c->out, .events = POLLIN};
        owner[n] = c;
        serial[n] = c->serial;
        kind[n++] = 2;
      }
      if (c->err >= 0 && open_for_output) {
        fds[n] = (struct pollfd){.fd = c->err, .events = POLLIN};
        owner[n] = c;
        serial[n] = c->serial;
        kind[n++] = 3;
      }
      if (c->in >= 0 && c->in_off < c->in_len) {
        fds[n] = (struct pollfd){.fd = c->in, .events = POLLOUT};
        owner[n] = c;
        serial[n] = c->serial;
        kind[n++] = 4;
      }
    }
    for (int i = 0; i < MAX_LISTENERS; i++) {
      if (!listeners[i].used) continue;
      fds[n] = (struct pollfd){.fd = listeners[i].fd, .events = POLLIN};
      owner[n] = NULL;
      slot[n] = i;
      serial[n] = listeners[i].serial;
      kind[n++] = 5;
    }
    for (int i = 0; i < MAX_CHANNELS; i++) {
      struct channel *ch = &channels[i];
      if (!ch->used) continue;
      short events = 0;
      if (ch->connecting) events = POLLOUT;
      else if (!ch->read_done && ch->unacked < CHANNEL_WINDOW) events |= POLLIN;
      if (ch->off < ch->len) events |= POLLOUT;
      if (!events) continue;
      fds[n] = (struct pollfd){.fd = ch->fd, .events = events};
      owner[n] = NULL;
      slot[n] = i;
      serial[n] = ch->serial;
      kind[n++] = 6;
    }
    if (poll(fds, (nfds_t)n, login_wait_ms()) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    login_expire();
    for (int i = 0; i < n; i++) {
      if (!fds[i].revents) continue;
      struct child *c = owner[i];
      /* An earlier event this round may have finished the child (its slot freed, or taken by a
       * new child), or closed this pipe of it. */
      if (c && (!c->used || c->serial != serial[i] || (kind[i] == 2 && c->out != fds[i].fd) ||
                (kind[i] == 3 && c->err != fds[i].fd) || (kind[i] == 4 && c->in != fds[i].fd)))
        continue;
      if (kind[i] == 0) {
        if (in_cap - in_len < CHUNK) {
          in_cap = in_cap * 2 + CHUNK;
          in = realloc(in, in_cap);
          if (!in) die("realloc");
        }
        ssize_t got = read(0, in + in_len, in_cap - in_len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        /* cordon went away: nothing is left to answer to. Running commands keep running. */
        if (got <= 0) _exit(0);
        in_len += (size_t)got;
        size_t used = 0;
        while (in_len - used >= HEADER) {
          uint32_t length = get_u32(in + used + 5);
          if (length > MAX_FRAME) {
            fprintf(stderr, "cordon-executor: frame of %u bytes refused\n", length);
            _exit(65);
          }
          if (in_len - used < HEADER + (size_t)length) {
            /* Grow once for the whole frame instead of doubling through a large write. */
            size_t need = HEADER + (size_t)length;
            if (used > 0) {
              memmove(in, in + used, in_len - used);
              in_len -= used;
              used = 0;
            }
            if (in_cap < need) {
              in_cap = need;
              in = realloc(in, in_cap);
              if (!in) die("realloc");
            }
            break;
          }
          handle_frame((char)in[used], get_u32(in + used + 1), (char *)in + used + HEADER, length);
          used += HEADER + length;
        }
        if (used > 0) {
          memmove(in, in + used, in_len - used);
          in_len -= used;
        }
      } else if (kind[i] == 1) {
        struct signalfd_siginfo info;
        while (read(sfd, &info, sizeof info) > 0) {
        }
        reap();
      } else if (kind[i] == 2 && c->login) {
        login_output(c);
      } else if (kind[i] == 2) {
        relay_output(c, &c->out, RES_STDOUT);
      } else if (kind[i] == 3) {
        relay_output(c, &c->err, RES_STDERR);
      } else if (kind[i] == 4) {
        feed_stdin(c);
      } else if (kind[i] == 5) {
        /* Closed by a frame handled earlier this round (Q), its slot maybe taken again (L). */
        struct listener *l = &listeners[slot[i]];
        if (l->used && l->serial == serial[i]) accept_connections(l);
      } else {
        struct channel *ch = &channels[slot[i]];
        /* Dropped (its slot maybe taken by a new channel) by something handled earlier this
         * round: a connect still under way must not be taken for finished. */
        if (!ch->used || ch->serial != serial[i]) continue;
        if (ch->connecting) {
          finish_connect(ch);
          continue;
        }
        if ((fds[i].revents & (POLLOUT | POLLERR | POLLHUP)) && ch->off < ch->len) write_channel(ch);
        if (ch->used && ch->serial == serial[i] &&
            (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !ch->read_done)
          read_channel(ch);
      }
    }
  }
}
