"""Numbers for bench/pipeline_parallel.sh, read from what `tessera` writes.

step METRICS                   median step time (s) of a run, its first two steps left out (warm-up)
calibrate PROFILE PLAN TRACE   the profile with its peak and memory bandwidth scaled so that PLAN's simulated
                               passes and optimizer step take what the one-rank run's TRACE measured
row NAME PLAN SECONDS BASE     a table row: measured and predicted step time, error, ratio to BASE
bubble MEASURED PREDICTED [TOL] the pipeline bubble of measured Perfetto traces (comma-separated:
                               the median of their bubbles) and of a predicted one; with TOL,
                               exit 1 when measured/predicted - 1 is beyond +-TOL
"""
import json
import re
import statistics
import sys


def trace_events(trace_path):
    """The events of a Perfetto trace file: a JSON object's traceEvents, or a bare array."""
    trace = json.load(open(trace_path))
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def median_step(metrics_path):
    steps = json.load(open(metrics_path))["step_time_s"]
    return statistics.median(steps[2:] or steps)


def calibrated(profile, plan_path, trace_path):
    # The one-rank run's own trace splits its step: the passes (forward,
    # backward, recompute) scale the profile's peak, the optimizer step its
    # memory bandwidth (the simulator's optimizer is bytes / bandwidth,
    # planner/src/simulate.cpp). Calibrating the peak on the whole step would
    # charge the CPU's AdamW, slower than its bytes, to the passes and stretch
    # every simulated pass by that much.
    breakdown = json.load(open(plan_path))["plans"][0]["step_breakdown"]
    simulated_passes = breakdown["forward_s"] + breakdown["backward_s"] + breakdown["recompute_s"]
    measured = {}
    for e in trace_events(trace_path):
        if e.get("ph") == "X":
            measured[e["cat"]] = measured.get(e["cat"], 0.0) + e["dur"] * 1e-6  # Perfetto's µs
    measured_passes = sum(measured.get(cat, 0.0) for cat in ("forward", "backward", "recompute"))
    if measured_passes <= 0 or measured.get("optimizer", 0.0) <= 0:
        sys.exit(f"calibrate: {trace_path} holds no forward, backward or optimizer event")
    peak_scale = simulated_passes / measured_passes
    profile["name"] = "cpu-calibrated"
    profile["display_name"] = "this machine's CPU, calibrated on a one-rank step"
    profile["peak_tflops"] = {dtype: peak * peak_scale for dtype, peak in profile["peak_tflops"].items()}
    profile["hbm_gbps"] *= breakdown["optimizer_s"] / measured["optimizer"]
    return profile


def busy_seconds(events, recvs):
    """Time inside forward and backward passes, less the waits for a receive inside them."""
    busy = 0.0
    for e in events:
        start, end = e["ts"], e["ts"] + e["dur"]
        waiting = sum(max(0.0, min(end, r["ts"] + r["dur"]) - max(start, r["ts"])) for r in recvs)
        busy += e["dur"] - waiting
    return busy


def stage_lanes(events):
    """{stage: [(compute events, receive events)] per rank of that stage}, from either trace's events."""
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


def span_and_bubble(trace_path):
    """(span, 1 - busy / (stages x span)): the span from the first forward to the last backward of any stage."""
    lanes = stage_lanes(trace_events(trace_path))
    all_passes = [e for ranks in lanes.values() for passes, _ in ranks for e in passes]
    span = max(e["ts"] + e["dur"] for e in all_passes) - min(e["ts"] for e in all_passes)
    busy = sum(statistics.mean(busy_seconds(passes, recvs) for passes, recvs in ranks) for ranks in lanes.values())
    return span, 1 - busy / (len(lanes) * span)


def main(argv):
    command = argv[1]
    if command == "step":
        print(median_step(argv[2]))
    elif command == "calibrate":
        print(json.dumps(calibrated(json.load(open(argv[2])), argv[3], argv[4]), indent=1))
    elif command == "row":
        name, plan_path, measured, base = argv[2], argv[3], float(argv[4]), float(argv[5])
        predicted = json.load(open(plan_path))["plans"][0]["step_time_s"]
        print(f"{name:<20} {measured * 1e3:11.1f} ms {predicted * 1e3:11.1f} ms {100 * (predicted / measured - 1):+9.1f}% {measured / base:7.2f}x")
    elif command == "bubble":
        # Another tenant of the machine moves a run's bubble either way: a
        # stretched pass adds idle time to the other stage, a stretch while both
        # stages work hides idle time. The median of the runs' bubbles leaves
        # out a disturbed run whichever way it moved. Picking the run whose step
        # spans least was tried and failed once in CI: that run read 15.6% where
        # the seven ran 9.9% to 15.6% around a median of 14.0% (12.8% predicted).
        runs = [span_and_bubble(path) for path in argv[2].split(",")]
        measured = statistics.median(bubble for _, bubble in runs)
        predicted = span_and_bubble(argv[3])[1]
        each = ", ".join(f"{100 * bubble:.1f}% in {run_span / 1e3:.0f} ms" for run_span, bubble in runs)
        print(f"1F1B bubble (last step of {len(runs)} runs: {each}): "
              f"measured (median) {100 * measured:.1f}%, predicted {100 * predicted:.1f}%, "
              f"measured/predicted {measured / predicted:.2f}")
        if len(argv) > 4 and abs(measured / predicted - 1) > float(argv[4]):
            sys.exit(f"the measured bubble is more than {100 * float(argv[4]):.0f}% from the predicted one")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
