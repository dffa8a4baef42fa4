// fuzzfleet-watchdog: ends the process groups of a fuzzfleet process's children once that process
// is gone, however it went (SIGKILL included). Started by the native starter (spawnWatchdog in
// native/spawn.c; the protocol and its guarantees are in src/exec/child-watchdog.ts).
//
//   fuzzfleet-watchdog <fuzzfleet pid> <grace ms>      stdin: the read end of the registry pipe
//
// Lines on stdin: "+<pgid>" registers a group, "-<pgid>" undoes one registration of it (a number
// may be registered twice for a moment: a child can get the number of a group that was just
// found empty before that group's release is written); anything else is ignored,
// and so are 0 and 1 (kill(-1) would signal every process we may signal). fuzzfleet holds the only
// write end, so end of file means it is gone: then every registered group gets SIGTERM, those with
// a member left after the grace period SIGKILL, and the watchdog exits. A group found empty during
// the grace period is dropped at once, so a number recycled after that is never signalled.
//
// Why it polls instead of blocking on the pipe: a reader blocked in read(2) or poll(2) is woken by
// every write, and the wakeup costs the writer, fuzzfleet's event loop, a few microseconds per
// line (far more on a loaded machine). Draining the pipe every DRAIN_MS costs the writer nothing
// beyond its write(2); the pipe's 64 KiB hold thousands of lines between two drains, and fuzzfleet's
// death is noticed within DRAIN_MS.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_MS 100
#define CHECK_MS 100

static pid_t *groups;
static size_t count, capacity;

static void sleep_ms(long ms) {
  struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

static void add_group(pid_t g) {
  if (count == capacity) {
    size_t bigger = capacity == 0 ? 64 : capacity * 2;
    pid_t *grown = realloc(groups, bigger * sizeof *grown);
    if (grown == NULL) return;  // not reachable in practice; the group then stays unguarded
    groups = grown;
    capacity = bigger;
  }
  groups[count++] = g;
}

static void remove_group(pid_t g) {
  for (size_t i = 0; i < count; i++) {
    if (groups[i] == g) {
      groups[i] = groups[--count];
      return;
    }
  }
}

// A strictly positive decimal pid above 1, without a leading zero; 0 if the text is not one.
static pid_t parse_pid(const char *s, size_t n) {
  if (n == 0 || n > 10 || s[0] == '0') return 0;
  long long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    v = v * 10 + (s[i] - '0');
  }
  return v > 1 && v <= 0x7fffffff ? (pid_t)v : 0;
}

static void apply_line(const char *line, size_t n) {
  if (n < 2) return;
  pid_t g = parse_pid(line + 1, n - 1);
  if (g == 0) return;
  if (line[0] == '+') add_group(g);
  if (line[0] == '-') remove_group(g);
}

typedef struct {
  char text[24];
  size_t used;
  int overlong;  // longer than any valid line: ignored when it ends
} line_t;

// Reads what the pipe holds now; returns 1 once fuzzfleet is gone (end of file, or the pipe is
// unusable, which only its end can explain).
static int drain(line_t *line) {
  char chunk[65536];
  for (;;) {
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n == 0) return 1;
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : 1;
    for (ssize_t i = 0; i < n; i++) {
      if (chunk[i] == '\n') {
        if (!line->overlong) apply_line(line->text, line->used);
        line->used = 0;
        line->overlong = 0;
      } else if (line->used < sizeof line->text) {
        line->text[line->used++] = chunk[i];
      } else {
        line->overlong = 1;
      }
    }
  }
}

static void end_groups(long grace_ms) {
  for (size_t i = 0; i < count; i++) kill(-groups[i], SIGTERM);
  for (long waited = 0; count > 0 && waited < grace_ms; waited += CHECK_MS) {
    sleep_ms(CHECK_MS);
    for (size_t i = 0; i < count;) {
      if (kill(-groups[i], 0) != 0 && errno == ESRCH) {
        groups[i] = groups[--count];
      } else {
        i++;
      }
    }
  }
  for (size_t i = 0; i < count; i++) kill(-groups[i], SIGKILL);
}

int main(int argc, char **argv) {
  long grace_ms = argc > 2 ? strtol(argv[2], NULL, 10) : 2000;
  if (grace_ms < 0) grace_ms = 0;
  // A Ctrl-C or hangup meant for fuzzfleet must not end its guard (it runs in a session of its
  // own anyway); SIGTERM and SIGKILL still do.
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  int flags = fcntl(0, F_GETFL);
  if (flags < 0 || fcntl(0, F_SETFL, flags | O_NONBLOCK) != 0) return 1;
  line_t line = {.used = 0, .overlong = 0};
  while (!drain(&line)) sleep_ms(DRAIN_MS);
  end_groups(grace_ms);
  return 0;
}
