#!/usr/bin/env python3
"""tests/gpu/run's readers, standard library only (the GPU machine installs nothing).

  coverage BUILD TARGET SOURCE
      Every executable that holds gpu-labelled tests (gtest_discover_tests ... PROPERTIES LABELS
      gpu) must be an input of TARGET in BUILD's ninja graph. ctest turns the tests of an
      executable that was not built into one unlabelled <target>_NOT_BUILT entry, so
      `ctest -L gpu` would drop them without a word. Exit 1 naming each one that is missing.
      Also exit 1 for a gtest_discover_tests call in SOURCE's CMake files whose gpu label never
      reaches ctest: LABELS outside PROPERTIES (ignored), or in a list ("core;gpu": flattened, so
      ctest sees core alone). Other labels lost that way are warned about.
  results JUNIT SUITE REQUIRE FACTS NOTES
      ctest's JUnit file: one line per test into FACTS (SUITE.* first), the counts into NOTES.
      Exit 1 when a test failed or none ran, or when SUITE falls short of REQUIRE: none,
      present (at least one SUITE.* test), passed (present, and none of them skipped).
  report JSON
      A fathom report's key numbers (last epoch), one per line.
"""
import glob
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

BRACKET = re.compile(r"\[(=*)\[(.*?)\]\1\]", re.S)


def live_include_files(build):
    """The gtest include files ctest reads: those its CTestTestfile.cmake tree includes, reached
    from the build folder through subdirs(). A folder left behind by a source folder that was
    moved or removed keeps its old files, which ctest no longer reads."""
    files, todo, seen = [], [build], set()
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        try:
            with open(os.path.join(d, "CTestTestfile.cmake"), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        files += [p for p in re.findall(r'include\("([^"]+_include\.cmake)"\)', text)]
        todo += [os.path.join(d, s) for s in re.findall(r'subdirs\("([^"]+)"\)', text)]
    return files


def gpu_test_executables(build):
    """(executables with gpu-labelled discoveries, include files read, include files seen)."""
    exes, read = set(), 0
    files = live_include_files(build)
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        call = text.find("gtest_discover_tests_impl(")
        if call < 0:
            continue
        read += 1
        # The call's arguments: KEYWORD [==[value]==] ..., TEST_PROPERTIES taking key/value pairs.
        words = re.findall(r"\[(=*)\[(.*?)\]\1\]|([A-Z_]+)", text[call + len("gtest_discover_tests_impl("):
                                                               text.find(")\n", call)], re.S)
        args, key = {}, None
        for _, value, keyword in words:
            if keyword:
                key = keyword
                args.setdefault(key, [])
            elif key:
                args[key].append(value)
        # What ctest gets: the values flattened into one list of key value pairs, so a label list
        # ("core;gpu") is cut to its first item.
        props = ";".join(args.get("TEST_PROPERTIES", [])).split(";")
        labels = [props[i + 1] for i in range(len(props) - 1) if props[i] == "LABELS"]
        if "gpu" in labels and args.get("TEST_EXECUTABLE"):
            exes.add(os.path.relpath(args["TEST_EXECUTABLE"][0], build))
    return exes, read, len(files)


def target_inputs(build, target):
    out = subprocess.run(["ninja", "-C", build, "-t", "query", target], check=True,
                         capture_output=True, text=True).stdout
    inputs, section = set(), None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("input:"):
            section = "in"
        elif s.startswith("outputs:"):
            section = "out"
        elif section == "in" and s and not line.startswith("  input"):
            inputs.add(s.lstrip("| "))
    return inputs


def misplaced_labels(source):
    """(file, line, labels, problem) of gtest_discover_tests calls whose labels ctest never sees:
    LABELS outside PROPERTIES, or a list of labels."""
    found = []
    for dirpath, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "googletest"]
        if "CMakeLists.txt" not in files:
            continue
        path = os.path.join(dirpath, "CMakeLists.txt")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in re.finditer(r"(?m)^[ \t]*gtest_discover_tests\s*\(([^)]*)\)", text):
            words = re.findall(r'"[^"]*"|[^\s"]+', re.sub(r"#[^\n]*", "", m.group(1)))
            if "LABELS" not in words:
                continue
            i = words.index("LABELS")
            labels = words[i + 1].strip('"') if i + 1 < len(words) else ""
            where = (os.path.relpath(path, source), text.count("\n", 0, m.start()) + 1, labels)
            if "PROPERTIES" not in words or words.index("PROPERTIES") > i:
                found.append(where + ("outside PROPERTIES: CMake ignores these labels",))
            elif ";" in labels:
                found.append(where + (f"a list: gtest_discover_tests flattens PROPERTIES, so ctest "
                                      f"gets {labels.split(';')[0]} alone",))
    return found


def coverage(build, target, source):
    rc = 0
    for path, line, labels, problem in misplaced_labels(source):
        gpu = "gpu" in labels.split(";")
        print(f"coverage: {'' if gpu else 'warning: '}{path}:{line}: gtest_discover_tests(... LABELS "
              f"{labels}) {problem}; write PROPERTIES LABELS with one label")
        rc |= gpu
    exes, read, seen = gpu_test_executables(build)
    if seen and not read:
        print(f"coverage: none of {seen} gtest include files has the layout this reader knows "
              "(another CMake version?): not checked")
        return rc
    if not exes:
        print("coverage: no executable holds gpu-labelled tests (PROPERTIES LABELS gpu)")
        return 1
    built = target_inputs(build, target)
    missing = sorted(e for e in exes if e not in built)
    for e in sorted(exes):
        print(f"coverage: {e}: gpu-labelled tests, {'built by ' + target if e not in missing else 'NOT built by ' + target}")
    if missing:
        print(f"coverage: add {', '.join(os.path.basename(m) for m in missing)} to {target} "
              "(top-level CMakeLists.txt), or their gpu tests never run on the GPU machine")
        return 1
    return rc


def results(junit, suite, require, facts, notes):
    rows = []
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        with open(notes, "a") as f:
            print(f"no JUnit results ({e})", file=f)
        return 1
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        status = "passed"
        if case.find("failure") is not None or case.find("error") is not None or case.get("status") == "fail":
            status = "FAILED"
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            status = "skipped"
        reason = ""
        out = case.findtext("system-out") or ""
        if status == "skipped":
            m = re.search(r"(?:Skipped|skipped)\s*\n?(.+)", out)
            reason = m.group(1).strip() if m else ""
        elif status == "FAILED":
            m = re.search(r"(?m)^(\S+:\d+): Failure\n(.*)(?:\n(.*))?", out)
            failure = case.find("failure")
            reason = (" ".join(x.strip() for x in m.groups() if x) if m else
                      failure.get("message", "") if failure is not None else "")
        rows.append((not name.startswith(suite + "."), name, status, float(case.get("time") or 0), reason))
    rows.sort(key=lambda r: (r[0], r[1]))
    count = {k: sum(1 for r in rows if r[2] == k) for k in ("passed", "FAILED", "skipped")}
    ours = [r for r in rows if not r[0]]
    with open(facts, "a") as f:
        if ours:
            print(f"{suite}.*: " + ", ".join(f"{sum(1 for r in ours if r[2] == k)} {k.lower()}"
                                             for k in ("passed", "FAILED", "skipped")), file=f)
        else:
            print(f"{suite}.*: no such test in ctest -L '^gpu$'" +
                  (" (required)" if require != "none" else " (not in this tree yet)"), file=f)
        for _, name, status, secs, reason in rows:
            print(f"{status:8} {secs:7.2f} s  {name}{'  -- ' + reason[:160] if reason else ''}", file=f)
        print(f"{len(rows)} tests: {count['passed']} passed, {count['FAILED']} failed, "
              f"{count['skipped']} skipped", file=f)
    rc = 0
    with open(notes, "a") as f:
        print(f"{len(rows)} tests: {count['passed']} passed, {count['FAILED']} failed, "
              f"{count['skipped']} skipped; {suite}.*: {len(ours)}", file=f)
        if require != "none" and not ours:
            print(f"no {suite}.* test among the gpu tests", file=f)
            rc = 1
        elif require == "passed" and any(r[2] != "passed" for r in ours):
            print(f"not every {suite}.* test passed on the GPU", file=f)
            rc = 1
    if count["FAILED"] or not rows:
        rc = 1
    return rc


def report(path):
    with open(path) as f:
        r = json.load(f)
    env = r.get("environment", {})
    print(f"report: {os.path.basename(path)}, device {env.get('device')} ({env.get('device_name')}), "
          f"torch {env.get('torch_version')}, mode {env.get('mode')}")
    epochs = r.get("epochs") or []
    if not epochs:
        print("report: no epoch")
        return 0
    e = epochs[-1]
    print(f"epoch {e.get('index')}: {e.get('steps')} steps, step mean {e.get('step_ms_mean', 0):.2f} ms, "
          f"{e.get('samples_per_second', 0):.0f} samples/s")
    phases = e.get("phases") or {}
    dev = {k: v.get("device_ms_total") for k, v in phases.items() if isinstance(v, dict)}
    if any(v is not None for v in dev.values()):
        print("device ms by phase: " + ", ".join(f"{k} {v:.1f}" for k, v in dev.items() if v is not None))
    g = e.get("gpu")
    if g:
        tc = (g.get("tensor_cores") or {}).get("share")
        busy = [d.get("busy_share") for d in ((g.get("timeline") or {}).get("devices") or [])]
        print(f"gpu: {g.get('records')} records ({g.get('dropped_records')} dropped), Tensor Core share "
              f"{'n/a' if tc is None else f'{tc:.1%}'}, busy {', '.join('n/a' if b is None else f'{b:.1%}' for b in busy) or 'n/a'}")
    else:
        print("gpu: null (CUPTI did not collect)")
    for n in (env.get("not_measured") or [])[:6]:
        print(f"not measured: {n.get('what')}: {n.get('why')}")
    for fnd in (e.get("findings") or [])[:4]:
        print(f"finding [{fnd.get('severity')}] {fnd.get('id')}: {fnd.get('title')}")
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "coverage":
        return coverage(argv[2], argv[3], argv[4])
    if len(argv) == 7 and argv[1] == "results":
        return results(*argv[2:])
    if len(argv) == 3 and argv[1] == "report":
        return report(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
