// Output of the command (output.h).
#include "cli.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace cli {

const char* g_prog = "mongoelector";

void msg(const char* fmt, ...) {
  char body[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  std::string line = std::string(g_prog) + ": " + body + "\n";
  ssize_t off = 0, n = static_cast<ssize_t>(line.size());
  while (off < n) {
    ssize_t w = write(2, line.data() + off, static_cast<size_t>(n - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += w;
  }
}

double mono_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int64_t wall_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string iso_ms(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  char out[96];
  snprintf(out, sizeof out, "%s.%03d UTC", buf, static_cast<int>(ms % 1000));
  return out;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace cli
