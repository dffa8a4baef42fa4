// fuzzfleet's process starter: posix_spawn(3) and a pidfd, for Linux with glibc.
//
// Node's child_process.spawn forks the whole Node process. fork copies its page tables and the
// child's exec then tears them down again, so every spawn costs time in proportion to the size of
// the parent: several milliseconds of a blocked event loop for a trivial target. glibc's
// posix_spawn starts the child with clone(CLONE_VM | CLONE_VFORK) instead, which copies nothing.
// The child's exit is watched through a pidfd on Node's own event loop (a uv_poll_t), so no thread
// waits and no SIGCHLD handler is involved; libuv only ever reaps the pids it started itself.
//
// spawn(file, argv, envp, cwd, stdinFd, stdoutFd, stderrFd, onExit) -> pid
//   file      program; a name without '/' is looked up in the PATH of envp, as execvpe does
//   argv      string[]; envp string[] of "NAME=value"
//   cwd       string, or null for the parent's
//   fds       -1 = /dev/null, else a descriptor of the parent dup2'ed onto 0, 1, 2
//   onExit    called once, on the event loop, as onExit(code, signal): code = exit status or
//             null, signal = the number of the signal that ended it or null
// The child leads a new session and process group (setsid), has every signal at its default
// disposition and none blocked, and inherits no descriptor but 0, 1 and 2.
// On failure to start it throws an Error whose `code` is the errno name (ENOENT, EACCES, ...).
// While a guard descriptor is set (see guard), the new child's group is registered on it before
// spawn returns; if that write fails, the child's group is SIGKILLed and reaped, and spawn throws
// an Error with code ERR_CHILD_UNGUARDED: no child runs unregistered.
//
// guard(fd)   the descriptor (the write end of the child watchdog's pipe, see
//             src/exec/child-watchdog.ts) every later spawn writes "+<pid>\n" to; -1 for none.
//             Kept per addon instance, so a worker thread's addon has its own.
// pipe() -> [readFd, writeFd]   both close-on-exec; the write end is non-blocking, so a watchdog
//             that stops reading makes a registration fail instead of blocking the event loop.
// spawnWatchdog(file, argv, envp, stdinFd, onExit) -> pid   starts the watchdog itself: like
//             spawn, with stdout and stderr on /dev/null and "/" as its working directory; it is
//             never registered, and its watch does not keep the event loop alive.
// supported() -> true when this kernel gives pidfds (Linux 5.3 and later).
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, NULL, "fuzzfleet spawn: " #call " failed"); \
      goto fail;                                                      \
    }                                                                 \
  } while (0)

typedef struct {
  uv_poll_t poll;
  int pidfd;
  pid_t pid;
  napi_env env;
  napi_ref on_exit;
  napi_async_context context;
} watch_t;

static int pidfd_open_(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

static char *copy_string(napi_env env, napi_value value) {
  size_t length;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return NULL;
  char *s = malloc(length + 1);
  if (s == NULL) return NULL;
  if (napi_get_value_string_utf8(env, value, s, length + 1, &length) != napi_ok) {
    free(s);
    return NULL;
  }
  return s;
}

static void free_strings(char **list) {
  if (list == NULL) return;
  for (char **p = list; *p != NULL; p++) free(*p);
  free(list);
}

static char **copy_strings(napi_env env, napi_value array) {
  uint32_t n;
  if (napi_get_array_length(env, array, &n) != napi_ok) return NULL;
  char **list = calloc((size_t)n + 1, sizeof(char *));
  if (list == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    if (napi_get_element(env, array, i, &item) != napi_ok || (list[i] = copy_string(env, item)) == NULL) {
      free_strings(list);
      return NULL;
    }
  }
  return list;
}

static const char *env_path(char **envp) {
  for (char **p = envp; *p != NULL; p++) {
    if (strncmp(*p, "PATH=", 5) == 0) return *p + 5;
  }
  return "/usr/bin:/bin";
}

// posix_spawn with execvpe's search: every PATH entry in turn; ENOENT and ENOTDIR go on to the
// next, EACCES is remembered and goes on, anything else stops.
static int spawn_searching(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                           const posix_spawnattr_t *attr, char **argv, char **envp) {
  if (strchr(file, '/') != NULL) return posix_spawn(pid, file, actions, attr, argv, envp);
  const char *path = env_path(envp);
  size_t file_length = strlen(file);
  char *candidate = malloc(strlen(path) + file_length + 3);
  if (candidate == NULL) return ENOMEM;
  int denied = 0;
  int err = ENOENT;
  for (const char *dir = path;; dir++) {
    const char *end = strchrnul(dir, ':');
    size_t dir_length = (size_t)(end - dir);
    if (dir_length == 0) {
      candidate[0] = '.';
      dir_length = 1;
    } else {
      memcpy(candidate, dir, dir_length);
    }
    candidate[dir_length] = '/';
    memcpy(candidate + dir_length + 1, file, file_length + 1);
    err = posix_spawn(pid, candidate, actions, attr, argv, envp);
    if (err == EACCES) {
      denied = 1;
    } else if (err != ENOENT && err != ENOTDIR) {
      break;
    }
    if (*end == '\0') break;
    dir = end;
  }
  free(candidate);
  if (err == ENOENT || err == ENOTDIR || err == EACCES) return denied ? EACCES : ENOENT;
  return err;
}

static void on_closed(uv_handle_t *handle) { free(handle->data); }

static void on_readable(uv_poll_t *poll, int status, int events) {
  (void)status;
  (void)events;
  watch_t *w = poll->data;
  int wstatus = 0;
  pid_t reaped = waitpid(w->pid, &wstatus, WNOHANG);
  if (reaped == 0 || (reaped < 0 && errno == EINTR)) return;  // not yet: poll again
  uv_poll_stop(poll);
  close(w->pidfd);

  napi_env env = w->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) == napi_ok) {
    napi_value on_exit, receiver, args[2], ignored;
    napi_get_null(env, &args[0]);
    napi_get_null(env, &args[1]);
    if (reaped > 0 && WIFEXITED(wstatus)) {
      napi_create_int32(env, WEXITSTATUS(wstatus), &args[0]);
    } else if (reaped > 0 && WIFSIGNALED(wstatus)) {
      napi_create_int32(env, WTERMSIG(wstatus), &args[1]);
    }
    if (napi_get_reference_value(env, w->on_exit, &on_exit) == napi_ok && napi_get_global(env, &receiver) == napi_ok) {
      // An exception thrown by onExit surfaces as an uncaught exception, as from any event handler.
      napi_make_callback(env, w->context, receiver, on_exit, 2, args, &ignored);
    }
    napi_close_handle_scope(env, scope);
  }
  napi_delete_reference(env, w->on_exit);
  napi_async_destroy(env, w->context);
  uv_close((uv_handle_t *)poll, on_closed);
}

static napi_value throw_coded(napi_env env, const char *code_text, const char *text) {
  napi_value message, code, error;
  if (napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message) == napi_ok &&
      napi_create_string_utf8(env, code_text, NAPI_AUTO_LENGTH, &code) == napi_ok &&
      napi_create_error(env, code, message, &error) == napi_ok) {
    napi_throw(env, error);
  } else {
    napi_throw_error(env, NULL, text);
  }
  return NULL;
}

static napi_value throw_errno(napi_env env, int err, const char *what) {
  const char *name = strerrorname_np(err);
  if (name == NULL) name = "EUNKNOWN";
  char text[256];
  snprintf(text, sizeof text, "%s %s (%s)", what, strerror(err), name);
  return throw_coded(env, name, text);
}

typedef struct {
  int guard_fd;
} instance_t;

static instance_t *instance(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
  return data;
}

static void free_instance(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  free(data);
}

typedef struct {
  char *file, *cwd;
  char **argv, **envp;
} command_t;

static void free_command(command_t *c) {
  free(c->file);
  free(c->cwd);
  free_strings(c->argv);
  free_strings(c->envp);
}

// Copies file, argv, envp and (when cwd is given) the working directory; false after throwing.
static int copy_command(napi_env env, napi_value file, napi_value argv, napi_value envp, napi_value cwd, command_t *c) {
  napi_valuetype cwd_type = napi_null;
  if (cwd != NULL && napi_typeof(env, cwd, &cwd_type) != napi_ok) cwd_type = napi_undefined;
  c->file = copy_string(env, file);
  c->argv = copy_strings(env, argv);
  c->envp = copy_strings(env, envp);
  if (cwd_type == napi_string) c->cwd = copy_string(env, cwd);
  if (c->file == NULL || c->argv == NULL || c->envp == NULL || (cwd_type == napi_string && c->cwd == NULL)) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawn: file, argv, envp and cwd must be strings");
    return 0;
  }
  return 1;
}

static int is_function(napi_env env, napi_value value) {
  napi_valuetype type;
  return napi_typeof(env, value, &type) == napi_ok && type == napi_function;
}

// Starts the command with the world described at the top of this file; 0 or an errno value, with
// `what` naming the step that failed.
static int start_process(const command_t *c, const int fds[3], pid_t *pid, const char **what) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int have_actions = 0, have_attr = 0;
  *what = "cannot prepare the spawn:";
  int err = posix_spawn_file_actions_init(&actions);
  if (err == 0) {
    have_actions = 1;
    err = posix_spawnattr_init(&attr);
  }
  if (err == 0) have_attr = 1;
  for (int i = 0; i < 3 && err == 0; i++) {
    err = fds[i] < 0 ? posix_spawn_file_actions_addopen(&actions, i, "/dev/null", i == 0 ? O_RDONLY : O_WRONLY, 0)
                     : posix_spawn_file_actions_adddup2(&actions, fds[i], i);
  }
  if (err == 0) err = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (err == 0 && c->cwd != NULL) err = posix_spawn_file_actions_addchdir_np(&actions, c->cwd);
  // Every signal back to its default, glibc's internal ones too: sigfillset leaves those out, and
  // the spawn would then hand them to the program ignored.
  sigset_t all, none;
  memset(&all, 0xff, sizeof all);
  sigemptyset(&none);
  if (err == 0) err = posix_spawnattr_setsigdefault(&attr, &all);
  if (err == 0) err = posix_spawnattr_setsigmask(&attr, &none);
  if (err == 0) err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  if (err == 0) {
    *what = "spawn failed:";
    err = spawn_searching(pid, c->file, &actions, &attr, c->argv, c->envp);
  }
  if (have_actions) posix_spawn_file_actions_destroy(&actions);
  if (have_attr) posix_spawnattr_destroy(&attr);
  return err;
}

// Kills what was just started and reaps it; for a child that must not run after all.
static void discard_started(pid_t pid) {
  kill(-pid, SIGKILL);  // the whole group: the child leads it from before its exec
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
}

// Writes "+<pid>\n" (sign '+') or "-<pid>\n" to the guard descriptor in one write (a pipe write
// of up to PIPE_BUF bytes is all or nothing); 0 or an errno value.
static int write_group_line(int fd, char sign, pid_t pid) {
  char line[24];
  int n = snprintf(line, sizeof line, "%c%d\n", sign, (int)pid);
  ssize_t written;
  do {
    written = write(fd, line, (size_t)n);
  } while (written < 0 && errno == EINTR);
  if (written == n) return 0;
  return written < 0 ? errno : EIO;
}

// Watches the started child through a pidfd and returns its pid as a JS number, or throws after
// killing and reaping the child (it must not run unwatched; *discarded is then set).
static napi_value watch_process(napi_env env, pid_t pid, napi_value on_exit, int keep_alive, int *discarded) {
  // The child cannot be reaped by anyone but us, so its pid stays valid until waitpid.
  watch_t *w = calloc(1, sizeof *w);
  int pidfd = w == NULL ? -1 : pidfd_open_(pid);
  uv_loop_t *loop = NULL;
  napi_value resource_name, result;
  if (w == NULL || pidfd < 0 || napi_get_uv_event_loop(env, &loop) != napi_ok ||
      napi_create_string_utf8(env, "fuzzfleet.spawn", NAPI_AUTO_LENGTH, &resource_name) != napi_ok ||
      napi_async_init(env, NULL, resource_name, &w->context) != napi_ok) {
    int watch_err = w == NULL ? ENOMEM : pidfd < 0 ? errno : EINVAL;
    discard_started(pid);
    *discarded = 1;
    if (pidfd >= 0) close(pidfd);
    free(w);
    return throw_errno(env, watch_err, "cannot watch the started child:");
  }
  w->pid = pid;
  w->pidfd = pidfd;
  w->env = env;
  w->poll.data = w;
  if (napi_create_reference(env, on_exit, 1, &w->on_exit) != napi_ok || uv_poll_init(loop, &w->poll, pidfd) != 0 ||
      uv_poll_start(&w->poll, UV_READABLE, on_readable) != 0) {
    // Not reachable in practice (pidfds poll like any descriptor); the child must not outlive it.
    // w is leaked deliberately: the poll handle may be registered with the loop.
    discard_started(pid);
    *discarded = 1;
    close(pidfd);
    napi_throw_error(env, NULL, "fuzzfleet spawn: cannot watch the started child on the event loop");
    return NULL;
  }
  if (!keep_alive) uv_unref((uv_handle_t *)&w->poll);
  if (napi_create_int32(env, pid, &result) != napi_ok) return NULL;
  return result;
}

static napi_value Spawn(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value args[8];
  command_t c = {0};
  int fds[3];
  napi_value result = NULL;

  CHECK(napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc != 8) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawn: expected 8 arguments");
    return NULL;
  }
  if (!is_function(env, args[7])) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawn: onExit must be a function");
    return NULL;
  }
  for (int i = 0; i < 3; i++) CHECK(napi_get_value_int32(env, args[4 + i], &fds[i]));
  if (!copy_command(env, args[0], args[1], args[2], args[3], &c)) goto fail;

  pid_t pid;
  const char *what;
  int err = start_process(&c, fds, &pid, &what);
  if (err != 0) {
    throw_errno(env, err, what);
    goto fail;
  }
  // Registered before anything else happens, so the window in which a SIGKILL of this process
  // would leave the child unguarded is the distance between two system calls.
  instance_t *inst = instance(env);
  int guard_fd = inst == NULL ? -1 : inst->guard_fd;
  if (guard_fd >= 0 && (err = write_group_line(guard_fd, '+', pid)) != 0) {
    discard_started(pid);
    char text[256];
    snprintf(text, sizeof text, "the child watchdog did not take the new child's registration: %s (%s); the child was killed",
             strerror(err), strerrorname_np(err) ? strerrorname_np(err) : "EUNKNOWN");
    throw_coded(env, "ERR_CHILD_UNGUARDED", text);
    goto fail;
  }
  int discarded = 0;
  result = watch_process(env, pid, args[7], 1, &discarded);
  // The child was killed and reaped: its number may be recycled, so the watchdog must forget it.
  if (discarded && guard_fd >= 0) write_group_line(guard_fd, '-', pid);

fail:
  free_command(&c);
  return result;
}

static napi_value SpawnWatchdog(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value args[5];
  command_t c = {0};
  int fds[3] = {-1, -1, -1};
  napi_value result = NULL;

  CHECK(napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc != 5) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawnWatchdog: expected 5 arguments");
    return NULL;
  }
  if (!is_function(env, args[4])) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawnWatchdog: onExit must be a function");
    return NULL;
  }
  CHECK(napi_get_value_int32(env, args[3], &fds[0]));
  if (!copy_command(env, args[0], args[1], args[2], NULL, &c)) goto fail;
  // The root as working directory: the watchdog must not keep a campaign's directory busy.
  c.cwd = strdup("/");
  if (c.cwd == NULL) {
    throw_errno(env, ENOMEM, "cannot start the child watchdog:");
    goto fail;
  }
  pid_t pid;
  const char *what;
  int err = start_process(&c, fds, &pid, &what);
  if (err != 0) {
    throw_errno(env, err, what);
    goto fail;
  }
  int discarded = 0;
  result = watch_process(env, pid, args[4], 0, &discarded);

fail:
  free_command(&c);
  return result;
}

static napi_value Guard(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg;
  int fd;
  instance_t *inst = instance(env);
  CHECK(napi_get_cb_info(env, info, &argc, &arg, NULL, NULL));
  if (argc != 1 || inst == NULL || napi_get_value_int32(env, arg, &fd) != napi_ok) {
    napi_throw_type_error(env, NULL, "fuzzfleet guard: expected a descriptor number");
    return NULL;
  }
  inst->guard_fd = fd < 0 ? -1 : fd;
fail:
  return NULL;
}

static napi_value Pipe(napi_env env, napi_callback_info info) {
  (void)info;
  int fds[2];
  napi_value result = NULL, r, w;
  if (pipe2(fds, O_CLOEXEC) != 0) return throw_errno(env, errno, "cannot create a pipe:");
  if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return throw_errno(env, err, "cannot make the pipe non-blocking:");
  }
  if (napi_create_array_with_length(env, 2, &result) != napi_ok || napi_create_int32(env, fds[0], &r) != napi_ok ||
      napi_create_int32(env, fds[1], &w) != napi_ok || napi_set_element(env, result, 0, r) != napi_ok ||
      napi_set_element(env, result, 1, w) != napi_ok) {
    close(fds[0]);
    close(fds[1]);
    napi_throw_error(env, NULL, "fuzzfleet pipe: cannot return the descriptors");
    return NULL;
  }
  return result;
}

static napi_value Supported(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = pidfd_open_(getpid());
  if (fd >= 0) close(fd);
  napi_value result;
  napi_get_boolean(env, fd >= 0, &result);
  return result;
}

NAPI_MODULE_INIT() {
  instance_t *inst = malloc(sizeof *inst);
  if (inst == NULL) return NULL;
  inst->guard_fd = -1;
  if (napi_set_instance_data(env, inst, free_instance, NULL) != napi_ok) {
    free(inst);
    return NULL;
  }
  static const struct {
    const char *name;
    napi_callback fn;
  } functions[] = {
      {"spawn", Spawn}, {"spawnWatchdog", SpawnWatchdog}, {"guard", Guard}, {"pipe", Pipe}, {"supported", Supported},
  };
  for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
    napi_value fn;
    if (napi_create_function(env, functions[i].name, NAPI_AUTO_LENGTH, functions[i].fn, NULL, &fn) != napi_ok ||
        napi_set_named_property(env, exports, functions[i].name, fn) != napi_ok) {
      return NULL;
    }
  }
  return exports;
}
