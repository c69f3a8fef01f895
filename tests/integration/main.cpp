// gtest main that can also run as a child role (this binary re-executed by Child).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "election/elector.h"
#include "harness.h"
#include "locker.h"

using namespace mongoelector;

namespace it {

int run_semaphore_role(const std::string& role, char** argv);  // semaphore_it.cpp

namespace {
LockerOptions locker_options(const std::string& key, double ttl) {
  LockerOptions o;
  o.key = key;
  o.ttl_s = ttl;
  o.allow_unsafe_server = unsafe_server();
  return o;
}

void say(const std::string& line) {
  std::cout << line << std::endl;  // endl flushes: the parent reads line by line
}
}  // namespace

bool run_child_role(int argc, char** argv, int* exit_code) {
  if (argc < 3 || std::string(argv[1]) != "--child") return false;
  std::string role = argv[2];
  std::string uri = argv[3], db = argv[4], key = argv[5];
  *exit_code = 0;
  try {
    if (role == "hold_loop") {
      // Acquire/hold/release n times, logging each hold interval on the shared mono clock.
      int n = std::stoi(argv[6]);
      std::ofstream out(argv[7], std::ios::app);
      Locker locker(storage(uri, db), locker_options(key, 5), system_clock());
      for (int i = 0; i < n; ++i) {
        std::int64_t token = locker.acquire(true, std::nullopt, 0.005);
        std::int64_t t0 = mono_ms();
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        std::int64_t t1 = mono_ms();
        locker.release();
        out << getpid() << ' ' << t0 << ' ' << t1 << ' ' << token << '\n';
        out.flush();
      }
    } else if (role == "hold_forever") {
      double ttl = std::stod(argv[6]);
      Locker locker(storage(uri, db), locker_options(key, ttl), system_clock());
      std::int64_t token = locker.acquire(true, 10.0, 0.05);
      say("HELD " + std::to_string(token) + " " + std::to_string(mono_ms()));
      pause();
    } else if (role == "elector") {
      double ttl = std::stod(argv[6]);
      ElectorOptions o;
      o.key = key;
      o.ttl_s = ttl;
      o.allow_unsafe_server = unsafe_server();
      ElectorCallbacks cb;
      cb.on_leader = [] { say("LEADER " + std::to_string(mono_ms())); };
      cb.on_leader_loss = [] { say("LOSS " + std::to_string(mono_ms())); };
      Elector e(storage(uri, db, std::max<std::int64_t>(100, static_cast<std::int64_t>(ttl * 100))),
                o, cb, system_clock());
      e.start();
      say("STARTED");
      pause();
    } else if (role.rfind("sem_", 0) == 0) {
      *exit_code = run_semaphore_role(role, argv);
    } else {
      std::cerr << "unknown role " << role << "\n";
      *exit_code = 2;
    }
  } catch (const std::exception& ex) {
    std::cerr << "child " << role << " failed: " << ex.what() << "\n";
    say(std::string("ERROR ") + ex.what());
    *exit_code = 1;
  }
  return true;
}

}  // namespace it

int main(int argc, char** argv) {
  int code = 0;
  if (it::run_child_role(argc, argv, &code)) return code;
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  it::remove_sqlite_files();
  return result;
}
