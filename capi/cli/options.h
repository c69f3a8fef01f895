// The command line of each subcommand: options, their values, durations.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace cli {

// Prints "mongoelector <sub>: <text>\nTry 'mongoelector <sub> --help'." and returns 64.
int usage_error(const std::string& sub, const std::string& text);

struct Args {
  std::vector<std::string> positional;        // before `--` (KEY, ...)
  std::map<std::string, std::string> values;  // --name VALUE / --name=VALUE
  std::map<std::string, bool> flags;          // --name
  std::vector<std::string> command;           // after `--` (or the first extra word)
  bool help = false;
};
// Parses argv[first..]. `with_value` and `flag_names` list the accepted options (without
// the leading "--"). `max_positional`: words beyond it start the command (run/elect).
// Returns false (message printed) on an unknown option or a missing value.
bool parse_args(const std::string& sub, int argc, char** argv, int first,
                const std::vector<std::string>& with_value,
                const std::vector<std::string>& flag_names, std::size_t max_positional,
                bool takes_command, Args& out, int& exit_code);
// A positive finite number of seconds (or >= 0 with allow_zero). Prints the error.
bool parse_seconds(const std::string& sub, const std::string& name, const std::string& text,
                   bool allow_zero, double& out);

}  // namespace cli
