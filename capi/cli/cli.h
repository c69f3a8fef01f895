// The `mongoelector` command: a consumer of the public C API (mongoelector.h) only.
// What the subcommands (main.cpp, run.cpp, status.cpp, demo.cpp) share: exit codes and
// the topic headers (output, options, connection, process, json).
#pragma once

#include <mongoelector.h>

#include <string>

namespace cli {

// Exit codes (sysexits.h where one fits); documented in `mongoelector --help` and README.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // anything not listed below (demo: no failover seen)
  kExitUsage = 64,        // EX_USAGE: bad command line
  kExitUnavailable = 69,  // EX_UNAVAILABLE: storage unreachable or failing
  kExitLost = 70,         // EX_SOFTWARE: the lease was lost while CMD ran (run)
  kExitHeld = 75,         // EX_TEMPFAIL: held by another (no --wait, or --timeout expired)
  kExitConfig = 78,       // EX_CONFIG: the URI or its storage cannot be used
  kExitNoExec = 126,      // CMD found but not executable
  kExitNotFound = 127,    // CMD not found
};

}  // namespace cli

#include "connection.h"
#include "json.h"
#include "options.h"
#include "output.h"
#include "process.h"
#include "run_hold.h"

namespace cli {

// ---- subcommands --------------------------------------------------------------------
// sigfd: from setup_signal_fd(), called by main() before anything else.
int cmd_run(int argc, char** argv, int sigfd);
int cmd_elect(int argc, char** argv, int sigfd);
int cmd_status(int argc, char** argv);
int cmd_demo(int argc, char** argv, int sigfd);
int cmd_demo_node(int argc, char** argv, int sigfd);  // hidden: one elector process of `demo`
void print_run_help();
void print_elect_help();
void print_status_help();
void print_demo_help();

// The status of KEY: printed as a table (indent before each line) or as JSON; the
// members' counters in the table only when verbose. partitions: KEY's number of
// partitions as a partition group (0: from its live members' reports).
int print_status(mongoelector_client* client, const std::string& uri, const std::string& key,
                 bool json, const std::string& indent, bool verbose = false,
                 int64_t partitions = 0);

}  // namespace cli
