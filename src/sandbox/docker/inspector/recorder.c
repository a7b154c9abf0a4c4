/*
 * cordon-recorder: records a private copy's state as a git tree for a turn's checkpoint without
 * starting a process while the turn waits (docs/checkpoints.md; issue 30's budget of three execs).
 *
 * It runs inside a recording inspector (workspace-inspector.ts), started ahead by
 * checkpoint-copy.sh `ahead` with the git environment that script sets, and gives the same tree
 * as the script's `git add -A` from the baseline's entries followed by `git write-tree`, or none:
 * whatever it is not sure to do exactly as git does, it leaves to the script (exit 3, below).
 *
 * Ahead of the request, reading nothing of the copy: it lists the baseline's paths (`ls-tree`),
 * starts two git processes that wait on their stdin (`fast-import`, `check-ignore --stdin`) and
 * loads its cache. On the request it walks the copy once (a readdir and an lstat per entry),
 * takes each file's blob id from the cache when its stat data is the cached one, has git decide
 * whether each path the baseline does not track is ignored (the copy's own .gitignore files and
 * the baseline's info/exclude, as `add -A` reads them), and gives fast-import, in one stream, the
 * bytes of the files that changed and the directories whose entries differ from the cached ones:
 * fast-import hashes them as git does (any object format) and writes them as one pack, not a
 * file per object, which was most of a record's time on these machines.
 *
 * The cache (CACHE, in the checkpoint store, which no sandbox mounts): each file's stat data and
 * blob id, each directory's entries and tree id. Rewritten only by a record the host says found
 * the sandbox idle (INDEX `keep`), and a file's entry only when its ctime and mtime are a second
 * older than the record: the kept index's rule (checkpoint-copy.sh): any later change to the file
 * gives it a later ctime, which no process can set back, and no process that could write it
 * through a mapping without one was alive. A cache written in the future (the clock went back)
 * is not used, nor one whose checksum is not its entries' (a write cut short). A directory's
 * entry needs no such rule: it is its entries' ids.
 *
 * usage: cordon-recorder CACHE GIT... (GIT: the git command and its options, e.g. `git -c ...`)
 * stdin: MODE NUL SINCE NUL INDEX NUL, then the pathspecs (as checkpoint-copy.sh `ahead` reads)
 * stdout: the tree id and a NUL, as checkpoint-copy.sh prints it for `record SINCE none`
 * exit: 0 recorded (or no request came: end-of-file); 3 not recorded, nothing printed: the
 *   request it read, if any, is in /scratch/request for the script to read instead of stdin.
 *   Anything else is a failure of this program, which the script treats as 3.
 *
 * What it leaves to git: another request than a turn's (`record none`, INDEX `keep` or `reuse`),
 * pathspecs other than `.`, a baseline with a submodule, a `.git` below the top (a nested
 * repository: git adds a gitlink), names git refuses or treats specially, a tracked path that is
 * no longer a file, link or directory, anything it cannot read, and any error of its own.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void announce_ready(void);
static void drop_cache_if_imported(void);
#define FALL_BACK 3
#define REQUEST_FILE "/scratch/request"
#define READY "ready\n"
#define READY_FILE "/scratch/ready"
#define MAX_DEPTH 200
#define MAX_REQUEST (1024 * 1024)
#define MAX_CACHE (512u * 1024 * 1024)
#define CACHE_MAGIC "cordon-recorder-cache 2"
#define SEAL_DIGITS 16

extern char **environ;

/* Not recorded: the script takes over. The request goes where it can read it. */
static void fall_back(const char *format, ...) {
  /* Once: a second thread that falls back too waits here while the first one exits. */
  static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&once);
  va_list args;
  va_start(args, format);
  fputs("cordon-recorder: ", stderr);
  vfprintf(stderr, format, args);
  fputs("; recording with git\n", stderr);
  va_end(args);
  announce_ready();
  drop_cache_if_imported();
  exit(FALL_BACK);
}

/* ---- growing buffers ---- */

struct buf {
  char *data;
  size_t length, capacity;
};

static void buf_add(struct buf *b, const void *data, size_t length) {
  if (b->length + length + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 256;
    while (b->length + length + 1 > capacity) capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (!grown) fall_back("out of memory");
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->length, data, length);
  b->length += length;
  b->data[b->length] = '\0';
}

static void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s) + 1); }

static void buf_printf(struct buf *b, const char *format, ...) {
  char small[128];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(small, sizeof small, format, args);
  va_end(args);
  if (n < 0 || (size_t)n >= sizeof small) fall_back("a field too long");
  buf_add(b, small, (size_t)n);
}

static char *copy_of(const char *s, size_t length) {
  char *copy = malloc(length + 1);
  if (!copy) fall_back("out of memory");
  memcpy(copy, s, length);
  copy[length] = '\0';
  return copy;
}

static char *joined(const char *dir, const char *name) {
  struct buf b = {0};
  if (*dir) {
    buf_add(&b, dir, strlen(dir));
    buf_add(&b, "/", 1);
  }
  buf_add(&b, name, strlen(name));
  return b.data;
}

/* ---- git processes waiting on stdin ---- */

struct helper {
  const char *name;
  pid_t pid;
  int in, out;
};

static char **git_command;
static int git_words;

static void start_git(struct helper *h, const char *name, const char *const *args) {
  int to[2], from[2];
  if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC)) fall_back("cannot make a pipe");
  char *argv[64];
  int n = 0;
  for (int i = 0; i < git_words && n < 60; i++) argv[n++] = git_command[i];
  for (int i = 0; args[i] && n < 63; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from[1], 1);
  if (posix_spawnp(&h->pid, argv[0], &actions, NULL, argv, environ)) {
    fall_back("cannot start git %s", name);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(to[0]);
  close(from[1]);
  h->name = name;
  h->in = to[1];
  h->out = from[0];
  fcntl(h->in, F_SETFL, O_NONBLOCK);
  fcntl(h->out, F_SETFL, O_NONBLOCK);
}

/*
 * Sends `request` to a helper and reads its answers until `answers` of them have come, an answer
 * ending with its `per_answer`-th `terminator`. Writing and reading at once: neither side can fill
 * a pipe the other is not emptying.
 */
static void exchange(struct helper *h, const struct buf *request, size_t answers, char terminator,
                     int per_answer, struct buf *reply) {
  size_t written = 0, seen = 0, wanted = answers * (size_t)per_answer;
  reply->length = 0;
  while (seen < wanted || written < request->length) {
    struct pollfd fds[2] = {{h->out, POLLIN, 0}, {h->in, POLLOUT, 0}};
    int watching = written < request->length ? 2 : 1;
    if (poll(fds, watching, -1) < 0) {
      if (errno == EINTR) continue;
      fall_back("poll: %s", strerror(errno));
    }
    if (watching == 2 && fds[1].revents) {
      ssize_t n = write(h->in, request->data + written, request->length - written);
      if (n < 0 && errno != EAGAIN) fall_back("git %s stopped reading", h->name);
      if (n > 0) written += (size_t)n;
    }
    if (fds[0].revents) {
      char chunk[65536];
      ssize_t n = read(h->out, chunk, sizeof chunk);
      if (n == 0) fall_back("git %s ended", h->name);
      if (n < 0 && errno != EAGAIN) fall_back("git %s: %s", h->name, strerror(errno));
      for (ssize_t i = 0; i < n; i++) seen += chunk[i] == terminator;
      if (n > 0) buf_add(reply, chunk, (size_t)n);
    }
  }
  if (seen != wanted) fall_back("git %s answered more than it was asked", h->name);
}

static struct helper importer, ignore_checker;

/*
 * The git processes end with this one, not after it: the executor that ran the record reports its
 * end only once no process of it is left (it sweeps the run's tree), and one still exiting as it
 * looks makes it look again, a millisecond later, over and over. A kill loses nothing: the
 * ignore check has answered all it was asked, and fast-import was waited for once it was given
 * anything (import_changes); killed before, it wrote nothing.
 */
static void stop_helpers(void) {
  struct helper *all[] = {&importer, &ignore_checker};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    if (all[i]->pid > 0) kill(all[i]->pid, SIGKILL);
  }
}

/* At exit, whichever way this process ends. */
static void end_helpers(void) {
  stop_helpers();
  struct helper *all[] = {&importer, &ignore_checker};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
    if (all[i]->pid > 0) waitpid(all[i]->pid, NULL, 0);
  }
}

/* A hex object id of the baseline's length, ended by `end`: copied into `oid`. */
static size_t oid_length;

static const char *take_oid(const char *at, const char *limit, char end, char *oid) {
  size_t n = 0;
  while (at + n < limit && at[n] != end) n++;
  if (at + n >= limit || n != oid_length || strspn(at, "0123456789abcdef") < n) {
    fall_back("git answered something that is not an object id");
  }
  memcpy(oid, at, n);
  oid[n] = '\0';
  return at + n + 1;
}

/* ---- the baseline's paths ---- */

static char **tracked;
static size_t tracked_count;

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Everything up to end-of-file, or no more than `limit` bytes in all: past it, git decides. */
static void read_all(int fd, struct buf *into, size_t limit) {
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n == 0) return;
    if (n < 0) {
      if (errno == EINTR) continue;
      fall_back("cannot read: %s", strerror(errno));
    }
    if (into->length + (size_t)n > limit) fall_back("more than %zu MiB to read", limit >> 20);
    buf_add(into, chunk, (size_t)n);
  }
}

/* `ls-tree -r -z` of the baseline: MODE SP TYPE SP OID TAB PATH NUL. */
static void list_baseline(void) {
  struct helper lister;
  const char *args[] = {"ls-tree", "-r", "-z", "--full-tree", "refs/cordon/baseline", NULL};
  start_git(&lister, "ls-tree", args);
  close(lister.in);
  fcntl(lister.out, F_SETFL, 0);
  struct buf listing = {0};
  read_all(lister.out, &listing, SIZE_MAX);
  close(lister.out);
  int status;
  if (waitpid(lister.pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fall_back("git ls-tree of the baseline failed");
  }
  size_t capacity = 0;
  for (size_t at = 0; at < listing.length;) {
    const char *entry = listing.data + at;
    size_t length = strlen(entry);
    const char *tab = memchr(entry, '\t', length);
    const char *space = memchr(entry, ' ', length);
    if (!tab || !space) fall_back("ls-tree printed something unexpected");
    if (strncmp(entry, "160000 ", 7) == 0) fall_back("the baseline has a submodule");
    const char *oid = memchr(space + 1, ' ', (size_t)(tab - space - 1));
    if (!oid) fall_back("ls-tree printed something unexpected");
    size_t this_length = (size_t)(tab - oid - 1);
    if (oid_length && this_length != oid_length) fall_back("object ids of two lengths");
    oid_length = this_length;
    if (tracked_count == capacity) {
      capacity = capacity ? capacity * 2 : 1024;
      tracked = realloc(tracked, capacity * sizeof *tracked);
      if (!tracked) fall_back("out of memory");
    }
    tracked[tracked_count++] = copy_of(tab + 1, length - (size_t)(tab + 1 - entry));
    at += length + 1;
  }
  if (tracked_count == 0) fall_back("the baseline is empty");
  if (oid_length != 40 && oid_length != 64) fall_back("object ids of an unknown length");
  qsort(tracked, tracked_count, sizeof *tracked, compare_strings);
}

/* The first tracked path not before `path`. */
static size_t tracked_from(const char *path) {
  size_t low = 0, high = tracked_count;
  while (low < high) {
    size_t middle = (low + high) / 2;
    if (strcmp(tracked[middle], path) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

static int is_tracked(const char *path) {
  size_t at = tracked_from(path);
  return at < tracked_count && strcmp(tracked[at], path) == 0;
}

/* Whether the baseline tracks a path inside the directory `path`: git then reads it whatever
 * ignores it. */
static int tracks_inside(const char *path) {
  char *prefix = joined(path, "");
  size_t length = strlen(prefix);
  size_t at = tracked_from(prefix);
  int inside = at < tracked_count && strncmp(tracked[at], prefix, length) == 0;
  free(prefix);
  return inside;
}

/* ---- the cache ---- */

struct cached {
  char kind; /* 'f' a file, 'd' a directory */
  char *path;
  unsigned long long ino, size;
  long long mtime_sec, mtime_nsec, ctime_sec, ctime_nsec;
  unsigned mode;
  char oid[65];
  char *entries; /* a directory's: its tree's entries as sent to mktree */
  size_t entries_length;
};

struct table {
  struct cached *items;
  size_t count, capacity;
  size_t *slots; /* index + 1; 0 empty */
  size_t slot_count;
};

static uint64_t path_hash(char kind, const char *path) {
  uint64_t h = 14695981039346656037ull ^ (unsigned char)kind;
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) h = (h ^ *p) * 1099511628211ull;
  return h;
}

static void table_rehash(struct table *t) {
  free(t->slots);
  t->slot_count = t->slot_count ? t->slot_count * 2 : 1024;
  t->slots = calloc(t->slot_count, sizeof *t->slots);
  if (!t->slots) fall_back("out of memory");
  for (size_t i = 0; i < t->count; i++) {
    size_t slot = path_hash(t->items[i].kind, t->items[i].path) & (t->slot_count - 1);
    while (t->slots[slot]) slot = (slot + 1) & (t->slot_count - 1);
    t->slots[slot] = i + 1;
  }
}

static void table_add(struct table *t, const struct cached *item) {
  if (t->count == t->capacity) {
    t->capacity = t->capacity ? t->capacity * 2 : 1024;
    t->items = realloc(t->items, t->capacity * sizeof *t->items);
    if (!t->items) fall_back("out of memory");
  }
  t->items[t->count++] = *item;
  if (t->count * 2 > t->slot_count) table_rehash(t);
  else {
    size_t slot = path_hash(item->kind, item->path) & (t->slot_count - 1);
    while (t->slots[slot]) slot = (slot + 1) & (t->slot_count - 1);
    t->slots[slot] = t->count;
  }
}

static const struct cached *table_find(const struct table *t, char kind, const char *path) {
  if (!t->slot_count) return NULL;
  size_t slot = path_hash(kind, path) & (t->slot_count - 1);
  for (; t->slots[slot]; slot = (slot + 1) & (t->slot_count - 1)) {
    const struct cached *item = &t->items[t->slots[slot] - 1];
    if (item->kind == kind && strcmp(item->path, path) == 0) return item;
  }
  return NULL;
}

static struct table old_cache, new_cache;
static const char *cache_path;
/* The cache as read: a record that would write it again unchanged writes nothing. */
static struct buf cache_read;

/* A NUL-ended field of the cache file; NULL past its end. */
static const char *next_field(const char **at, const char *limit) {
  const char *field = *at;
  const char *end = memchr(field, '\0', (size_t)(limit - field));
  if (!end) return NULL;
  *at = end + 1;
  return field;
}

static int number_field(const char **at, const char *limit, unsigned long long *value) {
  const char *field = next_field(at, limit);
  if (!field || !*field || strspn(field, "0123456789") != strlen(field) || strlen(field) > 19) return 0;
  *value = strtoull(field, NULL, 10);
  return 1;
}

/* FNV-1a, 64 bits: what seals the cache against a write cut short (save_cache). */
static uint64_t seal_of(const char *at, const char *limit) {
  uint64_t h = 14695981039346656037ull;
  for (; at < limit; at++) h = (h ^ (unsigned char)*at) * 1099511628211ull;
  return h;
}

/*
 * Parses the cache written by `save_cache`: its magic, its seal, then its entries; anything
 * unexpected (a seal that is not its entries') leaves it empty.
 */
static int parse_cache(const char *at, const char *limit, struct table *into) {
  const char *magic = next_field(&at, limit);
  if (!magic || strcmp(magic, CACHE_MAGIC) != 0) return 0;
  const char *seal = next_field(&at, limit);
  char expected[SEAL_DIGITS + 1];
  snprintf(expected, sizeof expected, "%016llx", (unsigned long long)seal_of(at, limit));
  if (!seal || strcmp(seal, expected) != 0) return 0;
  while (at < limit) {
    struct cached item = {0};
    unsigned long long n[7];
    const char *kind = next_field(&at, limit);
    const char *path = kind ? next_field(&at, limit) : NULL;
    /* Only the top directory has an empty path. */
    if (!path || strlen(kind) != 1 || (!*path && kind[0] != 'd')) return 0;
    item.kind = kind[0];
    item.path = (char *)path;
    if (item.kind == 'f') {
      for (int i = 0; i < 7; i++) {
        if (!number_field(&at, limit, &n[i])) return 0;
      }
      item.ino = n[0];
      item.size = n[1];
      item.mtime_sec = (long long)n[2];
      item.mtime_nsec = (long long)n[3];
      item.ctime_sec = (long long)n[4];
      item.ctime_nsec = (long long)n[5];
      item.mode = (unsigned)n[6];
    } else if (item.kind == 'd') {
      if (!number_field(&at, limit, &n[0]) || n[0] > (unsigned long long)(limit - at)) return 0;
      item.entries = (char *)at;
      item.entries_length = (size_t)n[0];
      at += n[0];
    } else {
      return 0;
    }
    const char *oid = next_field(&at, limit);
    if (!oid || strlen(oid) != oid_length || strspn(oid, "0123456789abcdef") != oid_length) return 0;
    memcpy(item.oid, oid, oid_length + 1);
    table_add(into, &item);
  }
  return 1;
}

static void load_cache(void) {
  int fd = open(cache_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= MAX_CACHE &&
      st.st_mtime <= time(NULL)) {
    read_all(fd, &cache_read, MAX_CACHE);
  }
  close(fd);
  if (cache_read.length &&
      !parse_cache(cache_read.data, cache_read.data + cache_read.length, &old_cache)) {
    /* Dropped whole: a record from nothing is slower, never wrong. */
    free(old_cache.items);
    free(old_cache.slots);
    memset(&old_cache, 0, sizeof old_cache);
    cache_read.length = 0;
  }
}

/* A number and its NUL, as the cache holds it (printf's own formatting is most of a save). */
static void add_number(struct buf *b, unsigned long long value) {
  char digits[24];
  size_t at = sizeof digits;
  digits[--at] = '\0';
  do {
    digits[--at] = (char)('0' + value % 10);
    value /= 10;
  } while (value);
  buf_add(b, digits + at, sizeof digits - at);
}

/*
 * Written over the old cache in place, then cut to length: a new file renamed into place cost
 * more than half a millisecond on these machines' disk, most of what a save cost. A write cut
 * short (the recorder killed, the machine down) leaves entries that do not match the seal, and
 * the whole cache is dropped on reading.
 */
static void save_cache(void) {
  struct buf out = {0};
  buf_str(&out, CACHE_MAGIC);
  size_t seal_at = out.length;
  buf_add(&out, "0000000000000000", SEAL_DIGITS + 1);
  for (size_t i = 0; i < new_cache.count; i++) {
    const struct cached *item = &new_cache.items[i];
    buf_add(&out, item->kind == 'f' ? "f" : "d", 2);
    buf_str(&out, item->path);
    if (item->kind == 'f') {
      const unsigned long long fields[] = {
          item->ino,
          item->size,
          (unsigned long long)item->mtime_sec,
          (unsigned long long)item->mtime_nsec,
          (unsigned long long)item->ctime_sec,
          (unsigned long long)item->ctime_nsec,
          item->mode,
      };
      for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) add_number(&out, fields[f]);
    } else {
      add_number(&out, item->entries_length);
      buf_add(&out, item->entries, item->entries_length);
    }
    buf_str(&out, item->oid);
  }
  char seal[SEAL_DIGITS + 1];
  snprintf(seal, sizeof seal, "%016llx",
           (unsigned long long)seal_of(out.data + seal_at + SEAL_DIGITS + 1, out.data + out.length));
  memcpy(out.data + seal_at, seal, SEAL_DIGITS);
  if (out.length == cache_read.length && memcmp(out.data, cache_read.data, out.length) == 0) return;
  int fd = open(cache_path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t written = 0;
  while (written < out.length) {
    ssize_t n = pwrite(fd, out.data + written, out.length - written, (off_t)written);
    if (n <= 0) break;
    written += (size_t)n;
  }
  int failed = written != out.length || ftruncate(fd, (off_t)out.length) != 0;
  if (close(fd) != 0 || failed) unlink(cache_path);
}

/* ---- names ---- */

/* Lowercase ASCII prefix test. */
static int starts_folded(const char *name, const char *prefix) {
  for (; *prefix; name++, prefix++) {
    char c = *name >= 'A' && *name <= 'Z' ? (char)(*name + 32) : *name;
    if (c != *prefix) return 0;
  }
  return 1;
}

/*
 * Names git refuses or reads specially (its verify_path with core.protectNTFS, the default): a
 * `.git` in any case and its NTFS spellings (`.git ` `.git.` `git~1`), and a link named like
 * `.gitmodules` or its short name. A superset, so git decides all of them.
 */
static int special_name(const char *name, int is_link) {
  if (strchr(name, '\\') || strchr(name, ':')) return 1;
  if (starts_folded(name, "git~")) return 1;
  if (starts_folded(name, ".git")) {
    char next = name[4];
    if (next == '\0' || next == ' ' || next == '.') return 1;
    if (is_link) return 1;
  }
  return is_link && strchr(name, '~') != NULL;
}

/* ---- the walk ---- */

/*
 * The copy is walked a level at a time, so whether untracked paths are ignored is asked of git
 * once per level, and everything new is given to git fast-import at once: a handful of round
 * trips whatever the number of files and directories.
 */

static long long cutoff;
static int keep_cache;
/* What is read of changed files, held until fast-import takes it; past these, git decides. */
#define MAX_BLOB (64u * 1024 * 1024)
#define MAX_CHANGED (256u * 1024 * 1024)
static size_t changed_bytes;

struct entry {
  char *name;
  char *path;
  struct stat st;
  int left_out; /* ignored, not a file git adds, or a directory with nothing recorded */
  char oid[65]; /* empty until known: from the cache, or from fast-import */
  struct buf content; /* a changed file's bytes or a changed link's target, for fast-import */
  unsigned mark;      /* its blob's mark in the fast-import stream */
  struct directory *as_directory; /* a directory's own listing */
};

struct directory {
  char *path; /* "" the top */
  int fd;
  struct entry *entries;
  size_t count;
  struct entry *in_parent; /* its entry in its parent's list; NULL for the top */
};

/* The directories of one depth. */
struct level {
  struct directory *items;
  size_t count, capacity;
};

static void level_add(struct level *level, const struct directory *item) {
  if (level->count == level->capacity) {
    level->capacity = level->capacity ? level->capacity * 2 : 16;
    level->items = realloc(level->items, level->capacity * sizeof *level->items);
    if (!level->items) fall_back("out of memory");
  }
  level->items[level->count++] = *item;
}

/* A list of entries: those git must answer for. */
struct entries {
  struct entry **items;
  size_t count, capacity;
};

static void entries_add(struct entries *list, struct entry *e) {
  if (list->count == list->capacity) {
    list->capacity = list->capacity ? list->capacity * 2 : 64;
    list->items = realloc(list->items, list->capacity * sizeof *list->items);
    if (!list->items) fall_back("out of memory");
  }
  list->items[list->count++] = e;
}

static int compare_entries(const void *a, const void *b) {
  return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Leaves out what `add -A` leaves out as ignored (git check-ignore, all at once). */
static void leave_out_ignored(const struct entries *asked) {
  if (asked->count == 0) return;
  struct buf request = {0}, reply = {0};
  for (size_t i = 0; i < asked->count; i++) buf_str(&request, asked->items[i]->path);
  /* Each answer: SOURCE NUL LINE NUL PATTERN NUL PATH NUL (empty fields: not matched). */
  exchange(&ignore_checker, &request, asked->count, '\0', 4, &reply);
  const char *at = reply.data;
  for (size_t i = 0; i < asked->count; i++) {
    const char *line = at + strlen(at) + 1;
    const char *pattern = line + strlen(line) + 1;
    const char *path = pattern + strlen(pattern) + 1;
    if (strcmp(path, asked->items[i]->path) != 0) fall_back("check-ignore answered for another path");
    if (pattern[0] != '\0' && pattern[0] != '!') asked->items[i]->left_out = 1;
    at = path + strlen(path) + 1;
  }
  free(request.data);
  free(reply.data);
}

/* A path as fast-import reads it: C-quoted, so any byte but NUL can be in it. */
static void add_quoted(struct buf *b, const char *path) {
  buf_add(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (*p == '"' || *p == '\\') {
      char escaped[2] = {'\\', (char)*p};
      buf_add(b, escaped, 2);
    } else if (*p < 0x20 || *p >= 0x7f) {
      buf_printf(b, "\\%03o", *p);
    } else {
      buf_add(b, p, 1);
    }
  }
  buf_add(b, "\"", 1);
}

/* The bytes git would hash for a changed file, or for a link its target, kept for fast-import. */
static void read_content(int dir, struct entry *e) {
  if (e->st.st_size < 0 || (unsigned long long)e->st.st_size > MAX_BLOB) {
    fall_back("a changed file larger than %u MiB", MAX_BLOB >> 20);
  }
  size_t size = (size_t)e->st.st_size;
  if (S_ISLNK(e->st.st_mode)) {
    char *target = malloc(size + 1);
    if (!target) fall_back("out of memory");
    ssize_t n = readlinkat(dir, e->name, target, size + 1);
    if (n < 0 || (size_t)n != size) fall_back("a link changed while it was read");
    buf_add(&e->content, target, size);
    free(target);
  } else {
    /* No link followed, no FIFO waited on: what was stat'ed as a file is read, or git decides. */
    int fd = openat(dir, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fall_back("cannot read a file: %s", strerror(errno));
    struct stat opened;
    if (fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_ino != e->st.st_ino) {
      fall_back("a file changed while it was read");
    }
    read_all(fd, &e->content, MAX_BLOB);
    close(fd);
  }
  changed_bytes += e->content.length;
  if (changed_bytes > MAX_CHANGED) fall_back("more than %u MiB changed", MAX_CHANGED >> 20);
}

static int same_stat(const struct cached *c, const struct stat *st) {
  return c->ino == (unsigned long long)st->st_ino && c->size == (unsigned long long)st->st_size &&
         c->mode == st->st_mode && c->mtime_sec == (long long)st->st_mtim.tv_sec &&
         c->mtime_nsec == (long long)st->st_mtim.tv_nsec &&
         c->ctime_sec == (long long)st->st_ctim.tv_sec &&
         c->ctime_nsec == (long long)st->st_ctim.tv_nsec;
}

static void remember_file(const struct entry *e) {
  if (!keep_cache || e->st.st_ctim.tv_sec >= cutoff || e->st.st_mtim.tv_sec >= cutoff) return;
  /* The cache holds times as unsigned numbers: a file dated before 1970 is hashed each time. */
  if (e->st.st_ctim.tv_sec < 0 || e->st.st_mtim.tv_sec < 0) return;
  struct cached item = {.kind = 'f', .path = e->path};
  item.ino = (unsigned long long)e->st.st_ino;
  item.size = (unsigned long long)e->st.st_size;
  item.mode = e->st.st_mode;
  item.mtime_sec = e->st.st_mtim.tv_sec;
  item.mtime_nsec = e->st.st_mtim.tv_nsec;
  item.ctime_sec = e->st.st_ctim.tv_sec;
  item.ctime_nsec = e->st.st_ctim.tv_nsec;
  memcpy(item.oid, e->oid, sizeof item.oid);
  table_add(&new_cache, &item);
}

/*
 * Reads a directory's entries, sorted by name as git sorts a tree's, each lstat'ed; those git
 * decides on (untracked: ignored or not) go to `asked`. A directory stays open for its children.
 */
static void scan(struct directory *dir, int depth, struct entries *asked) {
  if (depth > MAX_DEPTH) fall_back("directories nested deeper than %d", MAX_DEPTH);
  int listing = dup(dir->fd);
  DIR *stream = listing < 0 ? NULL : fdopendir(listing);
  if (!stream) fall_back("cannot read a directory");
  size_t capacity = 0;
  for (;;) {
    errno = 0;
    struct dirent *d = readdir(stream);
    if (!d) {
      if (errno) fall_back("cannot read a directory");
      break;
    }
    if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0) continue;
    /* git never adds the top's own .git; one further down is a nested repository. */
    if (depth == 0 && strcmp(d->d_name, ".git") == 0) continue;
    if (dir->count == capacity) {
      capacity = capacity ? capacity * 2 : 32;
      dir->entries = realloc(dir->entries, capacity * sizeof *dir->entries);
      if (!dir->entries) fall_back("out of memory");
    }
    struct entry *e = &dir->entries[dir->count++];
    memset(e, 0, sizeof *e);
    e->name = copy_of(d->d_name, strlen(d->d_name));
    e->path = joined(dir->path, e->name);
  }
  closedir(stream);
  qsort(dir->entries, dir->count, sizeof *dir->entries, compare_entries);
  for (size_t i = 0; i < dir->count; i++) {
    struct entry *e = &dir->entries[i];
    if (fstatat(dir->fd, e->name, &e->st, AT_SYMLINK_NOFOLLOW) != 0) fall_back("cannot stat an entry");
    int is_dir = S_ISDIR(e->st.st_mode);
    if (special_name(e->name, S_ISLNK(e->st.st_mode))) fall_back("a name git treats specially");
    if (!is_dir && !S_ISREG(e->st.st_mode) && !S_ISLNK(e->st.st_mode)) {
      /* git skips a FIFO, socket or device it does not track, and fails on one it does. */
      if (is_tracked(e->path)) fall_back("a tracked path is no longer a file");
      e->left_out = 1;
      continue;
    }
    if (is_dir ? !tracks_inside(e->path) : !is_tracked(e->path)) entries_add(asked, e);
  }
}

/*
 * After the ignore check: opens the directories to walk next into `next` and puts the files whose
 * stat data is not the cached one in `changed` (a changed link's target read now, while its
 * directory is open). The directory is closed.
 */
static void descend(struct directory *dir, struct level *next, struct entries *changed) {
  for (size_t i = 0; i < dir->count; i++) {
    struct entry *e = &dir->entries[i];
    if (e->left_out) continue;
    if (S_ISDIR(e->st.st_mode)) {
      struct directory child = {.path = e->path, .in_parent = e};
      child.fd = openat(dir->fd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child.fd < 0) fall_back("cannot open a directory");
      level_add(next, &child);
      continue;
    }
    const struct cached *known = table_find(&old_cache, 'f', e->path);
    if (known && same_stat(known, &e->st)) {
      memcpy(e->oid, known->oid, sizeof e->oid);
      continue;
    }
    read_content(dir->fd, e);
    entries_add(changed, e);
  }
  close(dir->fd);
  dir->fd = -1;
}

static const char *git_mode(const struct stat *st) {
  return S_ISDIR(st->st_mode)    ? "040000"
         : S_ISLNK(st->st_mode)  ? "120000"
         : st->st_mode & S_IXUSR ? "100755"
                                 : "100644";
}

/* A directory's entries as the cache holds them: MODE SP ID TAB NAME NUL per entry recorded. */
static void tree_of(const struct directory *dir, struct buf *tree) {
  tree->length = 0;
  for (size_t i = 0; i < dir->count; i++) {
    const struct entry *e = &dir->entries[i];
    if (e->left_out) continue;
    buf_printf(tree, "%s %s\t", git_mode(&e->st), e->oid);
    buf_str(tree, e->name);
  }
}

/* The top directory's tree: the record. */
static char recorded_tree[65];

/* Where a directory's tree id goes: its entry in its parent, or the record for the top. */
static char *tree_id_of(const struct directory *dir) {
  return dir->in_parent ? dir->in_parent->oid : recorded_tree;
}

static int is_recorded(const struct directory *dir) {
  return !dir->in_parent || !dir->in_parent->left_out;
}

/*
 * Bottom-up, the tree ids nobody need compute: a directory whose entries (names, modes, ids) are
 * the cached ones has the cached id. A directory with nothing recorded is left out of its parent,
 * as git leaves an empty tree out. The others keep no id: fast-import gives them theirs.
 */
static void take_known_trees(struct level *levels, size_t depth) {
  struct buf tree = {0};
  for (size_t d = depth; d-- > 0;) {
    for (size_t i = 0; i < levels[d].count; i++) {
      const struct directory *dir = &levels[d].items[i];
      int recorded = 0, all_known = 1;
      for (size_t k = 0; k < dir->count; k++) {
        if (dir->entries[k].left_out) continue;
        recorded = 1;
        if (!dir->entries[k].oid[0]) all_known = 0;
      }
      if (!recorded) {
        if (!dir->in_parent) fall_back("nothing to record");
        dir->in_parent->left_out = 1;
        continue;
      }
      if (!all_known) continue;
      tree_of(dir, &tree);
      const struct cached *known = table_find(&old_cache, 'd', dir->path);
      if (known && known->entries_length == tree.length &&
          memcmp(known->entries, tree.data, tree.length) == 0) {
        memcpy(tree_id_of(dir), known->oid, sizeof known->oid);
      }
    }
  }
  free(tree.data);
}

/* One entry of a directory's cached listing (tree_of's form: MODE SP ID TAB NAME NUL). */
struct listed {
  const char *mode, *oid, *name;
  size_t mode_length;
};

static int next_listed(const char **at, const char *limit, struct listed *into) {
  if (*at >= limit) return 0;
  const char *space = memchr(*at, ' ', (size_t)(limit - *at));
  const char *tab = space ? memchr(space, '\t', (size_t)(limit - space)) : NULL;
  const char *end = tab ? memchr(tab, '\0', (size_t)(limit - tab)) : NULL;
  if (!end || (size_t)(tab - space - 1) != oid_length) fall_back("a cached directory is malformed");
  *into = (struct listed){*at, space + 1, tab + 1, (size_t)(space - *at)};
  *at = end + 1;
  return 1;
}

/* A command's last operand: the path, quoted, and the end of the line. */
static void add_path_line(struct buf *request, const char *path) {
  add_quoted(request, path);
  buf_add(request, "\n", 1);
}

static void add_deletion(struct buf *request, const char *path) {
  buf_printf(request, "D ");
  add_path_line(request, path);
}

static void add_changes(struct buf *request, const struct directory *dir, const struct cached *base);

/* One entry against the base's entry of that name (NULL: none), as fast-import file commands. */
static void add_change(struct buf *request, const struct entry *e, const struct listed *before) {
  const char *mode = git_mode(&e->st);
  int same_mode = before && before->mode_length == strlen(mode) &&
                  memcmp(before->mode, mode, before->mode_length) == 0;
  if (e->oid[0]) {
    if (same_mode && memcmp(before->oid, e->oid, oid_length) == 0) return;
    buf_printf(request, "M %s %s ", mode, e->oid);
    add_path_line(request, e->path);
  } else if (S_ISDIR(e->st.st_mode)) {
    /* A changed directory: its base the cached listing of the tree the base holds there. */
    const struct cached *own = same_mode ? table_find(&old_cache, 'd', e->path) : NULL;
    if (own && memcmp(own->oid, before->oid, oid_length) == 0) {
      add_changes(request, e->as_directory, own);
      return;
    }
    if (before) add_deletion(request, e->path);
    add_changes(request, e->as_directory, NULL);
  } else {
    buf_printf(request, "M %s :%u ", mode, e->mark);
    add_path_line(request, e->path);
  }
}

/*
 * A changed directory as fast-import file commands against its base (the cached listing of a tree
 * fast-import starts from there, or NULL: nothing): what differs is set, what is gone deleted, so
 * fast-import reads only the trees on the way to a change and looks up no unchanged entry. Both
 * lists are sorted by name.
 */
static void add_changes(struct buf *request, const struct directory *dir, const struct cached *base) {
  const char *at = base ? base->entries : NULL;
  const char *limit = base ? base->entries + base->entries_length : NULL;
  struct listed before;
  int more = base && next_listed(&at, limit, &before);
  for (size_t i = 0; i < dir->count || more;) {
    const struct entry *e = i < dir->count ? &dir->entries[i] : NULL;
    /* < 0: a name only the base has (gone); 0: both have it; > 0: only the copy has it. */
    int order = !more ? 1 : !e ? -1 : strcmp(before.name, e->name);
    if (order < 0) {
      char *gone = joined(dir->path, before.name);
      add_deletion(request, gone);
      free(gone);
    } else if (!e->left_out) {
      add_change(request, e, order == 0 ? &before : NULL);
    } else if (order == 0) {
      add_deletion(request, e->path);
    }
    if (order <= 0) more = next_listed(&at, limit, &before);
    if (order >= 0) i++;
  }
}

/*
 * What changed, to git fast-import at once: the changed files' blobs, then a commit whose tree is
 * the copy's, asking the ids of the trees that changed (`ls`) and of the blobs (`get-mark`). It
 * writes all of them into one new pack and its index in the store (a loose object per blob and
 * tree was most of a record's time), and no ref: the commit's branch is reset before the end.
 * It answers before its pack is in place: `end_import` waits for that.
 */
static int import_sent;

/*
 * Once fast-import has been given anything, a record that falls back drops the cache: it may have
 * been saved naming objects this import never stored, or be the cache that made fast-import fail
 * (a tree it names is not in the store: a record killed between its save and the pack's end). The
 * next record is made from nothing instead of failing the same way every turn.
 */
static void drop_cache_if_imported(void) {
  if (import_sent) unlink(cache_path);
}

static void import_changes(struct level *levels, size_t depth, const struct entries *changed) {
  if (recorded_tree[0]) return; /* the copy is the cached one */
  struct buf request = {0}, reply = {0};
  for (size_t i = 0; i < changed->count; i++) {
    struct entry *e = changed->items[i];
    e->mark = (unsigned)i + 1;
    buf_printf(&request, "blob\nmark :%u\ndata %zu\n", e->mark, e->content.length);
    if (e->content.length) buf_add(&request, e->content.data, e->content.length);
    buf_add(&request, "\n", 1);
  }
  buf_printf(&request, "commit refs/cordon/recorder\ncommitter cordon <cordon> 0 +0000\ndata 0\n");
  /* From the cached record's tree when there is one: fast-import reads only what changed. */
  const struct cached *top = table_find(&old_cache, 'd', "");
  if (top) buf_printf(&request, "M 040000 %s \"\"\n", top->oid);
  else buf_printf(&request, "deleteall\n");
  add_changes(&request, &levels[0].items[0], top);
  /* The answers come in this order: the new trees top-down, then the blobs. */
  struct directory **asked = malloc((changed->count + 1) * sizeof *asked);
  size_t trees = 0, capacity = changed->count + 1;
  if (!asked) fall_back("out of memory");
  for (size_t d = 0; d < depth; d++) {
    for (size_t i = 0; i < levels[d].count; i++) {
      struct directory *dir = &levels[d].items[i];
      if (!is_recorded(dir) || tree_id_of(dir)[0]) continue;
      if (trees == capacity) {
        capacity *= 2;
        asked = realloc(asked, capacity * sizeof *asked);
        if (!asked) fall_back("out of memory");
      }
      asked[trees++] = dir;
      buf_printf(&request, "ls ");
      add_path_line(&request, dir->path);
    }
  }
  for (size_t i = 0; i < changed->count; i++) {
    buf_printf(&request, "get-mark :%u\n", changed->items[i]->mark);
  }
  buf_printf(&request, "reset refs/cordon/recorder\ndone\n");
  import_sent = 1;
  exchange(&importer, &request, trees + changed->count, '\n', 1, &reply);
  close(importer.in);

  /* `ls`: MODE SP TYPE SP ID TAB PATH LF; `get-mark`: ID LF. */
  const char *at = reply.data, *limit = reply.data + reply.length;
  for (size_t i = 0; i < trees; i++) {
    if (strncmp(at, "040000 tree ", 12) != 0) fall_back("fast-import has no tree for a directory");
    at = take_oid(at + 12, limit, '\t', tree_id_of(asked[i]));
    const char *end = memchr(at, '\n', (size_t)(limit - at));
    if (!end) fall_back("fast-import answered something unexpected");
    at = end + 1;
  }
  for (size_t i = 0; i < changed->count; i++) at = take_oid(at, limit, '\n', changed->items[i]->oid);
  free(asked);
  free(request.data);
  free(reply.data);
}

/*
 * Once fast-import has ended well its objects are in the store, and the record can be given (the
 * cache, saved meanwhile, names them; if it failed, fall_back drops that cache).
 */
static void end_import(void) {
  if (!import_sent) return;
  int status;
  pid_t ended = waitpid(importer.pid, &status, 0);
  importer.pid = 0;
  if (ended < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) fall_back("git fast-import failed");
}

/* For the next record: each file's stat data and blob id, each directory's entries and tree id. */
static void remember(struct level *levels, size_t depth) {
  if (!keep_cache) return;
  struct buf tree = {0};
  for (size_t d = depth; d-- > 0;) {
    for (size_t i = 0; i < levels[d].count; i++) {
      const struct directory *dir = &levels[d].items[i];
      if (!is_recorded(dir)) continue;
      for (size_t k = 0; k < dir->count; k++) {
        const struct entry *e = &dir->entries[k];
        if (!e->left_out && !S_ISDIR(e->st.st_mode)) remember_file(e);
      }
      tree_of(dir, &tree);
      struct cached item = {.kind = 'd', .path = dir->path};
      item.entries = copy_of(tree.data, tree.length);
      item.entries_length = tree.length;
      memcpy(item.oid, tree_id_of(dir), sizeof item.oid);
      table_add(&new_cache, &item);
    }
  }
  free(tree.data);
}

/* Part of a level's directories, scanned by a second thread. */
struct scan_part {
  struct level *level;
  size_t from, to;
  int depth;
  struct entries asked;
};

static void *scan_part(void *argument) {
  struct scan_part *part = argument;
  for (size_t i = part->from; i < part->to; i++) scan(&part->level->items[i], part->depth, &part->asked);
  return NULL;
}

/*
 * A level's directories read and lstat'ed, half of them (when there are a few) by a second thread:
 * most of a walk is a system call per entry, and the machine's other core is idle meanwhile.
 */
static void scan_level(struct level *level, int depth, struct entries *asked) {
  struct scan_part other = {level, level->count / 2, level->count, depth, {0}};
  pthread_t thread;
  int threaded = level->count >= 4 && pthread_create(&thread, NULL, scan_part, &other) == 0;
  size_t mine = threaded ? other.from : level->count;
  for (size_t i = 0; i < mine; i++) scan(&level->items[i], depth, asked);
  if (!threaded) return;
  pthread_join(thread, NULL);
  for (size_t i = 0; i < other.asked.count; i++) entries_add(asked, other.asked.items[i]);
  free(other.asked.items);
}

/* The copy's tree, into `recorded_tree`. */
static void record_copy(int top) {
  struct level *levels = NULL;
  size_t depth = 0;
  struct level current = {0};
  level_add(&current, &(struct directory){.path = "", .fd = top});
  struct entries changed = {0};
  for (; current.count > 0; depth++) {
    struct entries asked = {0};
    scan_level(&current, (int)depth, &asked);
    leave_out_ignored(&asked);
    free(asked.items);
    struct level next = {0};
    for (size_t i = 0; i < current.count; i++) descend(&current.items[i], &next, &changed);
    levels = realloc(levels, (depth + 1) * sizeof *levels);
    if (!levels) fall_back("out of memory");
    levels[depth] = current;
    current = next;
  }
  /* Each level's list is whole now: a directory's entry can point at its listing. */
  for (size_t d = 1; d < depth; d++) {
    for (size_t i = 0; i < levels[d].count; i++) {
      levels[d].items[i].in_parent->as_directory = &levels[d].items[i];
    }
  }
  /* Nothing more to ask whether it is ignored: its end overlaps the rest (reaped at exit). */
  kill(ignore_checker.pid, SIGKILL);
  take_known_trees(levels, depth);
  import_changes(levels, depth, &changed);
  remember(levels, depth);
}

/* ---- the request ---- */

/*
 * A page touched for the first time costs microseconds on these virtual machines (a record of a
 * 600-file copy touches a few hundred): the heap a record will use is touched now, ahead, and kept
 * (neither trimmed nor given back by munmap when freed).
 */
#define HEAP_AHEAD (8u * 1024 * 1024)
static void touch_heap_ahead(void) {
  mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
  char *heap = malloc(HEAP_AHEAD);
  if (!heap) return;
  memset(heap, 1, HEAP_AHEAD);
  free(heap);
}

/*
 * Ready for the request: said once on stdout (the host waits for it before it counts the spare as
 * started, workspace-inspector.ts), and in READY_FILE, so the script says it only if this did not.
 */
static void announce_ready(void) {
  static int announced;
  if (announced) return;
  announced = 1;
  if (write(1, READY, sizeof READY - 1) != (ssize_t)(sizeof READY - 1)) return;
  int fd = open(READY_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}

/* Reads the whole request (end-of-file ends it) and keeps it where the script can read it. */
static int read_request(const char **mode, const char **since, const char **index,
                        const char **pathspecs, size_t *pathspecs_length) {
  struct buf request = {0};
  read_all(0, &request, SIZE_MAX);
  if (request.length == 0) return 0;
  if (request.length > MAX_REQUEST) fall_back("a request too large");
  int fd = open(REQUEST_FILE ".next", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, request.data, request.length) != (ssize_t)request.length ||
      close(fd) != 0 || rename(REQUEST_FILE ".next", REQUEST_FILE) != 0) {
    /* The script could not read the request again: fail rather than fall back. */
    fputs("cordon-recorder: cannot keep the request\n", stderr);
    exit(2);
  }
  const char *at = request.data, *limit = request.data + request.length;
  *mode = next_field(&at, limit);
  *since = *mode ? next_field(&at, limit) : NULL;
  *index = *since ? next_field(&at, limit) : NULL;
  if (!*index) fall_back("a malformed request");
  *pathspecs = at;
  *pathspecs_length = (size_t)(limit - at);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fputs("usage: cordon-recorder CACHE GIT...\n", stderr);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  cache_path = argv[1];
  git_command = argv + 2;
  git_words = argc - 2;
  setenv("GIT_FLUSH", "1", 1);

  /* Ahead of the request: nothing here reads the copy. */
  list_baseline();
  /*
   * A pack however few the objects (fast-import writes fewer than 100 loose by default), not
   * flushed to the disk: no more than git's own loose objects are (a crash of the machine can
   * lose a checkpoint, which then says its tree is not in the store).
   */
  const char *import_args[] = {"-c", "fastimport.unpackLimit=0", "-c", "core.fsync=none",
                               "fast-import", "--quiet", "--done", NULL};
  const char *ignore_args[] = {"check-ignore", "--no-index", "--stdin", "-z", "-v", "-n", NULL};
  atexit(end_helpers);
  start_git(&importer, "fast-import", import_args);
  start_git(&ignore_checker, "check-ignore", ignore_args);
  load_cache();
  touch_heap_ahead();
  announce_ready();

  const char *mode, *since, *index, *pathspecs;
  size_t pathspecs_length;
  if (!read_request(&mode, &since, &index, &pathspecs, &pathspecs_length)) return 0;
  if (strcmp(mode, "record") != 0 || strcmp(since, "none") != 0) fall_back("not a turn's record");
  if (strcmp(index, "keep") != 0 && strcmp(index, "reuse") != 0) fall_back("index %s", index);
  if (!((pathspecs_length == 1 && pathspecs[0] == '.') ||
        (pathspecs_length == 2 && memcmp(pathspecs, ".", 2) == 0))) {
    fall_back("pathspecs other than the whole copy");
  }
  keep_cache = strcmp(index, "keep") == 0;
  cutoff = (long long)time(NULL) - 1;

  int top = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0) fall_back("cannot open the copy");
  record_copy(top);
  if (keep_cache) save_cache(); /* while fast-import ends its pack */
  end_import();
  size_t length = strlen(recorded_tree) + 1;
  if (write(1, recorded_tree, length) != (ssize_t)length) {
    fputs("cordon-recorder: cannot write the tree id\n", stderr);
    return 2;
  }
  stop_helpers(); /* an importer given nothing */
  return 0;
}
