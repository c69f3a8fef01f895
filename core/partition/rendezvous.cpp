#include "rendezvous.h"

namespace mongoelector {

std::uint64_t rendezvous_key(const std::string& uuid) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : uuid) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x00000100000001b3ULL;
  }
  return h;
}

std::uint64_t rendezvous_mix(std::uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z;
}

std::uint64_t rendezvous_score(std::uint64_t key, std::int64_t partition) {
  return rendezvous_mix(
      key ^ rendezvous_mix(static_cast<std::uint64_t>(partition) + 0x9e3779b97f4a7c15ULL));
}

namespace {
// Whether (score a, uuid a) beats (score b, uuid b): higher score, then smaller uuid.
bool beats(std::uint64_t sa, const std::string& ua, std::uint64_t sb, const std::string& ub) {
  return sa > sb || (sa == sb && ua < ub);
}
}  // namespace

std::optional<std::string> rendezvous_owner(const std::vector<std::string>& members,
                                            std::int64_t partition) {
  const std::string* best = nullptr;
  std::uint64_t best_score = 0;
  for (const std::string& m : members) {
    const std::uint64_t s = rendezvous_score(m, partition);
    if (!best || beats(s, m, best_score, *best)) {
      best = &m;
      best_score = s;
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

std::vector<int> rendezvous_assign(const std::vector<std::string>& members,
                                   std::int64_t partitions) {
  std::vector<std::uint64_t> keys;
  keys.reserve(members.size());
  for (const std::string& m : members) keys.push_back(rendezvous_key(m));
  std::vector<int> owner(static_cast<std::size_t>(partitions < 0 ? 0 : partitions), -1);
  for (std::int64_t p = 0; p < partitions; ++p) {
    int best = -1;
    std::uint64_t best_score = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const std::uint64_t s = rendezvous_score(keys[i], p);
      if (best < 0 || beats(s, members[i], best_score, members[static_cast<std::size_t>(best)])) {
        best = static_cast<int>(i);
        best_score = s;
      }
    }
    owner[static_cast<std::size_t>(p)] = best;
  }
  return owner;
}

}  // namespace mongoelector
