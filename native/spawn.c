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
// supported() -> true when this kernel gives pidfds (Linux 5.3 and later).
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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

static napi_value throw_errno(napi_env env, int err, const char *what) {
  napi_value message, code, error;
  const char *name = strerrorname_np(err);
  if (name == NULL) name = "EUNKNOWN";
  char text[256];
  snprintf(text, sizeof text, "%s %s (%s)", what, strerror(err), name);
  if (napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message) == napi_ok &&
      napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code) == napi_ok &&
      napi_create_error(env, code, message, &error) == napi_ok) {
    napi_throw(env, error);
  } else {
    napi_throw_error(env, NULL, text);
  }
  return NULL;
}

static napi_value Spawn(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value args[8];
  char *file = NULL, *cwd = NULL;
  char **argv = NULL, **envp = NULL;
  int fds[3];
  napi_valuetype cwd_type, exit_type;
  napi_value result = NULL;
  int have_actions = 0, have_attr = 0;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;

  CHECK(napi_get_cb_info(env, info, &argc, args, NULL, NULL));
  if (argc != 8) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawn: expected 8 arguments");
    return NULL;
  }
  CHECK(napi_typeof(env, args[3], &cwd_type));
  CHECK(napi_typeof(env, args[7], &exit_type));
  if (exit_type != napi_function) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawn: onExit must be a function");
    return NULL;
  }
  for (int i = 0; i < 3; i++) CHECK(napi_get_value_int32(env, args[4 + i], &fds[i]));
  file = copy_string(env, args[0]);
  argv = copy_strings(env, args[1]);
  envp = copy_strings(env, args[2]);
  if (cwd_type == napi_string) cwd = copy_string(env, args[3]);
  if (file == NULL || argv == NULL || envp == NULL || (cwd_type == napi_string && cwd == NULL)) {
    napi_throw_type_error(env, NULL, "fuzzfleet spawn: file, argv, envp and cwd must be strings");
    goto fail;
  }

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
  if (err == 0 && cwd != NULL) err = posix_spawn_file_actions_addchdir_np(&actions, cwd);
  // Every signal back to its default, glibc's internal ones too: sigfillset leaves those out, and
  // the spawn would then hand them to the program ignored.
  sigset_t all, none;
  memset(&all, 0xff, sizeof all);
  sigemptyset(&none);
  if (err == 0) err = posix_spawnattr_setsigdefault(&attr, &all);
  if (err == 0) err = posix_spawnattr_setsigmask(&attr, &none);
  if (err == 0) err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  if (err != 0) {
    throw_errno(env, err, "cannot prepare the spawn:");
    goto fail;
  }

  pid_t pid;
  err = spawn_searching(&pid, file, &actions, &attr, argv, envp);
  if (err != 0) {
    throw_errno(env, err, "spawn failed:");
    goto fail;
  }

  // The child cannot be reaped by anyone but us, so its pid stays valid until waitpid.
  watch_t *w = calloc(1, sizeof *w);
  int pidfd = w == NULL ? -1 : pidfd_open_(pid);
  uv_loop_t *loop = NULL;
  napi_value resource_name;
  if (w == NULL || pidfd < 0 || napi_get_uv_event_loop(env, &loop) != napi_ok ||
      napi_create_string_utf8(env, "fuzzfleet.spawn", NAPI_AUTO_LENGTH, &resource_name) != napi_ok ||
      napi_async_init(env, NULL, resource_name, &w->context) != napi_ok) {
    int watch_err = w == NULL ? ENOMEM : pidfd < 0 ? errno : EINVAL;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (pidfd >= 0) close(pidfd);
    free(w);
    throw_errno(env, watch_err, "cannot watch the started child:");
    goto fail;
  }
  w->pid = pid;
  w->pidfd = pidfd;
  w->env = env;
  w->poll.data = w;
  if (napi_create_reference(env, args[7], 1, &w->on_exit) != napi_ok || uv_poll_init(loop, &w->poll, pidfd) != 0 ||
      uv_poll_start(&w->poll, UV_READABLE, on_readable) != 0) {
    // Not reachable in practice (pidfds poll like any descriptor); the child must not outlive it.
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(pidfd);
    napi_throw_error(env, NULL, "fuzzfleet spawn: cannot watch the started child on the event loop");
    goto fail;  // w is leaked deliberately: the poll handle may be registered with the loop
  }
  CHECK(napi_create_int32(env, pid, &result));

fail:
  if (have_actions) posix_spawn_file_actions_destroy(&actions);
  if (have_attr) posix_spawnattr_destroy(&attr);
  free(file);
  free(cwd);
  free_strings(argv);
  free_strings(envp);
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
  napi_value spawn_fn, supported_fn;
  if (napi_create_function(env, "spawn", NAPI_AUTO_LENGTH, Spawn, NULL, &spawn_fn) != napi_ok ||
      napi_create_function(env, "supported", NAPI_AUTO_LENGTH, Supported, NULL, &supported_fn) != napi_ok ||
      napi_set_named_property(env, exports, "spawn", spawn_fn) != napi_ok ||
      napi_set_named_property(env, exports, "supported", supported_fn) != napi_ok) {
    return NULL;
  }
  return exports;
}
