"""Numbers for bench/pipeline_parallel.sh, read from what `tessera` writes.

step METRICS                   median step time (s) of a run, its first two steps left out (warm-up)
calibrate PROFILE PLAN SECONDS the profile with its peak scaled so that PLAN's simulated step takes SECONDS
row NAME PLAN SECONDS BASE     a table row: measured and predicted step time, error, ratio to BASE
bubble MEASURED PREDICTED [TOL] the pipeline bubble of measured Perfetto traces (comma-separated:
                               their median) and of a predicted one; with TOL, exit 1 when
                               measured/predicted - 1 is beyond +-TOL
"""
import json
import re
import statistics
import sys


def median_step(metrics_path):
    steps = json.load(open(metrics_path))["step_time_s"]
    return statistics.median(steps[2:] or steps)


def calibrated(profile, plan_path, measured_s):
    # Only forward, backward and recompute scale with the peak; the rest of
    # the simulated step (optimizer, exposed communication) is kept as it is.
    plan = json.load(open(plan_path))["plans"][0]
    breakdown = plan["step_breakdown"]
    compute = breakdown["forward_s"] + breakdown["backward_s"] + breakdown["recompute_s"]
    rest = plan["step_time_s"] - compute
    if measured_s <= rest:
        sys.exit(f"calibrate: the measured step ({measured_s:.4f} s) is shorter than the simulated non-compute time ({rest:.4f} s)")
    scale = compute / (measured_s - rest)
    profile["name"] = "cpu-calibrated"
    profile["display_name"] = "this machine's CPU, peak calibrated on a one-rank step"
    profile["peak_tflops"] = {dtype: peak * scale for dtype, peak in profile["peak_tflops"].items()}
    return profile


def busy_seconds(events, recvs):
    """Time inside forward and backward passes, less the waits for a receive inside them."""
    busy = 0.0
    for e in events:
        start, end = e["ts"], e["ts"] + e["dur"]
        waiting = sum(max(0.0, min(end, r["ts"] + r["dur"]) - max(start, r["ts"])) for r in recvs)
        busy += e["dur"] - waiting
    return busy


def stage_lanes(trace):
    """{stage: [(compute events, receive events)] per rank of that stage}, from either trace."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    passes = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("forward", "backward")]
    recvs = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("recv")]
    lanes = {}
    if any("stage" in e.get("args", {}) for e in passes):  # predicted: one process, a lane pair per stage
        for e in passes:
            stage = e["args"]["stage"]
            lanes.setdefault(stage, [([], [])])[0][0].append(e)
        for r in recvs:
            if r["args"].get("stage") in lanes:
                lanes[r["args"]["stage"]][0][1].append(r)
        return lanes
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    for pid, name in names.items():  # measured: one process per rank, "rank R: dp D, tp T, pp P"
        stage = int(re.search(r"pp (\d+)", name).group(1))
        lanes.setdefault(stage, []).append(([e for e in passes if e["pid"] == pid], [r for r in recvs if r["pid"] == pid]))
    return lanes


def bubble_fraction(trace_path):
    """1 - busy / (stages x span): the span from the first forward to the last backward of any stage."""
    lanes = stage_lanes(json.load(open(trace_path)))
    all_passes = [e for ranks in lanes.values() for passes, _ in ranks for e in passes]
    span = max(e["ts"] + e["dur"] for e in all_passes) - min(e["ts"] for e in all_passes)
    busy = sum(statistics.mean(busy_seconds(passes, recvs) for passes, recvs in ranks) for ranks in lanes.values())
    return 1 - busy / (len(lanes) * span)


def main(argv):
    command = argv[1]
    if command == "step":
        print(median_step(argv[2]))
    elif command == "calibrate":
        print(json.dumps(calibrated(json.load(open(argv[2])), argv[3], float(argv[4])), indent=1))
    elif command == "row":
        name, plan_path, measured, base = argv[2], argv[3], float(argv[4]), float(argv[5])
        predicted = json.load(open(plan_path))["plans"][0]["step_time_s"]
        print(f"{name:<20} {measured * 1e3:11.1f} ms {predicted * 1e3:11.1f} ms {100 * (predicted / measured - 1):+9.1f}% {measured / base:7.2f}x")
    elif command == "bubble":
        runs = [bubble_fraction(path) for path in argv[2].split(",")]
        measured, predicted = statistics.median(runs), bubble_fraction(argv[3])
        each = ", ".join(f"{100 * run:.1f}%" for run in runs)
        print(f"1F1B bubble (last step, median of {len(runs)} runs: {each}): measured {100 * measured:.1f}%, "
              f"predicted {100 * predicted:.1f}%, measured/predicted {measured / predicted:.2f}")
        if len(argv) > 4 and abs(measured / predicted - 1) > float(argv[4]):
            sys.exit(f"the measured bubble is more than {100 * float(argv[4]):.0f}% from the predicted one")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
