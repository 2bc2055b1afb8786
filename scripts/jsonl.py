"""Reading `wort bench --json` files (JSON Lines), shared by bench_table.py and ycsb_table.py."""
import json
import sys


def records(path, bench):
    """Yields (line number, record) for every record of `path` whose "bench" field is `bench`.
    Blank lines are skipped; a line that is not JSON ends the program with a clear error."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
            if r.get("bench") == bench:
                yield n, r
