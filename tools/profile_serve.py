"""Run `mcp-harness serve` (or any mcp-harness command) under cProfile, and write the profile when the
process ends: `python tools/profile_serve.py OUT_DIR serve --db ... --agent ...` writes
`OUT_DIR/<pid>.prof`. A stdio server leaves through `os._exit` (`cli/serve.leave_now`), which skips the
interpreter's exit handlers, so the profile is written there too.

`tools/bench_claims.py --profile OUT_DIR` spawns its servers (not the seeder) through this. Read a profile
with `python -m pstats OUT_DIR/<pid>.prof` (`sort tottime`, `stats 40`), or merge them:

    python -c "import pstats, glob; pstats.Stats(*glob.glob('OUT_DIR/*.prof')).sort_stats('tottime').print_stats(40)"
"""

from __future__ import annotations

import atexit
import cProfile
import os
import runpy
import sys
from pathlib import Path


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    profile = cProfile.Profile()
    written: list[bool] = []

    def write() -> None:
        if not written:
            written.append(True)
            profile.disable()
            profile.dump_stats(out / f"{os.getpid()}.prof")

    leave = os._exit

    def exit_now(code: int) -> None:
        write()
        leave(code)

    os._exit = exit_now  # type: ignore[assignment]
    atexit.register(write)
    sys.argv = ["mcp_harness", *sys.argv[2:]]
    profile.enable()
    runpy.run_module("mcp_harness", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
