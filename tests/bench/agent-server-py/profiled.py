"""Runs a console script of the bench's venv under cProfile, on only inside the windows
scripts/bench.py measures (bench-only: TC_BENCH_PROFILE=DIR; never on in the figures).

    python profiled.py DIR SCRIPT [ARGS...]

SIGUSR1 starts a profile of the main thread (where both servers run their event loop), SIGUSR2
stops it and writes it to DIR/<label>.<script>.pstats, <label> read from DIR/label (the cell
scripts/bench.py is measuring). The script runs as its console script would, in this process.
"""

import cProfile
import os
import runpy
import signal
import sys

out_dir, script = sys.argv[1], sys.argv[2]
sys.argv = [script, *sys.argv[3:]]
name = os.path.basename(script)
profile: cProfile.Profile | None = None


def start(_sig: int, _frame: object) -> None:
    global profile
    profile = cProfile.Profile()
    profile.enable()


def stop(_sig: int, _frame: object) -> None:
    global profile
    if profile is None:
        return
    profile.disable()
    try:
        with open(os.path.join(out_dir, "label")) as f:
            label = f.read().strip() or "window"
    except OSError:
        label = "window"
    profile.dump_stats(os.path.join(out_dir, f"{label}.{name}.pstats"))
    profile = None


signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
runpy.run_path(script, run_name="__main__")
