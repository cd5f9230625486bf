#!/usr/bin/env python3
"""tools/gpu-check's report, data/measurements/<date>-<gpu>.json, from what its stages left in its work folder.

tools/gpu-check calls this after every stage (tools/gpu_check/stages.sh), and
writes the result atomically, so a run stopped at any point leaves a valid
report of what finished. plan.tsv lists the stages in priority order (name,
expected seconds, GPUs, needs, command), records.tsv each stage's states
(name, state, seconds, detail; the last line of a stage wins). A stage's
command says where its results are:
  run_gtest NAME         NAME.json, gtest's report: kernel_tests, and the GPU
                         step's own tests (gradient_accumulation, recompute);
  run_sanitizer TOOL     TOOL.verdict: compute_sanitizer[TOOL];
  run_layout...          NAME.verdict, NAME/metrics.json and NAME/plan.json
                         (the planner's estimate of the same run), and
                         NAME_compare.json: report[NAME] is an object;
  run_ranks_test         NAME.verdict, and NAME.log's "relative error" lines
                         as NAME_errors;
  run_pytorch...         pytorch.json, the baseline, as report["pytorch"];
                         the probes write their files beside the report;
  anything else          NAME.verdict: report[NAME] is that line.
A stage skipped, stopped or never reached has "not run: <why>" (or "not
finished: ...") where its verdict would be.
"""
import argparse
import datetime
import json
import os

# The GPU step's tests among the kernel tests (tests/cuda/gpt_training_gpu_test.cpp,
# recompute_gpu_test.cpp): the report key, the test, the properties it measured.
STEP_TESTS = {
    # The GPU step of 2 accumulated micro-batches against the CPU trainer's.
    "gradient_accumulation": ("GptTrainingOnGpu.TwoAccumulatedMicroBatchesMatchTheCpuEngine", ("max_error",)),
    # Under --recompute selective and full against none: the errors, how many gradients differ in their bits, the activation peaks.
    "recompute": ("RecomputeOnGpu.SameLossAndGradientsWithALowerActivationPeak", ("max_error", "differing", "activation_peak")),
}


def read_table(path, columns):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [dict(zip(columns, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def stages(work):
    """Every planned stage with its latest state: passed, failed, not run, stopped, skipped, running or not reached."""
    latest = {record["name"]: record for record in read_table(f"{work}/records.tsv", ("name", "state", "seconds", "detail"))}
    result = []
    for planned in read_table(f"{work}/plan.tsv", ("name", "expected_seconds", "gpus", "needs", "command")):
        record = latest.get(planned["name"], {"state": "not reached", "seconds": "0", "detail": "the check stopped before this stage"})
        result.append({"name": planned["name"], "command": planned["command"], "expected_seconds": int(planned["expected_seconds"]),
                       "state": record["state"], "seconds": int(record["seconds"]), "detail": record["detail"]})
    return result


def not_run(stage):
    """What a stage's verdict says when the stage left none."""
    if stage["state"] == "running":
        return "not finished: it was running when the check stopped"
    if stage["state"] == "stopped":
        return f"not finished: {stage['detail']}"
    return f"not run: {stage['detail'] or 'it wrote no verdict'}"


def verdict(work, stage):
    path = f"{work}/{stage['name']}.verdict"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return not_run(stage)


def load_json(path):
    """The file's JSON, or None where it is missing or cut short (a program stopped while writing it)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def gtest_cases(report):
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            yield f"{suite['name']}.{case['name']}", case


def case_result(name, case, measured):
    return {"test": name, "result": case.get("result"), "status": case.get("status"),
            "failures": [failure.get("failure") for failure in case.get("failures", [])],
            "measured": {k: v for k, v in case.items() if k.startswith(measured)}}


def kernel_reports(work, stage_list):
    """gtest's report of each run_gtest stage that finished, by stage name."""
    reports = {stage["name"]: load_json(f"{work}/{stage['name']}.json") for stage in stage_list if stage["command"] == "run_gtest"}
    return {name: report for name, report in reports.items() if report is not None}


def step_test(reports, stage_list, test, measured):
    for report in reports.values():
        for name, case in gtest_cases(report):
            if name == test:
                return {k: v for k, v in case_result(name, case, measured).items() if k != "test"}
    suite = test.split(".")[0]
    unfinished = [stage for stage in stage_list if stage["command"] == "run_gtest" and stage["name"] not in reports]
    if unfinished:
        return not_run(unfinished[-1])
    return f"not run: the kernel tests binary has no {suite} (built without cuDNN)"


def build(work, header, finished):
    stage_list = stages(work)
    reports = kernel_reports(work, stage_list)
    report = dict(header)
    report["finished"] = finished
    report["stages"] = stage_list
    report["kernel_tests"] = {
        "tests": sum(r.get("tests", 0) for r in reports.values()),
        "failures": sum(r.get("failures", 0) for r in reports.values()),
        "results": [case_result(name, case, ("max_error", "differing")) for r in reports.values() for name, case in gtest_cases(r)],
    }
    report["compute_sanitizer"] = {stage["name"]: verdict(work, stage) for stage in stage_list if stage["command"] == "run_sanitizer"}
    for key, (test, measured) in STEP_TESTS.items():
        report[key] = step_test(reports, stage_list, test, measured)
    for stage in stage_list:
        name, command = stage["name"], stage["command"]
        if command in ("run_gtest", "run_sanitizer"):
            continue
        if command.startswith("run_pytorch"):
            baseline = load_json(f"{work}/{name}.json")
            if baseline is not None:
                report[name] = baseline
        elif command.startswith("run_layout"):
            report[name] = {"verdict": verdict(work, stage)}
            for key, path in (("metrics", f"{work}/{name}/metrics.json"), ("planner_estimate", f"{work}/{name}/plan.json"),
                              ("compare", f"{work}/{name}_compare.json")):
                loaded = load_json(path)
                if loaded is not None:
                    report[name][key] = loaded
        else:
            report[name] = verdict(work, stage)
            if command == "run_ranks_test" and os.path.exists(f"{work}/{name}.log"):
                with open(f"{work}/{name}.log") as f:
                    report[f"{name}_errors"] = [line.strip() for line in f if "relative error" in line]
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, help="tools/gpu-check's work folder")
    parser.add_argument("--out", required=True, help="the report to write")
    parser.add_argument("--gpu", nargs=4, metavar=("NAME", "CAPABILITY", "MEMORY_BYTES", "DRIVER"), required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--budget", type=int, required=True, help="the budget in seconds")
    parser.add_argument("--spent", type=int, required=True, help="seconds spent so far")
    parser.add_argument("--environment", required=True, help="a JSON file: what the machine has that the stages use")
    parser.add_argument("--finished", action="store_true", help="every stage has had its turn")
    args = parser.parse_args()
    name, capability, memory, driver = args.gpu
    header = {
        "schema": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": args.commit,
        "gpu": {"name": name, "compute_capability": capability, "memory_bytes": int(memory), "cuda_driver_version": int(driver)},
        "budget": {"seconds": args.budget, "spent_seconds": args.spent},
        "environment": load_json(args.environment),
    }
    with open(args.out, "w") as f:
        json.dump(build(args.work, header, args.finished), f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
