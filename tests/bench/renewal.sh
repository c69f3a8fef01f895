#!/usr/bin/env bash
# The figures of issue #17 (batched renewals), one command:
#
#   bash tests/bench/renewal.sh            # about 50 minutes; writes tests/bench/results/renewal.md
#   bash tests/bench/renewal.sh --quick    # smoke test, under 2 minutes: renewal-quick.md
#
# One process per contender (ours: C API, Python with a URI and with a pymongo Database,
# Go if it builds) and renewal mode holds N = 1, 10, 100, 1000, 5000 keys as keep-alive
# leases at ttl 15 s, on mongo-java-server, and each N is measured for 60 s: commands/s
# sent to the server (counting proxy), commands per renew interval (ttl/3), CPU seconds,
# threads, connections, leases lost (must be 0), RSS. Modes, side by side: batched (the
# library's default) and per-key (the process runs with MONGOELECTOR_BATCH_RENEWALS=0).
# Any other option goes to run.sh and the harness, e.g. --contenders c,py-uri,
# --scale-sizes 1,1000, --uri mongodb://host:27017/, --results DIR; run.sh builds the C
# library in $MONGOELECTOR_BENCH_BUILD (default ~/.cache/mongoelector/build-bench).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export MONGOELECTOR_BENCH_COMMAND="bash tests/bench/renewal.sh${*:+ $*}"
exec bash "$HERE/run.sh" --renewal --go "$@"
