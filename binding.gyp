{
  "targets": [
    {
      "target_name": "fuzzfleet_spawn",
      "sources": ["native/spawn.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "fuzzfleet_watchdog",
      "type": "executable",
      "sources": ["native/watchdog.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
