// Rendezvous (highest random weight) hashing: which member owns partition p of a group.
// Pure functions, no I/O; every binding that computes an assignment (the core's member
// loop, `partition_status`, later the C API and the command) uses these, and a binding
// in another language that computes it itself must reproduce them bit for bit:
//
//   key(uuid)    = FNV-1a 64 over the uuid's UTF-8 bytes
//                  (offset basis 0xcbf29ce484222325, prime 0x00000100000001b3)
//   mix(z)       = SplitMix64's finaliser on 64-bit unsigned integers (wrapping):
//                  z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
//                  z ^= z >> 27; z *= 0x94d049bb133111eb;
//                  z ^= z >> 31
//   score(uuid, p) = mix(key(uuid) ^ mix(p + 0x9e3779b97f4a7c15))     (p as uint64)
//   owner(p)     = the member of highest score; equal scores: the smallest uuid
//                  (bytewise comparison of the UTF-8 strings)
//
// Test vectors (tests/unit/partitioner_test.cpp, tests/python/test_partitioner.py):
//   key("")  = 0xcbf29ce484222325          key("a") = 0xaf63dc4c8601ec8c
//   score("a", 0) = 0x223510de0dd4615f    score("b", 7) = 0x9517775f2632c4f3
//
// Why rendezvous: each partition's owner depends only on the members' scores for THAT
// partition, so a member joining takes exactly the partitions where it scores highest
// (about N / members of them, each from its previous owner) and moves nothing else; a
// member leaving frees only its own partitions, each going to its runner-up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mongoelector {

std::uint64_t rendezvous_key(const std::string& uuid);
std::uint64_t rendezvous_mix(std::uint64_t z);
std::uint64_t rendezvous_score(std::uint64_t key, std::int64_t partition);
inline std::uint64_t rendezvous_score(const std::string& uuid, std::int64_t partition) {
  return rendezvous_score(rendezvous_key(uuid), partition);
}

// The owner of `partition` among `members` (uuids; duplicates are harmless), nullopt
// when there is none.
std::optional<std::string> rendezvous_owner(const std::vector<std::string>& members,
                                            std::int64_t partition);

// owner(p) for p in [0, partitions): index into `members` of each partition's owner
// (-1 when `members` is empty). One pass of N x members scores, keys computed once.
std::vector<int> rendezvous_assign(const std::vector<std::string>& members,
                                   std::int64_t partitions);

}  // namespace mongoelector
