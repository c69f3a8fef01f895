// The command line of each subcommand (options.h).
#include "cli.h"

#include <errno.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cli {

int usage_error(const std::string& sub, const std::string& text) {
  std::string who = sub.empty() ? std::string(g_prog) : std::string(g_prog) + " " + sub;
  fprintf(stderr, "%s: %s\nTry '%s --help'.\n", who.c_str(), text.c_str(), who.c_str());
  return kExitUsage;
}

static bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (x == s) return true;
  return false;
}

bool parse_args(const std::string& sub, int argc, char** argv, int first,
                const std::vector<std::string>& with_value,
                const std::vector<std::string>& flag_names, std::size_t max_positional,
                bool takes_command, Args& out, int& exit_code) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      if (!takes_command) {
        exit_code = usage_error(sub, "unexpected '--': this subcommand runs no command");
        return false;
      }
      for (int j = i + 1; j < argc; ++j) out.command.emplace_back(argv[j]);
      return true;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2), value;
      bool has_value = false;
      auto eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (contains(with_value, name)) {
        if (!has_value) {
          if (i + 1 >= argc) {
            exit_code = usage_error(sub, "option --" + name + " needs a value");
            return false;
          }
          value = argv[++i];
        }
        out.values[name] = value;
      } else if (contains(flag_names, name)) {
        if (has_value) {
          exit_code = usage_error(sub, "option --" + name + " takes no value");
          return false;
        }
        out.flags[name] = true;
      } else {
        exit_code = usage_error(sub, "unknown option '" + a + "'");
        return false;
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      exit_code = usage_error(sub, "unknown option '" + a + "'");
      return false;
    }
    if (out.positional.size() < max_positional) {
      out.positional.push_back(a);
    } else if (takes_command) {
      for (int j = i; j < argc; ++j) out.command.emplace_back(argv[j]);
      return true;
    } else {
      exit_code = usage_error(sub, "unexpected argument '" + a + "'");
      return false;
    }
  }
  return true;
}

bool parse_seconds(const std::string& sub, const std::string& name, const std::string& text,
                   bool allow_zero, double& out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(text.c_str(), &end);
  // An optional unit: 90, 90s, 15m, 1h, 1d.
  double unit = 1;
  if (end != nullptr && *end != '\0' && end[1] == '\0' && end != text.c_str()) {
    switch (*end) {
      case 's':
        unit = 1;
        ++end;
        break;
      case 'm':
        unit = 60;
        ++end;
        break;
      case 'h':
        unit = 3600;
        ++end;
        break;
      case 'd':
        unit = 86400;
        ++end;
        break;
      default:
        break;
    }
  }
  v *= unit;
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0 ||
      v > 1e9 || (!allow_zero && v == 0)) {
    usage_error(sub, "--" + name + " must be a duration " + (allow_zero ? ">= 0" : "> 0") +
                         ": seconds, or a number with s, m, h or d (got '" + text + "')");
    return false;
  }
  out = v;
  return true;
}

}  // namespace cli
