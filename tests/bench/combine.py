#!/usr/bin/env python3
"""Prints the comparison of bench_core's and original_roundtrips.py's --json outputs.

usage: combine.py OURS.json ORIGINAL.json [SERVER-DESCRIPTION]
"""
import json
import sys


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1])
    with open(sys.argv[1]) as f:
        ours = json.load(f)
    with open(sys.argv[2]) as f:
        orig = json.load(f)
    server = sys.argv[3] if len(sys.argv) == 4 else "the server in MONGOELECTOR_TEST_URI"
    orig_ops = {o["id"]: o for o in orig["ops"]}

    print(f"### mongoelector core (C++) vs original mongoelector {orig.get('version', '?')} "
          f"(pymongo {orig.get('pymongo', '?')}), on {server}\n")
    print("| operation | ours round trips | original round trips | ours p50 ms | original p50 ms |")
    print("|---|---:|---:|---:|---:|")
    for op in ours["ops"]:
        o = orig_ops.get(op["id"], {})
        print(f"| {op['label']} | {op['round_trips']:.2f} | {fmt(o.get('round_trips'), '.2f')} | "
              f"{op['p50_ms']:.3f} | {fmt(o.get('p50_ms'), '.3f')} |")

    side_by_side(ours, orig, "throughput", "cycles_per_s", "cycles/s")
    side_by_side(ours, orig, "memory", "kib", "KiB")


def side_by_side(ours, orig, section, field, unit):
    """One table of ours[section] against the original's entry of the same id."""
    orig_by_id = {e["id"]: e for e in orig[section]}
    print(f"\n| {section} | ours {unit} | original {unit} |")
    print("|---|---:|---:|")
    for e in ours[section]:
        print(f"| {e['label']} | {e[field]:.0f} | "
              f"{fmt(orig_by_id.get(e['id'], {}).get(field), '.0f')} |")


if __name__ == "__main__":
    main()
